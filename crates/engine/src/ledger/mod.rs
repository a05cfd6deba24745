//! The ledger (leveled's "penciller"): an LSM tree of keys and metadata.
//!
//! Changes land in the active [`memtable::Memtable`]. Past `memtable_bytes` it
//! is frozen and the *flush clerk* thread writes it as an L0 [`sst`] file.
//! The *merge clerk* thread merges L0 into L1 and each overfull level into the
//! next, one bounded job at a time. The two run independently, so a long
//! merge never holds up a flush (and so never stalls writers by itself).
//! Every change of the file set is committed under the install lock by
//! rewriting the [`manifest`] atomically and swapping in a new [`Version`].
//!
//! Writers feel back-pressure, never unbounded memory growth (leveled #402):
//! while too many frozen memtables wait, or L0 holds `l0_stall_files`, an
//! insert waits for the clerk.

pub(crate) mod block;
pub mod block_cache;
pub mod bloom;
pub mod iter;
pub mod manifest;
pub mod memtable;
pub mod memtable_budget;
pub mod sst;
pub mod version;
pub mod view;

use crate::clock::now_secs;
use crate::entry::LedgerValue;
use crate::error::{Error, IoContext, Result};
use crate::fsutil;
use crate::limits::LEVELS;
use crate::retired::Retired;
use crate::stats::Stats;
pub use block_cache::BlockCache;
use iter::{EntryIter, MergeIter};
use manifest::Manifest;
use memtable::Memtable;
pub use memtable_budget::MemtableBudget;
use parking_lot::{Condvar, Mutex, RwLock};
use sst::{SstOptions, SstReader, SstWriter};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use version::{sst_name, Table, Version};
pub use view::LedgerView;

/// Ledger settings (taken from the store's `Config`).
#[derive(Debug, Clone)]
pub struct LedgerOptions {
    /// Freeze the memtable past this many bytes.
    pub memtable_bytes: usize,
    /// Freeze it also once this many journal bytes were written since the
    /// last freeze (0: off; `Config::memtable_journal_bytes`).
    pub memtable_journal_bytes: u64,
    /// SST block and bloom settings.
    pub sst: SstOptions,
    /// Target SST file size for merges.
    pub sst_file_bytes: u64,
    /// Merge L0 into L1 at this many L0 files.
    pub l0_merge_trigger: usize,
    /// Writers wait while L0 has this many files.
    pub l0_stall_files: usize,
    /// Writers wait while this many frozen memtables are queued.
    pub frozen_memtables_max: usize,
    /// Files allowed in L1.
    pub l1_files: usize,
    /// Growth factor per level below L1.
    pub level_fanout: usize,
    /// Run flushes and merges on a background thread (else inline in writers).
    pub background: bool,
    /// Nice steps below the process for the merge clerk's thread
    /// (`Config::background_nice`).
    pub merge_nice: i32,
    /// Replaced SSTs are removed at most this fast (0: at once;
    /// `Config::remove_bytes_per_sec`, [`crate::remover`]).
    pub remove_bytes_per_sec: u64,
    /// Point lookups' cache of SST data blocks (`None`: none).
    pub block_cache: Option<BlockCache>,
    /// The memtable budget shared with other stores (`None`: none).
    pub memtable_budget: Option<MemtableBudget>,
}

impl LedgerOptions {
    /// Files allowed at `level` (L1 and below; the basement is unbounded).
    pub fn max_files(&self, level: usize) -> usize {
        if level + 1 >= LEVELS {
            return usize::MAX;
        }
        let mut n = self.l1_files;
        for _ in 1..level {
            n = n.saturating_mul(self.level_fanout);
        }
        n
    }
}

/// Called with a memtable's highest SQN before that memtable is persisted;
/// the store makes the journal durable up to that SQN, so the ledger never
/// persists a change the journal could lose.
pub type PersistHook = Box<dyn Fn(u64) -> Result<()> + Send + Sync>;

struct State {
    mem: Arc<Memtable>,
    /// Oldest first.
    frozen: Vec<Arc<Memtable>>,
    version: Arc<Version>,
    persisted_sqn: u64,
}

struct Work {
    next_file_no: u64,
    /// Per level: the max key of the last file merged down, for round-robin choice.
    cursor: Vec<Vec<u8>>,
}

