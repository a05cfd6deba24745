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
        let map = self.map.read();
        let upper = match end {
            Some(e) => Bound::Excluded(e),
            None => Bound::Unbounded,
        };
        map.range::<[u8], _>((Bound::Included(start), upper))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    /// Copies at most `limit` entries with `lower < / <= key < end`
    /// (`end = None`: unbounded). Never panics on inverted bounds.
    pub fn range_chunk(
        &self,
        lower: &Bound<Vec<u8>>,
        end: Option<&[u8]>,
        limit: usize,
    ) -> Vec<(Vec<u8>, LedgerValue)> {
        let lower_key = match lower {
            Bound::Included(k) | Bound::Excluded(k) => Some(k.as_slice()),
            Bound::Unbounded => None,
        };
        if let (Some(lo), Some(e)) = (lower_key, end) {
            if lo >= e {
                return Vec::new();
            }
        }
        let lower = match lower {
            Bound::Included(k) => Bound::Included(k.as_slice()),
            Bound::Excluded(k) => Bound::Excluded(k.as_slice()),
            Bound::Unbounded => Bound::Unbounded,
        };
        let upper = end.map_or(Bound::Unbounded, Bound::Excluded);
        let map = self.map.read();
        map.range::<[u8], _>((lower, upper))
            .take(limit)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
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

/// Entries of a memtable read lazily, [`MemRange::CHUNK`] at a time, so a
/// range scan that stops early (a query page) copies little and holds the
/// memtable's lock only briefly. On the active memtable it may see writes
/// made while it iterates (always newer versions, so merge order holds).
#[derive(Debug)]
pub struct MemRange {
    mem: std::sync::Arc<Memtable>,
    next: Bound<Vec<u8>>,
    end: Option<Vec<u8>>,
    buf: std::vec::IntoIter<(Vec<u8>, LedgerValue)>,
    done: bool,
}

impl MemRange {
    /// Entries copied per lock acquisition.
    pub const CHUNK: usize = 256;

    /// Iterates `start <= key < end` of `mem`.
    pub fn new(mem: std::sync::Arc<Memtable>, start: &[u8], end: Option<&[u8]>) -> Self {
        MemRange {
            mem,
            next: Bound::Included(start.to_vec()),
            end: end.map(<[u8]>::to_vec),
            buf: Vec::new().into_iter(),
            done: false,
        }
    }
}

impl Iterator for MemRange {
    type Item = (Vec<u8>, LedgerValue);

    fn next(&mut self) -> Option<Self::Item> {
        if let Some(item) = self.buf.next() {
            return Some(item);
        }
        if self.done {
            return None;
        }
        let chunk = self
            .mem
            .range_chunk(&self.next, self.end.as_deref(), Self::CHUNK);
        self.done = chunk.len() < Self::CHUNK;
        let last = chunk.last()?.0.clone();
        self.next = Bound::Excluded(last);
        self.buf = chunk.into_iter();
        self.buf.next()
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
    fn mem_range_reads_in_chunks_and_matches_range() {
        let m = std::sync::Arc::new(Memtable::new());
        for i in 0..1000u32 {
            m.insert(format!("k{i:04}").into_bytes(), v(u64::from(i) + 1));
        }
        for (s, e) in [
            (&b"k0000"[..], Some(&b"k0999"[..])),
            (b"k0100", None),
            (b"k0700", Some(b"k0600")),
            (b"a", Some(b"a")),
        ] {
            let lazy: Vec<_> = MemRange::new(std::sync::Arc::clone(&m), s, e).collect();
            let eager = if e.is_some_and(|e| e < s) {
                Vec::new()
            } else {
                m.range(s, e)
            };
            assert_eq!(lazy, eager, "{s:?}..{e:?}");
        }
        assert_eq!(
            MemRange::new(std::sync::Arc::clone(&m), b"k0100", None).count(),
            900
        );
    }
}
