//! Writing an SST file: [`SstWriter`] (entries into data blocks, then the
//! index, bloom, meta block and footer; see the format in [`super`]).
//! It writes [`FORMAT_VERSION`] 2: each data block closed at
//! `block_bytes` of entries and compressed on its own.

use super::format::{Footer, Section};
use super::{
    is_object_key, render_key, SstOptions, SstSummary, BLOCK_MAX, ENTRY_OVERHEAD_BYTES,
    FOOTER_BYTES, FORMAT_VERSION, INDEX_ENTRY_FIXED_BYTES, META_FIXED_BYTES,
};
use crate::codec::{crc, Encode, Reader};
use crate::entry::{LedgerValue, Status};
use crate::error::{Error, IoContext, Result};
use crate::key;
use crate::ledger::block::{encode_v2, stored_overhead, BLOCK_COUNT_BYTES};
use crate::ledger::bloom::Bloom;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

/// Most stored bytes a block adds to its entries: the count, and in the
/// worst case (content stored as is) the codec byte and the CRC.
const BLOCK_EXTRA_BYTES: usize = BLOCK_COUNT_BYTES + stored_overhead(FORMAT_VERSION);

/// Writes one SST file; keys must be added in strictly ascending order.
///
/// Dropping a writer without a successful [`SstWriter::finish`] removes the
/// partial file (best effort).
pub struct SstWriter {
    pub(super) path: PathBuf,
    pub(super) out: Option<BufWriter<File>>,
    pub(super) opts: SstOptions,
    /// Bytes handed to `out` so far: the offset of the next block.
    pub(super) offset: u64,
    /// Bytes known durable (the offset of the last step's fsync).
    pub(super) synced: u64,
    /// The open data block's entries.
    pub(super) block: Vec<u8>,
    pub(super) block_entries: u32,
    pub(super) block_max_last_modified_us: u64,
    /// Encoded index entries of the closed blocks.
    pub(super) index: Vec<u8>,
    pub(super) index_count: u32,
    /// Hashes of the object keys, for the bloom filter.
    pub(super) hashes: Vec<u64>,
    /// The last key added.
    pub(super) last_key: Vec<u8>,
    pub(super) entries: u64,
    pub(super) tombstones: u64,
    pub(super) min_key: Vec<u8>,
    pub(super) min_sqn: u64,
    pub(super) max_sqn: u64,
    pub(super) max_last_modified_us: u64,
    /// An I/O error happened: the file is unusable.
    pub(super) failed: bool,
    /// `finish` succeeded: keep the file.
    pub(super) finished: bool,
}

impl std::fmt::Debug for SstWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SstWriter")
            .field("path", &self.path)
            .field("opts", &self.opts)
            .field("entries", &self.entries)
            .field("offset", &self.offset)
            .field("failed", &self.failed)
            .finish_non_exhaustive()
    }
}

impl SstWriter {
    /// Creates the file at `path` (which must not exist).
    ///
    /// `opts.block_bytes` must be in `1..=SST_BLOCK_BYTES_MAX / 4` and
    /// `opts.bloom_bits_per_key` in `1..=64`.
    pub fn create(path: &Path, opts: SstOptions) -> Result<SstWriter> {
        if opts.block_bytes == 0 || opts.block_bytes > BLOCK_MAX / 4 {
            return Err(Error::InvalidInput(format!(
                "SST block_bytes {} is outside 1..={}",
                opts.block_bytes,
                BLOCK_MAX / 4
            )));
        }
        if opts.bloom_bits_per_key == 0
            || opts.bloom_bits_per_key > crate::ledger::bloom::BITS_PER_KEY_MAX
        {
            return Err(Error::InvalidInput(format!(
                "SST bloom_bits_per_key {} is outside 1..={}",
                opts.bloom_bits_per_key,
                crate::ledger::bloom::BITS_PER_KEY_MAX
            )));
        }
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(path)
            .ctx("create SST file", path)?;
        Ok(SstWriter {
            path: path.to_path_buf(),
            out: Some(BufWriter::with_capacity(64 * 1024, file)),
            opts,
            offset: 0,
            synced: 0,
            block: Vec::with_capacity(opts.block_bytes + 1024),
            block_entries: 0,
            block_max_last_modified_us: 0,
            index: Vec::new(),
            index_count: 0,
            hashes: Vec::new(),
            last_key: Vec::new(),
            entries: 0,
            tombstones: 0,
            min_key: Vec::new(),
            min_sqn: u64::MAX,
            max_sqn: 0,
            max_last_modified_us: 0,
            failed: false,
            finished: false,
        })
    }

