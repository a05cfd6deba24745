//! Riak's Protocol Buffers services for KV, bucket props and bucket types,
//! one file per service as riak_kv's `riak_kv_pb_*` modules, each file's
//! header listing the codes it serves:
//!
//! * [`object`]: 9, 11, 13 (get, put, delete);
//! * [`bucket`]: 15, 17, 19, 21, 29 (listings, bucket props);
//! * [`index`]: 25 (2i; answers 26, or 42 with `return_body`);
//! * [`coverage`]: 70 (coverage plans for parallel 2i);
//! * [`csbucket`]: 40 (CS bucket fold);
//! * [`btypes`]: 31, 32, 33 (bucket types, preflists), and on the cluster
//!   port 240–246 (bucket-type admin);
//! * [`auth`]: security on the client port — 253 → 254 (`RpbAuthReq`),
//!   255 (`RpbStartTls`) — and the table of every client code's permission.
//!
//! Here: what the services share (decoding, errors, frames). The
//! capabilities serve their own codes (MapReduce 23 in `mapred::pb`, data
//! types 50–52 and 80–82 in `datatypes`, anti-entropy folds 210–231 in
//! `aae::pb`); `server::dispatch` routes each code, and answers a code no
//! service serves with Riak's "Unknown message code" error.

/// [`crate::kv::GetOpts`] from a PB read request's quorum fields
/// (`RpbGetReq` and `DtFetchReq` name them alike).
macro_rules! read_opts {
    ($r:expr) => {
        crate::kv::GetOpts {
            r: $r.r,
            pr: $r.pr,
            notfound_ok: $r.notfound_ok,
            basic_quorum: $r.basic_quorum,
            n_val: $r.n_val,
            sloppy_quorum: $r.sloppy_quorum,
        }
    };
}

pub(crate) use read_opts;

pub mod auth;
pub mod btypes;
pub mod bucket;
pub mod coverage;
pub mod csbucket;
pub mod index;
pub mod membership;
pub mod object;

use crate::error::RequestError;
use crate::object::vclock::VClock;
use crate::object::RiakObject;
use crate::pb::{self, code, frame_msg};
use prost::Message;
use tokio::sync::mpsc;

/// Where a handler sends the frames of a streamed reply.
pub(crate) type FrameTx = mpsc::Sender<Vec<u8>>;

/// Which listener a connection came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Port {
    /// The client PB port: Riak's codes only.
    Client,
    /// The cluster port: node-to-node messages (252/253) and the admin
    /// requests of `basalt admin` (240–248, plus Riak's 32 for
    /// `bucket-type update` and ping).
    Cluster,
}

/// An `RpbErrorResp` frame.
pub(crate) fn error_frame(msg: impl std::fmt::Display) -> Vec<u8> {
    frame_msg(
        code::ERROR_RESP,
        &pb::RpbErrorResp {
            errmsg: msg.to_string().into_bytes(),
            errcode: 0,
        },
    )
}

pub(crate) fn decode<M: Message + Default>(body: &[u8]) -> Result<M, RequestError> {
    M::decode(body).map_err(|e| RequestError::Invalid(format!("malformed message: {e}")))
}

pub(crate) fn check_bk(bucket: &[u8], key: Option<&[u8]>) -> Result<(), RequestError> {
    if bucket.is_empty() {
        return Err(RequestError::Invalid("Bucket cannot be zero-length".into()));
    }
    if key.is_some_and(<[u8]>::is_empty) {
        return Err(RequestError::Invalid("Key cannot be zero-length".into()));
    }
    Ok(())
}

pub(crate) fn decode_vclock(v: &Option<Vec<u8>>) -> Result<Option<VClock>, RequestError> {
    match v {
        None => Ok(None),
        Some(b) => VClock::decode(b)
            .map(Some)
            .map_err(|e| RequestError::Invalid(e.to_string())),
    }
}

/// The siblings as PB contents, newest first as Riak lists them.
pub(crate) fn contents_pb(o: &RiakObject, with_values: bool) -> Vec<pb::RpbContent> {
    o.newest_first()
        .into_iter()
        .map(|c| c.to_pb(with_values))
        .collect()
}

/// [`contents_pb`] taking the object: values move, uncopied.
pub(crate) fn into_contents_pb(o: RiakObject, with_values: bool) -> Vec<pb::RpbContent> {
    o.into_newest_first()
        .into_iter()
        .map(|c| c.into_pb(with_values))
        .collect()
}

/// Riak's answer to a code it does not serve (`riak_api_pb_server`); the
/// connection stays open. The client port gives it to Basalt's own codes
/// too: they are served on the cluster port only.
pub(crate) fn unknown_code(c: u8) -> RequestError {
    RequestError::Invalid(format!("Unknown message code: {c}"))
}
