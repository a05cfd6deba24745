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

pub mod checkpoint;
pub mod compact;
pub mod compress;
pub mod dump;
pub mod file;
pub mod flusher;
pub(crate) mod gate;
pub mod manifest;
pub mod punch;
pub mod record;
pub mod value_cache;
pub mod view;

use crate::error::{Error, IoContext, Result};
use crate::fsutil::{
    drop_cached, ensure_dir, no_readahead, preallocate, sync_dir, write_atomic, write_unsynced,
};
use crate::retired::Retired;
use crate::stats::Stats;
use file::{ClosedFile, Damage};
use manifest::{Manifest, ManifestEntry, MANIFEST_NAME};
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use compact::{CompactedRun, Keep, Liveness};
pub use compress::CompressionPoint;
pub use dump::{dump, is_journal_file, journal_file_kind, DumpReport, JournalFileKind};
pub use record::{Compression, JournalRecord, NewRecord, RecordKind};
pub use value_cache::ValueCache;
pub use view::JournalView;

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
    /// created ([`preallocate`]; `Config::journal_preallocate`); a file
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
    gate: Arc<punch::PunchGate>,
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
    punch_sink: Arc<punch::PunchSink>,
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

fn manifest_error(path: &Path, reason: impl Into<String>) -> Error {
    Error::Manifest {
        what: "journal",
        path: path.to_path_buf(),
        reason: reason.into(),
        advice: MANIFEST_ADVICE,
    }
}

/// Reads the manifest, refusing absurd sizes before allocating.
fn read_manifest_bytes(path: &Path) -> std::io::Result<Vec<u8>> {
    let len = fs::metadata(path)?.len();
    if len > crate::limits::MANIFEST_BYTES_MAX {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("file of {len} bytes is too large to be a journal manifest"),
        ));
    }
    fs::read(path)
}

/// Numbers of the `.jnl` files in `dir`, ascending.
fn list_jnl_files(dir: &Path) -> Result<BTreeSet<u64>> {
    let mut out = BTreeSet::new();
    for entry in fs::read_dir(dir).ctx("list directory", dir)? {
        let entry = entry.ctx("list directory", dir)?;
        if let Some(no) = entry.file_name().to_str().and_then(file::parse_jnl_name) {
            out.insert(no);
        }
    }
    Ok(out)
}

/// Creates a new, empty data file (overwriting any leftover) and makes it durable.
pub(crate) fn create_data_file(dir: &Path, file_no: u64) -> Result<(PathBuf, File)> {
    let path = dir.join(file::jnl_name(file_no));
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(true)
        .open(&path)
        .ctx("create", &path)?;
    f.write_all_at(&file::jnl_header(), 0).ctx("write", &path)?;
    f.sync_all().ctx("fsync", &path)?;
    sync_dir(dir)?;
    Ok((path, f))
}

/// Creates data file `file_no` to be appended to (an active file or the
/// spare that becomes one): advised as GETs read it, its blocks reserved.
fn create_active_file(dir: &Path, file_no: u64, opts: &JournalOptions) -> Result<(PathBuf, File)> {
    let (path, f) = create_data_file(dir, file_no)?;
    if opts.fadvise_random {
        no_readahead(&f, &path);
    }
    if opts.preallocate {
        preallocate(&f, &path, opts.file_bytes);
    }
    Ok((path, f))
}

/// Opens a closed data file and loads (or rebuilds) its index.
/// Whether the data files without a manifest are what an interrupted
/// [`Journal::create_fresh`] leaves: file 1 alone, no longer than its
/// header (no record was ever appended: records follow the manifest).
fn interrupted_creation(dir: &Path, on_disk: &std::collections::BTreeSet<u64>) -> Result<bool> {
    if on_disk.len() != 1 || !on_disk.contains(&1) {
        return Ok(false);
    }
    let path = dir.join(file::jnl_name(1));
    let len = std::fs::metadata(&path)
        .map_err(|e| Error::io("stat", &path, e))?
        .len();
    Ok(len <= file::JNL_HEADER_LEN)
}

fn open_closed(
    dir: &Path,
    file_no: u64,
    prev_hi: u64,
    opts: &JournalOptions,
    sink: &Arc<punch::PunchSink>,
) -> Result<ClosedFile> {
    let path = dir.join(file::jnl_name(file_no));
    let f = File::open(&path).ctx("open", &path)?;
    if opts.fadvise_random {
        no_readahead(&f, &path);
    }
    let size = f.metadata().ctx("stat", &path)?.len();
    file::read_jnl_header(&f, &path, size)?;
    let jix_path = dir.join(file::jix_name(file_no));
    // Each record is at least 50 bytes in the .jnl but 16 in the .jix, so a
    // .jix larger than its .jnl is damaged: do not read it.
    let jix_read = match fs::metadata(&jix_path) {
        Ok(m) if m.len() > size + 32 => Ok(Vec::new()),
        Ok(_) => fs::read(&jix_path),
        Err(e) => Err(e),
    };
    let loaded = match jix_read {
        Ok(bytes) => match file::decode_index(&bytes, size) {
            Ok(idx) => Some(idx),
            Err(e) => {
                tracing::warn!(path = %jix_path.display(), error = %e, "journal index is damaged; rebuilding it from the data file");
                None
            }
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            tracing::warn!(path = %jix_path.display(), "journal index is missing; rebuilding it from the data file");
            None
        }
        Err(e) => return Err(Error::io("read", &jix_path, e)),
    };
    let (index, damage) = match loaded {
        Some(idx) => (idx, Vec::new()),
        None => {
            let (idx, outcome) = file::build_index(&f, &path, size)?;
            for (d, why) in outcome.damage.iter().zip(&outcome.reasons) {
                tracing::warn!(path = %path.display(), offset = d.offset, len = d.len, reason = %why, "damaged region in closed journal file");
            }
            write_atomic(&jix_path, &file::encode_index(&idx))?;
            (idx, outcome.damage)
        }
    };
    let last = index.last().map_or(0, |e| e.0);
    if let Some(&(first, _)) = index.first() {
        if first <= prev_hi {
            return Err(Error::corrupt(
                &path,
                0,
                format!("first sqn {first} is not above sqn {prev_hi} of the older journal files"),
            ));
        }
    }
    let direct = opts.direct_handle(&path);
    let file = Arc::new(f);
    // A pass that wrote this index but crashed before its punches.
    let ranges = file::punch_ranges(&index, size);
    if let Err(e) = punch::repunch_at_open(&file, &path, &ranges, size) {
        tracing::warn!(target: "basalt::journal", path = %path.display(), error = %e, "I0020 could not punch a journal file's garbage (the space stays allocated until the file is compacted or the store reopened)");
    }
    Ok(ClosedFile {
        file_no,
        gate: punch::PunchGate::new(&file, &path, sink),
        path,
        file,
        direct,
        size,
        punched: ranges.iter().map(|r| r.1).sum(),
        index,
        damage,
        search_hi: prev_hi.max(last),
        obsolete: Default::default(),
    })
}

