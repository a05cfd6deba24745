//! SST files: immutable sorted runs of ledger entries.
//!
//! An SST file holds ledger entries (key → [`LedgerValue`]) sorted by key,
//! compared as plain bytes. It is written once by [`SstWriter`] and then only
//! read, through [`SstReader`], which keeps the index, the bloom filter and the
//! summary in memory and reads data blocks with positional reads (point
//! lookups through the [`super::block_cache`] when the reader has one).
//!
//! # Format (version 1)
//!
//! All integers are little-endian; every CRC is CRC32C ([`crate::codec::crc`]).
//!
//! ```text
//! file        := data_block+ index_block bloom_block meta_block footer
//!
//! data_block  := entry+ entry_count:u32 crc:u32
//! entry       := key_len:u32 key value_len:u32 value
//!                (value: the LedgerValue encoding, see crate::entry)
//!                crc covers every byte of the block before it.
//!
//! index_block := index_entry{count} count:u32 crc:u32
//! index_entry := last_key_len:u32 last_key offset:u64 len:u32
//!                max_last_modified_us:u64
//!                one per data block, in file order. offset/len locate the
//!                whole block (trailer included); max_last_modified_us is the
//!                largest last_modified_us of the block's entries.
//!
//! bloom_block := bloom crc:u32
//!                (bloom: see crate::ledger::bloom; built from the key hashes
//!                 of object keys only, i.e. keys whose first byte is b'o')
//!
//! meta_block  := entries:u64 tombstones:u64
//!                min_key_len:u32 min_key max_key_len:u32 max_key
//!                min_sqn:u64 max_sqn:u64 max_last_modified_us:u64 crc:u32
//!
//! footer      := magic:"BSLTSST1" version:u32(=1)
//!                index_offset:u64 index_len:u32
//!                bloom_offset:u64 bloom_len:u32
//!                meta_offset:u64  meta_len:u32
//!                reserved:[0u8; 12] crc:u32             (64 bytes in all)
//!                crc covers the 60 footer bytes before it.
//! ```
//!
//! The sections are contiguous: data blocks start at offset 0 and end at
//! `index_offset`, the bloom block follows the index block, the meta block
//! follows the bloom block, and the footer takes the last 64 bytes. Readers
//! check all of this, and refuse any block or section longer than
//! [`limits::SST_BLOCK_BYTES_MAX`](crate::limits::SST_BLOCK_BYTES_MAX) before
//! allocating for it.
//!
//! A data block is closed once its entries reach `block_bytes`; an entry at
//! least `block_bytes` long gets a block of its own. Every block holds at least
//! one entry.
//!
//! # Damage
//!
//! [`SstReader::open`] verifies the footer, index, bloom and meta CRCs. Data
//! block CRCs are verified on every read from the file (a cached block was
//! verified when it was read): a damaged block makes the `get` that
//! reads it return [`Error::Corrupt`] (naming file and block offset), and a
//! range scan yield one `Err` and stop; other blocks stay readable.
//! [`SstReader::verify`] and [`dump`] report every damaged block.

use crate::codec::{crc, DecodeError, Encode, Reader};
use crate::entry::{LedgerValue, Status};
use crate::error::{Error, IoContext, Result};
use crate::key::{self, KeyKind};
use crate::ledger::block_cache::BlockCache;
use crate::ledger::bloom::Bloom;
use crate::limits::{SST_BLOCK_BYTES_MAX, SST_ITER_READ_BYTES};
use crate::stats::Stats;
use std::fs::{File, OpenOptions};
use std::io::{BufWriter, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The first 8 bytes of the footer.
pub const MAGIC: [u8; 8] = *b"BSLTSST1";

/// The format version this build writes and reads.
pub const FORMAT_VERSION: u32 = 1;

/// Size of the fixed footer at the end of every SST file.
pub const FOOTER_BYTES: usize = 64;

/// `entry_count:u32 crc:u32` after each data block's entries.
const BLOCK_TRAILER_BYTES: usize = 8;

/// `key_len:u32` and `value_len:u32` of one entry.
const ENTRY_OVERHEAD_BYTES: usize = 8;

/// Fixed bytes of one index entry besides the key.
const INDEX_ENTRY_FIXED_BYTES: usize = 4 + 8 + 4 + 8;

/// Fixed bytes of the meta block besides the two keys.
const META_FIXED_BYTES: usize = 8 + 8 + 4 + 4 + 8 + 8 + 8 + 4;

/// Largest block or section, as a `usize`.
const BLOCK_MAX: usize = SST_BLOCK_BYTES_MAX as usize;

/// How SST files are built.
#[derive(Debug, Clone, Copy)]
pub struct SstOptions {
    /// Target data block size in bytes, before the block trailer.
    pub block_bytes: usize,
    /// Bloom filter bits per object key.
    pub bloom_bits_per_key: usize,
    /// The writer fsyncs the file every this many bytes written (0: only
    /// once, in [`SstWriter::finish`]), so that the disk takes a merge's
    /// output in small steps rather than a whole file at the end
    /// (`Config::ledger_sync_bytes`).
    pub sync_bytes: u64,
}

impl Default for SstOptions {
    /// 4 KiB blocks, 8 bloom bits per key, a sync every 1 MiB (the
    /// [`crate::Config`] defaults).
    fn default() -> Self {
        SstOptions {
            block_bytes: 4096,
            bloom_bits_per_key: crate::ledger::bloom::BITS_PER_KEY_DEFAULT,
            sync_bytes: 1024 * 1024,
        }
    }
}

/// A predicate on encoded ledger keys; entries whose key it rejects are
/// skipped by range iterators before their value is decoded.
pub type KeyFilter = Arc<dyn Fn(&[u8]) -> bool + Send + Sync>;

/// Filters applied by range iterators (folds use them; plain reads do not).
#[derive(Clone, Default)]
pub struct RangeOptions {
    /// Skip whole data blocks whose `max_last_modified_us` is below this
    /// (0 = no skipping). Entries of blocks that are read are *not* filtered
    /// by date here: the caller filters each entry.
    pub modified_since_us: u64,
    /// Skip entries whose key the filter rejects, without decoding their value.
    pub key_filter: Option<KeyFilter>,
}

impl std::fmt::Debug for RangeOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RangeOptions")
            .field("modified_since_us", &self.modified_since_us)
            .field("key_filter", &self.key_filter.is_some())
            .finish()
    }
}

impl RangeOptions {
    /// True if `key` passes the key filter (always, without one).
    pub fn accepts(&self, key: &[u8]) -> bool {
        self.key_filter.as_ref().is_none_or(|f| f(key))
    }
}

/// What an SST file holds, known once it is written (also kept in the ledger manifest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SstSummary {
    /// File size in bytes.
    pub size_bytes: u64,
    /// Number of entries.
    pub entries: u64,
    /// Number of tombstone entries.
    pub tombstones: u64,
    /// Smallest key.
    pub min_key: Vec<u8>,
    /// Largest key.
    pub max_key: Vec<u8>,
    /// Smallest SQN of any entry.
    pub min_sqn: u64,
    /// Largest SQN of any entry.
    pub max_sqn: u64,
    /// Largest last-modified time of any entry.
    pub max_last_modified_us: u64,
}

/// Where one data block lies and what it covers (one index entry).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockHandle {
    /// The block's largest key.
    pub last_key: Vec<u8>,
    /// Offset of the block in the file.
    pub offset: u64,
    /// Length of the block, trailer included.
    pub len: u32,
    /// Largest `last_modified_us` of the block's entries.
    pub max_last_modified_us: u64,
}

/// True if `key` is an object key (the only keys the bloom filter holds).
fn is_object_key(key: &[u8]) -> bool {
    key.first() == Some(&(KeyKind::Object as u8))
}

/// Lower-case hex with a `0x` prefix.
fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(2 + bytes.len() * 2);
    out.push_str("0x");
    for b in bytes {
        out.push_str(&format!("{b:02x}"));
    }
    out
}

