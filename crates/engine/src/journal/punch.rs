//! In-place reclaim of journal garbage: holes punched over the blocks that
//! only dropped records cover, instead of copying the live records out.
//!
//! Copying compaction ([`super::compact`]) writes every live record of the
//! files it reclaims again; under a skewed (pareto) workload the cold keys'
//! records are copied over and over, 0.12–0.14 copies a PUT at a 60 %
//! garbage limit (`docs/engine.md`, write amplification). A punch pass
//! reads a closed file the same way (every record judged by the store's
//! [`Liveness`], values not decompressed), but writes nothing but a new
//! `.jix`: maximal runs of [`Keep::Drop`] records become *punched runs*
//! (see [`super::file`], index version 2) and their whole 4 KiB blocks are
//! given back with `fallocate(PUNCH_HOLE | KEEP_SIZE)`. Key-delta and
//! tombstone rewrites keep their records whole (a superset of what a copy
//! would keep). The file keeps its number, path and size.
//!
//! Steps of [`Journal::punch_file`], each safe to crash after:
//!
//! 1. Scan the file's record stretches ([`file::record_segments`]; old holes
//!    are never read) and judge every record. A damaged region, or a file
//!    linked elsewhere (a backup's hard link shares its blocks), stops the
//!    pass: the file is left as it is, for copying compaction.
//! 2. Write the new `.jix` atomically. A crash now leaves runs marked but
//!    not yet punched: the next open sees the file hold more blocks than its
//!    index allows and punches them ([`repunch_at_open`]).
//! 3. Swap a new [`ClosedFile`] (same number, same handle, new index) into
//!    the closed list under the active-file lock, and hand the old one to
//!    the journal's retired list.
//! 4. The holes are punched only when no reader can still use an index that
//!    shows the dropped records: not when the old `ClosedFile` is dropped
//!    (an older one, made before an earlier pass, may be held by a snapshot
//!    and show records this pass drops) but when it *and every older one*
//!    are. Each `ClosedFile` holds a [`PunchGate`]; a pass leaves its
//!    ranges in the old file's gate and links that gate to the new file's,
//!    so a gate is dropped only after every older gate, and so after every
//!    older `ClosedFile`. A dropped gate hands its ranges to the
//!    [`crate::remover`]'s thread, which punches them a step at a time at
//!    `remove_bytes_per_sec` (freed extents reach the device as discards,
//!    as a removed file's do), unpaced past its backlog limit, and at once
//!    when the journal closes ([`crate::remover::settle`]).
//!
//! Invariants: a record an index shows is never inside a hole while a
//! reader can use that index; holes are whole blocks inside punched runs,
//! so the pages of a live record (an `O_DIRECT` read's too) are never
//! punched; a file with more than one link is never punched.
//!
//! A file system that cannot punch holes (`EOPNOTSUPP`) makes the pass fail
//! before step 2 (a test punch of the file's first hole); the compactor then
//! copies instead.

use super::compact::{CompactedRun, Keep, Liveness, Pacer};
use super::file::{self, ClosedFile};
use super::gate::{alone, punch_range, writable_if_alone};
pub use super::gate::{
    holes_waiting, probe_punch, PunchGate, PunchSink, PROBE_NAME, PUNCH_BACKLOG_MAX, PUNCH_SLOW,
    PUNCH_SLOW_MIN_RANGES, PUNCH_STEP_RANGES,
};
use super::Journal;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::{drop_cached, no_readahead, write_atomic};
use crate::stats::Stats;
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::Arc;

/// Bytes a file may hold beyond what its index allows (at most half its
/// holes) before an open punches its runs again (blocks the file system
/// keeps for its own use).
const REPUNCH_SLACK_BYTES: u64 = 1 << 20;

/// At open: punches the `ranges` (its index's, [`file::punch_ranges`]) of a
/// file whose `.jix` marks more than its blocks show (a crash between a pass's `.jix` and its punches, or a
/// backup's restore). Returns the bytes punched (0 if nothing was due).
pub fn repunch_at_open(
    f: &Arc<File>,
    path: &Path,
    ranges: &[(u64, u64)],
    size: u64,
) -> Result<u64> {
    let holes: u64 = ranges.iter().map(|r| r.1).sum();
    if holes == 0 {
        return Ok(0);
    }
    let allocated = f.metadata().ctx("stat", path)?.blocks() * 512;
    let slack = REPUNCH_SLACK_BYTES.min(holes / 2);
    if allocated <= size.saturating_sub(holes) + slack {
        return Ok(0);
    }
    let w = writable_if_alone(f, path)?;
    let Some(w) = w else {
        return Ok(0);
    };
    let mut done = 0;
    for &(off, len) in ranges {
        punch_range(&w, path, off, len)?;
        done += len;
    }
    tracing::info!(target: "basalt::journal", path = %path.display(), bytes = done, "I0021 punched the garbage runs of a journal file whose index marks them (a pass interrupted before its punches)");
    Ok(done)
}

