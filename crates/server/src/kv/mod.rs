//! The request FSMs of the KV API over the router: GET ([`get`], deciding
//! with [`get_core`]), PUT ([`put`], [`put_core`]), DELETE and tombstone
//! reaping ([`delete`]), list keys and buckets ([`list`]), 2i ([`index`];
//! on one entry of a client's coverage plan: [`cover`]),
//! the CS bucket fold ([`csfold`]) and the anti-entropy fold queries
//! The handle they run on is [`Kv`]: the router, bucket props and types, the
//! config, the counters and the read-repair queue, nothing else. What other
//! parts of the node must hear of a write (replication, post-commit hooks),
//! decide before one (pre-commit hooks) or know about a partition (handoff)
//! they learn through the small interfaces defined here ([`WriteObserver`],
//! [`PreCommit`], [`HeldCopies`]), which the node registers at start-up: the
//! platform never names a capability. The cores decide from the replies and
//! do no I/O.

pub mod cover;
pub mod csfold;
pub mod delete;
pub mod get;
pub mod get_core;
pub mod index;
pub mod list;
pub mod put;
pub mod put_core;

use crate::bucket::props::{BucketProps, CommitHook};
use crate::bucket::store::PropsStore;
use crate::bucket::types::BucketTypes;
use crate::config::Config;
use crate::error::RequestError;
use crate::object::vclock::VClock;
use crate::object::{Content, RiakObject};
use crate::router::{Router, Target};
use crate::vnode::request::{Obj, VnodeReq};
use basalt_engine::stats::WaitTimer;
use parking_lot::{Mutex, RwLock};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

pub use csfold::{CsFold, CS_FOLD_BATCH};
pub use list::LIST_KEYS_BATCH;

/// A future a hook returns.
pub type HookFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Hears of every write the KV layer coordinated once it met its quorum, and
/// of every tombstone reaped here (replication queues them; post-commit
/// hooks run on client writes).
pub trait WriteObserver: Send + Sync {
    /// `object` was written to `bucket`/`key` (a storage bucket) with the
    /// bucket's `props`.
    fn written(&self, bucket: &[u8], key: &[u8], object: &Obj, props: &BucketProps);
    /// The tombstone of `bucket`/`key` with `clock` was reaped from every
    /// replica.
    fn reaped(&self, bucket: &[u8], key: &[u8], clock: &VClock);
}

/// Decides on a client write before it is coordinated: the bucket's
/// `precommit` hooks.
pub trait PreCommit: Send + Sync {
    /// The content to write, or [`RequestError::Forbidden`] with the reason.
    fn precommit<'a>(
        &'a self,
        hooks: &'a [CommitHook],
        bucket: &'a [u8],
        key: &'a [u8],
        client: Option<&'a VClock>,
        content: Content,
    ) -> HookFuture<'a, Result<Content, RequestError>>;
}

/// Whether copies of partitions are held on a node other than their owner
/// (handoff); a reap waits while they are.
pub trait HeldCopies: Send + Sync {
    /// Of `partitions`, those this node holds for another owner.
    fn held_for(&self, partitions: &[u32]) -> Vec<u32>;
}

/// What the node registers with the KV layer at start-up.
#[derive(Default)]
struct Hooks {
    observers: Vec<Arc<dyn WriteObserver>>,
    precommit: Option<Arc<dyn PreCommit>>,
    held: Option<Arc<dyn HeldCopies>>,
}

