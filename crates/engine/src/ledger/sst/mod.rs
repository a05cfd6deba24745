//! SST files: immutable sorted runs of ledger entries.
//!
//! An SST file holds ledger entries (key → [`LedgerValue`](crate::entry::LedgerValue)) sorted by key,
//! compared as plain bytes. It is written once by [`SstWriter`] and then only
//! read, through [`SstReader`], which keeps the index, the bloom filter and the
//! summary in memory and reads data blocks with positional reads (point
//! lookups through the [`super::block_cache`] when the reader has one).
//!
//! # Format (version 2; version 1 is read)
//!
//! All integers are little-endian; every CRC is CRC32C ([`crate::codec::crc`]).
//!
//! ```text
//! file        := data_block+ index_block bloom_block meta_block footer
//!
//! entries     := entry+ entry_count:u32
//! entry       := key_len:u32 key value_len:u32 value
//!                (value: the LedgerValue encoding, see crate::entry)
//! data_block  := codec:u8 content crc:u32                      (version 2)
//!                content: `entries` as the codec stores them
//!                (crate::compress: 0 none, 1 lz4, 2 zstd); crc covers
//!                the codec byte and the content.
//! data_block  := entries crc:u32                               (version 1)
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
//! footer      := magic:"BSLTSST1" version:u32 (1 or 2)
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
//! A data block is closed once its entries reach `block_bytes` (before
//! compression); an entry at least `block_bytes` long gets a block of its
//! own. Every block holds at least one entry. Each block is compressed on
//! its own with `SstOptions::compression` and stored as is (codec 0) when
//! that would not make it smaller. A reader checks the CRC first, then
//! decompresses, refusing a declared size above `SST_BLOCK_BYTES_MAX`; the
//! block cache holds blocks uncompressed ([`Block`]).
//!
//! # Damage
//!
//! [`SstReader::open`] verifies the footer, index, bloom and meta CRCs. Data
//! block CRCs are verified on every read from the file (a cached block was
//! verified when it was read): a damaged block makes the `get` that
//! reads it return [`Error::Corrupt`](crate::error::Error::Corrupt) (naming file and block offset), and a
//! range scan yield one `Err` and stop; other blocks stay readable.
//! [`SstReader::verify`] and [`dump`] report every damaged block.
//!
//! # Files
//!
//! * `mod.rs`: the format constants and the option and summary types;
//! * `writer`: writing a file ([`SstWriter`]);
//! * `format`: the footer and the index and meta blocks, encoded and
//!   checked (data blocks: `ledger::block`);
//! * `reader`: [`SstReader`], opening a file, point lookups, reading one
//!   block;
//! * `iter`: range scans ([`SstReader::range`], [`SstIter`]) and their
//!   read-ahead;
//! * `dump`: [`SstReader::verify`], [`dump`] and their reports.
//!
//! Imports run one way: `dump` → `iter` → `reader` → `format`.

mod dump;
mod format;
mod iter;
mod reader;
#[cfg(test)]
mod tests;
mod writer;

pub(crate) use super::block::{split_crc, Block};
use crate::compress::Compression;
pub use dump::{dump, BlockDamage, DumpReport, VerifyReport};
pub use format::is_sst_file;
pub(crate) use format::{decode_value, parse_index, parse_meta, read_entry, Footer};
pub use iter::SstIter;
pub use reader::SstReader;
pub use writer::SstWriter;

use crate::key::{self, KeyKind};
use crate::limits::SST_BLOCK_BYTES_MAX;
use std::sync::Arc;

/// The first 8 bytes of the footer.
pub const MAGIC: [u8; 8] = *b"BSLTSST1";

/// The format version this build writes (and the newest it reads).
pub const FORMAT_VERSION: u32 = 2;

/// The oldest format version this build reads (version 1: data blocks
/// stored uncompressed, without a codec byte).
pub const FORMAT_VERSION_MIN: u32 = 1;

/// Size of the fixed footer at the end of every SST file.
pub const FOOTER_BYTES: usize = 64;

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
    /// How data blocks are compressed (`Config::ledger_compression`); a
    /// block is stored as is when compressing would not make it smaller.
    pub compression: Compression,
    /// zstd level, when `compression` is zstd (`Config::zstd_level`).
    pub zstd_level: i32,
}

impl Default for SstOptions {
    /// 4 KiB blocks, 8 bloom bits per key, a sync every 1 MiB, lz4 blocks
    /// (the [`crate::Config`] defaults).
    fn default() -> Self {
        SstOptions {
            block_bytes: 4096,
            bloom_bits_per_key: crate::ledger::bloom::BITS_PER_KEY_DEFAULT,
            sync_bytes: 1024 * 1024,
            compression: Compression::Lz4,
            zstd_level: 1,
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
    /// Length of the block as stored (codec byte, content, trailer).
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
