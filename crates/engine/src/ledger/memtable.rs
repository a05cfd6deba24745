//! The ledger's in-memory cache of recent changes.
//!
//! An ordered map from encoded ledger key to [`LedgerValue`]. For one key the
//! entry with the higher SQN always wins, so inserts may arrive in any order.
//! When it grows past `memtable_bytes` it is frozen (no more inserts) and the
//! background clerk writes it out as an L0 SST file.
//!
//! The map is a persistent B-tree (`imbl::OrdMap`): a copy shares every node
//! with the original and costs O(1), and a later insert copies only the nodes
//! on its path. So a snapshot takes the active memtable as of now
//! ([`Memtable::share`]) without copying its entries under the store's write
//! lock (a plain map's copy held writers ~38 ms for a full 16 MiB memtable),
//! and iterators and the flush read a point-in-time copy without holding the
//! map's lock.

use super::memtable_budget::MemtableBudget;
use crate::entry::LedgerValue;
use crate::error::Result;
use crate::sync::RwLock;
use imbl::OrdMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

/// Entries [`MemIter`] copies out of its map per refill.
const ITER_CHUNK: usize = 256;

/// Per-entry memory counted on top of the key's and the encoded value's
/// bytes: the map's slot and node share, the two heap allocations' rounding.
/// Measured with `examples/memtable_heap.rs` (mimalloc, 200k entries):
/// resident memory per entry was key + value + 160..208 bytes for keys of
/// 20-60 bytes and metadata of 0-1,000 (48 until 2026-12-02 counted a
/// small entry at 0.4 of what it took, so memtables took up to 2.4× their
/// `memtable_bytes`).
const ENTRY_OVERHEAD_BYTES: usize = 192;

/// The map's entries. (Keys and values behind `Arc`s, to make the node
/// copies of a shared map cheaper, measured no faster with or without a
/// live snapshot in `examples/put_rate.rs`, 2026-11-28.)
type Entries = OrdMap<Vec<u8>, LedgerValue>;

/// An ordered, concurrently readable map of recent ledger changes.
#[derive(Debug, Default)]
pub struct Memtable {
    map: RwLock<Entries>,
    bytes: AtomicUsize,
    max_sqn: AtomicU64,
    min_sqn: AtomicU64,
    /// The budget shared with other stores' memtables, charged with every
    /// byte this one counts until it is dropped ([`MemtableBudget`]).
    budget: Option<MemtableBudget>,
    /// Frozen: no more inserts; its bytes no longer count as active.
    frozen: std::sync::atomic::AtomicBool,
}

impl Memtable {
    /// An empty memtable.
    pub fn new() -> Self {
        Self::with_budget(None)
    }