/// Renders a ledger key for humans: its kind and decoded components when it
/// decodes (`object[bucket, key]`), hex otherwise.
pub fn render_key(k: &[u8]) -> String {
    match key::decode(k) {
        Ok(d) => {
            let kind = match d.kind {
                KeyKind::Object => "object",
                KeyKind::Index => "index",
            };
            let parts: Vec<String> = d.parts.iter().map(|p| key::display_bytes(p)).collect();
            format!("{kind}[{}]", parts.join(", "))
        }
        Err(_) => hex(k),
    }
}

// ---------------------------------------------------------------------------
// Writer
// ---------------------------------------------------------------------------

/// Writes one SST file; keys must be added in strictly ascending order.
///
/// Dropping a writer without a successful [`SstWriter::finish`] removes the
/// partial file (best effort).
pub struct SstWriter {
    path: PathBuf,
    out: Option<BufWriter<File>>,
    opts: SstOptions,
    /// Bytes handed to `out` so far: the offset of the next block.
    offset: u64,
    /// Bytes known durable (the offset of the last step's fsync).
    synced: u64,
    /// The open data block's entries.
    block: Vec<u8>,
    block_entries: u32,
    block_max_last_modified_us: u64,
    /// Encoded index entries of the closed blocks.
    index: Vec<u8>,
    index_count: u32,
    /// Hashes of the object keys, for the bloom filter.
    hashes: Vec<u64>,
    /// The last key added.
    last_key: Vec<u8>,
    entries: u64,
    tombstones: u64,
    min_key: Vec<u8>,
    min_sqn: u64,
    max_sqn: u64,
    max_last_modified_us: u64,
    /// An I/O error happened: the file is unusable.
    failed: bool,
    /// `finish` succeeded: keep the file.
    finished: bool,
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
        if entry_len + BLOCK_TRAILER_BYTES > BLOCK_MAX
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

    /// Bytes the file would have if finished now (approximately).
    pub fn estimated_bytes(&self) -> u64 {
        let open_block = if self.block.is_empty() {
            0
        } else {
            self.block.len() + BLOCK_TRAILER_BYTES
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

    /// Closes the open block: appends its trailer, writes it, indexes it.
    fn flush_block(&mut self) -> Result<()> {
        debug_assert!(!self.block.is_empty() && self.block_entries > 0);
        let mut block = std::mem::take(&mut self.block);
        block.put_u32(self.block_entries);
        let c = crc(&block);
        block.put_u32(c);
        debug_assert!(block.len() <= BLOCK_MAX);
        let offset = self.offset;
        let res = self.write_out(&block);
        let len = block.len() as u32;
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

// ---------------------------------------------------------------------------
// Footer
// ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Section {
    offset: u64,
    len: u32,
}

impl Section {
    fn end(self) -> Option<u64> {
        self.offset.checked_add(u64::from(self.len))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Footer {
    index: Section,
    bloom: Section,
    meta: Section,
}

impl Footer {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FOOTER_BYTES);
        out.extend_from_slice(&MAGIC);
        out.put_u32(FORMAT_VERSION);
        for s in [self.index, self.bloom, self.meta] {
            out.put_u64(s.offset);
            out.put_u32(s.len);
        }
        out.resize(FOOTER_BYTES - 4, 0);
        let c = crc(&out);
        out.put_u32(c);
        debug_assert_eq!(out.len(), FOOTER_BYTES);
        out
    }

    /// Decodes and checks a footer of a file of `file_len` bytes.
    pub(crate) fn decode(bytes: &[u8], file_len: u64) -> Result<Footer, String> {
        let mut r = Reader::new(bytes);
        let e = |d: DecodeError| format!("footer: {d}");
        if r.take(MAGIC.len()).map_err(e)? != MAGIC {
            return Err("footer: bad magic, not a Basalt SST file".into());
        }
        let version = r.u32().map_err(e)?;
        let mut sections = [Section { offset: 0, len: 0 }; 3];
        for s in &mut sections {
            s.offset = r.u64().map_err(e)?;
            s.len = r.u32().map_err(e)?;
        }
        r.take(FOOTER_BYTES - 4 - r.position()).map_err(e)?;
        let stored = r.u32().map_err(e)?;
        let computed = crc(bytes.get(..FOOTER_BYTES - 4).unwrap_or_default());
        if stored != computed {
            return Err(format!(
                "footer: crc mismatch (stored {stored:08x}, computed {computed:08x})"
            ));
        }
        if version != FORMAT_VERSION {
            return Err(format!(
                "unsupported SST format version {version} (this build reads {FORMAT_VERSION})"
            ));
        }
        let [index, bloom, meta] = sections;
        let footer_offset = file_len.saturating_sub(FOOTER_BYTES as u64);
        for (what, s, min) in [
            ("index", index, 8u32),
            ("bloom", bloom, 4),
            ("meta", meta, 4),
        ] {
            if s.len < min || u64::from(s.len) > SST_BLOCK_BYTES_MAX {
                return Err(format!("footer: {what} length {} is impossible", s.len));
            }
            if s.end().is_none_or(|end| end > footer_offset) {
                return Err(format!(
                    "footer: {what} block at {} len {} lies beyond the data (file is {file_len} bytes)",
                    s.offset, s.len
                ));
            }
        }
        if index.offset == 0
            || index.end() != Some(bloom.offset)
            || bloom.end() != Some(meta.offset)
            || meta.end() != Some(footer_offset)
        {
            return Err(format!(
                "footer: sections are not contiguous (index {}+{}, bloom {}+{}, meta {}+{}, footer {})",
                index.offset, index.len, bloom.offset, bloom.len, meta.offset, meta.len, footer_offset
            ));
        }
        Ok(Footer { index, bloom, meta })
    }
}

/// True if `path` ends with an SST footer (looks at the magic only, not at
/// checksums). Files too short to hold a footer are not SST files.
pub fn is_sst_file(path: &Path) -> Result<bool> {
    let file = File::open(path).ctx("open", path)?;
    let len = file.metadata().ctx("stat", path)?.len();
    if len < FOOTER_BYTES as u64 {
        return Ok(false);
    }
    let mut magic = [0u8; MAGIC.len()];
    file.read_exact_at(&mut magic, len - FOOTER_BYTES as u64)
        .ctx("read footer", path)?;
    Ok(magic == MAGIC)
}

// ---------------------------------------------------------------------------
// Reader
// ---------------------------------------------------------------------------

/// Splits `raw` into its content and checks the trailing CRC32C over it.
pub(crate) fn split_crc(raw: &[u8]) -> Result<&[u8], String> {
    let body_len = raw
        .len()
        .checked_sub(4)
        .ok_or_else(|| format!("{} bytes is too short for a checksum", raw.len()))?;
    let (body, tail) = raw
        .split_at_checked(body_len)
        .ok_or_else(|| "block too short".to_string())?;
    let stored = Reader::new(tail).u32().map_err(|e| e.0)?;
    let computed = crc(body);
    if stored != computed {
        return Err(format!(
            "crc mismatch (stored {stored:08x}, computed {computed:08x})"
        ));
    }
    Ok(body)
}

/// One entry's raw key and encoded value.
type RawEntry<'a> = (&'a [u8], &'a [u8]);

/// Reads one entry's raw key and value.
pub(crate) fn read_entry<'a>(r: &mut Reader<'a>) -> Result<RawEntry<'a>, DecodeError> {
    let key = r.bytes32()?;
    let value = r.bytes32()?;
    Ok((key, value))
}

/// Decodes a value that must fill `bytes` exactly.
pub(crate) fn decode_value(bytes: &[u8]) -> Result<LedgerValue, DecodeError> {
    let mut r = Reader::new(bytes);
    let v = LedgerValue::decode(&mut r)?;
    if !r.is_empty() {
        return Err(DecodeError(format!(
            "{} bytes after the ledger value",
            r.remaining()
        )));
    }
    Ok(v)
}

/// A data block whose CRC has been verified.
#[derive(Debug)]
pub(crate) struct Block {
    /// The block's entries followed by the 8-byte trailer.
    raw: Vec<u8>,
    /// Number of entries the trailer announces.
    count: u32,
}

impl Block {
    /// Checks the trailer of a raw block.
    pub(crate) fn from_raw(raw: Vec<u8>) -> Result<Block, String> {
        let payload = split_crc(&raw)?;
        let entries_len = payload
            .len()
            .checked_sub(4)
            .ok_or_else(|| format!("block of {} bytes has no trailer", raw.len()))?;
        let count = Reader::new(payload.get(entries_len..).unwrap_or_default())
            .u32()
            .map_err(|e| e.0)?;
        if count == 0 {
            return Err("block announces 0 entries".into());
        }
        Ok(Block { raw, count })
    }

