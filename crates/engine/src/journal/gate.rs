//! Punching the holes of a journal file, and ordering them: the lower half
//! of [`super::punch`], which both it and [`super::file`] /
//! [`super::compact`] use (a closed file holds a [`PunchGate`]).
//!
//! * [`PunchGate`]: one per index of a file; dropped only after every older
//!   gate of the same file, it hands the holes its pass decided on to the
//!   [`PunchSink`] (see [`super::punch`], step 4).
//! * [`PunchSink`]: one per journal; queues the holes on the
//!   [`crate::remover`]'s thread at the journal's rate, counts them and
//!   judges their speed ([`PUNCH_SLOW`]); [`holes_waiting`] counts the
//!   process's holes not punched yet ([`PUNCH_BACKLOG_MAX`]).
//! * The file-level helpers: [`PUNCH_BLOCK`], the `fallocate` punch of one
//!   range, the "still this file and not linked elsewhere" checks, and
//!   [`probe_punch`].

use crate::error::{Error, IoContext, Result};
use crate::limits::REMOVE_STEP_BYTES;
use crate::stats::Stats;
use parking_lot::Mutex;
use std::fs::{File, OpenOptions};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Block size holes are punched in: a run's bytes outside whole blocks stay.
pub const PUNCH_BLOCK: u64 = 4096;

/// Mean time a punch may take before punching counts as slow for a journal
/// (see [`PunchSink`]: warning I0023; what `Punch::Auto` does about it is
/// decided by the holes waiting, [`PUNCH_BACKLOG_MAX`]); measured here: 0.24 ms a punch of 8 KiB alone,
/// 0.5–0.75 ms beside 8 O_DIRECT random readers (of the same file), 3.7 ms
/// under load on a file system mounted with online discard.
pub const PUNCH_SLOW: Duration = Duration::from_millis(3);

/// Bytes of holes handed to the remover that `Punch::Auto` lets wait
/// before its runs copy instead (see [`holes_waiting`]). The remover is
/// one thread per process and a punch on a file system mounted with online
/// discard waits for the device: 3.4–4.6 ms a punch of a few KiB on one
/// VM under a node's 2i load (~2 MB/s of holes), less than a node's
/// journals append there. Copying every run from the first slow punches on
/// (as `Auto` did until 2026-12-04) read ~110 MB/s a node to free what the
/// remover could not; punching up to what it keeps up with and copying
/// only the rest uses both. Holes waiting count as reclaimed in the
/// garbage estimate, so this also bounds how far the estimate runs ahead
/// of the disk.
pub const PUNCH_BACKLOG_MAX: u64 = 512 * 1024 * 1024;

/// Bytes of holes queued for punching in this process and not punched yet.
static HOLES_WAITING: AtomicU64 = AtomicU64::new(0);

/// Bytes of holes this process's journals have handed to the remover and
/// that are not punched yet (nor given up).
pub fn holes_waiting() -> u64 {
    HOLES_WAITING.load(Ordering::Relaxed)
}

/// Punches made before their speed is judged.
pub const PUNCH_SLOW_MIN_RANGES: u64 = 64;

/// Most punches in one remover step (besides [`REMOVE_STEP_BYTES`] of
/// holes): a step of small holes on a slow file system stays near a
/// second, so the remover's other work is not held up for long.
pub const PUNCH_STEP_RANGES: usize = 256;

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
    /// Punching proved slow here (warned once; `Punch::Auto` then copies
    /// while [`PUNCH_BACKLOG_MAX`] of holes wait).
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
    /// (logged once, I0023).
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
            tracing::warn!(target: "basalt::journal", dir = %self.dir.display(), "I0023 punching a hole takes {each:?} on this file system ({} ranges in {:?}; {discard}): with compaction_punch = Auto, runs copy instead of punching while more than {} MiB of holes wait", window.ranges, window.busy, PUNCH_BACKLOG_MAX >> 20);
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
        let left = ranges.iter().map(|r| r.1).sum();
        HOLES_WAITING.fetch_add(left, Ordering::Relaxed);
        Pending {
            file: Arc::clone(file),
            path,
            left,
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
            HOLES_WAITING.fetch_sub(len, Ordering::Relaxed);
            if done.bytes >= REMOVE_STEP_BYTES {
                break;
            }
        }
        Ok(done)
    }
}

