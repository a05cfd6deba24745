//! A vnode's share of an anti-entropy fold query (Riak's `aae_fold`, see
//! `crate::aae::fold` for the coordinator): the request and reply as
//! data ([`AaeFoldReq`], [`AaeFoldReply`]) and their serving on the vnode's
//! worker ([`VnodeState::aae_fold_query`]).
//!
//! Every request names the first primaries the vnode answers for in the
//! coverage plan (`firsts`), so each key counts once across the covering
//! set. The n_val queries on roots and branches read the cached trees and
//! never fold the store (absent trees answer [`AaeFoldReply::NotBuilt`]);
//! the others fold the heads of one bucket's key range in rounds of a
//! bounded number of keys after a cursor (one job each, so a long range
//! never holds the vnode's worker for long), or, for the n_val key-clock
//! query, the buckets of that n_val filtered by segment; list answers stop
//! after `limit` matching keys.

use super::{VnodeError, VnodeState};
use crate::object::RiakObject;
use basalt_backend::{segment_of, Capability, FoldOptions, KeyRange, TreeSize};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;

/// Above every valid key (keys are at most 64 KiB): the open end of a range.
static KEY_ABOVE_ALL: [u8; 65_537] = [0xFF; 65_537];

/// The filters of a range query: one bucket, an optional inclusive key
/// range, an optional segment filter (segments of a tree of the given
/// size) and an optional last-modified range (seconds, inclusive; a key's
/// last-modified is the newest of its siblings').
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangeFilter {
    /// Storage bucket.
    pub bucket: Vec<u8>,
    /// First and last key (inclusive); `None` = the whole bucket.
    pub keys: Option<(Vec<u8>, Vec<u8>)>,
    /// Pass only keys in these segments of a tree of this width
    /// ([`TreeSize::width`]).
    pub segments: Option<(u32, Vec<u32>)>,
    /// Pass only keys last modified within `low..=high` (seconds).
    pub modified: Option<(u64, u64)>,
}

/// What a range fold collects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum RangeWant {
    /// A tictac tree of this width ([`TreeSize::width`]) of the keys, sparse.
    Tree(u32),
    /// (bucket, key, clock) of every key, tombstones included.
    Clocks,
    /// Keys with more than this many siblings (value = sibling count).
    Siblings(u64),
    /// Keys larger than this many bytes (value = size).
    Sizes(u64),
    /// Count, total size and histograms of the live keys.
    Stats,
    /// Tombstones (value = 0, clock given).
    Tombs,
    /// Live keys with their clocks (for erase).
    Live,
}

/// One vnode's part of an aae fold.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct AaeFoldReq {
    /// Ring size (to place keys).
    pub ring_size: u32,
    /// First primaries this vnode answers for.
    pub firsts: Vec<u32>,
    /// The work.
    pub op: FoldOp,
}

/// The work of an [`AaeFoldReq`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum FoldOp {
    /// XOR of the cached roots of (first, n_val) for the firsts.
    Root {
        /// Replicas.
        n_val: u32,
    },
    /// XOR of the cached branches of (first, n_val) for the firsts.
    Branches {
        /// Replicas.
        n_val: u32,
        /// Branch numbers.
        branches: Vec<u32>,
    },
    /// (bucket, key, clock) of the keys of buckets with this n_val in
    /// these segments of the cached trees' size.
    ClocksNval {
        /// Replicas.
        n_val: u32,
        /// Segments.
        segments: Vec<u32>,
        /// Last-modified range (seconds).
        modified: Option<(u64, u64)>,
        /// Keys returned at most.
        limit: u32,
    },
    /// A fold of a bucket's key range.
    Range {
        /// The filters.
        filter: RangeFilter,
        /// What to collect.
        want: RangeWant,
        /// Start after this key (batches of erase and reap).
        after: Option<Vec<u8>>,
        /// Keys returned at most (list results).
        limit: u32,
        /// Keys scanned at most in this round (ordered backends).
        scan: u32,
        /// Count matches only (no keys returned).
        count_only: bool,
    },
    /// Buckets holding anything.
    Buckets,
}

