//! A version: the immutable set of live SST files, level by level.
//!
//! Readers take an `Arc<Version>` and use it without locks; flushes and merges
//! build a new version and swap it in. Invariants:
//! - L0 files may overlap each other; they are kept newest first.
//! - Files of L1 and below never overlap within their level and are sorted
//!   by key.
//! - For any key, the entry in a newer place (L0 before L1, L1 before L2 ...)
//!   has a higher SQN than any entry for the key in an older place.

use super::iter::EntryIter;
use super::manifest::{FileEntry, Manifest};
use super::sst::{RangeOptions, SstReader, SstSummary};
use crate::entry::LedgerValue;
use crate::error::{Error, Result};
use crate::limits::LEVELS;
use crate::remover::Obsolete;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// One SST file of the ledger.
///
/// **Deferred deletion**: a merge that replaces a file marks its `Table`
/// [obsolete](Table::mark_obsolete) instead of unlinking it. The file is
/// unlinked when the last `Arc<Table>` is dropped, i.e. once no version,
/// snapshot or fold refers to it any more. The ledger keeps a reference of
/// its own to each replaced table and drops it on its clerk's thread once
/// it is the last (`crate::retired`, reaped by the merge clerk), so no reader pays for the unlink. (A
/// crash in between leaves the file behind; it is not in the manifest and
/// is removed at the next open.)
#[derive(Debug)]
pub struct Table {
    /// File number.
    pub file_no: u64,
    /// What the manifest says the file holds.
    pub summary: SstSummary,
    /// The open reader, or why the file could not be opened.
    pub reader: std::result::Result<Arc<SstReader>, String>,
    /// The file's path.
    pub path: PathBuf,
    /// Set when a merge has replaced the file; removed on drop.
    obsolete: Obsolete,
    /// Set when a read of the file met a damaged block: the file is never
    /// merged again (that would lose its keys) until the ledger is repaired.
    damage: parking_lot::Mutex<Option<String>>,
}

/// The file name of SST number `file_no`.
pub fn sst_name(file_no: u64) -> String {
    format!("{file_no:08}.sst")
}

impl Table {
    /// A table for file `file_no` at `path`, not obsolete.
    pub fn new(
        file_no: u64,
        summary: SstSummary,
        reader: std::result::Result<Arc<SstReader>, String>,
        path: PathBuf,
    ) -> Table {
        Table {
            file_no,
            summary,
            reader,
            path,
            obsolete: Obsolete::default(),
            damage: parking_lot::Mutex::new(None),
        }
    }

    /// Records that the file holds a damaged block.
    pub fn mark_damaged(&self, why: String) {
        let mut d = self.damage.lock();
        if d.is_none() {
            *d = Some(why);
        }
    }

    /// Why the file must not be merged (unreadable or known damaged), if so.
    pub fn unmergeable(&self) -> Option<String> {
        match &self.reader {
            Err(why) => Some(why.clone()),
            Ok(_) => self.damage.lock().clone(),
        }
    }

    /// Marks the file as replaced: it is removed, at most `bytes_per_sec`
    /// fast ([`crate::remover`]), once the last reference to this table is
    /// dropped.
    pub fn mark_obsolete(&self, bytes_per_sec: u64) {
        self.obsolete.mark(bytes_per_sec);
    }

    /// True once a merge has replaced this file.
    pub fn is_obsolete(&self) -> bool {
        self.obsolete.is_set()
    }

    /// True if `key` lies within the file's key range.
    pub fn covers(&self, key: &[u8]) -> bool {
        self.summary.min_key.as_slice() <= key && key <= self.summary.max_key.as_slice()
    }

    /// True if the file's key range meets `[start, end)`.
    pub fn overlaps(&self, start: &[u8], end: Option<&[u8]>) -> bool {
        self.summary.max_key.as_slice() >= start
            && end.is_none_or(|e| self.summary.min_key.as_slice() < e)
    }

    fn broken(&self, why: &str) -> Error {
        Error::corrupt(
            &self.path,
            0,
            format!("ledger file unreadable ({why}); run `basalt kv --data-dir DIR repair` to rebuild the ledger from the journal"),
        )
    }

    /// Point lookup.
    pub fn get(&self, key: &[u8], hash: u64) -> Result<Option<LedgerValue>> {
        self.get_timed(key, hash, None)
    }

    /// [`Table::get`], counting in `stats` (see [`SstReader::get_timed`]).
    pub fn get_timed(
        &self,
        key: &[u8],
        hash: u64,
        stats: Option<&crate::stats::Stats>,
    ) -> Result<Option<LedgerValue>> {
        match &self.reader {
            Ok(r) => r.get_timed(key, hash, stats),
            Err(why) => Err(self.broken(why)),
        }
    }

