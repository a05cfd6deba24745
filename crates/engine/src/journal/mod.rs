//! The journal (leveled's "inker"): append-only files holding every value.
//!
//! The journal directory holds:
//!
//! * data files `<file_no:08>.jnl` (format in [`file`](mod@file) and [`record`]): the
//!   newest is *active* (appended to), the others are *closed*;
//! * for each closed file an index `<file_no:08>.jix` of (sqn, offset),
//!   loaded into memory at open (16 bytes per record);
//! * `MANIFEST` (format in [`manifest`]), listing the files, replaced
//!   atomically at creation and at every roll.
//!
//! **Appends** (serialised by the caller) encode a record into one buffer and
//! hand it to the kernel with one positional write, so an acknowledged append
//! survives a process crash. Once the active file reaches
//! [`JournalOptions::file_bytes`] it is *rolled*: fsynced, its `.jix` written
//! (without an fsync: a damaged one is rebuilt at open), the next file put in
//! place (usually made ahead by the flusher, [`Journal::prepare_next_file`])
//! and the manifest replaced. A record larger than
//! `file_bytes` still goes into the current file, which then rolls; empty
//! files are never created in a loop.
//!
//! **Durability** is [`Journal::sync_to`], a group commit: one thread leads an
//! `fdatasync` covering every record written so far while the others wait for
//! it. An fsync failure poisons the journal: the failed call returns the I/O
//! error, later calls return [`Error::Closed`] (fsync is never retried, as
//! the kernel may have dropped the dirty pages).
//!
//! **Recovery** at open scans the active file; a damaged record followed by
//! valid ones is skipped (counted in `journal_corrupt_records`), a damaged
//! tail is cut off (counted in `journal_truncated_bytes`). Damaged records are
//! never returned as data: [`Journal::fetch`] reports them as
//! [`Error::Corrupt`] and [`Journal::replay`] skips them.
//!
//! Lock order: `active` before `closed`; `sync` is never held while taking
//! either.
//!
//! This file holds the journal's types and [`Journal::close`]; `open`
//! opens and recovers a journal, `write` is the append / roll / sync path,
//! `read` the fetch / replay path, [`compact`] and [`punch`] reclaim
//! garbage (copying, or punching holes through `gate`).

pub mod checkpoint;
pub mod compact;
/// Moved to the crate root (the ledger's SST blocks use it too); kept here
/// for the paths that name it.
pub use crate::compress;
pub mod dump;
pub mod file;
pub mod flusher;
pub(crate) mod gate;
pub mod manifest;
mod open;
pub mod punch;
mod read;
pub mod record;
pub mod value_cache;
pub mod view;
mod write;

use crate::error::{Error, IoContext, Result};
use crate::retired::Retired;
use crate::stats::Stats;
use file::{ClosedFile, Damage};
use manifest::MANIFEST_NAME;
use parking_lot::{Condvar, Mutex, RwLock};
use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use compact::{CompactedRun, Keep, Liveness};
pub use compress::CompressionPoint;
pub use dump::{dump, is_journal_file, journal_file_kind, DumpReport, JournalFileKind};
pub use record::{Compression, JournalRecord, NewRecord, RecordKind};
pub use value_cache::ValueCache;
pub use view::JournalView;

pub(crate) use open::create_data_file;

const MANIFEST_ADVICE: &str =
    "run `basalt kv --data-dir DIR repair` to rebuild it from the journal files";

const CLOSED_MSG: &str = "journal is closed";

/// Journal settings.
#[derive(Debug, Clone)]
pub struct JournalOptions {
    /// Roll the active file once it reaches this many bytes.
    pub file_bytes: u64,
    /// Rebuild a missing or damaged journal manifest from the files on disk
    /// instead of failing.
    pub repair_manifest: bool,
    /// How values are compressed (see [`compress`]).
    pub compression: Compression,
    /// zstd level when `compression` is zstd.
    pub zstd_level: i32,
    /// Compress at append or only when compaction rewrites a value.
    pub compression_point: CompressionPoint,
    /// Read a value record with one positional read sized from the index
    /// (`Config::journal_one_read`); false: header, then body.
    pub one_read: bool,
    /// `posix_fadvise(RANDOM)` on the handles used for value reads
    /// (`Config::journal_fadvise_random`).
    pub fadvise_random: bool,
    /// A fetch of a record older than the active file does not take the
    /// active-file lock (`Config::journal_skip_active_lock`).
    pub skip_active_lock: bool,
    /// Compaction fsyncs its output and drops input and output from the
    /// page cache every this many bytes (`Config::compaction_stream_bytes`).
    pub stream_bytes: u64,
    /// Compaction reads at most this many bytes a second (0: unpaced;
    /// `Config::compaction_read_bytes_per_sec`), unless
    /// [`Journal::set_compaction_pace`] set another pace.
    pub compaction_pace: u64,
    /// Replaced files are removed at most this fast (0: at once;
    /// `Config::remove_bytes_per_sec`, [`crate::remover`]).
    pub remove_bytes_per_sec: u64,
    /// Value reads from closed files bypass the page cache (`O_DIRECT`;
    /// `Config::journal_direct_reads`).
    pub direct_reads: bool,
    /// GETs' records cached in memory ([`value_cache`];
    /// `Config::value_cache_bytes`).
    pub value_cache: Option<ValueCache>,
    /// Each new active file reserves `file_bytes` of blocks when it is
    /// created ([`preallocate`](crate::fsutil::preallocate); `Config::journal_preallocate`); a file
    /// rolled short of them gives the rest back at its roll.
    pub preallocate: bool,
    /// Pages of the active file are dropped from the page cache once
    /// written back (`Config::journal_release_written`); only with
    /// `direct_reads`, which reads closed files around the cache anyway.
    pub release_written: bool,
    /// Appends refresh the value cache's older versions of their keys
    /// (`Config::value_cache_refresh`).
    pub refresh_cached: bool,
}

