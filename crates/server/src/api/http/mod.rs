//! Riak's HTTP resources for KV, bucket props and bucket types, on axum:
//!
//! * [`objects`]: `/types/T/buckets/B/keys[/K]` and `/buckets/B/keys[/K]`
//!   (GET, HEAD, PUT, POST, DELETE; siblings, links, conditional headers);
//! * [`buckets`]: bucket and bucket-type props, bucket and key listings;
//! * [`index`]: 2i queries;
//! * [`replicas`]: `/basalt/replicas/...`: each replica's state of a key;
//! * [`preflist`]: `.../keys/K/preflist`: a key's preference list;
//! * [`auth`]: security (basic auth on HTTPS, the route permission table).
//!
//! Here: what the resources share (errors, query strings, JSON, chunked
//! bodies). The capabilities serve their own routes (data types in
//! `datatypes::http`, `POST /mapred` in `mapred::http`, the fold queries in
//! `aae::http`); `server::http` assembles every route, the security layers
//! and the listeners. Errors are plain text with Riak's status codes (400
//! bad input, 404, 412, 413, 415, 503 overload / quorum, 500).

// Handlers return ready-made error `Response`s on the (rare) failure path.
#![allow(clippy::result_large_err)]

pub mod auth;
pub mod buckets;
pub mod index;
pub mod objects;
pub mod preflist;
pub mod replicas;

use crate::error::RequestError;
use crate::kv::Kv;
use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use std::convert::Infallible;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use tokio::sync::mpsc;

/// The state every KV handler extracts: the KV layer.
pub(crate) type Shared = axum::extract::State<Arc<Kv>>;

pub use crate::limits::MAX_PROPS_BODY_BYTES;

pub(crate) fn text(status: StatusCode, body: impl Into<String>) -> Response {
    let mut body = body.into();
    if !body.ends_with('\n') {
        body.push('\n');
    }
    (status, [(header::CONTENT_TYPE, "text/plain")], body).into_response()
}

pub(crate) fn bad(reason: impl Into<String>) -> Response {
    text(StatusCode::BAD_REQUEST, reason)
}

pub(crate) fn error_response(e: RequestError) -> Response {
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
        RequestError::DiskFull(_) => StatusCode::INSUFFICIENT_STORAGE,
        RequestError::Storage(_) => StatusCode::INTERNAL_SERVER_ERROR,
        RequestError::Forbidden(_) => StatusCode::FORBIDDEN,
    };
    text(status, e.to_string())
}

pub(crate) fn wants_json(h: &HeaderMap) -> bool {
    h.get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|a| a.contains("application/json"))
}

/// Query parameters, percent-decoded.
pub(crate) fn query(req: &Request) -> Vec<(String, String)> {
    query_pairs(req.uri().query().unwrap_or(""))
}

/// A query string's `k=v` pairs, percent-decoded.
pub(crate) fn query_pairs(q: &str) -> Vec<(String, String)> {
    q.split('&')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (k, v) = p.split_once('=').unwrap_or((p, ""));
            (pct(k), pct(v))
        })
        .collect()
}

pub(crate) fn pct(s: &str) -> String {
    String::from_utf8_lossy(&pct_decode(s, true)).into_owned()
}

/// Percent-decodes `s` to bytes (a malformed escape stays as it is); `+`
/// is a space in query strings (`plus_is_space`), itself in a path.
pub(crate) fn pct_decode(s: &str, plus_is_space: bool) -> Vec<u8> {
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
            (b'+', _, _) if plus_is_space => out.push(b' '),
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 2;
            }
            (c, _, _) => out.push(c),
        }
        i += 1;
    }
    out
}

pub use objects::parse_quorum;

/// The `?timeout=` of a listing or 2i request (ms; absent = none).
pub(crate) fn timeout_param(req: &Request) -> Result<Option<u32>, Response> {
    match query(req).iter().rev().find(|(k, _)| k == "timeout") {
        None => Ok(None),
        Some((_, v)) => v
            .parse::<u32>()
            .map(Some)
            .map_err(|_| bad(format!("Bad timeout value \"{v}\""))),
    }
}

/// A JSON response with `status`.
pub(crate) fn json(status: StatusCode, v: &serde_json::Value) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "application/json")],
        v.to_string(),
    )
        .into_response()
}

/// Bytes as a JSON string (invalid UTF-8 replaced, as keys are shown).
pub(crate) fn js(b: &[u8]) -> serde_json::Value {
    serde_json::Value::from(String::from_utf8_lossy(b).into_owned())
}

/// Percent-encodes a path segment (everything but unreserved characters).
pub(crate) fn pct_encode(b: &[u8]) -> String {
    let mut out = String::with_capacity(b.len());
    for &c in b {
        if c.is_ascii_alphanumeric() || b"-._~".contains(&c) {
            out.push(c as char);
        } else {
            out.push_str(&format!("%{c:02X}"));
        }
    }
    out
}

/// The receiving end of a chunked response body: each message is one
/// chunk; the body ends when every sender is dropped.
pub(crate) struct ChunkStream(pub mpsc::UnboundedReceiver<Bytes>);

impl futures_core::Stream for ChunkStream {
    type Item = Result<Bytes, Infallible>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.poll_recv(cx).map(|m| m.map(Ok))
    }
}

/// A streamed (chunked) response of `content_type`, with the sender that
/// feeds it.
pub(crate) fn chunked(content_type: &str) -> (mpsc::UnboundedSender<Bytes>, Response) {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut resp = Response::new(Body::from_stream(ChunkStream(rx)));
    if let Ok(v) = HeaderValue::from_str(content_type) {
        resp.headers_mut().insert(header::CONTENT_TYPE, v);
    }
    (tx, resp)
}

/// Reads a request body of at most `limit` bytes (413 beyond).
pub(crate) async fn read_body(req: Request, limit: usize) -> Result<(HeaderMap, Bytes), Response> {
    let (parts, body) = req.into_parts();
    let too_large = || {
        text(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("Request body too large (limit {limit} bytes)"),
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
    let body = axum::body::to_bytes(body, limit).await.map_err(|e| {
        let over = std::error::Error::source(&e)
            .is_some_and(|s| s.is::<http_body_util::LengthLimitError>())
            || e.to_string().contains("length limit");
        if over {
            too_large()
        } else {
            // A body that breaks off or is not valid chunked encoding.
            bad(format!("malformed request body: {e}"))
        }
    })?;
    Ok((parts.headers, body))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_encoding_round_trips() {
        assert_eq!(pct_encode(b"a b/c"), "a%20b%2Fc");
        assert_eq!(pct(&pct_encode("k/é".as_bytes())), "k/é");
    }

    #[test]
    fn a_full_disk_answers_507() {
        let r = error_response(RequestError::DiskFull("no space".into()));
        assert_eq!(r.status(), StatusCode::INSUFFICIENT_STORAGE);
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(pct("a%20b+c%2"), "a b c%2");
    }
}
