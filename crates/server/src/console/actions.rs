//! The console's actions, `POST /console/api/action` with a JSON body
//! `{"action": NAME, ...arguments}`: each runs the same code as the
//! matching `basalt admin` command (the admin line, or the bucket-type
//! registry) and answers `{"ok": true, "message": TEXT}` with the node's
//! own words, or `{"ok": false, "error": REASON}` (400 for a malformed
//! request, 409 when the node refused it: the claimant's reason, a member
//! that is down, a type that exists). A refused action changes nothing:
//! the admin line validates before it stages or commits.
//!
//! Guarded: the request must carry the session's token in
//! `X-Console-Token` (the page reads it from `/console/api/session`, which
//! another site's script cannot read) and, when the browser sends an
//! `Origin`, one naming this host. Every action, done or refused, is
//! logged (info, target `basalt_server::console`) with the user.
//!
//! | action | arguments | admin equivalent |
//! |---|---|---|
//! | `join` | `addr` (a member's cluster address) | `cluster join ADDR` (this node joins) |
//! | `leave` | `node` (optional; default this node) | `cluster leave [NODE]` |
//! | `plan` | — | `cluster plan` |
//! | `commit`, `clear` | — | `cluster commit`, `cluster clear` |
//! | `type-create` | `name`, `props` (object) | `bucket-type create NAME '{"props":{..}}'` |
//! | `type-activate` | `name` | `bucket-type activate NAME` |
//! | `transfer-limit` | `limit` (number) | `transfer-limit N` |
//! | `aae-round` | — | `aae round` |
//! | `repl-fullsync` | — | `repl fullsync` |

use super::{json, user_of, Console};
use crate::api::http::auth::User;
use crate::node::Node;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, HeaderMap, StatusCode};
use axum::response::Response;
use axum::Extension;
use serde_json::{json, Value};
use std::sync::Arc;

/// The header an action's token travels in.
pub const TOKEN_HEADER: &str = "x-console-token";

/// Why an action was not done.
#[derive(Debug, thiserror::Error)]
enum ActionError {
    /// The request is malformed (400).
    #[error("{0}")]
    Bad(String),
    /// The node refused it (409).
    #[error("{0}")]
    Refused(String),
    /// The token or origin does not match (403).
    #[error("{0}")]
    Forbidden(String),
}

/// Checks the token and the origin.
fn guard(console: &Console, headers: &HeaderMap) -> Result<(), ActionError> {
    let token = headers
        .get(TOKEN_HEADER)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    if token != console.token {
        return Err(ActionError::Forbidden(
            "missing or wrong console token (reload the console page)".into(),
        ));
    }
    if let Some(origin) = headers.get(header::ORIGIN) {
        let host = headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        let origin = origin.to_str().unwrap_or("");
        let origin_host = origin.split_once("://").map_or("", |(_, h)| h);
        if host.is_empty() || origin_host != host {
            return Err(ActionError::Forbidden(format!(
                "cross-origin action refused (Origin {origin:?}, Host {host:?})"
            )));
        }
    }
    Ok(())
}

/// A one-word argument: present, no blanks, at most 255 bytes.
fn word<'a>(body: &'a Value, name: &str) -> Result<&'a str, ActionError> {
    let w = body
        .get(name)
        .and_then(Value::as_str)
        .map(str::trim)
        .unwrap_or("");
    if w.is_empty() {
        return Err(ActionError::Bad(format!("{name} is required")));
    }
    if w.len() > 255 || w.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(ActionError::Bad(format!(
            "{name} must be one word of at most 255 bytes"
        )));
    }
    Ok(w)
}

/// Runs an admin line; the node's refusal is [`ActionError::Refused`].
async fn line(node: &Arc<Node>, words: &[&str]) -> Result<Value, ActionError> {
    let text = node
        .admin_request(words.join(" ").as_bytes())
        .await
        .map_err(|e| ActionError::Refused(refusal(&e)))?;
    Ok(json!({ "message": text.trim_end() }))
}

/// The text of a refused admin line, without the error's kind prefix.
fn refusal(e: &crate::error::RequestError) -> String {
    match e {
        crate::error::RequestError::Invalid(m) => m.trim_end().to_string(),
        other => other.to_string(),
    }
}

