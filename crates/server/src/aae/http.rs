//! Riak's anti-entropy fold resource (`riak_kv_wm_aaefold`): the HTTP form
//! of [`Aae::aae_fold`](crate::aae::Aae::aae_fold), answered as JSON.
//!
//! ```text
//! GET /cachedtrees/nvals/N/root
//! GET /cachedtrees/nvals/N/branch?filter=F          F = base64(JSON [branch, ...])
//! GET /cachedtrees/nvals/N/keysclocks?filter=F      F = base64(JSON [segment, ...]
//!                                                     | {"segment_filter", "date_range"})
//! GET /rangetrees/[types/T/]buckets/B/trees/SIZE?filter=F
//! GET /rangetrees/[types/T/]buckets/B/keysclocks?filter=F
//! GET /siblings/[types/T/]buckets/B/counts/N?filter=F
//! GET /objectsizes/[types/T/]buckets/B/sizes/N?filter=F
//! GET /objectstats/[types/T/]buckets/B?filter=F
//! GET /tombs/[types/T/]buckets/B?filter=F
//! GET /reap/[types/T/]buckets/B?filter=F
//! GET /erase/[types/T/]buckets/B?filter=F
//! GET /aaebucketlist?nval=N
//! ```
//!
//! A range filter is base64 of a JSON object with any of `key_range`
//! `{"start", "end"}`, `date_range` `{"start", "end"}` (seconds),
//! `segment_filter` `{"segments": [...], "tree_size": "xsmall"}` and, for
//! reap and erase, `change_method` (`"count"` — the default, as Riak's —
//! `"local"` or `{"job_id": N}`); `"all"` for any of them means no filter.
//! Replies: `{"root": b64}`, `{"branches": [{"branch-id", "branch": b64}]}`
//! (hashes as in `docs/formats.md` "AAE fold tree reply"), `{"keys-clocks":
//! [{"bucket-type"?, "bucket", "key", "clock": b64}]}`, `{"tree": {"level1":
//! b64, "level2": {"branch": b64}}}`, `{"results": [{"key", "value"}]}`,
//! `{"total_count", "total_size", "sizes": {"order": n}, "siblings":
//! {"count": n}}`, `{"dispatched_count": n}`, `{"results": [{"bucket-type"?,
//! "bucket"}]}`. Bad input is 400 naming it; trees not built yet is 503.

// Handlers return ready-made error `Response`s on the (rare) failure path.
#![allow(clippy::result_large_err)]

use super::Aae;
use crate::aae::fold::{Finder, FoldQuery, FoldResult, RangeFilter};
use crate::api::http::{error_response, json, query_pairs, text};
use crate::error::RequestError;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::Response;
use basalt_backend::TreeSize;
use base64::Engine;
use serde_json::{json, Map, Value};

/// The state these handlers extract: anti-entropy.
type Shared = axum::extract::State<std::sync::Arc<Aae>>;

/// The path prefixes this resource serves (each routed as `/{prefix}/...`).
pub const PREFIXES: &[&str] = &[
    "cachedtrees",
    "rangetrees",
    "siblings",
    "objectsizes",
    "objectstats",
    "tombs",
    "reap",
    "erase",
];

/// Serves every aae fold path.
pub async fn fold(State(aae): Shared, req: Request) -> Response {
    let params = query_pairs(req.uri().query().unwrap_or(""));
    let q = match parse(&aae, req.uri().path(), &params) {
        Ok(q) => q,
        Err(e) => return text(StatusCode::BAD_REQUEST, e),
    };
    match aae.aae_fold(&q).await {
        Ok(res) => json(StatusCode::OK, &encode(&q, res)),
        Err(RequestError::Invalid(m)) if m.starts_with("trees not built") => {
            text(StatusCode::SERVICE_UNAVAILABLE, m)
        }
        Err(e) => error_response(e),
    }
}

/// A path segment, percent-decoded (`+` is itself).
fn seg(s: &str) -> Vec<u8> {
    crate::api::http::pct_decode(s, false)
}

fn param<'a>(params: &'a [(String, String)], name: &str) -> Option<&'a str> {
    params
        .iter()
        .find(|(k, _)| k == name)
        .map(|(_, v)| v.as_str())
}

