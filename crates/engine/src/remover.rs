//! The remover: replaced data files deleted in the background, a step at a
//! time, at a bounded rate.
//!
//! A journal compaction run replaces about a gigabyte of files at once, a
//! ledger merge tens of SSTs. On a file system mounted with online discard
//! the space a removal frees goes to the device as discard requests at the
//! file system's next commit, and foreground reads queue behind them.
//! Unlinking a 256 MiB journal file frees one large extent, which ext4
//! sends as one discard request: measured with fio, 16 random 8 KiB
//! readers while 1 GiB of files was unlinked saw per-second maxima of
//! 23–41 ms against 8–11 ms without; with each file shrunk
//! [`REMOVE_STEP_BYTES`] at a time before its unlink, 8–11 ms (p99.99
//! 3.9 ms against 19–22 ms). RocksDB's `DeleteScheduler` truncates files
//! in chunks for the same reason. But steps run back to back still reach
//! the device as one burst (1 GiB within 0.3–0.6 s at the end of every
//! compaction run, `docs/benchmarks/2026-11-28-1251-where-get-maxima-wait.md`,
//! part 5). So a
//! replaced file's owner hands it here instead, and one thread per process
//! (the device is shared by every store of a node) takes the steps,
//! pausing after each for the step's bytes at the rate the file was marked
//! with (`Config::remove_bytes_per_sec`). Nobody waits for it, and a
//! removal's cost never lands on the owner's thread. Leftovers found at
//! open and a compaction's abandoned output are removed in steps too,
//! unpaced, on the caller's thread (rate 0). The holes a journal's
//! in-place reclaim punches ([`crate::journal::punch`]) free extents the
//! same way and come here too, as [`Steps`] of their own.
//!
//! Limits and escapes:
//! - at most [`REMOVE_QUEUE_FILES`] files wait; past that a removal runs
//!   on the caller's thread, in steps, unpaced (as before the remover);
//! - the steps are not paced while more than [`REMOVE_HURRY_BYTES`] wait,
//!   while some store's disk guard sees its disk low ([`disk_is_low`]), or
//!   for files under a directory being settled ([`settle`]: a store's
//!   open and close, so that no removal of one store instance outlives it
//!   into the next).
//!
//! Invariant: a queued removal holds a writable handle to the very file it
//! removes (checked against the owner's handle when queued); it shrinks
//! that handle and unlinks the path only while the path still names the
//! same file, so a file made later under the same name is never touched.

use crate::limits::{REMOVE_HURRY_BYTES, REMOVE_QUEUE_FILES, REMOVE_STEP_BYTES};
use parking_lot::{Condvar, Mutex, MutexGuard};
use std::collections::VecDeque;
use std::fs::{self, File, OpenOptions};
use std::io;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

/// How long one low-disk report keeps the steps unpaced (guards sample
/// every `diskspace::SAMPLE_EVERY` while writes go on).
const LOW_DISK_HOLD: Duration = Duration::from_secs(1);

/// A data file's removal mark: unset while the file is live; set, with
/// the rate to remove it at, when a merge or compaction has replaced it.
/// The file is removed when its last reference is dropped.
#[derive(Debug, Default)]
pub struct Obsolete(OnceLock<u64>);

impl Obsolete {
    /// Marks the file replaced, to be removed at `bytes_per_sec` (0: at
    /// once, on the thread that drops it last). A second mark is ignored.
    pub fn mark(&self, bytes_per_sec: u64) {
        let _ = self.0.set(bytes_per_sec);
    }

    /// The rate the file is to be removed at, once it is marked.
    pub fn rate(&self) -> Option<u64> {
        self.0.get().copied()
    }

    /// True once the file is marked.
    pub fn is_set(&self) -> bool {
        self.0.get().is_some()
    }
}

/// A file's identity on its file system.
type FileId = (u64, u64);

fn id_of(m: &fs::Metadata) -> FileId {
    (m.dev(), m.ino())
}

/// Work the remover does a step at a time: a file's removal, or holes to
/// punch in a journal file ([`crate::journal::punch`]). Each step frees
/// about [`REMOVE_STEP_BYTES`] and is followed by the pause its bytes are
/// worth at the job's rate.
pub trait Steps: Send + std::fmt::Debug {
    /// The file worked on (settles and logs go by it).
    fn path(&self) -> &Path;
    /// Bytes it will free yet (an estimate).
    fn left(&self) -> u64;
    /// Takes one step: the bytes it freed, and true once the work is done
    /// (its failures are logged by the work itself).
    fn step(&mut self) -> (u64, bool);
}