/// Removes a data file (and its index) not listed in the manifest.
fn remove_leftover(dir: &Path, no: u64) -> Result<()> {
    let jnl = dir.join(file::jnl_name(no));
    let empty = fs::metadata(&jnl).is_ok_and(|m| m.len() <= file::JNL_HEADER_LEN);
    if empty {
        // The next active file, made ahead of a roll that never came.
        tracing::debug!(path = %jnl.display(), "removing an unused spare journal file");
    } else {
        tracing::warn!(path = %jnl.display(), "journal file not listed in the manifest (left over from an interrupted roll or compaction); removing it");
    }
    for p in [jnl, dir.join(file::jix_name(no))] {
        match crate::remover::remove(&p, None, true, 0) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(Error::io("remove leftover journal file", &p, e)),
        }
    }
    sync_dir(dir)
}

/// File numbers ordered by the SQN of each file's first record (files with no
/// readable record last, by number): the journal order when rebuilding a lost
/// manifest.
fn order_by_first_sqn(dir: &Path, on_disk: &BTreeSet<u64>) -> Result<Vec<u64>> {
    let mut keyed = Vec::with_capacity(on_disk.len());
    for &no in on_disk {
        let path = dir.join(file::jnl_name(no));
        let f = File::open(&path).ctx("open", &path)?;
        let size = f.metadata().ctx("stat", &path)?.len();
        let first = file::read_record_at_opt(&f, &path, file::JNL_HEADER_LEN, size, false)
            .map_or(u64::MAX, |r| r.sqn);
        keyed.push((first, no));
    }
    keyed.sort_unstable();
    Ok(keyed.into_iter().map(|(_, no)| no).collect())
}

impl Journal {
    /// Encodes an appended record, compressing its value at receipt if so
    /// configured.
    fn encode_for_append(&self, rec: &NewRecord<'_>, buf: &mut Vec<u8>) -> Result<()> {
        if self.opts.compression_point != CompressionPoint::OnReceipt
            || self.opts.compression == Compression::None
            || rec.value.is_empty()
        {
            return record::encode_record(rec, buf);
        }
        let (method, stored) =
            compress::compress(self.opts.compression, self.opts.zstd_level, rec.value);
        Stats::add(&self.stats.compression_bytes_in, rec.value.len() as u64);
        Stats::add(&self.stats.compression_bytes_out, stored.len() as u64);
        record::encode_stored(
            &NewRecord {
                value: &stored,
                ..*rec
            },
            method,
            buf,
        )
    }