/// A found key: (storage bucket, key, encoded clock, value).
pub type FoundKey = (Vec<u8>, Vec<u8>, Vec<u8>, u64);

/// The answer of one vnode.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AaeFoldReply {
    /// This vnode has no cached trees yet (the rebuild scheduler builds
    /// missing trees).
    NotBuilt,
    /// A merged root: one hash per branch.
    Root(Vec<u64>),
    /// Merged branches: (branch, 256 segment hashes).
    Branches(Vec<(u32, Vec<u64>)>),
    /// Keys found (`fetch_clocks_nval`), in key order, and whether more
    /// remain.
    Keys(Vec<FoundKey>, bool),
    /// One round of a range query.
    Range(RangePart),
    /// Buckets.
    Buckets(Vec<Vec<u8>>),
}

/// One round of a range query: what it collected (the part its
/// [`RangeWant`] fills) and where the next round starts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RangePart {
    /// A sparse tree: (segment, hash) of the non-empty segments.
    pub segments: Vec<(u32, u64)>,
    /// Object statistics.
    pub stats: ObjectStats,
    /// Matching keys counted (count-only).
    pub count: u64,
    /// Keys found, in key order.
    pub keys: Vec<FoundKey>,
    /// Every key up to this one was folded; the next round starts after it.
    pub last: Option<Vec<u8>>,
    /// Keys of the range remain after `last`.
    pub more: bool,
}

/// Riak's `object_stats`: count, total size, a histogram of sizes by order
/// of magnitude (order = digits − 1: 0 for 0–9 bytes, 1 for 10–99, …) and a
/// histogram of sibling counts.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ObjectStats {
    /// Objects.
    pub total_count: u64,
    /// Bytes of their sibling values.
    pub total_size: u64,
    /// Order of magnitude of the size → objects.
    pub sizes: BTreeMap<u32, u64>,
    /// Sibling count → objects.
    pub siblings: BTreeMap<u32, u64>,
}

/// The order of magnitude of `n`: 0 for 0..=9, 1 for 10..=99, ...
pub fn power10(mut n: u64) -> u32 {
    let mut order = 0;
    while n >= 10 {
        n /= 10;
        order += 1;
    }
    order
}

impl ObjectStats {
    /// Counts one object of `size` bytes with `siblings` siblings.
    pub fn add(&mut self, size: u64, siblings: u32) {
        self.total_count += 1;
        self.total_size += size;
        *self.sizes.entry(power10(size)).or_default() += 1;
        *self.siblings.entry(siblings).or_default() += 1;
    }

    /// Adds another vnode's statistics.
    pub fn merge(&mut self, other: &ObjectStats) {
        self.total_count += other.total_count;
        self.total_size += other.total_size;
        for (k, v) in &other.sizes {
            *self.sizes.entry(*k).or_default() += v;
        }
        for (k, v) in &other.siblings {
            *self.siblings.entry(*k).or_default() += v;
        }
    }
}

/// An object's size for the fold queries: the bytes of its sibling values.
pub fn object_size(o: &RiakObject) -> u64 {
    o.contents.iter().map(|c| u64::from(c.value_len)).sum()
}

/// An object's last-modified time in seconds (its newest sibling's).
pub fn last_modified(o: &RiakObject) -> u64 {
    o.contents
        .iter()
        .map(|c| u64::from(c.last_mod))
        .max()
        .unwrap_or(0)
}

/// Every tree size, smallest first.
pub const TREE_SIZES: [TreeSize; 6] = [
    TreeSize::XXSmall,
    TreeSize::XSmall,
    TreeSize::Small,
    TreeSize::Medium,
    TreeSize::Large,
    TreeSize::XLarge,
];