/// One queued piece of work, with the rate to pace it at.
#[derive(Debug)]
struct Job {
    work: Box<dyn Steps>,
    bytes_per_sec: u64,
}

impl Job {
    /// Takes every step here, unpaced.
    fn run_here(mut self) {
        while !self.work.step().1 {}
    }
}

/// A queued removal.
#[derive(Debug)]
struct Removal {
    path: PathBuf,
    /// Writable, of the file `id` names.
    file: File,
    id: FileId,
    /// What is left of the file.
    len: u64,
}

impl Removal {
    /// Takes one step: shrinks the file by a step, or unlinks it when at
    /// most a step is left (or another link keeps its content, or a
    /// shrink failed). Returns the bytes freed and, once it is done, the
    /// unlink's result (`NotFound` when someone else unlinked it).
    fn step_once(&mut self) -> (u64, Option<io::Result<()>>) {
        // 0 links: someone else unlinked it, and this handle's close
        // would free the rest at once.
        let alone = self.file.metadata().is_ok_and(|m| m.nlink() <= 1);
        if alone && self.len > REMOVE_STEP_BYTES {
            let to = self.len - REMOVE_STEP_BYTES;
            match self.file.set_len(to) {
                Ok(()) => {
                    self.len = to;
                    return (REMOVE_STEP_BYTES, None);
                }
                Err(e) => {
                    tracing::debug!(path = %self.path.display(), error = %e, "could not shrink a file before removing it; unlinking it whole")
                }
            }
        }
        (self.len, Some(unlink_if_same(&self.path, self.id)))
    }

    /// Takes every step here, unpaced; the unlink's result.
    fn run_here(mut self) -> io::Result<()> {
        loop {
            if let (_, Some(unlinked)) = self.step_once() {
                return unlinked;
            }
        }
    }
}

impl Steps for Removal {
    fn path(&self) -> &Path {
        &self.path
    }

    fn left(&self) -> u64 {
        self.len
    }

    fn step(&mut self) -> (u64, bool) {
        match self.step_once() {
            (freed, Some(unlinked)) => {
                log_unlink(&self.path, unlinked);
                (freed, true)
            }
            (freed, None) => (freed, false),
        }
    }
}

/// Logs a queued removal's failed unlink. Not fatal: the file is in no
/// manifest, so its store's next open removes it as a leftover.
fn log_unlink(path: &Path, unlinked: io::Result<()>) {
    match unlinked {
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            tracing::warn!(path = %path.display(), error = %e, "could not remove a replaced data file")
        }
        _ => {}
    }
}

/// Unlinks `path` if it still names the file `id`.
fn unlink_if_same(path: &Path, id: FileId) -> io::Result<()> {
    let now = fs::symlink_metadata(path)?;
    if id_of(&now) != id {
        tracing::debug!(path = %path.display(), "a replaced file's name now names another file; left alone");
        return Ok(());
    }
    fs::remove_file(path)
}

#[derive(Debug, Default)]
struct Queue {
    jobs: VecDeque<Job>,
    /// Bytes of the queued jobs and of the one in progress.
    bytes: u64,
    /// The path of the job in progress.
    current: Option<PathBuf>,
    /// Directories being settled: their jobs are not paced.
    settling: Vec<PathBuf>,
}

#[derive(Debug)]
struct Remover {
    queue: Mutex<Queue>,
    /// New work, a settle, or a low disk: wakes the thread.
    work: Condvar,
    /// A job finished.
    done: Condvar,
    epoch: Instant,
    /// Milliseconds after `epoch` until which steps are not paced.
    low_disk_until_ms: AtomicU64,
}

/// The process's remover, its thread started on first use; `None` if the
/// thread could not be started (removals then run on the caller's thread).
fn remover() -> Option<&'static Remover> {
    static REMOVER: OnceLock<Option<&'static Remover>> = OnceLock::new();
    *REMOVER.get_or_init(Remover::start)
}

