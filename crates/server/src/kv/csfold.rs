//! The CS bucket fold (`RpbCSBucketReq`): the objects of a key range of one
//! bucket, in key order, over a covering set, each vnode read in bounded
//! rounds after its own cursor; or, with a `cover_context` (one entry of a
//! client's coverage plan, `kv::cover`), over that entry's one vnode,
//! keeping only the keys the entry answers for.

use super::Kv;
use crate::error::RequestError;
use crate::object::RiakObject;
use crate::router::Target;
use crate::vnode::request::{VnodeReply, VnodeReq};
use std::collections::BTreeMap;
use std::future::Future;

pub use crate::limits::CS_FOLD_BATCH;

/// A CS bucket fold (`RpbCSBucketReq`): the objects of one bucket whose keys
/// lie between `start` and `end`, in key order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsFold {
    /// The storage bucket.
    pub bucket: Vec<u8>,
    /// First key.
    pub start: Vec<u8>,
    /// `start` itself is included (Riak's default: true).
    pub start_incl: bool,
    /// Last key; `None` = to the end of the bucket.
    pub end: Option<Vec<u8>>,
    /// `end` itself is included (Riak's default: false).
    pub end_incl: bool,
    /// Resume after the page that returned this continuation.
    pub continuation: Option<Vec<u8>>,
    /// Page size (0 or `None` = everything).
    pub max_results: Option<u32>,
    /// One coverage plan entry's context (`RpbCoverageReq`): fold only its
    /// vnode and keep only the keys whose first primary is the entry's, so
    /// the plan's entries together return every key once.
    pub cover_context: Option<Vec<u8>>,
}

/// One covering vnode's position in a CS bucket fold.
struct FoldCursor {
    target: Target,
    /// The last key this vnode returned (the next round starts after it).
    after: Option<Vec<u8>>,
    /// The vnode has nothing more in the range.
    done: bool,
}

pub(crate) fn encode_cs_continuation(key: &[u8]) -> Vec<u8> {
    let mut raw = vec![1u8];
    raw.extend_from_slice(key);
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, raw).into_bytes()
}

pub(crate) fn decode_cs_continuation(c: &[u8]) -> Option<Vec<u8>> {
    let raw = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, c).ok()?;
    match raw.split_first() {
        Some((1, key)) if !key.is_empty() => Some(key.to_vec()),
        _ => None,
    }
}

impl Kv {
    /// A CS bucket fold over a covering set of vnodes. Each round asks every
    /// covering vnode that is not finished for its next [`CS_FOLD_BATCH`]
    /// keys after its own cursor (one job per vnode), merges the copies of a
    /// key (as a GET's merge; no quorum, no read repair), and hands `emit`
    /// the keys up to the smallest cursor of the unfinished vnodes, in key
    /// order, tombstones left out. So memory stays at about a batch per
    /// vnode whatever the range. With `q.cover_context` the covering set is
    /// the entry's vnode and its keys outside the entry are dropped as
    /// they arrive. `emit` resolving to `false` stops the fold.
    /// Returns the continuation when `max_results` filled the page.
    pub async fn cs_bucket_fold<F, Fut>(
        &self,
        q: &CsFold,
        mut emit: F,
    ) -> Result<Option<Vec<u8>>, RequestError>
    where
        F: FnMut(Vec<(Vec<u8>, RiakObject)>) -> Fut,
        Fut: Future<Output = bool>,
    {
        let props = self.props.get(&q.bucket);
        let (from, from_incl) = match &q.continuation {
            None => (q.start.clone(), q.start_incl),
            Some(c) => {
                let after = decode_cs_continuation(c)
                    .ok_or_else(|| RequestError::Invalid("invalid continuation".into()))?;
                if after < q.start {
                    (q.start.clone(), q.start_incl)
                } else {
                    (after, false)
                }
            }
        };
        let max = q.max_results.filter(|m| *m > 0).map(|m| m as usize);
        let scope = match &q.cover_context {
            Some(c) => Some(self.cover_scope(c)?),
            None => None,
        };
        let targets = match &scope {
            Some(s) => vec![s.target.clone()],
            None => self.router.coverage_or_err(props.n_val)?,
        };
        let mut cursors: Vec<FoldCursor> = targets
            .into_iter()
            .map(|target| FoldCursor {
                target,
                after: None,
                done: false,
            })
            .collect();
        let mut pending: BTreeMap<Vec<u8>, RiakObject> = BTreeMap::new();
        let mut sent = 0usize;
        loop {
            let mut jobs = Vec::new();
            for (i, c) in cursors.iter().enumerate().filter(|(_, c)| !c.done) {
                let (lo, lo_incl) = match &c.after {
                    Some(a) => (a.clone(), false),
                    None => (from.clone(), from_incl),
                };
                let req = VnodeReq::CsFold {
                    bucket: q.bucket.clone(),
                    from: lo,
                    from_incl: lo_incl,
                    end: q.end.clone(),
                    end_incl: q.end_incl,
                    limit: CS_FOLD_BATCH as u32,
                };
                let t = c.target.clone();
                jobs.push(async move { (i, self.router.vcall(&t, req).await) });
            }
            for (i, reply) in futures_util::future::join_all(jobs).await {
                let VnodeReply::CsBatch(wire, last, more) = reply? else {
                    return Err(RequestError::Storage("unexpected CS fold reply".into()));
                };
                let mut objs = Vec::with_capacity(wire.len());
                for (k, w) in wire {
                    objs.push((k, w.object()?));
                }
                let c = &mut cursors[i];
                c.done = !more;
                if last.is_some() {
                    c.after = last;
                }
                for (k, o) in objs {
                    if scope
                        .as_ref()
                        .is_some_and(|s| !self.in_cover(s, &q.bucket, &k))
                    {
                        continue;
                    }
                    let merged = match pending.remove(&k) {
                        Some(m) => RiakObject::merge(&m, &o, props.allow_mult),
                        None => o,
                    };
                    pending.insert(k, merged);
                }
            }
            // Every key up to the smallest cursor of an unfinished vnode is
            // final: no vnode can still return a smaller one.
            let safe: Option<Vec<u8>> = cursors
                .iter()
                .filter(|c| !c.done)
                .filter_map(|c| c.after.clone())
                .min();
            let finished = cursors.iter().all(|c| c.done);
            let rest = match &safe {
                Some(s) if !finished => {
                    let mut rest = pending.split_off(s);
                    if let Some(v) = rest.remove(s) {
                        pending.insert(s.clone(), v);
                    }
                    rest
                }
                _ => BTreeMap::new(),
            };
            let ready = std::mem::replace(&mut pending, rest);
            let mut batch = Vec::new();
            let mut full = false;
            for (k, o) in ready {
                if o.is_deleted() {
                    continue;
                }
                batch.push((k, o));
                sent += 1;
                if max.is_some_and(|m| sent >= m) {
                    full = true;
                    break;
                }
            }
            let last = batch.last().map(|(k, _)| k.clone());
            if !batch.is_empty() && !emit(batch).await {
                return Ok(None);
            }
            if full {
                return Ok(last.map(|k| encode_cs_continuation(&k)));
            }
            if finished {
                return Ok(None);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cs_continuation_roundtrip() {
        let c = encode_cs_continuation(b"key");
        assert_eq!(decode_cs_continuation(&c), Some(b"key".to_vec()));
        assert_eq!(decode_cs_continuation(b"!!"), None);
        let empty = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, [1u8]);
        assert_eq!(decode_cs_continuation(empty.as_bytes()), None);
    }
}