impl JournalOptions {
    /// The `O_DIRECT` handle value reads of the closed file `path` use:
    /// `None` unless `direct_reads` is on and the file system allows it.
    pub(crate) fn direct_handle(&self, path: &Path) -> Option<File> {
        self.direct_reads.then(|| file::open_direct(path)).flatten()
    }

    /// Options for unit tests: files of `file_bytes`, no compression,
    /// 8 KiB compaction chunks, unpaced.
    #[cfg(test)]
    pub(crate) fn for_tests(file_bytes: u64) -> JournalOptions {
        JournalOptions {
            file_bytes,
            repair_manifest: false,
            compression: crate::Compression::None,
            zstd_level: 1,
            compression_point: crate::CompressionPoint::OnReceipt,
            one_read: true,
            fadvise_random: true,
            skip_active_lock: true,
            stream_bytes: 8 * 1024,
            compaction_pace: 0,
            remove_bytes_per_sec: 0,
            direct_reads: false,
            value_cache: None,
            preallocate: true,
            release_written: false,
            refresh_cached: true,
        }
    }
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
    /// Bytes not in holes (`size_bytes` unless the file was reclaimed in
    /// place, [`punch`]).
    pub disk_bytes: u64,
    /// True for the file being appended to.
    pub active: bool,
}

/// The file being appended to.
#[derive(Debug)]
struct Active {
    file_no: u64,
    path: PathBuf,
    file: Arc<File>,
    /// Bytes written (the file's size).
    size: u64,
    /// (sqn, offset) of every record in the file, sorted.
    index: Vec<(u64, u64)>,
    /// Damaged regions skipped at open.
    damage: Vec<Damage>,
    /// Highest SQN written to the journal (any file).
    last_sqn: u64,
    /// Number for the next new file.
    next_file_no: u64,
    /// Bytes of this file whose write-back was started
    /// ([`Journal::start_writeback`]); nothing is known of the rest.
    written_back: u64,
    /// Where the last write-back step began: the pages below it had their
    /// write-back started a step earlier, so they are clean by the next one
    /// and can be released ([`JournalOptions::release_written`]).
    last_step: u64,
    /// Bytes of this file whose pages were released from the page cache.
    released: u64,
    /// Held by views of this file while active: at its roll it is linked
    /// to the closed file's gate, so no hole is punched in the file while
    /// such a view (which reads it by its own index) lives ([`punch`]).
    gate: Arc<gate::PunchGate>,
}

impl Active {
    /// Allocates the next file number (for a new active file or a
    /// compaction output): numbers are only ever taken under the active lock.
    fn take_file_no(&mut self) -> Result<u64> {
        let no = self.next_file_no;
        self.next_file_no = no.checked_add(1).ok_or_else(|| {
            Error::InvalidInput(format!("journal file number {no} cannot grow further"))
        })?;
        Ok(no)
    }
}

/// Group-commit state.
#[derive(Debug, Default)]
struct SyncState {
    /// Every record up to this SQN is on stable storage.
    synced_sqn: u64,
    /// A thread is performing an fsync on behalf of all.
    leader_active: bool,
    /// Set by a failed write or fsync, or by `close`: the journal refuses work.
    poisoned: Option<String>,
}