/// Operation counters of a node (all APIs), for `/stats`.
#[derive(Debug, Default)]
pub struct NodeStats {
    /// GETs coordinated.
    pub gets: AtomicU64,
    /// PUTs coordinated (deletes excluded).
    pub puts: AtomicU64,
    /// DELETEs (tombstone PUTs) coordinated.
    pub deletes: AtomicU64,
    /// Latency of each coordinated operation (all APIs).
    pub latency: crate::latency::Latencies,
    /// Anti-entropy exchanges run.
    pub aae_exchanges: AtomicU64,
    /// Keys repaired by anti-entropy.
    pub aae_repairs: AtomicU64,
    /// Anti-entropy follow-up loops run (exchanges that hit their caps).
    pub aae_loops: AtomicU64,
    /// Keys repaired by scoped (bucket or last-modified range) follow-up
    /// loops.
    pub aae_range_repairs: AtomicU64,
    /// GETs whose quorum answered only "not found" and that waited for the
    /// other replicas (`notfound_wait_ms`).
    pub notfound_waits: AtomicU64,
    /// Of those, GETs that a later replica answered with the object.
    pub notfound_rescues: AtomicU64,
    /// 2i results the covering vnodes returned to this node's queries (a
    /// page of N reads at most N per covering vnode).
    pub index_results_read: AtomicU64,
    /// Anti-entropy fold queries (`aae_fold`) received by this node.
    pub aae_fold_requests: AtomicU64,
    /// Tombstones reaped by this node (from every replica).
    pub reaps: AtomicU64,
    /// Reap attempts put off (a copy of the key's partitions may be handed
    /// back later, or a primary was unreachable).
    pub reaps_deferred: AtomicU64,
    /// Reaps given up (put off every attempt, or over the pending limit):
    /// their tombstones stay.
    pub reaps_dropped: AtomicU64,
    /// Reaps waiting for their delay or a retry (a gauge).
    pub reaps_pending: AtomicUsize,
    /// MapReduce jobs run by this node.
    pub mapred_jobs: AtomicU64,
    /// Of those, jobs that failed (bad job, phase error, timeout, limit).
    pub mapred_errors: AtomicU64,
    /// Map rounds this node ran on its own vnodes for whole-bucket jobs
    /// (its own and other nodes' jobs: map phases where the data is).
    pub mapred_local_rounds: AtomicU64,
    /// Listed keys (and keys from 2i inputs or earlier phases) this node
    /// mapped on its own vnodes for map phases (any coordinator).
    pub mapred_local_keys: AtomicU64,
    /// Client (PB) connections open now (Riak's `pbc_active`; a gauge).
    pub pbc_active: AtomicUsize,
    /// Client (PB) connections accepted since the node started.
    pub pbc_connects: AtomicU64,
    /// Coordinated GETs, PUTs and DELETEs that answered an error (overload
    /// included).
    pub errors: AtomicU64,
    /// Of those, the ones refused with `overload` (a full vnode or
    /// background queue).
    pub overloads: AtomicU64,
    /// Read repairs sent (one per stale or missing replica a GET found).
    pub read_repairs: AtomicU64,
    /// Read repairs dropped: the background queue was full, by count
    /// ([`crate::limits::BACKGROUND_QUEUE`]) or bytes
    /// ([`crate::limits::BACKGROUND_BYTES`]).
    pub read_repairs_dropped: AtomicU64,
    /// PUTs that met their quorum while the node's replica writes in
    /// flight were over `limits.replica_writes_in_flight_mb`, and waited
    /// until they fell back under it (or for their own replicas).
    pub replica_write_waits: AtomicU64,
    /// A PUT's coordinating step (the coordinator's write, on this node or
    /// another), as the PUT waited for it (DELETEs and data-type updates,
    /// which write the same way, too).
    pub put_coordinate: WaitTimer,
    /// A PUT from its coordinator's answer to its quorum (past
    /// `limits.replica_writes_in_flight_mb`: to all its replicas).
    pub put_replicas: WaitTimer,
}

impl NodeStats {
    /// Counts the outcome of a coordinated request: an error in
    /// [`Self::errors`], an overload also in [`Self::overloads`].
    pub fn count_outcome<T>(&self, r: &Result<T, RequestError>) {
        if let Err(e) = r {
            self.errors
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if matches!(e, RequestError::Overload) {
                self.overloads
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            }
        }
    }
}

/// A background vnode request (read repair) and its object bytes.
struct Background {
    target: Target,
    req: VnodeReq,
    bytes: u64,
}

