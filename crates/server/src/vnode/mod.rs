//! Vnodes: one backend instance per ring partition, under
//! `<data_dir>/vnodes/<partition>`, each served by its own worker thread
//! that takes jobs from a **bounded** queue. A full queue answers
//! [`VnodeError::Overload`] at once; memory never grows without bound.
//!
//! A job is a closure run on the worker against the vnode's [`VnodeState`],
//! so a read-modify-write (the PUT coordinator's step) is atomic per vnode.
//! A read the backend answers from memory runs on the request's own task
//! instead ([`Vnode::read_here`]), and so does a write that cannot wait
//! ([`Vnode::write_here`]): it takes the vnode's **write turn**, which the
//! worker holds for each job, so the read-modify-write stays atomic.
//! A HEAD or GET that must wait for the disk may run on a node's read
//! thread beside the worker ([`Vnode::beside`]) instead of in its queue,
//! behind the vnode's writes.
//!
//! * [`request`]: the requests a vnode serves, as data (local or remote);
//! * [`serve`]: serving them on the worker;
//! * [`merge`]: the PUT's coordinate step and a replica's reconcile (pure);
//! * [`id`]: the vnode's incarnation id (part of its vector-clock actor);
//! * [`aae_tree`]: its cached anti-entropy trees, updated on every write;
//! * [`aae_rebuild`]: rebuilding them by a sweep in small steps;
//! * [`aae_fold`]: its part of an anti-entropy fold query;
//! * [`aae_range`]: scoped key listings for anti-entropy follow-up loops.

pub mod aae_fold;
pub mod aae_rebuild;

pub mod aae_range;
pub mod aae_tree;
pub mod id;
pub mod merge;
pub mod request;
pub mod serve;

use crate::object::{DecodeError, RiakObject};
use basalt_backend::{Backend, BackendError, IndexChange, WriteOptions};
use basalt_engine::stats::WaitTimer;
use parking_lot::{Mutex, RwLock};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use tokio::sync::{mpsc, oneshot};