struct Shared {
    dir: PathBuf,
    opts: LedgerOptions,
    stats: Arc<Stats>,
    hook: PersistHook,
    state: RwLock<State>,
    work: Mutex<Work>,
    /// One flush at a time (memtables are flushed in order).
    flush_lock: Mutex<()>,
    /// One merge at a time.
    merge_lock: Mutex<()>,
    /// Held while a new version is computed, committed and swapped in.
    install_lock: Mutex<()>,
    signal: Mutex<()>,
    cv: Condvar,
    shutdown: AtomicBool,
    poisoned: Mutex<Option<String>>,
    /// Journal bytes written since the active memtable was frozen last
    /// ([`Ledger::note_journal_bytes`]).
    journal_since_freeze: AtomicU64,
    /// Why the ledger cannot currently catch up (a failing job, or due
    /// merges blocked by a damaged file); cleared when a job succeeds.
    stuck: Mutex<Option<String>>,
    /// Tables replaced by merges, dropped by the clerks (unlinking the file
    /// and forgetting its cached blocks) once no version, snapshot or
    /// iterator holds them (see [`crate::retired`]). Before, the last reader
    /// to let go, often a GET, paid for a merge's ~14 unlinks (GET maxima
    /// 20–135 ms above their timed waits, 2026-11-28).
    retired: Retired<Table>,
}

/// The ledger of one store.
pub struct Ledger {
    shared: Arc<Shared>,
    threads: Mutex<Vec<JoinHandle<()>>>,
}

impl std::fmt::Debug for Ledger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ledger")
            .field("dir", &self.shared.dir)
            .finish()
    }
}

/// What one level holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct LevelStats {
    /// Number of files.
    pub files: usize,
    /// Total bytes.
    pub bytes: u64,
    /// Total entries.
    pub entries: u64,
    /// Files that could not be opened.
    pub broken: usize,
}

impl Ledger {
    /// Opens the ledger in `dir`. With `create`, a missing manifest means a
    /// new, empty ledger; otherwise it is an error telling how to repair,
    /// unless the ledger holds no file at all (a creation cut short).
    pub fn open(
        dir: &Path,
        opts: LedgerOptions,
        stats: Arc<Stats>,
        hook: PersistHook,
        create: bool,
    ) -> Result<Ledger> {
        fsutil::ensure_dir(dir)?;
        // An earlier instance's replaced files go before this one lists.
        crate::remover::settle(dir);
        let manifest_path = dir.join("MANIFEST");
        let interrupted = !create && !manifest_path.exists() && !has_sst_files(dir)?;
        if interrupted {
            // The store's creation was cut short between its STORE marker
            // and this manifest (a kill -9 while a vnode was being made):
            // no file was ever flushed, so persisted SQN 0 is the truth and
            // the journal replays everything.
            tracing::warn!(target: "basalt::ledger", dir = %dir.display(), "ledger manifest missing and no ledger file: creation was interrupted; starting afresh");
        }
        let manifest = if (create || interrupted) && !manifest_path.exists() {
            let m = Manifest {
                persisted_sqn: 0,
                next_file_no: 1,
                files: Vec::new(),
            };
            m.store(&manifest_path)?;
            m
        } else {
            Manifest::load(&manifest_path)?
        };
        let (version, problems) = Version::open(dir, &manifest, opts.block_cache.as_ref());
        for p in &problems {
            tracing::error!(target: "basalt::ledger", "L0003 unreadable ledger file: {p}");
            Stats::incr(&stats.ledger_corrupt_blocks);
        }
        remove_leftovers(dir, &manifest)?;
        let next_file_no = manifest
            .files
            .iter()
            .map(|f| f.file_no + 1)
            .max()
            .unwrap_or(1)
            .max(manifest.next_file_no);
        let shared = Arc::new(Shared {
            dir: dir.to_path_buf(),
            stats,
            hook,
            state: RwLock::new(State {
                mem: Arc::new(Memtable::with_budget(opts.memtable_budget.clone())),
                frozen: Vec::new(),
                version: Arc::new(version),
                persisted_sqn: manifest.persisted_sqn,
            }),
            work: Mutex::new(Work {
                next_file_no,
                cursor: vec![Vec::new(); LEVELS],
            }),
            flush_lock: Mutex::new(()),
            merge_lock: Mutex::new(()),
            install_lock: Mutex::new(()),
            signal: Mutex::new(()),
            cv: Condvar::new(),
            shutdown: AtomicBool::new(false),
            poisoned: Mutex::new(None),
            journal_since_freeze: AtomicU64::new(0),
            stuck: Mutex::new(None),
            retired: Retired::default(),
            opts,
        });
        let mut threads = Vec::new();
        if shared.opts.background {
            for job in [Job::Flush, Job::Merge] {
                let s = Arc::clone(&shared);
                let name = match job {
                    Job::Flush => "basalt-ledger-flush",
                    Job::Merge => "basalt-ledger-merge",
                };
                threads.push(
                    std::thread::Builder::new()
                        .name(name.into())
                        .spawn(move || s.run_clerk(job))
                        .ctx("spawn ledger clerk thread", dir)?,
                );
            }
        }
        Ok(Ledger {
            shared,
            threads: Mutex::new(threads),
        })
    }