    /// Bytes of the block as stored (entries, trailer and CRC).
    pub(crate) fn raw_len(&self) -> usize {
        self.raw.len()
    }

    /// The encoded entries.
    pub(crate) fn entries(&self) -> &[u8] {
        let end = self.raw.len().saturating_sub(BLOCK_TRAILER_BYTES);
        self.raw.get(..end).unwrap_or_default()
    }
}

/// What [`SstReader::verify`] (and [`dump`]) found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Data blocks in the file.
    pub blocks: u64,
    /// Data blocks that failed their checksum or structural checks.
    pub damaged_blocks: u64,
    /// Entries in the undamaged blocks.
    pub entries: u64,
    /// Tombstones in the undamaged blocks.
    pub tombstones: u64,
    /// One line per damaged block.
    pub damage: Vec<BlockDamage>,
    /// Set if all blocks are intact but disagree with the meta block's counts.
    pub summary_mismatch: Option<String>,
}

impl VerifyReport {
    /// True if nothing is damaged.
    pub fn is_clean(&self) -> bool {
        self.damaged_blocks == 0 && self.summary_mismatch.is_none()
    }
}

/// One damaged data block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockDamage {
    /// Position of the block in the index (0-based).
    pub block: usize,
    /// Offset of the block in the file.
    pub offset: u64,
    /// Length of the block.
    pub len: u32,
    /// What check failed.
    pub reason: String,
}

/// What [`dump`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpReport {
    /// The file's summary, from its meta block.
    pub summary: SstSummary,
    /// The result of checking every data block.
    pub verify: VerifyReport,
}

/// A read handle on one SST file. `Send + Sync`: reads use positional I/O.
pub struct SstReader {
    path: PathBuf,
    file: File,
    summary: SstSummary,
    blocks: Vec<BlockHandle>,
    bloom: Bloom,
    blocks_read: AtomicU64,
    /// Process-unique: this reader's blocks in the cache.
    id: u64,
    /// Point lookups' block cache (see [`super::block_cache`]).
    cache: Option<BlockCache>,
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
            id: super::block_cache::next_reader_id(),
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
    fn load_block(&self, i: usize) -> Result<Block> {
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
    fn span_from(&self, first: usize, end: Option<&[u8]>) -> std::ops::Range<usize> {
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
    fn next_block(&self, ahead: &mut Option<Span>, i: usize, end: Option<&[u8]>) -> Result<Block> {
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
    fn scan_blocks(
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

/// Parses the index block's content (CRC already checked).
pub(crate) fn parse_index(bytes: &[u8], data_end: u64) -> Result<Vec<BlockHandle>, String> {
    let entries_len = bytes
        .len()
        .checked_sub(4)
        .ok_or_else(|| "too short for its count".to_string())?;
    let (entries, count_bytes) = bytes
        .split_at_checked(entries_len)
        .ok_or_else(|| "too short".to_string())?;
    let count = Reader::new(count_bytes).u32().map_err(|e| e.0)?;
    if count == 0 {
        return Err("no data blocks".into());
    }
    let mut r = Reader::new(entries);
    let cap = (count as usize).min(entries.len() / INDEX_ENTRY_FIXED_BYTES);
    let mut blocks: Vec<BlockHandle> = Vec::with_capacity(cap);
    let mut expected_offset = 0u64;
    for i in 0..count {
        let e = |d: DecodeError| format!("entry {i}: {d}");
        let last_key = r.bytes32().map_err(e)?;
        let offset = r.u64().map_err(e)?;
        let len = r.u32().map_err(e)?;
        let max_last_modified_us = r.u64().map_err(e)?;
        if offset != expected_offset {
            return Err(format!(
                "entry {i}: block at {offset}, expected {expected_offset}"
            ));
        }
        if (len as usize) < BLOCK_TRAILER_BYTES + ENTRY_OVERHEAD_BYTES
            || u64::from(len) > SST_BLOCK_BYTES_MAX
        {
            return Err(format!("entry {i}: impossible block length {len}"));
        }
        if blocks
            .last()
            .is_some_and(|p| p.last_key.as_slice() >= last_key)
        {
            return Err(format!("entry {i}: keys out of order"));
        }
        expected_offset = offset
            .checked_add(u64::from(len))
            .ok_or_else(|| format!("entry {i}: offset overflow"))?;
        blocks.push(BlockHandle {
            last_key: last_key.to_vec(),
            offset,
            len,
            max_last_modified_us,
        });
    }
    if !r.is_empty() {
        return Err(format!("{} bytes after {count} entries", r.remaining()));
    }
    if expected_offset != data_end {
        return Err(format!(
            "data blocks end at {expected_offset}, index starts at {data_end}"
        ));
    }
    Ok(blocks)
}

/// Parses the meta block's content (CRC already checked) and checks it against the index.
pub(crate) fn parse_meta(
    bytes: &[u8],
    blocks: &[BlockHandle],
    file_len: u64,
) -> Result<SstSummary, String> {
    let mut r = Reader::new(bytes);
    let e = |d: DecodeError| d.0;
    let entries = r.u64().map_err(e)?;
    let tombstones = r.u64().map_err(e)?;
    let min_key = r.bytes32().map_err(e)?.to_vec();
    let max_key = r.bytes32().map_err(e)?.to_vec();
    let min_sqn = r.u64().map_err(e)?;
    let max_sqn = r.u64().map_err(e)?;
    let max_last_modified_us = r.u64().map_err(e)?;
    if !r.is_empty() {
        return Err(format!("{} trailing bytes", r.remaining()));
    }
    if entries < blocks.len() as u64 || tombstones > entries {
        return Err(format!(
            "{entries} entries, {tombstones} tombstones in {} blocks is impossible",
            blocks.len()
        ));
    }
    if min_key > max_key || blocks.last().map(|b| &b.last_key) != Some(&max_key) {
        return Err("key range disagrees with the index".into());
    }
    if blocks.first().is_some_and(|b| b.last_key < min_key) {
        return Err("min key is above the first block's last key".into());
    }
    if min_sqn > max_sqn {
        return Err(format!("min sqn {min_sqn} > max sqn {max_sqn}"));
    }
    let index_max_lm = blocks
        .iter()
        .map(|b| b.max_last_modified_us)
        .max()
        .unwrap_or(0);
    if index_max_lm != max_last_modified_us {
        return Err(format!(
            "max last-modified {max_last_modified_us} disagrees with the index ({index_max_lm})"
        ));
    }
    Ok(SstSummary {
        size_bytes: file_len,
        entries,
        tombstones,
        min_key,
        max_key,
        min_sqn,
        max_sqn,
        max_last_modified_us,
    })
}

// ---------------------------------------------------------------------------
// Iterator
// ---------------------------------------------------------------------------

/// The block an [`SstIter`] is walking.
struct Cursor {
    block: Block,
    index: usize,
    offset: u64,
    pos: usize,
    seen: u32,
}

impl Cursor {
    /// The next raw entry, `None` at the end of the block.
    fn next_raw(&mut self) -> Result<Option<RawEntry<'_>>, String> {
        let entries = self.block.entries();
        let rest = entries.get(self.pos..).unwrap_or_default();
        if rest.is_empty() {
            if self.seen != self.block.count {
                return Err(format!(
                    "block holds {} entries, its trailer says {}",
                    self.seen, self.block.count
                ));
            }
            return Ok(None);
        }
        let mut r = Reader::new(rest);
        let (k, v) = read_entry(&mut r).map_err(|e| format!("entry at +{}: {e}", self.pos))?;
        self.pos += r.position();
        self.seen += 1;
        Ok(Some((k, v)))
    }
}

/// Iterator over a key range of one SST file.
///
/// Reads the blocks ahead that its range can reach in one I/O of at most
/// [`SST_ITER_READ_BYTES`]. A damaged block yields one `Err` item, after
/// which the iterator ends.
pub struct SstIter {
    reader: Arc<SstReader>,
    start: Vec<u8>,
    end: Option<Vec<u8>>,
    next_block: usize,
    cur: Option<Cursor>,
    done: bool,
    opts: RangeOptions,
    /// Blocks read ahead in one I/O.
    ahead: Option<Span>,
}

impl SstIter {
    /// Block `i`. A modified-since filter skips blocks, so it reads them
    /// one at a time; otherwise [`SstReader::next_block`].
    fn load(&mut self, i: usize) -> Result<Block> {
        if self.opts.modified_since_us > 0 {
            return self.reader.load_block(i);
        }
        self.reader
            .next_block(&mut self.ahead, i, self.end.as_deref())
    }
}

/// Data blocks read in one I/O by a front-to-back reader.
struct Span {
    /// Their indices.
    blocks: std::ops::Range<usize>,
    /// File offset of the first.
    at: u64,
    /// Their stored bytes.
    bytes: Vec<u8>,
}

impl Span {
    /// The stored bytes of the block at `h`, if this span holds them.
    fn raw(&self, h: &BlockHandle) -> Option<&[u8]> {
        let lo = usize::try_from(h.offset.checked_sub(self.at)?).ok()?;
        self.bytes.get(lo..lo.checked_add(h.len as usize)?)
    }
}

impl std::fmt::Debug for SstIter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SstIter")
            .field("path", &self.reader.path)
            .field("next_block", &self.next_block)
            .field("done", &self.done)
            .finish_non_exhaustive()
    }
}

impl Iterator for SstIter {
    type Item = Result<(Vec<u8>, LedgerValue)>;
    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if self.done {
                return None;
            }
            let Some(cur) = self.cur.as_mut() else {
                if self.next_block >= self.reader.blocks.len() {
                    self.done = true;
                    return None;
                }
                let index = self.next_block;
                self.next_block += 1;
                let min_lm = self.opts.modified_since_us;
                if min_lm > 0
                    && self
                        .reader
                        .blocks
                        .get(index)
                        .is_some_and(|b| b.max_last_modified_us < min_lm)
                {
                    // Nothing in this block was modified recently enough.
                    if let (Some(b), Some(end)) =
                        (self.reader.blocks.get(index), self.end.as_deref())
                    {
                        if b.last_key.as_slice() >= end {
                            self.done = true;
                            return None;
                        }
                    }
                    continue;
                }
                match self.load(index) {
                    Ok(block) => {
                        let offset = self.reader.blocks.get(index).map_or(0, |b| b.offset);
                        self.cur = Some(Cursor {
                            block,
                            index,
                            offset,
                            pos: 0,
                            seen: 0,
                        });
                        continue;
                    }
                    Err(e) => {
                        self.done = true;
                        return Some(Err(e));
                    }
                }
            };
            let (index, offset) = (cur.index, cur.offset);
            let corrupt = |reason: String| {
                Error::corrupt(
                    &self.reader.path,
                    offset,
                    format!("data block {index}: {reason}"),
                )
            };
            match cur.next_raw() {
                Err(reason) => {
                    self.done = true;
                    return Some(Err(corrupt(reason)));
                }
                Ok(None) => {
                    // Skip reading the next block when no key can lie
                    // between this block's last key and `end`.
                    let last = self.reader.blocks.get(index).map(|b| b.last_key.as_slice());
                    if let (Some(last), Some(end)) = (last, self.end.as_deref()) {
                        if nothing_between(last, end) {
                            self.done = true;
                            return None;
                        }
                    }
                    self.cur = None;
                }
                Ok(Some((k, v))) => {
                    if k < self.start.as_slice() {
                        continue;
                    }
                    if self.end.as_deref().is_some_and(|end| k >= end) {
                        self.done = true;
                        return None;
                    }
                    if !self.opts.accepts(k) {
                        continue;
                    }
                    match decode_value(v) {
                        Ok(v) => return Some(Ok((k.to_vec(), v))),
                        Err(e) => {
                            self.done = true;
                            return Some(Err(corrupt(e.0)));
                        }
                    }
                }
            }
        }
    }
}