/// The handle the request FSMs run on: where requests go ([`Router`]),
/// bucket props and types, the config, the node's counters, and the queue
/// of background vnode requests (read repair). Capabilities reach the KV
/// layer through it; it reaches them only through the hooks registered
/// with [`Kv::observe`], [`Kv::set_precommit`] and [`Kv::set_held_copies`].
pub struct Kv {
    pub(crate) stats: NodeStats,
    pub(crate) config: Arc<Config>,
    pub(crate) router: Arc<Router>,
    pub(crate) props: Arc<PropsStore>,
    pub(crate) types: Arc<BucketTypes>,
    background: mpsc::Sender<Background>,
    background_rx: Mutex<Option<mpsc::Receiver<Background>>>,
    /// Object bytes of the background requests waiting and in flight
    /// (at most [`crate::limits::BACKGROUND_BYTES`] but for one request).
    background_bytes: Arc<AtomicU64>,
    hooks: RwLock<Hooks>,
    /// This handle, held weakly by the tasks it starts (tombstone reaps),
    /// which then end with the node.
    me: std::sync::Weak<Kv>,
    /// Tombstone reaps waiting (bucket, key, encoded clock): a GET that
    /// finds a tombstone on every replica starts no second reap of it.
    /// At most [`crate::limits::MAX_PENDING_REAPS`] entries.
    pub(crate) pending_reaps: Mutex<std::collections::HashSet<delete::ReapKey>>,
}

impl Kv {
    /// A KV layer over `router`, with the background queue's bound
    /// [`crate::limits::BACKGROUND_QUEUE`].
    pub fn new(
        config: Arc<Config>,
        router: Arc<Router>,
        props: Arc<PropsStore>,
        types: Arc<BucketTypes>,
    ) -> Arc<Kv> {
        let (background, background_rx) = mpsc::channel(crate::limits::BACKGROUND_QUEUE);
        Arc::new_cyclic(|me| Kv {
            stats: NodeStats::default(),
            config,
            router,
            props,
            types,
            background,
            background_rx: Mutex::new(Some(background_rx)),
            background_bytes: Arc::default(),
            hooks: RwLock::default(),
            me: me.clone(),
            pending_reaps: Mutex::default(),
        })
    }

    /// Registers an observer of coordinated writes and reaps.
    pub fn observe(&self, o: Arc<dyn WriteObserver>) {
        self.hooks.write().observers.push(o);
    }

    /// Registers what runs the buckets' pre-commit hooks.
    pub fn set_precommit(&self, p: Arc<dyn PreCommit>) {
        self.hooks.write().precommit = Some(p);
    }

    /// Registers what knows of partitions held for another owner.
    pub fn set_held_copies(&self, h: Arc<dyn HeldCopies>) {
        self.hooks.write().held = Some(h);
    }

    pub(crate) fn tell_written(
        &self,
        bucket: &[u8],
        key: &[u8],
        object: &Obj,
        props: &BucketProps,
    ) {
        // Registered at start-up only: the read lock is uncontended, and
        // iterating under it spares every write a copy of the list.
        for o in &self.hooks.read().observers {
            o.written(bucket, key, object, props);
        }
    }

    pub(crate) fn tell_reaped(&self, bucket: &[u8], key: &[u8], clock: &VClock) {
        for o in &self.hooks.read().observers {
            o.reaped(bucket, key, clock);
        }
    }

    pub(crate) async fn run_precommit(
        &self,
        hooks: &[CommitHook],
        bucket: &[u8],
        key: &[u8],
        client: Option<&VClock>,
        content: Content,
    ) -> Result<Content, RequestError> {
        let p = self.hooks.read().precommit.clone();
        match p {
            Some(p) => p.precommit(hooks, bucket, key, client, content).await,
            None => Ok(content),
        }
    }

    pub(crate) fn held_for(&self, partitions: &[u32]) -> Vec<u32> {
        let h = self.hooks.read().held.clone();
        h.map(|h| h.held_for(partitions)).unwrap_or_default()
    }