fn int(s: &str, what: &str) -> Result<u64, String> {
    s.parse::<u64>()
        .map_err(|_| format!("{what} must be a non-negative integer, got {s:?}"))
}

/// The JSON of a `filter` parameter (base64, standard or URL-safe).
fn filter_json(params: &[(String, String)]) -> Result<Option<Value>, String> {
    let Some(f) = param(params, "filter") else {
        return Ok(None);
    };
    let raw = base64::engine::general_purpose::STANDARD
        .decode(f.trim())
        .or_else(|_| base64::engine::general_purpose::URL_SAFE.decode(f.trim()))
        .map_err(|_| format!("filter is not base64: {f:?}"))?;
    serde_json::from_slice(&raw)
        .map(Some)
        .map_err(|e| format!("filter is not JSON: {e}"))
}

fn u32_list(v: &Value, what: &str) -> Result<Vec<u32>, String> {
    v.as_array()
        .ok_or_else(|| format!("{what} must be a list of integers"))?
        .iter()
        .map(|x| {
            x.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| format!("{what} must be a list of integers, got {x}"))
        })
        .collect()
}

fn tree_size(name: &str) -> Result<TreeSize, String> {
    TreeSize::from_name(name).ok_or_else(|| {
        format!("no tree size {name:?} (xxsmall, xsmall, small, medium, large, xlarge)")
    })
}

/// Fields of a range filter object; `count_only` for reap and erase.
struct Filter {
    keys: Option<(Vec<u8>, Vec<u8>)>,
    modified: Option<(u64, u64)>,
    segments: Option<(u32, Vec<u32>)>,
    count_only: bool,
}

fn range_pair(v: &Value, what: &str, ints: bool) -> Result<Option<(Value, Value)>, String> {
    if v.is_null() || v.as_str() == Some("all") {
        return Ok(None);
    }
    let (Some(s), Some(e)) = (v.get("start"), v.get("end")) else {
        return Err(format!("{what} needs start and end"));
    };
    let ok = if ints {
        s.is_u64() && e.is_u64()
    } else {
        s.is_string() && e.is_string()
    };
    if !ok {
        return Err(format!("bad {what}: {v}"));
    }
    Ok(Some((s.clone(), e.clone())))
}

fn parse_filter(v: Option<&Value>) -> Result<Filter, String> {
    let mut f = Filter {
        keys: None,
        modified: None,
        segments: None,
        count_only: true,
    };
    let Some(v) = v else {
        return Ok(f);
    };
    let Some(obj) = v.as_object() else {
        return Err("filter must be a JSON object".into());
    };
    for k in obj.keys() {
        if ![
            "key_range",
            "date_range",
            "segment_filter",
            "change_method",
            "hash_iv",
        ]
        .contains(&k.as_str())
        {
            return Err(format!("unknown filter field {k:?}"));
        }
    }
    let null = Value::Null;
    if let Some((s, e)) = range_pair(obj.get("key_range").unwrap_or(&null), "key_range", false)? {
        f.keys = Some((
            s.as_str().unwrap_or("").as_bytes().to_vec(),
            e.as_str().unwrap_or("").as_bytes().to_vec(),
        ));
    }
    if let Some((s, e)) = range_pair(obj.get("date_range").unwrap_or(&null), "date_range", true)? {
        f.modified = Some((s.as_u64().unwrap_or(0), e.as_u64().unwrap_or(0)));
    }
    match obj.get("segment_filter") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == "all" => {}
        Some(sf) => {
            let size = tree_size(
                sf.get("tree_size")
                    .and_then(Value::as_str)
                    .ok_or("segment_filter needs tree_size")?,
            )?;
            let segs = u32_list(
                sf.get("segments").ok_or("segment_filter needs segments")?,
                "segments",
            )?;
            f.segments = Some((size.width(), segs));
        }
    }
    if obj.get("hash_iv").is_some_and(|v| !v.is_null()) {
        return Err("hash_iv is not supported (Basalt hashes each key's state)".into());
    }
    match obj.get("change_method") {
        None | Some(Value::Null) => {}
        Some(Value::String(s)) if s == "count" => {}
        Some(Value::String(s)) if s == "local" => f.count_only = false,
        Some(Value::Object(m)) if m.get("job_id").is_some_and(Value::is_u64) => {
            f.count_only = false;
        }
        Some(other) => return Err(format!("bad change_method {other}")),
    }
    Ok(f)
}

