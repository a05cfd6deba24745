//! Where a request goes and the call itself: the [`Router`] owns the ring,
//! the cluster view and the table of local vnodes. It answers a key's
//! vnodes ([`apl`]: primaries, or fallbacks for primaries whose node is
//! down) and covering sets ([`coverage`]), and runs a [`VnodeReq`] on the
//! local vnode (opened on first use, reopened when its backend closed
//! itself) or sends it to the node that holds it. It knows nothing of
//! quorums or bucket semantics: those are the request FSMs' ([`crate::kv`]).

pub mod apl;
pub mod coverage;
mod inflight;
mod reads;

use crate::cluster::transport::PeerError;
use crate::cluster::{Cluster, HandoffKind, Msg, Reply, WireError};
use crate::config::Config;
use crate::ring::{actor, Ring};
use crate::vnode::request::{Obj, VnodeReply, VnodeReq};
use crate::vnode::{NValOf, Vnode, VnodeAae, VnodeError, VnodeState};
use futures_util::stream::FuturesUnordered;
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, Instant};

/// The ledger memtable of each vnode's store: 8 MiB, not the engine's
/// 32 MiB default (4 MiB until 2026-12-02, when an entry's count grew to
/// its measured memory). A node opens one store per partition it holds (64
/// on a one-node ring); their memtables together are bounded by the node's
/// `memtable_mb` budget, under which a vnode that writes flushes early.
/// Each vnode's ledger holds only its share of the keys, small enough that
/// its L0 merges rewrite little.
pub const VNODE_MEMTABLE_BYTES: u64 = 8 << 20;

/// The write buffer of each RocksDB vnode: 4 MiB, two of them. RocksDB
/// counts its buffers by their arena's real size, and a node's RocksDB
/// vnodes have no shared budget (`memtable_mb` is leveled's), so this
/// stays what leveled's memtable held before it was counted truthfully.
pub const ROCKS_VNODE_WRITE_BUFFER_BYTES: u64 = 4 << 20;

pub use apl::Target;

/// One call of a fan-out: the target and its reply.
pub(crate) type FanOutFuture<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = (Target, Result<VnodeReply, VnodeError>)> + Send + 'a>,
>;
/// The calls of a fan-out, replies as they come.
pub(crate) type FanOut<'a> = FuturesUnordered<FanOutFuture<'a>>;

/// The ring, the cluster view and the local vnodes; see the module docs.
pub struct Router {
    pub(crate) config: Arc<Config>,
    pub(crate) ring: Ring,
    pub(crate) cluster: Cluster,
    pub(crate) vnodes: RwLock<BTreeMap<u32, Arc<Vnode>>>,
    /// Held for writing to pause every vnode worker before its next job.
    pub(crate) gate: Arc<RwLock<()>>,
    closing: AtomicBool,
    restarts: Mutex<HashMap<u32, Instant>>,
    /// Set once calls may run as their own tasks (under a server).
    this: OnceLock<Weak<Router>>,
    /// A bucket's `n_val`, for the vnodes' anti-entropy trees.
    n_val_of: NValOf,
    /// Copies of partitions held here for another owner that the vnode
    /// table does not show, by partition (a count of [`Held`] guards): a
    /// vnode being dropped after its hinted handoff, and a write to a
    /// partition this node does not own, from the write until its forward
    /// answered. A tombstone reap waits while any is held ([`Self::held()`]).
    held: Mutex<BTreeMap<u32, usize>>,
    /// Partitions whose vnode is being dropped, by partition (a count of
    /// [`Held`] guards, so that an overlapping guard outlives the other's
    /// end): not reopened meanwhile (its directory is about to be deleted).
    dropping: Mutex<BTreeMap<u32, usize>>,
    /// The leveled block cache every local vnode shares (`block_cache_mb`).
    block_cache: Option<basalt_backends::BlockCache>,
    /// The leveled memtable budget every local vnode shares (`memtable_mb`).
    memtable_budget: Option<basalt_backends::MemtableBudget>,
    /// The leveled value cache every local vnode shares (`value_cache_mb`).
    value_cache: Option<basalt_backends::ValueCache>,
    /// The pace every local leveled vnode's writes share while the data
    /// directory's disk is low (one disk, one floor: `engine::diskpace`).
    disk_pace: basalt_backends::DiskPace,
    /// The leveled vnodes' journal compaction runs at once
    /// (`journal_compactions_at_once`).
    compaction_slots: basalt_backends::CompactionSlots,
    /// The RocksDB block cache every local vnode shares (`block_cache_mb`,
    /// rocksdb backends only).
    rocks_cache: Option<basalt_backends::RocksBlockCache>,
    /// Fan-out calls running as tasks of their own ([`CallInFlight`]); a
    /// shutdown waits for them ([`Self::drain_calls`]).
    calls_in_flight: AtomicUsize,
    /// Bytes of the objects that the fan-out write calls in flight carry
    /// ([`VnodeReq::payload_bytes`]), the ones a coordinator left behind at
    /// its quorum included: what `limits.replica_writes_in_flight_mb`
    /// bounds ([`Self::write_bytes_in_flight`]).
    write_bytes: inflight::WriteBytes,
    /// Read threads free beside the vnodes' workers (`read_threads`; see
    /// [`reads`]).
    read_threads: Arc<tokio::sync::Semaphore>,
}

