//! Reading an SST file: [`SstReader`] opens and checks a file, answers
//! point lookups (through the block cache when it has one) and reads data
//! blocks for scans and verification.

use super::format::{decode_value, parse_index, parse_meta, read_entry, Footer, Section};
use super::{is_object_key, render_key, BlockHandle, SstSummary, FOOTER_BYTES};
use crate::codec::Reader;
use crate::entry::LedgerValue;
use crate::error::{Error, IoContext, Result};
use crate::key;
use crate::ledger::block::{split_crc, Block};
use crate::ledger::block_cache::BlockCache;
use crate::ledger::bloom::Bloom;
use crate::stats::Stats;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A read handle on one SST file. `Send + Sync`: reads use positional I/O.
pub struct SstReader {
    pub(super) path: PathBuf,
    /// The file's format version (how its data blocks are stored).
    pub(super) version: u32,
    pub(super) file: File,
    pub(super) summary: SstSummary,
    pub(super) blocks: Vec<BlockHandle>,
    pub(super) bloom: Bloom,
    pub(super) blocks_read: AtomicU64,
    /// Process-unique: this reader's blocks in the cache.
    pub(super) id: u64,
    /// Point lookups' block cache (see [`super::block_cache`]).
    pub(super) cache: Option<BlockCache>,
}

impl Drop for SstReader {
    fn drop(&mut self) {
        if let Some(c) = &self.cache {
            c.forget(
                self.id,
                u32::try_from(self.blocks.len()).unwrap_or(u32::MAX),
            );
        }
    }
}

impl std::fmt::Debug for SstReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SstReader")
            .field("path", &self.path)
            .field("entries", &self.summary.entries)
            .field("blocks", &self.blocks.len())
            .field("bloom", &self.bloom)
            .finish_non_exhaustive()
    }
}

impl SstReader {
    /// Opens and verifies the footer, index and bloom of `path`.
    ///
    /// Damage in any of them (or in the meta block) is [`Error::Corrupt`];
    /// data blocks are checked when read. No block cache.
    pub fn open(path: &Path) -> Result<SstReader> {
        Self::open_cached(path, None)
    }

