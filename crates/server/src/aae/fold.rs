//! Anti-entropy fold queries (Riak's `aae_fold`, `riak_kv_clusteraae_fsm`):
//! a [`FoldQuery`] checked against the limits ([`FoldQuery::validate`]),
//! run over a coverage plan (one vnode per preference list, each counting
//! only the keys whose first primary it answers for) and merged here into
//! a [`FoldResult`]. The vnodes' side is `crate::vnode::aae_fold`.
//!
//! * n_val queries: `merge_root_nval` and `merge_branch_nval` XOR the
//!   vnodes' cached trees (no fold; a vnode without built trees makes the
//!   query fail with "trees not built"); `fetch_clocks_nval` is a fold of
//!   the buckets of that n_val filtered by segment of the cached trees.
//! * range queries (one bucket, optional key range, segment filter and
//!   modified range): `merge_tree_range`, `fetch_clocks_range`,
//!   `find_keys`, `object_stats`, `find_tombs`, and the changing ones
//!   `reap_tombs` (through the tombstone reap of DELETE,
//!   [`Kv::reap_tombstone`](crate::kv::Kv::reap_tombstone)) and `erase_keys` (through DELETE,
//!   [`Kv::delete`](crate::kv::Kv::delete)), each with a count-only mode;
//! * `list_buckets`.

use super::Aae;
use crate::error::RequestError;
use crate::limits::{
    AAE_FOLD_CHANGE_BATCH, AAE_FOLD_CHANGE_PARALLEL, AAE_FOLD_MAX_BRANCHES, AAE_FOLD_MAX_RESULTS,
    AAE_FOLD_MAX_SEGMENTS, AAE_FOLD_SCAN_BATCH,
};
use crate::object::vclock::VClock;
use crate::router::Target;
use crate::vnode::aae_fold::{AaeFoldReply, AaeFoldReq, FoldOp, FoundKey, RangePart, RangeWant};
use crate::vnode::request::{VnodeReply, VnodeReq};
use basalt_backend::TreeSize;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;

pub use crate::vnode::aae_fold::{ObjectStats, RangeFilter, TREE_SIZES};

/// Segments per branch of a tictac tree.
const BRANCH: usize = 256;

/// What `find_keys` looks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Finder {
    /// Keys with more than this many siblings.
    SiblingCount(u64),
    /// Keys whose sibling values total more than this many bytes.
    ObjectSize(u64),
}

/// An anti-entropy fold query; see the module docs. It crosses the
/// cluster port when a full-sync asks another cluster (`Msg::ReplFold`).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FoldQuery {
    /// The merged root of the cached trees of `n_val`.
    MergeRootNval {
        /// Replicas.
        n_val: u32,
    },
    /// The merged branches of the cached trees of `n_val`.
    MergeBranchNval {
        /// Replicas.
        n_val: u32,
        /// Branch numbers.
        branches: Vec<u32>,
    },
    /// Keys and clocks of `n_val` in segments of the cached trees.
    FetchClocksNval {
        /// Replicas.
        n_val: u32,
        /// Segments of the cached trees' size.
        segments: Vec<u32>,
        /// Last-modified range (seconds, inclusive).
        modified: Option<(u64, u64)>,
    },
    /// A tictac tree of `size` of a range.
    MergeTreeRange {
        /// The range.
        filter: RangeFilter,
        /// The tree's size.
        size: TreeSize,
    },
    /// Keys and clocks of a range.
    FetchClocksRange {
        /// The range.
        filter: RangeFilter,
    },
    /// Keys of a range with many siblings or a large size.
    FindKeys {
        /// The range.
        filter: RangeFilter,
        /// What to find.
        finder: Finder,
    },
    /// Statistics of a range.
    ObjectStats {
        /// The range.
        filter: RangeFilter,
    },
    /// Tombstones of a range.
    FindTombs {
        /// The range.
        filter: RangeFilter,
    },
    /// Reap the tombstones of a range (or count them).
    ReapTombs {
        /// The range.
        filter: RangeFilter,
        /// Count only.
        count_only: bool,
    },
    /// Delete the live keys of a range (or count them).
    EraseKeys {
        /// The range.
        filter: RangeFilter,
        /// Count only.
        count_only: bool,
    },
    /// Queue every key of a range (tombstones included) as a reference on
    /// this node's sink `queue` at requeue priority (Riak's
    /// `repl_keys_range`); answers the count queued.
    ReplKeys {
        /// The range.
        filter: RangeFilter,
        /// The local sink (queue) name.
        queue: String,
    },
    /// Buckets holding anything, over the coverage of `n_val`.
    ListBuckets {
        /// Replicas of the coverage plan.
        n_val: u32,
    },
}

