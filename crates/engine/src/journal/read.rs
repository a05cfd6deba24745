//! The journal's read path: [`Journal::fetch`] (through the value cache,
//! the active file or a closed file), [`Journal::has_record`],
//! [`Journal::replay`] and the file listing.

use super::file::ClosedFile;
use super::record::JournalRecord;
use super::value_cache::ValueCache;
use super::{file, Journal, JournalFileInfo};
use crate::error::{Error, Result};
use crate::stats::Stats;
use std::fs::File;
use std::path::Path;
use std::sync::Arc;

impl Journal {
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
    pub(super) fn fetch_from_files(&self, sqn: u64, key: &[u8]) -> Result<Option<JournalRecord>> {
        // Active file first: records only ever move from it to the closed list.
        // A record at or below the active floor is in a closed file (or
        // nowhere): no need to wait for the active lock.
        let below_active = self.opts.skip_active_lock
            && sqn <= self.active_floor.load(std::sync::atomic::Ordering::Acquire);
        let hit = if below_active {
            None
        } else {
            let waited = std::time::Instant::now();
            let a = if crate::nowait::active() {
                // A writer holds this lock through its append.
                self.active.try_lock().ok_or_else(|| {
                    crate::nowait::blocked("lock the active journal file", &self.dir)
                })?
            } else {
                self.active.lock()
            };
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
