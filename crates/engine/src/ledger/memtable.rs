//! The ledger's in-memory cache of recent changes.
//!
//! An ordered map from encoded ledger key to [`LedgerValue`]. For one key the
//! entry with the higher SQN always wins, so inserts may arrive in any order.
//! When it grows past `memtable_bytes` it is frozen (no more inserts) and the
//! background clerk writes it out as an L0 SST file.

use crate::entry::LedgerValue;
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// Entries copied out of the map per lock acquisition by [`MemIter`].
const ITER_CHUNK: usize = 256;

/// Per-entry bookkeeping overhead counted on top of key and value bytes.
const ENTRY_OVERHEAD_BYTES: usize = 48;

/// An ordered, concurrently readable map of recent ledger changes.
#[derive(Debug, Default)]
pub struct Memtable {
    map: RwLock<BTreeMap<Vec<u8>, LedgerValue>>,
    bytes: AtomicUsize,
    max_sqn: AtomicU64,
    min_sqn: AtomicU64,
}

impl Memtable {
    /// An empty memtable.
    pub fn new() -> Self {
        Memtable {
            min_sqn: AtomicU64::new(u64::MAX),
            ..Default::default()
        }
    }

    /// Inserts `value` for `key` unless a newer (higher SQN) entry is present.
    pub fn insert(&self, key: Vec<u8>, value: LedgerValue) {
        let sqn = value.sqn;
        let added = key.len() + value.encoded_len() + ENTRY_OVERHEAD_BYTES;
        let mut map = self.map.write();
        match map.get_mut(&key) {
            Some(old) if old.sqn >= sqn => {}
            Some(old) => {
                let old_len = old.encoded_len();
                *old = value;
                let new_len = old.encoded_len();
                if new_len > old_len {
                    self.bytes.fetch_add(new_len - old_len, Ordering::Relaxed);
                }
            }
            None => {
                map.insert(key, value);
                self.bytes.fetch_add(added, Ordering::Relaxed);
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
    pub fn range(&self, start: &[u8], end: Option<&[u8]>) -> Vec<(Vec<u8>, LedgerValue)> {
        if end.is_some_and(|e| e <= start) {
            return Vec::new(); // BTreeMap::range panics on an inverted range.
        }
        let map = self.map.read();
        let upper = match end {
            Some(e) => Bound::Excluded(e),
            None => Bound::Unbounded,
        };
        map.range::<[u8], _>((Bound::Included(start), upper))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// An immutable copy of the entries with `start <= key < end`, as a new
    /// memtable (snapshots copy the active memtable this way).
    pub fn copy_range(&self, start: &[u8], end: Option<&[u8]>) -> Memtable {
        let copy = Memtable::new();
        let mut out = BTreeMap::new();
        let mut bytes = 0usize;
        if end.is_none_or(|e| start < e) {
            let map = self.map.read();
            let upper = end.map_or(Bound::Unbounded, Bound::Excluded);
            for (k, v) in map.range::<[u8], _>((Bound::Included(start), upper)) {
                bytes += k.len() + v.encoded_len() + ENTRY_OVERHEAD_BYTES;
                copy.max_sqn.fetch_max(v.sqn, Ordering::Relaxed);
                copy.min_sqn.fetch_min(v.sqn, Ordering::Relaxed);
                out.insert(k.clone(), v.clone());
            }
        }
        *copy.map.write() = out;
        copy.bytes.store(bytes, Ordering::Relaxed);
        copy
    }

    /// A lazy iterator over the entries with `start <= key < end`. It copies
    /// a few hundred entries per lock acquisition, so a long scan neither
    /// copies the whole map up front nor holds the lock between chunks.
    /// Entries inserted during the scan may or may not be seen (the frozen
    /// and snapshot memtables it is used on receive no inserts).
    pub fn range_iter(self: &Arc<Self>, start: &[u8], end: Option<&[u8]>) -> MemIter {
        MemIter {
            mem: Arc::clone(self),
            next: Bound::Included(start.to_vec()),
            end: end.map(<[u8]>::to_vec),
            buf: std::collections::VecDeque::new(),
            exhausted: false,
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

/// Lazy range iterator over a shared memtable (see [`Memtable::range_iter`]).
#[derive(Debug)]
pub struct MemIter {
    mem: Arc<Memtable>,
    next: Bound<Vec<u8>>,
    end: Option<Vec<u8>>,
    buf: std::collections::VecDeque<(Vec<u8>, LedgerValue)>,
    exhausted: bool,
}

impl MemIter {
    fn refill(&mut self) {
        let map = self.mem.map.read();
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
            map.range::<[u8], _>((lower, upper))
                .take(ITER_CHUNK)
                .map(|(k, v)| (k.clone(), v.clone())),
        );
        drop(map);
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
        let c = m.copy_range(b"k000010", Some(b"k000020"));
        assert_eq!(c.len(), 10);
        assert_eq!(c.max_sqn(), 20);
    }
}
