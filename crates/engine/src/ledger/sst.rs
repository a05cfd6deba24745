//! SST files: immutable sorted runs of ledger entries. STUB: interface only.

use crate::entry::LedgerValue;
use crate::error::Result;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// How SST files are built.
#[derive(Debug, Clone, Copy)]
pub struct SstOptions {
    /// Target data block size in bytes, before the block trailer.
    pub block_bytes: usize,
    /// Bloom filter bits per object key.
    pub bloom_bits_per_key: usize,
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

/// Writes one SST file; keys must be added in strictly ascending order.
#[derive(Debug)]
pub struct SstWriter {
    _private: (),
}

impl SstWriter {
    /// Creates the file at `path` (which must not exist).
    pub fn create(path: &Path, opts: SstOptions) -> Result<SstWriter> {
        let _ = (path, opts);
        todo!()
    }

    /// Adds one entry. Errors if `key` is not greater than the previous key.
    pub fn add(&mut self, key: &[u8], value: &LedgerValue) -> Result<()> {
        let _ = (key, value);
        todo!()
    }

    /// Entries added so far.
    pub fn entries(&self) -> u64 {
        todo!()
    }

    /// Bytes the file would have if finished now (approximately).
    pub fn estimated_bytes(&self) -> u64 {
        todo!()
    }

    /// Writes the index, bloom and footer, fsyncs, and returns the summary.
    /// Errors if no entry was added.
    pub fn finish(self) -> Result<SstSummary> {
        todo!()
    }
}

/// A read handle on one SST file. `Send + Sync`: reads use positional I/O.
#[derive(Debug)]
pub struct SstReader {
    _private: (),
}

impl SstReader {
    /// Opens and verifies the footer, index and bloom of `path`.
    pub fn open(path: &Path) -> Result<SstReader> {
        let _ = path;
        todo!()
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        todo!()
    }

    /// What the file holds.
    pub fn summary(&self) -> &SstSummary {
        todo!()
    }

    /// Looks `key` up; `hash` is `crate::key::hash(key)`. A damaged block is an error.
    pub fn get(&self, key: &[u8], hash: u64) -> Result<Option<LedgerValue>> {
        let _ = (key, hash);
        todo!()
    }

    /// Iterates entries with `start <= key < end` (`end = None`: to the last key).
    pub fn range(self: &Arc<Self>, start: &[u8], end: Option<&[u8]>) -> SstIter {
        let _ = (start, end);
        todo!()
    }
}

/// Iterator over a key range of one SST file.
#[derive(Debug)]
pub struct SstIter {
    _private: PathBuf,
}

impl Iterator for SstIter {
    type Item = Result<(Vec<u8>, LedgerValue)>;
    fn next(&mut self) -> Option<Self::Item> {
        todo!()
    }
}