impl Drop for Pending {
    /// Holes not punched (the file went, an error) wait no more.
    fn drop(&mut self) {
        HOLES_WAITING.fetch_sub(self.left, Ordering::Relaxed);
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
pub(super) fn alone(held: &File, path: &Path) -> Result<bool> {
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
pub(super) fn writable_if_alone(held: &File, path: &Path) -> Result<Option<File>> {
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
pub(super) fn punch_range(f: &File, path: &Path, off: u64, len: u64) -> Result<()> {
    debug_assert!(off.is_multiple_of(PUNCH_BLOCK) && len.is_multiple_of(PUNCH_BLOCK));
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

/// The mean time a punch took, if `done` counts as slow: over
/// [`PUNCH_SLOW`] on average over at least [`PUNCH_SLOW_MIN_RANGES`].
fn slow_punches(done: Punched) -> Option<Duration> {
    if done.ranges < PUNCH_SLOW_MIN_RANGES {
        return None;
    }
    let each = done.busy / u32::try_from(done.ranges).unwrap_or(u32::MAX);
    (each > PUNCH_SLOW).then_some(each)
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
        std::os::unix::fs::FileExt::write_all_at(&f, &[1u8; 2 * PUNCH_BLOCK as usize], 0)?;
        let flags = rustix::fs::FallocateFlags::PUNCH_HOLE | rustix::fs::FallocateFlags::KEEP_SIZE;
        rustix::fs::fallocate(&f, flags, 0, PUNCH_BLOCK)?;
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

#[cfg(test)]
mod tests {
    use super::*;

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
        std::fs::write(&path, vec![7u8; (blocks * PUNCH_BLOCK) as usize]).unwrap();
        if !probe_punch(d.path()) {
            return;
        }
        let f = Arc::new(File::open(&path).unwrap());
        let stats = Arc::new(Stats::default());
        let sink = PunchSink::new(d.path(), 0, Arc::clone(&stats));
        // Every other block: one range each, 4 KiB apart.
        let ranges: Vec<(u64, u64)> = (0..blocks / 2)
            .map(|b| (2 * b * PUNCH_BLOCK, PUNCH_BLOCK))
            .collect();
        let n = ranges.len() as u64;
        let mut p = Pending::new(&f, path.clone(), ranges, &sink);
        assert_eq!(p.left(), n * PUNCH_BLOCK);
        let allocated = || f.metadata().unwrap().blocks() * 512;
        let full = allocated();
        let (freed, done) = p.step();
        assert!(!done);
        assert_eq!(freed, PUNCH_STEP_RANGES as u64 * PUNCH_BLOCK);
        assert_eq!(p.left(), n * PUNCH_BLOCK - freed);
        assert!(allocated() <= full - freed, "{full} {}", allocated());
        let (rest, done) = p.step();
        assert!(done);
        assert_eq!(freed + rest, n * PUNCH_BLOCK);
        assert_eq!(p.left(), 0);
        assert_eq!(
            stats.compaction_bytes_punched.load(Ordering::Relaxed),
            freed + rest
        );
        assert!(!sink.slow());
        // Data outside the holes is intact.
        let bytes = std::fs::read(&path).unwrap();
        let b = PUNCH_BLOCK as usize;
        assert!(bytes[..b].iter().all(|&x| x == 0));
        assert!(bytes[b..2 * b].iter().all(|&x| x == 7));
        // A file linked elsewhere is left whole.
        let link = d.path().join("link.jnl");
        std::fs::hard_link(&path, &link).unwrap();
        let mut p = Pending::new(&f, path.clone(), vec![(b as u64, PUNCH_BLOCK)], &sink);
        assert_eq!(p.step(), (0, true));
        assert!(std::fs::read(&path).unwrap()[b..2 * b]
            .iter()
            .all(|&x| x == 7));
    }
}