    /// Highest SQN whose change is persisted in SST files.
    pub fn persisted_sqn(&self) -> u64 {
        self.shared.state.read().persisted_sqn
    }

    /// Waits until the ledger can take another change (back-pressure: too
    /// many frozen memtables or L0 files), or refuses with an error when it
    /// cannot catch up (poisoned, or stuck behind a failing job or a damaged
    /// file). Call it *before* the change is written anywhere (the journal
    /// included), so a refused write leaves no trace; inserts never fail.
    pub fn admit(&self) -> Result<()> {
        self.shared.check_poison()?;
        self.shared.throttle()
    }

    /// Whether a write now might wait in [`Ledger::admit`]: with no
    /// background clerks (the writer then does their work), or within one
    /// flush of the back-pressure (a flush finishing moves a frozen
    /// memtable into level 0, so a check one short of the stall holds
    /// until the next flush at least).
    pub fn admit_would_wait(&self) -> bool {
        self.shared.near_stall()
    }

    /// Inserts one change. The caller serialises inserts (the store's write
    /// lock) so that SQNs reach the memtable in order, and calls
    /// [`Ledger::admit`] first.
    pub fn insert(&self, key: Vec<u8>, value: LedgerValue) -> Result<()> {
        self.insert_batch(vec![(key, value)])
    }

    /// Inserts several changes into the same memtable at once, so no flush
    /// can persist some of them without the others (an object entry and the
    /// index entries of the same SQN). Same caller contract as [`Ledger::insert`].
    pub fn insert_batch(&self, entries: Vec<(Vec<u8>, LedgerValue)>) -> Result<()> {
        let full = {
            let state = self.shared.state.read();
            for (key, value) in entries {
                state.mem.insert(key, value);
            }
            let (bytes, own) = (state.mem.bytes(), self.shared.opts.memtable_bytes);
            bytes >= own
                || (self.shared.opts.memtable_budget.as_ref())
                    .is_some_and(|b| b.should_freeze(bytes, own))
        };
        if full {
            self.shared.freeze();
        }
        Ok(())
    }

    /// Counts `bytes` the journal wrote for changes already inserted, and
    /// freezes the active memtable once `memtable_journal_bytes` were
    /// written since its last freeze, so the persisted SQN follows the
    /// journal however few keys the memtable holds. Same caller contract as
    /// [`Ledger::insert`] (the store's write lock).
    pub fn note_journal_bytes(&self, bytes: u64) {
        let limit = self.shared.opts.memtable_journal_bytes;
        if limit == 0 {
            return;
        }
        let since = self
            .shared
            .journal_since_freeze
            .fetch_add(bytes, Ordering::Relaxed)
            + bytes;
        if since >= limit {
            Stats::incr(&self.shared.stats.ledger_journal_freezes);
            self.shared.freeze();
        }
    }

    /// The newest entry for `key` (tombstones included).
    pub fn get(&self, key: &[u8]) -> Result<Option<LedgerValue>> {
        self.view()
            .get_timed(key, Some(&*self.shared.stats))
            .inspect_err(|e| {
                if e.is_corruption() {
                    Stats::incr(&self.shared.stats.ledger_corrupt_blocks);
                }
            })
    }

