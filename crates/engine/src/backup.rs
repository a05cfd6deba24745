//! Hot backup: a consistent copy of a live store, taken while it serves.
//!
//! [`backup_journal`] (called by `Store::backup`):
//!
//! 1. Rolls the active journal file, so every record acknowledged before the
//!    call is in a closed (immutable) file, and takes `Arc`s of the closed
//!    files at that moment (compaction cannot delete them while held).
//! 2. Hard-links each `.jnl` into `DEST/journal/` (copying, then fsyncing, if
//!    linking fails, e.g. across file systems) and writes its `.jix` from the
//!    in-memory index. A file already in `DEST/journal/` with the same size is
//!    skipped (closed files are immutable and numbers are never reused), so
//!    backing up again into the same directory is incremental; files of an
//!    earlier backup that are no longer live are removed.
//! 3. Creates an empty active file and writes `DEST/journal/MANIFEST`.
//! 4. Writes an **empty ledger** (a ledger manifest
//!    with persisted SQN 0 and no files): the ledger is rebuilt from the
//!    journal when the backup is opened (leveled's hot backup is also
//!    journal-only). This keeps the backup small and independent of ledger
//!    merges running during the backup, at the cost of a full replay on the
//!    first open.
//!
//! The `STORE` marker is written before these steps; a store's
//! `INDEX_RECALC` marker (a store that recalculates its 2i entries,
//! [`crate::index::recalc`]) is read after step 1 and written before any
//! journal file.
//!
//! Writers continue throughout; what they write after step 1 goes to the new
//! active file of the live store and is not in the backup.

use crate::error::{Error, IoContext, Result};
use crate::fsutil::{ensure_dir, sync_dir, write_atomic};
use crate::journal::file::{self, ClosedFile};
use crate::journal::manifest::{Manifest, ManifestEntry, MANIFEST_NAME};
use crate::journal::Journal;
use crate::lock::{check_marker, DirLock, STORE_MARKER};
use crate::stats::Stats;
use std::collections::BTreeSet;
use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// What a hot backup did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BackupReport {
    /// Journal files in the backup.
    pub files: usize,
    /// Files hard-linked.
    pub files_linked: usize,
    /// Files copied (linking failed).
    pub files_copied: usize,
    /// Files already present from an earlier backup (skipped).
    pub files_skipped: usize,
    /// Files of an earlier backup removed (no longer live).
    pub files_removed: usize,
    /// Bytes of journal data in the backup.
    pub bytes: u64,
    /// Highest SQN in the backup: every write acknowledged before the call.
    pub last_sqn: u64,
    /// Wall time.
    pub duration: Duration,
}

fn same_size(path: &Path, size: u64) -> bool {
    fs::metadata(path).is_ok_and(|m| m.len() == size)
}

/// Links (or copies) one closed file and writes its index into `dir`.
fn put_file(cf: &ClosedFile, dir: &Path, report: &mut BackupReport) -> Result<()> {
    let dst = dir.join(file::jnl_name(cf.file_no));
    let jix = dir.join(file::jix_name(cf.file_no));
    let index = file::encode_index(&cf.index);
    if same_size(&dst, cf.size) && same_size(&jix, index.len() as u64) {
        report.files_skipped += 1;
        return Ok(());
    }
    match fs::remove_file(&dst) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(Error::io("remove", &dst, e)),
    }
    if fs::hard_link(&cf.path, &dst).is_ok() {
        report.files_linked += 1;
    } else {
        fs::copy(&cf.path, &dst).ctx("copy journal file to", &dst)?;
        fs::File::open(&dst)
            .and_then(|f| f.sync_all())
            .ctx("fsync", &dst)?;
        report.files_copied += 1;
    }
    write_atomic(&jix, &index)
}

/// Backs up the journal of a live store (in `store_dir`) into `dest` (see
/// the module docs).
pub fn backup_journal(
    journal: &Journal,
    store_dir: &Path,
    dest: &Path,
    stats: &Stats,
) -> Result<BackupReport> {
    let t0 = Instant::now();
    ensure_dir(dest)?;
    let _lock = DirLock::acquire(dest)?;
    check_marker(dest, STORE_MARKER)?;
    let jdir = dest.join("journal");
    ensure_dir(&jdir)?;
    // Held until the end: compaction cannot delete these files meanwhile.
    let (closed, next_file_no): (Vec<Arc<ClosedFile>>, u64) = journal.roll_and_list()?;
    // Read after the files are taken: a compaction that dropped index
    // changes from any of them wrote the marker first.
    if let Some(source) = crate::index::recalc::marker_source(store_dir)? {
        crate::index::recalc::write_marker(dest, &source)?;
    }
    let mut report = BackupReport::default();
    for cf in &closed {
        put_file(cf, &jdir, &mut report)?;
        report.bytes += cf.size;
    }
    report.files = closed.len();
    report.last_sqn = closed.iter().map(|c| c.last_sqn()).max().unwrap_or(0);
    // Remove what an earlier backup left that is no longer live.
    let keep: BTreeSet<u64> = closed.iter().map(|c| c.file_no).collect();
    for entry in fs::read_dir(&jdir).ctx("list directory", &jdir)? {
        let entry = entry.ctx("list directory", &jdir)?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else { continue };
        let no = name
            .strip_suffix(".jix")
            .map(|s| format!("{s}.jnl"))
            .and_then(|n| file::parse_jnl_name(&n))
            .or_else(|| file::parse_jnl_name(name));
        if let Some(no) = no {
            if !keep.contains(&no) {
                let p = entry.path();
                fs::remove_file(&p).ctx("remove stale backup file", &p)?;
                if name.ends_with(".jnl") {
                    report.files_removed += 1;
                }
            }
        }
    }
    crate::journal::create_data_file(&jdir, next_file_no)?;
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
        file_no: next_file_no,
        first_sqn: 0,
        last_sqn: 0,
        active: true,
    });
    let after = next_file_no.checked_add(1).ok_or_else(|| {
        Error::InvalidInput(format!(
            "journal file number {next_file_no} cannot grow further"
        ))
    })?;
    let m = Manifest {
        next_file_no: after,
        files,
    };
    debug_assert!(m.validate().is_ok());
    write_atomic(&jdir.join(MANIFEST_NAME), &m.encode())?;
    sync_dir(&jdir)?;
    // An empty ledger: opening the backup replays the whole journal.
    let ldir = dest.join("ledger");
    if ldir.exists() {
        fs::remove_dir_all(&ldir).ctx("remove ledger directory", &ldir)?;
    }
    ensure_dir(&ldir)?;
    crate::ledger::manifest::Manifest {
        persisted_sqn: 0,
        next_file_no: 1,
        files: Vec::new(),
    }
    .store(&ldir.join("MANIFEST"))?;
    sync_dir(dest)?;
    Stats::incr(&stats.backups);
    report.duration = t0.elapsed();
    Ok(report)
}