    /// Entries with `start <= key < end`.
    pub fn range(&self, start: &[u8], end: Option<&[u8]>) -> EntryIter {
        self.range_with(start, end, RangeOptions::default())
    }

    /// Entries with `start <= key < end`, with fold filters (see [`RangeOptions`]).
    pub fn range_with(&self, start: &[u8], end: Option<&[u8]>, opts: RangeOptions) -> EntryIter {
        match &self.reader {
            Ok(r) => Box::new(r.range_with(start, end, opts)),
            Err(why) => Box::new(std::iter::once(Err(self.broken(why)))),
        }
    }
}

impl Drop for Table {
    fn drop(&mut self) {
        if let Some(rate) = self.obsolete.rate() {
            // An iterator made from this table holds its reader and reads
            // on after the unlink, so the file is shrunk first only when
            // nobody does.
            let alone = self
                .reader
                .as_ref()
                .map_or(true, |r| Arc::strong_count(r) == 1);
            let held = self.reader.as_ref().ok().map(|r| r.file());
            match crate::remover::remove(&self.path, held, alone, rate) {
                Ok(()) => {
                    tracing::debug!(target: "basalt::ledger", "L0008 removing replaced ledger file {}", self.path.display());
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    // Not fatal: the file is not in the manifest, so the next
                    // open removes it as a leftover.
                    tracing::warn!(target: "basalt::ledger", "L0007 could not remove replaced ledger file {}: {e}", self.path.display());
                }
            }
        }
    }
}

/// The live files of the ledger.
#[derive(Debug, Default)]
pub struct Version {
    /// `levels[0]` newest first; other levels sorted by key.
    pub levels: Vec<Vec<Arc<Table>>>,
}

impl Version {
    /// An empty version.
    pub fn empty() -> Version {
        Version {
            levels: vec![Vec::new(); LEVELS],
        }
    }

    /// Files at `level` (empty for out-of-range levels).
    pub fn level(&self, level: usize) -> &[Arc<Table>] {
        self.levels.get(level).map_or(&[], Vec::as_slice)
    }

    /// The single file of a sorted level (>= 1) that may hold `key`.
    pub fn find_in_level(&self, level: usize, key: &[u8]) -> Option<&Arc<Table>> {
        let files = self.level(level);
        let idx = files.partition_point(|t| t.summary.max_key.as_slice() < key);
        files.get(idx).filter(|t| t.covers(key))
    }

    /// Files at `level` overlapping `[start, end]` (inclusive end).
    pub fn overlapping(&self, level: usize, start: &[u8], end_incl: &[u8]) -> Vec<Arc<Table>> {
        self.level(level)
            .iter()
            .filter(|t| {
                t.summary.max_key.as_slice() >= start && t.summary.min_key.as_slice() <= end_incl
            })
            .cloned()
            .collect()
    }

    /// True if any file below `level` overlaps `[start, end]`.
    pub fn deeper_overlap(&self, level: usize, start: &[u8], end_incl: &[u8]) -> bool {
        ((level + 1)..LEVELS).any(|l| !self.overlapping(l, start, end_incl).is_empty())
    }

    /// Every table, all levels.
    pub fn all(&self) -> impl Iterator<Item = (usize, &Arc<Table>)> {
        self.levels
            .iter()
            .enumerate()
            .flat_map(|(l, ts)| ts.iter().map(move |t| (l, t)))
    }

    /// Builds a new version: `removed` file numbers dropped, `added` tables
    /// placed at their levels (L0 additions go in front, newest first).
    pub fn apply(&self, removed: &[u64], added: Vec<(usize, Arc<Table>)>) -> Version {
        let mut levels: Vec<Vec<Arc<Table>>> = self
            .levels
            .iter()
            .map(|ts| {
                ts.iter()
                    .filter(|t| !removed.contains(&t.file_no))
                    .cloned()
                    .collect()
            })
            .collect();
        let mut new_l0 = Vec::new();
        for (level, t) in added {
            if level == 0 {
                new_l0.push(t);
            } else if let Some(ts) = levels.get_mut(level) {
                ts.push(t);
            }
        }
        if let Some(l0) = levels.get_mut(0) {
            new_l0.reverse();
            new_l0.append(l0);
            *l0 = new_l0;
        }
        for ts in levels.iter_mut().skip(1) {
            ts.sort_by(|a, b| a.summary.min_key.cmp(&b.summary.min_key));
            debug_assert!(ts
                .windows(2)
                .all(|w| w[0].summary.max_key < w[1].summary.min_key));
        }
        Version { levels }
    }