    /// Why the ledger cannot currently keep up, if it cannot (see stats).
    pub fn stuck_reason(&self) -> Option<String> {
        self.shared.stuck.lock().clone()
    }

    /// The newest entry of every key with `start <= key < end`, in key order
    /// (tombstones and expired entries included; callers filter).
    pub fn range(&self, start: &[u8], end: Option<&[u8]>) -> MergeIter {
        self.view().range(start, end)
    }

    /// The current memtables and version (the active memtable is shared, so
    /// later inserts may show through it).
    pub fn view(&self) -> LedgerView {
        let (mem, frozen, version) = self.shared.snapshot();
        let mut mems = Vec::with_capacity(frozen.len() + 1);
        mems.push(mem);
        mems.extend(frozen.into_iter().rev());
        LedgerView {
            mems,
            version,
            stats: Some(Arc::clone(&self.shared.stats)),
        }
    }

    /// An immutable view for a snapshot: the frozen memtables and version
    /// are shared, and so is the active memtable as of now
    /// ([`Memtable::share`], O(1) however full it is). The caller must stop
    /// inserts meanwhile (the store's write lock) for the view to be one
    /// point in time.
    pub fn frozen_view(&self) -> LedgerView {
        let s = self.shared.state.read();
        let mut mems = Vec::with_capacity(s.frozen.len() + 1);
        mems.push(Arc::new(s.mem.share()));
        mems.extend(s.frozen.iter().rev().cloned());
        LedgerView {
            mems,
            version: Arc::clone(&s.version),
            stats: Some(Arc::clone(&self.shared.stats)),
        }
    }

    /// Files, bytes and entries per level.
    pub fn level_stats(&self) -> Vec<LevelStats> {
        let version = Arc::clone(&self.shared.state.read().version);
        (0..LEVELS)
            .map(|l| {
                let ts = version.level(l);
                LevelStats {
                    files: ts.len(),
                    bytes: ts.iter().map(|t| t.summary.size_bytes).sum(),
                    entries: ts.iter().map(|t| t.summary.entries).sum(),
                    broken: ts.iter().filter(|t| t.reader.is_err()).count(),
                }
            })
            .collect()
    }

    /// The block cache point lookups use, if any (possibly shared).
    pub fn block_cache(&self) -> Option<&BlockCache> {
        self.shared.opts.block_cache.as_ref()
    }

    /// The memtable budget shared with other stores, if any.
    pub fn memtable_budget(&self) -> Option<&MemtableBudget> {
        self.shared.opts.memtable_budget.as_ref()
    }

    /// Bytes waiting in memory (active plus frozen memtables, as counted
    /// against the memtable limit and budget).
    pub fn memtable_bytes(&self) -> usize {
        let state = self.shared.state.read();
        state.mem.bytes() + state.frozen.iter().map(|m| m.bytes()).sum::<usize>()
    }

    /// Entries waiting in memory (active plus frozen memtables).
    pub fn memtable_entries(&self) -> usize {
        let state = self.shared.state.read();
        state.mem.len() + state.frozen.iter().map(|m| m.len()).sum::<usize>()
    }

    /// Runs flushes and merges until none is due (for tests and tools).
    pub fn settle(&self) -> Result<()> {
        let _ = self.shared.run_pending(true)?;
        Ok(())
    }

    /// Persists every change in memory and stops the clerk. The caller must
    /// hold the store's write lock so no insert races with it.
    pub fn close(&self) -> Result<()> {
        self.stop_clerk();
        self.shared.check_poison()?;
        self.shared.freeze();
        // Flushes only: merges can wait for the next open.
        while self.shared.flush_one()? {}
        self.shared.retired.reap();
        crate::remover::settle(&self.shared.dir);
        Ok(())
    }

    /// Stops the clerk without persisting anything (simulates a crash).
    pub fn abandon(&self) {
        self.stop_clerk();
    }

    fn stop_clerk(&self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        self.shared.notify();
        for t in std::mem::take(&mut *self.threads.lock()) {
            if t.join().is_err() {
                tracing::error!(target: "basalt::ledger", "L0004 ledger clerk thread panicked");
            }
        }
    }
}

impl Drop for Ledger {
    fn drop(&mut self) {
        self.stop_clerk();
    }
}