/// Counts one fan-out call as running while it lives, and the bytes of
/// the object a write call carries.
struct CallInFlight(Arc<Router>, u64);

impl CallInFlight {
    fn start(router: Arc<Router>, req: &VnodeReq) -> CallInFlight {
        router.calls_in_flight.fetch_add(1, Ordering::AcqRel);
        let bytes = req.payload_bytes(); // 0 for a read
        router.write_bytes.add(bytes);
        CallInFlight(router, bytes)
    }
}

impl Drop for CallInFlight {
    fn drop(&mut self) {
        let before = self.0.calls_in_flight.fetch_sub(1, Ordering::AcqRel);
        debug_assert!(before > 0, "calls in flight went below zero");
        self.0.write_bytes.sub(self.1);
    }
}

/// A copy of a partition held here for another owner while this guard
/// lives; see [`Router::hold`].
pub(crate) struct Held<'a> {
    router: &'a Router,
    partition: u32,
    dropping: bool,
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if self.dropping {
            release(&mut self.router.dropping.lock(), self.partition, "dropping");
        }
        release(&mut self.router.held.lock(), self.partition, "held");
    }
}

/// Takes one guard of `p` off a count of guards by partition.
fn release(counts: &mut BTreeMap<u32, usize>, p: u32, what: &str) {
    if let Some(n) = counts.get_mut(&p) {
        debug_assert!(*n > 0, "{what} count of partition {p}");
        *n -= 1;
        if *n == 0 {
            counts.remove(&p);
        }
    }
}

pub use crate::limits::VNODE_RESTART_EVERY;

impl From<PeerError> for VnodeError {
    fn from(e: PeerError) -> Self {
        match e {
            PeerError::Timeout(_) => VnodeError::Timeout,
            PeerError::Overload(_) => VnodeError::Overload,
            other => VnodeError::Remote(other.to_string()),
        }
    }
}

impl From<WireError> for VnodeError {
    fn from(e: WireError) -> Self {
        match e {
            WireError::Overload => VnodeError::Overload,
            WireError::Timeout => VnodeError::Timeout,
            WireError::Other(m) => VnodeError::Remote(m),
        }
    }
}

fn wire(e: VnodeError) -> WireError {
    match e {
        VnodeError::Overload => WireError::Overload,
        VnodeError::Timeout => WireError::Timeout,
        other => WireError::Other(other.to_string()),
    }
}

/// Bytes in `n` MiB (the config's cache, budget and file sizes).
fn mib(n: u64) -> u64 {
    n.saturating_mul(1024 * 1024)
}

impl Router {
    /// A router with no vnodes open yet.
    pub fn new(config: Arc<Config>, ring: Ring, cluster: Cluster, n_val_of: NValOf) -> Arc<Router> {
        let block_cache = basalt_backends::BlockCache::new(mib(config.block_cache_mb));
        let compaction_slots =
            basalt_backends::CompactionSlots::new(config.journal_compactions_at_once);
        let value_cache = basalt_backends::ValueCache::new(mib(config.value_cache_mb));
        let memtable_budget = usize::try_from(mib(config.memtable_mb))
            .ok()
            .and_then(basalt_backends::MemtableBudget::new);
        let rocks_cache = if config.backend.starts_with("rocksdb") && config.block_cache_mb > 0 {
            basalt_backends::RocksBlockCache::new(mib(config.block_cache_mb))
        } else {
            None
        };
        Arc::new(Router {
            ring,
            cluster,
            vnodes: RwLock::new(BTreeMap::new()),
            gate: Arc::new(RwLock::new(())),
            closing: AtomicBool::new(false),
            restarts: Mutex::new(HashMap::new()),
            this: OnceLock::new(),
            held: Mutex::new(BTreeMap::new()),
            dropping: Mutex::new(BTreeMap::new()),
            block_cache,
            memtable_budget,
            value_cache,
            disk_pace: basalt_backends::DiskPace::new(),
            compaction_slots,
            rocks_cache,
            calls_in_flight: AtomicUsize::new(0),
            write_bytes: inflight::WriteBytes::default(),
            read_threads: Arc::new(tokio::sync::Semaphore::new(config.read_threads)),
            n_val_of,
            config,
        })
    }