/// A key found by a list query: storage bucket, key, encoded clock and a
/// value (sibling count, size, or a tombstone's clock hash; for clock
/// listings 1 for a tombstone, else 0).
pub type KeyEntry = FoundKey;

/// The merged answer of a query.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FoldResult {
    /// A tree (`merge_root_nval`: root only; `merge_branch_nval`: branches
    /// only; `merge_tree_range`: root and the non-empty branches).
    Tree {
        /// Its size.
        size: TreeSize,
        /// One hash per branch (empty when not asked).
        root: Vec<u64>,
        /// (branch, 256 segment hashes).
        branches: Vec<(u32, Vec<u64>)>,
    },
    /// Keys (sorted by bucket then key).
    Keys(Vec<KeyEntry>),
    /// Statistics.
    Stats(ObjectStats),
    /// Keys reaped / deleted (requests dispatched) or counted.
    Count(u64),
    /// Storage buckets, sorted.
    Buckets(Vec<Vec<u8>>),
}

impl FoldQuery {
    /// The query's name as Riak's (`merge_root_nval`, ...).
    pub fn name(&self) -> &'static str {
        match self {
            FoldQuery::MergeRootNval { .. } => "merge_root_nval",
            FoldQuery::MergeBranchNval { .. } => "merge_branch_nval",
            FoldQuery::FetchClocksNval { .. } => "fetch_clocks_nval",
            FoldQuery::MergeTreeRange { .. } => "merge_tree_range",
            FoldQuery::FetchClocksRange { .. } => "fetch_clocks_range",
            FoldQuery::FindKeys { .. } => "find_keys",
            FoldQuery::ObjectStats { .. } => "object_stats",
            FoldQuery::FindTombs { .. } => "find_tombs",
            FoldQuery::ReapTombs { .. } => "reap_tombs",
            FoldQuery::EraseKeys { .. } => "erase_keys",
            FoldQuery::ReplKeys { .. } => "repl_keys_range",
            FoldQuery::ListBuckets { .. } => "list_buckets",
        }
    }

    fn filter(&self) -> Option<&RangeFilter> {
        match self {
            FoldQuery::MergeTreeRange { filter, .. }
            | FoldQuery::FetchClocksRange { filter }
            | FoldQuery::FindKeys { filter, .. }
            | FoldQuery::ObjectStats { filter }
            | FoldQuery::FindTombs { filter }
            | FoldQuery::ReapTombs { filter, .. }
            | FoldQuery::EraseKeys { filter, .. }
            | FoldQuery::ReplKeys { filter, .. } => Some(filter),
            _ => None,
        }
    }

    /// Checks the query against the limits: n_val within 1..=ring size,
    /// branches and segments within the cached trees' size (`cached`) or
    /// the filter's and at most [`AAE_FOLD_MAX_BRANCHES`] /
    /// [`AAE_FOLD_MAX_SEGMENTS`], ranges with start ≤ end. The error names
    /// what is wrong.
    pub fn validate(&self, ring_size: u32, cached: TreeSize) -> Result<(), String> {
        let n_val = match self {
            FoldQuery::MergeRootNval { n_val }
            | FoldQuery::MergeBranchNval { n_val, .. }
            | FoldQuery::FetchClocksNval { n_val, .. }
            | FoldQuery::ListBuckets { n_val } => Some(*n_val),
            _ => None,
        };
        if let Some(n) = n_val {
            if n == 0 || n > ring_size {
                return Err(format!("n_val {n} out of range (1..={ring_size})"));
            }
        }
        match self {
            FoldQuery::MergeBranchNval { branches, .. } => {
                if branches.is_empty() {
                    return Err("no branches asked for".into());
                }
                if branches.len() > AAE_FOLD_MAX_BRANCHES {
                    return Err(format!(
                        "{} branches asked for; at most {AAE_FOLD_MAX_BRANCHES} per request",
                        branches.len()
                    ));
                }
                if let Some(b) = branches.iter().find(|b| **b >= cached.width()) {
                    return Err(format!(
                        "branch {b} out of range: the cached trees have {} branches",
                        cached.width()
                    ));
                }
            }
            FoldQuery::FetchClocksNval {
                segments, modified, ..
            } => {
                check_segments(segments, cached)?;
                check_modified(*modified)?;
            }
            _ => {}
        }
        if let Some(f) = self.filter() {
            if f.bucket.is_empty() {
                return Err("Bucket cannot be zero-length".into());
            }
            if let Some((s, e)) = &f.keys {
                if s > e {
                    return Err("bad key range: start key is after end key".into());
                }
            }
            check_modified(f.modified)?;
            if let Some((w, segs)) = &f.segments {
                let size = crate::vnode::aae_fold::size_of_width(*w)
                    .map_err(|_| format!("no tree size of width {w}"))?;
                check_segments(segs, size)?;
            }
        }
        Ok(())
    }
}

