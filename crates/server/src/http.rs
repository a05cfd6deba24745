//! Riak's HTTP API (first slice), served with axum over the same [`Node`]
//! as the PB listener: `GET /ping`, `GET /` (resource map), `GET /stats`,
//! and objects at `/types/T/buckets/B/keys[/K]` and `/buckets/B/keys[/K]`
//! (GET, HEAD, PUT, POST, DELETE). Errors are plain text with Riak's status
//! codes (400 bad input, 404, 412, 413, 503 overload / quorum, 500).

// Handlers return ready-made error `Response`s on the (rare) failure path.
#![allow(clippy::result_large_err)]

use crate::coordinator::{unique_id, GetOpts, GetOutcome, Node, PutOpts, RequestError};
use crate::object::{Content, RiakObject};
use crate::pb::quorum;
use crate::vclock::VClock;
use axum::body::{to_bytes, Body};
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get, post};
use axum::Router;
use base64::Engine;
use std::future::Future;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, UNIX_EPOCH};
use tokio::net::TcpListener;

type Shared = State<Arc<Node>>;

/// The resource map of `GET /`: resource module → path.
pub const RESOURCES: &[(&str, &str)] = &[
    ("riak_kv_wm_buckets", "/buckets"),
    ("riak_kv_wm_bucket_type", "/types"),
    ("riak_kv_wm_object", "/buckets"),
    ("riak_kv_wm_ping", "/ping"),
    ("riak_kv_wm_stats", "/stats"),
];

/// The router of the HTTP API over `node`.
pub fn router(node: Arc<Node>) -> Router {
    Router::new()
        .route("/", get(root))
        .route("/ping", get(|| async { text(StatusCode::OK, "OK") }))
        .route("/stats", get(stats))
        .route("/buckets/{b}/keys", post(post_default))
        .route("/types/{t}/buckets/{b}/keys", post(post_typed))
        .route("/buckets/{b}/keys/{k}", any(object_default))
        .route("/types/{t}/buckets/{b}/keys/{k}", any(object_typed))
        .with_state(node)
}

/// Serves the HTTP API on `listener` until `shutdown` resolves.
pub async fn serve(
    listener: TcpListener,
    node: Arc<Node>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    tracing::info!(addr = ?listener.local_addr().ok(), "HTTP listener up");
    axum::serve(listener, router(node))
        .with_graceful_shutdown(shutdown)
        .await
}

fn text(status: StatusCode, body: impl Into<String>) -> Response {
    let mut body = body.into();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    (status, [(header::CONTENT_TYPE, "text/plain")], body).into_response()
}

fn bad(reason: impl Into<String>) -> Response {
    text(StatusCode::BAD_REQUEST, reason)
}

fn error_response(e: RequestError) -> Response {
    let status = match &e {
        RequestError::Invalid(m) if m.starts_with("Object too large") => {
            StatusCode::PAYLOAD_TOO_LARGE
        }
        RequestError::Invalid(_) => StatusCode::BAD_REQUEST,
        RequestError::Overload | RequestError::Timeout | RequestError::Unsatisfied { .. } => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        RequestError::MatchFound | RequestError::Modified => StatusCode::PRECONDITION_FAILED,
        RequestError::NotFound => StatusCode::NOT_FOUND,
        RequestError::Storage(_) => StatusCode::INTERNAL_SERVER_ERROR,
    };
    text(status, e.to_string())
}

fn wants_json(h: &HeaderMap) -> bool {
    h.get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/json"))
}