/// How one [`Journal::punch_file`] pass ended.
#[derive(Debug)]
pub(crate) enum PunchOutcome {
    /// The file's index changed; its new holes are due once the old index
    /// is let go.
    Punched(PunchedFile),
    /// No new garbage.
    Unchanged,
    /// Left for copying: a damaged region, or a file linked elsewhere.
    Skipped,
}

/// What one [`Journal::punch_file`] pass did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PunchedFile {
    /// Bytes of the file not in holes, before and after the pass.
    pub bytes_before: u64,
    /// See `bytes_before`.
    pub bytes_after: u64,
    /// Records the pass judged garbage (in new punched runs).
    pub records_dropped: u64,
    /// Records it kept.
    pub records_kept: u64,
}

/// One record (or an earlier punched run) of a file being judged.
#[derive(Debug, Clone, Copy)]
struct Item {
    sqn: u64,
    off: u64,
    garbage: bool,
    /// An earlier pass's punched run.
    punched: bool,
}

impl Journal {
    /// Reclaims the garbage of each file of `run` in place (see the module
    /// docs). The report lists the files whose index changed (in and out:
    /// the same numbers) and their bytes on disk before and after their
    /// holes are punched. Serialised with compaction runs. The holes are
    /// punched once readers let go of the old indexes
    /// (the [`crate::remover`]'s thread, see the module docs).
    pub fn punch_run(&self, run: &[Arc<ClosedFile>], live: &dyn Liveness) -> Result<CompactedRun> {
        let _serial = self.compact_lock.lock();
        self.reap_retired();
        live.before_run()?;
        let mut report = CompactedRun::default();
        let mut pacer = Pacer::default();
        for cf in run {
            let p = match self.punch_file(cf, live, &mut pacer)? {
                PunchOutcome::Punched(p) => p,
                PunchOutcome::Unchanged => continue,
                PunchOutcome::Skipped => {
                    report.punch_skipped += 1;
                    Stats::incr(&self.stats.compaction_punch_skipped);
                    continue;
                }
            };
            report.files_in.push(cf.file_no);
            report.files_out.push(cf.file_no);
            report.bytes_in += p.bytes_before;
            report.bytes_out += p.bytes_after;
            report.records_dropped += p.records_dropped;
            report.records_kept += p.records_kept;
            Stats::incr(&self.stats.compaction_files_punched);
        }
        Stats::add(
            &self.stats.compaction_paced_ms,
            pacer.slept.as_millis() as u64,
        );
        Ok(report)
    }

    /// Reclaims `cf`'s garbage in place (see the module docs).
    /// Serialised with compaction runs by the caller's `compact_lock`.
    pub(crate) fn punch_file(
        &self,
        cf: &Arc<ClosedFile>,
        live: &dyn Liveness,
        pacer: &mut Pacer,
    ) -> Result<PunchOutcome> {
        if !alone(&cf.file, &cf.path)? {
            return Ok(PunchOutcome::Skipped);
        }
        let Some(items) = self.judge(cf, live, pacer)? else {
            return Ok(PunchOutcome::Skipped);
        };
        let index = punched_index(&items);
        if index == cf.index {
            return Ok(PunchOutcome::Unchanged);
        }
        let new_ranges = file::ranges_outside(
            &file::punch_ranges(&index, cf.size),
            &file::punch_ranges(&cf.index, cf.size),
        );
        debug_assert!(new_ranges
            .iter()
            .all(|r| r.0 >= file::JNL_HEADER_LEN && r.1 >= file::PUNCH_BLOCK));
        let jix = self.dir.join(file::jix_name(cf.file_no));
        write_atomic(&jix, &file::encode_index(&index))?;
        let replacement = self.punched_replacement(cf, index);
        let report = PunchedFile {
            bytes_before: cf.disk_bytes(),
            bytes_after: replacement.disk_bytes(),
            records_dropped: items.iter().filter(|i| i.garbage && !i.punched).count() as u64,
            records_kept: items.iter().filter(|i| !i.garbage).count() as u64,
        };
        let replacement = Arc::new(replacement);
        self.swap_in(cf, &replacement)?;
        cf.gate.replaced_by(new_ranges, &replacement.gate);
        self.retired.extend([Arc::clone(cf)]);
        Ok(PunchOutcome::Punched(report))
    }