impl Remover {
    /// A remover with a thread of its own (it lives as long as the
    /// process, as its thread does).
    fn start() -> Option<&'static Remover> {
        let r: &'static Remover = Box::leak(Box::new(Remover {
            queue: Mutex::new(Queue::default()),
            work: Condvar::new(),
            done: Condvar::new(),
            epoch: Instant::now(),
            low_disk_until_ms: AtomicU64::new(0),
        }));
        match std::thread::Builder::new()
            .name("basalt-remover".into())
            .spawn(move || r.run())
        {
            Ok(_) => Some(r),
            Err(e) => {
                tracing::warn!(error = %e, "could not start the remover thread; replaced files are removed by their owners' threads");
                None
            }
        }
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn hurried(&self, q: &Queue, path: &Path) -> bool {
        q.bytes > REMOVE_HURRY_BYTES
            || self.low_disk_until_ms.load(Ordering::Relaxed) > self.now_ms()
            || q.settling.iter().any(|d| path.starts_with(d))
    }

    fn run(&self) {
        let mut q = self.queue.lock();
        loop {
            let Some(mut job) = q.jobs.pop_front() else {
                self.work.wait(&mut q);
                continue;
            };
            let path = job.work.path().to_path_buf();
            q.current = Some(path.clone());
            loop {
                let (freed, done) = MutexGuard::unlocked(&mut q, || job.work.step());
                q.bytes = q.bytes.saturating_sub(freed);
                if done {
                    // Closing the handle frees what is left of the inode
                    // now, not after the pause.
                    let rate = job.bytes_per_sec;
                    drop(job);
                    q.current = None;
                    self.done.notify_all();
                    self.pause(&mut q, &path, rate, freed);
                    break;
                }
                self.pause(&mut q, &path, job.bytes_per_sec, freed);
            }
        }
    }

    /// Waits for `freed` bytes' worth of `rate` (bytes a second; 0: not at
    /// all), unless hurried for `path`.
    fn pause(&self, q: &mut MutexGuard<'_, Queue>, path: &Path, rate: u64, freed: u64) {
        if rate == 0 {
            return;
        }
        let secs = freed as f64 / rate as f64;
        let until = Instant::now() + Duration::from_secs_f64(secs.min(60.0));
        while !self.hurried(q, path) && !self.work.wait_until(q, until).timed_out() {}
    }

    /// Queues `work` at `bytes_per_sec`; gives it back if the queue is
    /// full.
    fn queue<W: Steps + 'static>(&self, work: W, bytes_per_sec: u64) -> Option<W> {
        let mut q = self.queue.lock();
        if q.jobs.len() >= REMOVE_QUEUE_FILES {
            return Some(work);
        }
        q.bytes += work.left();
        q.jobs.push_back(Job {
            work: Box::new(work),
            bytes_per_sec,
        });
        self.work.notify_all();
        None
    }

    fn settle(&self, dir: &Path) {
        let mut q = self.queue.lock();
        q.settling.push(dir.to_path_buf());
        self.work.notify_all();
        let (mine, others): (VecDeque<Job>, VecDeque<Job>) = q
            .jobs
            .drain(..)
            .partition(|j| j.work.path().starts_with(dir));
        q.jobs = others;
        for job in mine {
            let len = job.work.left();
            MutexGuard::unlocked(&mut q, || job.run_here());
            q.bytes = q.bytes.saturating_sub(len);
        }
        while q.current.as_deref().is_some_and(|p| p.starts_with(dir)) {
            self.done.wait(&mut q);
        }
        if let Some(i) = q.settling.iter().position(|d| d == dir) {
            q.settling.swap_remove(i);
        }
    }

    fn disk_is_low(&self) {
        let now = self.now_ms();
        let until = now + LOW_DISK_HOLD.as_millis() as u64;
        if self.low_disk_until_ms.fetch_max(until, Ordering::Relaxed) < now {
            let _q = self.queue.lock();
            self.work.notify_all();
        }
    }

    fn queued(&self) -> (u64, usize) {
        let q = self.queue.lock();
        (q.bytes, q.jobs.len() + usize::from(q.current.is_some()))
    }
}

/// Removes the replaced data file `path` whose owner held `held` (its
/// handle: the path is left alone if it names another file by now).
/// `alone` says nobody else reads the file through `held`: only then is it
/// shrunk in steps before its unlink (a reader goes on reading an unlinked
/// file). With a rate and the remover running, the steps are queued and
/// this returns at once; otherwise they run here. Returns the error of
/// what ran here (`NotFound` included, for callers to ignore).
pub fn remove(path: &Path, held: Option<&File>, alone: bool, bytes_per_sec: u64) -> io::Result<()> {
    remove_with(remover(), path, held, alone, bytes_per_sec)
}

