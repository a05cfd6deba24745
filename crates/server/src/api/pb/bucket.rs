//! The bucket service (`riak_kv_pb_bucket`): listings and bucket props.
//!
//! Codes: `RpbListBucketsReq` 15 → `RpbListBucketsResp` 16 (streamed when
//! asked), `RpbListKeysReq` 17 → `RpbListKeysResp` 18 (streamed, then
//! `done`), `RpbGetBucketReq` 19 → `RpbGetBucketResp` 20,
//! `RpbSetBucketReq` 21 → `RpbSetBucketResp` 22, `RpbResetBucketReq` 29 →
//! `RpbResetBucketResp` 30.

use super::{decode, FrameTx};
use crate::error::RequestError;
use crate::kv::Kv;
use crate::limits::LIST_KEYS_FRAME_KEYS;
use crate::pb::{self, code, frame, frame_msg};
use std::sync::Arc;

/// `RpbListBucketsReq`.
pub(crate) async fn list_buckets(kv: &Arc<Kv>, body: &[u8]) -> Result<Vec<Vec<u8>>, RequestError> {
    let r: pb::RpbListBucketsReq = decode(body)?;
    let btype = kv.types().resolve(r.r#type.as_deref())?;
    let buckets = crate::kv::within(r.timeout, kv.list_buckets())
        .await?
        .into_iter()
        .filter_map(
            |sb| match crate::bucket::keying::split_storage_bucket(&sb) {
                (t, b) if t == btype.as_deref() => Some(b.to_vec()),
                _ => None,
            },
        )
        .collect();
    if !r.stream.unwrap_or(false) {
        return Ok(vec![frame_msg(
            code::LIST_BUCKETS_RESP,
            &pb::RpbListBucketsResp {
                buckets,
                done: None,
            },
        )]);
    }
    // Streamed: one batch, then the `done` frame. Like riak_kv_pb_bucket, an
    // empty listing sends no empty batch, only `done`: riakc reads an empty
    // batch as the end of the stream and the `done` frame behind it as the
    // answer to the connection's next request.
    let mut frames = Vec::with_capacity(2);
    if !buckets.is_empty() {
        frames.push(frame_msg(
            code::LIST_BUCKETS_RESP,
            &pb::RpbListBucketsResp {
                buckets,
                done: None,
            },
        ));
    }
    frames.push(frame_msg(
        code::LIST_BUCKETS_RESP,
        &pb::RpbListBucketsResp {
            buckets: vec![],
            done: Some(true),
        },
    ));
    Ok(frames)
}

/// `RpbListKeysReq`.
pub(crate) async fn list_keys(
    kv: &Arc<Kv>,
    body: &[u8],
    out: &FrameTx,
) -> Result<Vec<Vec<u8>>, RequestError> {
    let r: pb::RpbListKeysReq = decode(body)?;
    let sb = kv.types().storage_bucket(r.r#type.as_deref(), &r.bucket)?;
    // Each covering vnode's batch is sent as soon as it is read.
    let listing = kv.list_keys(&sb, |keys| {
        let out = out.clone();
        async move {
            let mut keys = keys.into_iter();
            loop {
                let chunk: Vec<Vec<u8>> = keys.by_ref().take(LIST_KEYS_FRAME_KEYS).collect();
                if chunk.is_empty() {
                    return true;
                }
                let resp = pb::RpbListKeysResp {
                    keys: chunk,
                    done: None,
                };
                if out
                    .send(frame_msg(code::LIST_KEYS_RESP, &resp))
                    .await
                    .is_err()
                {
                    return false;
                }
            }
        }
    });
    crate::kv::within(r.timeout, listing).await?;
    Ok(vec![frame_msg(
        code::LIST_KEYS_RESP,
        &pb::RpbListKeysResp {
            keys: vec![],
            done: Some(true),
        },
    )])
}

/// `RpbGetBucketReq`.
pub(crate) async fn get_props(kv: &Arc<Kv>, body: &[u8]) -> Result<Vec<Vec<u8>>, RequestError> {
    let r: pb::RpbGetBucketReq = decode(body)?;
    let sb = kv.types().storage_bucket(r.r#type.as_deref(), &r.bucket)?;
    let props = kv.props().get(&sb).to_pb();
    Ok(vec![frame_msg(
        code::GET_BUCKET_RESP,
        &pb::RpbGetBucketResp { props },
    )])
}

/// `RpbSetBucketReq`.
pub(crate) async fn set_props(kv: &Arc<Kv>, body: &[u8]) -> Result<Vec<Vec<u8>>, RequestError> {
    let r: pb::RpbSetBucketReq = decode(body)?;
    let sb = kv.types().storage_bucket(r.r#type.as_deref(), &r.bucket)?;
    kv.props().set(&sb, &r.props)?;
    Ok(vec![frame(code::SET_BUCKET_RESP, &[])])
}

/// `RpbResetBucketReq`.
pub(crate) async fn reset_props(kv: &Arc<Kv>, body: &[u8]) -> Result<Vec<Vec<u8>>, RequestError> {
    let r: pb::RpbResetBucketReq = decode(body)?;
    let sb = kv.types().storage_bucket(r.r#type.as_deref(), &r.bucket)?;
    kv.props().reset(&sb)?;
    Ok(vec![frame(code::RESET_BUCKET_RESP, &[])])
}
