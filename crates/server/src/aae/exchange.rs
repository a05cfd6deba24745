//! One anti-entropy exchange: the replicas of one preference list (named
//! by its first partition) compare their cached tictac trees for one
//! n_val, and the keys that differ are repaired. Scheduling is in
//! [`super::aae`].
//!
//! 1. **root**: each replica vnode answers its tree's root (one hash per
//!    branch); equal roots end the exchange — in-sync replicas cost a
//!    root compare, no fold; differing roots are compared again after
//!    `aae_confirm_ms` and only branches dirty both times go on (a write
//!    still reaching its replicas is not a repair);
//! 2. **branches**: the segment hashes of at most
//!    [`AAE_MAX_BRANCHES`] dirty branches;
//! 3. **keys**: each replica lists its keys (with their key-state hashes)
//!    in at most [`MAX_DIRTY_SEGMENTS`] dirty segments — a fold filtered
//!    by segment;
//! 4. **repair**: every key whose state differs or that some replica lacks
//!    is repaired by a GET at `r = n`, whose read repair writes the merged
//!    object to the stale replicas; repairs are paced node-wide to
//!    `aae_repairs_per_sec`.
//!
//! **Follow-up loops** (after Riak's range-limited repair loops,
//! riak_kv #1805): when the exchange hit its caps — more dirty branches or
//! segments than one pass examines — it does not leave the rest to later
//! exchanges of the list: it runs up to `aae_max_loops` more passes at
//! once over the dirty branches and segments not examined yet (no new tree
//! compare). Each follow-up is scoped by [`follow_up_scope`] from the keys
//! the pass before repaired: when most of them are in one bucket, it lists
//! only that bucket (within their last-modified range); else, when every
//! repair has a known time, only keys modified in their range; else there
//! is no cheaper listing than the whole vnode and the loops stop. A scoped
//! listing ([`VnodeReq::AaeRangeKeys`]) reads less than a whole-vnode one,
//! so it examines [`AAE_RANGE_BOOST`] times more segments. A key of
//! another bucket in those segments waits for the next exchange.

use super::Aae;
use crate::kv::{GetOpts, GetOutcome};
use crate::limits::{AAE_MAX_BRANCHES, AAE_RANGE_BOOST, MAX_DIRTY_SEGMENTS};
use crate::router::Target;
use crate::vnode::request::{VnodeReply, VnodeReq};
use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::Ordering;
use std::time::Duration;

type BucketKey = (Vec<u8>, Vec<u8>);

/// What one exchange found and did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exchange {
    /// Segments whose hashes differed (in the branches examined).
    pub dirty_segments: usize,
    /// Keys repaired.
    pub repaired: usize,
    /// Follow-up loops run after the first pass.
    pub loops: usize,
    /// Of the keys repaired, those found by scoped (bucket or
    /// last-modified range) follow-up loops.
    pub range_repairs: usize,
    /// Key listings asked of the replicas (one per replica per pass).
    pub listings: usize,
    /// In a round's totals: exchanges skipped (a replica down or unable to
    /// answer, transfers pending, or an exchange of the list running).
    pub skipped: usize,
}

impl Exchange {
    /// Adds `other`'s counts to these.
    pub fn add(&mut self, other: &Exchange) {
        self.dirty_segments += other.dirty_segments;
        self.repaired += other.repaired;
        self.loops += other.loops;
        self.range_repairs += other.range_repairs;
        self.listings += other.listings;
        self.skipped += other.skipped;
    }
}

/// What a follow-up loop lists; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// Keys of this storage bucket (last modified within the range, if
    /// given: microseconds, inclusive).
    Bucket {
        /// Storage bucket.
        bucket: Vec<u8>,
        /// Last-modified range.
        modified: Option<(u64, u64)>,
    },
    /// Keys of every bucket last modified within this range.
    Modified((u64, u64)),
}

/// A last-modified range is widened by this much on each side (the times
/// of a tombstone are its clock's, in whole seconds).
const RANGE_PAD_US: u64 = 1_000_000;