    /// Marks a copy of `p` as held here for another owner until the guard
    /// drops (a write to a partition this node does not own, with its
    /// forward).
    pub(crate) fn hold(&self, p: u32) -> Held<'_> {
        *self.held.lock().entry(p).or_insert(0) += 1;
        Held {
            router: self,
            partition: p,
            dropping: false,
        }
    }

    /// [`Self::hold`] for a vnode being dropped after its handoff: until
    /// the guard drops, `p` is not reopened here ([`Self::local_vnode`]
    /// refuses it).
    pub(crate) fn hold_dropping(&self, p: u32) -> Held<'_> {
        let mut g = self.hold(p);
        *self.dropping.lock().entry(p).or_insert(0) += 1;
        g.dropping = true;
        g
    }

    /// Those of `partitions` held here through a [`Held`] guard.
    pub(crate) fn held(&self, partitions: &[u32]) -> Vec<u32> {
        let held = self.held.lock();
        partitions
            .iter()
            .copied()
            .filter(|p| held.contains_key(p))
            .collect()
    }

    /// From now on each call of a fan-out runs as its own task, so calls
    /// still running when the caller stops waiting (quorum reached) finish
    /// anyway. Needs a tokio runtime; set by the server.
    pub fn spawn_calls(self: &Arc<Self>) {
        let _ = self.this.set(Arc::downgrade(self));
    }

    /// The local vnodes, by partition (a snapshot of the table).
    pub fn local_vnodes(&self) -> Vec<(u32, Arc<Vnode>)> {
        self.vnodes
            .read()
            .iter()
            .map(|(p, v)| (*p, v.clone()))
            .collect()
    }

    /// Whether partition `p` has an open vnode here (opens none).
    pub fn has_local_vnode(&self, p: u32) -> bool {
        self.vnodes.read().contains_key(&p)
    }

    /// The request timeout (`limits.request_timeout_ms`).
    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_millis(self.config.limits.request_timeout_ms)
    }

    /// Bytes of the objects the fan-out write calls now in flight carry
    /// (sent to a vnode here or on a peer, not yet answered): each
    /// replica's copy counts, since each is queued, encoded or served
    /// apart.
    pub(crate) fn write_bytes_in_flight(&self) -> u64 {
        self.write_bytes.get()
    }

    /// Waits until the write calls in flight carry at most `limit` bytes
    /// ([`Self::write_bytes_in_flight`]), or `timeout` has passed; whether
    /// they do.
    pub(crate) async fn wait_for_write_bytes_under(&self, limit: u64, timeout: Duration) -> bool {
        self.write_bytes.wait_under(limit, timeout).await
    }

    /// Waits until no fan-out call started as a task of its own is running
    /// (the replica calls a coordinator left behind at its quorum), or
    /// `limit` has passed; the number still running.
    pub(crate) async fn drain_calls(&self, limit: Duration) -> usize {
        let deadline = Instant::now() + limit;
        loop {
            let n = self.calls_in_flight.load(Ordering::Acquire);
            if n == 0 || Instant::now() >= deadline {
                return n;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// Stops every local vnode (queued jobs finish) and closes the backends;
    /// no vnode is reopened after this.
    pub fn close(&self) {
        self.closing.store(true, Ordering::Release);
        let all: Vec<Arc<Vnode>> = self.vnodes.read().values().cloned().collect();
        for v in all {
            v.shutdown();
        }
    }

    /// Sends `req` to each target at once; the replies as they come. When
    /// the node runs under a server, each call is its own task, so calls
    /// still running when the caller stops waiting (quorum reached) finish
    /// anyway.
    pub(crate) fn fan_out<'a>(
        &'a self,
        targets: &[Target],
        req: impl Fn() -> VnodeReq,
    ) -> FanOut<'a> {
        self.fan_out_with(targets, req, None)
    }

    /// [`Self::fan_out`]; with `sloppy` = (key hash, n), a write whose
    /// primary turns out unreachable is retried on that partition's
    /// fallback, even after the caller stopped waiting.
    pub(crate) fn fan_out_with<'a>(
        &'a self,
        targets: &[Target],
        req: impl Fn() -> VnodeReq,
        sloppy: Option<([u8; 20], u32)>,
    ) -> FanOut<'a> {
        self.fan_out_vec(targets, req, sloppy).into_iter().collect()
    }

    /// The calls of [`Self::fan_out_with`], in `targets` order.
    pub(crate) fn fan_out_vec<'a>(
        &'a self,
        targets: &[Target],
        req: impl Fn() -> VnodeReq,
        sloppy: Option<([u8; 20], u32)>,
    ) -> Vec<FanOutFuture<'a>> {
        self.fan_out_each(targets, |_| req(), sloppy)
    }

    /// [`Self::fan_out_vec`] with a request per target: `req(i)` for
    /// `targets[i]` (a GET asks one replica for the value and the others
    /// for the metadata only).
    pub(crate) fn fan_out_each<'a>(
        &'a self,
        targets: &[Target],
        req: impl Fn(usize) -> VnodeReq,
        sloppy: Option<([u8; 20], u32)>,
    ) -> Vec<FanOutFuture<'a>> {
        let this = self.this.get().and_then(Weak::upgrade);
        let me = self.cluster.me();
        targets
            .iter()
            .enumerate()
            .map(|(i, t)| {
                let (t, r) = (t.clone(), req(i));
                // A read of a local vnode runs in the caller's task: once
                // queued, its job runs whether or not the caller still
                // waits, and nothing follows it (a write may be forwarded
                // during handoff after its reply), so a task of its own
                // would only cost a spawn and a hop.
                let inline = !r.is_write() && t.node == me;
                let f: FanOutFuture<'a> = match &this {
                    Some(router) if !inline => {
                        let (call, t2) = (CallInFlight::start(router.clone(), &r), t.clone());
                        let mut call: std::pin::Pin<
                            Box<dyn std::future::Future<Output = _> + Send>,
                        > = Box::pin(async move { call.0.vcall_sloppy(&t2, r, sloppy).await });
                        // A local write starts here, before the caller
                        // waits for anything: made in place, or queued to
                        // its vnode ahead of whatever the client sends
                        // after its reply (a spawned task could run after
                        // that, behind the caller's next request). Only
                        // what is left to wait for is spawned.
                        if t.node == me {
                            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
                            if let std::task::Poll::Ready(res) = call.as_mut().poll(&mut cx) {
                                return Box::pin(std::future::ready((t, res))) as FanOutFuture<'a>;
                            }
                        }
                        let h = tokio::spawn(call);
                        Box::pin(async move {
                            let res = h
                                .await
                                .unwrap_or_else(|e| Err(VnodeError::Remote(format!("task: {e}"))));
                            (t, res)
                        })
                    }
                    _ => {
                        // Counted for the shutdown drain like a spawned call
                        // (a node stopping waits for it too).
                        let call = this
                            .as_ref()
                            .map(|router| CallInFlight::start(router.clone(), &r));
                        Box::pin(async move {
                            let res = self.vcall_sloppy(&t, r, sloppy).await;
                            drop(call);
                            (t, res)
                        })
                    }
                };
                f
            })
            .collect()
    }
}

