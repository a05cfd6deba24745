//! The ledger's block cache: verified SST data blocks kept in memory for
//! point lookups.
//!
//! A GET or HEAD finds its key's ledger entry in one data block of one SST
//! file (the bloom filters and the in-memory index pick it). Without a
//! cache every such lookup is a positional read of that block (a system
//! call and a copy even when the page cache has it, a disk read when the
//! journal's values have pushed it out) and a CRC check. With data far
//! beyond the page cache the values crowd the ledger's blocks out of it;
//! this cache keeps the blocks hot keys live in, whatever the value
//! traffic, so a GET of a hot key reads the disk at most once: for its
//! value.
//!
//! * Only point lookups ([`super::sst::SstReader::get_timed`]) fill and use
//!   it; range scans, merges and verification read the file, so a fold or
//!   a merge does not push the hot blocks out.
//! * Blocks are cached after their CRC and trailer checked
//!   ([`super::block::Block::from_stored`]): a damaged block is never cached,
//!   and a cached block is never re-checked.
//! * Entries are keyed by (reader id, block number); every
//!   [`super::sst::SstReader`] takes a process-unique id when it opens, so
//!   a file number reused after a restart, or another store sharing the
//!   cache, never hits a stale block. A reader drops its blocks when it is
//!   dropped (its file merged away).
//! * Capacity is in bytes of block data (`Config::block_cache_bytes`);
//!   eviction is the `quick_cache` crate's (S3-FIFO: a block read once
//!   leaves before one read often). One cache may be shared by many stores
//!   (a node's vnodes: `Config::block_cache`), so memory is bounded per
//!   process, not per store.

use super::block::Block;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Smallest useful capacity: below this (but above 0) a cache is refused.
pub const BLOCK_CACHE_BYTES_MIN: u64 = 64 * 1024;

/// Weighs an entry by its block's bytes (plus a fixed overhead, so that
/// many tiny blocks cannot exceed the budget unseen).
#[derive(Debug, Clone, Copy)]
struct BlockWeight;

/// Bytes counted per entry beyond the block's own (key, `Arc`, map slot).
const ENTRY_OVERHEAD_BYTES: u64 = 64;

impl quick_cache::Weighter<(u64, u32), Arc<Block>> for BlockWeight {
    fn weight(&self, _key: &(u64, u32), block: &Arc<Block>) -> u64 {
        block.mem_len() as u64 + ENTRY_OVERHEAD_BYTES
    }
}

/// A cache of verified SST data blocks, cheap to clone (clones share it).
#[derive(Clone)]
pub struct BlockCache {
    inner: Arc<Inner>,
}

struct Inner {
    cache: quick_cache::sync::Cache<(u64, u32), Arc<Block>, BlockWeight>,
    capacity: u64,
}

impl std::fmt::Debug for BlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BlockCache")
            .field("capacity", &self.inner.capacity)
            .field("bytes", &self.bytes())
            .field("blocks", &self.inner.cache.len())
            .finish()
    }
}

impl BlockCache {
    /// A cache of at most `capacity_bytes` of blocks; `None` for 0 (no
    /// cache). Capacities below [`BLOCK_CACHE_BYTES_MIN`] are raised to it.
    pub fn new(capacity_bytes: u64) -> Option<BlockCache> {
        if capacity_bytes == 0 {
            return None;
        }
        let capacity = capacity_bytes.max(BLOCK_CACHE_BYTES_MIN);
        // quick_cache sizes its tables from an item estimate: 4 KiB blocks.
        let items = usize::try_from(capacity / 4096)
            .unwrap_or(usize::MAX)
            .max(16);
        Some(BlockCache {
            inner: Arc::new(Inner {
                cache: quick_cache::sync::Cache::with_weighter(items, capacity, BlockWeight),
                capacity,
            }),
        })
    }

    /// The block `block` of reader `reader`, if cached. Hits and misses
    /// are counted by the caller, per store (`ledger_block_cache_hits` /
    /// `_misses`): a cache shared by a node's vnodes keeps no counter of
    /// its own that every lookup of every vnode would contend on.
    pub(crate) fn get(&self, reader: u64, block: u32) -> Option<Arc<Block>> {
        self.inner.cache.get(&(reader, block))
    }

    /// Caches a verified block.
    pub(crate) fn insert(&self, reader: u64, block: u32, data: Arc<Block>) {
        self.inner.cache.insert((reader, block), data);
    }

    /// Forgets every block of a reader (it is being dropped).
    pub(crate) fn forget(&self, reader: u64, blocks: u32) {
        for b in 0..blocks {
            self.inner.cache.remove(&(reader, b));
        }
    }

    /// Bytes the cache may hold.
    pub fn capacity(&self) -> u64 {
        self.inner.capacity
    }

    /// Bytes held now (blocks plus the per-entry overhead).
    pub fn bytes(&self) -> u64 {
        self.inner.cache.weight()
    }
}

/// A process-unique id for a new SST reader.
pub(crate) fn next_reader_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(bytes: usize) -> Arc<Block> {
        // A block of one (fake) entry: entries, count 1, CRC.
        let mut raw = vec![7u8; bytes];
        raw.extend_from_slice(&1u32.to_le_bytes());
        let crc = crc32c::crc32c(&raw);
        raw.extend_from_slice(&crc.to_le_bytes());
        Arc::new(Block::from_raw(raw).expect("valid block"))
    }

    #[test]
    fn zero_means_no_cache_and_tiny_is_raised() {
        assert!(BlockCache::new(0).is_none());
        let c = BlockCache::new(1).expect("cache");
        assert_eq!(c.capacity(), BLOCK_CACHE_BYTES_MIN);
    }

    #[test]
    fn hits_misses_and_forget() {
        let c = BlockCache::new(1 << 20).expect("cache");
        assert!(c.get(1, 0).is_none());
        c.insert(1, 0, block(4000));
        c.insert(1, 1, block(4000));
        c.insert(2, 0, block(4000));
        assert!(c.get(1, 0).is_some());
        assert!(c.get(2, 0).is_some());
        assert!(c.get(2, 1).is_none());
        assert!(c.bytes() >= 3 * 4000);
        c.forget(1, 2);
        assert!(c.get(1, 0).is_none() && c.get(1, 1).is_none());
        assert!(c.get(2, 0).is_some(), "another reader's blocks stay");
    }

    #[test]
    fn holds_no_more_than_its_capacity() {
        let c = BlockCache::new(256 * 1024).expect("cache");
        for i in 0..1000 {
            c.insert(9, i, block(4000));
        }
        assert!(
            c.bytes() <= c.capacity(),
            "{} > {}",
            c.bytes(),
            c.capacity()
        );
        let held = (0..1000).filter(|&i| c.get(9, i).is_some()).count();
        assert!(held > 0 && held < 1000, "held {held}");
    }
}