fn remove_with(
    r: Option<&Remover>,
    path: &Path,
    held: Option<&File>,
    alone: bool,
    bytes_per_sec: u64,
) -> io::Result<()> {
    let held_id = match held.map(File::metadata).transpose() {
        Ok(id) => id.map(|m| id_of(&m)),
        Err(e) => {
            tracing::debug!(path = %path.display(), error = %e, "cannot read a replaced file's handle; removing it by name");
            None
        }
    };
    if !alone {
        return match held_id {
            Some(id) => unlink_if_same(path, id),
            None => fs::remove_file(path),
        };
    }
    let file = match OpenOptions::new().write(true).open(path) {
        Ok(f) => f,
        // Only the unlink, then (read-only file system, permissions).
        Err(e) if e.kind() != io::ErrorKind::NotFound => {
            tracing::debug!(path = %path.display(), error = %e, "cannot open a replaced file to shrink it; unlinking it whole");
            return fs::remove_file(path);
        }
        Err(e) => return Err(e),
    };
    let m = file.metadata()?;
    let id = id_of(&m);
    if held_id.is_some_and(|h| h != id) {
        tracing::debug!(path = %path.display(), "a replaced file's name now names another file; left alone");
        return Ok(());
    }
    let job = Removal {
        path: path.to_path_buf(),
        file,
        id,
        len: m.len(),
    };
    let left = match r {
        Some(r) if bytes_per_sec > 0 => r.queue(job, bytes_per_sec),
        _ => Some(job),
    };
    // Here, unpaced.
    left.map_or(Ok(()), Removal::run_here)
}

/// Hands `work` (a journal file's holes, say) to the remover at
/// `bytes_per_sec`: queued and done in the background, or, with no rate,
/// no remover thread or a full queue, done here at once, unpaced.
pub fn queue_steps<W: Steps + 'static>(work: W, bytes_per_sec: u64) {
    let left = match remover() {
        Some(r) if bytes_per_sec > 0 => r.queue(work, bytes_per_sec),
        _ => Some(work),
    };
    if let Some(work) = left {
        Job {
            work: Box::new(work),
            bytes_per_sec: 0,
        }
        .run_here();
    }
}

/// Finishes, unpaced, every queued removal of a file under `dir`, and
/// waits for one in progress: a store's open and close call it, so that no
/// removal of an earlier instance runs beside a later one.
pub fn settle(dir: &Path) {
    if let Some(r) = remover() {
        r.settle(dir);
    }
}

/// Called by a disk guard that sees its disk low or full: queued removals
/// run unpaced for the next [`LOW_DISK_HOLD`] (space matters more then).
pub fn disk_is_low() {
    if let Some(r) = remover() {
        r.disk_is_low();
    }
}