/// The scope of the follow-up loop after a pass that repaired these keys
/// (storage bucket, the repaired object's last-modified time if known):
///
/// * more than two thirds of them in one bucket → that bucket, within
///   the range of their times (when all of those are known);
/// * else, every time known → every bucket, within the range of the times;
/// * else (or nothing repaired) → `None`: no follow-up loop.
///
/// Ranges are padded by a second each side.
pub fn follow_up_scope(repaired: &[(Vec<u8>, Option<u64>)]) -> Option<Scope> {
    if repaired.is_empty() {
        return None;
    }
    let mut per_bucket: BTreeMap<&[u8], usize> = BTreeMap::new();
    for (b, _) in repaired {
        *per_bucket.entry(b.as_slice()).or_default() += 1;
    }
    // The largest count; the smallest bucket name among equals.
    let (top, count) = per_bucket
        .iter()
        .max_by(|a, b| a.1.cmp(b.1).then(b.0.cmp(a.0)))
        .map(|(b, c)| (b.to_vec(), *c))?;
    let range = |times: &mut dyn Iterator<Item = Option<u64>>| -> Option<(u64, u64)> {
        let mut lo = u64::MAX;
        let mut hi = 0u64;
        for t in times {
            let t = t?;
            lo = lo.min(t);
            hi = hi.max(t);
        }
        (lo <= hi).then(|| {
            (
                lo.saturating_sub(RANGE_PAD_US),
                hi.saturating_add(RANGE_PAD_US),
            )
        })
    };
    if count * 3 > repaired.len() * 2 {
        let modified = range(&mut repaired.iter().filter(|(b, _)| *b == top).map(|(_, t)| *t));
        return Some(Scope::Bucket {
            bucket: top,
            modified,
        });
    }
    range(&mut repaired.iter().map(|(_, t)| *t)).map(Scope::Modified)
}

/// The last-modified time (µs) of what a repair GET answered.
fn outcome_time(o: &GetOutcome) -> Option<u64> {
    match o {
        GetOutcome::Found(o) => Some(crate::vnode::aae_range::last_modified_us(o)),
        GetOutcome::Tombstone(vc) => vc
            .entries()
            .iter()
            .map(|e| e.timestamp)
            .max()
            .map(|s| s.saturating_mul(1_000_000)),
        GetOutcome::NotFound => None,
    }
}

impl Aae {
    /// One exchange of the tree (`first`, `n`) between its `n` replicas,
    /// with its follow-up loops (module docs). An error (a replica down or
    /// unable to answer, e.g. its trees not built yet) means the exchange
    /// was skipped; a later one retries.
    pub async fn aae_exchange_n(&self, first: u32, n: u32) -> Result<Exchange, String> {
        let size = self.router.ring.size();
        let targets: Vec<Target> = self.router.cluster.with_state(|s| {
            (0..n)
                .map(|d| {
                    let p = (first + d) % size;
                    Target {
                        partition: p,
                        node: s.owner(p).to_string(),
                        primary: true,
                    }
                })
                .collect()
        });
        if let Some(t) = targets.iter().find(|t| !self.router.cluster.is_up(&t.node)) {
            return Err(format!("{} is down", t.node));
        }
        let Some(_running) = self.aae.start((first, n)) else {
            return Err("an exchange of this list is running".into());
        };
        self.stats().aae_exchanges.fetch_add(1, Ordering::Relaxed);
        let mut x = Exchange::default();
        // 1. Roots; if they differ, again after a pause: only branches
        // dirty both times count (writes in flight are not repairs).
        let mut dirty_branches = differing(&self.aae_roots(&targets, first, n).await?);
        let pause = self.config.aae_confirm_ms;
        if !dirty_branches.is_empty() && pause > 0 {
            tokio::time::sleep(Duration::from_millis(pause)).await;
            let again = differing(&self.aae_roots(&targets, first, n).await?);
            dirty_branches.retain(|b| again.contains(b));
        }
        let mut branches: VecDeque<u32> = dirty_branches.into();
        let mut segments: VecDeque<u32> = VecDeque::new();
        let mut scope: Option<Scope> = None;
        loop {
            let cap = if scope.is_some() {
                MAX_DIRTY_SEGMENTS * AAE_RANGE_BOOST
            } else {
                MAX_DIRTY_SEGMENTS
            };
            // 2. Branches: segment hashes of the next dirty branches.
            if segments.len() < cap && !branches.is_empty() {
                let take = branches.len().min(AAE_MAX_BRANCHES);
                let batch: Vec<u32> = branches.drain(..take).collect();
                let found = self.aae_dirty_segments(&targets, first, n, &batch).await;
                match found {
                    Ok(s) => {
                        x.dirty_segments += s.len();
                        segments.extend(s);
                    }
                    Err(e) if x.listings == 0 => return Err(e),
                    Err(e) => {
                        tracing::debug!(first, error = %e, "anti-entropy follow-up loop stopped");
                        break;
                    }
                }
            }
            let take = segments.len().min(cap);
            let batch: Vec<u32> = segments.drain(..take).collect();
            if batch.is_empty() {
                break;
            }
            // 3. and 4. Keys in those segments; repair what differs.
            let pass = self
                .aae_repair_segments(&targets, first, n, &batch, scope.as_ref())
                .await;
            let repaired = match pass {
                Ok(r) => r,
                Err(e) if x.listings == 0 => return Err(e),
                Err(e) => {
                    tracing::debug!(first, error = %e, "anti-entropy follow-up loop stopped");
                    break;
                }
            };
            x.listings += targets.len();
            x.repaired += repaired.len();
            if scope.is_some() {
                x.range_repairs += repaired.len();
                self.stats()
                    .aae_range_repairs
                    .fetch_add(repaired.len() as u64, Ordering::Relaxed);
            }
            // Follow up at once only when this pass left work behind.
            let capped = !segments.is_empty() || !branches.is_empty();
            if !capped || x.loops >= self.config.aae_max_loops as usize {
                break;
            }
            scope = follow_up_scope(&repaired);
            let Some(s) = &scope else { break };
            x.loops += 1;
            self.stats().aae_loops.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(first, n, loops = x.loops, scope = ?s, "anti-entropy follow-up loop");
        }
        Ok(x)
    }

