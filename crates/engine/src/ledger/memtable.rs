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
}