impl Router {
    /// The local vnode of `p`, opened (its backend under
    /// `<data_dir>/vnodes/<p>`) on first use.
    pub(crate) fn local_vnode(&self, p: u32) -> Result<Arc<Vnode>, VnodeError> {
        if p >= self.ring.size() {
            return Err(VnodeError::Remote(format!("no partition {p}")));
        }
        if let Some(v) = self.vnodes.read().get(&p) {
            return Ok(v.clone());
        }
        let mut all = self.vnodes.write();
        if let Some(v) = all.get(&p) {
            return Ok(v.clone());
        }
        if self.dropping.lock().contains_key(&p) {
            return Err(VnodeError::Remote(format!(
                "partition {p} is being deleted here after its handoff; not reopened until that ends"
            )));
        }
        let v = Arc::new(self.open_vnode(p)?);
        all.insert(p, v.clone());
        Ok(v)
    }

    pub(crate) fn open_vnode(&self, p: u32) -> Result<Vnode, VnodeError> {
        let dir = self.config.data_dir.join("vnodes").join(p.to_string());
        let bcfg = basalt_backends::BackendConfig {
            sync: self.config.sync,
            memtable_bytes: Some(VNODE_MEMTABLE_BYTES),
            block_cache_bytes: Some(0),
            block_cache: self.block_cache.clone(),
            memtable_budget: self.memtable_budget.clone(),
            disk_pace: Some(self.disk_pace.clone()),
            compaction_slots: Some(self.compaction_slots.clone()),
            index_terms: Some(crate::vnode::index_terms()),
            compaction_max_garbage_pct: Some(f64::from(self.config.journal_max_garbage_pct)),
            value_cache_bytes: Some(0),
            value_cache: self.value_cache.clone(),
            // Reserving a whole journal file (and its spare) ahead would
            // hold 256-512 MiB of disk per vnode, 16-32 GiB on an empty
            // one-node ring; until the reservation is made in steps as the
            // file grows, vnodes allocate as they append.
            journal_preallocate: Some(false),
            journal_file_bytes: Some(self.config.vnode_journal_file_bytes(p)),
            l0_merge_trigger: Some(self.config.l0_merge_trigger),
            // A ledger flush per journal file at least: journal compaction
            // keeps what the ledger has not persisted, and a vnode whose
            // keys are few and overwritten never fills its memtable.
            memtable_journal_bytes: Some(self.config.vnode_journal_file_bytes(p)),
            // RocksDB vnodes: 4 MiB write buffers and one block cache for
            // the node (`block_cache_mb`), not 2 x 32 MiB of write buffers
            // and a 32 MiB cache per vnode, which would need ~2 GiB for the
            // 21 vnodes of a node of 3 on a 64 ring.
            rocksdb: basalt_backends::RocksTuning {
                write_buffer_bytes: ROCKS_VNODE_WRITE_BUFFER_BYTES,
                ..Default::default()
            },
            rocksdb_block_cache: self.rocks_cache.clone(),
            ..Default::default()
        };
        let size = self
            .config
            .aae_tree_size()
            .map_err(|e| VnodeError::Remote(e.0))?;
        // The status file is written only once the backend opened: a backend
        // that refuses (a newer format) leaves the vnode's files as they were.
        let status_err =
            |e: std::io::Error| VnodeError::Remote(format!("vnode {p} status file: {e}"));
        let incarnation = crate::vnode::id::next(&dir).map_err(status_err)?;
        let backend = basalt_backends::open_backend(&self.config.backend, &dir, &bcfg)?.into();
        crate::vnode::id::mark_open(&dir, incarnation).map_err(status_err)?;
        let state = VnodeState {
            partition: p,
            actor: actor(&self.config.node_name, p, incarnation),
            backend,
            sync: self.config.sync,
            aae: Some(VnodeAae::new(
                self.ring,
                size,
                self.n_val_of.clone(),
                crate::vnode::aae_tree::take(&dir, size),
                self.config.aae_rebuild_journal_check,
            )),
            incarnation: Some((dir, incarnation)),
            tainted: std::sync::atomic::AtomicBool::new(false),
        };
        Vnode::start(state, self.config.limits.vnode_queue_len, self.gate.clone())
            .map_err(|e| VnodeError::Remote(format!("starting vnode {p}: {e}")))
    }

