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
use super::Journal;
use crate::error::{Error, IoContext, Result};
use crate::fsutil::{drop_cached, no_readahead, write_atomic};
use crate::limits::REMOVE_STEP_BYTES;
use crate::stats::Stats;
use parking_lot::Mutex;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Mean time a punch may take before punching counts as slow for a journal
/// (see [`PunchSink`]); measured here: 0.24 ms a punch of 8 KiB alone,
/// 0.5–0.75 ms beside 8 O_DIRECT random readers (of the same file), 3.7 ms
/// under load on a file system mounted with online discard.
pub const PUNCH_SLOW: Duration = Duration::from_millis(3);

/// Punches made before their speed is judged.
pub const PUNCH_SLOW_MIN_RANGES: u64 = 64;

/// Most punches in one remover step (besides [`REMOVE_STEP_BYTES`] of
/// holes): a step of small holes on a slow file system stays near a
/// second, so the remover's other work is not held up for long.
pub const PUNCH_STEP_RANGES: usize = 256;

/// Bytes a file may hold beyond what its index allows (at most half its
/// holes) before an open punches its runs again (blocks the file system
/// keeps for its own use).
const REPUNCH_SLACK_BYTES: u64 = 1 << 20;

/// Holes due in one file: work for the [`crate::remover`].
#[derive(Debug)]
struct Pending {
    file: Arc<File>,
    path: PathBuf,
    ranges: Vec<(u64, u64)>,
    /// Ranges punched so far.
    done: usize,
    /// Bytes of the ranges not punched yet.
    left: u64,
    /// The writable handle, opened at the first step (`None` inside: the
    /// file is gone or linked elsewhere, nothing is punched).
    writable: Option<Option<File>>,
    sink: Arc<PunchSink>,
}

/// Where one journal's dropped gates send their holes: the remover, at
/// the journal's rate, counted in its stats, their speed judged.
#[derive(Debug)]
pub struct PunchSink {
    dir: PathBuf,
    bytes_per_sec: u64,
    stats: Arc<Stats>,
    /// Punching proved slow here: the journal copies from then on.
    slow: AtomicBool,
    /// Punches since their speed was last judged.
    window: Mutex<Punched>,
}

impl PunchSink {
    /// The sink of the journal in `dir`, punching at `bytes_per_sec` (0:
    /// at once, on the thread that drops a gate).
    pub fn new(dir: &Path, bytes_per_sec: u64, stats: Arc<Stats>) -> Arc<PunchSink> {
        Arc::new(PunchSink {
            dir: dir.to_path_buf(),
            bytes_per_sec,
            stats,
            slow: AtomicBool::new(false),
            window: Mutex::new(Punched::default()),
        })
    }

    /// True once punches here averaged over [`PUNCH_SLOW`].
    pub fn slow(&self) -> bool {
        self.slow.load(Ordering::Relaxed)
    }

    /// Counts `done` and, once [`PUNCH_SLOW_MIN_RANGES`] punches were made
    /// since the last judgement, judges their speed: over [`PUNCH_SLOW`]
    /// a punch on average (a file system mounted with online `discard`
    /// waits for the device on each; a busy file-system journal holds each
    /// back) marks punching slow, and [`Journal::punch_slow`] then says so
    /// (logged once).
    fn record(&self, done: Punched) {
        Stats::add(&self.stats.compaction_bytes_punched, done.bytes);
        let window = {
            let mut w = self.window.lock();
            w.bytes += done.bytes;
            w.ranges += done.ranges;
            w.busy += done.busy;
            if w.ranges < PUNCH_SLOW_MIN_RANGES {
                return;
            }
            std::mem::take(&mut *w)
        };
        let Some(each) = slow_punches(window) else {
            return;
        };
        if !self.slow.swap(true, Ordering::Relaxed) {
            let discard = match crate::fsutil::online_discard(&self.dir) {
                Some(true) => "mounted with online discard",
                Some(false) => "not mounted with online discard: a busy file-system journal?",
                None => "mount options unknown",
            };
            tracing::warn!(target: "basalt::journal", dir = %self.dir.display(), "I0023 punching a hole takes {each:?} on this file system ({} ranges in {:?}; {discard}): with compaction_punch = Auto, journal garbage is reclaimed by copying from now on", window.ranges, window.busy);
        }
    }
}

/// Orders the punches of one journal file's successive indexes (see the
/// module docs, step 4). Dropped, it queues (or punches) its ranges.
#[derive(Debug)]
pub struct PunchGate {
    file: Arc<File>,
    path: PathBuf,
    sink: Arc<PunchSink>,
    /// Holes the pass that replaced this gate's file decided on.
    ranges: Mutex<Vec<(u64, u64)>>,
    /// The gate of the file that replaced this one: kept alive by this one.
    next: Mutex<Option<Arc<PunchGate>>>,
}

