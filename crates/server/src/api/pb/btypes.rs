//! The bucket-type service (`riak_core_pb_bucket_type`, and
//! `riak_kv_pb_bucket_key_apl` for preflists), plus Basalt's bucket-type
//! admin requests (`basalt admin bucket-type`, served on the cluster port
//! only).
//!
//! Codes: `RpbGetBucketTypeReq` 31 → `RpbGetBucketResp` 20,
//! `RpbSetBucketTypeReq` 32 → `RpbSetBucketResp` 22,
//! `RpbGetBucketKeyPreflistReq` 33 → `RpbGetBucketKeyPreflistResp` 34;
//! admin: 240 [`BasaltBucketTypeReq`] create → 241 (empty); 242 activate →
//! 243 (empty); 244 list (empty body) → 245 [`BasaltBucketTypeListResp`];
//! 246 status ([`BasaltBucketTypeReq`]) → 245 with one entry.

use super::decode;
use crate::bucket::types::{type_name, TypeStatus};
use crate::error::RequestError;
use crate::kv::Kv;
use crate::pb::{self, frame, frame_msg};

/// Message codes of bucket types, preflists and Basalt's admin requests,
/// from the shared table (`riak_pb::code`, `riak_pb::code::basalt`).
pub mod code {
    pub use riak_pb::code::basalt::{
        ADMIN_TYPE_ACTIVATE_REQ, ADMIN_TYPE_ACTIVATE_RESP, ADMIN_TYPE_CREATE_REQ,
        ADMIN_TYPE_CREATE_RESP, ADMIN_TYPE_LIST_REQ, ADMIN_TYPE_LIST_RESP, ADMIN_TYPE_STATUS_REQ,
    };
    pub use riak_pb::code::{
        GET_BUCKET_KEY_PREFLIST_REQ, GET_BUCKET_KEY_PREFLIST_RESP, GET_BUCKET_TYPE_REQ,
        SET_BUCKET_TYPE_REQ,
    };
}

/// Basalt's own admin messages (`riak-pb`'s `proto-basalt/basalt.proto`).
pub use crate::pb::{BasaltBucketTypeInfo, BasaltBucketTypeListResp, BasaltBucketTypeReq};

fn bad(msg: impl Into<String>) -> RequestError {
    RequestError::Invalid(msg.into())
}

/// Handles Riak's codes 31–34; `None` = not one of them.
pub(crate) fn handle(kv: &Kv, c: u8, body: &[u8]) -> Result<Option<Vec<Vec<u8>>>, RequestError> {
    use crate::pb::code as pbc;
    let types = kv.types();
    let frames = match c {
        code::GET_BUCKET_TYPE_REQ => {
            let r: pb::RpbGetBucketTypeReq = decode(body)?;
            let name = type_name(&r.r#type)?;
            let t = types
                .get(name)
                .ok_or_else(|| bad(format!("No bucket-type named '{name}'")))?;
            vec![frame_msg(
                pbc::GET_BUCKET_RESP,
                &pb::RpbGetBucketResp {
                    props: t.props.to_pb(),
                },
            )]
        }
        code::SET_BUCKET_TYPE_REQ => {
            let r: pb::RpbSetBucketTypeReq = decode(body)?;
            types.update(&r.r#type, &r.props)?;
            vec![frame(pbc::SET_BUCKET_RESP, &[])]
        }
        code::GET_BUCKET_KEY_PREFLIST_REQ => {
            let r: pb::RpbGetBucketKeyPreflistReq = decode(body)?;
            let sb = types.storage_bucket(r.r#type.as_deref(), &r.bucket)?;
            if r.key.is_empty() {
                return Err(bad("Key cannot be zero-length"));
            }
            let preflist = kv
                .preflist_of(&sb, &r.key)
                .into_iter()
                .map(|t| pb::RpbBucketKeyPreflistItem {
                    partition: i64::from(t.partition),
                    node: t.node.into_bytes(),
                    primary: t.primary,
                })
                .collect();
            vec![frame_msg(
                code::GET_BUCKET_KEY_PREFLIST_RESP,
                &pb::RpbGetBucketKeyPreflistResp { preflist },
            )]
        }
        _ => return Ok(None),
    };
    Ok(Some(frames))
}

/// Handles the Basalt-only admin codes 240–246 (cluster port only);
/// `None` = not one of them.
pub(crate) fn handle_admin(
    kv: &Kv,
    c: u8,
    body: &[u8],
) -> Result<Option<Vec<Vec<u8>>>, RequestError> {
    let types = kv.types();
    let frames = match c {
        code::ADMIN_TYPE_CREATE_REQ => {
            let r: BasaltBucketTypeReq = decode(body)?;
            types.create(&r.r#type, &r.props.unwrap_or_default())?;
            vec![frame(code::ADMIN_TYPE_CREATE_RESP, &[])]
        }
        code::ADMIN_TYPE_ACTIVATE_REQ => {
            let r: BasaltBucketTypeReq = decode(body)?;
            types.activate(&r.r#type)?;
            vec![frame(code::ADMIN_TYPE_ACTIVATE_RESP, &[])]
        }
        code::ADMIN_TYPE_LIST_REQ | code::ADMIN_TYPE_STATUS_REQ => {
            let all = types.list();
            let want = if c == code::ADMIN_TYPE_STATUS_REQ {
                let r: BasaltBucketTypeReq = decode(body)?;
                let name = type_name(&r.r#type)?.to_string();
                if !all.iter().any(|(n, _)| *n == name) {
                    return Err(bad(format!("{name} is not an existing bucket type")));
                }
                Some(name)
            } else {
                None
            };
            let types = all
                .into_iter()
                .filter(|(n, _)| want.as_ref().is_none_or(|w| w == n))
                .map(|(n, t)| BasaltBucketTypeInfo {
                    r#type: n.into_bytes(),
                    active: t.status == TypeStatus::Active,
                    props: t.props.to_pb(),
                })
                .collect();
            vec![frame_msg(
                code::ADMIN_TYPE_LIST_RESP,
                &BasaltBucketTypeListResp { types },
            )]
        }
        _ => return Ok(None),
    };
    Ok(Some(frames))
}
