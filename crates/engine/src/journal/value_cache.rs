//! The value cache: verified journal records kept in memory for GETs.
//!
//! Without it a GET's value comes from the page cache or the disk. Beyond
//! the page cache that costs more than the read: in a memory cgroup at its
//! limit every page a miss brings in must first be reclaimed from
//! somewhere, and the GET waits for it. With this cache (and value reads
//! that bypass the page cache, `Config::journal_direct_reads`) the memory
//! that holds hot values is the store's, sized in bytes, and a read that
//! misses costs one disk read and no reclaim.
//!
//! * Entries are keyed by (cache user, hash of the ledger key), not by
//!   SQN: one entry per object, so a new version of a hot key replaces the
//!   old one instead of leaving it to age out, and the eviction policy (the
//!   `quick_cache` crate's S3-FIFO) sees how often the *object* is read.
//! * A hit is returned only if the cached record's SQN and key are the
//!   ones asked for; anything else (an older version, a hash collision) is
//!   a miss. Records are immutable per SQN (journal compaction moves them
//!   unchanged), so a cached record never goes stale: it stops matching.
//! * Records are cached after their CRC was checked, never before, and
//!   only by GETs ([`super::Journal::fetch`]); folds, snapshots, replay and
//!   compaction read the files and leave the cache alone.
//! * A read of an older version (a snapshot) never replaces a newer one.
//! * Capacity is in bytes (`Config::value_cache_bytes`), counting key,
//!   metadata, value and a fixed overhead per entry. One cache may be shared
//!   by many stores (a node's vnodes: `Config::value_cache`): each store's
//!   journal takes a process-unique user id.

use super::record::{self, JournalRecord};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Smallest useful capacity: below this (but above 0) a cache is refused.
pub const VALUE_CACHE_BYTES_MIN: u64 = 1 << 20;

/// Bytes counted per entry beyond the record's own (key, `Arc`, map slot).
const ENTRY_OVERHEAD_BYTES: u64 = 96;

/// Weighs an entry by the bytes its record holds.
#[derive(Debug, Clone, Copy)]
struct RecordWeight;

impl quick_cache::Weighter<(u64, u64), Arc<JournalRecord>> for RecordWeight {
    fn weight(&self, _key: &(u64, u64), rec: &Arc<JournalRecord>) -> u64 {
        record_bytes(rec) + ENTRY_OVERHEAD_BYTES
    }
}

fn record_bytes(rec: &JournalRecord) -> u64 {
    (rec.key.len() + rec.metadata.len() + rec.value.len() + rec.index.len()) as u64
}

/// A cache of verified journal records, cheap to clone (clones share it).
#[derive(Clone)]
pub struct ValueCache {
    inner: Arc<Inner>,
}

struct Inner {
    cache: quick_cache::sync::Cache<(u64, u64), Arc<JournalRecord>, RecordWeight>,
    capacity: u64,
}

impl std::fmt::Debug for ValueCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ValueCache")
            .field("capacity", &self.inner.capacity)
            .field("bytes", &self.bytes())
            .field("records", &self.inner.cache.len())
            .finish()
    }
}

impl ValueCache {
    /// A cache of at most `capacity_bytes`; `None` for 0 (no cache).
    /// Capacities below [`VALUE_CACHE_BYTES_MIN`] are raised to it.
    pub fn new(capacity_bytes: u64) -> Option<ValueCache> {
        if capacity_bytes == 0 {
            return None;
        }
        let capacity = capacity_bytes.max(VALUE_CACHE_BYTES_MIN);
        // quick_cache sizes its tables from an item estimate: 8 KiB values.
        let items = usize::try_from(capacity / 8192)
            .unwrap_or(usize::MAX)
            .max(16);
        Some(ValueCache {
            inner: Arc::new(Inner {
                cache: quick_cache::sync::Cache::with_weighter(items, capacity, RecordWeight),
                capacity,
            }),
        })
    }

    /// The record with `sqn` of ledger key `key` for `user`, if cached.
    pub(crate) fn get(&self, user: u64, sqn: u64, key: &[u8]) -> Option<Arc<JournalRecord>> {
        self.inner
            .cache
            .get(&(user, key_hash(key)))
            .filter(|r| r.sqn == sqn && r.key == key)
    }