/// Deletes SST files the manifest does not list (left by an interrupted
/// flush or merge) and temporary files.
fn remove_leftovers(dir: &Path, manifest: &Manifest) -> Result<()> {
    let live: std::collections::HashSet<String> =
        manifest.files.iter().map(|f| sst_name(f.file_no)).collect();
    for entry in std::fs::read_dir(dir).ctx("list", dir)? {
        let entry = entry.ctx("list", dir)?;
        let name = entry.file_name().to_string_lossy().into_owned();
        let leftover = (name.ends_with(".sst") && !live.contains(&name)) || name.ends_with(".tmp");
        if leftover {
            tracing::info!(target: "basalt::ledger", "L0005 removing leftover ledger file {name}");
            std::fs::remove_file(entry.path()).ctx("remove leftover", &entry.path())?;
        }
    }
    Ok(())
}

/// The two kinds of background work.
#[derive(Debug, Clone, Copy)]
enum Job {
    Flush,
    Merge,
}

/// A merge chosen by the merge clerk.
struct MergeJob {
    /// Level the inputs come from (0 = all of L0).
    from: usize,
    upper: Vec<Arc<Table>>,
    lower: Vec<Arc<Table>>,
}

impl Shared {
    fn snapshot(&self) -> (Arc<Memtable>, Vec<Arc<Memtable>>, Arc<Version>) {
        let s = self.state.read();
        (Arc::clone(&s.mem), s.frozen.clone(), Arc::clone(&s.version))
    }

    fn notify(&self) {
        let _g = self.signal.lock();
        self.cv.notify_all();
    }

    fn check_poison(&self) -> Result<()> {
        match &*self.poisoned.lock() {
            Some(why) => Err(Error::Closed(format!("ledger: {why}"))),
            None => Ok(()),
        }
    }

    fn poison(&self, e: &Error) {
        tracing::error!(target: "basalt::ledger", "L0006 ledger clerk failed, store refuses writes: {e}");
        *self.poisoned.lock() = Some(e.to_string());
        self.notify();
    }

    /// Moves the active memtable to the frozen queue (if it holds anything).
    fn freeze(&self) {
        let mut s = self.state.write();
        if s.mem.is_empty() {
            return;
        }
        let fresh = Memtable::with_budget(self.opts.memtable_budget.clone());
        let full = std::mem::replace(&mut s.mem, Arc::new(fresh));
        self.journal_since_freeze.store(0, Ordering::Relaxed);
        // Under the state's write lock: no insert reaches `full` after this.
        full.mark_frozen();
        s.frozen.push(full);
        drop(s);
        self.notify();
    }

    fn near_stall(&self) -> bool {
        if !self.opts.background {
            return true;
        }
        let s = self.state.read();
        s.frozen.len() >= self.opts.frozen_memtables_max
            || s.version.level(0).len() + 1 >= self.opts.l0_stall_files
    }

    fn behind(&self) -> bool {
        let s = self.state.read();
        s.frozen.len() > self.opts.frozen_memtables_max
            || s.version.level(0).len() >= self.opts.l0_stall_files
    }

    /// Back-pressure: wait (or work, when there is no clerk) until the
    /// ledger has caught up.
    fn throttle(&self) -> Result<()> {
        if !self.opts.background {
            return self.run_pending(true).map(|_| ());
        }
        if !self.behind() {
            return Ok(());
        }
        let start = Instant::now();
        Stats::incr(&self.stats.write_stalls);
        let mut g = self.signal.lock();
        while self.behind() {
            self.check_poison()?;
            if let Some(why) = self.stuck.lock().clone() {
                drop(g);
                return Err(Error::Closed(format!(
                    "the ledger is behind and cannot catch up ({why}); reads still work. \
                     If a ledger file is damaged, run `basalt kv --data-dir DIR repair`"
                )));
            }
            if self.shutdown.load(Ordering::SeqCst) {
                break;
            }
            self.cv.wait_for(&mut g, Duration::from_millis(20));
        }
        drop(g);
        let waited = start.elapsed();
        Stats::add(&self.stats.write_stall_us, waited.as_micros() as u64);
        self.stats.wait_write_stall.record(waited);
        Ok(())
    }