fn check_segments(segments: &[u32], size: TreeSize) -> Result<(), String> {
    if segments.len() > AAE_FOLD_MAX_SEGMENTS {
        return Err(format!(
            "{} segments in the filter; at most {AAE_FOLD_MAX_SEGMENTS} per request",
            segments.len()
        ));
    }
    if let Some(s) = segments.iter().find(|s| **s >= size.segments()) {
        return Err(format!(
            "segment {s} out of range: a tree of this size has {} segments",
            size.segments()
        ));
    }
    Ok(())
}

fn check_modified(m: Option<(u64, u64)>) -> Result<(), String> {
    match m {
        Some((lo, hi)) if lo > hi => Err("bad modified range: start is after end".into()),
        _ => Ok(()),
    }
}

/// The name of a tree size (`xxsmall` .. `xlarge`).
pub fn tree_size_name(s: TreeSize) -> &'static str {
    s.name()
}

/// A tree from sparse (segment, hash) pairs: the root (XOR of each
/// branch's segments) and the non-empty branches.
pub fn tree_from_segments(
    size: TreeSize,
    segments: &BTreeMap<u32, u64>,
) -> (Vec<u64>, Vec<(u32, Vec<u64>)>) {
    let mut root = vec![0u64; size.width() as usize];
    let mut branches: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
    for (&s, &h) in segments {
        if h == 0 || s >= size.segments() {
            continue;
        }
        let b = s / BRANCH as u32;
        root[b as usize] ^= h;
        branches.entry(b).or_insert_with(|| vec![0; BRANCH])[s as usize % BRANCH] ^= h;
    }
    (root, branches.into_iter().collect())
}

/// A tombstone's clock hash, Riak's `delete_hash` role: 32 bits of the
/// clock's xxh3.
pub fn delete_hash(clock: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(clock) & 0xFFFF_FFFF
}