async fn run(node: &Arc<Node>, body: &Value) -> Result<Value, ActionError> {
    let action = body.get("action").and_then(Value::as_str).unwrap_or("");
    match action {
        "join" => line(node, &["join", word(body, "addr")?]).await,
        "leave" => match body.get("node").and_then(Value::as_str) {
            Some(n) if !n.trim().is_empty() => line(node, &["leave", word(body, "node")?]).await,
            _ => line(node, &["leave"]).await,
        },
        "plan" => {
            let mut v = line(node, &["plan"]).await?;
            if let (Some(obj), Ok(plan)) = (v.as_object_mut(), node.admin_json(&["plan"]).await) {
                obj.insert("plan".into(), plan);
            }
            Ok(v)
        }
        "commit" => line(node, &["commit"]).await,
        "clear" => line(node, &["clear"]).await,
        "transfer-limit" => {
            let n = body
                .get("limit")
                .and_then(|v| {
                    v.as_u64()
                        .or_else(|| v.as_str().and_then(|s| s.trim().parse().ok()))
                })
                .ok_or_else(|| ActionError::Bad("limit must be a whole number".into()))?;
            line(node, &["transfer-limit", &n.to_string()]).await
        }
        "aae-round" => line(node, &["aae-round"]).await,
        "repl-fullsync" => line(node, &["repl-fullsync"]).await,
        "type-create" => {
            let name = word(body, "name")?;
            let props = body.get("props").cloned().unwrap_or_else(|| json!({}));
            if !props.is_object() {
                return Err(ActionError::Bad("props must be a JSON object".into()));
            }
            let pb = crate::bucket::types::props_from_json(&json!({ "props": props }).to_string())
                .map_err(ActionError::Bad)?;
            node.types()
                .create(name.as_bytes(), &pb)
                .map_err(|e| ActionError::Refused(refusal(&e)))?;
            node.gossip.gossip_now.notify_one();
            Ok(json!({ "message": format!("{name} created") }))
        }
        "type-activate" => {
            let name = word(body, "name")?;
            node.types()
                .activate(name.as_bytes())
                .map_err(|e| ActionError::Refused(refusal(&e)))?;
            node.gossip.gossip_now.notify_one();
            Ok(json!({ "message": format!("{name} has been activated") }))
        }
        "" => Err(ActionError::Bad("action is required".into())),
        other => Err(ActionError::Bad(format!(
            "unknown action {other:?}: join | leave | plan | commit | clear | transfer-limit | aae-round | repl-fullsync | type-create | type-activate"
        ))),
    }
}

/// `POST /console/api/action`.
pub async fn action(
    State(console): State<Arc<Console>>,
    user: Option<Extension<User>>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let node = &console.node;
    let user = user_of(user.as_ref());
    let result = async {
        guard(&console, &headers)?;
        if body.len() > crate::limits::CONSOLE_MAX_ACTION_BYTES {
            return Err(ActionError::Bad(format!(
                "an action's body is at most {} bytes",
                crate::limits::CONSOLE_MAX_ACTION_BYTES
            )));
        }
        let v: Value = serde_json::from_slice(&body)
            .map_err(|e| ActionError::Bad(format!("the body must be a JSON object: {e}")))?;
        let name = v
            .get("action")
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string();
        run(node, &v).await.map(|r| (name, r))
    }
    .await;
    let what = serde_json::from_slice::<Value>(&body)
        .ok()
        .map(|v| v.to_string())
        .unwrap_or_default();
    match result {
        Ok((name, mut r)) => {
            tracing::info!(user = %user, action = %name, request = %what, "console action done");
            if let Some(obj) = r.as_object_mut() {
                obj.insert("ok".into(), true.into());
                obj.insert("action".into(), name.into());
            }
            json(StatusCode::OK, &r)
        }
        Err(e) => {
            let status = match e {
                ActionError::Bad(_) => StatusCode::BAD_REQUEST,
                ActionError::Refused(_) => StatusCode::CONFLICT,
                ActionError::Forbidden(_) => StatusCode::FORBIDDEN,
            };
            tracing::info!(user = %user, request = %what, error = %e, "console action refused");
            json(status, &json!({"ok": false, "error": e.to_string()}))
        }
    }
}