    fn run_clerk(self: Arc<Self>, job: Job) {
        if matches!(job, Job::Merge) {
            crate::background::lower_this_thread(self.opts.merge_nice, "ledger merge");
        }
        let mut backoff = Duration::from_millis(100);
        while !self.shutdown.load(Ordering::SeqCst) {
            // Replaced tables nothing holds any more are unlinked here, by
            // the merge clerk (whose work made them), not by a reader, and
            // not by the flush clerk, which writers may be waiting for.
            if matches!(job, Job::Merge) {
                self.retired.reap();
            }
            let step = match job {
                Job::Flush => self.flush_one(),
                Job::Merge => self.merge_one(),
            };
            let mut pause = Duration::from_millis(500);
            match step {
                Ok(true) => {
                    backoff = Duration::from_millis(100);
                    self.notify();
                    continue;
                }
                Ok(false) => {}
                Err(e) => {
                    if self.poisoned.lock().is_some() {
                        return;
                    }
                    // Not fatal (e.g. disk full, a damaged input file): the
                    // store stays readable; retry later with back-off.
                    Stats::incr(&self.stats.ledger_job_errors);
                    tracing::error!(target: "basalt::ledger", "L0008 ledger {job:?} failed, retrying in {backoff:?}: {e}");
                    *self.stuck.lock() = Some(e.to_string());
                    self.notify();
                    pause = backoff;
                    backoff = (backoff * 2).min(Duration::from_secs(30));
                }
            }
            let mut g = self.signal.lock();
            if self.shutdown.load(Ordering::SeqCst) {
                break;
            }
            self.cv.wait_for(&mut g, pause);
        }
    }

    /// Does one job (or, with `all`, every due job). Returns whether any
    /// work was done.
    fn run_pending(&self, all: bool) -> Result<bool> {
        let mut did = false;
        loop {
            self.retired.reap();
            let done = self.flush_one()? || self.merge_one()?;
            if done {
                did = true;
                self.notify();
            }
            if !done || !all {
                return Ok(did);
            }
        }
    }

    fn alloc_file_no(&self) -> u64 {
        let mut w = self.work.lock();
        let n = w.next_file_no;
        w.next_file_no += 1;
        n
    }

    /// Writes the oldest frozen memtable as an L0 file. Returns false when
    /// there is none.
    fn flush_one(&self) -> Result<bool> {
        let _job = self.flush_lock.lock();
        let Some(mem) = self.state.read().frozen.first().cloned() else {
            return Ok(false);
        };
        let max_sqn = mem.max_sqn();
        (self.hook)(max_sqn)?;
        let file_no = self.alloc_file_no();
        let path = self.dir.join(sst_name(file_no));
        let mut w = SstWriter::create(&path, self.opts.sst)?;
        mem.try_for_each(|k, v| w.add(k, v))?;
        let summary = w.finish()?;
        Stats::add(&self.stats.ledger_bytes_written, summary.size_bytes);
        let reader = Arc::new(SstReader::open_cached(
            &path,
            self.opts.block_cache.clone(),
        )?);
        let table = Arc::new(Table::new(file_no, summary, Ok(reader), path));
        let persisted = self.install(&[], vec![(0, table)], Some(&mem))?;
        Stats::incr(&self.stats.ledger_flushes);
        tracing::debug!(target: "basalt::ledger", "L0001 flushed memtable to L0 file {file_no:08} (persisted sqn {persisted})");
        Ok(true)
    }

    /// Computes the next version from the current one, commits it to the
    /// manifest and swaps it in; with `flushed`, also retires that frozen
    /// memtable and advances the persisted SQN. Returns the persisted SQN.
    fn install(
        &self,
        removed: &[u64],
        added: Vec<(usize, Arc<Table>)>,
        flushed: Option<&Arc<Memtable>>,
    ) -> Result<u64> {
        let _install = self.install_lock.lock();
        let (next, persisted) = {
            let s = self.state.read();
            let persisted = flushed.map_or(s.persisted_sqn, |m| s.persisted_sqn.max(m.max_sqn()));
            (s.version.apply(removed, added), persisted)
        };
        let next_file_no = self.work.lock().next_file_no;
        if let Err(e) = next
            .to_manifest(persisted, next_file_no)
            .store(&self.dir.join("MANIFEST"))
        {
            // The manifest's state on disk is unknown after a failed fsync:
            // refuse writes until the store is reopened.
            self.poison(&e);
            return Err(e);
        }
        *self.stuck.lock() = None;
        let mut s = self.state.write();
        s.version = Arc::new(next);
        s.persisted_sqn = persisted;
        if let Some(mem) = flushed {
            debug_assert!(s.frozen.first().is_some_and(|m| Arc::ptr_eq(m, mem)));
            s.frozen.retain(|m| !Arc::ptr_eq(m, mem));
        }
        Ok(persisted)
    }