async fn root(headers: HeaderMap) -> Response {
    let link = RESOURCES
        .iter()
        .map(|(m, p)| format!("<{p}>; rel=\"{m}\""))
        .collect::<Vec<_>>()
        .join(", ");
    let mut resp = if wants_json(&headers) {
        let map: serde_json::Map<String, serde_json::Value> = RESOURCES
            .iter()
            .map(|(m, p)| ((*m).to_string(), serde_json::Value::from(*p)))
            .collect();
        (
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::Value::Object(map).to_string(),
        )
            .into_response()
    } else {
        let items: String = RESOURCES
            .iter()
            .map(|(m, p)| format!("<li><a href=\"{p}\">{m}</a></li>"))
            .collect();
        (
            [(header::CONTENT_TYPE, "text/html")],
            format!("<html><body><ul>{items}</ul></body></html>"),
        )
            .into_response()
    };
    if let Ok(v) = HeaderValue::from_str(&link) {
        resp.headers_mut().insert(header::LINK, v);
    }
    resp
}

async fn stats(State(node): Shared) -> Response {
    let s = node.stats();
    let queues = node.vnode_queue_lengths();
    let c = node.config();
    let body = serde_json::json!({
        "nodename": c.node_name,
        "riak_kv_version": crate::SERVER_VERSION,
        "storage_backend": c.backend,
        "ring_creation_size": c.ring_size,
        "node_gets_total": s.gets.load(Ordering::Relaxed),
        "node_puts_total": s.puts.load(Ordering::Relaxed),
        "node_deletes_total": s.deletes.load(Ordering::Relaxed),
        "vnode_queue_total": queues.iter().sum::<usize>(),
        "vnode_queue_max": queues.iter().copied().max().unwrap_or(0),
        "vnode_queue_lengths": queues,
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

/// Query parameters, percent-decoded.
fn query(req: &Request) -> Vec<(String, String)> {
    req.uri()
        .query()
        .unwrap_or("")
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (pct(k), pct(v))
        })
        .collect()
}

fn pct(s: &str) -> String {
    let hex = |c: u8| (c as char).to_digit(16);
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match (
            b[i],
            b.get(i + 1).and_then(|&c| hex(c)),
            b.get(i + 2).and_then(|&c| hex(c)),
        ) {
            (b'+', _, _) => out.push(b' '),
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 2;
            }
            (c, _, _) => out.push(c),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A quorum parameter: an integer or `one|quorum|all|default`.
pub fn parse_quorum(name: &str, v: &str) -> Result<u32, String> {
    match v {
        "one" => Ok(quorum::ONE),
        "quorum" => Ok(quorum::QUORUM),
        "all" => Ok(quorum::ALL),
        "default" => Ok(quorum::DEFAULT),
        n => n.parse::<u32>().map_err(|_| {
            format!("{name} query parameter must be an integer or one of one, quorum, all, default; got \"{v}\"")
        }),
    }
}

#[derive(Default)]
struct Params {
    r: Option<u32>,
    pr: Option<u32>,
    w: Option<u32>,
    dw: Option<u32>,
    pw: Option<u32>,
    rw: Option<u32>,
    returnbody: bool,
    vtag: Option<String>,
}

fn params(q: &[(String, String)]) -> Result<Params, String> {
    let mut p = Params::default();
    for (k, v) in q {
        let slot = match k.as_str() {
            "r" => &mut p.r,
            "pr" => &mut p.pr,
            "w" => &mut p.w,
            "dw" => &mut p.dw,
            "pw" => &mut p.pw,
            "rw" => &mut p.rw,
            "returnbody" => {
                p.returnbody = match v.as_str() {
                    "true" => true,
                    "false" => false,
                    _ => return Err(format!("returnbody must be true or false, got \"{v}\"")),
                };
                continue;
            }
            "vtag" => {
                p.vtag = Some(v.clone());
                continue;
            }
            _ => continue,
        };
        *slot = Some(parse_quorum(k, v)?);
    }
    Ok(p)
}

async fn post_default(State(node): Shared, Path(b): Path<String>, req: Request) -> Response {
    object(node, None, b, None, req).await
}

async fn post_typed(
    State(node): Shared,
    Path((t, b)): Path<(String, String)>,
    req: Request,
) -> Response {
    object(node, Some(t), b, None, req).await
}

async fn object_default(
    State(node): Shared,
    Path((b, k)): Path<(String, String)>,
    req: Request,
) -> Response {
    object(node, None, b, Some(k), req).await
}

async fn object_typed(
    State(node): Shared,
    Path((t, b, k)): Path<(String, String, String)>,
    req: Request,
) -> Response {
    object(node, Some(t), b, Some(k), req).await
}

fn key_path(t: Option<&str>, b: &str, k: &str) -> String {
    match t {
        Some(t) => format!("/types/{t}/buckets/{b}/keys/{k}"),
        None => format!("/buckets/{b}/keys/{k}"),
    }
}

async fn object(
    node: Arc<Node>,
    t: Option<String>,
    b: String,
    k: Option<String>,
    req: Request,
) -> Response {
    let p = match params(&query(&req)) {
        Ok(p) => p,
        Err(e) => return bad(e),
    };
    let sb = match node
        .types()
        .storage_bucket(t.as_deref().map(str::as_bytes), b.as_bytes())
    {
        Ok(sb) => sb,
        Err(e) => return error_response(e),
    };
    if k.as_deref() == Some("") {
        return bad("Key cannot be zero-length");
    }
    let method = req.method().clone();
    let r = match method {
        Method::GET | Method::HEAD => {
            let Some(k) = k else {
                return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
            };
            fetch(&node, &sb, &k, &p).await
        }
        Method::PUT | Method::POST => {
            if method == Method::PUT && k.is_none() {
                return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
            }
            store(&node, t.as_deref(), &b, &sb, k, &p, req).await
        }
        Method::DELETE => {
            let Some(k) = k else {
                return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed");
            };
            delete(&node, &sb, &k, &p, req.headers()).await
        }
        _ => return text(StatusCode::METHOD_NOT_ALLOWED, "method not allowed"),
    };
    r.unwrap_or_else(|e| e)
}

type HttpResult = Result<Response, Response>;

fn vclock_header(v: &VClock) -> HeaderValue {
    let s = base64::engine::general_purpose::STANDARD.encode(v.encode());
    HeaderValue::from_str(&s).unwrap_or_else(|_| HeaderValue::from_static(""))
}

fn client_vclock(h: &HeaderMap) -> Result<Option<VClock>, Response> {
    let Some(v) = h.get("x-riak-vclock") else {
        return Ok(None);
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(v.as_bytes())
        .map_err(|_| bad("X-Riak-Vclock is not valid base64"))?;
    VClock::decode(&bytes)
        .map(Some)
        .map_err(|e| bad(format!("X-Riak-Vclock: {e}")))
}

/// A 200 response carrying one sibling.
fn content_response(o: &RiakObject, c: &Content, status: StatusCode) -> Response {
    let mut resp = Response::new(Body::from(c.value.clone()));
    *resp.status_mut() = status;
    let h = resp.headers_mut();
    let mut ct = String::from_utf8_lossy(
        c.content_type
            .as_deref()
            .unwrap_or(b"application/octet-stream"),
    )
    .into_owned();
    if let Some(cs) = &c.charset {
        ct.push_str("; charset=");
        ct.push_str(&String::from_utf8_lossy(cs));
    }
    let hv = |b: &[u8]| HeaderValue::from_bytes(b).ok();
    if let Some(v) = hv(ct.as_bytes()) {
        h.insert(header::CONTENT_TYPE, v);
    }
    if let Some(v) = c.content_encoding.as_deref().and_then(hv) {
        h.insert(header::CONTENT_ENCODING, v);
    }
    h.insert("x-riak-vclock", vclock_header(&o.vclock));
    if let Some(v) = c
        .vtag
        .as_deref()
        .and_then(|t| hv(format!("\"{}\"", String::from_utf8_lossy(t)).as_bytes()))
    {
        h.insert(header::ETAG, v);
    }
    let lm = UNIX_EPOCH + Duration::from_secs(u64::from(c.last_mod));
    if let Some(v) = hv(httpdate::fmt_http_date(lm).as_bytes()) {
        h.insert(header::LAST_MODIFIED, v);
    }
    for (name, value) in &c.usermeta {
        let n = format!("x-riak-meta-{}", String::from_utf8_lossy(name));
        if let (Ok(n), Some(v)) = (header::HeaderName::from_bytes(n.as_bytes()), hv(value)) {
            h.append(n, v);
        }
    }
    let mut fields: Vec<(&[u8], Vec<&[u8]>)> = Vec::new();
    for (f, term) in &c.indexes {
        match fields.iter_mut().find(|(n, _)| *n == f.as_slice()) {
            Some((_, v)) => v.push(term),
            None => fields.push((f, vec![term])),
        }
    }
    for (f, terms) in fields {
        let n = format!("x-riak-index-{}", String::from_utf8_lossy(f));
        let v = terms.join(&b", "[..]);
        if let (Ok(n), Some(v)) = (header::HeaderName::from_bytes(n.as_bytes()), hv(&v)) {
            h.insert(n, v);
        }
    }
    resp
}

/// 200 with one sibling, or 300 with the vtag list.
fn object_response(o: &RiakObject, vtag: Option<&str>, ok: StatusCode) -> Response {
    if let Some(want) = vtag {
        return match o
            .contents
            .iter()
            .find(|c| c.vtag.as_deref() == Some(want.as_bytes()))
        {
            Some(c) => content_response(o, c, ok),
            None => text(StatusCode::NOT_FOUND, "not found"),
        };
    }
    match o.contents.as_slice() {
        [c] => content_response(o, c, ok),
        cs => {
            let mut body = String::from("Siblings:\n");
            for c in cs {
                body.push_str(&String::from_utf8_lossy(c.vtag.as_deref().unwrap_or(b"")));
                body.push('\n');
            }
            let mut resp = text(StatusCode::MULTIPLE_CHOICES, body);
            resp.headers_mut()
                .insert("x-riak-vclock", vclock_header(&o.vclock));
            resp
        }
    }
}

async fn fetch(node: &Node, sb: &[u8], k: &str, p: &Params) -> HttpResult {
    let opts = GetOpts {
        r: p.r,
        pr: p.pr,
        notfound_ok: None,
    };
    match node
        .get(sb, k.as_bytes(), &opts)
        .await
        .map_err(error_response)?
    {
        GetOutcome::NotFound => Ok(text(StatusCode::NOT_FOUND, "not found")),
        GetOutcome::Tombstone(vc) => {
            let mut resp = text(StatusCode::NOT_FOUND, "not found");
            resp.headers_mut()
                .insert("x-riak-vclock", vclock_header(&vc));
            Ok(resp)
        }
        GetOutcome::Found(o) => Ok(object_response(&o, p.vtag.as_deref(), StatusCode::OK)),
    }
}

/// The sibling described by a store request's headers and body.
fn content_from_request(h: &HeaderMap, body: Vec<u8>) -> Result<Content, Response> {
    let ct = h
        .get(header::CONTENT_TYPE)
        .ok_or_else(|| bad("Missing Content-Type request header"))?
        .to_str()
        .map_err(|_| bad("Malformed Content-Type header"))?;
    let mut parts = ct.split(';');
    let ctype = parts.next().unwrap_or("").trim();
    if ctype.is_empty() {
        return Err(bad("Malformed Content-Type header"));
    }
    let mut charset = None;
    for param in parts {
        if let Some((n, v)) = param.split_once('=') {
            if n.trim().eq_ignore_ascii_case("charset") {
                charset = Some(v.trim().trim_matches('"').as_bytes().to_vec());
            }
        }
    }
    let mut c = Content {
        value_len: body.len() as u32,
        value: body,
        content_type: Some(ctype.as_bytes().to_vec()),
        charset,
        content_encoding: h
            .get(header::CONTENT_ENCODING)
            .map(|v| v.as_bytes().to_vec()),
        ..Content::default()
    };
    for (name, value) in h {
        let n = name.as_str();
        if let Some(meta) = n.strip_prefix("x-riak-meta-") {
            if meta.is_empty() {
                return Err(bad("Empty X-Riak-Meta- header name"));
            }
            c.usermeta
                .push((meta.as_bytes().to_vec(), value.as_bytes().to_vec()));
        } else if let Some(field) = n.strip_prefix("x-riak-index-") {
            let int = field.ends_with("_int");
            if !(int || field.ends_with("_bin")) || field.len() <= 4 {
                return Err(bad(format!(
                    "Could not parse index fields: {n} (index names end in _bin or _int)"
                )));
            }
            let v = value
                .to_str()
                .map_err(|_| bad(format!("Malformed {n} header")))?;
            for term in v.split(',').map(str::trim).filter(|t| !t.is_empty()) {
                let term = if int {
                    term.parse::<i64>()
                        .map_err(|_| {
                            bad(format!(
                                "Could not parse index value: {n}: \"{term}\" is not an integer"
                            ))
                        })?
                        .to_string()
                } else {
                    term.to_string()
                };
                c.indexes
                    .push((field.as_bytes().to_vec(), term.into_bytes()));
            }
        }
    }
    Ok(c)
}

async fn store(
    node: &Node,
    t: Option<&str>,
    b: &str,
    sb: &[u8],
    k: Option<String>,
    p: &Params,
    req: Request,
) -> HttpResult {
    let (parts, body) = req.into_parts();
    let limit = node.config().limits.max_object_bytes;
    let too_large = || {
        text(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Object too large (limit {limit} bytes)"),
        )
    };
    if parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok())
        .is_some_and(|n| n > limit)
    {
        return Err(too_large());
    }
    let body = to_bytes(body, limit).await.map_err(|_| too_large())?;
    let client = client_vclock(&parts.headers)?;
    let content = content_from_request(&parts.headers, body.to_vec())?;
    let (key, created) = match k {
        Some(k) => (k, false),
        None => (String::from_utf8_lossy(&unique_id()).into_owned(), true),
    };
    let opts = PutOpts {
        w: p.w,
        dw: p.dw,
        pw: p.pw,
        ..Default::default()
    };
    let obj = node
        .put(sb, key.as_bytes(), client, content, &opts)
        .await
        .map_err(error_response)?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    let mut resp = match obj.filter(|_| p.returnbody) {
        Some(o) => object_response(&o, None, status),
        None if created => {
            let mut r = Response::new(Body::empty());
            *r.status_mut() = status;
            r
        }
        None => StatusCode::NO_CONTENT.into_response(),
    };
    if created {
        if let Ok(v) = HeaderValue::from_str(&key_path(t, b, &key)) {
            resp.headers_mut().insert(header::LOCATION, v);
        }
    }
    Ok(resp)
}

async fn delete(node: &Node, sb: &[u8], k: &str, p: &Params, h: &HeaderMap) -> HttpResult {
    let client = client_vclock(h)?;
    let opts = GetOpts {
        r: p.r.or(p.rw),
        pr: p.pr,
        notfound_ok: None,
    };
    let current = match node
        .get(sb, k.as_bytes(), &opts)
        .await
        .map_err(error_response)?
    {
        GetOutcome::NotFound | GetOutcome::Tombstone(_) => {
            return Ok(text(StatusCode::NOT_FOUND, "not found"))
        }
        GetOutcome::Found(o) => o.vclock,
    };
    let tomb = Content {
        deleted: true,
        ..Content::default()
    };
    let opts = PutOpts {
        w: p.w.or(p.rw),
        dw: p.dw,
        pw: p.pw,
        ..Default::default()
    };
    node.put(
        sb,
        k.as_bytes(),
        Some(client.unwrap_or(current)),
        tomb,
        &opts,
    )
    .await
    .map_err(error_response)?;
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quorum_words_and_percent_decoding() {
        assert_eq!(parse_quorum("r", "one"), Ok(quorum::ONE));
        assert_eq!(parse_quorum("r", "2"), Ok(2));
        assert!(parse_quorum("r", "most").is_err());
        assert_eq!(pct("a%20b+c%2"), "a b c%2");
    }
}
