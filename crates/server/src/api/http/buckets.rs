//! Buckets over HTTP: props (`riak_kv_wm_props`), bucket-type props
//! (`riak_kv_wm_bucket_type`), bucket listing (`riak_kv_wm_buckets`) and
//! key listing (`riak_kv_wm_keylist`), plain and streamed.

use super::{
    bad, chunked, error_response, js, json, query, read_body, text, timeout_param, Shared,
    MAX_PROPS_BODY_BYTES,
};
use crate::bucket::props::{BucketProps, CommitHook, CHASH_KEYFUN, LINKFUN};
use crate::bucket::types::{props_from_json, split_storage_bucket};
use crate::kv::Kv;
use crate::pb::quorum;
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::{header, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::sync::Arc;

pub use crate::limits::BUCKETS_PER_CHUNK;

fn quorum_json(v: u32) -> Value {
    match v {
        quorum::ONE => "one".into(),
        quorum::QUORUM => "quorum".into(),
        quorum::ALL => "all".into(),
        quorum::DEFAULT => "default".into(),
        n => n.into(),
    }
}

/// Props as Riak's JSON object (quorum values as words where symbolic).
pub fn props_json(p: &BucketProps) -> serde_json::Map<String, Value> {
    let v = json!({
        "n_val": p.n_val,
        "allow_mult": p.allow_mult,
        "last_write_wins": p.last_write_wins,
        "r": quorum_json(p.r),
        "w": quorum_json(p.w),
        "pr": quorum_json(p.pr),
        "pw": quorum_json(p.pw),
        "dw": quorum_json(p.dw),
        "rw": quorum_json(p.rw),
        "notfound_ok": p.notfound_ok,
        "basic_quorum": p.basic_quorum,
        "small_vclock": p.small_vclock,
        "big_vclock": p.big_vclock,
        "young_vclock": p.young_vclock,
        "old_vclock": p.old_vclock,
        "chash_keyfun": { "mod": CHASH_KEYFUN.0, "fun": CHASH_KEYFUN.1 },
        "linkfun": { "mod": LINKFUN.0, "fun": LINKFUN.1 },
        "precommit": p.precommit.iter().map(CommitHook::to_riak_json).collect::<Vec<_>>(),
        "has_precommit": !p.precommit.is_empty(),
        "postcommit": p.postcommit.iter().map(CommitHook::to_riak_json).collect::<Vec<_>>(),
        "has_postcommit": !p.postcommit.is_empty(),
        "hll_precision": p.hll_precision,
    });
    let mut m = match v {
        Value::Object(m) => m,
        _ => serde_json::Map::new(),
    };
    if let Some(d) = &p.datatype {
        m.insert("datatype".into(), d.clone().into());
    }
    m
}

/// Reads a `{"props":{...}}` body (JSON only) into PB props. What a GET
/// returns may be sent back unchanged: `name` / `bucket_type` are ignored,
/// and so is `"active": true`; as Riak (`riak_core_bucket_props`
/// validating an update), another `active` is refused ("Cannot modify
/// active property") and so is any `claimant` ("Cannot update claimant
/// property"), which Riak's GET of a type returns and Basalt's does not.
async fn read_props(req: Request) -> Result<crate::pb::RpbBucketProps, Response> {
    let is_json = req
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim_start().starts_with("application/json"));
    if !is_json {
        return Err(text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Bucket props must be sent as Content-Type: application/json",
        ));
    }
    let (_, body) = read_body(req, MAX_PROPS_BODY_BYTES).await?;
    let mut v: Value = serde_json::from_slice(&body)
        .map_err(|e| bad(format!("Invalid JSON in request body: {e}")))?;
    if let Some(p) = v.get_mut("props").and_then(Value::as_object_mut) {
        p.remove("name");
        p.remove("bucket_type");
        match p.remove("active") {
            None | Some(Value::Bool(true)) => {}
            Some(_) => return Err(bad("active: Cannot modify active property")),
        }
        if p.contains_key("claimant") {
            return Err(bad("claimant: Cannot update claimant property"));
        }
    }
    props_from_json(&v.to_string()).map_err(bad)
}

/// `GET|PUT|DELETE /buckets/B/props`.
pub async fn props_default(State(kv): Shared, Path(b): Path<String>, req: Request) -> Response {
    bucket_props(kv, None, b, req).await
}

/// `GET|PUT|DELETE /types/T/buckets/B/props`.
pub async fn props_typed(
    State(kv): Shared,
    Path((t, b)): Path<(String, String)>,
    req: Request,
) -> Response {
    bucket_props(kv, Some(t), b, req).await
}

async fn bucket_props(kv: Arc<Kv>, t: Option<String>, b: String, req: Request) -> Response {
    let sb = match kv
        .types()
        .storage_bucket(t.as_deref().map(str::as_bytes), b.as_bytes())
    {
        Ok(sb) => sb,
        Err(e) => return error_response(e),
    };
    match *req.method() {
        Method::GET | Method::HEAD => {
            let mut m = props_json(&kv.props().get(&sb));
            m.insert("name".into(), b.into());
            if let Some(t) = t {
                m.insert("bucket_type".into(), t.into());
            }
            json(StatusCode::OK, &json!({ "props": m }))
        }
        Method::PUT | Method::POST => {
            let p = match read_props(req).await {
                Ok(p) => p,
                Err(r) => return r,
            };
            match kv.props().set(&sb, &p) {
                Ok(()) => StatusCode::NO_CONTENT.into_response(),
                Err(e) => error_response(e.into()),
            }
        }
        Method::DELETE => match kv.props().reset(&sb) {
            Ok(()) => StatusCode::NO_CONTENT.into_response(),
            Err(e) => error_response(e.into()),
        },
        _ => text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
    }
}

