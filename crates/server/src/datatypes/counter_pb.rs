//! The 1.4 counter service (`riak_kv_pb_counter`).
//!
//! Codes: `RpbCounterUpdateReq` 50 → `RpbCounterUpdateResp` 51,
//! `RpbCounterGetReq` 52 → `RpbCounterGetResp` 53.
//!
//! A 1.4 counter lives in a `default`-type bucket with `allow_mult=true`
//! (Riak's error otherwise), stored as a data-type object of type
//! `counter` (content type `application/riak_counter`), so it merges like
//! any data type; plain siblings beside it are left alone. A counter that
//! does not exist answers no value.

use crate::api::pb::{check_bk, decode};
use crate::crdt::{DataType, Op, Value};
use crate::error::RequestError;
use crate::kv::Kv;
use crate::kv::{GetOpts, PutOpts};
use crate::pb::{self, code, frame_msg};
use crate::vnode::merge::CrdtUpdate;
use std::sync::Arc;

/// `RpbCounterUpdateReq`.
pub(crate) async fn update(kv: &Arc<Kv>, body: &[u8]) -> Result<Vec<Vec<u8>>, RequestError> {
    let r: pb::RpbCounterUpdateReq = decode(body)?;
    let opts = PutOpts {
        w: r.w,
        dw: r.dw,
        pw: r.pw,
        ..PutOpts::default()
    };
    let v = update_value(kv, &r.bucket, &r.key, r.amount, &opts).await?;
    Ok(vec![frame_msg(
        code::COUNTER_UPDATE_RESP,
        &pb::RpbCounterUpdateResp {
            value: r.returnvalue.unwrap_or(false).then_some(v),
        },
    )])
}

/// `RpbCounterGetReq`.
pub(crate) async fn get(kv: &Arc<Kv>, body: &[u8]) -> Result<Vec<Vec<u8>>, RequestError> {
    let r: pb::RpbCounterGetReq = decode(body)?;
    let opts = GetOpts {
        r: r.r,
        pr: r.pr,
        notfound_ok: r.notfound_ok,
        basic_quorum: r.basic_quorum,
        n_val: None,
        sloppy_quorum: None,
    };
    let value = get_value(kv, &r.bucket, &r.key, &opts).await?;
    Ok(vec![frame_msg(
        code::COUNTER_GET_RESP,
        &pb::RpbCounterGetResp { value },
    )])
}

/// Adds `amount` to the counter at (`bucket`, `key`) of the default type;
/// the new value.
pub(crate) async fn update_value(
    kv: &Kv,
    bucket: &[u8],
    key: &[u8],
    amount: i64,
    opts: &PutOpts,
) -> Result<i64, RequestError> {
    check_bk(bucket, Some(key))?;
    let sb = kv.types().storage_bucket(None, bucket)?;
    if !kv.props().get(&sb).allow_mult {
        return Err(RequestError::Invalid(
            "Counters require bucket property 'allow_mult=true'".into(),
        ));
    }
    let update = CrdtUpdate {
        datatype: DataType::Counter,
        op: Op::Counter(amount),
        context: None,
    };
    let written = super::update(kv, &sb, key, update, opts).await?;
    match crate::object::datatype::value_of(&written, DataType::Counter) {
        Ok(Some(c)) => match c.value() {
            Value::Counter(v) => Ok(v),
            _ => Err(RequestError::Storage("a counter holds another type".into())),
        },
        Ok(None) => Err(RequestError::Storage("the update wrote no counter".into())),
        Err(e) => Err(RequestError::Storage(e.to_string())),
    }
}

/// The counter at (`bucket`, `key`) of the default type (`None`: none).
pub(crate) async fn get_value(
    kv: &Kv,
    bucket: &[u8],
    key: &[u8],
    opts: &GetOpts,
) -> Result<Option<i64>, RequestError> {
    check_bk(bucket, Some(key))?;
    let sb = kv.types().storage_bucket(None, bucket)?;
    let found = super::fetch(kv, &sb, key, DataType::Counter, opts).await?;
    Ok(found.and_then(|c| match c.value() {
        Value::Counter(v) => Some(v),
        _ => None,
    }))
}