impl Aae {
    /// Runs an anti-entropy fold query over a coverage plan; see the
    /// module docs. Bad input is [`RequestError::Invalid`] naming it.
    pub async fn aae_fold(self: &Arc<Self>, q: &FoldQuery) -> Result<FoldResult, RequestError> {
        self.stats.aae_fold_requests.fetch_add(1, Ordering::Relaxed);
        let cached = self
            .config
            .aae_tree_size()
            .map_err(|e| RequestError::Invalid(e.to_string()))?;
        q.validate(self.router.ring.size(), cached)
            .map_err(RequestError::Invalid)?;
        let max = AAE_FOLD_MAX_RESULTS as u32 + 1;
        match q {
            FoldQuery::MergeRootNval { n_val } => {
                let mut root = vec![0u64; cached.width() as usize];
                for (_, r) in self
                    .fold_round(*n_val, || FoldOp::Root { n_val: *n_val })
                    .await?
                {
                    let AaeFoldReply::Root(r) = r else {
                        return Err(unexpected());
                    };
                    for (a, h) in root.iter_mut().zip(r) {
                        *a ^= h;
                    }
                }
                Ok(FoldResult::Tree {
                    size: cached,
                    root,
                    branches: Vec::new(),
                })
            }
            FoldQuery::MergeBranchNval { n_val, branches } => {
                let mut want: Vec<u32> = branches.clone();
                want.sort_unstable();
                want.dedup();
                let mut out: BTreeMap<u32, Vec<u64>> =
                    want.iter().map(|b| (*b, vec![0; BRANCH])).collect();
                let op = || FoldOp::Branches {
                    n_val: *n_val,
                    branches: want.clone(),
                };
                for (_, r) in self.fold_round(*n_val, op).await? {
                    let AaeFoldReply::Branches(bs) = r else {
                        return Err(unexpected());
                    };
                    for (b, segs) in bs {
                        let acc = out.entry(b).or_insert_with(|| vec![0; BRANCH]);
                        for (a, h) in acc.iter_mut().zip(segs) {
                            *a ^= h;
                        }
                    }
                }
                Ok(FoldResult::Tree {
                    size: cached,
                    root: Vec::new(),
                    branches: out.into_iter().collect(),
                })
            }
            FoldQuery::FetchClocksNval {
                n_val,
                segments,
                modified,
            } => {
                let op = || FoldOp::ClocksNval {
                    n_val: *n_val,
                    segments: segments.clone(),
                    modified: *modified,
                    limit: max,
                };
                let replies = self.fold_round(*n_val, op).await?;
                collect_keys(replies)
            }
            FoldQuery::MergeTreeRange { filter, size } => {
                let acc = self
                    .range_rounds(filter, RangeWant::Tree(size.width()), false)
                    .await?;
                let (root, branches) = tree_from_segments(*size, &acc.segments);
                Ok(FoldResult::Tree {
                    size: *size,
                    root,
                    branches,
                })
            }
            FoldQuery::FetchClocksRange { filter } => {
                let acc = self.range_rounds(filter, RangeWant::Clocks, false).await?;
                Ok(acc.into_keys())
            }
            FoldQuery::FindKeys { filter, finder } => {
                let want = match finder {
                    Finder::SiblingCount(n) => RangeWant::Siblings(*n),
                    Finder::ObjectSize(n) => RangeWant::Sizes(*n),
                };
                Ok(self.range_rounds(filter, want, false).await?.into_keys())
            }
            FoldQuery::FindTombs { filter } => {
                let mut res = self
                    .range_rounds(filter, RangeWant::Tombs, false)
                    .await?
                    .into_keys();
                if let FoldResult::Keys(keys) = &mut res {
                    for k in keys.iter_mut() {
                        k.3 = delete_hash(&k.2);
                    }
                }
                Ok(res)
            }
            FoldQuery::ObjectStats { filter } => {
                let acc = self.range_rounds(filter, RangeWant::Stats, false).await?;
                Ok(FoldResult::Stats(acc.stats))
            }
            FoldQuery::ReapTombs { filter, count_only } => {
                self.change_range(filter, RangeWant::Tombs, *count_only, None)
                    .await
            }
            FoldQuery::ReplKeys { filter, queue } => {
                let sink = self.key_queue(queue).ok_or_else(|| {
                    RequestError::Invalid(format!(
                        "no replication queue named {queue} on this node"
                    ))
                })?;
                self.change_range(filter, RangeWant::Clocks, false, Some(sink))
                    .await
            }
            FoldQuery::EraseKeys { filter, count_only } => {
                self.change_range(filter, RangeWant::Live, *count_only, None)
                    .await
            }
            FoldQuery::ListBuckets { n_val } => {
                let mut all = std::collections::BTreeSet::new();
                for (_, r) in self.fold_round(*n_val, || FoldOp::Buckets).await? {
                    let AaeFoldReply::Buckets(b) = r else {
                        return Err(unexpected());
                    };
                    all.extend(b);
                }
                Ok(FoldResult::Buckets(all.into_iter().collect()))
            }
        }
    }