/// The tree size of a width.
pub fn size_of_width(w: u32) -> Result<TreeSize, VnodeError> {
    TREE_SIZES
        .iter()
        .copied()
        .find(|s| s.width() == w)
        .ok_or_else(|| VnodeError::Remote(format!("no tree of width {w}")))
}

/// Callback of a head fold: (bucket, key, decoded metadata).
type HeadsFn<'a> = dyn FnMut(&[u8], &[u8], RiakObject) -> ControlFlow<()> + 'a;

impl VnodeState {
    /// Serves one vnode's part of an aae fold.
    pub fn aae_fold_query(&self, q: AaeFoldReq) -> Result<AaeFoldReply, VnodeError> {
        let ring = crate::ring::Ring::new(q.ring_size)
            .ok_or_else(|| VnodeError::Remote(format!("bad ring size {}", q.ring_size)))?;
        let firsts: BTreeSet<u32> = q.firsts.into_iter().collect();
        let covered = |bucket: &[u8], key: &[u8]| {
            let (btype, name) = crate::bucket::keying::split_storage_bucket(bucket);
            firsts.contains(&ring.first_primary(&crate::ring::key_hash(btype, name, key)))
        };
        match q.op {
            FoldOp::Root { n_val } => {
                let aae = self.keeps_trees()?;
                let guard = aae.trees.lock();
                let Some(trees) = guard.as_ref() else {
                    return Ok(AaeFoldReply::NotBuilt);
                };
                let mut root = vec![0u64; aae.size.width() as usize];
                for f in &firsts {
                    for (r, h) in root.iter_mut().zip(trees.root(*f, n_val)) {
                        *r ^= h;
                    }
                }
                Ok(AaeFoldReply::Root(root))
            }
            FoldOp::Branches { n_val, branches } => {
                let aae = self.keeps_trees()?;
                let guard = aae.trees.lock();
                let Some(trees) = guard.as_ref() else {
                    return Ok(AaeFoldReply::NotBuilt);
                };
                let mut out: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
                for f in &firsts {
                    for (b, segs) in trees.branches(*f, n_val, &branches) {
                        let acc = out.entry(b).or_insert_with(|| vec![0; segs.len()]);
                        for (a, h) in acc.iter_mut().zip(segs) {
                            *a ^= h;
                        }
                    }
                }
                Ok(AaeFoldReply::Branches(out.into_iter().collect()))
            }
            FoldOp::ClocksNval {
                n_val,
                segments,
                modified,
                limit,
            } => {
                let aae = self.keeps_trees()?;
                let size = aae.size;
                let segs = (size, segments);
                let mut found = Vec::new();
                let mut more = false;
                for bucket in self.backend.list_buckets()? {
                    if (aae.n_val_of)(&bucket) != n_val {
                        continue;
                    }
                    self.heads(&bucket, None, Some(&segs), &mut |b, k, o| {
                        if !covered(b, k) || !in_modified(&o, modified) {
                            return ControlFlow::Continue(());
                        }
                        if found.len() >= limit as usize {
                            more = true;
                            return ControlFlow::Break(());
                        }
                        found.push((
                            b.to_vec(),
                            k.to_vec(),
                            o.vclock.encode(),
                            u64::from(o.is_deleted()),
                        ));
                        ControlFlow::Continue(())
                    })?;
                    if more {
                        break;
                    }
                }
                Ok(AaeFoldReply::Keys(found, more))
            }
            FoldOp::Range {
                filter,
                want,
                after,
                limit,
                scan,
                count_only,
            } => self.range_fold(&filter, want, after, limit, scan, count_only, &covered),
            FoldOp::Buckets => Ok(AaeFoldReply::Buckets(self.backend.list_buckets()?)),
        }
    }

    /// The vnode's anti-entropy state, or an error if it keeps none.
    fn keeps_trees(&self) -> Result<&super::VnodeAae, VnodeError> {
        self.aae.as_ref().ok_or(VnodeError::Remote(
            "this vnode keeps no anti-entropy trees".into(),
        ))
    }