    /// Opens (or creates) the journal in `dir`, recovering the active file.
    pub fn open(dir: &Path, opts: JournalOptions, stats: Arc<Stats>) -> Result<Journal> {
        ensure_dir(dir)?;
        // An earlier instance's replaced files go before this one lists.
        crate::remover::settle(dir);
        let manifest_path = dir.join(MANIFEST_NAME);
        let on_disk = list_jnl_files(dir)?;
        let manifest = match read_manifest_bytes(&manifest_path) {
            Ok(bytes) => match Manifest::decode(&bytes) {
                Ok(m) => Some(m),
                Err(e) if opts.repair_manifest => {
                    tracing::warn!(path = %manifest_path.display(), error = %e, "journal manifest is damaged; rebuilding it from the journal files");
                    None
                }
                Err(e) => return Err(manifest_error(&manifest_path, e.0)),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if on_disk.is_empty() {
                    return Self::create_fresh(dir, opts, stats);
                }
                if interrupted_creation(dir, &on_disk)? {
                    // `create_fresh` makes file 1 before the manifest: a
                    // crash between leaves one file with no record.
                    tracing::warn!(dir = %dir.display(), "journal creation was interrupted (no manifest, one empty data file); starting afresh");
                    remove_leftover(dir, 1)?;
                    return Self::create_fresh(dir, opts, stats);
                }
                if !opts.repair_manifest {
                    return Err(manifest_error(
                        &manifest_path,
                        format!("missing, but {} journal data files exist", on_disk.len()),
                    ));
                }
                tracing::warn!(path = %manifest_path.display(), "journal manifest is missing; rebuilding it from the journal files");
                None
            }
            Err(e) if e.kind() == std::io::ErrorKind::InvalidData => {
                if !opts.repair_manifest {
                    return Err(manifest_error(&manifest_path, e.to_string()));
                }
                tracing::warn!(path = %manifest_path.display(), error = %e, "journal manifest is damaged; rebuilding it from the journal files");
                None
            }
            Err(e) => return Err(Error::io("read", &manifest_path, e)),
        };
        let (file_nos, next_file_no, repaired) = match manifest {
            Some(m) => {
                for e in &m.files {
                    if !on_disk.contains(&e.file_no) {
                        return Err(manifest_error(
                            &manifest_path,
                            format!(
                                "lists journal file {} which is missing",
                                dir.join(file::jnl_name(e.file_no)).display()
                            ),
                        ));
                    }
                }
                for no in &on_disk {
                    if !m.files.iter().any(|e| e.file_no == *no) {
                        // Left over from an interrupted roll (holds no
                        // acknowledged record) or compaction (the run it
                        // replaced or the output that never got listed).
                        remove_leftover(dir, *no)?;
                    }
                }
                let nos: Vec<u64> = m.files.iter().map(|e| e.file_no).collect();
                (nos, m.next_file_no, false)
            }
            None => {
                if on_disk.is_empty() {
                    return Self::create_fresh(dir, opts, stats);
                }
                // Compaction gives its output files new (higher) numbers, so
                // SQN order, not number order, is the order of the files.
                let nos = order_by_first_sqn(dir, &on_disk)?;
                let next = match on_disk.last() {
                    Some(n) => n.checked_add(1).ok_or_else(|| {
                        manifest_error(
                            &manifest_path,
                            format!("journal file number {n} is too large"),
                        )
                    })?,
                    None => 1,
                };
                (nos, next, true)
            }
        };
        let Some((&active_no, closed_nos)) = file_nos.split_last() else {
            return Err(manifest_error(&manifest_path, "lists no files"));
        };
        let mut closed = Vec::with_capacity(closed_nos.len());
        let mut hi = 0;
        let punch_sink = punch::PunchSink::new(dir, opts.remove_bytes_per_sec, Arc::clone(&stats));
        for &no in closed_nos {
            let cf = open_closed(dir, no, hi, &opts, &punch_sink)?;
            hi = cf.search_hi;
            closed.push(Arc::new(cf));
        }
        let active = Self::recover_active(dir, active_no, hi, next_file_no, &stats, &punch_sink)?;
        let active_floor = std::sync::atomic::AtomicU64::new(hi);
        if opts.fadvise_random {
            no_readahead(&active.file, &active.path);
        }
        let j = Journal {
            dir: dir.to_path_buf(),
            opts,
            stats,
            sync: Mutex::new(SyncState::default()),
            active: Mutex::new(active),
            closed: RwLock::new(closed),
            sync_cv: Condvar::new(),
            compact_lock: Mutex::new(()),
            append_lock: Mutex::new(()),
            compact_fault: std::sync::atomic::AtomicU64::new(u64::MAX),
            compaction_pace: std::sync::atomic::AtomicU64::new(u64::MAX),
            compaction_hurry: std::sync::atomic::AtomicBool::new(false),
            unsynced: std::sync::atomic::AtomicU64::new(0),
            unfsynced: std::sync::atomic::AtomicU64::new(0),
            active_floor,
            cache_user: value_cache::next_user_id(),
            spare: Mutex::new(None),
            retired: Retired::default(),
            rolled_cached: Mutex::new(Vec::new()),
            punch_sink,
            punch_support: std::sync::OnceLock::new(),
        };
        if repaired {
            let a = j.active.lock();
            j.write_manifest(&a, &j.closed.read())?;
        }
        Ok(j)
    }

    /// A new journal: data file 1, then the manifest listing it (a crash
    /// between the two is recognised by [`interrupted_creation`]).
    fn create_fresh(dir: &Path, opts: JournalOptions, stats: Arc<Stats>) -> Result<Journal> {
        let (path, f) = create_active_file(dir, 1, &opts)?;
        let punch_sink = punch::PunchSink::new(dir, opts.remove_bytes_per_sec, Arc::clone(&stats));
        let file = Arc::new(f);
        let active = Active {
            file_no: 1,
            gate: punch::PunchGate::new(&file, &path, &punch_sink),
            path,
            file,
            size: file::JNL_HEADER_LEN,
            index: Vec::new(),
            damage: Vec::new(),
            last_sqn: 0,
            next_file_no: 2,
            written_back: file::JNL_HEADER_LEN,
            last_step: file::JNL_HEADER_LEN,
            released: file::JNL_HEADER_LEN,
        };
        let j = Journal {
            dir: dir.to_path_buf(),
            opts,
            stats,
            active: Mutex::new(active),
            closed: RwLock::new(Vec::new()),
            sync: Mutex::new(SyncState::default()),
            sync_cv: Condvar::new(),
            compact_lock: Mutex::new(()),
            append_lock: Mutex::new(()),
            compact_fault: std::sync::atomic::AtomicU64::new(u64::MAX),
            compaction_pace: std::sync::atomic::AtomicU64::new(u64::MAX),
            compaction_hurry: std::sync::atomic::AtomicBool::new(false),
            unsynced: std::sync::atomic::AtomicU64::new(0),
            unfsynced: std::sync::atomic::AtomicU64::new(0),
            active_floor: std::sync::atomic::AtomicU64::new(0),
            cache_user: value_cache::next_user_id(),
            spare: Mutex::new(None),
            retired: Retired::default(),
            rolled_cached: Mutex::new(Vec::new()),
            punch_sink,
            punch_support: std::sync::OnceLock::new(),
        };
        {
            let a = j.active.lock();
            j.write_manifest(&a, &j.closed.read())?;
        }
        Ok(j)
    }