/// The journal of one store. `Send + Sync`; `append` callers must serialise
/// themselves (the store's write lock), everything else may run concurrently.
pub struct Journal {
    dir: PathBuf,
    pub(crate) opts: JournalOptions,
    stats: Arc<Stats>,
    active: Mutex<Active>,
    /// Serialises appends and rolls (taken before `active`, never after):
    /// an append writes its bytes holding only this, so GETs of records in
    /// the active file never wait for a write (which may block for long in
    /// the kernel's dirty-page throttling) — only for the index update.
    append_lock: Mutex<()>,
    /// Closed files, oldest first. Swappable by later journal compaction.
    closed: RwLock<Vec<Arc<ClosedFile>>>,
    sync: Mutex<SyncState>,
    sync_cv: Condvar,
    /// Serialises compaction runs.
    compact_lock: Mutex<()>,
    /// Test fault injection: compaction fails after this many more output
    /// records (`u64::MAX` = never). See [`Journal::fail_compaction_after`].
    compact_fault: std::sync::atomic::AtomicU64,
    /// The compaction read pace set by [`Journal::set_compaction_pace`]
    /// (bytes a second, 0 unpaced; `u64::MAX`: the configured one).
    pub(crate) compaction_pace: std::sync::atomic::AtomicU64,
    /// Set once by [`Journal::hurry_compaction`] (the store is closing): a
    /// run in progress drops its pace for the rest of the journal's life.
    pub(crate) compaction_hurry: std::sync::atomic::AtomicBool,
    /// Bytes appended since the flusher last flushed the active file
    /// (approximate: reset by a write-back step, a sync or a roll); read by
    /// the [`flusher`].
    unsynced: std::sync::atomic::AtomicU64,
    /// Bytes appended since the active file was last fsynced (approximate:
    /// reset when a sync or roll completes, not by write-back steps); read
    /// by the [`flusher`] for `journal_fsync_bytes`.
    unfsynced: std::sync::atomic::AtomicU64,
    /// How an append wakes the [`flusher`] when it makes a step due;
    /// unset while there is no flusher.
    pub(crate) flush_wake: std::sync::OnceLock<flusher::Wake>,
    /// Every record of the active file has an SQN above this (the highest
    /// SQN of the closed files when the active file was started). Set under
    /// the active lock after the closed list has the rolled file, so a fetch
    /// of an SQN at or below it can go straight to the closed files without
    /// waiting for appends or a roll.
    active_floor: std::sync::atomic::AtomicU64,
    /// This journal's id in a shared [`ValueCache`].
    cache_user: u64,
    /// The next active file, created ahead of its roll by
    /// [`Journal::prepare_next_file`] (the flusher thread) so that the roll,
    /// which writers wait for, need not create it. Not in the manifest until
    /// the roll lists it: a spare left by a crash holds no record and is
    /// removed at open.
    spare: Mutex<Option<Spare>>,
    /// Closed files replaced by compaction, unlinked by
    /// [`Journal::reap_retired`] on a background thread once nothing else (a
    /// fetch in flight, a view, a backup) holds them (see
    /// [`crate::retired`]); before, the GET that let go last paid for it.
    retired: Retired<ClosedFile>,
    /// Rolled files whose pages are still cached past what was released,
    /// waiting for the flusher to release them ([`Journal::release_rolled`]).
    rolled_cached: Mutex<Vec<RolledFile>>,
    /// Holes of files reclaimed in place, due once their readers are gone
    /// ([`punch`]); punched by the compaction thread.
    punch_sink: Arc<gate::PunchSink>,
    /// Whether the file system punches holes ([`Journal::punch_supported`]).
    punch_support: std::sync::OnceLock<bool>,
}

/// Rolled files waiting for the flusher to drop their pages, at most.
const ROLLED_CACHED_MAX: usize = 4;

/// A rolled file whose pages the flusher is to drop from the page cache.
struct RolledFile {
    file: Arc<File>,
    path: PathBuf,
    size: u64,
}

/// A created, empty data file (header only, fsynced, its directory entry
/// too) waiting to become the active file.
struct Spare {
    file_no: u64,
    path: PathBuf,
    file: File,
}

impl std::fmt::Debug for Journal {
    // Not derived: the in-memory indexes can hold millions of entries.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Journal")
            .field("dir", &self.dir)
            .field("opts", &self.opts)
            .finish_non_exhaustive()
    }
}

impl Journal {
    /// Deletes the spare next file, if any (at close; a spare left behind
    /// is removed at the next open anyway).
    fn remove_spare(&self) {
        if let Some(sp) = self.spare.lock().take() {
            drop(sp.file);
            if let Err(e) = fs::remove_file(&sp.path) {
                tracing::debug!(path = %sp.path.display(), error = %e, "could not remove the unused spare journal file (the next open will)");
            }
        }
    }

    /// Syncs the active file. The journal must not be used afterwards
    /// (appends and syncs then fail with [`Error::Closed`]); closing twice is
    /// harmless.
    pub fn close(&self) -> Result<()> {
        if self.sync.lock().poisoned.as_deref() == Some(CLOSED_MSG) {
            return Ok(());
        }
        self.check_poison()?;
        let _appending = self.append_lock.lock();
        let a = self.active.lock();
        let res = a.file.sync_all().ctx("fsync", &a.path);
        if res.is_ok() && a.damage.is_empty() {
            // Lets the next open skip scanning the active file.
            if let Err(e) = checkpoint::write(&self.dir, a.file_no, a.size, &a.index) {
                tracing::warn!(target: "basalt::journal", "I0013 could not write the journal checkpoint (the next open scans instead): {e}");
            }
        }
        let last = a.last_sqn;
        drop(a);
        match res {
            Ok(()) => {
                let mut s = self.sync.lock();
                s.synced_sqn = s.synced_sqn.max(last);
                drop(s);
                self.poison(CLOSED_MSG.into());
                self.remove_spare();
                // Holes and removals queued on the remover are done now.
                crate::remover::settle(&self.dir);
                Ok(())
            }
            Err(e) => {
                self.poison(format!("journal fsync failed earlier: {e}"));
                Err(e)
            }
        }
    }
}

#[cfg(test)]
mod tests;