    /// Judges every record of `cf` (oldest first), with its earlier punched
    /// runs in place: `None` if a damaged region was found.
    fn judge(
        &self,
        cf: &ClosedFile,
        live: &dyn Liveness,
        pacer: &mut Pacer,
    ) -> Result<Option<Vec<Item>>> {
        let mut items: Vec<Item> = cf
            .index
            .iter()
            .filter(|e| file::is_punched(**e))
            .map(|e| Item {
                sqn: e.0,
                off: file::entry_offset(*e),
                garbage: true,
                punched: true,
            })
            .collect();
        // Its own handle without read-ahead, as compaction reads (see
        // `write_run`): 1 MiB reads, dropped from the cache behind it.
        let seq = File::open(&cf.path).ctx("open", &cf.path)?;
        no_readahead(&seq, &cf.path);
        let mut damaged = false;
        for (start, end) in file::record_segments(&cf.index, cf.size) {
            let mut dropped = start;
            let outcome = file::scan(&seq, &cf.path, start, end, 0, &mut |off, _, view| {
                if off - dropped >= self.opts.stream_bytes {
                    drop_cached(&seq, &cf.path, dropped, off - dropped);
                    pacer.read(off - dropped, self.compaction_pace());
                    dropped = off;
                }
                let keep = live.keep(&view.to_record_meta())?;
                items.push(Item {
                    sqn: view.sqn,
                    off,
                    garbage: keep == Keep::Drop,
                    punched: false,
                });
                Ok(())
            })?;
            drop_cached(&seq, &cf.path, dropped, end - dropped);
            pacer.read(end - dropped, self.compaction_pace());
            if let Some(d) = outcome.damage.first() {
                tracing::warn!(target: "basalt::journal", path = %cf.path.display(), offset = d.offset, len = d.len, "damaged region in a journal file; it is compacted by copying, not punched");
                damaged = true;
            }
        }
        if damaged {
            return Ok(None);
        }
        items.sort_unstable_by_key(|i| i.off);
        debug_assert!(items.windows(2).all(|w| w[0].sqn < w[1].sqn));
        Ok(Some(items))
    }

    /// `cf` with a new index: same number, path and handles.
    fn punched_replacement(&self, cf: &ClosedFile, index: Vec<(u64, u64)>) -> ClosedFile {
        ClosedFile {
            file_no: cf.file_no,
            path: cf.path.clone(),
            file: Arc::clone(&cf.file),
            direct: self.opts.direct_handle(&cf.path),
            size: cf.size,
            punched: file::punched_bytes(&index, cf.size),
            index,
            damage: cf.damage.clone(),
            search_hi: cf.search_hi,
            gate: PunchGate::new(&cf.file, &cf.path, &self.punch_sink),
            obsolete: Default::default(),
        }
    }

    /// True if the journal's file system punches holes (tried once, on a
    /// scratch file in the journal's directory, and remembered).
    pub fn punch_supported(&self) -> bool {
        *self.punch_support.get_or_init(|| {
            let ok = probe_punch(&self.dir);
            if !ok {
                tracing::warn!(target: "basalt::journal", dir = %self.dir.display(), "I0022 this file system cannot punch holes; journal garbage is reclaimed by copying");
            }
            ok
        })
    }

    /// True once punching here proved slow ([`PunchSink`], warning I0023;
    /// `Punch::Auto` decides by the holes waiting, not by this).
    pub fn punch_slow(&self) -> bool {
        self.punch_sink.slow()
    }

    /// Replaces `old` by `new` in the closed list (the manifest is
    /// unchanged: same file number).
    fn swap_in(&self, old: &Arc<ClosedFile>, new: &Arc<ClosedFile>) -> Result<()> {
        let _a = self.active.lock();
        let mut closed = self.closed.write();
        let Some(slot) = closed.iter_mut().find(|c| Arc::ptr_eq(c, old)) else {
            return Err(Error::InvalidInput(format!(
                "journal file {} is no longer in the closed list",
                old.file_no
            )));
        };
        *slot = Arc::clone(new);
        Ok(())
    }
}