/// The query of a path.
fn parse(aae: &Aae, path: &str, params: &[(String, String)]) -> Result<FoldQuery, String> {
    let parts: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    let Some((&kind, rest)) = parts.split_first() else {
        return Err("no fold type".into());
    };
    if kind == "aaebucketlist" {
        let n = match param(params, "nval") {
            None => 1,
            Some(s) => int(s, "nval")?,
        };
        return Ok(FoldQuery::ListBuckets {
            n_val: u32::try_from(n).map_err(|_| format!("n_val {n} out of range"))?,
        });
    }
    if kind == "cachedtrees" {
        let [nvals, n, what] = rest else {
            return Err(format!("unknown cached tree query {path:?}"));
        };
        if *nvals != "nvals" {
            return Err(format!("unknown cached tree query {path:?}"));
        }
        let n_val =
            u32::try_from(int(n, "n_val")?).map_err(|_| format!("n_val {n} out of range"))?;
        let filter = filter_json(params)?;
        return match *what {
            "root" => Ok(FoldQuery::MergeRootNval { n_val }),
            "branch" => Ok(FoldQuery::MergeBranchNval {
                n_val,
                branches: u32_list(
                    filter
                        .as_ref()
                        .ok_or("filter query param required for branch")?,
                    "branch filter",
                )?,
            }),
            "keysclocks" => {
                let f = filter.ok_or("filter query param required for keysclocks")?;
                let (segments, modified) = if f.is_array() {
                    (u32_list(&f, "segment filter")?, None)
                } else {
                    let pf = parse_filter(Some(&f))?;
                    let segs = pf
                        .segments
                        .map(|(_, s)| s)
                        .ok_or("keysclocks filter needs segment_filter")?;
                    (segs, pf.modified)
                };
                Ok(FoldQuery::FetchClocksNval {
                    n_val,
                    segments,
                    modified,
                })
            }
            other => Err(format!("unknown cached tree query {other:?}")),
        };
    }
    // [types/T/]buckets/B/...
    let (btype, rest) = match rest {
        ["types", t, rest @ ..] => (Some(seg(t)), rest),
        _ => (None, rest),
    };
    let (bucket, tail) = match rest {
        ["buckets", b, tail @ ..] => (seg(b), tail),
        _ => return Err(format!("Bucket required: {path:?}")),
    };
    if bucket.is_empty() {
        return Err("Bucket cannot be zero-length".into());
    }
    let bucket = aae
        .types()
        .storage_bucket(btype.as_deref(), &bucket)
        .map_err(|e| e.to_string())?;
    let fj = filter_json(params)?;
    let f = parse_filter(fj.as_ref())?;
    let count_only = f.count_only;
    let filter = RangeFilter {
        bucket,
        keys: f.keys,
        segments: f.segments,
        modified: f.modified,
    };
    Ok(match (kind, tail) {
        ("rangetrees", ["trees", size]) => FoldQuery::MergeTreeRange {
            filter,
            size: tree_size(size)?,
        },
        ("rangetrees", ["keysclocks"]) => FoldQuery::FetchClocksRange { filter },
        ("siblings", ["counts", n]) => FoldQuery::FindKeys {
            filter,
            finder: Finder::SiblingCount(int(n, "sibling count")?),
        },
        ("objectsizes", ["sizes", n]) => FoldQuery::FindKeys {
            filter,
            finder: Finder::ObjectSize(int(n, "object size")?),
        },
        ("objectstats", []) => FoldQuery::ObjectStats { filter },
        ("tombs", []) => FoldQuery::FindTombs { filter },
        ("reap", []) => FoldQuery::ReapTombs { filter, count_only },
        ("erase", []) => FoldQuery::EraseKeys { filter, count_only },
        _ => return Err(format!("unknown aae fold query {path:?}")),
    })
}