    fn n_val_of(&self, f: &RangeFilter) -> u32 {
        self.props.get(&f.bucket).n_val
    }

    /// Sends `op()` to every vnode of the coverage plan of `n_val` at once;
    /// their replies. A vnode without built trees fails the query.
    async fn fold_round(
        &self,
        n_val: u32,
        op: impl Fn() -> FoldOp,
    ) -> Result<Vec<(Target, AaeFoldReply)>, RequestError> {
        let plan = self
            .router
            .coverage_plan(n_val)
            .ok_or_else(|| RequestError::Invalid("insufficient_vnodes_available".into()))?;
        let ring_size = self.router.ring.size();
        let calls = plan.into_iter().map(|(t, firsts)| {
            let req = VnodeReq::AaeFold(AaeFoldReq {
                ring_size,
                firsts,
                op: op(),
            });
            async move {
                let r = self.router.vcall(&t, req).await;
                (t, r)
            }
        });
        let mut out = Vec::new();
        for (t, r) in futures_util::future::join_all(calls).await {
            match r? {
                VnodeReply::AaeFold(AaeFoldReply::NotBuilt) => {
                    return Err(not_built(&t));
                }
                VnodeReply::AaeFold(r) => out.push((t, r)),
                _ => return Err(unexpected()),
            }
        }
        Ok(out)
    }

    /// A range query over the coverage plan of the bucket's n_val: every
    /// covering vnode at once, each in rounds of at most
    /// [`AAE_FOLD_SCAN_BATCH`] keys after its own cursor; the rounds merged.
    async fn range_rounds(
        &self,
        filter: &RangeFilter,
        want: RangeWant,
        count_only: bool,
    ) -> Result<RangeAcc, RequestError> {
        let plan = self
            .router
            .coverage_plan(self.n_val_of(filter))
            .ok_or_else(|| RequestError::Invalid("insufficient_vnodes_available".into()))?;
        let ring_size = self.router.ring.size();
        let limit = AAE_FOLD_MAX_RESULTS as u32 + 1;
        let per_vnode = plan.into_iter().map(|(t, firsts)| async move {
            let mut acc = RangeAcc::default();
            let mut after: Option<Vec<u8>> = None;
            loop {
                let req = VnodeReq::AaeFold(AaeFoldReq {
                    ring_size,
                    firsts: firsts.clone(),
                    op: range_op(filter, want, after.clone(), limit, count_only),
                });
                let part = match self.router.vcall(&t, req).await? {
                    VnodeReply::AaeFold(AaeFoldReply::Range(p)) => p,
                    _ => return Err(unexpected()),
                };
                let more = part.more;
                after.clone_from(&part.last);
                acc.add(part)?;
                if !more || after.is_none() {
                    return Ok(acc);
                }
            }
        });
        let mut total = RangeAcc::default();
        for r in futures_util::future::join_all(per_vnode).await {
            total.merge(r?)?;
        }
        Ok(total)
    }

