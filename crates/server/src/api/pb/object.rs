//! The object service (`riak_kv_pb_object`): fetch, store, delete.
//!
//! Codes: `RpbGetReq` 9 → `RpbGetResp` 10, `RpbPutReq` 11 → `RpbPutResp` 12,
//! `RpbDelReq` 13 → `RpbDelResp` 14.

use super::{check_bk, contents_pb, decode, decode_vclock, into_contents_pb};
use crate::error::RequestError;
use crate::kv::Kv;
use crate::kv::{GetOutcome, PutOpts};
use crate::object::{unique_id, Content};
use crate::pb::{self, code, frame, frame_msg};
use std::sync::Arc;

/// `RpbGetReq`.
pub(crate) async fn get(kv: &Arc<Kv>, body: &[u8]) -> Result<Vec<Vec<u8>>, RequestError> {
    let r: pb::RpbGetReq = decode(body)?;
    let sb = kv.types().storage_bucket(r.r#type.as_deref(), &r.bucket)?;
    check_bk(&r.bucket, Some(&r.key))?;
    let if_modified = decode_vclock(&r.if_modified)?;
    let opts = read_opts!(r);
    let resp = match kv
        .get_with_basic_quorum(&sb, &r.key, &opts, r.basic_quorum)
        .await?
    {
        GetOutcome::NotFound => pb::RpbGetResp::default(),
        GetOutcome::Tombstone(vc) => pb::RpbGetResp {
            vclock: r.deletedvclock.unwrap_or(false).then(|| vc.encode()),
            ..Default::default()
        },
        GetOutcome::Found(o) => {
            if if_modified.is_some_and(|v| v.same_events(&o.vclock)) {
                pb::RpbGetResp {
                    unchanged: Some(true),
                    ..Default::default()
                }
            } else {
                pb::RpbGetResp {
                    vclock: Some(o.vclock.encode()),
                    content: into_contents_pb(o, !r.head.unwrap_or(false)),
                    unchanged: None,
                }
            }
        }
    };
    Ok(vec![frame_msg(code::GET_RESP, &resp)])
}

/// `RpbPutReq`.
pub(crate) async fn put(kv: &Arc<Kv>, body: &[u8]) -> Result<Vec<Vec<u8>>, RequestError> {
    let r: pb::RpbPutReq = decode(body)?;
    let sb = kv.types().storage_bucket(r.r#type.as_deref(), &r.bucket)?;
    check_bk(&r.bucket, r.key.as_deref())?;
    let client = decode_vclock(&r.vclock)?;
    let (key, generated) = match r.key {
        Some(k) => (k, false),
        None => (unique_id(), true),
    };
    let mut content = Content::from_pb(r.content);
    content.deleted = false;
    let opts = PutOpts {
        w: r.w,
        dw: r.dw,
        pw: r.pw,
        if_none_match: r.if_none_match.unwrap_or(false),
        if_not_modified: r.if_not_modified.unwrap_or(false),
        n_val: r.n_val,
        sloppy_quorum: r.sloppy_quorum,
        node_confirms: r.node_confirms,
    };
    let obj = kv.put(&sb, &key, client, content, &opts).await?;
    let mut resp = pb::RpbPutResp {
        key: generated.then_some(key),
        ..Default::default()
    };
    let body = r.return_body.unwrap_or(false);
    if let Some(o) = obj.filter(|_| body || r.return_head.unwrap_or(false)) {
        resp.content = contents_pb(&o, body);
        resp.vclock = Some(o.vclock.encode());
    }
    Ok(vec![frame_msg(code::PUT_RESP, &resp)])
}

/// `RpbDelReq`.
pub(crate) async fn delete(kv: &Arc<Kv>, body: &[u8]) -> Result<Vec<Vec<u8>>, RequestError> {
    let r: pb::RpbDelReq = decode(body)?;
    let sb = kv.types().storage_bucket(r.r#type.as_deref(), &r.bucket)?;
    check_bk(&r.bucket, Some(&r.key))?;
    let client = decode_vclock(&r.vclock)?;
    let opts = PutOpts {
        w: r.w,
        dw: r.dw,
        pw: r.pw,
        ..Default::default()
    };
    kv.delete(&sb, &r.key, client, &opts).await?;
    Ok(vec![frame(code::DEL_RESP, &[])])
}