    /// One round of a range query on this vnode: the keys of the range
    /// after `after`, at most `scan` of them on an ordered backend (an
    /// unordered one folds its whole range in one round), list answers
    /// stopping at `limit` keys.
    #[allow(clippy::too_many_arguments)]
    fn range_fold(
        &self,
        filter: &RangeFilter,
        want: RangeWant,
        after: Option<Vec<u8>>,
        limit: u32,
        scan: u32,
        count_only: bool,
        covered: &dyn Fn(&[u8], &[u8]) -> bool,
    ) -> Result<AaeFoldReply, VnodeError> {
        let segs = match &filter.segments {
            None => None,
            Some((w, s)) => Some((size_of_width(*w)?, s.clone())),
        };
        let (lo, hi): (&[u8], &[u8]) = match &filter.keys {
            Some((s, e)) => (s, e),
            None => (&[], &KEY_ABOVE_ALL),
        };
        let lo = match &after {
            Some(a) if a.as_slice() >= lo => a.as_slice(),
            _ => lo,
        };
        let mut part = RangePart::default();
        if lo > hi {
            return Ok(AaeFoldReply::Range(part));
        }
        let range = KeyRange::new(lo, hi);
        let ordered = self.backend.capabilities().has(Capability::OrderedKeys);
        let mut tree: BTreeMap<u32, u64> = BTreeMap::new();
        // Keys found, the smallest `limit` of them (an unordered backend
        // folds in any order, so the fold keeps going there).
        let mut found: BTreeMap<Vec<u8>, FoundKey> = BTreeMap::new();
        let limit = limit.max(1) as usize;
        let scan = scan.max(1);
        let mut scanned = 0u32;
        let tree_sz = match want {
            RangeWant::Tree(w) => Some(size_of_width(w)?),
            _ => None,
        };
        self.heads(
            &filter.bucket,
            Some(&range),
            segs.as_ref(),
            &mut |b, k, o| {
                if after.as_deref() == Some(k) {
                    return ControlFlow::Continue(());
                }
                scanned += 1;
                // An ordered fold stops after `scan` keys; the next round
                // starts after this one.
                let stop = |part: &mut RangePart| {
                    if ordered && scanned >= scan {
                        part.more = true;
                        part.last = Some(k.to_vec());
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                };
                if !covered(b, k) || !in_modified(&o, filter.modified) {
                    return stop(&mut part);
                }
                let deleted = o.is_deleted();
                let value = match want {
                    RangeWant::Tree(_) => {
                        if let Some(sz) = tree_sz {
                            let h = super::aae_tree::key_state_hash(b, k, o.state_hash());
                            *tree.entry(segment_of(b, k, sz)).or_default() ^= h;
                        }
                        None
                    }
                    RangeWant::Stats => {
                        if !deleted {
                            part.stats.add(object_size(&o), o.contents.len() as u32);
                        }
                        None
                    }
                    RangeWant::Clocks => Some(u64::from(deleted)),
                    RangeWant::Siblings(n) => {
                        let c = o.contents.len() as u64;
                        (!deleted && c > n).then_some(c)
                    }
                    RangeWant::Sizes(n) => {
                        let s = object_size(&o);
                        (!deleted && s > n).then_some(s)
                    }
                    RangeWant::Tombs => deleted.then_some(0),
                    RangeWant::Live => (!deleted).then_some(0),
                };
                let Some(value) = value else {
                    return stop(&mut part);
                };
                if count_only {
                    part.count += 1;
                    return stop(&mut part);
                }
                found.insert(
                    k.to_vec(),
                    (b.to_vec(), k.to_vec(), o.vclock.encode(), value),
                );
                if ordered && found.len() >= limit {
                    part.more = true;
                    part.last = Some(k.to_vec());
                    return ControlFlow::Break(());
                }
                if found.len() > limit {
                    part.more = true;
                    found.pop_last();
                }
                stop(&mut part)
            },
        )?;
        if !ordered && part.more {
            // Every key up to the largest kept one was seen.
            part.last = found.keys().next_back().cloned();
        }
        part.segments = tree.into_iter().filter(|(_, h)| *h != 0).collect();
        part.keys = found.into_values().collect();
        Ok(AaeFoldReply::Range(part))
    }

    /// Calls `f(bucket, key, object metadata)` for the keys of `bucket` in
    /// `range` and `segments`: a head fold where the backend has one, else
    /// its keys then a head per key.
    fn heads(
        &self,
        bucket: &[u8],
        range: Option<&KeyRange>,
        segments: Option<&(TreeSize, Vec<u32>)>,
        f: &mut HeadsFn<'_>,
    ) -> Result<(), VnodeError> {
        if self.backend.capabilities().has(Capability::FoldHeads) {
            let opts = FoldOptions {
                segments: segments.cloned(),
                ..FoldOptions::default()
            };
            let mut err = None;
            self.backend
                .fold_heads(Some(bucket), range, &opts, &mut |b, k, h| {
                    match RiakObject::decode_metadata(&h.metadata) {
                        Ok(o) => f(b, k, o),
                        Err(e) => {
                            err = Some(e);
                            ControlFlow::Break(())
                        }
                    }
                })?;
            return match err {
                Some(e) => Err(e.into()),
                None => Ok(()),
            };
        }
        let want: Option<(TreeSize, BTreeSet<u32>)> =
            segments.map(|(sz, s)| (*sz, s.iter().copied().collect()));
        let mut keys = Vec::new();
        self.backend.fold_keys(bucket, range, &mut |k| {
            if want
                .as_ref()
                .is_none_or(|(sz, s)| s.contains(&segment_of(bucket, k, *sz)))
            {
                keys.push(k.to_vec());
            }
            ControlFlow::Continue(())
        })?;
        for k in keys {
            if let Some(o) = self.read_head(bucket, &k)? {
                if f(bucket, &k, o).is_break() {
                    break;
                }
            }
        }
        Ok(())
    }
}

/// Whether `o` was last modified within `range` (seconds, inclusive).
fn in_modified(o: &RiakObject, range: Option<(u64, u64)>) -> bool {
    range.is_none_or(|(lo, hi)| (lo..=hi).contains(&last_modified(o)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::Content;

    fn state(backend: &str, dir: &std::path::Path) -> VnodeState {
        crate::vnode::test_state(backend, dir, false)
    }

    fn obj(len: usize, deleted: bool) -> RiakObject {
        RiakObject {
            vclock: Default::default(),
            contents: vec![Content {
                value: vec![b'x'; len],
                value_len: len as u32,
                deleted,
                ..Content::default()
            }],
        }
    }

    /// Runs a range op in rounds of `scan` keys / `limit` results after
    /// the cursor until done; the rounds' parts.
    fn rounds(st: &VnodeState, want: RangeWant, limit: u32, scan: u32) -> Vec<RangePart> {
        let mut after = None;
        let mut parts = Vec::new();
        loop {
            let q = AaeFoldReq {
                ring_size: 1,
                firsts: vec![0],
                op: FoldOp::Range {
                    filter: RangeFilter {
                        bucket: b"b".to_vec(),
                        keys: Some((b"k010".to_vec(), b"k089".to_vec())),
                        ..RangeFilter::default()
                    },
                    want,
                    after: after.clone(),
                    limit,
                    scan,
                    count_only: false,
                },
            };
            let Ok(AaeFoldReply::Range(p)) = st.aae_fold_query(q) else {
                panic!("range reply");
            };
            let more = p.more;
            after.clone_from(&p.last);
            parts.push(p);
            assert!(parts.len() < 1000, "rounds end");
            if !more {
                return parts;
            }
        }
    }

    /// Rounds of a few keys each, on an ordered (memory) and an unordered
    /// (bitcask) backend, add up to the answer of one big round: every key
    /// of the range once, in order; statistics and trees merge to the same.
    #[test]
    fn bounded_rounds_add_up_to_one_fold() {
        for backend in ["memory", "bitcask"] {
            let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
            let st = state(backend, dir.path());
            for i in 0..100u32 {
                let o = obj(i as usize % 7 * 10, i % 5 == 0);
                st.write(b"b", format!("k{i:03}").as_bytes(), None, &o)
                    .unwrap_or_else(|e| panic!("{e}"));
            }
            let all = rounds(&st, RangeWant::Clocks, 1000, 1_000_000);
            assert_eq!(all.len(), 1, "{backend}");
            let want: Vec<Vec<u8>> = (10..90).map(|i| format!("k{i:03}").into_bytes()).collect();
            let got = |parts: &[RangePart]| -> Vec<Vec<u8>> {
                parts
                    .iter()
                    .flat_map(|p| p.keys.iter().map(|k| k.1.clone()))
                    .collect()
            };
            assert_eq!(got(&all), want, "{backend}");
            // Small result limits: several rounds, same keys.
            let small = rounds(&st, RangeWant::Clocks, 7, 1_000_000);
            assert!(small.len() > 5, "{backend}: {} rounds", small.len());
            assert_eq!(got(&small), want, "{backend}");
            let tombs = rounds(&st, RangeWant::Tombs, 3, 11);
            let want_t: Vec<Vec<u8>> = (10..90)
                .filter(|i| i % 5 == 0)
                .map(|i| format!("k{i:03}").into_bytes())
                .collect();
            assert_eq!(got(&tombs), want_t, "{backend}");
            // Scan-limited rounds (ordered only) merge to the one-round stats.
            let one = rounds(&st, RangeWant::Stats, 1, 1_000_000);
            let many = rounds(&st, RangeWant::Stats, 1, 9);
            if backend == "memory" {
                assert!(many.len() >= 80 / 9, "{} rounds", many.len());
            }
            let merged = many.iter().fold(ObjectStats::default(), |mut a, p| {
                a.merge(&p.stats);
                a
            });
            assert_eq!(merged, one[0].stats, "{backend}");
            assert_eq!(merged.total_count, 64, "80 keys, 16 tombstones");
            let tree = |parts: &[RangePart]| {
                let mut t: BTreeMap<u32, u64> = BTreeMap::new();
                for (s, h) in parts.iter().flat_map(|p| p.segments.iter()) {
                    *t.entry(*s).or_default() ^= h;
                }
                t
            };
            let w = TreeSize::Small.width();
            assert_eq!(
                tree(&rounds(&st, RangeWant::Tree(w), 1, 13)),
                tree(&rounds(&st, RangeWant::Tree(w), 1, 1_000_000)),
                "{backend}"
            );
            drop(st);
        }
    }

    #[test]
    fn orders_of_magnitude() {
        assert_eq!(power10(0), 0);
        assert_eq!(power10(9), 0);
        assert_eq!(power10(10), 1);
        assert_eq!(power10(999), 2);
        assert_eq!(power10(1000), 3);
        assert_eq!(power10(u64::MAX), 19);
    }

    #[test]
    fn stats_add_and_merge() {
        let mut a = ObjectStats::default();
        a.add(5, 1);
        a.add(150, 2);
        let mut b = ObjectStats::default();
        b.add(7, 1);
        b.add(12_000, 1);
        a.merge(&b);
        assert_eq!(a.total_count, 4);
        assert_eq!(a.total_size, 5 + 150 + 7 + 12_000);
        assert_eq!(a.sizes, BTreeMap::from([(0, 2), (2, 1), (4, 1)]));
        assert_eq!(a.siblings, BTreeMap::from([(1, 3), (2, 1)]));
    }
}
