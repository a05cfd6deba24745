//! Reading an SST file: [`SstReader`] opens and checks a file, answers
//! point lookups (through the block cache when it has one) and reads data
//! blocks for scans and verification.

use super::*;
use crate::codec::Reader;
use crate::entry::{LedgerValue, Status};
use crate::error::{Error, IoContext, Result};
use crate::key::{self};
use crate::ledger::block_cache::BlockCache;
use crate::ledger::bloom::Bloom;
use crate::limits::SST_ITER_READ_BYTES;
use crate::stats::Stats;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// A read handle on one SST file. `Send + Sync`: reads use positional I/O.
pub struct SstReader {
    pub(super) path: PathBuf,
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
        let blocks = parse_index(&index_bytes, footer.index.offset)
            .map_err(|r| Error::corrupt(path, footer.index.offset, format!("index block: {r}")))?;

        let bloom_bytes = read_section(footer.bloom, "bloom")?;
        let bloom = Bloom::from_bytes(&bloom_bytes)
            .map_err(|e| Error::corrupt(path, footer.bloom.offset, format!("bloom block: {e}")))?;

        let meta_bytes = read_section(footer.meta, "meta")?;
        let summary = parse_meta(&meta_bytes, &blocks, file_len)
            .map_err(|r| Error::corrupt(path, footer.meta.offset, format!("meta block: {r}")))?;