impl std::iter::FusedIterator for SstIter {}

/// True if no byte string `k` satisfies `last < k < end`, i.e. `end` is at
/// most the immediate successor `last ++ [0]` of `last`.
fn nothing_between(last: &[u8], end: &[u8]) -> bool {
    end <= last || (end.len() == last.len() + 1 && end.starts_with(last) && end.last() == Some(&0))
}

// ---------------------------------------------------------------------------
// Dump
// ---------------------------------------------------------------------------

/// Writes a human-readable account of the SST file at `path` to `out`: the
/// summary, every data block and (with `show_records`) every entry. Damaged
/// blocks are reported and skipped. Errors if the file cannot be opened (a
/// damaged footer, index, bloom or meta block) or `out` fails.
pub fn dump(path: &Path, out: &mut dyn Write, show_records: bool) -> Result<DumpReport> {
    let reader = SstReader::open(path)?;
    let s = reader.summary();
    let w = |r: std::io::Result<()>| r.ctx("write dump of", path);
    w(writeln!(out, "SST file {}", path.display()))?;
    w(writeln!(
        out,
        "  format version {FORMAT_VERSION}, {} bytes, {} data blocks",
        s.size_bytes,
        reader.blocks.len()
    ))?;
    w(writeln!(
        out,
        "  entries {} (tombstones {}), sqn {}..={}, max last-modified {} us",
        s.entries, s.tombstones, s.min_sqn, s.max_sqn, s.max_last_modified_us
    ))?;
    w(writeln!(out, "  min key {}", render_key(&s.min_key)))?;
    w(writeln!(out, "  max key {}", render_key(&s.max_key)))?;
    w(writeln!(
        out,
        "  bloom {} bits, k = {}",
        reader.bloom.bit_count(),
        reader.bloom.k()
    ))?;
    let verify = reader.scan_blocks(|i, h, res| {
        match res {
            Ok(entries) => {
                w(writeln!(
                    out,
                    "block {i} offset {} len {}: {} entries, last key {}, max last-modified {} us",
                    h.offset,
                    h.len,
                    entries.len(),
                    render_key(&h.last_key),
                    h.max_last_modified_us
                ))?;
                if show_records {
                    for (k, v) in entries {
                        let status = match v.status {
                            Status::Active => "active",
                            Status::Tombstone => "tombstone",
                        };
                        w(writeln!(
                            out,
                            "  {} sqn {} {status} size {} hash 0x{:016x} last-modified {} us \
                             expires {} metadata {} bytes",
                            render_key(k),
                            v.sqn,
                            v.size,
                            v.value_hash,
                            v.last_modified_us,
                            v.expires_at,
                            v.metadata.len()
                        ))?;
                    }
                }
            }
            Err(d) => {
                w(writeln!(
                    out,
                    "block {i} offset {} len {}: DAMAGED: {}",
                    d.offset, d.len, d.reason
                ))?;
            }
        }
        Ok(())
    })?;
    w(writeln!(
        out,
        "{} blocks, {} damaged, {} readable entries",
        verify.blocks, verify.damaged_blocks, verify.entries
    ))?;
    if let Some(m) = &verify.summary_mismatch {
        w(writeln!(out, "MISMATCH: {m}"))?;
    }
    Ok(DumpReport {
        summary: s.clone(),
        verify,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    type Model = BTreeMap<Vec<u8>, LedgerValue>;

    fn val(sqn: u64, tombstone: bool, meta_len: usize, lm: u64) -> LedgerValue {
        LedgerValue {
            sqn,
            status: if tombstone {
                Status::Tombstone
            } else {
                Status::Active
            },
            expires_at: sqn % 5,
            value_hash: sqn.wrapping_mul(0x9E37_79B9_7F4A_7C15),
            size: if tombstone { 0 } else { sqn.wrapping_mul(3) },
            last_modified_us: lm,
            metadata: (0..meta_len).map(|i| (i % 251) as u8).collect(),
        }
    }

    fn opts(block_bytes: usize) -> SstOptions {
        SstOptions {
            block_bytes,
            bloom_bits_per_key: 8,
            ..SstOptions::default()
        }
    }

    fn write(path: &Path, model: &Model, o: SstOptions) -> SstSummary {
        let mut w = SstWriter::create(path, o).unwrap();
        for (k, v) in model {
            w.add(k, v).unwrap();
        }
        assert_eq!(w.entries(), model.len() as u64);
        w.finish().unwrap()
    }

    /// Object keys in three buckets, some tombstones, varied metadata, some
    /// entries bigger than a 512-byte block, and a few index keys.
    fn sample(n: u64) -> Model {
        let mut m = Model::new();
        for i in 0..n {
            let key = crate::key::object(
                format!("b{}", i % 3).as_bytes(),
                format!("k{i:05}").as_bytes(),
            );
            let meta = if i % 50 == 7 {
                2000
            } else {
                (i as usize * 13) % 200
            };
            m.insert(
                key,
                val(i + 1, i % 7 == 3, meta, 1_000_000 + (i * 7919) % 10_007),
            );
        }
        for i in 0..n / 10 {
            let key = crate::key::encode(
                KeyKind::Index,
                &[b"b0", b"field_bin", format!("t{i}").as_bytes(), b"key"],
            );
            m.insert(key, val(n + i + 1, false, 0, 5));
        }
        m
    }

    /// A writer with `sync_bytes` set hands the file to the disk in steps:
    /// after each step everything added so far is in the file (not in the
    /// writer's buffer) and synced; with 0 nothing is synced before
    /// `finish`. Either way the finished file reads back the same.
    #[test]
    fn a_writer_syncs_in_steps_of_sync_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let m = sample(600);
        for (name, step) in [("steps.sst", 4096u64), ("once.sst", 0)] {
            let path = dir.path().join(name);
            let o = SstOptions {
                sync_bytes: step,
                ..opts(512)
            };
            let mut w = SstWriter::create(&path, o).unwrap();
            let mut steps_seen = 0;
            for (k, v) in &m {
                let before = w.synced;
                w.add(k, v).unwrap();
                if w.synced != before {
                    steps_seen += 1;
                    assert!(w.synced - before >= step, "a step of {}", w.synced - before);
                    assert_eq!(w.synced, w.offset, "a step syncs all written so far");
                    let on_disk = std::fs::metadata(&path).unwrap().len();
                    assert_eq!(on_disk, w.synced, "the step's bytes left the buffer");
                }
                assert!(
                    step == 0 || w.offset - w.synced < step,
                    "never a step behind"
                );
            }
            if step == 0 {
                assert_eq!((steps_seen, w.synced), (0, 0));
            } else {
                assert!(steps_seen > 10, "{steps_seen} steps");
            }
            let sum = w.finish().unwrap();
            let r = Arc::new(SstReader::open(&path).unwrap());
            assert_eq!(sum.entries, m.len() as u64);
            assert_eq!(scan(&r, &[], None), model_range(&m, &[], None));
        }
    }

    fn scan(r: &Arc<SstReader>, start: &[u8], end: Option<&[u8]>) -> Vec<(Vec<u8>, LedgerValue)> {
        r.range(start, end).collect::<Result<Vec<_>>>().unwrap()
    }

    fn model_range(m: &Model, start: &[u8], end: Option<&[u8]>) -> Vec<(Vec<u8>, LedgerValue)> {
        m.iter()
            .filter(|(k, _)| k.as_slice() >= start && end.is_none_or(|e| k.as_slice() < e))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect()
    }

    fn flip(path: &Path, offset: u64) {
        let mut bytes = std::fs::read(path).unwrap();
        bytes[offset as usize] ^= 0x5A;
        std::fs::write(path, bytes).unwrap();
    }

    #[test]
    fn range_with_skips_old_blocks_and_filtered_keys() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("lm.sst");
        let mut model = Model::new();
        for i in 0..2000u64 {
            let key = crate::key::object(b"b", format!("k{i:05}").as_bytes());
            // Last-modified grows with the key, as for keys written in order.
            model.insert(key, val(i + 1, false, 0, 1_000 + i * 10));
        }
        write(&path, &model, opts(512));
        let r = Arc::new(SstReader::open(&path).unwrap());
        let low = 1_000 + 1500 * 10;
        let before = r.blocks_read();
        let got: Vec<_> = r
            .range_with(
                b"",
                None,
                RangeOptions {
                    modified_since_us: low,
                    key_filter: None,
                },
            )
            .collect::<Result<Vec<_>>>()
            .unwrap();
        let read = r.blocks_read() - before;
        let want: Vec<_> = model
            .iter()
            .filter(|(_, v)| v.last_modified_us >= low)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        // Every recent entry is there; old ones only from a shared block.
        assert!(want.iter().all(|w| got.contains(w)));
        assert!(
            got.len() < want.len() + 100,
            "{} vs {}",
            got.len(),
            want.len()
        );
        assert!(read * 3 < r.blocks().len() as u64, "read {read} blocks");

        let only_even: KeyFilter =
            Arc::new(|k: &[u8]| k.len() > 3 && k[k.len() - 3].is_multiple_of(2));
        let got: Vec<_> = r
            .range_with(
                b"",
                None,
                RangeOptions {
                    modified_since_us: 0,
                    key_filter: Some(only_even),
                },
            )
            .map(|e| e.unwrap().0)
            .collect();
        let want: Vec<_> = model
            .keys()
            .filter(|k| k[k.len() - 3] % 2 == 0)
            .cloned()
            .collect();
        assert_eq!(want.len(), 1000);
        assert_eq!(got, want);
    }

    #[test]
    fn reader_is_send_sync() {
        fn check<T: Send + Sync>() {}
        check::<SstReader>();
        check::<SstIter>();
    }

    #[test]
    fn round_trip_get_and_range() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.sst");
        let model = sample(600);
        let summary = write(&path, &model, opts(512));

        assert_eq!(summary.entries, model.len() as u64);
        assert_eq!(
            summary.tombstones,
            model
                .values()
                .filter(|v| v.status == Status::Tombstone)
                .count() as u64
        );
        assert_eq!(&summary.min_key, model.keys().next().unwrap());
        assert_eq!(&summary.max_key, model.keys().next_back().unwrap());
        assert_eq!(
            summary.min_sqn,
            model.values().map(|v| v.sqn).min().unwrap()
        );
        assert_eq!(
            summary.max_sqn,
            model.values().map(|v| v.sqn).max().unwrap()
        );
        assert_eq!(
            summary.max_last_modified_us,
            model.values().map(|v| v.last_modified_us).max().unwrap()
        );
        assert_eq!(summary.size_bytes, std::fs::metadata(&path).unwrap().len());
        assert!(is_sst_file(&path).unwrap());

        let r = Arc::new(SstReader::open(&path).unwrap());
        assert_eq!(r.summary(), &summary);
        assert_eq!(r.path(), path.as_path());
        assert!(r.blocks().len() > 10);
        // Entries bigger than a block sit alone in theirs.
        for b in r.blocks() {
            let v = &model[&b.last_key];
            if v.metadata.len() >= 512 {
                let block = r
                    .load_block(r.blocks().iter().position(|x| x == b).unwrap())
                    .unwrap();
                assert_eq!(block.count, 1);
            }
        }

        for (k, v) in &model {
            assert_eq!(
                r.get(k, crate::key::hash(k)).unwrap().as_ref(),
                Some(v),
                "{}",
                render_key(k)
            );
        }
        let missing = [
            crate::key::object(b"b0", b"k00001"), // k00001 is in bucket b1
            crate::key::object(b"a", b"x"),
            crate::key::object(b"zz", b"x"),
            crate::key::encode(KeyKind::Index, &[b"b0", b"field_bin", b"t0", b"zzz"]),
            b"\x00".to_vec(),
            b"\xff\xff".to_vec(),
            Vec::new(),
        ];
        for k in &missing {
            assert_eq!(r.get(k, crate::key::hash(k)).unwrap(), None);
        }

        let all = scan(&r, b"", None);
        assert_eq!(all, model_range(&model, b"", None));
        let keys: Vec<&Vec<u8>> = model.keys().collect();
        let bounds: Vec<(Vec<u8>, Option<Vec<u8>>)> = vec![
            (keys[10].clone(), Some(keys[200].clone())),
            (keys[0].clone(), Some(keys[1].clone())),
            (keys[5].clone(), Some(keys[5].clone())),
            (keys[300].clone(), None),
            (
                crate::key::prefix(KeyKind::Object, &[b"b1"]),
                crate::key::prefix_end(&crate::key::prefix(KeyKind::Object, &[b"b1"])),
            ),
            (
                vec![KeyKind::Index as u8],
                Some(vec![KeyKind::Index as u8 + 1]),
            ),
            (b"\xff".to_vec(), None),
            (keys[100].clone(), Some(keys[50].clone())),
            (
                [keys[20].as_slice(), b"\x00"].concat(),
                Some([keys[400].as_slice(), b"\x00"].concat()),
            ),
        ];
        for (s, e) in &bounds {
            assert_eq!(
                scan(&r, s, e.as_deref()),
                model_range(&model, s, e.as_deref())
            );
        }

        let report = r.verify().unwrap();
        assert!(report.is_clean(), "{report:?}");
        assert_eq!(report.entries, model.len() as u64);
        assert_eq!(report.blocks, r.blocks().len() as u64);
    }

    #[test]
    fn range_reads_only_the_blocks_it_needs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.sst");
        let model = sample(400);
        write(&path, &model, opts(256));
        let r = Arc::new(SstReader::open(&path).unwrap());
        let b = &r.blocks()[5];
        let before = r.blocks_read();
        let got = scan(
            &r,
            &b.last_key,
            Some(&[b.last_key.as_slice(), b"\x00"].concat()),
        );
        assert_eq!(got.len(), 1);
        assert_eq!(r.blocks_read() - before, 1);
        assert_eq!(r.range(b"", Some(b"")).count(), 0);
        assert_eq!(r.blocks_read() - before, 1);
    }

    /// Scans read the blocks their range can reach in one I/O: never past
    /// the block that holds the range's end, never more than
    /// `SST_ITER_READ_BYTES` (unless one block is bigger), and the spans of
    /// a whole-file scan cover every block once.
    #[test]
    fn scans_read_the_blocks_their_range_reaches_in_bounded_spans() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.sst");
        let model = sample(400);
        write(&path, &model, opts(256));
        let r = SstReader::open(&path).unwrap();
        let b = r.blocks().to_vec();
        assert!(b.len() > 8);
        assert_eq!(r.span_from(2, Some(&b[4].last_key)), 2..5);
        let just_after_4 = [b[4].last_key.as_slice(), b"\x00"].concat();
        assert_eq!(r.span_from(2, Some(&just_after_4)), 2..5);
        assert_eq!(r.span_from(2, None), 2..b.len());

        let big = dir.path().join("2.sst");
        let model = sample(6000);
        write(&big, &model, opts(4096));
        let r = SstReader::open(&big).unwrap();
        let n = r.blocks().len();
        let (mut at, mut spans) = (0, 0);
        while at < n {
            let span = r.span_from(at, None);
            assert_eq!(span.start, at);
            let bytes: u64 = r.blocks()[span.clone()]
                .iter()
                .map(|h| u64::from(h.len))
                .sum();
            assert!(
                span.len() == 1 || bytes <= SST_ITER_READ_BYTES,
                "{span:?}: {bytes}"
            );
            at = span.end;
            spans += 1;
        }
        let file_bytes: u64 = r.blocks().iter().map(|h| u64::from(h.len)).sum();
        assert!(file_bytes > 2 * SST_ITER_READ_BYTES, "{file_bytes}");
        assert!(spans >= 3 && spans < n / 8, "{spans} spans for {n} blocks");
        let all: Vec<_> = Arc::new(r).range(b"", None).map(|e| e.unwrap().0).collect();
        assert_eq!(all, model.keys().cloned().collect::<Vec<_>>());
    }

    #[test]
    fn out_of_order_add_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.sst");
        let mut w = SstWriter::create(&path, opts(512)).unwrap();
        w.add(b"ob", &val(1, false, 0, 0)).unwrap();
        assert!(matches!(
            w.add(b"oa", &val(2, false, 0, 0)),
            Err(Error::InvalidInput(_))
        ));
        assert!(matches!(
            w.add(b"ob", &val(3, false, 0, 0)),
            Err(Error::InvalidInput(_))
        ));
        w.add(b"oc", &val(4, true, 0, 0)).unwrap();
        let s = w.finish().unwrap();
        assert_eq!(
            (s.entries, s.tombstones, s.min_sqn, s.max_sqn),
            (2, 1, 1, 4)
        );
        let r = SstReader::open(&path).unwrap();
        assert_eq!(r.get(b"oa", crate::key::hash(b"oa")).unwrap(), None);
        assert_eq!(
            r.get(b"oc", crate::key::hash(b"oc")).unwrap(),
            Some(val(4, true, 0, 0))
        );
    }

    #[test]
    fn empty_finish_errors_and_removes_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.sst");
        let w = SstWriter::create(&path, opts(512)).unwrap();
        assert!(path.exists());
        assert!(matches!(w.finish(), Err(Error::InvalidInput(_))));
        assert!(!path.exists());
    }

    #[test]
    fn dropped_writer_removes_the_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.sst");
        let mut w = SstWriter::create(&path, opts(64)).unwrap();
        for i in 0..100u32 {
            w.add(
                &crate::key::object(b"b", &i.to_be_bytes()),
                &val(1, false, 10, 0),
            )
            .unwrap();
        }
        assert!(w.estimated_bytes() > 100 * 40);
        drop(w);
        assert!(!path.exists());
    }

    #[test]
    fn create_refuses_existing_file_and_bad_options() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.sst");
        std::fs::write(&path, b"x").unwrap();
        assert!(matches!(
            SstWriter::create(&path, opts(512)),
            Err(Error::Io { .. })
        ));
        assert_eq!(std::fs::read(&path).unwrap(), b"x");
        let other = dir.path().join("2.sst");
        assert!(matches!(
            SstWriter::create(&other, opts(0)),
            Err(Error::InvalidInput(_))
        ));
        let no_bloom = SstOptions {
            block_bytes: 512,
            bloom_bits_per_key: 0,
            ..SstOptions::default()
        };
        assert!(matches!(
            SstWriter::create(&other, no_bloom),
            Err(Error::InvalidInput(_))
        ));
        assert!(!other.exists());
    }

    #[test]
    fn estimated_bytes_is_close() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.sst");
        let model = sample(300);
        let mut w = SstWriter::create(&path, opts(512)).unwrap();
        for (k, v) in &model {
            w.add(k, v).unwrap();
        }
        let est = w.estimated_bytes();
        let s = w.finish().unwrap();
        let diff = est.abs_diff(s.size_bytes);
        assert!(
            diff <= s.size_bytes / 50,
            "estimate {est}, actual {}",
            s.size_bytes
        );
    }

    /// `1.sst` in `dir` holding `sample(300)` in 256-byte blocks, with a
    /// byte of its second data block flipped; the model and the index.
    fn second_block_damaged(dir: &Path) -> (PathBuf, Model, Vec<BlockHandle>) {
        let path = dir.join("1.sst");
        let model = sample(300);
        write(&path, &model, opts(256));
        let blocks = SstReader::open(&path).unwrap().blocks().to_vec();
        assert!(blocks.len() >= 3);
        flip(&path, blocks[1].offset + 10);
        (path, model, blocks)
    }

    /// Point lookups through a block cache: the first read of a block
    /// misses and caches it, later ones hit without reading the file; a
    /// damaged block is reported every time and never cached; dropping the
    /// reader empties the cache of its blocks.
    #[test]
    fn cached_lookups_read_each_block_once_and_never_cache_damage() {
        let dir = tempfile::tempdir().unwrap();
        let (path, model, blocks) = second_block_damaged(dir.path());
        let bad = blocks[1].clone();
        let in_bad = |k: &Vec<u8>| k > &blocks[0].last_key && k <= &bad.last_key;

        let cache = BlockCache::new(1 << 20).unwrap();
        let stats = Stats::default();
        let r = SstReader::open_cached(&path, Some(cache.clone())).unwrap();
        for round in 0..2 {
            for (k, v) in &model {
                let got = r.get_timed(k, crate::key::hash(k), Some(&stats));
                if in_bad(k) {
                    assert!(got.unwrap_err().is_corruption(), "round {round}");
                } else {
                    assert_eq!(got.unwrap().as_ref(), Some(v), "round {round}");
                }
            }
        }
        let good_blocks = blocks.len() as u64 - 1;
        let bad_lookups = model.keys().filter(|k| in_bad(k)).count() as u64;
        // Every good block read from the file once; the damaged one on
        // every lookup in it.
        assert_eq!(r.blocks_read(), good_blocks + 2 * bad_lookups);
        let misses = stats.ledger_block_cache_misses.load(Ordering::Relaxed);
        let hits = stats.ledger_block_cache_hits.load(Ordering::Relaxed);
        assert_eq!(misses, good_blocks + 2 * bad_lookups);
        assert_eq!(hits + misses, 2 * model.len() as u64);
        assert_eq!(
            stats.sst_block_read.count.load(Ordering::Relaxed),
            misses,
            "only reads from the file are timed"
        );
        assert!(cache.bytes() > 0);
        drop(r);
        assert_eq!(
            cache.bytes(),
            0,
            "a dropped reader's blocks leave the cache"
        );

        // Two readers of the same file never share entries.
        let a = SstReader::open_cached(&path, Some(cache.clone())).unwrap();
        let b = SstReader::open_cached(&path, Some(cache.clone())).unwrap();
        let k = model.keys().next().unwrap();
        a.get(k, crate::key::hash(k)).unwrap();
        b.get(k, crate::key::hash(k)).unwrap();
        assert_eq!((a.blocks_read(), b.blocks_read()), (1, 1));
    }

    #[test]
    fn damaged_data_block_is_reported_not_returned() {
        let dir = tempfile::tempdir().unwrap();
        let (path, model, blocks) = second_block_damaged(dir.path());
        let bad = &blocks[1];

        let r = Arc::new(SstReader::open(&path).unwrap());
        for (k, v) in &model {
            let got = r.get(k, crate::key::hash(k));
            if k > &blocks[0].last_key && k <= &bad.last_key {
                let e = got.unwrap_err();
                assert!(e.is_corruption(), "{e}");
                let msg = e.to_string();
                assert!(msg.contains(&bad.offset.to_string()), "{msg}");
                assert!(msg.contains("1.sst"), "{msg}");
            } else {
                assert_eq!(got.unwrap().as_ref(), Some(v));
            }
        }

        let items: Vec<_> = r.range(b"", None).collect();
        let first_block_entries = model.keys().filter(|k| *k <= &blocks[0].last_key).count();
        assert_eq!(items.len(), first_block_entries + 1);
        assert!(items[..first_block_entries].iter().all(|i| i.is_ok()));
        assert!(items[first_block_entries]
            .as_ref()
            .unwrap_err()
            .is_corruption());
        // A range starting after the damage is unaffected.
        let after = scan(&r, &[blocks[1].last_key.as_slice(), b"\x00"].concat(), None);
        assert_eq!(
            after.len(),
            model.keys().filter(|k| *k > &blocks[1].last_key).count()
        );

        let report = r.verify().unwrap();
        assert_eq!(report.damaged_blocks, 1);
        assert_eq!(report.damage[0].block, 1);
        assert_eq!(report.damage[0].offset, bad.offset);
        assert!(!report.is_clean());

        let mut out = Vec::new();
        let dumped = dump(&path, &mut out, true).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert_eq!(dumped.verify.damaged_blocks, 1);
        assert!(
            text.contains(&format!(
                "block 1 offset {} len {}: DAMAGED",
                bad.offset, bad.len
            )),
            "{text}"
        );
        assert!(text.contains("1 damaged"), "{text}");
        assert!(text.contains("object[b0, k00000] sqn 1 active"), "{text}");
    }

    #[test]
    fn dump_of_a_healthy_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.sst");
        let model = sample(50);
        write(&path, &model, opts(512));
        let mut out = Vec::new();
        let report = dump(&path, &mut out, false).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(report.verify.is_clean());
        assert_eq!(report.verify.entries, model.len() as u64);
        assert!(text.contains("0 damaged"), "{text}");
        assert!(!text.contains("sqn 1 active"), "{text}");
        let mut out = Vec::new();
        dump(&path, &mut out, true).unwrap();
        let text = String::from_utf8(out).unwrap();
        assert!(text.contains("index[b0, field_bin, t0, key]"), "{text}");
        assert!(text.contains("tombstone"), "{text}");
    }

    #[test]
    fn damaged_footer_index_bloom_or_meta_fails_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.sst");
        write(&path, &sample(200), opts(512));
        let good = std::fs::read(&path).unwrap();
        let len = good.len() as u64;
        let footer = Footer::decode(&good[good.len() - FOOTER_BYTES..], len).unwrap();
        let spots = [
            len - 1,                                           // footer crc
            len - FOOTER_BYTES as u64,                         // magic
            len - FOOTER_BYTES as u64 + 9,                     // version
            len - FOOTER_BYTES as u64 + 13,                    // index offset
            len - 8,                                           // reserved
            footer.index.offset + 2,                           // index entry
            footer.index.offset + footer.index.len as u64 - 6, // index count
            footer.bloom.offset + 20,                          // bloom bits
            footer.bloom.offset,                               // bloom k
            footer.meta.offset + 3,                            // meta
        ];
        for spot in spots {
            std::fs::write(&path, &good).unwrap();
            flip(&path, spot);
            let e = SstReader::open(&path).unwrap_err();
            assert!(e.is_corruption(), "flip at {spot}: {e}");
            assert!(e.to_string().contains("1.sst"), "{e}");
            assert!(dump(&path, &mut Vec::new(), true).is_err());
        }
        std::fs::write(&path, &good).unwrap();
        flip(&path, len - FOOTER_BYTES as u64);
        assert!(!is_sst_file(&path).unwrap());
    }

    #[test]
    fn truncated_file_fails_open() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.sst");
        write(&path, &sample(100), opts(512));
        let good = std::fs::read(&path).unwrap();
        for cut in [
            0,
            1,
            10,
            63,
            64,
            100,
            good.len() / 2,
            good.len() - 64,
            good.len() - 1,
        ] {
            std::fs::write(&path, &good[..cut]).unwrap();
            let e = SstReader::open(&path).unwrap_err();
            assert!(e.is_corruption(), "cut at {cut}: {e}");
        }
        assert!(!is_sst_file(&path).unwrap());
        assert!(matches!(
            SstReader::open(&dir.path().join("missing.sst")),
            Err(Error::Io { .. })
        ));
    }

    #[test]
    fn bloom_negative_get_reads_no_block() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.sst");
        let model = sample(300);
        write(&path, &model, opts(512));
        let r = SstReader::open(&path).unwrap();
        let mut negatives = 0;
        for i in 0..300u32 {
            // Within the file's key range, absent.
            let k = crate::key::object(b"b1", format!("k{i:05}x").as_bytes());
            assert!(k > r.summary().min_key && k < r.summary().max_key);
            let h = crate::key::hash(&k);
            let before = r.blocks_read();
            assert_eq!(r.get(&k, h).unwrap(), None);
            if !r.bloom().may_contain(h) {
                negatives += 1;
                assert_eq!(r.blocks_read(), before);
            } else {
                assert_eq!(r.blocks_read(), before + 1);
            }
        }
        assert!(negatives > 270, "{negatives}");
        // Index keys bypass the bloom.
        let k = crate::key::encode(KeyKind::Index, &[b"b0", b"field_bin", b"t1", b"key"]);
        let before = r.blocks_read();
        assert!(r.get(&k, crate::key::hash(&k)).unwrap().is_some());
        assert_eq!(r.blocks_read(), before + 1);
    }

    #[test]
    fn nothing_between_is_exact() {
        assert!(nothing_between(b"ab", b"ab\0"));
        assert!(nothing_between(b"ab", b"ab"));
        assert!(nothing_between(b"ab", b"a"));
        assert!(!nothing_between(b"ab", b"ab\0\0"));
        assert!(!nothing_between(b"ab", b"ab\x01"));
        assert!(!nothing_between(b"ab", b"ac"));
        assert!(!nothing_between(b"", b"\x01"));
        assert!(nothing_between(b"", b"\0"));
    }

    #[test]
    fn ranges_ending_at_block_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.sst");
        let model = sample(200);
        write(&path, &model, opts(200));
        let r = Arc::new(SstReader::open(&path).unwrap());
        let blocks = r.blocks().to_vec();
        for w in blocks.windows(2) {
            let (a, b) = (&w[0].last_key, &w[1].last_key);
            for (s, e) in [
                (a.clone(), Some(b.clone())),
                (a.clone(), Some([a.as_slice(), b"\0"].concat())),
                (
                    [a.as_slice(), b"\0"].concat(),
                    Some([b.as_slice(), b"\0"].concat()),
                ),
                (b.clone(), Some(a.clone())),
            ] {
                assert_eq!(
                    scan(&r, &s, e.as_deref()),
                    model_range(&model, &s, e.as_deref())
                );
            }
        }
    }

    #[test]
    fn concurrent_readers_share_one_handle() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.sst");
        let model = Arc::new(sample(300));
        write(&path, &model, opts(256));
        let r = Arc::new(SstReader::open(&path).unwrap());
        let threads: Vec<_> = (0..4)
            .map(|t| {
                let (r, model) = (Arc::clone(&r), Arc::clone(&model));
                std::thread::spawn(move || {
                    for (k, v) in model.iter().skip(t).step_by(4) {
                        assert_eq!(r.get(k, crate::key::hash(k)).unwrap().as_ref(), Some(v));
                    }
                    assert_eq!(r.range(b"", None).count(), model.len());
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
    }

    #[test]
    fn file_shrunk_after_open_is_damage() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("1.sst");
        let model = sample(100);
        write(&path, &model, opts(256));
        let r = SstReader::open(&path).unwrap();
        let cut = r.blocks()[2].offset + 4;
        std::fs::OpenOptions::new()
            .write(true)
            .open(&path)
            .unwrap()
            .set_len(cut)
            .unwrap();
        let k = &r.blocks()[3].last_key;
        assert!(r.get(k, crate::key::hash(k)).unwrap_err().is_corruption());
        let report = r.verify().unwrap();
        assert_eq!(report.damaged_blocks, report.blocks - 2);
    }

    #[test]
    fn render_key_falls_back_to_hex() {
        assert_eq!(render_key(&crate::key::object(b"b", b"k")), "object[b, k]");
        assert_eq!(render_key(b"xyz"), "0x78797a");
        assert_eq!(render_key(b""), "0x");
    }

    fn arb_model() -> impl Strategy<Value = Model> {
        let key = prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..8),
            (
                proptest::collection::vec(0u8..4, 0..3),
                proptest::collection::vec(any::<u8>(), 0..6)
            )
                .prop_map(|(b, k)| crate::key::object(&b, &k)),
        ];
        let value = (any::<u64>(), any::<bool>(), 0usize..300, any::<u64>())
            .prop_map(|(sqn, t, meta, lm)| val(sqn, t, meta, lm));
        proptest::collection::btree_map(key, value, 1..120)
    }

    fn arb_bound() -> impl Strategy<Value = Vec<u8>> {
        prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..6),
            (
                proptest::collection::vec(0u8..4, 0..3),
                proptest::collection::vec(any::<u8>(), 0..6)
            )
                .prop_map(|(b, k)| crate::key::object(&b, &k)),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

        #[test]
        fn matches_btreemap_model(model in arb_model(),
                                  block_bytes in 32usize..700,
                                  probes in proptest::collection::vec(arb_bound(), 0..20),
                                  ranges in proptest::collection::vec(
                                      (arb_bound(), proptest::option::of(arb_bound())), 0..10)) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("p.sst");
            write(&path, &model, opts(block_bytes));
            let r = Arc::new(SstReader::open(&path).unwrap());
            for (k, v) in &model {
                prop_assert_eq!(r.get(k, crate::key::hash(k)).unwrap(), Some(v.clone()));
            }
            for k in &probes {
                prop_assert_eq!(r.get(k, crate::key::hash(k)).unwrap(), model.get(k).cloned());
            }
            prop_assert_eq!(scan(&r, b"", None), model_range(&model, b"", None));
            for (s, e) in &ranges {
                prop_assert_eq!(scan(&r, s, e.as_deref()), model_range(&model, s, e.as_deref()));
            }
            prop_assert!(r.verify().unwrap().is_clean());
        }

        #[test]
        fn open_never_panics_on_random_bytes(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("r.sst");
            std::fs::write(&path, &bytes).unwrap();
            prop_assert!(SstReader::open(&path).is_err());
            let _ = is_sst_file(&path);
        }

        #[test]
        fn damaged_files_never_panic(cut in any::<proptest::sample::Index>(),
                                     flips in proptest::collection::vec(
                                         (any::<proptest::sample::Index>(), 1u8..=255), 0..4),
                                     truncate in any::<bool>()) {
            let dir = tempfile::tempdir().unwrap();
            let path = dir.path().join("d.sst");
            let model = sample(40);
            write(&path, &model, opts(128));
            let mut bytes = std::fs::read(&path).unwrap();
            if truncate {
                bytes.truncate(cut.index(bytes.len()));
            }
            for (at, x) in &flips {
                if !bytes.is_empty() {
                    let i = at.index(bytes.len());
                    bytes[i] ^= x;
                }
            }
            std::fs::write(&path, &bytes).unwrap();
            if let Ok(r) = SstReader::open(&path) {
                let r = Arc::new(r);
                for k in model.keys() {
                    if let Ok(Some(v)) = r.get(k, crate::key::hash(k)) {
                        // Any value returned is the one written.
                        prop_assert_eq!(Some(&v), model.get(k));
                    }
                }
                let _ = r.range(b"", None).count();
                let _ = r.verify();
                let _ = dump(&path, &mut std::io::sink(), true);
            } else {
                prop_assert!(truncate || !flips.is_empty());
            }
        }
    }
}
