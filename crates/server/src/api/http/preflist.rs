//! A key's preference list over HTTP (`riak_kv_wm_preflist`):
//! `GET /types/T/buckets/B/keys/K/preflist` and
//! `GET /buckets/B/keys/K/preflist` answer
//! `{"preflist":[{"partition":P,"node":"N","primary":true},...]}`, the
//! vnodes a request for the key would use now (primaries, then fallbacks).

use super::{error_response, json, Shared};
use crate::kv::Kv;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::Response;
use serde_json::json;
use std::sync::Arc;

/// `GET /buckets/B/keys/K/preflist`.
pub async fn preflist_default(State(kv): Shared, Path((b, k)): Path<(String, String)>) -> Response {
    preflist(&kv, None, &b, &k)
}

/// `GET /types/T/buckets/B/keys/K/preflist`.
pub async fn preflist_typed(
    State(kv): Shared,
    Path((t, b, k)): Path<(String, String, String)>,
) -> Response {
    preflist(&kv, Some(&t), &b, &k)
}

fn preflist(kv: &Arc<Kv>, t: Option<&str>, b: &str, k: &str) -> Response {
    let sb = match kv
        .types()
        .storage_bucket(t.map(str::as_bytes), b.as_bytes())
    {
        Ok(sb) => sb,
        Err(e) => return error_response(e),
    };
    let items: Vec<serde_json::Value> = kv
        .preflist_of(&sb, k.as_bytes())
        .into_iter()
        .map(|t| json!({ "partition": t.partition, "node": t.node, "primary": t.primary }))
        .collect();
    json(StatusCode::OK, &json!({ "preflist": items }))
}
