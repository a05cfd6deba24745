//! Security on the client PB port (codes 253 `RpbAuthReq` → 254
//! `RpbAuthResp`, 255 `RpbStartTls`), as `riak_api_pb_server`: with
//! security enabled a connection must upgrade to TLS, then authenticate,
//! before anything else; then each request needs the permission its code
//! maps to ([`rule`]) on the bucket (or bucket type) it names.
//!
//! [`rule`] is the one table of the client port's codes and their
//! permissions; `crates/server/tests/security.rs` fails when the port
//! serves a code this table does not name.

use crate::error::RequestError;
use crate::pb::{self, code};
use crate::security::Security;
use std::net::IpAddr;

pub use crate::security::Rule;

/// The rule of every code the client port serves; `None` for a code it
/// does not serve (answered "Unknown message code").
pub fn rule(c: u8) -> Option<Rule> {
    use Rule::*;
    Some(match c {
        code::PING_REQ
        | code::GET_CLIENT_ID_REQ
        | code::SET_CLIENT_ID_REQ
        | code::GET_SERVER_INFO_REQ
        | code::AUTH_REQ
        | code::START_TLS
        | code::MEMBERSHIP_REQ => Open,
        code::GET_REQ | code::COUNTER_GET_REQ | code::DT_FETCH_REQ => Bucket("riak_kv.get"),
        code::COUNTER_UPDATE_REQ | code::DT_UPDATE_REQ => Bucket("riak_kv.put"),
        code::PUT_REQ => Bucket("riak_kv.put"),
        code::DEL_REQ => Bucket("riak_kv.delete"),
        code::LIST_BUCKETS_REQ => Type("riak_kv.list_buckets"),
        code::LIST_KEYS_REQ => Bucket("riak_kv.list_keys"),
        code::GET_BUCKET_REQ => Bucket("riak_core.get_bucket"),
        code::SET_BUCKET_REQ | code::RESET_BUCKET_REQ => Bucket("riak_core.set_bucket"),
        code::INDEX_REQ | code::CS_BUCKET_REQ => Bucket("riak_kv.index"),
        code::COVERAGE_REQ => Bucket("riak_kv.cover"),
        code::GET_BUCKET_TYPE_REQ => Type("riak_core.get_bucket_type"),
        code::SET_BUCKET_TYPE_REQ => Type("riak_core.set_bucket_type"),
        code::GET_BUCKET_KEY_PREFLIST_REQ => Bucket("riak_kv.get_preflist"),
        // A job's inputs may name any bucket (or none: key filters, 2i,
        // listed keys of many buckets): granted on ANY only.
        code::MAP_RED_REQ => Any("riak_kv.mapreduce"),
        code::AAE_FOLD_REPL_KEYS_REQ => Any("basalt.repl"),
        210..=219 | 223 | 230 | 231 => Any("basalt.aae_fold"),
        _ => return None,
    })
}

/// (bucket type, bucket) a request names.
type Named = (Option<Vec<u8>>, Option<Vec<u8>>);