    /// Chooses the next merge. Jobs that would read an unreadable or
    /// damaged file are skipped (merging it would lose its keys); if every
    /// due job is blocked that way, the reason is recorded as `stuck`.
    fn pick_merge(&self, version: &Version) -> Option<MergeJob> {
        let blocked = |ts: &[Arc<Table>]| {
            ts.iter()
                .find_map(|t| t.unmergeable().map(|why| (t.file_no, why)))
        };
        let mut stuck: Option<String> = None;
        let l0 = version.level(0);
        if l0.len() >= self.opts.l0_merge_trigger {
            let upper: Vec<Arc<Table>> = l0.to_vec();
            let min = upper.iter().map(|t| t.summary.min_key.as_slice()).min()?;
            let max = upper.iter().map(|t| t.summary.max_key.as_slice()).max()?;
            let lower = version.overlapping(1, min, max);
            match blocked(&upper).or_else(|| blocked(&lower)) {
                None => {
                    return Some(MergeJob {
                        from: 0,
                        upper,
                        lower,
                    })
                }
                Some((no, why)) => {
                    stuck = Some(format!(
                        "L0 merge blocked by damaged file {}: {why}",
                        sst_name(no)
                    ));
                }
            }
        }
        for level in 1..LEVELS - 1 {
            let files = version.level(level);
            if files.len() <= self.opts.max_files(level) {
                continue;
            }
            let cursor = self.work.lock().cursor[level].clone();
            // Round robin from the cursor, skipping blocked candidates.
            let start = files.partition_point(|t| t.summary.min_key <= cursor);
            for i in 0..files.len() {
                let Some(pick) = files.get((start + i) % files.len()) else {
                    continue;
                };
                let lower =
                    version.overlapping(level + 1, &pick.summary.min_key, &pick.summary.max_key);
                let upper = vec![Arc::clone(pick)];
                match blocked(&upper).or_else(|| blocked(&lower)) {
                    None => {
                        return Some(MergeJob {
                            from: level,
                            upper,
                            lower,
                        })
                    }
                    Some((no, why)) => {
                        stuck.get_or_insert_with(|| {
                            format!(
                                "L{level} merge blocked by damaged file {}: {why}",
                                sst_name(no)
                            )
                        });
                    }
                }
            }
        }
        if let Some(why) = stuck {
            *self.stuck.lock() = Some(why);
        }
        None
    }