        Ok(SstReader {
            path: path.to_path_buf(),
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

    /// Iterates entries with `start <= key < end` (`end = None`: to the last key).
    pub fn range(self: &Arc<Self>, start: &[u8], end: Option<&[u8]>) -> SstIter {
        self.range_with(start, end, RangeOptions::default())
    }

    /// [`SstReader::range`] with filters: blocks whose maximum last-modified
    /// time is below `opts.modified_since_us` are not read at all, and keys
    /// the key filter rejects are skipped before their value is decoded.
    pub fn range_with(
        self: &Arc<Self>,
        start: &[u8],
        end: Option<&[u8]>,
        opts: RangeOptions,
    ) -> SstIter {
        let empty = end.is_some_and(|e| e <= start) || start > self.summary.max_key.as_slice();
        let next_block = if empty {
            self.blocks.len()
        } else {
            self.blocks
                .partition_point(|b| b.last_key.as_slice() < start)
        };
        SstIter {
            reader: Arc::clone(self),
            start: start.to_vec(),
            end: end.map(<[u8]>::to_vec),
            next_block,
            cur: None,
            done: false,
            opts,
            ahead: None,
        }
    }

    /// Reads every data block, checking its checksum and structure, and
    /// counts the damaged ones. I/O errors (as opposed to damage) are errors.
    pub fn verify(&self) -> Result<VerifyReport> {
        self.scan_blocks(|_, _, _| Ok(()))
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
        match self.file.read_exact_at(&mut raw, handle.offset) {
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

    fn handle(&self, i: usize) -> Result<&BlockHandle> {
        self.blocks.get(i).ok_or_else(|| {
            Error::corrupt(&self.path, 0, format!("data block {i} is not in the index"))
        })
    }

    /// CRC-checks the stored bytes of block `i` (counted as one block read).
    fn block_from_raw(&self, i: usize, handle: &BlockHandle, raw: Vec<u8>) -> Result<Block> {
        debug_assert_eq!(raw.len(), handle.len as usize);
        self.blocks_read.fetch_add(1, Ordering::Relaxed);
        Block::from_raw(raw).map_err(|reason| {
            Error::corrupt(
                &self.path,
                handle.offset,
                format!("data block {i}: {reason}"),
            )
        })
    }

    /// The blocks an iterator reads in one I/O from block `first`: `first`
    /// and the contiguous blocks after it, up to [`SST_ITER_READ_BYTES`],
    /// stopping after the first block whose last key reaches `end`.
    pub(super) fn span_from(&self, first: usize, end: Option<&[u8]>) -> std::ops::Range<usize> {
        let mut last = first;
        let mut bytes = self.blocks.get(first).map_or(0, |b| u64::from(b.len));
        while let (Some(prev), Some(next)) = (self.blocks.get(last), self.blocks.get(last + 1)) {
            let contiguous = prev.offset + u64::from(prev.len) == next.offset;
            let past_end = end.is_some_and(|e| nothing_between(&prev.last_key, e));
            if !contiguous || past_end || bytes + u64::from(next.len) > SST_ITER_READ_BYTES {
                break;
            }
            bytes += u64::from(next.len);
            last += 1;
        }
        first..last + 1
    }

    /// Reads blocks `blocks` with one positional read.
    fn read_span(&self, blocks: std::ops::Range<usize>) -> Result<Span> {
        let (Some(a), Some(b)) = (
            self.blocks.get(blocks.start),
            self.blocks.get(blocks.end - 1),
        ) else {
            return Err(Error::corrupt(
                &self.path,
                0,
                format!("data blocks {blocks:?} are not in the index"),
            ));
        };
        let len = b.offset + u64::from(b.len) - a.offset;
        debug_assert!(blocks.len() == 1 || len <= SST_ITER_READ_BYTES);
        let mut bytes = vec![0u8; len as usize];
        self.file
            .read_exact_at(&mut bytes, a.offset)
            .ctx("read SST blocks", &self.path)?;
        Ok(Span {
            blocks,
            at: a.offset,
            bytes,
        })
    }

    /// Block `i` for a front-to-back reader (an iterator, a verify scan):
    /// from `ahead` when it holds it, else read in one I/O with the blocks
    /// after it that a range ending at `end` can reach
    /// ([`SstReader::span_from`]), which then replace `ahead`. A failed span
    /// read falls back to the single block, whose error (I/O or damage) is
    /// then the one reported.
    pub(super) fn next_block(
        &self,
        ahead: &mut Option<Span>,
        i: usize,
        end: Option<&[u8]>,
    ) -> Result<Block> {
        if !ahead.as_ref().is_some_and(|a| a.blocks.contains(&i)) {
            let span = self.span_from(i, end);
            *ahead = if span.len() > 1 {
                self.read_span(span).ok()
            } else {
                None
            };
        }
        let handle = self.handle(i)?;
        match ahead.as_ref().and_then(|a| a.raw(handle)) {
            Some(raw) => self.block_from_raw(i, handle, raw.to_vec()),
            None => self.load_block(i),
        }
    }

    /// Fully decodes block `i` and checks it against the index.
    fn decode_block(&self, i: usize, block: &Block) -> Result<Vec<(Vec<u8>, LedgerValue)>, String> {
        let handle = self
            .blocks
            .get(i)
            .ok_or_else(|| format!("block {i} is not in the index"))?;
        let prev_last = i
            .checked_sub(1)
            .and_then(|p| self.blocks.get(p))
            .map(|b| b.last_key.as_slice());
        let mut out: Vec<(Vec<u8>, LedgerValue)> = Vec::new();
        let mut r = Reader::new(block.entries());
        let mut max_lm = 0;
        while !r.is_empty() {
            let at = r.position();
            let (k, v) = read_entry(&mut r).map_err(|e| format!("entry at +{at}: {e}"))?;
            let v = decode_value(v).map_err(|e| format!("entry at +{at}: {e}"))?;
            let after = out
                .last()
                .map(|(pk, _)| pk.as_slice())
                .or(prev_last)
                .is_none_or(|p| p < k);
            if !after {
                return Err(format!(
                    "entry at +{at}: key {} out of order",
                    render_key(k)
                ));
            }
            max_lm = max_lm.max(v.last_modified_us);
            out.push((k.to_vec(), v));
        }
        if out.len() as u64 != u64::from(block.count) {
            return Err(format!(
                "block holds {} entries, its trailer says {}",
                out.len(),
                block.count
            ));
        }
        if out.last().map(|(k, _)| k) != Some(&handle.last_key) {
            return Err("last key differs from the index".into());
        }
        if max_lm != handle.max_last_modified_us {
            return Err(format!(
                "max last-modified {max_lm} differs from the index's {}",
                handle.max_last_modified_us
            ));
        }
        Ok(out)
    }

    /// Visits every block with its decoded entries or its damage.
    pub(super) fn scan_blocks(
        &self,
        mut visit: impl FnMut(
            usize,
            &BlockHandle,
            std::result::Result<&[(Vec<u8>, LedgerValue)], &BlockDamage>,
        ) -> Result<()>,
    ) -> Result<VerifyReport> {
        let mut report = VerifyReport {
            blocks: self.blocks.len() as u64,
            ..VerifyReport::default()
        };
        let mut ahead = None;
        for (i, handle) in self.blocks.iter().enumerate() {
            let decoded = match self.next_block(&mut ahead, i, None) {
                Ok(block) => self.decode_block(i, &block),
                Err(Error::Corrupt { reason, .. }) => Err(reason),
                Err(e) => return Err(e),
            };
            match decoded {
                Ok(entries) => {
                    report.entries += entries.len() as u64;
                    report.tombstones += entries
                        .iter()
                        .filter(|(_, v)| v.status == Status::Tombstone)
                        .count() as u64;
                    visit(i, handle, Ok(&entries))?;
                }
                Err(reason) => {
                    let damage = BlockDamage {
                        block: i,
                        offset: handle.offset,
                        len: handle.len,
                        reason,
                    };
                    visit(i, handle, Err(&damage))?;
                    report.damaged_blocks += 1;
                    report.damage.push(damage);
                }
            }
        }
        if report.damaged_blocks == 0
            && (report.entries != self.summary.entries
                || report.tombstones != self.summary.tombstones)
        {
            report.summary_mismatch = Some(format!(
                "blocks hold {} entries ({} tombstones), meta block says {} ({})",
                report.entries, report.tombstones, self.summary.entries, self.summary.tombstones
            ));
        }
        Ok(report)
    }
}
