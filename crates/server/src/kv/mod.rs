//! The request FSMs of the KV API over the router: GET ([`get`], deciding
//! with [`get_core`]), PUT ([`put`], [`put_core`]), DELETE and tombstone
//! reaping ([`delete`]), list keys and buckets ([`list`]), 2i ([`index`];
//! on one entry of a client's coverage plan: [`cover`]),
//! the CS bucket fold ([`csfold`]) and the anti-entropy fold queries
//! ([`aae_fold`]). Each is an `impl Node` block: the
//! node is the handle a request runs on (router, bucket props, stats); the
//! cores decide from the replies and do no I/O.

pub mod aae_fold;
pub mod cover;
pub mod crdt;
pub mod csfold;
pub mod delete;
pub mod get;
pub mod get_core;
pub mod index;
pub mod list;
pub mod put;
pub mod put_core;

use crate::error::RequestError;
use crate::object::vclock::VClock;
use crate::object::RiakObject;
use std::future::Future;

pub use csfold::{CsFold, CS_FOLD_BATCH};
pub use list::LIST_KEYS_BATCH;

/// Options of a GET.
#[derive(Debug, Clone, Default)]
pub struct GetOpts {
    /// Read quorum (PB encoding).
    pub r: Option<u32>,
    /// Primary read quorum.
    pub pr: Option<u32>,
    /// Count not-found replies as successes.
    pub notfound_ok: Option<bool>,
    /// Riak's `basic_quorum` (`None` = the bucket's prop).
    pub basic_quorum: Option<bool>,
    /// Read only the first `n_val` replicas of the preference list (at most
    /// the bucket's; `None` = the bucket's), as Riak's request `n_val`.
    pub n_val: Option<u32>,
    /// `Some(false)`: primaries only, no fallbacks (Riak's
    /// `sloppy_quorum`; `None` / `true` = fallbacks stand in for owners
    /// that are down).
    pub sloppy_quorum: Option<bool>,
}

/// What a GET found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GetOutcome {
    /// No replica has the key.
    NotFound,
    /// Every sibling is a tombstone; its clock.
    Tombstone(VClock),
    /// The merged object.
    Found(RiakObject),
}

/// Options of a PUT or DELETE.
#[derive(Debug, Clone, Default)]
pub struct PutOpts {
    /// Write quorum.
    pub w: Option<u32>,
    /// Durable-write quorum.
    pub dw: Option<u32>,
    /// Primary-write quorum.
    pub pw: Option<u32>,
    /// Fail with `match_found` if the object exists.
    pub if_none_match: bool,
    /// Fail unless the stored clock equals the request's.
    pub if_not_modified: bool,
    /// Write only the first `n_val` replicas (at most the bucket's; `None`
    /// = the bucket's), as Riak's request `n_val`; quorums count against it.
    pub n_val: Option<u32>,
    /// `Some(false)`: primaries only, no fallbacks (Riak's `sloppy_quorum`).
    pub sloppy_quorum: Option<bool>,
    /// Acknowledgements must come from at least this many distinct nodes
    /// (Riak's `node_confirms`; `None` / 0 = no such rule).
    pub node_confirms: Option<u32>,
}

/// Runs a listing or 2i request within the client's `timeout` (ms; absent
/// or 0 = no limit, as Riak's `infinity`): past it the request fails with
/// Riak's `timeout` error (a stream already started just ends with it).
pub async fn within<T>(
    timeout_ms: Option<u32>,
    request: impl Future<Output = Result<T, RequestError>>,
) -> Result<T, RequestError> {
    match timeout_ms.filter(|ms| *ms > 0) {
        None => request.await,
        Some(ms) => {
            let limit = std::time::Duration::from_millis(u64::from(ms));
            tokio::time::timeout(limit, request)
                .await
                .unwrap_or(Err(RequestError::Timeout))
        }
    }
}