    /// Sends queued background requests (read repair) until the KV layer is
    /// dropped; started once by the server.
    pub fn start_background(self: &Arc<Self>) {
        let Some(mut rx) = self.background_rx.lock().take() else {
            return;
        };
        let kv = Arc::downgrade(self);
        let held = self.background_bytes.clone();
        let slots = Arc::new(tokio::sync::Semaphore::new(
            crate::limits::BACKGROUND_IN_FLIGHT,
        ));
        tokio::spawn(async move {
            while let Some(Background { target, req, bytes }) = rx.recv().await {
                let Ok(slot) = slots.clone().acquire_owned().await else {
                    break;
                };
                let Some(k) = kv.upgrade() else { break };
                let held = held.clone();
                tokio::spawn(async move {
                    if let Err(e) = k.router.vcall(&target, req).await {
                        tracing::debug!(partition = target.partition, node = %target.node, error = %e, "background request");
                    }
                    held.fetch_sub(bytes, Ordering::Relaxed);
                    drop(slot);
                });
            }
        });
    }

    /// Queues `req` to `t` in the background (read repair), or drops it
    /// (counted) when the queue is full by count or bytes.
    pub(crate) fn background(&self, t: Target, req: VnodeReq) {
        let bytes = req.payload_bytes();
        let before = self.background_bytes.fetch_add(bytes, Ordering::Relaxed);
        let over = before > 0 && before + bytes > crate::limits::BACKGROUND_BYTES;
        let queued = !over
            && self
                .background
                .try_send(Background {
                    target: t,
                    req,
                    bytes,
                })
                .is_ok();
        if !queued {
            self.background_bytes.fetch_sub(bytes, Ordering::Relaxed);
            self.stats
                .read_repairs_dropped
                .fetch_add(1, Ordering::Relaxed);
            tracing::debug!(
                over_bytes = over,
                "background queue full: a read repair is dropped"
            );
        }
    }

    /// Operation counters.
    pub fn stats(&self) -> &NodeStats {
        &self.stats
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Bucket properties.
    pub fn props(&self) -> &PropsStore {
        &self.props
    }

    /// The bucket-type registry.
    pub fn types(&self) -> &BucketTypes {
        &self.types
    }

    /// Where requests go: preference lists, coverage, the vnode table.
    pub fn router(&self) -> &Arc<Router> {
        &self.router
    }

    /// The `n_val` vnodes of a key (`bucket` = storage bucket), with
    /// fallbacks for primaries whose node is down.
    pub fn preflist_of(&self, bucket: &[u8], key: &[u8]) -> Vec<Target> {
        self.router
            .key_targets(bucket, key, self.props.get(bucket).n_val)
    }

    pub(crate) fn timeout(&self) -> Duration {
        self.router.timeout()
    }
}

/// Options of a GET.
#[derive(Debug, Clone, Default)]
pub struct GetOpts {
    /// Read quorum (PB encoding).
    pub r: Option<u32>,
    /// Primary read quorum.
    pub pr: Option<u32>,
    /// Count not-found replies as successes.
    pub notfound_ok: Option<bool>,
    /// Riak's `basic_quorum` (`None` = the bucket's prop).
    pub basic_quorum: Option<bool>,
    /// Read only the first `n_val` replicas of the preference list (at most
    /// the bucket's; `None` = the bucket's), as Riak's request `n_val`.
    pub n_val: Option<u32>,
    /// `Some(false)`: primaries only, no fallbacks (Riak's
    /// `sloppy_quorum`; `None` / `true` = fallbacks stand in for owners
    /// that are down).
    pub sloppy_quorum: Option<bool>,
}

/// What a GET found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum GetOutcome {
    /// No replica has the key.
    NotFound,
    /// Every sibling is a tombstone; its clock.
    Tombstone(VClock),
    /// The merged object.
    Found(RiakObject),
}

/// Options of a PUT or DELETE.
#[derive(Debug, Clone, Default)]
pub struct PutOpts {
    /// Write quorum.
    pub w: Option<u32>,
    /// Durable-write quorum.
    pub dw: Option<u32>,
    /// Primary-write quorum.
    pub pw: Option<u32>,
    /// Fail with `match_found` if the object exists.
    pub if_none_match: bool,
    /// Fail unless the stored clock equals the request's.
    pub if_not_modified: bool,
    /// Write only the first `n_val` replicas (at most the bucket's; `None`
    /// = the bucket's), as Riak's request `n_val`; quorums count against it.
    pub n_val: Option<u32>,
    /// `Some(false)`: primaries only, no fallbacks (Riak's `sloppy_quorum`).
    pub sloppy_quorum: Option<bool>,
    /// Acknowledgements must come from at least this many distinct nodes
    /// (Riak's `node_confirms`; `None` / 0 = no such rule).
    pub node_confirms: Option<u32>,
}