    /// Adds one entry. Errors if `key` is not greater than the previous key.
    pub fn add(&mut self, key: &[u8], value: &LedgerValue) -> Result<()> {
        self.check_usable()?;
        if self.entries > 0 && key <= self.last_key.as_slice() {
            return Err(Error::InvalidInput(format!(
                "SST {}: key {} added after {}: keys must be strictly ascending",
                self.path.display(),
                render_key(key),
                render_key(&self.last_key)
            )));
        }
        let value_len = value.encoded_len();
        let entry_len = ENTRY_OVERHEAD_BYTES + key.len() + value_len;
        if entry_len + BLOCK_EXTRA_BYTES > BLOCK_MAX
            || INDEX_ENTRY_FIXED_BYTES + key.len() > BLOCK_MAX / 2
        {
            return Err(Error::InvalidInput(format!(
                "SST {}: entry of {entry_len} bytes (key {} bytes) is too large for a block",
                self.path.display(),
                key.len()
            )));
        }
        // A big entry gets a block of its own.
        if !self.block.is_empty() && entry_len >= self.opts.block_bytes {
            self.flush_block()?;
        }
        let before = self.block.len();
        self.block.put_bytes32(key);
        // value_len < BLOCK_MAX < u32::MAX, checked above.
        self.block.put_u32(value_len as u32);
        value.encode_into(&mut self.block);
        debug_assert_eq!(self.block.len() - before, entry_len);
        self.block_entries += 1;
        self.block_max_last_modified_us =
            self.block_max_last_modified_us.max(value.last_modified_us);

        if self.entries == 0 {
            self.min_key = key.to_vec();
        }
        self.entries += 1;
        if value.status == Status::Tombstone {
            self.tombstones += 1;
        }
        self.min_sqn = self.min_sqn.min(value.sqn);
        self.max_sqn = self.max_sqn.max(value.sqn);
        self.max_last_modified_us = self.max_last_modified_us.max(value.last_modified_us);
        if is_object_key(key) {
            self.hashes.push(key::hash(key));
        }
        self.last_key.clear();
        self.last_key.extend_from_slice(key);

        if self.block.len() >= self.opts.block_bytes {
            self.flush_block()?;
        }
        debug_assert!(self.block.len() < self.opts.block_bytes);
        Ok(())
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        self.entries
    }

    /// Bytes the file would have if finished now (approximately: the open
    /// block counts uncompressed).
    pub fn estimated_bytes(&self) -> u64 {
        let open_block = if self.block.is_empty() {
            0
        } else {
            self.block.len() + BLOCK_EXTRA_BYTES
        };
        let index = self.index.len()
            + if self.block.is_empty() {
                0
            } else {
                INDEX_ENTRY_FIXED_BYTES + self.last_key.len()
            }
            + 8;
        let bloom = 12 + (self.hashes.len() * self.opts.bloom_bits_per_key).div_ceil(64) * 8 + 4;
        let meta = META_FIXED_BYTES + self.min_key.len() + self.last_key.len();
        self.offset + (open_block + index + bloom + meta + FOOTER_BYTES) as u64
    }

    /// Writes the index, bloom and footer, fsyncs, and returns the summary.
    /// Errors if no entry was added.
    ///
    /// The file and its directory entry are durable when this returns.
    pub fn finish(mut self) -> Result<SstSummary> {
        let summary = self.finish_inner()?;
        self.finished = true;
        Ok(summary)
    }

    fn finish_inner(&mut self) -> Result<SstSummary> {
        self.check_usable()?;
        if self.entries == 0 {
            return Err(Error::InvalidInput(format!(
                "SST {}: cannot finish a file with no entries",
                self.path.display()
            )));
        }
        if !self.block.is_empty() {
            self.flush_block()?;
        }
        debug_assert_eq!(u64::from(self.index_count), {
            let mut r = Reader::new(&self.index);
            let mut n = 0u64;
            while r.bytes32().is_ok() && r.take(20).is_ok() {
                n += 1;
            }
            n
        });

        let mut index = std::mem::take(&mut self.index);
        index.put_u32(self.index_count);
        let c = crc(&index);
        index.put_u32(c);

        let bloom = Bloom::build(&self.hashes, self.opts.bloom_bits_per_key);
        let mut bloom_block = bloom.to_bytes();
        let c = crc(&bloom_block);
        bloom_block.put_u32(c);

        let mut meta = Vec::with_capacity(META_FIXED_BYTES + 2 * self.last_key.len());
        meta.put_u64(self.entries);
        meta.put_u64(self.tombstones);
        meta.put_bytes32(&self.min_key);
        meta.put_bytes32(&self.last_key);
        meta.put_u64(self.min_sqn);
        meta.put_u64(self.max_sqn);
        meta.put_u64(self.max_last_modified_us);
        let c = crc(&meta);
        meta.put_u32(c);

        for (what, section) in [("index", &index), ("bloom", &bloom_block), ("meta", &meta)] {
            if section.len() > BLOCK_MAX {
                return Err(Error::InvalidInput(format!(
                    "SST {}: {what} block of {} bytes exceeds the {BLOCK_MAX}-byte limit; \
                     write smaller files",
                    self.path.display(),
                    section.len()
                )));
            }
        }

        let index_offset = self.offset;
        let bloom_offset = index_offset + index.len() as u64;
        let meta_offset = bloom_offset + bloom_block.len() as u64;
        let footer = Footer {
            version: FORMAT_VERSION,
            index: Section {
                offset: index_offset,
                len: index.len() as u32,
            },
            bloom: Section {
                offset: bloom_offset,
                len: bloom_block.len() as u32,
            },
            meta: Section {
                offset: meta_offset,
                len: meta.len() as u32,
            },
        }
        .encode();
        self.write_out(&index)?;
        self.write_out(&bloom_block)?;
        self.write_out(&meta)?;
        self.write_out(&footer)?;
        debug_assert_eq!(
            self.offset,
            meta_offset + (meta.len() + FOOTER_BYTES) as u64
        );

        let out = self.out.take().ok_or_else(|| self.unusable())?;
        let file = out
            .into_inner()
            .map_err(|e| e.into_error())
            .ctx("write SST file", &self.path)?;
        file.sync_all().ctx("fsync SST file", &self.path)?;
        debug_assert!(file
            .metadata()
            .map(|m| m.len() == self.offset)
            .unwrap_or(true));
        drop(file);
        let dir = match self.path.parent() {
            Some(p) if !p.as_os_str().is_empty() => p,
            _ => Path::new("."),
        };
        crate::fsutil::sync_dir(dir)?;

        Ok(SstSummary {
            size_bytes: self.offset,
            entries: self.entries,
            tombstones: self.tombstones,
            min_key: self.min_key.clone(),
            max_key: self.last_key.clone(),
            min_sqn: self.min_sqn,
            max_sqn: self.max_sqn,
            max_last_modified_us: self.max_last_modified_us,
        })
    }