    /// Runs `req` on the local vnode of `p`. A write to a vnode being handed
    /// off is forwarded to the receiving node too; a request for a vnode
    /// being dropped after its handoff is forwarded to the node that now
    /// holds the partition ([`Self::dropped_to`]).
    pub(crate) async fn local_call(&self, p: u32, req: VnodeReq) -> Result<VnodeReply, VnodeError> {
        self.local_call_at(p, req, true).await
    }

    /// [`Self::local_call`]; `may_forward` false for a request another node
    /// already forwarded here (a request is forwarded at most once).
    async fn local_call_at(
        &self,
        p: u32,
        req: VnodeReq,
        may_forward: bool,
    ) -> Result<VnodeReply, VnodeError> {
        let write = req.is_write();
        // A write to a copy held for another owner (a fallback) is held
        // until it and its forward are done: the copy's handoff may be
        // finishing meanwhile, and a reap must not run in between.
        let me = self.cluster.me();
        let not_owner = self.cluster.with_state(|s| s.owner(p) != me);
        let _held = (write && not_owner).then(|| self.hold(p));
        // This node's ownership handoff of `p` is done and the ring has
        // moved: the vnode here only waits to be dropped (a handoff round
        // away), and the new owner holds everything it held and all since;
        // answering from here could miss writes made since the move. If
        // the new owner is down, the copy here serves as its fallback (as
        // before the handoff; what it takes is handed off again).
        if let Some(to) = not_owner
            .then(|| self.handed_off_to(p))
            .flatten()
            .filter(|to| may_forward && self.cluster.is_up(to))
        {
            return self.remote_call(&to, p, true, true, req).await;
        }
        let v = match self.local_vnode(p) {
            Ok(v) => v,
            // Riak's forwarding vnode (`riak_core_vnode`'s `forward` after
            // a handoff): a sender whose ring is a gossip behind, or a
            // coverage plan made just before the transfer, still names
            // this node; the partition is whole where it went.
            Err(e) => match self
                .dropped_to(p)
                .filter(|to| may_forward && self.cluster.is_up(to))
            {
                Some(to) => {
                    tracing::debug!(partition = p, %to, "request for a dropped vnode forwarded");
                    return self.remote_call(&to, p, true, true, req).await;
                }
                None => return Err(e),
            },
        };
        let qlen = v.queue_len() as u32;
        // A HEAD or GET the backend can answer from memory is answered
        // here, on the request's own task: no hop to the worker's thread
        // and back (`reads_in_request_task`).
        if self.config.reads_in_request_task {
            if let Some(reply) = v.read_here(|st| st.execute_cached(&req, qlen)) {
                return Ok(reply);
            }
        }
        // One that must wait for the disk runs beside the worker's queue
        // when a read thread is free (`read_threads`).
        if let Some(reply) = self.read_beside(&v, &req, qlen).await {
            return reply;
        }
        let queued_read = req.is_point_read().then(std::time::Instant::now);
        let props = match &req {
            VnodeReq::Coordinate { props, .. }
            | VnodeReq::Reconcile { props, .. }
            | VnodeReq::CoordinateCrdt { props, .. } => Some(props.clone()),
            _ => None,
        };
        let bk = match &req {
            VnodeReq::Coordinate { bucket, key, .. }
            | VnodeReq::Reconcile { bucket, key, .. }
            | VnodeReq::CoordinateCrdt { bucket, key, .. } => Some((bucket.clone(), key.clone())),
            _ => None,
        };
        // Reads are cheap to keep for a retry; writes (which carry values)
        // are not cloned on this hot path: a write that meets a closed
        // backend fails as a replica, and the vnode is reopened for the next.
        let retry = (!write).then(|| req.clone());
        // A write the backend can make at memory speed is made here too,
        // in the vnode's write turn (`writes_in_request_task`); one that
        // might wait, or a busy worker, queues as before.
        let in_place = (write && self.config.writes_in_request_task)
            .then(|| v.write_here(|st| st.execute_in_place(&req)))
            .flatten();
        let ran = match in_place {
            Some(r) => r,
            None => {
                let ran = v
                    .submit(move |st| st.execute(req, qlen))?
                    .wait(self.timeout())
                    .await;
                if let Some(start) = queued_read {
                    v.times().read_queued.since(start);
                }
                ran
            }
        };
        let reply = match ran {
            // The backend gave up (e.g. a journal write failed on a full
            // disk): reopen the vnode — recovery checks what is on disk —
            // and run the request once more.
            Err(VnodeError::Backend(basalt_backend::BackendError::Closed(reason)))
                if self.restart_vnode(p, &v, &reason) =>
            {
                let Some(retry) = retry else {
                    return Err(VnodeError::Remote(format!(
                        "vnode {p} was reopened after its backend closed ({reason}); write not applied"
                    )));
                };
                let v = self.local_vnode(p)?;
                v.submit(move |st| st.execute(retry, 0))?
                    .wait(self.timeout())
                    .await?
            }
            r => r?,
        };
        if write {
            if let (VnodeReply::Written(Some(obj)), Some((bucket, key)), Some(props)) =
                (&reply, bk, props)
            {
                if !self
                    .forward_during_handoff(p, &v, bucket, key, obj.clone(), props)
                    .await
                {
                    return Err(VnodeError::Remote(format!(
                        "partition {p}: the write reached a vnode that was being deleted after its handoff, and could not be forwarded"
                    )));
                }
            }
        }
        Ok(reply)
    }