    /// The manifest describing this version.
    pub fn to_manifest(&self, persisted_sqn: u64, next_file_no: u64) -> Manifest {
        let files = self
            .all()
            .map(|(l, t)| FileEntry {
                level: l as u8,
                file_no: t.file_no,
                summary: t.summary.clone(),
            })
            .collect();
        Manifest {
            persisted_sqn,
            next_file_no,
            files,
        }
    }

    /// Opens the tables a manifest lists. Unreadable files become broken
    /// tables: reads in their key range fail rather than return stale data.
    /// Point lookups go through `cache` (if any).
    pub fn open(
        dir: &Path,
        manifest: &Manifest,
        cache: Option<&super::BlockCache>,
    ) -> (Version, Vec<String>) {
        let mut v = Version::empty();
        let mut problems = Vec::new();
        for f in &manifest.files {
            let path = dir.join(sst_name(f.file_no));
            let reader = match SstReader::open_cached(&path, cache.cloned()) {
                Ok(r) => Ok(Arc::new(r)),
                Err(e) => {
                    problems.push(format!("{}: {e}", path.display()));
                    Err(e.to_string())
                }
            };
            let t = Arc::new(Table::new(f.file_no, f.summary.clone(), reader, path));
            if let Some(ts) = v.levels.get_mut(usize::from(f.level)) {
                ts.push(t);
            }
        }
        // The manifest lists L0 newest first already; sort the others.
        for ts in v.levels.iter_mut().skip(1) {
            ts.sort_by(|a, b| a.summary.min_key.cmp(&b.summary.min_key));
        }
        (v, problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::entry::Status;
    use crate::ledger::sst::{SstOptions, SstWriter};
    use crate::limits::REMOVE_STEP_BYTES;

    /// An SST of more than one removal step, with `n` entries.
    fn big_table(dir: &std::path::Path, file_no: u64) -> (Table, Arc<SstReader>, u64) {
        let path = dir.join(sst_name(file_no));
        // Stored as is, so the entries' bytes are the file's.
        let o = SstOptions {
            block_bytes: 4096,
            bloom_bits_per_key: 8,
            compression: crate::compress::Compression::None,
            ..SstOptions::default()
        };
        let mut w = SstWriter::create(&path, o).unwrap();
        let n = (REMOVE_STEP_BYTES + REMOVE_STEP_BYTES / 4) / 1000;
        for i in 0..n {
            let key = crate::key::object(b"b", format!("k{i:08}").as_bytes());
            let v = LedgerValue {
                sqn: i + 1,
                status: Status::Active,
                expires_at: 0,
                value_hash: i,
                size: 8000,
                last_modified_us: i,
                metadata: vec![(i % 251) as u8; 1000],
            };
            w.add(&key, &v).unwrap();
        }
        let summary = w.finish().unwrap();
        assert!(std::fs::metadata(&path).unwrap().len() > REMOVE_STEP_BYTES);
        let reader = Arc::new(SstReader::open(&path).unwrap());
        let table = Table::new(file_no, summary, Ok(Arc::clone(&reader)), path);
        (table, reader, n)
    }

    /// A replaced table that nobody reads is shrunk before its unlink; one
    /// whose reader an iterator still holds is only unlinked, and the
    /// iterator reads every entry after the table's last reference went.
    #[test]
    fn a_replaced_table_is_shrunk_only_when_nobody_reads_it() {
        let d = tempfile::tempdir().unwrap();
        for (file_no, iterating) in [(1, false), (2, true)] {
            let (table, reader, n) = big_table(d.path(), file_no);
            let path = table.path.clone();
            let full = std::fs::metadata(&path).unwrap().len();
            // A handle of our own shows what removal did to the inode.
            let spy = std::fs::File::open(&path).unwrap();
            let iter = iterating.then(|| reader.range(b"", None));
            drop(reader);
            table.mark_obsolete(1);
            drop(table);
            crate::remover::settle(d.path());
            assert!(!path.exists());
            let left = spy.metadata().unwrap().len();
            match iter {
                None => assert!(left <= REMOVE_STEP_BYTES, "{left} of {full} bytes left"),
                Some(it) => {
                    assert_eq!(left, full);
                    let read: Vec<_> = it.map(|e| e.unwrap().1.sqn).collect();
                    assert_eq!(read, (1..=n).collect::<Vec<_>>());
                }
            }
        }
    }
}
