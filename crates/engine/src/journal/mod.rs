//! The journal (leveled's "inker"): append-only files holding every value.
//!
//! STUB: the interface is fixed; the implementation lands in this module.

pub mod file;
pub mod manifest;
pub mod record;

use crate::error::Result;
use crate::stats::Stats;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use record::{Compression, JournalRecord, NewRecord, RecordKind};

/// Journal settings.
#[derive(Debug, Clone)]
pub struct JournalOptions {
    /// Roll the active file once it reaches this many bytes.
    pub file_bytes: u64,
    /// Rebuild a missing or damaged journal manifest from the files on disk
    /// instead of failing.
    pub repair_manifest: bool,
}

/// Summary of one journal file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalFileInfo {
    /// File number (the name is `<file_no:08>.jnl`).
    pub file_no: u64,
    /// Path of the data file.
    pub path: PathBuf,
    /// Lowest SQN in the file (0 if empty).
    pub first_sqn: u64,
    /// Highest SQN in the file (0 if empty).
    pub last_sqn: u64,
    /// Size in bytes.
    pub size_bytes: u64,
    /// True for the file being appended to.
    pub active: bool,
}

/// The journal of one store. `Send + Sync`; `append` callers must serialise
/// themselves (the store's write lock), everything else may run concurrently.
#[derive(Debug)]
pub struct Journal {
    _private: (),
}

impl Journal {
    /// Opens (or creates) the journal in `dir`, recovering the active file.
    pub fn open(dir: &Path, opts: JournalOptions, stats: Arc<Stats>) -> Result<Journal> {
        let _ = (dir, opts, stats);
        todo!()
    }

    /// Highest SQN written to the journal (0 when empty).
    pub fn last_sqn(&self) -> u64 {
        todo!()
    }

    /// Appends one record; `rec.sqn` must be greater than `last_sqn()`.
    pub fn append(&self, rec: &NewRecord<'_>) -> Result<()> {
        let _ = rec;
        todo!()
    }

    /// Returns once every record up to `sqn` is on stable storage (group commit).
    pub fn sync_to(&self, sqn: u64) -> Result<()> {
        let _ = sqn;
        todo!()
    }

    /// Reads the record with `sqn`, checking it belongs to `key`.
    pub fn fetch(&self, sqn: u64, key: &[u8]) -> Result<Option<JournalRecord>> {
        let _ = (sqn, key);
        todo!()
    }

    /// Calls `f` for every intact record with SQN > `after_sqn`, in SQN order.
    pub fn replay(
        &self,
        after_sqn: u64,
        f: &mut dyn FnMut(JournalRecord) -> Result<()>,
    ) -> Result<u64> {
        let _ = (after_sqn, f);
        todo!()
    }

    /// The journal's files, oldest first.
    pub fn files(&self) -> Vec<JournalFileInfo> {
        todo!()
    }

    /// Syncs the active file. The journal must not be used afterwards.
    pub fn close(&self) -> Result<()> {
        todo!()
    }
}
