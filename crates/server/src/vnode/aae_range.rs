//! Serving [`VnodeReq::AaeRangeKeys`](super::request::VnodeReq): the keys
//! of one cached tree (preference list `first`, `n_val`) in some segments,
//! scoped to one bucket and a last-modified range, for the follow-up loops
//! of an anti-entropy exchange (`aae::exchange`).
//!
//! The answer is the same (bucket, key, key-state hash) list as
//! `AaeSegmentKeys`, restricted to the scope, so a replica lacking a key
//! (or holding a version outside the range) is told apart from replicas
//! holding it. A key's last-modified time is its object's: the greatest
//! last-modified time of its siblings, the same on every replica holding
//! the same version.
//!
//! On a backend with head folds (`Capability::FoldHeads`: leveled) the
//! listing is one head fold of the bucket alone, filtered by segment, and
//! prefiltered by the time the store recorded its write (at or after the
//! object's own time, less [`AAE_RANGE_CLOCK_SLACK_US`] for clock skew),
//! which lets the engine skip ledger blocks holding only older writes.
//! Other backends fold the bucket's keys and read each head in the
//! segments.

use super::aae_tree::key_state_hash;
use super::request::VnodeReply;
use super::{VnodeAae, VnodeError, VnodeState};
use crate::limits::{AAE_RANGE_BOOST, AAE_RANGE_CLOCK_SLACK_US, MAX_DIRTY_SEGMENTS};
use crate::object::RiakObject;
use basalt_backend::{Capability, FoldOptions};
use std::collections::BTreeSet;
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;

/// (bucket, key, key-state hash) of the keys listed.
type Keys = Vec<(Vec<u8>, Vec<u8>, u64)>;

impl VnodeState {
    /// Serves `AaeRangeKeys` (see the module docs).
    pub(crate) fn aae_range_keys(
        &self,
        first: u32,
        n_val: u32,
        bucket: Option<&[u8]>,
        modified_range: Option<(u64, u64)>,
        segments: Vec<u32>,
    ) -> Result<VnodeReply, VnodeError> {
        let aae = self.aae.as_ref().ok_or(VnodeError::Remote(
            "this vnode keeps no anti-entropy trees".into(),
        ))?;
        let mut want: Vec<u32> = segments
            .into_iter()
            .take(MAX_DIRTY_SEGMENTS * AAE_RANGE_BOOST)
            .collect();
        want.sort_unstable();
        want.dedup();
        aae.folds.fetch_add(1, Ordering::Relaxed);
        let mut out = Keys::new();
        let mut failed: Option<VnodeError> = None;
        let mut keep = |b: &[u8], k: &[u8], meta: &[u8]| -> ControlFlow<()> {
            match scoped_hash(aae, first, n_val, modified_range, b, k, meta) {
                Ok(Some(h)) => out.push((b.to_vec(), k.to_vec(), h)),
                Ok(None) => {}
                Err(e) => {
                    failed = Some(e);
                    return ControlFlow::Break(());
                }
            }
            ControlFlow::Continue(())
        };
        if self.backend.capabilities().has(Capability::FoldHeads) {
            let opts = FoldOptions {
                journal_check: aae.journal_check,
                segments: Some((aae.size, want)),
                modified_range: modified_range
                    .map(|(lo, _)| (lo.saturating_sub(AAE_RANGE_CLOCK_SLACK_US), u64::MAX)),
                ..FoldOptions::default()
            };
            self.backend
                .fold_heads(bucket, None, &opts, &mut |b, k, h| keep(b, k, &h.metadata))?;
        } else {
            let want: BTreeSet<u32> = want.into_iter().collect();
            let buckets = match bucket {
                Some(b) => vec![b.to_vec()],
                None => self.backend.list_buckets()?,
            };
            for b in buckets {
                let mut keys = Vec::new();
                self.backend.fold_keys(&b, None, &mut |k| {
                    if want.contains(&basalt_backend::segment_of(&b, k, aae.size)) {
                        keys.push(k.to_vec());
                    }
                    ControlFlow::Continue(())
                })?;
                for k in keys {
                    let Some(head) = self.backend.head(&b, &k)? else {
                        continue;
                    };
                    if keep(&b, &k, &head.metadata).is_break() {
                        break;
                    }
                }
            }
        }
        if let Some(e) = failed {
            return Err(e);
        }
        Ok(VnodeReply::AaeKeys(out))
    }
}

/// The key-state hash of (`bucket`, `key`) if it belongs to the tree
/// (`first`, `n_val`) and its object's last-modified time is in `range`.
fn scoped_hash(
    aae: &VnodeAae,
    first: u32,
    n_val: u32,
    range: Option<(u64, u64)>,
    bucket: &[u8],
    key: &[u8],
    metadata: &[u8],
) -> Result<Option<u64>, VnodeError> {
    if (aae.n_val_of)(bucket) != n_val {
        return Ok(None);
    }
    let (btype, name) = crate::bucket::keying::split_storage_bucket(bucket);
    if aae
        .ring
        .first_primary(&crate::ring::key_hash(btype, name, key))
        != first
    {
        return Ok(None);
    }
    let o = RiakObject::decode_metadata(metadata)?;
    if let Some((lo, hi)) = range {
        let t = last_modified_us(&o);
        if t < lo || t > hi {
            return Ok(None);
        }
    }
    Ok(Some(key_state_hash(bucket, key, o.state_hash())))
}

/// An object's last-modified time: the greatest of its siblings'
/// (microseconds since the epoch; 0 without siblings).
pub fn last_modified_us(o: &RiakObject) -> u64 {
    o.contents
        .iter()
        .map(crate::object::Content::last_mod_us)
        .max()
        .unwrap_or(0)
}