fn b64(b: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(b)
}

fn be(hs: &[u64]) -> Vec<u8> {
    hs.iter().flat_map(|h| h.to_be_bytes()).collect()
}

fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// `{"bucket-type"?, "bucket"}` of a storage bucket.
fn bucket_fields(sb: &[u8]) -> Map<String, Value> {
    let (t, b) = crate::bucket::keying::split_storage_bucket(sb);
    let mut m = Map::new();
    if let Some(t) = t {
        m.insert("bucket-type".into(), json!(lossy(t)));
    }
    m.insert("bucket".into(), json!(lossy(b)));
    m
}

/// The JSON answer of `q`.
fn encode(q: &FoldQuery, res: FoldResult) -> Value {
    match res {
        FoldResult::Tree { root, branches, .. } => match q {
            FoldQuery::MergeRootNval { .. } => json!({ "root": b64(&be(&root)) }),
            FoldQuery::MergeBranchNval { .. } => json!({
                "branches": branches
                    .iter()
                    .map(|(b, segs)| json!({ "branch-id": b, "branch": b64(&be(segs)) }))
                    .collect::<Vec<_>>()
            }),
            _ => {
                let l2: Map<String, Value> = branches
                    .iter()
                    .map(|(b, segs)| (b.to_string(), json!(b64(&be(segs)))))
                    .collect();
                json!({ "tree": { "level1": b64(&be(&root)), "level2": l2 } })
            }
        },
        FoldResult::Keys(keys) => match q {
            FoldQuery::FetchClocksNval { .. } | FoldQuery::FetchClocksRange { .. } => json!({
                "keys-clocks": keys
                    .iter()
                    .map(|(sb, k, clock, _)| {
                        let mut m = bucket_fields(sb);
                        m.insert("key".into(), json!(lossy(k)));
                        m.insert("clock".into(), json!(b64(clock)));
                        Value::Object(m)
                    })
                    .collect::<Vec<_>>()
            }),
            _ => json!({
                "results": keys
                    .iter()
                    .map(|(_, k, _, v)| json!({ "key": lossy(k), "value": v }))
                    .collect::<Vec<_>>()
            }),
        },
        FoldResult::Stats(s) => json!({
            "total_count": s.total_count,
            "total_size": s.total_size,
            "sizes": s.sizes.iter().map(|(o, n)| (o.to_string(), json!(n))).collect::<Map<_, _>>(),
            "siblings": s.siblings.iter().map(|(o, n)| (o.to_string(), json!(n))).collect::<Map<_, _>>(),
        }),
        FoldResult::Count(n) => json!({ "dispatched_count": n }),
        FoldResult::Buckets(bs) => json!({
            "results": bs.iter().map(|b| Value::Object(bucket_fields(b))).collect::<Vec<_>>()
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_are_percent_decoded() {
        assert_eq!(seg("a%20b%2Fc+d"), b"a b/c+d".to_vec());
        assert_eq!(seg("%zz"), b"%zz".to_vec());
    }

    #[test]
    fn filters_parse_and_name_bad_fields() {
        let f = parse_filter(Some(&json!({
            "key_range": {"start": "a", "end": "k"},
            "date_range": {"start": 1, "end": 2},
            "segment_filter": {"segments": [1, 2], "tree_size": "small"},
            "change_method": "local"
        })))
        .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(f.keys, Some((b"a".to_vec(), b"k".to_vec())));
        assert_eq!(f.modified, Some((1, 2)));
        assert_eq!(f.segments, Some((256, vec![1, 2])));
        assert!(!f.count_only);
        assert!(parse_filter(None).is_ok_and(|f| f.count_only));
        let bad = |v: Value| parse_filter(Some(&v)).err().unwrap_or_default();
        assert!(bad(json!({"nope": 1})).contains("unknown filter field"));
        assert!(
            bad(json!({"segment_filter": {"segments": [1], "tree_size": "huge"}}))
                .contains("no tree size")
        );
        assert!(bad(json!({"key_range": {"start": "a"}})).contains("key_range"));
        assert!(bad(json!({"change_method": "now"})).contains("change_method"));
    }
}