    /// [`SstReader::open`], point lookups going through `cache`.
    pub fn open_cached(path: &Path, cache: Option<BlockCache>) -> Result<SstReader> {
        let file = File::open(path).ctx("open SST file", path)?;
        // GETs read one block; iterators read their own spans
        // (`SST_ITER_READ_BYTES`): no kernel read-ahead on either.
        crate::fsutil::no_readahead(&file, path);
        let file_len = file.metadata().ctx("stat SST file", path)?.len();
        if file_len < FOOTER_BYTES as u64 {
            return Err(Error::corrupt(
                path,
                0,
                format!("file is {file_len} bytes, too short for the {FOOTER_BYTES}-byte footer"),
            ));
        }
        let footer_offset = file_len - FOOTER_BYTES as u64;
        let mut footer_bytes = [0u8; FOOTER_BYTES];
        file.read_exact_at(&mut footer_bytes, footer_offset)
            .ctx("read SST footer", path)?;
        let footer = Footer::decode(&footer_bytes, file_len)
            .map_err(|reason| Error::corrupt(path, footer_offset, reason))?;

        let read_section = |s: Section, what: &str| -> Result<Vec<u8>> {
            // Footer::decode bounded s.len by SST_BLOCK_BYTES_MAX and the file size.
            let mut raw = vec![0u8; s.len as usize];
            file.read_exact_at(&mut raw, s.offset)
                .ctx("read SST section", path)?;
            split_crc(&raw)
                .map_err(|r| Error::corrupt(path, s.offset, format!("{what} block: {r}")))?;
            raw.truncate(raw.len().saturating_sub(4));
            Ok(raw)
        };

        let index_bytes = read_section(footer.index, "index")?;
        let blocks = parse_index(&index_bytes, footer.index.offset, footer.version)
            .map_err(|r| Error::corrupt(path, footer.index.offset, format!("index block: {r}")))?;

        let bloom_bytes = read_section(footer.bloom, "bloom")?;
        let bloom = Bloom::from_bytes(&bloom_bytes)
            .map_err(|e| Error::corrupt(path, footer.bloom.offset, format!("bloom block: {e}")))?;

        let meta_bytes = read_section(footer.meta, "meta")?;
        let summary = parse_meta(&meta_bytes, &blocks, file_len)
            .map_err(|r| Error::corrupt(path, footer.meta.offset, format!("meta block: {r}")))?;

        Ok(SstReader {
            path: path.to_path_buf(),
            version: footer.version,
            file,
            summary,
            blocks,
            bloom,
            blocks_read: AtomicU64::new(0),
            id: crate::ledger::block_cache::next_reader_id(),
            cache,
        })
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file (removal checks that the path still names it).
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The file's format version.
    pub fn format_version(&self) -> u32 {
        self.version
    }

    /// What the file holds.
    pub fn summary(&self) -> &SstSummary {
        &self.summary
    }

    /// The data blocks, in key order (the index).
    pub fn blocks(&self) -> &[BlockHandle] {
        &self.blocks
    }

    /// The file's bloom filter (object keys only).
    pub fn bloom(&self) -> &Bloom {
        &self.bloom
    }

    /// Data blocks read from disk through this handle so far.
    pub fn blocks_read(&self) -> u64 {
        self.blocks_read.load(Ordering::Relaxed)
    }

    /// False if the file certainly does not hold `key` (no I/O): it is outside
    /// the file's key range, or an object key the bloom filter rejects.
    pub fn may_contain(&self, key: &[u8], hash: u64) -> bool {
        debug_assert_eq!(hash, key::hash(key), "hash must be key::hash(key)");
        if key < self.summary.min_key.as_slice() || key > self.summary.max_key.as_slice() {
            return false;
        }
        !is_object_key(key) || self.bloom.may_contain(hash)
    }

    /// Looks `key` up; `hash` is `crate::key::hash(key)`. A damaged block is an error.
    pub fn get(&self, key: &[u8], hash: u64) -> Result<Option<LedgerValue>> {
        self.get_timed(key, hash, None)
    }

    /// [`SstReader::get`], counting in `stats` (if given) the block cache's
    /// hits and misses and timing a block read from the file
    /// (`sst_block_read`).
    pub fn get_timed(
        &self,
        key: &[u8],
        hash: u64,
        stats: Option<&Stats>,
    ) -> Result<Option<LedgerValue>> {
        if !self.may_contain(key, hash) {
            return Ok(None);
        }
        let i = self.blocks.partition_point(|b| b.last_key.as_slice() < key);
        let Some(handle) = self.blocks.get(i) else {
            return Ok(None);
        };
        let block = self.cached_block(i, stats)?;
        let corrupt = |reason: String| {
            Error::corrupt(
                &self.path,
                handle.offset,
                format!("data block {i}: {reason}"),
            )
        };
        let mut r = Reader::new(block.entries());
        while !r.is_empty() {
            let (k, v) = read_entry(&mut r).map_err(|e| corrupt(e.0))?;
            match k.cmp(key) {
                std::cmp::Ordering::Less => {}
                std::cmp::Ordering::Equal => {
                    return decode_value(v).map(Some).map_err(|e| corrupt(e.0));
                }
                std::cmp::Ordering::Greater => return Ok(None),
            }
        }
        Err(corrupt(format!(
            "block ends before its index key {}",
            render_key(&handle.last_key)
        )))
    }

    /// Block `i` for a point lookup: from the cache if there, else read,
    /// checked and cached.
    fn cached_block(&self, i: usize, stats: Option<&Stats>) -> Result<Arc<Block>> {
        let cache_key = u32::try_from(i).ok();
        if let (Some(c), Some(b)) = (&self.cache, cache_key) {
            if let Some(block) = c.get(self.id, b) {
                if let Some(s) = stats {
                    Stats::incr(&s.ledger_block_cache_hits);
                }
                return Ok(block);
            }
            if let Some(s) = stats {
                Stats::incr(&s.ledger_block_cache_misses);
            }
        }
        let reading = stats.map(|s| (s, std::time::Instant::now()));
        let block = self.load_block(i);
        if let Some((s, at)) = reading {
            s.sst_block_read.since(at);
        }
        let block = Arc::new(block?);
        if let (Some(c), Some(b)) = (&self.cache, cache_key) {
            c.insert(self.id, b, Arc::clone(&block));
        }
        Ok(block)
    }

    /// Reads and CRC-checks block `i`.
    pub(super) fn load_block(&self, i: usize) -> Result<Block> {
        let handle = self.handle(i)?;
        // open() bounded len by SST_BLOCK_BYTES_MAX and the file size.
        let mut raw = vec![0u8; handle.len as usize];
        match crate::nowait::read_exact_at(&self.file, &mut raw, handle.offset) {
            Ok(()) => {}
            // The file shrank after open: that is damage, not an I/O fault.
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => {
                return Err(Error::corrupt(
                    &self.path,
                    handle.offset,
                    format!("data block {i}: lies beyond the end of the file"),
                ))
            }
            Err(e) => return Err(Error::io("read SST block", &self.path, e)),
        }
        self.block_from_raw(i, handle, raw)
    }

    pub(super) fn handle(&self, i: usize) -> Result<&BlockHandle> {
        self.blocks.get(i).ok_or_else(|| {
            Error::corrupt(&self.path, 0, format!("data block {i} is not in the index"))
        })
    }

    /// CRC-checks the stored bytes of block `i` and undoes their compression
    /// (counted as one block read).
    pub(super) fn block_from_raw(
        &self,
        i: usize,
        handle: &BlockHandle,
        raw: Vec<u8>,
    ) -> Result<Block> {
        debug_assert_eq!(raw.len(), handle.len as usize);
        self.blocks_read.fetch_add(1, Ordering::Relaxed);
        Block::from_stored(raw, self.version).map_err(|reason| {
            Error::corrupt(
                &self.path,
                handle.offset,
                format!("data block {i}: {reason}"),
            )
        })
    }
}