    /// Forwards a write that `v` (the local vnode of `p`) took to the node
    /// it hands off to. A vnode that handoff has already removed from the
    /// vnode table (its data is about to be deleted) forwards to the
    /// handoff target, or else to the partition's owner, even when the
    /// handoff's record is gone. False if such a write could not be
    /// forwarded: it must not count as a replica.
    async fn forward_during_handoff(
        &self,
        p: u32,
        v: &Arc<Vnode>,
        bucket: Vec<u8>,
        key: Vec<u8>,
        object: Obj,
        props: crate::bucket::props::BucketProps,
    ) -> bool {
        let dropping = !self
            .vnodes
            .read()
            .get(&p)
            .is_some_and(|cur| Arc::ptr_eq(cur, v));
        let handoff = self
            .cluster
            .with_handoffs(|h| h.get(&p).map(|h| h.target.clone()));
        let me = self.cluster.me().to_string();
        let target = match handoff {
            Some(t) => t,
            None if dropping => {
                let owner = self.cluster.with_state(|s| s.owner(p).to_string());
                if owner == me {
                    return true; // reopened here; nothing to forward
                }
                owner
            }
            None => return true,
        };
        let msg = Msg::Vnode {
            partition: p,
            primary: false,
            forwarded: true,
            req: VnodeReq::Reconcile {
                bucket,
                key,
                object,
                props,
            },
        };
        let ok = matches!(
            self.cluster.call(&target, &msg, self.timeout()).await,
            Ok(Reply::Vnode(Ok(_)))
        );
        if !ok {
            tracing::warn!(partition = p, %target, "forwarding a write during handoff failed; another pass will follow");
            self.cluster.with_handoffs(|h| {
                if let Some(h) = h.get_mut(&p) {
                    h.dirty = true;
                }
            });
        }
        // A vnode being dropped may already have been judged clean and be
        // gone with this write: then only a forwarded copy counts.
        ok || !dropping
    }

