//! A point-in-time view of the journal for snapshots and backups.
//!
//! [`JournalView`] holds `Arc`s of the closed files and of the active file
//! as they were when it was taken, plus a copy of the active file's index up
//! to that moment. Journal compaction may replace files afterwards: the
//! replaced files stay on disk until the last view holding them is dropped
//! (deferred deletion, see [`super::file::ClosedFile`]), so a view keeps
//! reading every record of its point in time.

use super::file::{self, ClosedFile};
use super::record::JournalRecord;
use super::Journal;
use crate::error::{Error, Result};
use crate::stats::Stats;
use std::fs::File;
use std::path::PathBuf;
use std::sync::Arc;

/// The active file as a view saw it.
#[derive(Debug)]
struct ActiveSnap {
    file: Arc<File>,
    path: PathBuf,
    size: u64,
    index: Vec<(u64, u64)>,
    /// Keeps holes out of the file while this view reads it by `index`.
    _gate: Arc<super::gate::PunchGate>,
}

/// The journal's files at one moment (see the module docs). Cheap to clone
/// the closed-file list; the active file's index is copied once.
#[derive(Debug)]
pub struct JournalView {
    closed: Vec<Arc<ClosedFile>>,
    active: ActiveSnap,
    last_sqn: u64,
    stats: Arc<Stats>,
    one_read: bool,
}

impl Journal {
    /// A point-in-time view of the journal: every record written so far stays
    /// readable through it, whatever compaction does afterwards.
    pub fn view(&self) -> JournalView {
        let a = self.active.lock();
        let closed = self.closed.read().clone();
        JournalView {
            closed,
            active: ActiveSnap {
                file: Arc::clone(&a.file),
                path: a.path.clone(),
                size: a.size,
                index: a.index.clone(),
                _gate: Arc::clone(&a.gate),
            },
            last_sqn: a.last_sqn,
            stats: Arc::clone(&self.stats),
            one_read: self.opts.one_read,
        }
    }
}

impl JournalView {
    /// Highest SQN written when the view was taken.
    pub fn last_sqn(&self) -> u64 {
        self.last_sqn
    }

    /// The closed files of the view, oldest first.
    pub fn closed_files(&self) -> &[Arc<ClosedFile>] {
        &self.closed
    }

    fn corrupt(&self, path: &std::path::Path, offset: u64, reason: String) -> Error {
        Stats::incr(&self.stats.journal_corrupt_records);
        Error::corrupt(path, offset, reason)
    }

    fn read(
        &self,
        f: &File,
        path: &std::path::Path,
        (off, end): (u64, u64),
        size: u64,
        sqn: u64,
        key: &[u8],
    ) -> Result<JournalRecord> {
        let rec =
            file::read_record_span(f, path, off, end, size, self.one_read).inspect_err(|e| {
                if e.is_corruption() {
                    Stats::incr(&self.stats.journal_corrupt_records);
                }
            })?;
        if rec.sqn != sqn || rec.key != key {
            return Err(self.corrupt(
                path,
                off,
                format!("expected sqn {sqn}, found sqn {}", rec.sqn),
            ));
        }
        Ok(rec)
    }

    /// Reads the record with `sqn`, checking it belongs to `key`; `None` if
    /// the view holds no such record.
    pub fn fetch(&self, sqn: u64, key: &[u8]) -> Result<Option<JournalRecord>> {
        if sqn == 0 || sqn > self.last_sqn {
            return Ok(None);
        }
        let a = &self.active;
        if let Some(span) = file::index_span(&a.index, sqn, a.size) {
            return self
                .read(&a.file, &a.path, span, a.size, sqn, key)
                .map(Some);
        }
        let i = self.closed.partition_point(|c| c.search_hi < sqn);
        let Some(c) = self.closed.get(i) else {
            return Ok(None);
        };
        match file::index_span(&c.index, sqn, c.size) {
            Some(span) => self
                .read(&c.file, &c.path, span, c.size, sqn, key)
                .map(Some),
            None => match file::damage_covering(&c.damage, sqn) {
                Some(d) => Err(self.corrupt(
                    &c.path,
                    d.offset,
                    format!("the record for sqn {sqn} lies in a damaged region"),
                )),
                None => Ok(None),
            },
        }
    }

    /// True if the view's indexes list a record with `sqn` (no read).
    pub fn has_record(&self, sqn: u64) -> bool {
        if sqn == 0 || sqn > self.last_sqn {
            return false;
        }
        if file::index_lookup(&self.active.index, sqn).is_some() {
            return true;
        }
        let i = self.closed.partition_point(|c| c.search_hi < sqn);
        self.closed
            .get(i)
            .is_some_and(|c| file::index_lookup(&c.index, sqn).is_some())
    }

    /// Calls `f` with every intact record of the view with SQN > `after_sqn`,
    /// in SQN order (values decompressed). Damaged records are skipped and
    /// counted. Returns the number of records passed to `f`.
    pub fn replay(
        &self,
        after_sqn: u64,
        f: &mut dyn FnMut(JournalRecord) -> Result<()>,
    ) -> Result<u64> {
        let mut n = 0u64;
        let files = self
            .closed
            .iter()
            .map(|c| (&*c.file, &c.path, &c.index, c.size))
            .chain(std::iter::once((
                &*self.active.file,
                &self.active.path,
                &self.active.index,
                self.active.size,
            )));
        for (file, path, index, size) in files {
            // Read exactly the records the index lists: the view's moment.
            let start = index.partition_point(|e| e.0 <= after_sqn);
            let records = index.iter().skip(start).filter(|e| !file::is_punched(**e));
            for &(sqn, off) in records {
                match file::read_record_at(file, path, off, size) {
                    Ok(rec) if rec.sqn == sqn => {
                        n += 1;
                        f(rec)?;
                    }
                    Ok(_) => {
                        Stats::incr(&self.stats.journal_corrupt_records);
                        tracing::warn!(path = %path.display(), offset = off, "journal index and data disagree; skipping the record");
                    }
                    Err(e) if e.is_corruption() => {
                        Stats::incr(&self.stats.journal_corrupt_records);
                        tracing::warn!(path = %path.display(), offset = off, error = %e, "skipping damaged journal record");
                    }
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(n)
    }
}
