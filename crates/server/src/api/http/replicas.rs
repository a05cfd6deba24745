//! `GET /basalt/replicas/[types/T/]buckets/B/keys/K`: what each replica of
//! a key holds, for operators and fault tests (a GET merges the replicas,
//! so it cannot show that they differ).
//!
//! Asks the key's `n_val` vnodes (fallbacks for down primaries, as a GET)
//! for the object's head, and answers JSON:
//! `{"bucket", "key", "replicas": [{"node", "partition", "primary",
//! "found", "state_hash", "vclock": [[actor, counter]...] (an actor as its
//! text, or in hex when it is not printable: the 8-byte actors),
//! "siblings": [{"vtag", "deleted", "dot": [actor, counter] | null}]}
//! | {"node", "partition", "primary", "error"}], "converged": bool}`;
//! `converged` is true when every replica answered with the same state
//! (clock and siblings, [`RiakObject::state_hash`]) or none holds the key.
//! Work: one head per replica; values are not read.

use super::{error_response, json, Shared};
use crate::object::RiakObject;
use crate::vnode::request::{VnodeReply, VnodeReq};
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::{json, Value};

/// The default bucket type.
pub async fn replicas_default(State(kv): Shared, Path((b, k)): Path<(String, String)>) -> Response {
    replicas(kv, None, b, k).await
}

/// A typed bucket.
pub async fn replicas_typed(
    State(kv): Shared,
    Path((t, b, k)): Path<(String, String, String)>,
) -> Response {
    replicas(kv, Some(t), b, k).await
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// An actor as text: the named form of older incarnations as it is, the
/// 8-byte form (`ring::ActorForm::Short`) and any other bytes in hex.
fn actor_text(a: &[u8]) -> String {
    match std::str::from_utf8(a) {
        Ok(s) if !s.is_empty() && s.chars().all(|c| c.is_ascii_graphic()) => s.to_string(),
        _ => a.iter().map(|b| format!("{b:02x}")).collect(),
    }
}

fn describe(o: &RiakObject) -> Value {
    let clock: Vec<Value> = o
        .vclock
        .entries()
        .iter()
        .map(|e| json!([actor_text(&e.actor), e.counter]))
        .collect();
    let siblings: Vec<Value> = o
        .contents
        .iter()
        .map(|c| {
            json!({
                "vtag": c.vtag.as_deref().map(lossy),
                "deleted": c.deleted,
                "dot": c.dot.as_ref().map(|d| json!([actor_text(&d.actor), d.counter])),
            })
        })
        .collect();
    json!({
        "found": true,
        "state_hash": format!("{:016x}", o.state_hash()),
        "vclock": clock,
        "siblings": siblings,
    })
}

async fn replicas(
    kv: std::sync::Arc<crate::kv::Kv>,
    t: Option<String>,
    b: String,
    k: String,
) -> Response {
    let sb = match kv
        .types()
        .storage_bucket(t.as_deref().map(str::as_bytes), b.as_bytes())
    {
        Ok(sb) => sb,
        Err(e) => return error_response(e),
    };
    let mut out = Vec::new();
    let mut states = Vec::new();
    for target in kv.preflist_of(&sb, k.as_bytes()) {
        let req = VnodeReq::Head {
            bucket: sb.clone(),
            key: k.as_bytes().to_vec(),
        };
        let mut entry = match kv.router.vcall(&target, req).await {
            Ok(VnodeReply::Object(Some(w), _)) => match w.head() {
                Ok(o) => {
                    states.push(Some(o.state_hash()));
                    describe(&o)
                }
                Err(e) => json!({ "error": e.to_string() }),
            },
            Ok(VnodeReply::Object(None, _)) => {
                states.push(None);
                json!({ "found": false })
            }
            Ok(other) => json!({ "error": format!("unexpected reply {other:?}") }),
            Err(e) => json!({ "error": e.to_string() }),
        };
        if let Value::Object(m) = &mut entry {
            m.insert("node".into(), json!(target.node));
            m.insert("partition".into(), json!(target.partition));
            m.insert("primary".into(), json!(target.primary));
        }
        out.push(entry);
    }
    let answered = states.len() == out.len();
    let converged = answered && states.windows(2).all(|w| w[0] == w[1]);
    json(
        StatusCode::OK,
        &json!({ "bucket": b, "key": k, "replicas": out, "converged": converged }),
    )
}

#[cfg(test)]
mod tests {
    use super::actor_text;

    #[test]
    fn actors_show_as_text_or_hex() {
        assert_eq!(
            actor_text(b"n@h/7/00000000000000ab"),
            "n@h/7/00000000000000ab"
        );
        assert_eq!(
            actor_text(&[0, 1, 0xab, 0xff, 32, 65, 66, 67]),
            "0001abff20414243"
        );
        assert_eq!(actor_text(b"ABCDEFGH"), "ABCDEFGH");
    }
}