    /// Replaces the local vnode `v` of `p` (its backend closed itself after
    /// a failure) with a freshly opened one, at most once per
    /// [`VNODE_RESTART_EVERY`] per partition and never while the node
    /// closes; true if a working vnode is now in place.
    fn restart_vnode(&self, p: u32, v: &Arc<Vnode>, reason: &str) -> bool {
        if self.closing.load(Ordering::Acquire) {
            return false;
        }
        {
            let mut last = self.restarts.lock();
            if last
                .get(&p)
                .is_some_and(|t| t.elapsed() < VNODE_RESTART_EVERY)
            {
                return false;
            }
            last.insert(p, std::time::Instant::now());
        }
        let mut all = self.vnodes.write();
        if !all.get(&p).is_some_and(|cur| Arc::ptr_eq(cur, v)) {
            return true; // another request restarted it already
        }
        tracing::warn!(
            partition = p,
            reason,
            "vnode backend closed itself; reopening it"
        );
        // The table stays locked from shutdown to reopen (as `local_vnode`
        // opens under it): a request in between would open a second
        // backend on the directory the old one still locks. The old
        // backend is closed, so its queued jobs fail fast and the join is
        // short.
        all.remove(&p);
        v.shutdown();
        // The backend failed: it may have lost writes this vnode already
        // stamped, so the reopened vnode must not reuse its actor.
        let dir = self.config.data_dir.join("vnodes").join(p.to_string());
        if let Err(e) = crate::vnode::id::remove(&dir) {
            tracing::error!(partition = p, error = %e, "resetting the vnode's incarnation");
            return false;
        }
        if let Err(e) = crate::vnode::aae_tree::remove(&dir) {
            tracing::warn!(partition = p, error = %e, "removing the vnode's anti-entropy trees");
        }
        match self.open_vnode(p) {
            Ok(fresh) => {
                all.insert(p, Arc::new(fresh));
                true
            }
            Err(e) => {
                tracing::error!(partition = p, error = %e, "reopening a vnode failed; it opens again on next use");
                false
            }
        }
    }

    /// Test hook: closes the backend of the local vnode of `p` as a failed
    /// journal write would (requests then meet `closed`).
    #[doc(hidden)]
    pub async fn fault_close_vnode_backend(&self, p: u32) -> Result<(), VnodeError> {
        let v = self.local_vnode(p)?;
        v.submit(|st| Ok(st.backend.close()?))?
            .wait(self.timeout())
            .await
    }

    /// Test hook: holds the worker of the local vnode of `p` for `d` (a
    /// slow disk), without waiting for it; requests queue behind it (reads
    /// and writes too: none is served on its request's task meanwhile).
    #[doc(hidden)]
    pub fn fault_stall_vnode(&self, p: u32, d: std::time::Duration) -> Result<(), VnodeError> {
        let v = self.local_vnode(p)?;
        let held = v.hold_in_place();
        drop(v.submit(move |_| {
            std::thread::sleep(d);
            drop(held);
            Ok(())
        })?);
        Ok(())
    }

    /// Runs `req` on the vnode `t` (local or remote).
    pub async fn vcall(&self, t: &Target, req: VnodeReq) -> Result<VnodeReply, VnodeError> {
        if t.node == self.cluster.me() {
            return self.local_call(t.partition, req).await;
        }
        self.remote_call(&t.node, t.partition, t.primary, false, req)
            .await
    }