/// The index of a file whose records (and earlier punched runs) are
/// `items`, oldest first: records kept as entries, each maximal run of
/// garbage as one punched entry. A run with no whole block inside it (one
/// record under two blocks long, unaligned) frees nothing, but is marked
/// all the same: its records leave the index and the file's score, so a
/// file is not chosen again for garbage no pass can free (a copying merge
/// of sparse files frees it).
fn punched_index(items: &[Item]) -> Vec<(u64, u64)> {
    let mut out = Vec::with_capacity(items.len());
    let mut in_run = false;
    for item in items {
        match (item.garbage, in_run) {
            (false, _) => out.push((item.sqn, item.off)),
            (true, false) => out.push((item.sqn, item.off | file::PUNCHED)),
            (true, true) => {}
        }
        in_run = item.garbage;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(sqn: u64, off: u64, garbage: bool) -> Item {
        Item {
            sqn,
            off,
            garbage,
            punched: false,
        }
    }

    #[test]
    fn each_garbage_run_becomes_one_punched_entry_and_its_whole_blocks_holes() {
        let items = [
            item(1, 16, false),
            item(2, 100, true),
            item(3, 200, true),
            item(4, 9000, false),
            item(5, 9100, true),
            item(6, 9200, false),
            item(7, 20000, true),
        ];
        let idx = punched_index(&items);
        assert_eq!(
            idx,
            vec![
                (1, 16),
                (2, 100 | file::PUNCHED),
                (4, 9000),
                (5, 9100 | file::PUNCHED),
                (6, 9200),
                (7, 20000 | file::PUNCHED),
            ]
        );
        // Run 5 (100 bytes) holds no whole block: marked, nothing punched.
        assert_eq!(
            file::punch_ranges(&idx, 30000),
            vec![(4096, 4096), (20480, 8192)]
        );
        assert_eq!(file::punched_bytes(&idx, 30000), 4096 * 3);
        assert_eq!(
            file::record_segments(&idx, 30000),
            vec![(16, 100), (9000, 9100), (9200, 20000)]
        );
        assert_eq!(file::index_span(&idx, 1, 30000), Some((16, 100)));
        assert_eq!(file::index_span(&idx, 2, 30000), None);
        assert_eq!(file::index_span(&idx, 4, 30000), Some((9000, 9100)));
        assert_eq!(file::index_span(&idx, 6, 30000), Some((9200, 20000)));
        assert_eq!(file::index_lookup(&idx, 7), None);
        assert_eq!(file::index_lookup(&idx, 6), Some(9200));
        let bytes = file::encode_index(&idx);
        assert_eq!(file::decode_index(&bytes, 30000).unwrap(), idx);
        // A version 1 index never carries the flag.
        let mut v1 = bytes.clone();
        v1[8..12].copy_from_slice(&file::JIX_VERSION.to_le_bytes());
        let body = v1.len() - 4;
        let sum = crate::codec::crc(&v1[..body]);
        v1[body..].copy_from_slice(&sum.to_le_bytes());
        assert!(file::decode_index(&v1, 30000).is_err());
        // Without punched runs: one stretch from the header, version 1.
        let plain = [(1, 16), (2, 100)];
        assert_eq!(file::record_segments(&plain, 300), vec![(16, 300)]);
        assert_eq!(file::record_segments(&[], 300), vec![(16, 300)]);
        assert_eq!(
            &file::encode_index(&plain)[8..12],
            &file::JIX_VERSION.to_le_bytes()
        );
    }

    #[test]
    fn only_blocks_outside_earlier_holes_are_punched_again() {
        let outside = file::ranges_outside;
        assert_eq!(outside(&[(0, 100)], &[]), vec![(0, 100)]);
        assert_eq!(outside(&[(0, 100)], &[(0, 100)]), vec![]);
        // A run grown on both sides of an old hole.
        assert_eq!(outside(&[(0, 100)], &[(40, 20)]), vec![(0, 40), (60, 40)]);
        // Two old holes merged into one run, and one left alone.
        assert_eq!(
            outside(&[(10, 90), (200, 10)], &[(10, 10), (50, 10), (200, 10)]),
            vec![(20, 30), (60, 40)]
        );
        // An old hole reaching past the range's end, and a later range.
        assert_eq!(
            outside(&[(0, 50), (60, 40)], &[(30, 40)]),
            vec![(0, 30), (70, 30)]
        );
        // Holes before, between and after the ranges.
        assert_eq!(
            outside(&[(100, 10), (300, 10)], &[(0, 10), (200, 10), (400, 10)]),
            vec![(100, 10), (300, 10)]
        );
    }

    #[test]
    fn an_earlier_punched_run_merges_with_new_garbage_beside_it() {
        let mut prior = item(2, 100, true);
        prior.punched = true;
        let items = [
            item(1, 16, false),
            prior,
            item(3, 9000, true),
            item(4, 13000, false),
        ];
        let idx = punched_index(&items);
        assert_eq!(idx, vec![(1, 16), (2, 100 | file::PUNCHED), (4, 13000)]);
        assert_eq!(file::punch_ranges(&idx, 20000), vec![(4096, 4096 * 2)]);
    }
}