    /// Runs one merge if any level is over its limit.
    fn merge_one(&self) -> Result<bool> {
        let _job = self.merge_lock.lock();
        let version = Arc::clone(&self.state.read().version);
        let Some(job) = self.pick_merge(&version) else {
            return Ok(false);
        };
        let target = job.from + 1;
        let min = job
            .upper
            .iter()
            .chain(&job.lower)
            .map(|t| t.summary.min_key.clone())
            .min()
            .unwrap_or_default();
        let max = job
            .upper
            .iter()
            .chain(&job.lower)
            .map(|t| t.summary.max_key.clone())
            .max()
            .unwrap_or_default();
        if let Some(last) = job.upper.last() {
            self.work.lock().cursor[job.from] = last.summary.max_key.clone();
        }
        let bottom = !version.deeper_overlap(target, &min, &max);
        let removed: Vec<u64> = job
            .upper
            .iter()
            .chain(&job.lower)
            .map(|t| t.file_no)
            .collect();

        // A lone file with nothing below to merge with just moves down.
        let trivial = job.from > 0
            && job.lower.is_empty()
            && !(bottom && job.upper.iter().any(|t| t.summary.tombstones > 0));
        let added: Vec<(usize, Arc<Table>)> = if trivial {
            job.upper.iter().map(|t| (target, Arc::clone(t))).collect()
        } else {
            match self.write_merged(&job, bottom) {
                Ok(tables) => tables.into_iter().map(|t| (target, t)).collect(),
                Err(e) => {
                    if let Error::Corrupt { path, .. } = &e {
                        if let Some(t) =
                            job.upper.iter().chain(&job.lower).find(|t| &t.path == path)
                        {
                            Stats::incr(&self.stats.ledger_corrupt_blocks);
                            t.mark_damaged(e.to_string());
                            tracing::error!(target: "basalt::ledger", "L0009 ledger file {} is damaged; it will not be merged until `basalt kv repair`: {e}", t.path.display());
                        }
                    }
                    return Err(e);
                }
            }
        };
        self.install(&removed, added, None)?;
        if !trivial {
            // Deferred deletion: each replaced file is unlinked once no
            // version, snapshot or iterator holds its table (`retired`).
            for t in job.upper.iter().chain(&job.lower) {
                t.mark_obsolete(self.opts.remove_bytes_per_sec);
            }
            self.retired
                .extend(job.upper.iter().chain(&job.lower).map(Arc::clone));
        }
        Stats::incr(&self.stats.ledger_merges);
        tracing::debug!(target: "basalt::ledger", "L0002 merged {} file(s) from L{} with {} from L{} (trivial move: {trivial})", job.upper.len(), job.from, job.lower.len(), target);
        Ok(true)
    }

    /// Writes the merged output of `job`. On failure the files written so
    /// far are removed (marked obsolete, unlinked when dropped).
    fn write_merged(&self, job: &MergeJob, bottom: bool) -> Result<Vec<Arc<Table>>> {
        let mut out = Vec::new();
        match self.write_merged_into(job, bottom, &mut out) {
            Ok(()) => Ok(out),
            Err(e) => {
                for t in &out {
                    t.mark_obsolete(self.opts.remove_bytes_per_sec);
                }
                Err(e)
            }
        }
    }

    fn write_merged_into(
        &self,
        job: &MergeJob,
        bottom: bool,
        out: &mut Vec<Arc<Table>>,
    ) -> Result<()> {
        let mut sources: Vec<EntryIter> = Vec::new();
        // L0 inputs are newest first already; a single upper file otherwise.
        for t in &job.upper {
            sources.push(t.range(&[], None));
        }
        let lower = job.lower.clone();
        sources.push(Box::new(lower.into_iter().flat_map(|t| t.range(&[], None))));
        let now = now_secs();
        let mut writer: Option<(u64, PathBuf, SstWriter)> = None;
        for item in MergeIter::new(sources) {
            let (k, v) = item?;
            if bottom && v.is_dead(now) {
                continue;
            }
            if writer.is_none() {
                let file_no = self.alloc_file_no();
                let path = self.dir.join(sst_name(file_no));
                let w = SstWriter::create(&path, self.opts.sst)?;
                writer = Some((file_no, path, w));
            }
            if let Some((_, _, w)) = writer.as_mut() {
                w.add(&k, &v)?;
                if w.estimated_bytes() >= self.opts.sst_file_bytes {
                    if let Some(done) = writer.take() {
                        out.push(self.finish_table(done)?);
                    }
                }
            }
        }
        if let Some(done) = writer.take() {
            out.push(self.finish_table(done)?);
        }
        Ok(())
    }

    fn finish_table(&self, (file_no, path, w): (u64, PathBuf, SstWriter)) -> Result<Arc<Table>> {
        let summary = w.finish()?;
        Stats::add(&self.stats.ledger_bytes_written, summary.size_bytes);
        let reader = Arc::new(SstReader::open_cached(
            &path,
            self.opts.block_cache.clone(),
        )?);
        Ok(Arc::new(Table::new(file_no, summary, Ok(reader), path)))
    }
}

/// Whether `dir` holds any ledger file (`.sst`).
fn has_sst_files(dir: &Path) -> Result<bool> {
    for e in std::fs::read_dir(dir).ctx("list", dir)? {
        let e = e.ctx("list", dir)?;
        if e.file_name().to_string_lossy().ends_with(".sst") {
            return Ok(true);
        }
    }
    Ok(false)
}