    /// Sends `req` for the vnode of `p` to `node`.
    async fn remote_call(
        &self,
        node: &str,
        p: u32,
        primary: bool,
        forwarded: bool,
        req: VnodeReq,
    ) -> Result<VnodeReply, VnodeError> {
        let msg = Msg::Vnode {
            partition: p,
            primary,
            forwarded,
            req,
        };
        match self.cluster.call(node, &msg, self.timeout()).await? {
            Reply::Vnode(r) => Ok(r?),
            other => Err(VnodeError::Remote(format!("unexpected reply {other:?}"))),
        }
    }

    /// Where a request for `p` goes while its local vnode is being dropped
    /// after a handoff: the handoff's target, or else the partition's
    /// owner; `None` if `p` is not being dropped here or that is this node.
    fn dropped_to(&self, p: u32) -> Option<String> {
        if !self.dropping.lock().contains_key(&p) {
            return None;
        }
        let to = self
            .cluster
            .with_handoffs(|h| h.get(&p).map(|h| h.target.clone()))
            .unwrap_or_else(|| self.cluster.with_state(|s| s.owner(p).to_string()));
        (to != self.cluster.me()).then_some(to)
    }

    /// The new owner of `p` if this node's ownership handoff of `p` has
    /// finished (its vnode waits to be dropped).
    fn handed_off_to(&self, p: u32) -> Option<String> {
        self.cluster.with_handoffs(|h| {
            h.get(&p)
                .filter(|h| h.kind == HandoffKind::Ownership && h.done)
                .map(|h| h.target.clone())
        })
    }

    /// Test hook: takes the local vnode of `p` out of the table and shuts
    /// it down, as a handoff's drop does (its data stays on disk).
    #[doc(hidden)]
    pub fn fault_drop_vnode(&self, p: u32) -> bool {
        let v = self.vnodes.write().remove(&p);
        v.map(|v| v.shutdown()).is_some()
    }

    /// Test hook: marks `p` as being dropped here after a handoff (as the
    /// handoff's drop does, without closing or deleting anything) until the
    /// guard drops.
    #[doc(hidden)]
    pub fn fault_hold_dropping(&self, p: u32) -> impl Sized + '_ {
        self.hold_dropping(p)
    }

    /// [`Self::vcall`]; with `sloppy` = (key hash, n), a request to a
    /// primary whose node cannot be reached (now marked down) goes to the
    /// partition's fallback instead.
    pub async fn vcall_sloppy(
        &self,
        t: &Target,
        req: VnodeReq,
        sloppy: Option<([u8; 20], u32)>,
    ) -> Result<VnodeReply, VnodeError> {
        let Some((hash, n)) = sloppy.filter(|_| t.primary && t.node != self.cluster.me()) else {
            return self.vcall(t, req).await;
        };
        match self.vcall(t, req.clone()).await {
            Err(VnodeError::Remote(e)) => {
                let fallback = self
                    .targets(&hash, n)
                    .into_iter()
                    .find(|f| f.partition == t.partition && !f.primary);
                match fallback {
                    Some(f) => {
                        tracing::debug!(partition = f.partition, node = %f.node, "write retried on a fallback");
                        self.vcall(&f, req).await
                    }
                    None => Err(VnodeError::Remote(e)),
                }
            }
            r => r,
        }
    }

    /// Serves a vnode request from another node: locally, unless it was
    /// meant for the owner and this node no longer owns the partition
    /// (the sender's ring is stale) — then it is forwarded once to the owner.
    pub(crate) async fn serve_vnode_msg(
        &self,
        partition: u32,
        primary: bool,
        forwarded: bool,
        req: VnodeReq,
    ) -> Reply {
        let me = self.cluster.me().to_string();
        let owner = self.cluster.with_state(|s| {
            let o = s.owner(partition).to_string();
            let receiving = s.next.get(&partition) == Some(&me);
            (o, receiving)
        });
        let handing_off = self
            .cluster
            .with_handoffs(|h| h.get(&partition).map(|h| h.kind == HandoffKind::Ownership))
            .unwrap_or(false);
        if primary && !forwarded && owner.0 != me && !owner.1 && !handing_off {
            let msg = Msg::Vnode {
                partition,
                primary: true,
                forwarded: true,
                req,
            };
            return match self.cluster.call(&owner.0, &msg, self.timeout()).await {
                Ok(r) => r,
                Err(e) => Reply::Vnode(Err(wire(e.into()))),
            };
        }
        Reply::Vnode(
            self.local_call_at(partition, req, !forwarded)
                .await
                .map_err(wire),
        )
    }
}