/// Errors of a vnode call.
#[derive(Debug, thiserror::Error)]
pub enum VnodeError {
    /// The vnode's queue is full.
    #[error("overload")]
    Overload,
    /// No answer within the request timeout.
    #[error("timeout")]
    Timeout,
    /// The vnode is shut down.
    #[error("vnode closed")]
    Closed,
    /// The backend failed.
    #[error("backend: {0}")]
    Backend(#[from] BackendError),
    /// A stored object did not decode.
    #[error("{0}")]
    Decode(#[from] DecodeError),
    /// Another node failed or could not be reached.
    #[error("{0}")]
    Remote(String),
}

/// Where a vnode request runs, and so whether its steps may wait.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pace {
    /// On the vnode's worker thread: reads and writes may wait for the
    /// disk, an fsync or the backend's back-pressure.
    Worker,
    /// On the request's own task ([`Vnode::read_here`],
    /// [`Vnode::write_here`]): a step that might wait gives up instead,
    /// before anything is written, and the request goes to the worker.
    InPlace,
}

/// What a job sees: the partition and its backend.
pub struct VnodeState {
    /// Partition number (0-based ring position).
    pub partition: u32,
    /// The vclock actor of this vnode.
    pub actor: Vec<u8>,
    /// The store (shared: a cluster backup folds a snapshot of it on its
    /// own thread, so the worker keeps serving meanwhile).
    pub backend: Arc<dyn Backend>,
    /// Sync writes.
    pub sync: bool,
    /// The backend's directory and the incarnation id (see
    /// [`crate::vnode_id`]); `None` for a vnode without a status file.
    pub incarnation: Option<(std::path::PathBuf, crate::ring::Incarnation)>,
    /// Set when a write failed: the vnode may have lost an event it
    /// issued, so its next start draws a new incarnation id.
    pub tainted: std::sync::atomic::AtomicBool,
    /// Cached anti-entropy trees (`None`: not kept by this vnode).
    pub aae: Option<VnodeAae>,
}

/// The `n_val` of a storage bucket (the node's bucket props and types).
pub type NValOf = Arc<dyn Fn(&[u8]) -> u32 + Send + Sync>;

/// A vnode's cached anti-entropy trees and what updating them needs.
pub struct VnodeAae {
    /// The ring (a key's preference list is named by its first partition).
    pub ring: crate::ring::Ring,
    /// The trees' size.
    pub size: basalt_backend::TreeSize,
    /// A bucket's `n_val`.
    pub n_val_of: NValOf,
    /// The trees; `None` until a rebuild has built them (exchanges skip
    /// the vnode meanwhile).
    pub trees: Mutex<Option<aae_tree::AaeTrees>>,
    /// The rebuild in progress, if any (exchanges go on with `trees`).
    pub rebuild: Mutex<Option<aae_rebuild::Rebuild>>,
    /// The last step of the rebuild that completed, until the next starts:
    /// a step queued again after its predecessor timed out finds the
    /// rebuild done rather than missing.
    pub rebuilt: Mutex<Option<aae_rebuild::Step>>,
    /// Rebuilds and segment listings leave out keys whose value is not in
    /// the journal (`aae_rebuild_journal_check`; leveled only).
    pub journal_check: bool,
    /// Folds run over this vnode for anti-entropy: tree builds and
    /// segment key listings (an exchange of in-sync replicas runs none).
    pub folds: std::sync::atomic::AtomicU64,
}

impl VnodeAae {
    /// A vnode's trees of `size`: `trees` if read back from a clean
    /// shutdown, else none until a rebuild.
    pub fn new(
        ring: crate::ring::Ring,
        size: basalt_backend::TreeSize,
        n_val_of: NValOf,
        trees: Option<aae_tree::AaeTrees>,
        journal_check: bool,
    ) -> VnodeAae {
        VnodeAae {
            ring,
            size,
            n_val_of,
            trees: Mutex::new(trees),
            rebuild: Mutex::new(None),
            rebuilt: Mutex::new(None),
            journal_check,
            folds: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// The preference list (its first partition) and n_val of a key.
    pub fn list_of(&self, bucket: &[u8], key: &[u8]) -> (u32, u32) {
        let (btype, name) = crate::bucket::keying::split_storage_bucket(bucket);
        let first = self
            .ring
            .first_primary(&crate::ring::key_hash(btype, name, key));
        (first, (self.n_val_of)(bucket))
    }

    /// Keeps the trees, and a rebuild's new trees where its sweep has
    /// passed the key, in step with a key going from `old` to `new` (no-op
    /// while there are neither).
    pub fn track(
        &self,
        bucket: &[u8],
        key: &[u8],
        old: Option<&RiakObject>,
        new: Option<&RiakObject>,
    ) {
        let mut trees = self.trees.lock();
        let mut rebuild = self.rebuild.lock();
        if trees.is_none() && rebuild.is_none() {
            return;
        }
        let (first, n_val) = self.list_of(bucket, key);
        let h = |o: &RiakObject| aae_tree::key_state_hash(bucket, key, o.state_hash());
        let (old, new) = (old.map(h), new.map(h));
        if let Some(t) = trees.as_mut() {
            t.apply(first, n_val, bucket, key, old, new);
        }
        if let Some(r) = rebuild.as_mut() {
            r.apply(first, n_val, bucket, key, old, new);
        }
    }

    /// Forgets the trees and any rebuild: a write may or may not have
    /// reached the store, so neither can be trusted; the scheduler
    /// rebuilds them.
    pub fn forget(&self) {
        self.trees.lock().take();
        self.rebuild.lock().take();
        self.rebuilt.lock().take();
    }
}

impl VnodeState {
    /// The stored object (with values).
    pub fn read(&self, bucket: &[u8], key: &[u8]) -> Result<Option<RiakObject>, VnodeError> {
        match self.backend.get(bucket, key)? {
            None => Ok(None),
            Some(o) => Ok(Some(RiakObject::decode_owned(&o.head.metadata, o.value)?)),
        }
    }

    /// The stored object without values (a backend HEAD).
    pub fn read_head(&self, bucket: &[u8], key: &[u8]) -> Result<Option<RiakObject>, VnodeError> {
        match self.backend.head(bucket, key)? {
            None => Ok(None),
            Some(h) => Ok(Some(RiakObject::decode_metadata(&h.metadata)?)),
        }
    }

    /// Writes `new` over `old` (the current stored version), with the 2i
    /// changes between them.
    pub fn write(
        &self,
        bucket: &[u8],
        key: &[u8],
        old: Option<&RiakObject>,
        new: &RiakObject,
    ) -> Result<(), VnodeError> {
        let written = self.write_paced(bucket, key, old, new, Pace::Worker)?;
        debug_assert!(written, "a write on the worker may wait, so it is made");
        Ok(())
    }

    /// [`VnodeState::write`] at `pace`: `Ok(false)`, with nothing written,
    /// if the backend's put might wait and `pace` does not allow it.
    pub fn write_paced(
        &self,
        bucket: &[u8],
        key: &[u8],
        old: Option<&RiakObject>,
        new: &RiakObject,
        pace: Pace,
    ) -> Result<bool, VnodeError> {
        let before = old.map(RiakObject::index_entries).unwrap_or_default();
        let after = new.index_entries();
        let mut index = Vec::new();
        for e in &before {
            if after.binary_search(e).is_err() {
                index.push(IndexChange::remove(e.0.clone(), e.1.clone()));
            }
        }
        for e in &after {
            if before.binary_search(e).is_err() {
                index.push(IndexChange::add(e.0.clone(), e.1.clone()));
            }
        }
        let opts = WriteOptions {
            sync: self.sync,
            index,
            ..WriteOptions::default()
        };
        let (value, metadata) = (new.encode_value(), new.encode_metadata());
        if pace == Pace::InPlace {
            let bytes = bucket.len() + key.len() + value.len() + metadata.len();
            if self.sync || self.backend.put_would_wait(bytes as u64) {
                return Ok(false);
            }
        }
        let res = self.backend.put(bucket, key, &value, &metadata, &opts);
        if let Err(e) = &res {
            self.write_failed(e);
        }
        res?;
        if let Some(aae) = &self.aae {
            aae.track(bucket, key, old, Some(new));
        }
        Ok(true)
    }

    /// Removes the stored object if it is a tombstone with the same events
    /// as `vclock` (tombstone reaping); true if removed.
    pub fn reap_tombstone(
        &self,
        bucket: &[u8],
        key: &[u8],
        vclock: &crate::object::vclock::VClock,
    ) -> Result<bool, VnodeError> {
        let Some(old) = self
            .read_head(bucket, key)?
            .filter(|o| o.is_deleted() && o.vclock.same_events(vclock))
        else {
            return Ok(false);
        };
        let opts = WriteOptions {
            sync: self.sync,
            ..WriteOptions::default()
        };
        if let Err(e) = self.backend.delete(bucket, key, &opts) {
            self.write_failed(&e);
            return Err(e.into());
        }
        if let Some(aae) = &self.aae {
            aae.track(bucket, key, Some(&old), None);
        }
        Ok(true)
    }
}

impl VnodeState {
    /// A write failed with `e`. Unless the backend refused it before
    /// writing anything ([`refused_before_writing`]), it may or may not
    /// have reached the store: the vnode may have lost an event it issued
    /// (its next start draws a new incarnation id) and its anti-entropy
    /// trees, and any rebuild of them, can no longer be trusted.
    fn write_failed(&self, e: &BackendError) {
        if refused_before_writing(e) {
            return;
        }
        self.tainted
            .store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(aae) = &self.aae {
            aae.forget();
        }
    }

    /// After the backend closed without error: records a clean shutdown,
    /// unless a write failed in this incarnation.
    fn mark_clean(&self) {
        let Some((dir, id)) = &self.incarnation else {
            return;
        };
        if self.tainted.load(std::sync::atomic::Ordering::Relaxed) {
            tracing::warn!(
                partition = self.partition,
                "a write failed in this vnode incarnation; the next start draws a new id"
            );
            return;
        }
        if let Some(trees) = self.aae.as_ref().and_then(|a| a.trees.lock().take()) {
            if let Err(e) = aae_tree::save(dir, &trees) {
                tracing::warn!(partition = self.partition, error = %e, "saving anti-entropy trees; they will be rebuilt");
            }
        }
        if let Err(e) = crate::vnode::id::mark_clean(dir, *id) {
            tracing::error!(partition = self.partition, error = %e, "recording a clean vnode shutdown");
        }
    }
}

/// A queued closure and when it was queued (for [`VnodeTimes::queue_wait`]).
type Job = (Instant, Box<dyn FnOnce(&VnodeState) + Send>);

/// Where a vnode's requests spend their time, for `vnode-status` (and so
/// for telling a slow request's wait in the queue from its work): each a
/// [`WaitTimer`] (count, total, slow count — at least 1 ms — and the
/// longest since the vnode started).
#[derive(Debug, Default)]
pub struct VnodeTimes {
    /// From a job's queueing to its start on the worker (the turn taken).
    pub queue_wait: WaitTimer,
    /// A job's run on the worker.
    pub job: WaitTimer,
    /// A write made on the request's task ([`Vnode::write_here`]), in its
    /// turn (writes that gave up for the worker are not counted).
    pub write_here: WaitTimer,
    /// A HEAD or GET queued for the worker, from its queueing to its
    /// answer (the router times it).
    pub read_queued: WaitTimer,
    /// A HEAD or GET on a read thread beside the worker ([`Vnode::beside`]),
    /// from the thread's start on it to its answer.
    pub read_beside: WaitTimer,
}

impl VnodeTimes {
    /// `(name, value)` of every timer's four fields: `vnode_queue_wait_count`,
    /// `_ns`, `_slow`, `_max_ns`, and likewise `vnode_job_*`,
    /// `vnode_write_here_*`, `vnode_read_queued_*`, `vnode_read_beside_*`.
    pub fn snapshot(&self) -> Vec<(String, u64)> {
        [
            self.queue_wait.named("vnode_queue_wait"),
            self.job.named("vnode_job"),
            self.write_here.named("vnode_write_here"),
            self.read_queued.named("vnode_read_queued"),
            self.read_beside.named("vnode_read_beside"),
        ]
        .into_iter()
        .flatten()
        .collect()
    }
}

/// One vnode: its queue and worker, and its state for reads served from
/// memory on the caller's thread ([`Vnode::read_here`]).
pub struct Vnode {
    tx: Mutex<Option<mpsc::Sender<Job>>>,
    worker: Mutex<Option<JoinHandle<()>>>,
    /// The worker's state, for [`Vnode::read_here`]; taken at shutdown so
    /// that the backend (and its directory lock) goes with the worker, as
    /// a reopen of the same directory needs.
    state: Mutex<Option<Arc<VnodeState>>>,
    gate: Arc<RwLock<()>>,
    /// Jobs refused because the queue was full, since the vnode started.
    overloads: std::sync::atomic::AtomicU64,
    /// Reads answered by [`Vnode::read_here`], since the vnode started.
    reads_here: std::sync::atomic::AtomicU64,
    /// Writes made by [`Vnode::write_here`], since the vnode started.
    writes_here: std::sync::atomic::AtomicU64,
    /// The write turn: held by the worker for each job and by
    /// [`Vnode::write_here`] for its write, so that a vnode's
    /// read-modify-writes never overlap.
    turn: Arc<Mutex<()>>,
    /// Holds of [`Vnode::hold_in_place`] alive (a fault test's stall).
    in_place_held: Arc<std::sync::atomic::AtomicUsize>,
    /// Queue waits, job runs and writes in place, timed.
    times: Arc<VnodeTimes>,
    /// Held (read) by each read beside the worker ([`Vnode::beside`]); the
    /// worker takes it (write) before it closes the backend, so no such
    /// read outlives the backend's close.
    beside: Arc<tokio::sync::RwLock<()>>,
}

/// A vnode's state lent to a read on a thread beside its worker
/// ([`Vnode::beside`]); the backend stays open while it lives.
pub struct Beside {
    state: Arc<VnodeState>,
    times: Arc<VnodeTimes>,
    _open: tokio::sync::OwnedRwLockReadGuard<()>,
}

impl Beside {
    /// Runs the read `f`, timed as [`VnodeTimes::read_beside`]. It may
    /// block on the disk: call it on a blocking thread.
    pub fn read<T>(&self, f: impl FnOnce(&VnodeState) -> T) -> T {
        let start = Instant::now();
        let t = f(&self.state);
        self.times.read_beside.since(start);
        t
    }
}

/// While alive, a vnode serves no request on the request's own task (see
/// [`Vnode::hold_in_place`]).
pub struct InPlaceHeld(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for InPlaceHeld {
    fn drop(&mut self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

impl Vnode {
    /// Starts the worker of `state` with a queue of `queue_len` jobs;
    /// `gate` is read-locked before each job (tests pause vnodes with it).
    pub fn start(
        state: VnodeState,
        queue_len: usize,
        gate: Arc<RwLock<()>>,
    ) -> std::io::Result<Vnode> {
        let (tx, mut rx) = mpsc::channel::<Job>(queue_len.max(1));
        let state = Arc::new(state);
        let turn = Arc::new(Mutex::new(()));
        let times = Arc::new(VnodeTimes::default());
        let beside = Arc::new(tokio::sync::RwLock::new(()));
        let (worker_state, worker_gate, worker_turn, worker_times, worker_beside) = (
            Arc::clone(&state),
            Arc::clone(&gate),
            Arc::clone(&turn),
            Arc::clone(&times),
            Arc::clone(&beside),
        );
        let worker = std::thread::Builder::new()
            .name(format!("vnode-{}", state.partition))
            .spawn(move || {
                let (state, gate, turn, times) =
                    (worker_state, worker_gate, worker_turn, worker_times);
                while let Some((queued, job)) = rx.blocking_recv() {
                    drop(gate.read());
                    let _turn = turn.lock();
                    let start = Instant::now();
                    times.queue_wait.record(start - queued);
                    job(&state);
                    times.job.since(start);
                }
                // A write in place that began before shutdown took the
                // state ends before the backend closes, and so does a read
                // beside the worker (a std thread: outside any runtime).
                let _reads = worker_beside.blocking_write();
                let _turn = turn.lock();
                match state.backend.close() {
                    Err(e) => {
                        tracing::error!(partition = state.partition, error = %e, "closing vnode backend")
                    }
                    Ok(()) => state.mark_clean(),
                }
            })?;
        Ok(Vnode {
            tx: Mutex::new(Some(tx)),
            worker: Mutex::new(Some(worker)),
            state: Mutex::new(Some(state)),
            gate,
            overloads: std::sync::atomic::AtomicU64::new(0),
            reads_here: std::sync::atomic::AtomicU64::new(0),
            writes_here: std::sync::atomic::AtomicU64::new(0),
            turn,
            in_place_held: Arc::new(std::sync::atomic::AtomicUsize::new(0)),
            times,
            beside,
        })
    }

    /// Sends every request to the queue until the returned hold drops (a
    /// fault test stalling the worker stalls the vnode's reads and writes
    /// too).
    pub fn hold_in_place(&self) -> InPlaceHeld {
        self.in_place_held
            .fetch_add(1, std::sync::atomic::Ordering::AcqRel);
        InPlaceHeld(Arc::clone(&self.in_place_held))
    }

    /// The test gate's read guard if the vnode may serve a request on the
    /// caller's thread now: not paused, no hold ([`Vnode::hold_in_place`]).
    fn open_in_place(&self) -> Option<parking_lot::RwLockReadGuard<'_, ()>> {
        let open = self.gate.try_read()?;
        let held = self
            .in_place_held
            .load(std::sync::atomic::Ordering::Acquire);
        (held == 0).then_some(open)
    }

    /// Runs the read `f` on the caller's thread if the backend can answer
    /// it from memory (`f` returns `Some`: see [`Reads::get_cached`]);
    /// `None` otherwise, and the caller queues the read for the worker as
    /// usual.
    ///
    /// [`Reads::get_cached`]: basalt_backend::Reads::get_cached
    ///
    /// Reads may run beside the worker's jobs: a backend is `Sync`, and a
    /// read that overlaps a write sees the old or the new version, as it
    /// would if it were queued before or after it (a write is acknowledged
    /// only once the backend holds it, so a read that starts after the
    /// acknowledgement sees it). An error, a paused vnode (the test gate)
    /// and a vnode shutting down all go to the worker, which owns error
    /// handling, restarts and ordering with shutdown. `f` must not block:
    /// it runs on the node's async runtime.
    pub fn read_here<T>(
        &self,
        f: impl FnOnce(&VnodeState) -> Result<Option<T>, VnodeError>,
    ) -> Option<T> {
        let _open = self.open_in_place()?;
        let state = self.state.lock().clone()?;
        let t = f(&state).ok().flatten()?;
        self.reads_here
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(t)
    }

    /// The vnode's state for a HEAD or GET on another thread, beside the
    /// worker and its queue: a read that must wait for the disk need not
    /// wait behind the vnode's writes too (a synced write holds the worker
    /// for its fsync). As with [`Vnode::read_here`], a read that overlaps
    /// a write sees the old or the new version. `None` when the vnode
    /// serves nothing off its worker now (paused by the test gate, a
    /// [`Vnode::hold_in_place`], shutting down): the caller queues the
    /// read as usual. The worker closes the backend only once every
    /// [`Beside`] has dropped.
    pub fn beside(&self) -> Option<Beside> {
        let _gate = self.open_in_place()?;
        let open = Arc::clone(&self.beside).try_read_owned().ok()?;
        let state = self.state.lock().clone()?;
        Some(Beside {
            state,
            times: Arc::clone(&self.times),
            _open: open,
        })
    }

    /// Reads answered on the caller's thread ([`Vnode::read_here`]) since
    /// the vnode started.
    pub fn reads_here(&self) -> u64 {
        self.reads_here.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Runs the write `f` on the caller's thread, in the vnode's write
    /// turn, if the turn is free at once: `f` returns `None` when a step
    /// would wait (see [`Pace::InPlace`]; it has then written nothing), and
    /// so does this, and the caller queues the write for the worker as
    /// usual. A busy worker (its job holds the turn), a paused vnode (the
    /// test gate), a hold ([`Vnode::hold_in_place`]) and a vnode shutting
    /// down all mean `None` too.
    ///
    /// Writes in place and the worker's jobs never overlap, so a vnode's
    /// read-modify-writes stay atomic; a write in place may overtake
    /// writes still queued, as a write arriving a moment earlier would
    /// (requests that overlap have no order; a client's next write starts
    /// after its last was acknowledged). An error `f` meets after the
    /// backend took the write is the write's answer, as on the worker.
    pub fn write_here<T>(&self, f: impl FnOnce(&VnodeState) -> Option<T>) -> Option<T> {
        let _open = self.open_in_place()?;
        let _turn = self.turn.try_lock()?;
        let state = self.state.lock().clone()?;
        let start = Instant::now();
        let t = f(&state)?;
        self.times.write_here.since(start);
        self.writes_here
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        Some(t)
    }

    /// Its queue waits, job runs and writes in place, timed.
    pub fn times(&self) -> &VnodeTimes {
        &self.times
    }

    /// Writes made on the caller's thread ([`Vnode::write_here`]) since
    /// the vnode started.
    pub fn writes_here(&self) -> u64 {
        self.writes_here.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Runs `f` on the vnode and waits for its result; `Overload` if the
    /// queue is full.
    pub async fn call<T, F>(&self, timeout: Duration, f: F) -> Result<T, VnodeError>
    where
        T: Send + 'static,
        F: FnOnce(&VnodeState) -> Result<T, VnodeError> + Send + 'static,
    {
        self.submit(f)?.wait(timeout).await
    }

    /// Queues `f` without waiting; `Overload` if the queue is full.
    pub fn submit<T, F>(&self, f: F) -> Result<Pending<T>, VnodeError>
    where
        T: Send + 'static,
        F: FnOnce(&VnodeState) -> Result<T, VnodeError> + Send + 'static,
    {
        let tx = self.tx.lock().clone().ok_or(VnodeError::Closed)?;
        let (reply_tx, reply_rx) = oneshot::channel();
        let job: Job = (
            Instant::now(),
            Box::new(move |st| {
                let _ = reply_tx.send(f(st));
            }),
        );
        tx.try_send(job).map_err(|e| match e {
            mpsc::error::TrySendError::Full(_) => {
                self.overloads
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                VnodeError::Overload
            }
            mpsc::error::TrySendError::Closed(_) => VnodeError::Closed,
        })?;
        Ok(Pending { rx: reply_rx })
    }

    /// Jobs refused with `overload` (queue full) since the vnode started.
    pub fn overloads(&self) -> u64 {
        self.overloads.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Jobs waiting in the queue (0 once shut down).
    pub fn queue_len(&self) -> usize {
        self.tx
            .lock()
            .as_ref()
            .map_or(0, |tx| tx.max_capacity() - tx.capacity())
    }

    /// Closes the queue, lets the worker finish queued jobs, closes the
    /// backend and joins the worker.
    pub fn shutdown(&self) {
        self.state.lock().take();
        self.tx.lock().take();
        if let Some(w) = self.worker.lock().take() {
            if w.join().is_err() {
                tracing::error!("a vnode worker panicked");
            }
        }
    }
}

/// A queued job's result.
pub struct Pending<T> {
    rx: oneshot::Receiver<Result<T, VnodeError>>,
}

impl<T> Pending<T> {
    /// Waits up to `timeout` for the result.
    pub async fn wait(self, timeout: Duration) -> Result<T, VnodeError> {
        match tokio::time::timeout(timeout, self.rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(VnodeError::Closed),
            Err(_) => Err(VnodeError::Timeout),
        }
    }
}

/// True if the backend refused a write before writing anything: bad
/// input, or the disk guard's refusal on a nearly full disk (checked
/// before a write group is appended: `engine::diskspace`). A refused
/// write leaves the store, the vnode's events and its trees as they were,
/// so a disk that stays full for hours neither drops the trees nor keeps
/// their rebuild from completing. An `ENOSPC` from the file system itself
/// may come after part of a write, and is not a refusal.
fn refused_before_writing(e: &BackendError) -> bool {
    match e {
        BackendError::InvalidInput(_) | BackendError::NotSupported { .. } => true,
        BackendError::Io { source, .. } => {
            source.kind() == std::io::ErrorKind::StorageFull
                && source.to_string().contains(basalt_backends::DISK_FULL_MARK)
        }
        _ => false,
    }
}

/// True if `e` comes from a full disk (ENOSPC), here or, by its message,
/// on another node.
fn is_disk_full(e: &VnodeError) -> bool {
    const ENOSPC: &str = "No space left on device";
    match e {
        VnodeError::Backend(BackendError::Io { source, .. }) => {
            source.kind() == std::io::ErrorKind::StorageFull
        }
        VnodeError::Backend(BackendError::Closed(reason)) => reason.contains(ENOSPC),
        VnodeError::Remote(m) => m.contains(ENOSPC) || m.contains(basalt_backends::DISK_FULL_MARK),
        _ => false,
    }
}

impl From<VnodeError> for crate::error::RequestError {
    fn from(e: VnodeError) -> Self {
        match e {
            VnodeError::Overload => crate::error::RequestError::Overload,
            VnodeError::Timeout => crate::error::RequestError::Timeout,
            VnodeError::Backend(
                BackendError::NotSupported { .. } | BackendError::InvalidInput(_),
            ) => crate::error::RequestError::Invalid(e.to_string()),
            other if is_disk_full(&other) => {
                crate::error::RequestError::DiskFull(other.to_string())
            }
            other => crate::error::RequestError::Storage(other.to_string()),
        }
    }
}

/// The name a vnode's leveled store records for its 2i term source
/// (`basalt_engine::index::recalc`): the index entries of the stored Riak
/// object's metadata. Changing what it means needs a new name.
pub const INDEX_TERMS_SOURCE: &str = "riak-object 1";

/// Where a vnode's leveled store reads an object's whole 2i term set:
/// the index entries of the Riak object whose metadata it stores, the same
/// set [`VnodeState::write_paced`] diffs (deleted siblings carry none). With
/// it the store keeps no key deltas in its journal and rebuilds its index
/// entries from the objects.
pub fn index_terms() -> basalt_backends::IndexTerms {
    basalt_backends::IndexTerms::new(INDEX_TERMS_SOURCE, |meta| {
        RiakObject::decode_metadata(meta)
            .map(|o| o.index_entries())
            .map_err(|e| format!("Riak object metadata: {}", e.0))
    })
}

/// A vnode's state over a fresh `backend` in `dir`, for tests.
#[cfg(test)]
fn test_state(backend: &str, dir: &std::path::Path, sync: bool) -> VnodeState {
    test_state_with(backend, dir, sync, &Default::default())
}

/// [`test_state`] with the backend opened with `config`.
#[cfg(test)]
fn test_state_with(
    backend: &str,
    dir: &std::path::Path,
    sync: bool,
    config: &basalt_backends::BackendConfig,
) -> VnodeState {
    VnodeState {
        partition: 0,
        actor: b"a".to_vec(),
        backend: basalt_backends::open_backend(backend, dir, config)
            .unwrap_or_else(|e| panic!("{e}"))
            .into(),
        sync,
        incarnation: None,
        tainted: std::sync::atomic::AtomicBool::new(false),
        aae: None,
    }
}

#[cfg(test)]
mod beside_tests;
#[cfg(test)]
mod in_place_tests;

#[cfg(test)]
mod error_tests {
    use super::*;
    use crate::error::RequestError;
    use basalt_backends::DISK_FULL_MARK;

    #[test]
    fn a_full_disk_is_its_own_error() {
        let io = VnodeError::Backend(BackendError::Io {
            op: "append",
            path: "journal".into(),
            source: std::io::Error::from(std::io::ErrorKind::StorageFull),
        });
        assert!(matches!(RequestError::from(io), RequestError::DiskFull(_)));
        let guard = VnodeError::Remote(format!("admit write {}: ...", DISK_FULL_MARK));
        assert!(matches!(
            RequestError::from(guard),
            RequestError::DiskFull(_)
        ));
        let remote = VnodeError::Remote("append: No space left on device (os error 28)".into());
        assert!(matches!(
            RequestError::from(remote),
            RequestError::DiskFull(_)
        ));
        let other = VnodeError::Remote("connection lost".into());
        assert!(matches!(
            RequestError::from(other),
            RequestError::Storage(_)
        ));
        assert!(RequestError::DiskFull("x".into())
            .to_string()
            .starts_with("disk full"));
    }

    /// `st` keeping anti-entropy trees (`trees`: already built) on a ring
    /// of 8.
    fn with_aae(mut st: VnodeState, trees: Option<aae_tree::AaeTrees>) -> VnodeState {
        let ring = crate::ring::Ring::new(8).unwrap_or_else(|| panic!("ring 8"));
        let size = basalt_backend::TreeSize::XXSmall;
        st.aae = Some(VnodeAae::new(
            ring,
            size,
            Arc::new(|_: &[u8]| 3),
            trees,
            false,
        ));
        st
    }

    /// The disk guard's refusal wrote nothing: the trees and a rebuild of
    /// them stay, and the vnode is not tainted (a disk full for hours
    /// kept every rebuild from completing: each refused write dropped
    /// it). An `ENOSPC` from the file system drops both and taints.
    #[test]
    fn a_refused_write_keeps_the_trees_a_failed_one_drops_them() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let trees = aae_tree::AaeTrees::new(basalt_backend::TreeSize::XXSmall);
        let st = with_aae(test_state("leveled", dir.path(), false), Some(trees));
        st.aae_rebuild_start(false)
            .unwrap_or_else(|e| panic!("{e}"));
        let aae = st.aae.as_ref().unwrap_or_else(|| panic!("aae"));
        let refusal = BackendError::io(
            "admit write",
            "journal",
            std::io::Error::new(
                std::io::ErrorKind::StorageFull,
                format!("{DISK_FULL_MARK}: 10 bytes free"),
            ),
        );
        assert!(refused_before_writing(&refusal));
        st.write_failed(&refusal);
        assert!(aae.trees.lock().is_some() && aae.rebuild.lock().is_some());
        assert!(!st.tainted.load(std::sync::atomic::Ordering::Relaxed));
        let enospc = BackendError::io(
            "append",
            "journal",
            std::io::Error::from(std::io::ErrorKind::StorageFull),
        );
        assert!(!refused_before_writing(&enospc));
        st.write_failed(&enospc);
        assert!(aae.trees.lock().is_none() && aae.rebuild.lock().is_none());
        assert!(st.tainted.load(std::sync::atomic::Ordering::Relaxed));
        let e = st
            .aae_rebuild_step(10, 1)
            .err()
            .unwrap_or_else(|| panic!("a dropped rebuild"));
        assert!(
            e.to_string()
                .contains("no anti-entropy rebuild in progress"),
            "{e}"
        );
    }

    /// A step queued again behind one that completed the rebuild finds it
    /// done (the rebuild's caller retries a step that timed out).
    #[test]
    fn a_step_behind_the_last_finds_the_rebuild_done() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let st = with_aae(test_state("leveled", dir.path(), false), None);
        let obj = crate::object::RiakObject {
            vclock: Default::default(),
            contents: vec![crate::object::Content {
                value: b"v".to_vec(),
                value_len: 1,
                ..Default::default()
            }],
        };
        for k in [b"k1", b"k2", b"k3"] {
            st.write(b"b", k, None, &obj)
                .unwrap_or_else(|e| panic!("{e}"));
        }
        st.aae_rebuild_start(false)
            .unwrap_or_else(|e| panic!("{e}"));
        let done = st
            .aae_rebuild_step(100, 7)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            done.done && done.keys == 3 && done.total_keys == 3,
            "{done:?}"
        );
        let again = st
            .aae_rebuild_step(100, 8)
            .unwrap_or_else(|e| panic!("{e}"));
        assert!(
            again.done && again.keys == 0 && again.total_keys == 3,
            "{again:?}"
        );
        st.aae_rebuild_start(false)
            .unwrap_or_else(|e| panic!("{e}"));
        let fresh = st.aae_rebuild_step(1, 9).unwrap_or_else(|e| panic!("{e}"));
        assert!(
            !fresh.done && fresh.keys == 1,
            "a new rebuild starts over: {fresh:?}"
        );
    }
}

#[cfg(test)]
mod index_terms_tests;
