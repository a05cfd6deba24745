//! `basalt admin bucket-type create|activate|list|status|update`: the
//! bucket types of a running node over its cluster port, like `riak admin
//! bucket-type`. create, activate, list and status use Basalt's private
//! admin codes (240–246); update is Riak's `RpbSetBucketTypeReq` (32).
//! With `--json`, list and status print the types as one JSON document
//! (the props as the `key: value` lines of the text, values typed) and
//! the other commands `{"message": TEXT}`.

use crate::admin_client::{call, AdminNode};
use anyhow::Context;
use basalt_server::api::pb::btypes::{BasaltBucketTypeListResp, BasaltBucketTypeReq};
use basalt_server::bucket::types as btypes;
use prost::Message;
use riak_pb::code::{self, basalt as bt};

#[derive(Debug, clap::Subcommand)]
pub enum BucketTypeCommand {
    /// Create a type: `create NAME '{"props":{"n_val":3,"allow_mult":true}}'`.
    Create {
        /// Type name.
        name: String,
        /// `{"props":{...}}` (default `{"props":{}}`).
        json: Option<String>,
    },
    /// Activate a created type.
    Activate {
        /// Type name.
        name: String,
    },
    /// List the types and whether they are active.
    List,
    /// Status and props of one type.
    Status {
        /// Type name.
        name: String,
    },
    /// Update the props of a type: `update NAME '{"props":{...}}'`.
    Update {
        /// Type name.
        name: String,
        /// `{"props":{...}}`.
        json: String,
    },
}

fn props(json: Option<&str>) -> anyhow::Result<riak_pb::RpbBucketProps> {
    btypes::props_from_json(json.unwrap_or(r#"{"props":{}}"#))
        .map_err(|e| anyhow::anyhow!("bad bucket type props: {e}"))
}

/// The props lines (`name: value`) as a JSON object: numbers and booleans
/// typed, anything else (`quorum`, `undefined`) a string.
pub(crate) fn props_json(lines: &[String]) -> serde_json::Value {
    let mut map = serde_json::Map::new();
    for line in lines {
        if let Some((k, v)) = line.split_once(": ") {
            let value = match v {
                "true" => true.into(),
                "false" => false.into(),
                _ => v
                    .parse::<u64>()
                    .map_or_else(|_| v.into(), serde_json::Value::from),
            };
            map.insert(k.to_string(), value);
        }
    }
    serde_json::Value::Object(map)
}

/// Runs one `basalt admin bucket-type` command; exit 1 when the node
/// refuses it.
pub(crate) fn run(
    node: &AdminNode,
    cmd: BucketTypeCommand,
    as_json: bool,
) -> anyhow::Result<crate::Outcome> {
    let req = |name: &str, props: Option<riak_pb::RpbBucketProps>| {
        BasaltBucketTypeReq {
            r#type: name.as_bytes().to_vec(),
            props,
        }
        .encode_to_vec()
    };
    let (reply, ok_text) = match &cmd {
        BucketTypeCommand::Create { name, json } => {
            let p = props(json.as_deref())?;
            (
                call(node, bt::ADMIN_TYPE_CREATE_REQ, &req(name, Some(p)))?,
                format!("{name} has been created and may be activated"),
            )
        }
        BucketTypeCommand::Activate { name } => (
            call(node, bt::ADMIN_TYPE_ACTIVATE_REQ, &req(name, None))?,
            format!("{name} has been activated"),
        ),
        BucketTypeCommand::Update { name, json } => {
            let p = props(Some(json))?;
            let body = riak_pb::RpbSetBucketTypeReq {
                r#type: name.as_bytes().to_vec(),
                props: p,
            }
            .encode_to_vec();
            (
                call(node, code::SET_BUCKET_TYPE_REQ, &body)?,
                format!("{name} updated"),
            )
        }
        BucketTypeCommand::List => (call(node, bt::ADMIN_TYPE_LIST_REQ, &[])?, String::new()),
        BucketTypeCommand::Status { name } => (
            call(node, bt::ADMIN_TYPE_STATUS_REQ, &req(name, None))?,
            String::new(),
        ),
    };
    let body = match reply {
        Ok((_, body)) => body,
        Err(msg) => {
            eprintln!("{msg}");
            return Ok(crate::Outcome::Code(1));
        }
    };
    match cmd {
        BucketTypeCommand::List | BucketTypeCommand::Status { .. } => {
            let list = BasaltBucketTypeListResp::decode(body.as_slice())
                .context("decoding the bucket type list")?;
            let status = matches!(cmd, BucketTypeCommand::Status { .. });
            if as_json {
                let types: Vec<serde_json::Value> = list
                    .types
                    .iter()
                    .map(|t| {
                        let mut v = serde_json::json!({
                            "name": String::from_utf8_lossy(&t.r#type),
                            "active": t.active,
                        });
                        if status {
                            v["props"] = props_json(&btypes::props_lines(&t.props));
                        }
                        v
                    })
                    .collect();
                println!("{}", serde_json::json!({ "types": types }));
                return Ok(crate::Outcome::Done);
            }
            for t in list.types {
                let name = String::from_utf8_lossy(&t.r#type);
                if status {
                    if t.active {
                        println!("{name} is active\n");
                    } else {
                        println!("{name} has been created and may be activated\n");
                    }
                    for line in btypes::props_lines(&t.props) {
                        println!("{line}");
                    }
                } else {
                    let state = if t.active { "active" } else { "not active" };
                    println!("{name} ({state})");
                }
            }
        }
        _ if as_json => println!("{}", serde_json::json!({ "message": ok_text })),
        _ => println!("{ok_text}"),
    }
    Ok(crate::Outcome::Done)
}

/// The bucket type list as `bucket-type list` prints it, for `diag`: the
/// text, or why there is none.
pub(crate) fn list_text(node: &AdminNode) -> Result<Vec<u8>, String> {
    let body = match call(node, bt::ADMIN_TYPE_LIST_REQ, &[]) {
        Ok(Ok((_, body))) => body,
        Ok(Err(refused)) => return Err(format!("the node refused it: {refused}")),
        Err(e) => return Err(format!("{e:#}")),
    };
    let list = BasaltBucketTypeListResp::decode(body.as_slice())
        .map_err(|e| format!("decoding the bucket type list: {e}"))?;
    let mut out = String::new();
    for t in list.types {
        let state = if t.active { "active" } else { "not active" };
        out.push_str(&format!(
            "{} ({state})\n",
            String::from_utf8_lossy(&t.r#type)
        ));
    }
    Ok(out.into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn props_lines_become_typed_json() {
        let lines: Vec<String> = ["allow_mult: true", "n_val: 3", "w: quorum", "pr: undefined"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            props_json(&lines),
            serde_json::json!({"allow_mult": true, "n_val": 3, "w": "quorum", "pr": "undefined"})
        );
    }
}
