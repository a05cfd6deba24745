//! Entry points for the fuzz targets in `fuzz/` (not part of the server's
//! API, hidden from the docs): the crate-private parsers of bytes that come
//! from the network or the disk — the vnode status file, the 2i and CS-fold
//! continuations, and the HTTP API's hand-written header and query-string
//! parsers — called exactly as the server calls them. Nothing here changes
//! behaviour.

use crate::object::vclock::VClock;
use crate::object::Content;
use crate::vnode::id::Shutdown;
use axum::http::{HeaderMap, HeaderName, HeaderValue};

/// Parses a vnode status file: `(id, clean)`; panics if a status that
/// parses does not survive `render` + `parse` unchanged.
pub fn vnode_status(text: &str) -> Option<(u64, bool)> {
    let (inc, state) = crate::vnode::id::parse(text)?;
    let again = crate::vnode::id::parse(&crate::vnode::id::render(inc, state));
    assert_eq!(
        again,
        Some((inc, state)),
        "vnode status does not round-trip"
    );
    Some((inc.id, state == Shutdown::Clean))
}

/// A vnode status file's text for `id` (the seeds), in the form new
/// incarnations take.
pub fn vnode_status_text(id: u64, clean: bool) -> String {
    crate::vnode::id::render(
        crate::vnode::id::Incarnation {
            id,
            form: crate::vnode::id::ActorForm::Short,
        },
        if clean {
            Shutdown::Clean
        } else {
            Shutdown::Open
        },
    )
}

/// Decodes a coordinator 2i continuation into (term, key).
pub fn kv_continuation(c: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    crate::kv::index::decode_continuation(c)
}

/// Encodes a coordinator 2i continuation.
pub fn kv_encode_continuation(term: &[u8], key: &[u8]) -> String {
    crate::kv::index::encode_continuation(term, key)
}

/// Decodes a CS bucket fold continuation into its key.
pub fn cs_continuation(c: &[u8]) -> Option<Vec<u8>> {
    crate::kv::csfold::decode_cs_continuation(c)
}

/// Encodes a CS bucket fold continuation.
pub fn cs_encode_continuation(key: &[u8]) -> Vec<u8> {
    crate::kv::csfold::encode_cs_continuation(key)
}

/// A link as the HTTP API stores it: (bucket, key, tag).
pub type Link = (Vec<u8>, Vec<u8>, Vec<u8>);

/// Parses a `Link` request header.
pub fn http_links(v: &str) -> Result<Vec<Link>, String> {
    crate::api::http::objects::parse_links(v)
}

/// Splits and percent-decodes a query string.
pub fn http_query(q: &str) -> Vec<(String, String)> {
    crate::api::http::query_pairs(q)
}

/// Parses an object request's query parameters.
pub fn http_object_params(q: &[(String, String)]) -> Result<(), String> {
    crate::api::http::objects::params(q).map(drop)
}

/// Parses a 2i request's query parameters.
pub fn http_index_params(q: &[(String, String)]) -> Result<(), String> {
    crate::api::http::index::params(q).map(drop)
}

/// Checks a 2i request's field and terms.
pub fn http_index_terms(
    field: &str,
    start: String,
    end: Option<String>,
) -> Result<(String, Option<String>), String> {
    crate::api::http::index::check_terms(field, start, end)
}

/// Decodes an `X-Riak-Vclock` header value (`None`: not a header value).
pub fn http_vclock(v: &[u8]) -> Option<Result<VClock, ()>> {
    let v = HeaderValue::from_bytes(v).ok()?;
    Some(crate::api::http::objects::decode_vclock("X-Riak-Vclock", &v).map_err(drop))
}

/// Builds the sibling a store request describes from `headers` (those that
/// are not valid header names or values are skipped) and `body`.
pub fn http_content(headers: &[(&[u8], &[u8])], body: Vec<u8>) -> Option<Content> {
    let mut h = HeaderMap::new();
    for (n, v) in headers {
        if let (Ok(n), Ok(v)) = (HeaderName::from_bytes(n), HeaderValue::from_bytes(v)) {
            h.append(n, v);
        }
    }
    crate::api::http::objects::content_from_request(&h, body).ok()
}