    /// An empty memtable whose bytes count against `budget`.
    pub fn with_budget(budget: Option<MemtableBudget>) -> Self {
        Memtable {
            map: RwLock::default(),
            bytes: AtomicUsize::new(0),
            max_sqn: AtomicU64::new(0),
            min_sqn: AtomicU64::new(u64::MAX),
            budget,
            frozen: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Inserts `value` for `key` unless a newer (higher SQN) entry is present.
    pub fn insert(&self, key: Vec<u8>, value: LedgerValue) {
        let sqn = value.sqn;
        let mut map = self.map.write();
        // Look before writing: a write into a map shared with a snapshot
        // copies the nodes on its path, so a stale insert must not write.
        let grew = match map.get(key.as_slice()) {
            Some(old) if old.sqn >= sqn => None,
            // A replacement counts only what the value grew by.
            Some(old) => Some(value.encoded_len().saturating_sub(old.encoded_len())),
            None => Some(key.len() + value.encoded_len() + ENTRY_OVERHEAD_BYTES),
        };
        if let Some(grew) = grew {
            map.insert(key, value);
            self.bytes.fetch_add(grew, Ordering::Relaxed);
            if let Some(b) = &self.budget {
                b.add(grew);
            }
        }
        self.max_sqn.fetch_max(sqn, Ordering::Relaxed);
        self.min_sqn.fetch_min(sqn, Ordering::Relaxed);
    }

    /// The entry for `key`, if any.
    pub fn get(&self, key: &[u8]) -> Option<LedgerValue> {
        self.map.read().get(key).cloned()
    }

    /// Copies the entries with `start <= key < end` (`end = None`: unbounded).
    /// Only the tests use it, as the plain reference for [`Memtable::range_iter`].
    #[cfg(test)]
    pub fn range(&self, start: &[u8], end: Option<&[u8]>) -> Vec<(Vec<u8>, LedgerValue)> {
        if end.is_some_and(|e| e <= start) {
            return Vec::new(); // an inverted range holds nothing
        }
        let map = self.map.read();
        let upper = end.map_or(Bound::Unbounded, Bound::Excluded);
        map.range::<_, [u8]>((Bound::Included(start), upper))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// An immutable memtable holding this one's entries as of now. It shares
    /// the map's nodes, so it costs O(1) however full the memtable is; later
    /// inserts into `self` copy the nodes they change and do not show
    /// through. Snapshots take the active memtable this way.
    pub fn share(&self) -> Memtable {
        // The counters are read under the same lock as the map, so they
        // describe the copy (inserts update them under the write lock).
        let map = self.map.read();
        Memtable {
            map: RwLock::new(map.clone()),
            bytes: AtomicUsize::new(self.bytes()),
            max_sqn: AtomicU64::new(self.max_sqn()),
            min_sqn: AtomicU64::new(self.min_sqn.load(Ordering::Relaxed)),
            // The copy shares the original's nodes; the original carries
            // the charge (and a snapshot is short-lived).
            budget: None,
            frozen: std::sync::atomic::AtomicBool::new(true),
        }
    }

    /// Calls `f` on every entry in key order, on a copy taken at the call
    /// (O(1), see [`Memtable::share`]), so the map's lock is not held while
    /// `f` runs. Stops at the first error. The flush writes an L0 file this
    /// way.
    pub fn try_for_each(&self, mut f: impl FnMut(&[u8], &LedgerValue) -> Result<()>) -> Result<()> {
        let map = self.map.read().clone();
        map.iter().try_for_each(|(k, v)| f(k, v))
    }

    /// A lazy iterator over the entries with `start <= key < end`, as of the
    /// call: it reads a copy of the map taken now (O(1), see
    /// [`Memtable::share`]) a few hundred entries at a time, so a long scan
    /// neither copies the whole map up front nor holds the map's lock, and
    /// inserts made during the scan do not show through.
    pub fn range_iter(&self, start: &[u8], end: Option<&[u8]>) -> MemIter {
        MemIter {
            map: self.map.read().clone(),
            next: Bound::Included(start.to_vec()),
            end: end.map(<[u8]>::to_vec),
            buf: std::collections::VecDeque::new(),
            exhausted: false,
        }
    }

    /// Marks the memtable frozen (the ledger takes no more inserts into
    /// it): its bytes stay charged to the budget until it is dropped but no
    /// longer count as active. Idempotent.
    pub fn mark_frozen(&self) {
        if !self.frozen.swap(true, Ordering::AcqRel) {
            if let Some(b) = &self.budget {
                b.frozen(self.bytes());
            }
        }
    }

    /// Approximate memory used by the entries, in bytes.
    pub fn bytes(&self) -> usize {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Number of entries.
    pub fn len(&self) -> usize {
        self.map.read().len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.map.read().is_empty()
    }

    /// Highest SQN inserted (0 when empty).
    pub fn max_sqn(&self) -> u64 {
        self.max_sqn.load(Ordering::Relaxed)
    }
}

impl Drop for Memtable {
    fn drop(&mut self) {
        if let Some(b) = &self.budget {
            b.release(self.bytes(), !*self.frozen.get_mut());
        }
    }
}

/// Lazy range iterator over a memtable as of its creation (see
/// [`Memtable::range_iter`]).
#[derive(Debug)]
pub struct MemIter {
    map: Entries,
    next: Bound<Vec<u8>>,
    end: Option<Vec<u8>>,
    buf: std::collections::VecDeque<(Vec<u8>, LedgerValue)>,
    exhausted: bool,
}

impl MemIter {
    fn refill(&mut self) {
        let lower = match &self.next {
            Bound::Included(k) => Bound::Included(k.as_slice()),
            Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
            Bound::Unbounded => Bound::Unbounded,
        };
        let upper = self
            .end
            .as_deref()
            .map_or(Bound::Unbounded, Bound::Excluded);
        if matches!((lower, upper), (Bound::Included(l) | Bound::Excluded(l), Bound::Excluded(u)) if l >= u)
        {
            self.exhausted = true;
            return;
        }
        self.buf.extend(
            self.map
                .range::<_, [u8]>((lower, upper))
                .take(ITER_CHUNK)
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        match self.buf.back() {
            Some((k, _)) if self.buf.len() == ITER_CHUNK => self.next = Bound::Excluded(k.clone()),
            _ => self.exhausted = true,
        }
    }
}

impl Iterator for MemIter {
    type Item = (Vec<u8>, LedgerValue);

    fn next(&mut self) -> Option<Self::Item> {
        if self.buf.is_empty() && !self.exhausted {
            self.refill();
        }
        self.buf.pop_front()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::Status;
    use std::sync::Arc;

    fn v(sqn: u64) -> LedgerValue {
        LedgerValue {
            sqn,
            status: Status::Active,
            expires_at: 0,
            value_hash: sqn,
            size: 1,
            last_modified_us: 0,
            metadata: vec![],
        }
    }

    #[test]
    fn higher_sqn_wins_in_any_order() {
        let m = Memtable::new();
        m.insert(b"a".to_vec(), v(5));
        m.insert(b"a".to_vec(), v(3));
        assert_eq!(m.get(b"a").unwrap().sqn, 5);
        m.insert(b"a".to_vec(), v(9));
        assert_eq!(m.get(b"a").unwrap().sqn, 9);
        assert_eq!(m.max_sqn(), 9);
        assert_eq!(m.len(), 1);
    }

    #[test]
    fn range_is_half_open() {
        let m = Memtable::new();
        for (i, k) in [b"a", b"b", b"c"].iter().enumerate() {
            m.insert(k.to_vec(), v(i as u64 + 1));
        }
        let r = m.range(b"a", Some(b"c"));
        assert_eq!(r.len(), 2);
        assert_eq!(m.range(b"b", None).len(), 2);
    }

    #[test]
    fn range_iter_matches_range_across_chunks() {
        let m = Arc::new(Memtable::new());
        for i in 0..(ITER_CHUNK as u64 * 3 + 7) {
            m.insert(format!("k{i:06}").into_bytes(), v(i + 1));
        }
        for (s, e) in [
            (&b""[..], None),
            (b"k000100", Some(&b"k000700"[..])),
            (b"k000300", Some(&b"k000300"[..])),
            (b"k000500", Some(&b"k000100"[..])),
        ] {
            let lazy: Vec<_> = m.range_iter(s, e).collect();
            assert_eq!(lazy, m.range(s, e), "{s:?}..{e:?}");
        }
    }

    #[test]
    fn a_shared_copy_and_an_iterator_do_not_see_later_inserts() {
        let m = Memtable::new();
        for i in 0..(ITER_CHUNK as u64 * 2) {
            m.insert(format!("k{i:06}").into_bytes(), v(i + 1));
        }
        let before = m.range(b"", None);
        let bytes_before = m.bytes();
        let copy = m.share();
        let mut lazy = m.range_iter(b"", None);
        let first = lazy.next();
        // Overwrite every key, add new ones on both sides of the scan.
        for i in 0..(ITER_CHUNK as u64 * 2) {
            m.insert(format!("k{i:06}").into_bytes(), v(i + 10_000));
        }
        m.insert(b"a".to_vec(), v(20_000));
        m.insert(b"z".to_vec(), v(20_001));
        assert_eq!(copy.range(b"", None), before);
        let n = before.len() as u64;
        assert_eq!((copy.len() as u64, copy.max_sqn()), (n, n));
        assert_eq!(copy.bytes(), bytes_before);
        assert!(m.bytes() > bytes_before);
        let scanned: Vec<_> = first.into_iter().chain(lazy).collect();
        assert_eq!(scanned, before);
        assert_eq!(m.get(b"k000000").unwrap().sqn, 10_000);
        assert_eq!(m.len(), before.len() + 2);
    }

    /// Inserts in any SQN order with shares taken between them, against a
    /// `BTreeMap` model: the memtable and every share read as their model
    /// did at the share's moment, through `get`, `range` and `range_iter`.
    mod model {
        use super::*;
        use proptest::prelude::*;
        use std::collections::BTreeMap;

        #[derive(Debug, Clone)]
        enum Op {
            Insert(u16, u64),
            Share,
        }

        fn op() -> impl Strategy<Value = Op> {
            prop_oneof![
                8 => (0u16..600, 1u64..5_000).prop_map(|(k, s)| Op::Insert(k, s)),
                1 => Just(Op::Share),
            ]
        }

        fn key(k: u16) -> Vec<u8> {
            format!("k{k:04}").into_bytes()
        }

        fn check(m: &Memtable, model: &BTreeMap<Vec<u8>, u64>) {
            let want: Vec<_> = model.iter().map(|(k, s)| (k.clone(), *s)).collect();
            let got: Vec<_> = m
                .range(b"", None)
                .into_iter()
                .map(|(k, v)| (k, v.sqn))
                .collect();
            assert_eq!(got, want);
            let lazy: Vec<_> = m
                .range_iter(b"k0100", Some(b"k0500"))
                .map(|(k, v)| (k, v.sqn))
                .collect();
            let want_mid: Vec<_> = model
                .range(b"k0100".to_vec()..b"k0500".to_vec())
                .map(|(k, s)| (k.clone(), *s))
                .collect();
            assert_eq!(lazy, want_mid);
            for (k, s) in model.iter().take(20) {
                assert_eq!(m.get(k).map(|v| v.sqn), Some(*s));
            }
            assert_eq!(m.len(), model.len());
            assert_eq!(m.max_sqn(), model.values().copied().max().unwrap_or(0));
        }

        proptest! {
            #![proptest_config(ProptestConfig::with_cases(64))]
            #[test]
            fn shares_keep_their_moment(ops in proptest::collection::vec(op(), 1..1_500)) {
                let m = Memtable::new();
                let mut model: BTreeMap<Vec<u8>, u64> = BTreeMap::new();
                let mut shares = Vec::new();
                for op in ops {
                    match op {
                        Op::Insert(k, s) => {
                            m.insert(key(k), v(s));
                            let e = model.entry(key(k)).or_insert(s);
                            *e = (*e).max(s);
                        }
                        Op::Share => shares.push((m.share(), model.clone())),
                    }
                }
                check(&m, &model);
                for (share, then) in &shares {
                    check(share, then);
                }
            }
        }
    }
}