    /// Opens the active file, scans it, cuts a torn tail.
    fn recover_active(
        dir: &Path,
        file_no: u64,
        prev_hi: u64,
        next_file_no: u64,
        stats: &Stats,
        sink: &Arc<punch::PunchSink>,
    ) -> Result<Active> {
        let path = dir.join(file::jnl_name(file_no));
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(&path)
            .ctx("open", &path)?;
        let mut size = f.metadata().ctx("stat", &path)?.len();
        if size < file::JNL_HEADER_LEN {
            // Created but its header never reached the disk: it holds no records.
            tracing::warn!(path = %path.display(), size, "active journal file has a torn header; rewriting it");
            f.set_len(0).ctx("truncate", &path)?;
            f.write_all_at(&file::jnl_header(), 0).ctx("write", &path)?;
            f.sync_all().ctx("fsync", &path)?;
            Stats::add(&stats.journal_truncated_bytes, size);
            size = file::JNL_HEADER_LEN;
        }
        file::read_jnl_header(&f, &path, size)?;
        // A clean close left a checkpoint of this file's index: no scan.
        if let Some(index) = checkpoint::take(dir, file_no, size)? {
            if index.first().is_none_or(|&(first, _)| first > prev_hi) {
                let last_sqn = index.last().map_or(prev_hi, |e| e.0);
                let file = Arc::new(f);
                return Ok(Active {
                    file_no,
                    gate: punch::PunchGate::new(&file, &path, sink),
                    path,
                    file,
                    size,
                    index,
                    damage: Vec::new(),
                    last_sqn,
                    next_file_no,
                    written_back: size,
                    last_step: size,
                    released: size,
                });
            }
        }
        Stats::add(
            &stats.journal_open_scan_bytes,
            size.saturating_sub(file::JNL_HEADER_LEN),
        );
        let mut index = Vec::new();
        let outcome = file::scan(
            &f,
            &path,
            file::JNL_HEADER_LEN,
            size,
            prev_hi,
            &mut |off, _, v| {
                index.push((v.sqn, off));
                Ok(())
            },
        )?;
        let mut damage = outcome.damage.clone();
        for (d, why) in outcome.damage.iter().zip(&outcome.reasons) {
            if d.next_sqn == u64::MAX {
                tracing::warn!(path = %path.display(), offset = d.offset, len = d.len, reason = %why, "torn tail in active journal file; truncating it");
                f.set_len(d.offset).ctx("truncate", &path)?;
                f.sync_all().ctx("fsync", &path)?;
                Stats::add(&stats.journal_truncated_bytes, d.len);
                size = d.offset;
            } else {
                tracing::warn!(path = %path.display(), offset = d.offset, len = d.len, reason = %why, "corrupt record in active journal file; skipping it");
                Stats::incr(&stats.journal_corrupt_records);
            }
        }
        damage.retain(|d| d.next_sqn != u64::MAX);
        debug_assert!(index.windows(2).all(|w| matches!(w, [a, b] if a.0 < b.0)));
        let last_sqn = index.last().map_or(prev_hi, |e| e.0);
        let file = Arc::new(f);
        Ok(Active {
            file_no,
            gate: punch::PunchGate::new(&file, &path, sink),
            path,
            file,
            size,
            index,
            damage,
            last_sqn,
            next_file_no,
            written_back: size,
            last_step: size,
            released: size,
        })
    }

    /// Replaces the manifest with the current file list.
    fn write_manifest(&self, a: &Active, closed: &[Arc<ClosedFile>]) -> Result<()> {
        let mut files: Vec<ManifestEntry> = closed
            .iter()
            .map(|c| ManifestEntry {
                file_no: c.file_no,
                first_sqn: c.first_sqn(),
                last_sqn: c.last_sqn(),
                active: false,
            })
            .collect();
        files.push(ManifestEntry {
            file_no: a.file_no,
            first_sqn: a.index.first().map_or(0, |e| e.0),
            last_sqn: a.index.last().map_or(0, |e| e.0),
            active: true,
        });
        let m = Manifest {
            next_file_no: a.next_file_no,
            files,
        };
        debug_assert!(m.validate().is_ok());
        write_atomic(&self.dir.join(MANIFEST_NAME), &m.encode())
    }

    fn check_poison(&self) -> Result<()> {
        match &self.sync.lock().poisoned {
            Some(why) => Err(Error::Closed(why.clone())),
            None => Ok(()),
        }
    }

    fn poison(&self, why: String) {
        let mut s = self.sync.lock();
        if s.poisoned.is_none() {
            s.poisoned = Some(why);
        }
        drop(s);
        self.sync_cv.notify_all();
    }

    /// Highest SQN written to the journal (0 when empty).
    pub fn last_sqn(&self) -> u64 {
        self.active.lock().last_sqn
    }

    /// Appends one record; `rec.sqn` must be greater than `last_sqn()`
    /// ([`Error::InvalidInput`] otherwise).
    ///
    /// The record reaches the kernel before this returns (not the disk: see
    /// [`Journal::sync_to`]). If the append fills the active file, the file is
    /// rolled; a failed write or roll poisons the journal (the record may or
    /// may not be in the file).
    pub fn append(&self, rec: &NewRecord<'_>) -> Result<()> {
        self.check_poison()?;
        // Encoding (and compressing) needs no lock: GETs of recent values
        // wait on the active lock only for the write itself.
        let buf = self.encode(rec)?;
        self.append_encoded(&buf, &[(rec.sqn, 0)])
    }

    /// Encodes (and compresses) `rec` as [`Journal::append`] would, without
    /// any lock. Its `sqn` may be a placeholder: [`record::reseal`] sets the
    /// real one before [`Journal::append_encoded`].
    pub fn encode(&self, rec: &NewRecord<'_>) -> Result<Vec<u8>> {
        let mut buf = Vec::new();
        self.encode_for_append(rec, &mut buf)?;
        Ok(buf)
    }