impl PunchGate {
    /// A gate for a file read through `file` at `path`.
    pub fn new(file: &Arc<File>, path: &Path, sink: &Arc<PunchSink>) -> Arc<PunchGate> {
        Arc::new(PunchGate {
            file: Arc::clone(file),
            path: path.to_path_buf(),
            sink: Arc::clone(sink),
            ranges: Mutex::new(Vec::new()),
            next: Mutex::new(None),
        })
    }

    /// Records the holes a pass decided on and the gate of the file that
    /// replaced this one.
    pub(super) fn replaced_by(&self, ranges: Vec<(u64, u64)>, next: &Arc<PunchGate>) {
        *self.ranges.lock() = ranges;
        *self.next.lock() = Some(Arc::clone(next));
    }
}

impl Drop for PunchGate {
    fn drop(&mut self) {
        let ranges = std::mem::take(self.ranges.get_mut());
        if ranges.is_empty() {
            return;
        }
        let rate = self.sink.bytes_per_sec;
        let p = Pending::new(
            &self.file,
            std::mem::take(&mut self.path),
            ranges,
            &self.sink,
        );
        crate::remover::queue_steps(p, rate);
        // `next` drops after this, so later gates follow in order.
    }
}

impl Pending {
    fn new(
        file: &Arc<File>,
        path: PathBuf,
        ranges: Vec<(u64, u64)>,
        sink: &Arc<PunchSink>,
    ) -> Pending {
        Pending {
            file: Arc::clone(file),
            path,
            left: ranges.iter().map(|r| r.1).sum(),
            ranges,
            done: 0,
            writable: None,
            sink: Arc::clone(sink),
        }
    }

    /// Punches the next ranges: up to [`PUNCH_STEP_RANGES`] of them or
    /// [`REMOVE_STEP_BYTES`] of holes. The file is checked at the first.
    fn punch_step(&mut self) -> Result<Punched> {
        let mut done = Punched::default();
        let f = match &self.writable {
            Some(f) => f,
            None => self
                .writable
                .insert(writable_if_alone(&self.file, &self.path)?),
        };
        let Some(f) = f else {
            tracing::debug!(target: "basalt::journal", path = %self.path.display(), "journal file removed or linked elsewhere; its holes are not punched");
            self.done = self.ranges.len();
            return Ok(done);
        };
        for &(off, len) in self.ranges.iter().skip(self.done).take(PUNCH_STEP_RANGES) {
            let t = Instant::now();
            punch_range(f, &self.path, off, len)?;
            done.busy += t.elapsed();
            done.bytes += len;
            done.ranges += 1;
            self.done += 1;
            self.left -= len;
            if done.bytes >= REMOVE_STEP_BYTES {
                break;
            }
        }
        Ok(done)
    }
}

impl crate::remover::Steps for Pending {
    fn path(&self) -> &Path {
        &self.path
    }

    fn left(&self) -> u64 {
        self.left
    }

    fn step(&mut self) -> (u64, bool) {
        match self.punch_step() {
            Ok(done) => {
                self.sink.record(done);
                (done.bytes, self.done >= self.ranges.len())
            }
            Err(e) => {
                tracing::warn!(target: "basalt::journal", path = %self.path.display(), error = %e, "I0020 could not punch a journal file's garbage (the space stays allocated until the store is reopened)");
                (0, true)
            }
        }
    }
}

/// True if `path` still names the file `held` (same device and inode) and
/// it has no other link (a backup's hard link shares its blocks).
fn alone(held: &File, path: &Path) -> Result<bool> {
    let want = held.metadata().ctx("stat", path)?;
    let m = match std::fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(Error::io("stat", path, e)),
    };
    Ok(same_and_alone(&want, &m))
}

/// True if `m` is the file `want` describes, with one link.
fn same_and_alone(want: &std::fs::Metadata, m: &std::fs::Metadata) -> bool {
    m.dev() == want.dev() && m.ino() == want.ino() && m.nlink() == 1
}

/// Opens `path` for writing only if it is still the file `held` (same
/// device and inode) and has no other link: `None` otherwise (replaced,
/// removed, or hard-linked by a backup, whose copy shares the blocks).
fn writable_if_alone(held: &File, path: &Path) -> Result<Option<File>> {
    let want = held.metadata().ctx("stat", path)?;
    let f = match OpenOptions::new().write(true).open(path) {
        Ok(f) => f,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(Error::io("open for punching", path, e)),
    };
    let m = f.metadata().ctx("stat", path)?;
    Ok(same_and_alone(&want, &m).then_some(f))
}

/// Punches `len` bytes at `off` of `f` (whole blocks; the size stays).
fn punch_range(f: &File, path: &Path, off: u64, len: u64) -> Result<()> {
    debug_assert!(off.is_multiple_of(file::PUNCH_BLOCK) && len.is_multiple_of(file::PUNCH_BLOCK));
    let flags = rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE;
    rustix::fs::fallocate(f, flags, off, len)
        .map_err(|e| Error::io("punch hole", path, std::io::Error::from(e)))
}