    /// The segments of `branches` whose hashes differ between the replicas.
    async fn aae_dirty_segments(
        &self,
        targets: &[Target],
        first: u32,
        n: u32,
        branches: &[u32],
    ) -> Result<Vec<u32>, String> {
        let mut branch_sets = Vec::with_capacity(targets.len());
        for t in targets {
            let req = VnodeReq::AaeBranches {
                first,
                n_val: n,
                branches: branches.to_vec(),
            };
            match self.vcall_aae(t, req).await? {
                VnodeReply::AaeBranches(b) => branch_sets.push(b),
                _ => return Err("unexpected anti-entropy branch reply".into()),
            }
        }
        let mut dirty = Vec::new();
        for (i, branch) in branches.iter().enumerate() {
            let segs: Vec<Vec<u64>> = branch_sets
                .iter()
                .map(|set| {
                    set.get(i)
                        .filter(|(b, _)| b == branch)
                        .map_or_else(Vec::new, |(_, s)| s.clone())
                })
                .collect();
            for s in differing(&segs) {
                dirty.push(branch * 256 + s);
            }
        }
        Ok(dirty)
    }

    /// Lists the keys of `segments` on every replica (whole vnodes, or
    /// within `scope`) and repairs those that differ; the repaired keys'
    /// buckets and last-modified times.
    async fn aae_repair_segments(
        &self,
        targets: &[Target],
        first: u32,
        n: u32,
        segments: &[u32],
        scope: Option<&Scope>,
    ) -> Result<Vec<(Vec<u8>, Option<u64>)>, String> {
        let mut keys: BTreeMap<BucketKey, Vec<Option<u64>>> = BTreeMap::new();
        for (i, t) in targets.iter().enumerate() {
            let req = match scope {
                None => VnodeReq::AaeSegmentKeys {
                    first,
                    n_val: n,
                    segments: segments.to_vec(),
                },
                Some(s) => {
                    let (bucket, modified_range) = match s {
                        Scope::Bucket { bucket, modified } => (Some(bucket.clone()), *modified),
                        Scope::Modified(r) => (None, Some(*r)),
                    };
                    VnodeReq::AaeRangeKeys {
                        first,
                        n_val: n,
                        bucket,
                        modified_range,
                        segments: segments.to_vec(),
                    }
                }
            };
            let VnodeReply::AaeKeys(list) = self.vcall_aae(t, req).await? else {
                return Err("unexpected anti-entropy keys reply".into());
            };
            for (b, k, h) in list {
                keys.entry((b, k))
                    .or_insert_with(|| vec![None; targets.len()])[i] = Some(h);
            }
        }
        let mut repaired = Vec::new();
        for ((bucket, key), hashes) in keys {
            if hashes.iter().all(|h| *h == hashes[0]) {
                continue;
            }
            let wait = self.aae.pacer.reserve(std::time::Instant::now());
            if !wait.is_zero() {
                tokio::time::sleep(wait).await;
            }
            let opts = GetOpts {
                r: Some(n),
                ..GetOpts::default()
            };
            match self.get(&bucket, &key, &opts).await {
                Ok(o) => {
                    self.stats().aae_repairs.fetch_add(1, Ordering::Relaxed);
                    let t = outcome_time(&o);
                    repaired.push((bucket, t));
                }
                Err(e) => tracing::debug!(error = %e, "anti-entropy repair GET"),
            }
        }
        Ok(repaired)
    }