    /// Appends encoded records laid end to end in `buf` with one positional
    /// write. `records` lists each one's `(sqn, offset in buf)`, SQNs
    /// ascending and above the journal's last, offsets ascending from 0.
    /// The active file rolls afterwards if it reached its size (a group may
    /// take it past `file_bytes` by up to the group's size).
    pub fn append_encoded(&self, buf: &[u8], records: &[(u64, u64)]) -> Result<()> {
        self.write_and_publish(buf, records)?;
        if self.opts.refresh_cached {
            self.refresh_cached(buf, records);
        }
        Ok(())
    }

    /// Puts the new version of every key whose older version the value
    /// cache holds in its place (see [`ValueCache::refresh`]): a hot key's
    /// next GET is then a hit, not a read of the file just written. Runs
    /// on the appending thread, after the append lock is released (the
    /// store's write lock is still held: ~a hash lookup per record, and a
    /// CRC and a copy per record refreshed).
    fn refresh_cached(&self, buf: &[u8], records: &[(u64, u64)]) {
        let Some(cache) = &self.opts.value_cache else {
            return;
        };
        for &(_, at) in records {
            let Some(rec) = usize::try_from(at).ok().and_then(|at| buf.get(at..)) else {
                continue;
            };
            if cache.refresh(self.cache_user, rec) {
                Stats::incr(&self.stats.journal_value_cache_refreshes);
            }
        }
    }