/// `GET|PUT /types/T/props`: a bucket type's props; PUT updates an
/// existing type (as PB's set-bucket-type, code 32).
pub async fn type_props(State(kv): Shared, Path(t): Path<String>, req: Request) -> Response {
    let Some(bt) = kv.types().get(&t) else {
        return text(StatusCode::NOT_FOUND, format!("No bucket-type named '{t}'"));
    };
    match *req.method() {
        Method::GET | Method::HEAD => {
            let mut m = props_json(&bt.props);
            m.insert("name".into(), t.clone().into());
            m.insert(
                "active".into(),
                (bt.status == crate::bucket::types::TypeStatus::Active).into(),
            );
            json(StatusCode::OK, &json!({ "props": m }))
        }
        Method::PUT => {
            let p = match read_props(req).await {
                Ok(p) => p,
                Err(r) => return r,
            };
            match kv.types().update(t.as_bytes(), &p) {
                Ok(()) => StatusCode::NO_CONTENT.into_response(),
                Err(e) => error_response(e),
            }
        }
        _ => text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
    }
}

/// `true`, `stream` or absent (`None`) for a listing parameter.
fn listing_mode(req: &Request, name: &str) -> Result<Option<bool>, Response> {
    match query(req).iter().rev().find(|(k, _)| k == name) {
        None => Ok(None),
        Some((_, v)) => match v.as_str() {
            "true" => Ok(Some(false)),
            "stream" => Ok(Some(true)),
            "false" => Ok(None),
            other => Err(bad(format!(
                "{name} query parameter must be true, stream or false; got \"{other}\""
            ))),
        },
    }
}

/// `GET /buckets?buckets=true|stream`.
pub async fn list_buckets_default(State(kv): Shared, req: Request) -> Response {
    list_buckets(kv, None, req).await
}

/// `GET /types/T/buckets?buckets=true|stream`.
pub async fn list_buckets_typed(
    State(kv): Shared,
    Path(t): Path<String>,
    req: Request,
) -> Response {
    list_buckets(kv, Some(t), req).await
}

async fn list_buckets(kv: Arc<Kv>, t: Option<String>, req: Request) -> Response {
    let stream = match listing_mode(&req, "buckets") {
        Ok(Some(s)) => s,
        Ok(None) => return bad("Listing buckets needs ?buckets=true or ?buckets=stream"),
        Err(r) => return r,
    };
    let btype = match kv.types().resolve(t.as_deref().map(str::as_bytes)) {
        Ok(bt) => bt,
        Err(e) => return error_response(e),
    };
    let timeout = match timeout_param(&req) {
        Ok(t) => t,
        Err(r) => return r,
    };
    let buckets: Vec<Value> = match crate::kv::within(timeout, kv.list_buckets()).await {
        Ok(all) => all
            .iter()
            .filter_map(|sb| match split_storage_bucket(sb) {
                (t, b) if t == btype.as_deref() => Some(js(b)),
                _ => None,
            })
            .collect(),
        Err(e) => return error_response(e),
    };
    if !stream {
        return json(StatusCode::OK, &json!({ "buckets": buckets }));
    }
    let (tx, resp) = chunked("application/json");
    for chunk in buckets.chunks(BUCKETS_PER_CHUNK) {
        let _ = tx.send(Bytes::from(json!({ "buckets": chunk }).to_string()));
    }
    resp
}

/// `GET /buckets/B/keys?keys=true|stream`.
pub async fn list_keys_default(State(kv): Shared, Path(b): Path<String>, req: Request) -> Response {
    list_keys(kv, None, b, req).await
}

/// `GET /types/T/buckets/B/keys?keys=true|stream`.
pub async fn list_keys_typed(
    State(kv): Shared,
    Path((t, b)): Path<(String, String)>,
    req: Request,
) -> Response {
    list_keys(kv, Some(t), b, req).await
}

async fn list_keys(kv: Arc<Kv>, t: Option<String>, b: String, req: Request) -> Response {
    let mode = match listing_mode(&req, "keys") {
        Ok(m) => m,
        Err(r) => return r,
    };
    let sb = match kv
        .types()
        .storage_bucket(t.as_deref().map(str::as_bytes), b.as_bytes())
    {
        Ok(sb) => sb,
        Err(e) => return error_response(e),
    };
    let timeout = match timeout_param(&req) {
        Ok(t) => t,
        Err(r) => return r,
    };
    match mode {
        // As Riak (API v2): no listing asked for, no keys.
        None => json(StatusCode::OK, &json!({})),
        Some(false) => {
            let mut keys = Vec::new();
            let listing = kv.list_keys(&sb, |batch| {
                keys.extend(batch.iter().map(|k| js(k)));
                std::future::ready(true)
            });
            match crate::kv::within(timeout, listing).await {
                Ok(()) => json(StatusCode::OK, &json!({ "keys": keys })),
                Err(e) => error_response(e),
            }
        }
        Some(true) => {
            // One `{"keys":[...]}` chunk per vnode batch as it arrives, then
            // `{"keys":[]}`; a failure mid-stream is an `{"error":...}` chunk.
            let (tx, resp) = chunked("application/json");
            tokio::spawn(async move {
                let listing = kv.list_keys(&sb, |batch| {
                    let keys: Vec<Value> = batch.iter().map(|k| js(k)).collect();
                    let sent = tx
                        .send(Bytes::from(json!({ "keys": keys }).to_string()))
                        .is_ok();
                    std::future::ready(sent)
                });
                let res = crate::kv::within(timeout, listing).await;
                let last = match res {
                    Ok(()) => json!({ "keys": [] }),
                    Err(e) => json!({ "error": e.to_string() }),
                };
                let _ = tx.send(Bytes::from(last.to_string()));
            });
            resp
        }
    }
}