/// (bucket type, bucket) a request names, by decoding its body.
fn target(c: u8, body: &[u8]) -> Result<Named, RequestError> {
    use super::decode;
    Ok(match c {
        code::GET_REQ => {
            let r: pb::RpbGetReq = decode(body)?;
            (r.r#type, Some(r.bucket))
        }
        code::PUT_REQ => {
            let r: pb::RpbPutReq = decode(body)?;
            (r.r#type, Some(r.bucket))
        }
        code::DEL_REQ => {
            let r: pb::RpbDelReq = decode(body)?;
            (r.r#type, Some(r.bucket))
        }
        code::LIST_BUCKETS_REQ => {
            let r: pb::RpbListBucketsReq = decode(body)?;
            (r.r#type, None)
        }
        code::LIST_KEYS_REQ => {
            let r: pb::RpbListKeysReq = decode(body)?;
            (r.r#type, Some(r.bucket))
        }
        code::GET_BUCKET_REQ => {
            let r: pb::RpbGetBucketReq = decode(body)?;
            (r.r#type, Some(r.bucket))
        }
        code::SET_BUCKET_REQ => {
            let r: pb::RpbSetBucketReq = decode(body)?;
            (r.r#type, Some(r.bucket))
        }
        code::RESET_BUCKET_REQ => {
            let r: pb::RpbResetBucketReq = decode(body)?;
            (r.r#type, Some(r.bucket))
        }
        code::INDEX_REQ => {
            let r: pb::RpbIndexReq = decode(body)?;
            (r.r#type, Some(r.bucket))
        }
        code::CS_BUCKET_REQ => {
            let r: pb::RpbCsBucketReq = decode(body)?;
            (r.r#type, Some(r.bucket))
        }
        code::COVERAGE_REQ => {
            let r: pb::RpbCoverageReq = decode(body)?;
            (r.r#type, Some(r.bucket))
        }
        code::GET_BUCKET_TYPE_REQ => {
            let r: pb::RpbGetBucketTypeReq = decode(body)?;
            (Some(r.r#type), None)
        }
        code::SET_BUCKET_TYPE_REQ => {
            let r: pb::RpbSetBucketTypeReq = decode(body)?;
            (Some(r.r#type), None)
        }
        code::COUNTER_GET_REQ => {
            let r: pb::RpbCounterGetReq = decode(body)?;
            (None, Some(r.bucket))
        }
        code::COUNTER_UPDATE_REQ => {
            let r: pb::RpbCounterUpdateReq = decode(body)?;
            (None, Some(r.bucket))
        }
        code::DT_FETCH_REQ => {
            let r: pb::DtFetchReq = decode(body)?;
            (Some(r.r#type), Some(r.bucket))
        }
        code::DT_UPDATE_REQ => {
            let r: pb::DtUpdateReq = decode(body)?;
            (Some(r.r#type), Some(r.bucket))
        }
        code::GET_BUCKET_KEY_PREFLIST_REQ => {
            let r: pb::RpbGetBucketKeyPreflistReq = decode(body)?;
            (r.r#type, Some(r.bucket))
        }
        _ => (None, None),
    })
}

/// Where a connection stands with security.
#[derive(Debug, Default)]
pub struct Session {
    /// The connection runs over TLS.
    pub tls: bool,
    /// The authenticated user.
    pub user: Option<String>,
    /// The common name of the client certificate the TLS handshake
    /// verified (against `tls_cacertfile`), if one was presented.
    pub cert_cn: Option<String>,
}

/// Checks request `c` of a connection from `peer` against security; `Ok`
/// when it may run (security off, or allowed). `RpbAuthReq` and
/// `RpbStartTls` are handled by the caller before this.
pub fn check(
    sec: &Security,
    session: &Session,
    peer: IpAddr,
    c: u8,
    body: &[u8],
) -> Result<(), RequestError> {
    if !sec.enabled() {
        return Ok(());
    }
    let refuse = |user: Option<&str>, why: String| {
        sec.refused(&peer.to_string(), user, &why);
        Err(RequestError::Invalid(why))
    };
    if !session.tls {
        return refuse(None, "Security is enabled, please STARTTLS first".into());
    }
    let Some(user) = session.user.as_deref() else {
        return refuse(
            None,
            "Security is enabled, please authenticate first".into(),
        );
    };
    let Some(rule) = rule(c) else {
        return Ok(()); // unknown code: the dispatcher says so
    };
    let (btype, bucket) = match rule {
        Rule::Open | Rule::Any(_) => (None, None),
        Rule::Type(_) => (target(c, body)?.0, None),
        Rule::Bucket(_) => target(c, body)?,
    };
    match sec.permit(user, rule, btype.as_deref(), bucket.as_deref()) {
        Ok(()) => Ok(()),
        Err(e) => refuse(Some(user), e.to_string()),
    }
}

/// `RpbAuthReq`: authenticates the connection's user; the reply frame.
/// The password is hashed off the async workers, a bounded number at
/// once; a user that failed too often from this address is refused at
/// once for a cool-down (`Security::login`).
pub async fn authenticate(
    sec: &Security,
    session: &mut Session,
    peer: IpAddr,
    body: &[u8],
) -> Result<Vec<u8>, RequestError> {
    if !sec.enabled() {
        return Err(RequestError::Invalid("Security not enabled".into()));
    }
    if !session.tls {
        sec.refused(&peer.to_string(), None, "AuthReq before STARTTLS");
        return Err(RequestError::Invalid(
            "Security is enabled, please STARTTLS first".into(),
        ));
    }
    let r: pb::RpbAuthReq = super::decode(body)?;
    let user = String::from_utf8_lossy(&r.user).into_owned();
    let password = String::from_utf8_lossy(&r.password).into_owned();
    match sec
        .login(&user, &password, peer, session.cert_cn.as_deref())
        .await
    {
        Ok(()) => {
            session.user = Some(user);
            Ok(pb::frame(code::AUTH_RESP, &[]))
        }
        Err(e) => {
            sec.refused(&peer.to_string(), Some(&user), &e.to_string());
            Err(RequestError::Invalid(e.to_string()))
        }
    }
}
