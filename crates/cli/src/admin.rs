//! `basalt admin --node ADDR bucket-type ...`: manages the bucket types of a
//! running node over its PB port, like `riak admin bucket-type`. create,
//! activate, list and status use Basalt's private admin codes (240–246, see
//! `basalt_server::btypes`); update is Riak's `RpbSetBucketTypeReq` (32).

use anyhow::{bail, Context};
use basalt_server::btypes::{self, code as bt, BasaltBucketTypeListResp, BasaltBucketTypeReq};
use basalt_server::pb::{self, code};
use prost::Message;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// Arguments of `basalt admin`.
#[derive(Debug, clap::Args)]
pub struct AdminArgs {
    /// PB address of the node.
    #[arg(long, default_value = "127.0.0.1:8087")]
    node: String,
    #[command(subcommand)]
    command: AdminCommand,
}

#[derive(Debug, clap::Subcommand)]
enum AdminCommand {
    /// Bucket types: create, activate, list, status, update.
    #[command(subcommand)]
    BucketType(BucketTypeCommand),
}

#[derive(Debug, clap::Subcommand)]
enum BucketTypeCommand {
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

/// One blocking PB round trip: `Ok(Err(msg))` when the node answered with
/// an `RpbErrorResp`.
fn call(node: &str, c: u8, body: &[u8]) -> anyhow::Result<Result<(u8, Vec<u8>), String>> {
    let mut s = TcpStream::connect(node).with_context(|| format!("connecting to node {node}"))?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    s.write_all(&pb::frame(c, body))?;
    let mut len = [0u8; 4];
    s.read_exact(&mut len).context("reading the reply")?;
    let mut buf = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut buf).context("reading the reply")?;
    if buf.is_empty() {
        bail!("empty reply frame");
    }
    let rc = buf.remove(0);
    if rc == code::ERROR_RESP {
        let e = pb::RpbErrorResp::decode(buf.as_slice()).context("decoding the error reply")?;
        return Ok(Err(String::from_utf8_lossy(&e.errmsg).into_owned()));
    }
    Ok(Ok((rc, buf)))
}

fn props(json: Option<&str>) -> anyhow::Result<pb::RpbBucketProps> {
    btypes::props_from_json(json.unwrap_or(r#"{"props":{}}"#))
        .map_err(|e| anyhow::anyhow!("bad bucket type props: {e}"))
}

/// Runs `basalt admin`; exit 1 when the node refuses the request.
pub fn run(args: AdminArgs) -> anyhow::Result<crate::Outcome> {
    let AdminCommand::BucketType(cmd) = args.command;
    let node = args.node.as_str();
    let req = |name: &str, props: Option<pb::RpbBucketProps>| {
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
            let body = btypes::RpbSetBucketTypeReq {
                r#type: name.as_bytes().to_vec(),
                props: p,
            }
            .encode_to_vec();
            (
                call(node, bt::SET_BUCKET_TYPE_REQ, &body)?,
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
        _ => println!("{ok_text}"),
    }
    Ok(crate::Outcome::Done)
}