/// Bytes of replaced files waiting for removal (their space is not free
/// yet) and how many files.
pub fn queued() -> (u64, usize) {
    remover().map_or((0, 0), Remover::queued)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_of(path: &Path, len: u64) -> File {
        let f = File::create(path).unwrap();
        f.set_len(len).unwrap();
        f
    }

    fn len(f: &File) -> u64 {
        f.metadata().unwrap().len()
    }

    /// Polls `cond` for up to 10 s.
    fn eventually(what: &str, mut cond: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(Instant::now() < deadline, "{what}");
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Each test has a remover of its own: the process's is shared by
    /// every test running beside it.
    fn own() -> &'static Remover {
        Remover::start().unwrap()
    }

    /// A file of `steps` removal steps named `name` in a new directory,
    /// queued on a remover of its own at 1 byte a second (only a settle
    /// or a hurry gets it done within a test) and past its first step.
    fn queued_past_one_step(
        name: &str,
        steps: u64,
    ) -> (&'static Remover, tempfile::TempDir, PathBuf, File) {
        let r = own();
        let d = tempfile::tempdir().unwrap();
        let path = d.path().join(name);
        let held = file_of(&path, steps * REMOVE_STEP_BYTES);
        remove_with(Some(r), &path, Some(&held), true, 1).unwrap();
        eventually("a first step", || len(&held) < steps * REMOVE_STEP_BYTES);
        (r, d, path, held)
    }

    #[test]
    fn a_paced_removal_shrinks_in_the_background_and_settle_finishes_it() {
        let (r, d, path, held) = queued_past_one_step("a.jnl", 4);
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(len(&held), 3 * REMOVE_STEP_BYTES, "one step, then a pause");
        assert_eq!(r.queued(), (3 * REMOVE_STEP_BYTES, 1));
        assert!(path.exists());
        r.settle(d.path());
        assert!(!path.exists());
        assert!(len(&held) <= REMOVE_STEP_BYTES);
        assert_eq!(r.queued(), (0, 0));
    }

    #[test]
    fn unpaced_and_shared_files_are_removed_at_once() {
        let r = own();
        let d = tempfile::tempdir().unwrap();
        let (a, b) = (d.path().join("a.sst"), d.path().join("b.sst"));
        let ha = file_of(&a, 2 * REMOVE_STEP_BYTES + 7);
        let hb = file_of(&b, 2 * REMOVE_STEP_BYTES);
        remove_with(Some(r), &a, Some(&ha), true, 0).unwrap();
        assert!(!a.exists());
        assert_eq!(len(&ha), 7, "shrunk first, to at most a step");
        remove_with(Some(r), &b, Some(&hb), false, 1).unwrap();
        assert!(!b.exists());
        assert_eq!(
            len(&hb),
            2 * REMOVE_STEP_BYTES,
            "a reader's file is not shrunk"
        );
        let e = remove_with(Some(r), &b, None, true, 1).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        assert_eq!(r.queued(), (0, 0));
    }

    #[test]
    fn a_file_with_another_link_is_unlinked_unshrunk() {
        let d = tempfile::tempdir().unwrap();
        let (a, link) = (d.path().join("a.jnl"), d.path().join("backup.jnl"));
        drop(file_of(&a, 2 * REMOVE_STEP_BYTES + 5));
        fs::hard_link(&a, &link).unwrap();
        remove(&a, None, true, 0).unwrap();
        assert!(!a.exists());
        assert_eq!(
            fs::metadata(&link).unwrap().len(),
            2 * REMOVE_STEP_BYTES + 5
        );
    }

    #[test]
    fn a_file_made_later_under_the_same_name_is_left_alone() {
        // Queued, and paused after its first step...
        let (r, d, path, old) = queued_past_one_step("c.sst", 3);
        // ...when something removes the name and makes a new file there
        // (a store reopened, its leftover removed, the number reused).
        fs::remove_file(&path).unwrap();
        let new = file_of(&path, 2 * REMOVE_STEP_BYTES);
        r.settle(d.path());
        assert!(path.exists(), "the new file keeps its name");
        assert_eq!(len(&new), 2 * REMOVE_STEP_BYTES);
        assert!(len(&old) <= REMOVE_STEP_BYTES);
        // A removal whose owner held the old file leaves the new one too.
        remove_with(Some(r), &path, Some(&old), true, 0).unwrap();
        remove_with(Some(r), &path, Some(&old), false, 0).unwrap();
        assert!(path.exists());
        assert_eq!(len(&new), 2 * REMOVE_STEP_BYTES);
    }

    #[test]
    fn a_low_disk_unpaces_the_queue() {
        let (r, _d, path, _held) = queued_past_one_step("d.jnl", 3);
        // As a disk guard does while its disk stays low: each call holds
        // the queue unpaced for another LOW_DISK_HOLD (one call's hold
        // could pass before the steps ran on a loaded machine). At 1
        // byte a second the file would still be there after 10 s.
        eventually("removed while the disk is low", || {
            r.disk_is_low();
            !path.exists()
        });
        assert_eq!(r.queued(), (0, 0));
    }

    #[test]
    fn a_full_queue_removes_on_the_callers_thread() {
        let r = own();
        let d = tempfile::tempdir().unwrap();
        // The first file's removal pauses the thread for a minute...
        let first = d.path().join("first.sst");
        let h = file_of(&first, 1000);
        remove_with(Some(r), &first, Some(&h), true, 1).unwrap();
        eventually("the first removed", || !first.exists());
        // ...while the queue fills up.
        let mut held = Vec::new();
        for i in 0..REMOVE_QUEUE_FILES {
            let p = d.path().join(format!("{i}.sst"));
            held.push(file_of(&p, 1));
            remove_with(Some(r), &p, held.last(), true, 1).unwrap();
        }
        assert_eq!(r.queued(), (REMOVE_QUEUE_FILES as u64, REMOVE_QUEUE_FILES));
        let over = d.path().join("over.sst");
        let h = file_of(&over, 2 * REMOVE_STEP_BYTES);
        remove_with(Some(r), &over, Some(&h), true, 1).unwrap();
        assert!(!over.exists(), "over the bound: removed at once");
        assert_eq!(len(&h), REMOVE_STEP_BYTES, "in steps");
        let last = d.path().join(format!("{}.sst", REMOVE_QUEUE_FILES - 1));
        assert!(last.exists(), "queued");
        r.settle(d.path());
        assert!(!last.exists());
        assert_eq!(r.queued(), (0, 0));
    }
}