    /// `reap_tombs` (`want` = tombstones) and `erase_keys` (`want` = live
    /// keys): each covering vnode in rounds of [`AAE_FOLD_CHANGE_BATCH`]
    /// keys after its cursor; each key found is reaped through
    /// [`Kv::reap_tombstone`](crate::kv::Kv::reap_tombstone) (every replica must hold the same
    /// tombstone) or deleted through [`Kv::delete`](crate::kv::Kv::delete) with the clock the
    /// fold saw. Count-only: counting rounds, nothing changed. Returns
    /// the keys counted or dispatched.
    async fn change_range(
        self: &Arc<Self>,
        filter: &RangeFilter,
        want: RangeWant,
        count_only: bool,
        requeue: Option<Arc<dyn super::KeyQueue>>,
    ) -> Result<FoldResult, RequestError> {
        if count_only {
            let acc = self.range_rounds(filter, want, true).await?;
            return Ok(FoldResult::Count(acc.count));
        }
        let n_val = self.n_val_of(filter);
        let plan = self
            .router
            .coverage_plan(n_val)
            .ok_or_else(|| RequestError::Invalid("insufficient_vnodes_available".into()))?;
        let ring_size = self.router.ring.size();
        let mut dispatched = 0u64;
        for (t, firsts) in plan {
            let mut after: Option<Vec<u8>> = None;
            loop {
                let req = VnodeReq::AaeFold(AaeFoldReq {
                    ring_size,
                    firsts: firsts.clone(),
                    op: range_op(filter, want, after.clone(), AAE_FOLD_CHANGE_BATCH, false),
                });
                let part = match self.router.vcall(&t, req).await? {
                    VnodeReply::AaeFold(AaeFoldReply::Range(p)) => p,
                    _ => return Err(unexpected()),
                };
                let (keys, more) = (part.keys, part.more);
                after = part.last;
                if let Some(sink) = &requeue {
                    dispatched += sink.requeue(keys);
                    if !more || after.is_none() {
                        break;
                    }
                    continue;
                }
                for chunk in keys.chunks(AAE_FOLD_CHANGE_PARALLEL) {
                    let jobs = chunk.iter().map(|(b, k, clock, _)| async move {
                        let vc = VClock::decode(clock)
                            .map_err(|e| RequestError::Storage(e.to_string()))?;
                        if want == RangeWant::Tombs {
                            self.kv.try_reap(b, k, &vc, true).await.map(|_| ())
                        } else {
                            self.kv
                                .delete(b, k, Some(vc), &crate::kv::PutOpts::default())
                                .await
                        }
                    });
                    for r in futures_util::future::join_all(jobs).await {
                        r?;
                        dispatched += 1;
                    }
                }
                if !more || after.is_none() {
                    break;
                }
            }
        }
        Ok(FoldResult::Count(dispatched))
    }
}

fn range_op(
    filter: &RangeFilter,
    want: RangeWant,
    after: Option<Vec<u8>>,
    limit: u32,
    count_only: bool,
) -> FoldOp {
    FoldOp::Range {
        filter: filter.clone(),
        want,
        after,
        limit,
        scan: AAE_FOLD_SCAN_BATCH,
        count_only,
    }
}

/// The merged rounds of a range query.
#[derive(Debug, Default)]
struct RangeAcc {
    segments: BTreeMap<u32, u64>,
    stats: ObjectStats,
    count: u64,
    keys: Vec<KeyEntry>,
}

impl RangeAcc {
    /// Adds one round; more than [`AAE_FOLD_MAX_RESULTS`] keys is an error.
    fn add(&mut self, part: RangePart) -> Result<(), RequestError> {
        for (seg, h) in part.segments {
            *self.segments.entry(seg).or_default() ^= h;
        }
        self.stats.merge(&part.stats);
        self.count += part.count;
        self.keys.extend(part.keys);
        if self.keys.len() > AAE_FOLD_MAX_RESULTS {
            return Err(too_many());
        }
        Ok(())
    }

    fn merge(&mut self, other: RangeAcc) -> Result<(), RequestError> {
        self.add(RangePart {
            segments: other.segments.into_iter().collect(),
            stats: other.stats,
            count: other.count,
            keys: other.keys,
            last: None,
            more: false,
        })
    }

    /// The keys, sorted by bucket then key.
    fn into_keys(mut self) -> FoldResult {
        self.keys.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
        FoldResult::Keys(self.keys)
    }
}