    /// Each target's root of tree (`first`, `n`).
    async fn aae_roots(
        &self,
        targets: &[Target],
        first: u32,
        n: u32,
    ) -> Result<Vec<Vec<u64>>, String> {
        let mut roots = Vec::with_capacity(targets.len());
        for t in targets {
            match self
                .vcall_aae(t, VnodeReq::AaeRoot { first, n_val: n })
                .await?
            {
                VnodeReply::AaeRoot(r) => roots.push(r),
                _ => return Err("unexpected anti-entropy root reply".into()),
            }
        }
        Ok(roots)
    }

    async fn vcall_aae(&self, t: &Target, req: VnodeReq) -> Result<VnodeReply, String> {
        self.router
            .vcall(t, req)
            .await
            .map_err(|e| format!("{} partition {}: {e}", t.node, t.partition))
    }
}

/// Positions where the vectors differ (a shorter or empty vector counts as
/// zeros there).
fn differing(v: &[Vec<u64>]) -> Vec<u32> {
    let len = v.iter().map(Vec::len).max().unwrap_or(0);
    (0..len)
        .filter(|&i| {
            let at = |x: &Vec<u64>| x.get(i).copied().unwrap_or(0);
            v.iter().any(|x| at(x) != at(&v[0]))
        })
        .map(|i| i as u32)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn r(b: &str, t: Option<u64>) -> (Vec<u8>, Option<u64>) {
        (b.as_bytes().to_vec(), t)
    }

    const S: u64 = 1_000_000;

    #[test]
    fn nothing_repaired_means_no_follow_up() {
        assert_eq!(follow_up_scope(&[]), None);
    }

    #[test]
    fn a_bucket_holding_most_repairs_scopes_the_follow_up_to_it_and_their_range() {
        let mut v: Vec<_> = (0..7).map(|i| r("big", Some((100 + i) * S))).collect();
        v.push(r("other", Some(5 * S)));
        v.push(r("other", None));
        assert_eq!(
            follow_up_scope(&v),
            Some(Scope::Bucket {
                bucket: b"big".to_vec(),
                modified: Some((99 * S, 107 * S)),
            })
        );
        // One time of the bucket unknown (a tombstone without clock
        // times): the bucket alone, any time.
        v[0].1 = None;
        assert_eq!(
            follow_up_scope(&v),
            Some(Scope::Bucket {
                bucket: b"big".to_vec(),
                modified: None,
            })
        );
    }

    #[test]
    fn two_thirds_exactly_is_not_a_majority_and_falls_back_to_the_time_range() {
        let v = vec![
            r("a", Some(10 * S)),
            r("a", Some(20 * S)),
            r("b", Some(30 * S)),
        ];
        assert_eq!(follow_up_scope(&v), Some(Scope::Modified((9 * S, 31 * S))));
        // Without every time known there is no cheaper listing.
        let v = vec![r("a", Some(10 * S)), r("b", None), r("c", Some(1))];
        assert_eq!(follow_up_scope(&v), None);
    }

    #[test]
    fn ties_pick_the_smallest_bucket_and_a_single_repair_scopes_its_bucket() {
        let v = vec![r("z", Some(S)), r("a", Some(2 * S))];
        assert_eq!(follow_up_scope(&v), Some(Scope::Modified((0, 3 * S))));
        let v = vec![r("k", Some(0))];
        assert_eq!(
            follow_up_scope(&v),
            Some(Scope::Bucket {
                bucket: b"k".to_vec(),
                modified: Some((0, S)),
            })
        );
    }

    #[test]
    fn differing_counts_missing_positions_as_zero() {
        assert_eq!(differing(&[vec![1, 2, 3], vec![1, 0, 3]]), vec![1]);
        assert_eq!(differing(&[vec![0, 5], vec![]]), vec![1]);
        assert!(differing(&[vec![], vec![]]).is_empty());
    }
}
