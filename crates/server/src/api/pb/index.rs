//! The secondary-index service (`riak_kv_pb_index`).
//!
//! Codes: `RpbIndexReq` 25 → `RpbIndexResp` 26 (one frame, or streamed in
//! frames of [`crate::limits::INDEX_STREAM_CHUNK`] results then `done`).
//! With `return_body` (`$bucket` and `$key` queries only, as Riak) the
//! answer is `RpbIndexBodyResp` 42 instead: each key with its object (a
//! GET at the bucket's defaults; keys deleted meanwhile are left out), in
//! the same framing. With `cover_context` (an entry of a coverage plan,
//! `coverage`) the query runs on that entry's vnode only
//! ([`crate::kv::cover`]).

use super::{decode, FrameTx};
use crate::error::RequestError;
use crate::kv::Kv;
use crate::limits::INDEX_STREAM_CHUNK;
use crate::pb::{self, code, frame_msg};
use basalt_backend::IndexQuery;
use std::sync::Arc;

/// `RpbIndexReq`.
pub(crate) async fn query(
    kv: &Arc<Kv>,
    body: &[u8],
    out: &FrameTx,
) -> Result<Vec<Vec<u8>>, RequestError> {
    let r: pb::RpbIndexReq = decode(body)?;
    let sb = kv.types().storage_bucket(r.r#type.as_deref(), &r.bucket)?;
    let return_body = r.return_body.unwrap_or(false);
    if return_body && r.index != b"$bucket" && r.index != b"$key" {
        return Err(RequestError::Invalid(
            "For return_body=true index must be one of [<<\"$bucket\">>,<<\"$key\">>]".into(),
        ));
    }
    let stream = r.stream.unwrap_or(false);
    let (start, end) = match r.qtype {
        pb::INDEX_EQ => (
            r.key
                .ok_or_else(|| RequestError::Invalid("eq query needs key".into()))?,
            None,
        ),
        pb::INDEX_RANGE => (
            r.range_min
                .ok_or_else(|| RequestError::Invalid("range query needs range_min".into()))?,
            Some(
                r.range_max
                    .ok_or_else(|| RequestError::Invalid("range query needs range_max".into()))?,
            ),
        ),
        other => {
            return Err(RequestError::Invalid(format!(
                "unknown index query type {other}"
            )))
        }
    };
    let term_regex = match r.term_regex {
        None => None,
        Some(b) => Some(
            String::from_utf8(b)
                .map_err(|_| RequestError::Invalid("term_regex is not UTF-8".into()))?,
        ),
    };
    let continuation = match r.continuation {
        None => None,
        Some(b) => Some(
            String::from_utf8(b)
                .map_err(|_| RequestError::Invalid("invalid continuation".into()))?,
        ),
    };
    let q = IndexQuery {
        bucket: sb.clone(),
        field: r.index,
        start,
        end,
        return_terms: r.return_terms.unwrap_or(false),
        term_regex,
        max_results: r.max_results,
        continuation,
        start_after: None,
    };
    let page = match &r.cover_context {
        None => crate::kv::within(r.timeout, kv.index_query(q)).await?,
        Some(c) => crate::kv::within(r.timeout, kv.index_query_cover(q, c)).await?,
    };
    if return_body {
        return with_bodies(kv, &sb, page, stream, out).await;
    }
    let continuation = page.continuation.map(String::into_bytes);
    let to_resp = |results: &[basalt_backend::IndexResult]| {
        let mut resp = pb::RpbIndexResp::default();
        for res in results {
            match &res.term {
                Some(t) => resp.results.push(pb::RpbPair {
                    key: t.clone(),
                    value: Some(res.key.clone()),
                }),
                None => resp.keys.push(res.key.clone()),
            }
        }
        resp
    };
    Ok(if stream {
        // As Riak: frames of keys / results (none when empty), then
        // `{done = true, continuation?}`.
        for c in page.results.chunks(INDEX_STREAM_CHUNK) {
            if out
                .send(frame_msg(code::INDEX_RESP, &to_resp(c)))
                .await
                .is_err()
            {
                return Ok(vec![]);
            }
        }
        vec![frame_msg(
            code::INDEX_RESP,
            &pb::RpbIndexResp {
                continuation,
                done: Some(true),
                ..Default::default()
            },
        )]
    } else {
        let mut resp = to_resp(&page.results);
        resp.continuation = continuation;
        vec![frame_msg(code::INDEX_RESP, &resp)]
    })
}

/// The `return_body` answer: `RpbIndexBodyResp` frames of keys with their
/// objects, read by GETs in chunks of [`INDEX_STREAM_CHUNK`].
async fn with_bodies(
    kv: &Arc<Kv>,
    bucket: &[u8],
    page: basalt_backend::IndexPage,
    stream: bool,
    out: &FrameTx,
) -> Result<Vec<Vec<u8>>, RequestError> {
    let continuation = page.continuation.map(String::into_bytes);
    let mut all = pb::RpbIndexBodyResp::default();
    for chunk in page.results.chunks(INDEX_STREAM_CHUNK) {
        let mut resp = pb::RpbIndexBodyResp::default();
        for res in chunk {
            let got = kv
                .get(bucket, &res.key, &crate::kv::GetOpts::default())
                .await?;
            if let crate::kv::GetOutcome::Found(o) = got {
                resp.objects.push(pb::RpbIndexObject {
                    key: res.key.clone(),
                    object: pb::RpbGetResp {
                        content: super::contents_pb(&o, true),
                        vclock: Some(o.vclock.encode()),
                        unchanged: None,
                    },
                });
            }
        }
        if !stream {
            all.objects.append(&mut resp.objects);
        } else if !resp.objects.is_empty()
            && out
                .send(frame_msg(code::INDEX_BODY_RESP, &resp))
                .await
                .is_err()
        {
            return Ok(vec![]);
        }
    }
    Ok(vec![frame_msg(
        code::INDEX_BODY_RESP,
        &if stream {
            pb::RpbIndexBodyResp {
                continuation,
                done: Some(true),
                ..Default::default()
            }
        } else {
            all.continuation = continuation;
            all
        },
    )])
}