    /// Caches a verified record, unless a newer version of its key is
    /// cached already.
    pub(crate) fn insert(&self, user: u64, rec: Arc<JournalRecord>) {
        let k = (user, key_hash(&rec.key));
        if let Some(old) = self.inner.cache.peek(&k) {
            if old.sqn > rec.sqn && old.key == rec.key {
                return;
            }
        }
        if record_bytes(&rec) + ENTRY_OVERHEAD_BYTES > self.inner.capacity / 8 {
            // One record never takes more than an eighth of the cache.
            return;
        }
        self.inner.cache.insert(k, rec);
    }

    /// Replaces the cached older version of the key of the framed record at
    /// the start of `buf` (just appended) with this one, after checking its
    /// CRC; does nothing for a key not cached, a delete, or a record that
    /// does not decode. Returns whether it replaced one.
    pub(crate) fn refresh(&self, user: u64, buf: &[u8]) -> bool {
        let Some(head) = buf.get(..record::RECORD_HEADER_LEN) else {
            return false;
        };
        let Ok(h) = record::decode_frame_header(head, buf.len() as u64) else {
            return false;
        };
        let Some(body) = buf.get(record::RECORD_HEADER_LEN..h.total_len() as usize) else {
            return false;
        };
        let Ok(view) = record::decode_body(body) else {
            return false;
        };
        if view.kind != record::RecordKind::Put {
            return false;
        }
        let k = (user, key_hash(view.key));
        let holds_older = self
            .inner
            .cache
            .peek(&k)
            .is_some_and(|old| old.sqn < view.sqn && old.key == view.key);
        if !holds_older {
            return false;
        }
        let Ok(rec) = record::verify_and_decode_body(&h, body).and_then(|v| v.to_record()) else {
            return false;
        };
        self.insert(user, Arc::new(rec));
        true
    }

    /// Bytes the cache may hold.
    pub fn capacity(&self) -> u64 {
        self.inner.capacity
    }

    /// Bytes held now (records plus the per-entry overhead).
    pub fn bytes(&self) -> u64 {
        self.inner.cache.weight()
    }
}

fn key_hash(key: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(key)
}

/// A process-unique id for a journal using a value cache.
pub(crate) fn next_user_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::journal::RecordKind;

    fn rec(sqn: u64, key: &[u8], value_len: usize) -> Arc<JournalRecord> {
        Arc::new(JournalRecord {
            sqn,
            kind: RecordKind::Put,
            key: key.to_vec(),
            last_modified_us: 1,
            expires_at: 0,
            metadata: Vec::new(),
            value: vec![sqn as u8; value_len],
            index: Vec::new(),
        })
    }

    #[test]
    fn zero_is_no_cache_and_small_is_raised() {
        assert!(ValueCache::new(0).is_none());
        let c = ValueCache::new(1).expect("cache");
        assert_eq!(c.capacity(), VALUE_CACHE_BYTES_MIN);
    }

    #[test]
    fn hit_needs_same_user_sqn_and_key() {
        let c = ValueCache::new(1 << 20).expect("cache");
        c.insert(1, rec(5, b"k", 100));
        assert_eq!(c.get(1, 5, b"k").map(|r| r.sqn), Some(5));
        assert!(c.get(1, 6, b"k").is_none(), "another version is a miss");
        assert!(c.get(2, 5, b"k").is_none(), "another store is a miss");
        assert!(c.get(1, 5, b"j").is_none(), "another key is a miss");
    }

    #[test]
    fn newer_version_replaces_older_but_not_the_reverse() {
        let c = ValueCache::new(1 << 20).expect("cache");
        c.insert(1, rec(5, b"k", 100));
        c.insert(1, rec(9, b"k", 100));
        assert!(c.get(1, 5, b"k").is_none());
        assert!(c.get(1, 9, b"k").is_some());
        c.insert(1, rec(5, b"k", 100));
        assert!(
            c.get(1, 9, b"k").is_some(),
            "a snapshot's read kept the newer version"
        );
    }

    #[test]
    fn bytes_stay_within_capacity() {
        let c = ValueCache::new(1 << 20).expect("cache");
        for i in 0..1000u64 {
            c.insert(1, rec(i + 1, format!("key{i}").as_bytes(), 8000));
        }
        assert!(
            c.bytes() <= c.capacity(),
            "{} > {}",
            c.bytes(),
            c.capacity()
        );
        assert!(c.bytes() > c.capacity() / 2, "the cache holds something");
    }

    #[test]
    fn oversized_record_is_not_cached() {
        let c = ValueCache::new(1 << 20).expect("cache");
        c.insert(1, rec(1, b"big", 200_000));
        assert!(c.get(1, 1, b"big").is_none());
    }
}
