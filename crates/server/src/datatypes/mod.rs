//! Data-type requests (riak_kv's `crdt_op` path): a fetch is a GET whose
//! value is the join of the object's siblings of the type
//! ([`crate::object::datatype::value_of`]); an update sends the operation
//! to a coordinating vnode ([`crate::vnode::merge::coordinate_crdt`]),
//! which applies it to its merged local value as a new event of its own
//! actor, then replicates the result like any PUT. The bucket's datatype
//! is checked by the API layer ([`check_datatype`]); here it is given.

pub mod counter_pb;
pub mod http;
pub mod pb;
pub mod rebuild;

use crate::bucket::props::BucketProps;
use crate::crdt::{Crdt, DataType};
use crate::error::RequestError;
use crate::kv::Kv;
use crate::kv::{GetOpts, GetOutcome, PutOpts};
use crate::object::datatype::value_of;
use crate::object::RiakObject;
use crate::vnode::merge::CrdtUpdate;
use crate::vnode::request::VnodeReq;
use std::sync::Arc;

/// The datatype of a bucket for a data-type request, with Riak's errors
/// (riak_kv_pb_crdt): the bucket must allow siblings and carry a
/// supported `datatype`.
pub fn check_datatype(props: &BucketProps) -> Result<DataType, RequestError> {
    if !props.allow_mult {
        return Err(RequestError::Invalid(
            "Bucket must be allow_mult=true".into(),
        ));
    }
    match props.datatype.as_deref() {
        Some(d) => DataType::from_name(d).ok_or_else(|| {
            RequestError::Invalid(format!("Bucket datatype `{d}` is not a supported type"))
        }),
        None => Err(RequestError::Invalid(
            "Bucket datatype `undefined` is not a supported type".into(),
        )),
    }
}

/// The value of data type `t` at (`bucket`, `key`) (`None`: not found,
/// deleted, or holding no value of the type).
pub async fn fetch(
    kv: &Kv,
    bucket: &[u8],
    key: &[u8],
    t: DataType,
    opts: &GetOpts,
) -> Result<Option<Crdt>, RequestError> {
    let _timer = kv.stats.latency.timer(crate::latency::Op::DataType);
    match kv.get(bucket, key, opts).await? {
        GetOutcome::NotFound | GetOutcome::Tombstone(_) => Ok(None),
        GetOutcome::Found(o) => value_of(&o, t).map_err(|e| RequestError::Storage(e.to_string())),
    }
}

/// Applies `update` to (`bucket`, `key`); returns the written object.
pub async fn update(
    kv: &Kv,
    bucket: &[u8],
    key: &[u8],
    update: CrdtUpdate,
    opts: &PutOpts,
) -> Result<Arc<RiakObject>, RequestError> {
    kv.stats
        .puts
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let _timer = kv.stats.latency.timer(crate::latency::Op::Put);
    let _dt_timer = kv.stats.latency.timer(crate::latency::Op::DataType);
    let props = kv.props.get(bucket);
    let quorum = crate::kv::put::WriteQuorum::of(&props, opts)?;
    let (secs, usecs) = crate::kv::put::now();
    let req = VnodeReq::CoordinateCrdt {
        bucket: bucket.to_vec(),
        key: key.to_vec(),
        update,
        props: props.clone(),
        now_us: secs * 1_000_000 + u64::from(usecs),
    };
    kv.coordinate_and_replicate(bucket, key, &props, quorum, req)
        .await?
        .ok_or_else(|| RequestError::Storage("a data-type update wrote nothing".into()))
}
