//! Opening a journal: finding its files (the manifest, or the directory
//! when the manifest is missing), loading or rebuilding the closed files'
//! indexes, recovering the active file, and writing the manifest.

use super::file::{self, ClosedFile};
use super::gate::{PunchGate, PunchSink};
use super::manifest::{Manifest, ManifestEntry, MANIFEST_MAGIC, MANIFEST_NAME, MANIFEST_VERSION};
use super::{
    checkpoint, punch, value_cache, Active, Journal, JournalOptions, SyncState, MANIFEST_ADVICE,
};
use crate::error::{Error, IoContext, Result};
use crate::fsutil::{ensure_dir, no_readahead, preallocate, sync_dir, write_atomic};
use crate::retired::Retired;
use crate::stats::Stats;
use parking_lot::{Condvar, Mutex, RwLock};
use std::collections::BTreeSet;
use std::fs::{self, File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

fn manifest_error(path: &Path, reason: impl Into<String>) -> Error {
    Error::Manifest {
        what: "journal",
        path: path.to_path_buf(),
        reason: reason.into(),
        advice: MANIFEST_ADVICE,
    }
}

/// The version of an intact journal manifest of a format this build does
/// not read.
fn unread_manifest(bytes: &[u8]) -> Option<u32> {
    crate::codec::unread_version_intact(bytes, MANIFEST_MAGIC, &[MANIFEST_VERSION])
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
pub(super) fn create_active_file(
    dir: &Path,
    file_no: u64,
    opts: &JournalOptions,
) -> Result<(PathBuf, File)> {
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
    sink: &Arc<PunchSink>,
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
        gate: PunchGate::new(&file, &path, sink),
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
    /// Opens (or creates) the journal in `dir`, recovering the active file.
    pub fn open(dir: &Path, opts: JournalOptions, stats: Arc<Stats>) -> Result<Journal> {
        ensure_dir(dir)?;
        // An earlier instance's replaced files go before this one lists.
        crate::remover::settle(dir);
        let manifest_path = dir.join(MANIFEST_NAME);
        let on_disk = list_jnl_files(dir)?;
        let manifest = match read_manifest_bytes(&manifest_path) {
            Ok(bytes) => match Manifest::decode(&bytes) {
                // A newer format is never rebuilt over, even by a repair.
                Err(_) if unread_manifest(&bytes).is_some() => {
                    let found = unread_manifest(&bytes).unwrap_or_default();
                    return Err(Error::unsupported_version(
                        "journal manifest",
                        &manifest_path,
                        found,
                        &[MANIFEST_VERSION],
                        true,
                    ));
                }
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
        let punch_sink = PunchSink::new(dir, opts.remove_bytes_per_sec, Arc::clone(&stats));
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
            flush_wake: std::sync::OnceLock::new(),
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
        let punch_sink = PunchSink::new(dir, opts.remove_bytes_per_sec, Arc::clone(&stats));
        let file = Arc::new(f);
        let active = Active {
            file_no: 1,
            gate: PunchGate::new(&file, &path, &punch_sink),
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
            flush_wake: std::sync::OnceLock::new(),
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
        sink: &Arc<PunchSink>,
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
                    gate: PunchGate::new(&file, &path, sink),
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
            gate: PunchGate::new(&file, &path, sink),
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
    pub(super) fn write_manifest(&self, a: &Active, closed: &[Arc<ClosedFile>]) -> Result<()> {
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
}