    fn unusable(&self) -> Error {
        Error::Closed(format!(
            "SST writer for {} failed earlier and cannot be used",
            self.path.display()
        ))
    }

    fn check_usable(&self) -> Result<()> {
        if self.failed || self.out.is_none() {
            return Err(self.unusable());
        }
        Ok(())
    }

    /// Closes the open block: appends its count, compresses it, writes it
    /// with its codec byte and CRC, indexes it.
    fn flush_block(&mut self) -> Result<()> {
        debug_assert!(!self.block.is_empty() && self.block_entries > 0);
        let mut block = std::mem::take(&mut self.block);
        block.put_u32(self.block_entries);
        let stored = encode_v2(&block, self.opts.compression, self.opts.zstd_level);
        debug_assert!(stored.len() <= block.len() + stored_overhead(FORMAT_VERSION));
        debug_assert!(stored.len() <= BLOCK_MAX);
        let offset = self.offset;
        let res = self.write_out(&stored);
        let len = stored.len() as u32;
        block.clear();
        self.block = block;
        res?;
        self.index.put_bytes32(&self.last_key);
        self.index.put_u64(offset);
        self.index.put_u32(len);
        self.index.put_u64(self.block_max_last_modified_us);
        self.index_count += 1;
        self.block_entries = 0;
        self.block_max_last_modified_us = 0;
        if self.opts.sync_bytes > 0 && self.offset - self.synced >= self.opts.sync_bytes {
            self.sync_step()?;
        }
        Ok(())
    }

    /// Writes out what is buffered and fsyncs it (a step of
    /// `opts.sync_bytes`): the kernel never holds more than a step of this
    /// file dirty, and the disk is never handed a whole file at once, which
    /// GETs' reads would queue behind. The data only: the size and the
    /// directory entry become durable in [`SstWriter::finish`].
    fn sync_step(&mut self) -> Result<()> {
        let Some(out) = self.out.as_mut() else {
            return Err(self.unusable());
        };
        let res = out.flush().and_then(|()| out.get_ref().sync_data());
        if let Err(e) = res {
            self.failed = true;
            return Err(Error::io("fsync SST file", &self.path, e));
        }
        debug_assert!(self.offset > self.synced);
        self.synced = self.offset;
        Ok(())
    }

    fn write_out(&mut self, bytes: &[u8]) -> Result<()> {
        let Some(out) = self.out.as_mut() else {
            return Err(self.unusable());
        };
        match out.write_all(bytes) {
            Ok(()) => {
                self.offset += bytes.len() as u64;
                Ok(())
            }
            Err(e) => {
                self.failed = true;
                Err(Error::io("write SST file", &self.path, e))
            }
        }
    }
}

impl Drop for SstWriter {
    fn drop(&mut self) {
        if self.finished {
            return;
        }
        if let Some(out) = self.out.take() {
            // Discard buffered bytes rather than writing them to a doomed file.
            let _ = out.into_parts();
        }
        if let Err(e) = std::fs::remove_file(&self.path) {
            if e.kind() != std::io::ErrorKind::NotFound {
                tracing::warn!(path = %self.path.display(), error = %e,
                    "could not remove unfinished SST file");
            }
        }
    }
}
