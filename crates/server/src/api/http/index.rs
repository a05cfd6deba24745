//! 2i over HTTP (`riak_kv_wm_index`): `GET .../index/FIELD/VALUE` and
//! `.../index/FIELD/START/END` with `return_terms`, `max_results`,
//! `continuation`, `term_regex` and `stream`.

use super::{bad, chunked, error_response, js, json, query, Shared};
use crate::kv::Kv;
use axum::body::Bytes;
use axum::extract::{Path, Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use basalt_backend::{IndexQuery, IndexResult};
use serde_json::{json, Value};
use std::sync::Arc;

pub use crate::limits::RESULTS_PER_PART;

/// `GET /buckets/B/index/F/V`.
pub async fn eq_default(
    State(kv): Shared,
    Path((b, f, v)): Path<(String, String, String)>,
    req: Request,
) -> Response {
    index(kv, None, b, f, v, None, req).await
}

/// `GET /buckets/B/index/F/S/E`.
pub async fn range_default(
    State(kv): Shared,
    Path((b, f, s, e)): Path<(String, String, String, String)>,
    req: Request,
) -> Response {
    index(kv, None, b, f, s, Some(e), req).await
}

/// `GET /types/T/buckets/B/index/F/V`.
pub async fn eq_typed(
    State(kv): Shared,
    Path((t, b, f, v)): Path<(String, String, String, String)>,
    req: Request,
) -> Response {
    index(kv, Some(t), b, f, v, None, req).await
}

/// `GET /types/T/buckets/B/index/F/S/E`.
pub async fn range_typed(
    State(kv): Shared,
    Path((t, b, f, s, e)): Path<(String, String, String, String, String)>,
    req: Request,
) -> Response {
    index(kv, Some(t), b, f, s, Some(e), req).await
}

/// The query parameters of a 2i request.
#[derive(Debug, Default, PartialEq)]
pub(crate) struct Params {
    return_terms: bool,
    max_results: Option<u32>,
    continuation: Option<String>,
    term_regex: Option<String>,
    stream: bool,
    timeout: Option<u32>,
}

pub(crate) fn params(q: &[(String, String)]) -> Result<Params, String> {
    let mut p = Params::default();
    let boolean = |k: &str, v: &str| match v {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(format!("{k} must be true or false, got \"{v}\"")),
    };
    for (k, v) in q {
        match k.as_str() {
            "return_terms" => p.return_terms = boolean(k, v)?,
            "stream" => p.stream = boolean(k, v)?,
            "max_results" => {
                p.max_results = Some(v.parse::<u32>().ok().filter(|n| *n > 0).ok_or_else(|| {
                    format!("Invalid max_results. \"{v}\" is not a positive integer")
                })?)
            }
            "continuation" => p.continuation = Some(v.clone()),
            "timeout" => {
                p.timeout = Some(
                    v.parse::<u32>()
                        .map_err(|_| format!("Bad timeout value \"{v}\""))?,
                )
            }
            "term_regex" => p.term_regex = Some(v.clone()),
            _ => {}
        }
    }
    Ok(p)
}

/// Checks the field and canonicalises `_int` terms (decimal integers of
/// any size, `intterm`).
pub(crate) fn check_terms(
    field: &str,
    start: String,
    end: Option<String>,
) -> Result<(String, Option<String>), String> {
    let int = field.ends_with("_int");
    let special = field == "$bucket" || field == "$key";
    if !special && !((int || field.ends_with("_bin")) && field.len() > 4) {
        return Err(format!(
            "Invalid query: unknown index field \"{field}\" (fields end in _bin or _int, or are $bucket or $key)"
        ));
    }
    if field == "$bucket" && end.is_some() {
        return Err("Invalid query: $bucket takes one value (the bucket), not a range".into());
    }
    if !int {
        return Ok((start, end));
    }
    let canon = |t: String| {
        basalt_backends::intterm::canonical(t.as_bytes())
            .ok_or_else(|| format!("Invalid query: \"{t}\" is not an integer ({field})"))
    };
    Ok((canon(start)?, end.map(canon).transpose()?))
}

async fn index(
    kv: Arc<Kv>,
    t: Option<String>,
    b: String,
    field: String,
    start: String,
    end: Option<String>,
    req: Request,
) -> Response {
    let p = match params(&query(&req)) {
        Ok(p) => p,
        Err(e) => return bad(e),
    };
    let sb = match kv
        .types()
        .storage_bucket(t.as_deref().map(str::as_bytes), b.as_bytes())
    {
        Ok(sb) => sb,
        Err(e) => return error_response(e),
    };
    let (start, end) = match check_terms(&field, start, end) {
        Ok(x) => x,
        Err(e) => return bad(e),
    };
    if let Some(re) = &p.term_regex {
        if field.ends_with("_int") {
            return bad("Can not use term regular expression in integer queries");
        }
        if let Err(e) = regex::bytes::Regex::new(re) {
            return bad(format!("Invalid term regular expression \"{re}\": {e}"));
        }
    }
    // As Riak, terms are returned for range queries only, and never for
    // `$key` (its `return_terms` is ignored).
    let terms = p.return_terms && end.is_some() && field != "$key";
    let q = IndexQuery {
        bucket: sb,
        field: field.into_bytes(),
        start: start.into_bytes(),
        end: end.map(String::into_bytes),
        return_terms: p.return_terms,
        term_regex: p.term_regex.clone(),
        max_results: p.max_results,
        continuation: p.continuation.clone(),
        start_after: None,
    };
    let page = match crate::kv::within(p.timeout, kv.index_query(q)).await {
        Ok(page) => page,
        Err(e) => return error_response(e),
    };
    let encode = |rs: &[IndexResult]| -> Value {
        if terms {
            let results: Vec<Value> = rs
                .iter()
                .map(|r| {
                    let term = String::from_utf8_lossy(r.term.as_deref().unwrap_or_default());
                    json!({ term: js(&r.key) })
                })
                .collect();
            json!({ "results": results })
        } else {
            json!({ "keys": rs.iter().map(|r| js(&r.key)).collect::<Vec<_>>() })
        }
    };
    if !p.stream {
        let mut v = encode(&page.results);
        if let (Some(c), Some(m)) = (&page.continuation, v.as_object_mut()) {
            m.insert("continuation".into(), c.clone().into());
        }
        return json(StatusCode::OK, &v);
    }
    // multipart/mixed: one application/json part per RESULTS_PER_PART
    // results, then a part with the continuation (when the page is full),
    // then the closing boundary.
    let boundary = String::from_utf8_lossy(&crate::object::unique_id()).into_owned();
    let (tx, resp) = chunked(&format!("multipart/mixed;boundary={boundary}"));
    let part = |v: &Value| {
        Bytes::from(format!(
            "\r\n--{boundary}\r\nContent-Type: application/json\r\n\r\n{v}"
        ))
    };
    for chunk in page.results.chunks(RESULTS_PER_PART) {
        let _ = tx.send(part(&encode(chunk)));
    }
    if let Some(c) = &page.continuation {
        let _ = tx.send(part(&json!({ "continuation": c })));
    }
    let _ = tx.send(Bytes::from(format!("\r\n--{boundary}--\r\n")));
    resp
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn params_and_fields() {
        let q = |s: &[(&str, &str)]| {
            params(
                &s.iter()
                    .map(|(k, v)| (k.to_string(), v.to_string()))
                    .collect::<Vec<_>>(),
            )
        };
        assert_eq!(
            q(&[("max_results", "5"), ("return_terms", "true")]),
            Ok(Params {
                return_terms: true,
                max_results: Some(5),
                ..Params::default()
            })
        );
        assert!(q(&[("max_results", "0")]).is_err());
        assert!(q(&[("max_results", "x")]).is_err());
        assert!(q(&[("stream", "yes")]).is_err());
        assert_eq!(
            check_terms("n_int", "007".into(), Some("-1".into())),
            Ok(("7".to_string(), Some("-1".to_string())))
        );
        assert!(check_terms("n_int", "x".into(), None).is_err());
        assert_eq!(
            check_terms("n_int", "+0099999999999999999999".into(), None),
            Ok(("99999999999999999999".to_string(), None))
        );
        assert!(check_terms("name", "x".into(), None).is_err());
        assert!(check_terms("_bin", "x".into(), None).is_err());
        assert!(check_terms("$bucket", "b".into(), Some("c".into())).is_err());
        assert!(check_terms("$key", "a".into(), Some("z".into())).is_ok());
    }
}