/// Runs a listing or 2i request within the client's `timeout` (ms; absent
/// or 0 = no limit, as Riak's `infinity`): past it the request fails with
/// Riak's `timeout` error (a stream already started just ends with it).
pub async fn within<T>(
    timeout_ms: Option<u32>,
    request: impl Future<Output = Result<T, RequestError>>,
) -> Result<T, RequestError> {
    match timeout_ms.filter(|ms| *ms > 0) {
        None => request.await,
        Some(ms) => {
            let limit = std::time::Duration::from_millis(u64::from(ms));
            tokio::time::timeout(limit, request)
                .await
                .unwrap_or(Err(RequestError::Timeout))
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::bucket::props::BucketProps;
    use crate::config::Config;
    use crate::node::Node;
    use crate::object::{Content, RiakObject};
    use crate::router::Target;
    use crate::vnode::request::{Obj, VnodeReq};
    use std::sync::atomic::Ordering;

    fn repair(key: &str, bytes: usize) -> VnodeReq {
        VnodeReq::Reconcile {
            bucket: b"b".to_vec(),
            key: key.as_bytes().to_vec(),
            object: Obj::local(RiakObject {
                vclock: Default::default(),
                contents: vec![Content {
                    value: vec![7; bytes],
                    value_len: bytes as u32,
                    ..Content::default()
                }],
            }),
            props: BucketProps::default(),
        }
    }

    /// Nothing drains the queue here (the server starts the sender): read
    /// repairs queue until their bytes would pass BACKGROUND_BYTES, then
    /// are dropped and counted; one larger than the limit still passes
    /// when nothing else is held.
    #[test]
    fn read_repairs_queue_within_a_byte_bound_and_the_rest_are_dropped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let node = Node::open(Config::ephemeral(dir.path())).expect("open");
        let kv = node.kv();
        let t = || Target {
            partition: 0,
            node: "elsewhere@127.0.0.1".into(),
            primary: true,
        };
        let limit = crate::limits::BACKGROUND_BYTES as usize;
        let dropped = || kv.stats.read_repairs_dropped.load(Ordering::Relaxed);
        // Far fewer than BACKGROUND_QUEUE requests: only bytes can refuse.
        let each = limit / 8;
        for i in 0..8 {
            kv.background(t(), repair(&format!("k{i}"), each));
        }
        assert_eq!(dropped(), 0, "eight eighths fit");
        kv.background(t(), repair("one more", 1));
        assert_eq!(dropped(), 1, "the ninth is over the bound");
        assert_eq!(
            kv.background_bytes.load(Ordering::Relaxed),
            crate::limits::BACKGROUND_BYTES,
            "a dropped request gives its bytes back"
        );
        // A fresh node: one object above the limit alone is queued.
        let dir2 = tempfile::tempdir().expect("tempdir");
        let node2 = Node::open(Config::ephemeral(dir2.path())).expect("open");
        node2.kv().background(t(), repair("big", limit + 1));
        assert_eq!(
            node2
                .kv()
                .stats
                .read_repairs_dropped
                .load(Ordering::Relaxed),
            0
        );
    }

    /// Once sent (here to a node that does not exist: each call fails at
    /// once), the requests give their bytes back.
    #[tokio::test]
    async fn sent_read_repairs_give_their_bytes_back() {
        let dir = tempfile::tempdir().expect("tempdir");
        let node = Node::open(Config::ephemeral(dir.path())).expect("open");
        let kv = node.kv();
        kv.start_background();
        for i in 0..100 {
            kv.background(
                Target {
                    partition: 0,
                    node: "elsewhere@127.0.0.1".into(),
                    primary: true,
                },
                repair(&format!("k{i}"), 10_000),
            );
        }
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while kv.background_bytes.load(Ordering::Relaxed) > 0 {
            assert!(std::time::Instant::now() < deadline, "bytes still held");
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        assert_eq!(kv.stats.read_repairs_dropped.load(Ordering::Relaxed), 0);
    }
}