/// The keys of every vnode, sorted; more than [`AAE_FOLD_MAX_RESULTS`] is
/// an error.
fn collect_keys(replies: Vec<(Target, AaeFoldReply)>) -> Result<FoldResult, RequestError> {
    let mut all = Vec::new();
    for (_, r) in replies {
        let AaeFoldReply::Keys(keys, more) = r else {
            return Err(unexpected());
        };
        if more {
            return Err(too_many());
        }
        all.extend(keys);
        if all.len() > AAE_FOLD_MAX_RESULTS {
            return Err(too_many());
        }
    }
    all.sort_by(|a, b| (&a.0, &a.1).cmp(&(&b.0, &b.1)));
    Ok(FoldResult::Keys(all))
}

fn too_many() -> RequestError {
    RequestError::Invalid(format!(
        "more than {AAE_FOLD_MAX_RESULTS} keys match: narrow the query (key range, segment filter, modified range)"
    ))
}

fn not_built(t: &Target) -> RequestError {
    RequestError::Invalid(format!(
        "trees not built on partition {} of {}: the rebuild scheduler builds missing trees when anti-entropy is on (or `basalt admin aae rebuild`); retry later",
        t.partition, t.node
    ))
}

fn unexpected() -> RequestError {
    RequestError::Storage("unexpected aae fold reply".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn range(keys: Option<(&str, &str)>) -> RangeFilter {
        RangeFilter {
            bucket: b"b".to_vec(),
            keys: keys.map(|(s, e)| (s.as_bytes().to_vec(), e.as_bytes().to_vec())),
            ..RangeFilter::default()
        }
    }

    #[test]
    fn validation_names_the_bad_input() {
        let xs = TreeSize::XSmall;
        let ok = |q: FoldQuery| q.validate(64, xs);
        assert!(ok(FoldQuery::MergeRootNval { n_val: 3 }).is_ok());
        assert!(ok(FoldQuery::MergeRootNval { n_val: 0 })
            .unwrap_err()
            .contains("n_val 0 out of range"));
        assert!(ok(FoldQuery::ListBuckets { n_val: 65 })
            .unwrap_err()
            .contains("n_val 65"));
        let e = ok(FoldQuery::MergeBranchNval {
            n_val: 3,
            branches: vec![64],
        })
        .unwrap_err();
        assert!(e.contains("branch 64 out of range"), "{e}");
        let e = ok(FoldQuery::MergeBranchNval {
            n_val: 3,
            branches: vec![0; AAE_FOLD_MAX_BRANCHES + 1],
        })
        .unwrap_err();
        assert!(e.contains("at most"), "{e}");
        let e = ok(FoldQuery::FetchClocksNval {
            n_val: 3,
            segments: vec![xs.segments()],
            modified: None,
        })
        .unwrap_err();
        assert!(e.contains("segment"), "{e}");
        let e = ok(FoldQuery::FetchClocksRange {
            filter: range(Some(("z", "a"))),
        })
        .unwrap_err();
        assert!(e.contains("bad key range"), "{e}");
        let mut f = range(None);
        f.modified = Some((10, 5));
        let e = ok(FoldQuery::ObjectStats { filter: f }).unwrap_err();
        assert!(e.contains("bad modified range"), "{e}");
        let mut f = range(None);
        f.segments = Some((3, vec![1]));
        let e = ok(FoldQuery::FindTombs { filter: f }).unwrap_err();
        assert!(e.contains("no tree size"), "{e}");
        assert!(ok(FoldQuery::FetchClocksRange {
            filter: range(Some(("a", "a")))
        })
        .is_ok());
    }

    #[test]
    fn a_sparse_tree_becomes_root_and_branches() {
        let size = TreeSize::XXSmall;
        let segs = BTreeMap::from([(0u32, 1u64), (1, 2), (256, 4), (4095, 8), (300, 0)]);
        let (root, branches) = tree_from_segments(size, &segs);
        assert_eq!(root.len(), 16);
        assert_eq!(root[0], 3);
        assert_eq!(root[1], 4);
        assert_eq!(root[15], 8);
        assert_eq!(
            branches.iter().map(|(b, _)| *b).collect::<Vec<_>>(),
            vec![0, 1, 15]
        );
        assert_eq!(branches[0].1[1], 2);
        assert_eq!(branches[2].1[255], 8);
    }
}