/// How some punches went.
#[derive(Debug, Default, Clone, Copy)]
struct Punched {
    bytes: u64,
    ranges: u64,
    /// Time in `fallocate` (pauses not counted).
    busy: Duration,
}

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

/// Name of the scratch file [`probe_punch`] makes (removed at once; a
/// leftover is removed by the next probe).
pub const PROBE_NAME: &str = "punch-probe.tmp";

/// Writes two blocks to a scratch file in `dir`, punches the first, and
/// removes it: true if the file system took the punch (also for tests that
/// skip where it does not).
pub fn probe_punch(dir: &Path) -> bool {
    let path = dir.join(PROBE_NAME);
    let attempt = || -> std::io::Result<()> {
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(true)
            .open(&path)?;
        std::os::unix::fs::FileExt::write_all_at(&f, &[1u8; 2 * file::PUNCH_BLOCK as usize], 0)?;
        let flags = rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE;
        rustix::fs::fallocate(&f, flags, 0, file::PUNCH_BLOCK)?;
        Ok(())
    };
    let res = attempt();
    let _ = std::fs::remove_file(&path);
    match res {
        Ok(()) => true,
        Err(e) => {
            tracing::debug!(path = %path.display(), error = %e, "punch probe failed");
            false
        }
    }
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

    /// True once punching here proved slow ([`PunchSink`]): `Punch::Auto`
    /// copies from then on.
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

/// The mean time a punch took, if `done` counts as slow: over
/// [`PUNCH_SLOW`] on average over at least [`PUNCH_SLOW_MIN_RANGES`].
fn slow_punches(done: Punched) -> Option<Duration> {
    if done.ranges < PUNCH_SLOW_MIN_RANGES {
        return None;
    }
    let each = done.busy / u32::try_from(done.ranges).unwrap_or(u32::MAX);
    (each > PUNCH_SLOW).then_some(each)
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
    fn punching_is_slow_only_on_average_over_enough_ranges() {
        let ms = Duration::from_millis;
        let done = |ranges, busy| Punched {
            bytes: 0,
            ranges,
            busy,
        };
        assert_eq!(slow_punches(done(10, ms(1000))), None, "too few to judge");
        assert_eq!(slow_punches(done(100, ms(100))), None, "1 ms each");
        assert_eq!(slow_punches(done(100, ms(1000))), Some(ms(10)));
    }

    #[test]
    fn the_remover_punches_a_files_holes_a_bounded_step_at_a_time() {
        use crate::remover::Steps;
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join("1.jnl");
        let blocks = PUNCH_STEP_RANGES as u64 * 2 + 10;
        std::fs::write(&path, vec![7u8; (blocks * file::PUNCH_BLOCK) as usize]).unwrap();
        if !probe_punch(d.path()) {
            return;
        }
        let f = Arc::new(File::open(&path).unwrap());
        let stats = Arc::new(Stats::default());
        let sink = PunchSink::new(d.path(), 0, Arc::clone(&stats));
        // Every other block: one range each, 4 KiB apart.
        let ranges: Vec<(u64, u64)> = (0..blocks / 2)
            .map(|b| (2 * b * file::PUNCH_BLOCK, file::PUNCH_BLOCK))
            .collect();
        let n = ranges.len() as u64;
        let mut p = Pending::new(&f, path.clone(), ranges, &sink);
        assert_eq!(p.left(), n * file::PUNCH_BLOCK);
        let allocated = || f.metadata().unwrap().blocks() * 512;
        let full = allocated();
        let (freed, done) = p.step();
        assert!(!done);
        assert_eq!(freed, PUNCH_STEP_RANGES as u64 * file::PUNCH_BLOCK);
        assert_eq!(p.left(), n * file::PUNCH_BLOCK - freed);
        assert!(allocated() <= full - freed, "{full} {}", allocated());
        let (rest, done) = p.step();
        assert!(done);
        assert_eq!(freed + rest, n * file::PUNCH_BLOCK);
        assert_eq!(p.left(), 0);
        assert_eq!(
            stats.compaction_bytes_punched.load(Ordering::Relaxed),
            freed + rest
        );
        assert!(!sink.slow());
        // Data outside the holes is intact.
        let bytes = std::fs::read(&path).unwrap();
        let b = file::PUNCH_BLOCK as usize;
        assert!(bytes[..b].iter().all(|&x| x == 0));
        assert!(bytes[b..2 * b].iter().all(|&x| x == 7));
        // A file linked elsewhere is left whole.
        let link = d.path().join("link.jnl");
        std::fs::hard_link(&path, &link).unwrap();
        let mut p = Pending::new(&f, path.clone(), vec![(b as u64, file::PUNCH_BLOCK)], &sink);
        assert_eq!(p.step(), (0, true));
        assert!(std::fs::read(&path).unwrap()[b..2 * b]
            .iter()
            .all(|&x| x == 7));
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
