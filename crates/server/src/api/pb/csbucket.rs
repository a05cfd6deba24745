//! The CS bucket fold service (`riak_kv_pb_csbucket`).
//!
//! Codes: `RpbCSBucketReq` 40 → `RpbCSBucketResp` 41 (objects streamed in
//! frames of [`crate::limits::CS_BUCKET_FRAME_OBJECTS`], then `done` with
//! the continuation). With `cover_context` (an entry of an `RpbCoverageReq`
//! plan) only that entry's share of the bucket is folded.

use super::{check_bk, contents_pb, decode, FrameTx};
use crate::error::RequestError;
use crate::kv::CsFold;
use crate::kv::Kv;
use crate::limits::CS_BUCKET_FRAME_OBJECTS;
use crate::pb::{self, code, frame_msg};
use std::sync::Arc;

/// `RpbCSBucketReq`.
pub(crate) async fn fold(
    kv: &Arc<Kv>,
    body: &[u8],
    out: &FrameTx,
) -> Result<Vec<Vec<u8>>, RequestError> {
    let r: pb::RpbCsBucketReq = decode(body)?;
    let sb = kv.types().storage_bucket(r.r#type.as_deref(), &r.bucket)?;
    check_bk(&r.bucket, None)?;
    let q = CsFold {
        bucket: sb,
        start: r.start_key,
        start_incl: r.start_incl.unwrap_or(true),
        end: r.end_key,
        end_incl: r.end_incl.unwrap_or(false),
        continuation: r.continuation,
        max_results: r.max_results,
        cover_context: r.cover_context,
    };
    // Objects stream in key order as the fold's rounds produce them,
    // then `{done = true, continuation?}`.
    let continuation = kv
        .cs_bucket_fold(&q, |objs| {
            let out = out.clone();
            async move {
                for chunk in objs.chunks(CS_BUCKET_FRAME_OBJECTS) {
                    let resp = pb::RpbCsBucketResp {
                        objects: chunk
                            .iter()
                            .map(|(k, o)| pb::RpbIndexObject {
                                key: k.clone(),
                                object: pb::RpbGetResp {
                                    content: contents_pb(o, true),
                                    vclock: Some(o.vclock.encode()),
                                    unchanged: None,
                                },
                            })
                            .collect(),
                        continuation: None,
                        done: None,
                    };
                    if out
                        .send(frame_msg(code::CS_BUCKET_RESP, &resp))
                        .await
                        .is_err()
                    {
                        return false;
                    }
                }
                true
            }
        })
        .await?;
    Ok(vec![frame_msg(
        code::CS_BUCKET_RESP,
        &pb::RpbCsBucketResp {
            objects: vec![],
            continuation,
            done: Some(true),
        },
    )])
}