    /// [`Journal::append_encoded`] without the value cache's refresh: the
    /// write, under the append lock, and its publication in the index.
    fn write_and_publish(&self, buf: &[u8], records: &[(u64, u64)]) -> Result<()> {
        self.check_poison()?;
        debug_assert!(records.first().is_some_and(|r| r.1 == 0));
        debug_assert!(records
            .windows(2)
            .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
        let (Some(&(first_sqn, _)), Some(&(last_sqn, _))) = (records.first(), records.last())
        else {
            return Ok(());
        };
        let _appending = self.append_lock.lock();
        // Reserve the place under the active lock, write without it, then
        // publish (size, index) under it: a reader sees a record only once
        // its bytes are in the file. Appends and rolls are serialised by
        // `append_lock`, so nothing moves the active file meanwhile.
        let (file, offset) = {
            let a = self.active.lock();
            if first_sqn <= a.last_sqn {
                return Err(Error::InvalidInput(format!(
                    "journal append of sqn {first_sqn} is not above the last sqn {}",
                    a.last_sqn
                )));
            }
            (Arc::clone(&a.file), a.size)
        };
        if let Err(e) = file.write_all_at(buf, offset) {
            let err = Error::io("write", &self.active.lock().path, e);
            self.poison(format!("journal write failed earlier: {err}"));
            return Err(err);
        }
        let mut a = self.active.lock();
        debug_assert_eq!(a.size, offset, "an append or roll ran beside this one");
        let len = buf.len() as u64;
        a.size += len;
        a.index
            .extend(records.iter().map(|&(sqn, at)| (sqn, offset + at)));
        a.last_sqn = last_sqn;
        Stats::add(&self.stats.journal_records_written, records.len() as u64);
        Stats::add(&self.stats.journal_bytes_written, len);
        self.unsynced
            .fetch_add(len, std::sync::atomic::Ordering::Relaxed);
        self.unfsynced
            .fetch_add(len, std::sync::atomic::Ordering::Relaxed);
        if a.size >= self.opts.file_bytes {
            drop(a);
            let rolling = std::time::Instant::now();
            let rolled = self.roll();
            self.stats.journal_roll.since(rolling);
            if let Err(e) = rolled {
                self.poison(format!("journal roll failed earlier: {e}"));
                return Err(e);
            }
        }
        Ok(())
    }

    /// Bytes appended since the flusher's last step, sync or roll
    /// (approximate).
    pub fn unsynced_bytes(&self) -> u64 {
        self.unsynced.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Bytes appended since the active file was last fsynced, by a sync or
    /// a roll (approximate; write-back steps do not count).
    pub fn unfsynced_bytes(&self) -> u64 {
        self.unfsynced.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Drops the retired closed files nothing else holds any more (see
    /// `retired`), unlinking them on this thread; returns how many. Called by
    /// the flusher, by each compaction run, by `Store::settle` and at close.
    pub fn reap_retired(&self) -> usize {
        self.retired.reap()
    }

    /// Creates the next active file ahead of the roll (see `spare`) once the
    /// active file is past half its size and no spare exists. Called by the
    /// flusher thread, the only creator of spares; returns whether it made
    /// one (never once the journal is closed or poisoned).
    pub fn prepare_next_file(&self) -> Result<bool> {
        if self.sync.lock().poisoned.is_some() || self.spare.lock().is_some() {
            return Ok(false);
        }
        let file_no = {
            let mut a = self.active.lock();
            if a.size < self.opts.file_bytes / 2 {
                return Ok(false);
            }
            a.take_file_no()?
        };
        let (path, file) = create_active_file(&self.dir, file_no, &self.opts)?;
        let mut spare = self.spare.lock();
        debug_assert!(spare.is_none(), "spares are made by one thread");
        *spare = Some(Spare {
            file_no,
            path,
            file,
        });
        Ok(true)
    }

    /// Closes the active file and starts the next one. The caller holds
    /// `append_lock` (so the active file does not change meanwhile) and not
    /// the active lock: the slow parts (the old file's fsync, its `.jix`)
    /// run without it, so GETs of records in the active file wait only for
    /// the swap and the manifest write. Writers wait for all of it, so the
    /// next file is usually created beforehand ([`Journal::prepare_next_file`])
    /// and the `.jix` is written without an fsync: a `.jix` that a power
    /// loss leaves torn or missing fails its checksum and is rebuilt from
    /// the data file at open, which the fsync here makes durable first.
    fn roll(&self) -> Result<()> {
        let spare = self.spare.lock().take();
        let (old_file, old_path, old_no, jix_bytes, new_no, old_size) = {
            let mut a = self.active.lock();
            debug_assert!(!a.index.is_empty());
            // Without a spare, the new file's number is taken now:
            // compaction allocates numbers for its output files under the
            // same lock.
            let new_no = match &spare {
                Some(sp) => sp.file_no,
                None => a.take_file_no()?,
            };
            let jix = file::encode_index(&a.index);
            let f = Arc::clone(&a.file);
            (f, a.path.clone(), a.file_no, jix, new_no, a.size)
        };
        if self.opts.preallocate && old_size < self.opts.file_bytes {
            // Rolled early (a backup's roll): give back the blocks reserved
            // past its end (on ext4 a truncate to the same size does).
            if let Err(e) = old_file.set_len(old_size) {
                tracing::warn!(target: "basalt::journal", path = %old_path.display(), error = %e, "I0015 could not give back a rolled journal file's reserved blocks (they stay until the file is removed)");
            }
        }
        old_file.sync_all().ctx("fsync", &old_path)?;
        self.unsynced.store(0, std::sync::atomic::Ordering::Relaxed);
        self.unfsynced
            .store(0, std::sync::atomic::Ordering::Relaxed);
        write_unsynced(&self.dir.join(file::jix_name(old_no)), &jix_bytes)?;
        let (new_path, new_file) = match spare {
            Some(sp) => (sp.path, sp.file),
            None => create_active_file(&self.dir, new_no, &self.opts)?,
        };
        let direct = self.opts.direct_handle(&old_path);
        let mut a = self.active.lock();
        debug_assert_eq!(a.file_no, old_no, "the active file changed during a roll");
        let prev_hi = self.closed.read().last().map_or(0, |c| c.search_hi);
        let gate = punch::PunchGate::new(&old_file, &a.path, &self.punch_sink);
        a.gate.replaced_by(Vec::new(), &gate);
        let old = ClosedFile {
            file_no: a.file_no,
            gate,
            path: std::mem::replace(&mut a.path, new_path),
            // The handle it was written through (advised as every active
            // file is): views made before the roll hold it too.
            file: old_file,
            direct,
            size: a.size,
            punched: 0,
            index: std::mem::take(&mut a.index),
            damage: std::mem::take(&mut a.damage),
            search_hi: prev_hi.max(a.last_sqn),
            obsolete: Default::default(),
        };
        a.file = Arc::new(new_file);
        a.gate = punch::PunchGate::new(&a.file, &a.path, &self.punch_sink);
        a.file_no = new_no;
        a.size = file::JNL_HEADER_LEN;
        a.written_back = file::JNL_HEADER_LEN;
        a.last_step = file::JNL_HEADER_LEN;
        a.released = file::JNL_HEADER_LEN;
        if self.releases_written() {
            // Fsynced above, so every page is clean: the flusher drops them
            // all, the released ones too (reads of the active file bring
            // pages back). Without a flusher to drain the queue, the roll
            // drops the oldest itself, so no handle is held for long.
            let mut q = self.rolled_cached.lock();
            if q.len() >= ROLLED_CACHED_MAX {
                let r = q.remove(0);
                drop_cached(&r.file, &r.path, 0, r.size);
            }
            q.push(RolledFile {
                file: Arc::clone(&old.file),
                path: old.path.clone(),
                size: old.size,
            });
        }
        self.closed.write().push(Arc::new(old));
        self.active_floor
            .store(a.last_sqn, std::sync::atomic::Ordering::Release);
        // The active lock (held) orders this manifest with compaction's;
        // readers of the closed list are not blocked while it is written.
        self.write_manifest(&a, &self.closed.read())?;
        Stats::incr(&self.stats.journal_rolls);
        let mut s = self.sync.lock();
        s.synced_sqn = s.synced_sqn.max(a.last_sqn);
        drop(s);
        self.sync_cv.notify_all();
        Ok(())
    }

    /// Starts the kernel's write-back of what was appended to the active file
    /// since the last call, without waiting for it and without flushing the
    /// disk's cache (RocksDB's `bytes_per_sync` does the same with
    /// `sync_file_range`): the page cache then never holds much of the
    /// journal dirty, yet no fsync (a journal commit and a cache flush that
    /// GETs' reads queue behind) is paid. Not a durability point: only
    /// [`Journal::sync_to`] and rolls are. Uses `posix_fadvise(DONTNEED)`,
    /// which on Linux starts write-back of the range's dirty pages and frees
    /// only pages already clean, which the just-written ones are not.
    ///
    /// With [`JournalOptions::release_written`], it also releases the pages
    /// whose write-back the step before last started: clean by now (or
    /// skipped by the kernel if not), and never read through the cache
    /// again once the file is closed.
    pub fn start_writeback(&self) -> Result<()> {
        self.check_poison()?;
        let (f, path, from, to, release) = {
            let mut a = self.active.lock();
            let from = a.written_back.min(a.size);
            a.written_back = a.size;
            let release = (a.released, a.last_step);
            a.released = a.released.max(a.last_step);
            a.last_step = from;
            (Arc::clone(&a.file), a.path.clone(), from, a.size, release)
        };
        self.unsynced.store(0, std::sync::atomic::Ordering::Relaxed);
        drop_cached(&f, &path, from, to - from);
        if self.releases_written() && release.1 > release.0 {
            drop_cached(&f, &path, release.0, release.1 - release.0);
        }
        Stats::incr(&self.stats.journal_writebacks);
        Ok(())
    }

    /// Whether written-back pages are released: asked for, and closed files
    /// are read around the page cache.
    fn releases_written(&self) -> bool {
        self.opts.release_written && self.opts.direct_reads
    }

    /// Drops rolled files' pages from the page cache (the flusher's job,
    /// so that no writer pays for it; see [`Journal::start_writeback`]).
    pub fn release_rolled(&self) {
        let rolled = std::mem::take(&mut *self.rolled_cached.lock());
        for r in rolled {
            drop_cached(&r.file, &r.path, 0, r.size);
        }
    }

    /// Returns once every record up to `sqn` is on stable storage (group commit).
    pub fn sync_to(&self, sqn: u64) -> Result<()> {
        let mut s = self.sync.lock();
        loop {
            if let Some(why) = &s.poisoned {
                return Err(Error::Closed(why.clone()));
            }
            if s.synced_sqn >= sqn {
                Stats::incr(&self.stats.journal_syncs_shared);
                return Ok(());
            }
            if s.leader_active {
                self.sync_cv.wait(&mut s);
                continue;
            }
            s.leader_active = true;
            break;
        }
        drop(s);
        let (f, path, upto) = {
            let a = self.active.lock();
            (Arc::clone(&a.file), a.path.clone(), a.last_sqn)
        };
        let syncing = std::time::Instant::now();
        let res = f.sync_data();
        self.stats.journal_fsync.since(syncing);
        let mut s = self.sync.lock();
        s.leader_active = false;
        let out = match res {
            Ok(()) => {
                Stats::incr(&self.stats.journal_syncs);
                self.unsynced.store(0, std::sync::atomic::Ordering::Relaxed);
                self.unfsynced
                    .store(0, std::sync::atomic::Ordering::Relaxed);
                s.synced_sqn = s.synced_sqn.max(upto);
                if upto < sqn {
                    Err(Error::InvalidInput(format!(
                        "sync_to({sqn}) beyond the last written sqn {upto}"
                    )))
                } else {
                    Ok(())
                }
            }
            Err(e) => {
                let err = Error::io("fsync", &path, e);
                if s.poisoned.is_none() {
                    s.poisoned = Some(format!("journal fsync failed earlier: {err}"));
                }
                Err(err)
            }
        };
        drop(s);
        self.sync_cv.notify_all();
        out
    }

    /// The value cache GETs use, if any.
    pub fn value_cache(&self) -> Option<&ValueCache> {
        self.opts.value_cache.as_ref()
    }

    /// Reads the record with `sqn`, checking it belongs to `key`.
    pub fn fetch(&self, sqn: u64, key: &[u8]) -> Result<Option<JournalRecord>> {
        if sqn == 0 {
            return Ok(None);
        }
        let Some(cache) = &self.opts.value_cache else {
            return self.fetch_from_files(sqn, key);
        };
        if let Some(rec) = cache.get(self.cache_user, sqn, key) {
            Stats::incr(&self.stats.journal_value_cache_hits);
            return Ok(Some(JournalRecord::clone(&rec)));
        }
        Stats::incr(&self.stats.journal_value_cache_misses);
        let found = self.fetch_from_files(sqn, key)?;
        if let Some(rec) = &found {
            cache.insert(self.cache_user, Arc::new(rec.clone()));
        }
        Ok(found)
    }

    /// [`Journal::fetch`] from the files, without the value cache.
    fn fetch_from_files(&self, sqn: u64, key: &[u8]) -> Result<Option<JournalRecord>> {
        // Active file first: records only ever move from it to the closed list.
        // A record at or below the active floor is in a closed file (or
        // nowhere): no need to wait for the active lock.
        let below_active = self.opts.skip_active_lock
            && sqn <= self.active_floor.load(std::sync::atomic::Ordering::Acquire);
        let hit = if below_active {
            None
        } else {
            let waited = std::time::Instant::now();
            let a = self.active.lock();
            self.stats.wait_journal_lock.since(waited);
            match a.index.first() {
                Some(&(first, _)) if sqn >= first => {
                    match file::index_span(&a.index, sqn, a.size) {
                        Some((off, end)) => {
                            Some((Arc::clone(&a.file), a.path.clone(), off, end, a.size))
                        }
                        None => {
                            if let Some(d) = file::damage_covering(&a.damage, sqn) {
                                return Err(self.corrupt_hit(&a.path, d.offset, sqn));
                            }
                            return Ok(None);
                        }
                    }
                }
                _ => None,
            }
        };
        let rec = match hit {
            Some((f, path, off, end, size)) => {
                self.read_checked(&f, None, &path, off, end, size, sqn, key)?
            }
            None => {
                let closed = self.closed.read();
                let i = closed.partition_point(|c| c.search_hi < sqn);
                let Some(c) = closed.get(i).cloned() else {
                    return Ok(None);
                };
                let prev = i.checked_sub(1).and_then(|p| closed.get(p)).cloned();
                drop(closed);
                match file::index_span(&c.index, sqn, c.size) {
                    Some((off, end)) => self.read_checked(
                        &c.file,
                        c.direct.as_ref(),
                        &c.path,
                        off,
                        end,
                        c.size,
                        sqn,
                        key,
                    )?,
                    None => {
                        for cf in std::iter::once(&c).chain(prev.as_ref()) {
                            if let Some(d) = file::damage_covering(&cf.damage, sqn) {
                                return Err(self.corrupt_hit(&cf.path, d.offset, sqn));
                            }
                        }
                        return Ok(None);
                    }
                }
            }
        };
        Ok(Some(rec))
    }

    fn corrupt_hit(&self, path: &Path, offset: u64, sqn: u64) -> Error {
        Stats::incr(&self.stats.journal_corrupt_records);
        Error::corrupt(
            path,
            offset,
            format!("the record for sqn {sqn} lies in a damaged region"),
        )
    }

    #[allow(clippy::too_many_arguments)]
    fn read_checked(
        &self,
        f: &File,
        direct: Option<&File>,
        path: &Path,
        off: u64,
        end: u64,
        size: u64,
        sqn: u64,
        key: &[u8],
    ) -> Result<JournalRecord> {
        let reading = std::time::Instant::now();
        let read = match direct {
            Some(d) => file::read_record_direct(d, f, path, off, end, size),
            None => file::read_record_span(f, path, off, end, size, self.opts.one_read),
        };
        self.stats.journal_value_read.since(reading);
        let rec = match read {
            Ok(r) => r,
            Err(e) => {
                if e.is_corruption() {
                    Stats::incr(&self.stats.journal_corrupt_records);
                }
                return Err(e);
            }
        };
        if rec.sqn != sqn || rec.key != key {
            Stats::incr(&self.stats.journal_corrupt_records);
            return Err(Error::corrupt(
                path,
                off,
                format!(
                    "expected sqn {sqn} key {}, found sqn {} key {}",
                    crate::key::display_bytes(key),
                    rec.sqn,
                    crate::key::display_bytes(&rec.key)
                ),
            ));
        }
        Ok(rec)
    }

    /// Calls `f` for every intact record with SQN > `after_sqn`, in SQN order.
    /// Damaged records are skipped, counted in `journal_corrupt_records` and
    /// logged. Returns the number of records passed to `f`.
    pub fn replay(
        &self,
        after_sqn: u64,
        f: &mut dyn FnMut(JournalRecord) -> Result<()>,
    ) -> Result<u64> {
        // Snapshot the files under the active lock so a concurrent roll
        // neither hides nor duplicates a file.
        let (closed, active) = {
            let a = self.active.lock();
            let closed: Vec<Arc<ClosedFile>> = self.closed.read().clone();
            let start = a.index.partition_point(|e| e.0 <= after_sqn);
            let start_off = a.index.get(start).map_or(a.size, |e| e.1);
            let min = start
                .checked_sub(1)
                .and_then(|i| a.index.get(i))
                .map_or(0, |e| e.0);
            (
                closed,
                (Arc::clone(&a.file), a.path.clone(), start_off, a.size, min),
            )
        };
        let mut n = 0u64;
        let mut prev_hi = 0u64;
        for c in &closed {
            let hi = c.search_hi;
            if c.last_sqn() > after_sqn {
                let start = c.index.partition_point(|e| e.0 <= after_sqn);
                let start_off = c
                    .index
                    .get(start)
                    .map_or(c.size, |e| file::entry_offset(*e));
                // The stretches holding records, never the holes; each
                // scanned above the SQN of the entry before it.
                for (s, e) in file::record_segments(&c.index, c.size) {
                    if e <= start_off {
                        continue;
                    }
                    let from = s.max(start_off);
                    let min = file::sqn_before(&c.index, from).max(prev_hi);
                    n += self.replay_file(&c.file, &c.path, from, e, min, after_sqn, f)?;
                }
            }
            prev_hi = hi;
        }
        let (af, apath, aoff, asize, amin) = active;
        n += self.replay_file(&af, &apath, aoff, asize, amin.max(prev_hi), after_sqn, f)?;
        Ok(n)
    }

    #[allow(clippy::too_many_arguments)]
    fn replay_file(
        &self,
        file: &File,
        path: &Path,
        start: u64,
        end: u64,
        min_sqn: u64,
        after_sqn: u64,
        f: &mut dyn FnMut(JournalRecord) -> Result<()>,
    ) -> Result<u64> {
        let mut n = 0u64;
        let stats = &self.stats;
        let outcome = file::scan(file, path, start, end, min_sqn, &mut |off, _, v| {
            if v.sqn > after_sqn {
                match v.to_record() {
                    Ok(rec) => {
                        n += 1;
                        f(rec)?;
                    }
                    Err(e) => {
                        tracing::warn!(path = %path.display(), offset = off, sqn = v.sqn, reason = %e.0, "skipping journal record whose value does not decompress");
                        Stats::incr(&stats.journal_corrupt_records);
                    }
                }
            }
            Ok(())
        })?;
        for (d, why) in outcome.damage.iter().zip(&outcome.reasons) {
            tracing::warn!(path = %path.display(), offset = d.offset, len = d.len, reason = %why, "skipping damaged region of journal file during replay");
            Stats::incr(&self.stats.journal_corrupt_records);
        }
        Ok(n)
    }

    /// The journal's files, oldest first.
    pub fn files(&self) -> Vec<JournalFileInfo> {
        let a = self.active.lock();
        let closed = self.closed.read();
        let mut out: Vec<JournalFileInfo> = closed
            .iter()
            .map(|c| JournalFileInfo {
                file_no: c.file_no,
                path: c.path.clone(),
                first_sqn: c.first_sqn(),
                last_sqn: c.last_sqn(),
                size_bytes: c.size,
                disk_bytes: c.disk_bytes(),
                active: false,
            })
            .collect();
        out.push(JournalFileInfo {
            file_no: a.file_no,
            path: a.path.clone(),
            first_sqn: a.index.first().map_or(0, |e| e.0),
            last_sqn: a.index.last().map_or(0, |e| e.0),
            size_bytes: a.size,
            disk_bytes: a.size,
            active: true,
        });
        out
    }

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

impl Journal {
    /// True if the journal's in-memory index lists a record with `sqn`
    /// (no data is read; a damaged record is found by `fetch`, not here).
    /// Folds use it for their journal check.
    pub fn has_record(&self, sqn: u64) -> bool {
        if sqn == 0 {
            return false;
        }
        {
            let a = self.active.lock();
            if a.index.first().is_some_and(|&(first, _)| sqn >= first) {
                return file::index_lookup(&a.index, sqn).is_some();
            }
        }
        let closed = self.closed.read();
        let i = closed.partition_point(|c| c.search_hi < sqn);
        closed
            .get(i)
            .is_some_and(|c| file::index_lookup(&c.index, sqn).is_some())
    }
}
