//! The request coordinator of a node: GET as n HEADs + 1 GET with sibling
//! merge and read repair, PUT through a coordinating vnode then the other
//! replicas, DELETE as a tombstone PUT (then tombstone reaping per
//! `delete_mode`), listings, 2i and the CS bucket fold over a covering set.

use crate::btypes::{split_storage_bucket, BucketTypes};
use crate::cluster::Cluster;
use crate::config::{Config, ConfigError};
use crate::object::{Content, RiakObject};
use crate::props::{BucketProps, PropsError, PropsStore};
use crate::ring::{key_hash, Ring};
use crate::routing::Target;
use crate::vclock::VClock;
use crate::vnode::{Vnode, VnodeError, VnodeState};
use crate::vnodereq::{VnodeReply, VnodeReq, WireObject};
use basalt_backend::{BackendError, Capability, IndexPage, IndexQuery, IndexResult, KeyRange};
use futures_util::stream::{FuturesOrdered, FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use parking_lot::{Mutex, RwLock, RwLockWriteGuard};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, Weak};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use tokio::sync::mpsc;

/// A request that failed; the `Display` text is what goes into `RpbErrorResp`.
#[derive(Debug, thiserror::Error)]
pub enum RequestError {
    /// Bad input from the client.
    #[error("{0}")]
    Invalid(String),
    /// A vnode queue was full.
    #[error("overload")]
    Overload,
    /// Vnodes did not answer in time.
    #[error("timeout")]
    Timeout,
    /// Fewer replicas answered than the quorum needs (`{r_val_unsatisfied,R,Got}` style).
    #[error("{{{kind}_val_unsatisfied,{need},{got}}}")]
    Unsatisfied {
        /// `r`, `w`, ...
        kind: &'static str,
        /// Needed.
        need: u32,
        /// Got.
        got: u32,
    },
    /// `if_none_match` and the object exists.
    #[error("match_found")]
    MatchFound,
    /// `if_not_modified` and the clock differs.
    #[error("modified")]
    Modified,
    /// `if_not_modified` and no object.
    #[error("notfound")]
    NotFound,
    /// The disk of a vnode is full (HTTP 507).
    #[error("disk full: {0}")]
    DiskFull(String),
    /// A storage failure.
    #[error("storage error: {0}")]
    Storage(String),
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
        VnodeError::Remote(m) => m.contains(ENOSPC),
        _ => false,
    }
}

impl From<VnodeError> for RequestError {
    fn from(e: VnodeError) -> Self {
        match e {
            VnodeError::Overload => RequestError::Overload,
            VnodeError::Timeout => RequestError::Timeout,
            VnodeError::Backend(
                BackendError::NotSupported { .. } | BackendError::InvalidInput(_),
            ) => RequestError::Invalid(e.to_string()),
            other if is_disk_full(&other) => RequestError::DiskFull(other.to_string()),
            other => RequestError::Storage(other.to_string()),
        }
    }
}

impl From<PropsError> for RequestError {
    fn from(e: PropsError) -> Self {
        match e {
            PropsError::Invalid(m) => RequestError::Invalid(m),
            other => RequestError::Storage(other.to_string()),
        }
    }
}

/// Failure to open a node.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// Bad configuration.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// A vnode's backend did not open.
    #[error("opening vnode {partition}: {source}")]
    Backend {
        /// The partition.
        partition: u32,
        /// The error.
        #[source]
        source: BackendError,
    },
    /// Creating directories or threads failed.
    #[error("{0}")]
    Io(#[from] std::io::Error),
    /// The bucket props file is unreadable.
    #[error(transparent)]
    Props(#[from] PropsError),
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
    /// GETs whose quorum answered only "not found" and that waited for the
    /// other replicas (`notfound_wait_ms`).
    pub notfound_waits: AtomicU64,
    /// Of those, GETs that a later replica answered with the object.
    pub notfound_rescues: AtomicU64,
}

/// A node: ring, vnodes, bucket props and its cluster view.
pub struct Node {
    stats: NodeStats,
    pub(crate) config: Config,
    pub(crate) ring: Ring,
    pub(crate) vnodes: RwLock<BTreeMap<u32, Arc<Vnode>>>,
    props: PropsStore,
    types: Arc<BucketTypes>,
    pub(crate) gate: Arc<RwLock<()>>,
    pub(crate) cluster: Cluster,
    background: mpsc::Sender<(Target, VnodeReq)>,
    background_rx: Mutex<Option<mpsc::Receiver<(Target, VnodeReq)>>>,
    this: OnceLock<Weak<Node>>,
    pub(crate) repl: crate::repl::ReplQueue,
    pub(crate) closing: std::sync::atomic::AtomicBool,
    pub(crate) restarts: Mutex<std::collections::HashMap<u32, std::time::Instant>>,
}

pub(crate) type FanOutFuture<'a> = std::pin::Pin<
    Box<dyn std::future::Future<Output = (Target, Result<VnodeReply, VnodeError>)> + Send + 'a>,
>;
pub(crate) type FanOut<'a> = FuturesUnordered<FanOutFuture<'a>>;
type Replies<'a> = std::pin::Pin<
    Box<dyn futures_util::Stream<Item = (Target, Result<VnodeReply, VnodeError>)> + Send + 'a>,
>;

/// Background vnode requests (read repair) waiting to be sent.
const BACKGROUND_QUEUE: usize = 10_000;

/// Seconds and microseconds since the epoch.
fn now() -> (u64, u32) {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs(), d.subsec_micros())
}

/// A random base62 id (vtags and generated keys).
pub fn unique_id() -> Vec<u8> {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut n: u128 = rand::random();
    let mut out = Vec::with_capacity(22);
    while n > 0 {
        out.push(ALPHABET[(n % 62) as usize]);
        n /= 62;
    }
    if out.is_empty() {
        out.push(b'0');
    }
    out
}

/// The coordinating vnode's step of a PUT: the new object from the local
/// version, the client's clock and the new content (`None` = nothing to
/// write: a delete of an absent or already deleted object).
///
/// The write is a new event of `actor` (one past the highest counter of
/// `actor` the local version or the client has seen); the new sibling
/// carries it as its dot. With `allow_mult` (and not `last_write_wins`),
/// the local live siblings the client has **not** seen stay beside it
/// (their dots are not covered by the client's clock); those it has seen
/// are superseded. A write without a clock has seen nothing, so it adds a
/// sibling, as in Riak.
pub fn coordinate(
    local: Option<&RiakObject>,
    client: Option<&VClock>,
    content: Content,
    props: &BucketProps,
    actor: &[u8],
    now_secs: u64,
) -> Option<RiakObject> {
    let is_delete = content.deleted;
    if is_delete && local.is_none_or(|l| l.is_deleted()) {
        return None;
    }
    let empty = VClock::new();
    let (mut vclock, kept) = match local {
        None => (client.cloned().unwrap_or_default(), Vec::new()),
        Some(l) => {
            // A delete without a clock deletes what it sees.
            let client = if is_delete && client.is_none() {
                &l.vclock
            } else {
                client.unwrap_or(&empty)
            };
            let kept: Vec<Content> = if props.last_write_wins || !props.allow_mult {
                Vec::new()
            } else {
                l.contents
                    .iter()
                    .filter(|c| !c.deleted)
                    .filter(|c| match &c.dot {
                        Some(d) => !d.covered_by(client),
                        None => !client.descends(&l.vclock),
                    })
                    .cloned()
                    .collect()
            };
            (client.merge(&l.vclock), kept)
        }
    };
    vclock.increment(actor, now_secs);
    let dot = crate::object::Dot {
        actor: actor.to_vec(),
        counter: vclock.counter(actor),
    };
    let mut content = content;
    content.dot = Some(dot);
    let mut contents = kept;
    contents.push(content);
    let mut obj = RiakObject { vclock, contents };
    obj.vclock.prune(now_secs, &props.prune());
    // A sibling whose actor was pruned from the clock can no longer be
    // told apart by its dot: it falls back to the clock-only rule.
    for c in &mut obj.contents {
        if c.dot.as_ref().is_some_and(|d| !d.covered_by(&obj.vclock)) {
            c.dot = None;
        }
    }
    obj.canonicalize();
    Some(obj)
}

/// A replica's step: merges an incoming version into the local one; returns
/// the version to write, if it changes anything.
pub fn reconcile(
    local: Option<&RiakObject>,
    incoming: &RiakObject,
    props: &BucketProps,
) -> Option<RiakObject> {
    match local {
        None => Some(incoming.clone()),
        // Last write wins: the later sibling by last-modified (ties by
        // vtag), so every replica keeps the same one whatever the order.
        Some(l) if props.last_write_wins => {
            let merged = RiakObject::merge(l, incoming, false);
            (merged != *l).then_some(merged)
        }
        Some(l) => {
            let merged = RiakObject::merge(l, incoming, props.allow_mult);
            (merged != *l).then_some(merged)
        }
    }
}

impl Node {
    /// Opens the node: checks that the data directory belongs to this node
    /// name (`<data_dir>/NODE`), loads the cluster state and opens the vnodes
    /// of the partitions it owns or still holds data for
    /// (`<data_dir>/vnodes/<partition>`).
    pub fn open(config: Config) -> Result<Node, OpenError> {
        config.validate()?;
        let ring = Ring::new(config.ring_size)
            .ok_or_else(|| ConfigError(format!("bad ring_size {}", config.ring_size)))?;
        std::fs::create_dir_all(config.data_dir.join("vnodes"))?;
        check_node_name(&config)?;
        let cluster = Cluster::open(
            &config.node_name,
            config.ring_size,
            Some(config.data_dir.clone()),
            config.limits.max_frame_bytes,
        )
        .map_err(|e| ConfigError(e.0))?;
        let gate = Arc::new(RwLock::new(()));
        let types = Arc::new(BucketTypes::open(Some(
            config.data_dir.join("bucket_types.json"),
        ))?);
        let props = PropsStore::open(
            Some(config.data_dir.join("bucket_props.json")),
            types.clone(),
        )?;
        let (background, background_rx) = mpsc::channel(BACKGROUND_QUEUE);
        let node = Node {
            stats: NodeStats::default(),
            config,
            ring,
            vnodes: RwLock::new(BTreeMap::new()),
            props,
            types,
            gate,
            cluster,
            background,
            background_rx: Mutex::new(Some(background_rx)),
            this: OnceLock::new(),
            repl: crate::repl::ReplQueue::default(),
            closing: std::sync::atomic::AtomicBool::new(false),
            restarts: Mutex::new(std::collections::HashMap::new()),
        };
        let mut open: BTreeSet<u32> = node
            .cluster
            .with_state(|s| s.owned_by(&node.config.node_name))
            .into_iter()
            .collect();
        for e in std::fs::read_dir(node.config.data_dir.join("vnodes"))? {
            if let Some(p) = e?.file_name().to_str().and_then(|n| n.parse::<u32>().ok()) {
                if p < node.ring.size() {
                    open.insert(p);
                }
            }
        }
        for p in open {
            let v = node.open_vnode(p).map_err(|e| match e {
                VnodeError::Backend(source) => OpenError::Backend {
                    partition: p,
                    source,
                },
                other => OpenError::Io(std::io::Error::other(other.to_string())),
            })?;
            node.vnodes.write().insert(p, Arc::new(v));
        }
        tracing::info!(ring_size = node.ring.size(), vnodes = node.vnodes.read().len(), backend = %node.config.backend, data_dir = %node.config.data_dir.display(), "vnodes open");
        Ok(node)
    }

    /// The cluster view.
    pub fn cluster(&self) -> &Cluster {
        &self.cluster
    }

    /// Sends queued background requests (read repair) until the node is
    /// dropped; started once by the server.
    pub fn start_background(self: &Arc<Self>) {
        let _ = self.this.set(Arc::downgrade(self));
        let Some(mut rx) = self.background_rx.lock().take() else {
            return;
        };
        let node = Arc::downgrade(self);
        tokio::spawn(async move {
            while let Some((t, req)) = rx.recv().await {
                let Some(n) = node.upgrade() else { break };
                tokio::spawn(async move {
                    if let Err(e) = n.vcall(&t, req).await {
                        tracing::debug!(partition = t.partition, node = %t.node, error = %e, "background request");
                    }
                });
            }
        });
    }

    fn background(&self, t: Target, req: VnodeReq) {
        if self.background.try_send((t, req)).is_err() {
            tracing::debug!("background queue full: a read repair is dropped");
        }
    }

    /// Operation counters.
    pub fn stats(&self) -> &NodeStats {
        &self.stats
    }

    /// Jobs waiting in each local vnode's queue, by partition.
    pub fn vnode_queue_lengths(&self) -> Vec<usize> {
        self.vnodes.read().values().map(|v| v.queue_len()).collect()
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

    /// The `n_val` vnodes of a key (`bucket` = storage bucket), with
    /// fallbacks for primaries whose node is down.
    pub fn preflist_of(&self, bucket: &[u8], key: &[u8]) -> Vec<Target> {
        self.key_targets(bucket, key, self.props.get(bucket).n_val)
    }

    /// Holds every vnode worker before its next job while the guard lives
    /// (for overload tests and maintenance).
    pub fn pause_vnodes(&self) -> RwLockWriteGuard<'_, ()> {
        self.gate.write()
    }

    /// Stops every vnode (queued jobs finish) and closes the backends.
    pub fn close(&self) {
        self.closing
            .store(true, std::sync::atomic::Ordering::Release);
        let all: Vec<Arc<Vnode>> = self.vnodes.read().values().cloned().collect();
        for v in all {
            v.shutdown();
        }
    }

    pub(crate) fn timeout(&self) -> Duration {
        Duration::from_millis(self.config.limits.request_timeout_ms)
    }

    pub(crate) fn key_targets(&self, bucket: &[u8], key: &[u8], n: u32) -> Vec<Target> {
        let (btype, name) = split_storage_bucket(bucket);
        self.targets(&key_hash(btype, name, key), n)
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
    fn fan_out_with<'a>(
        &'a self,
        targets: &[Target],
        req: impl Fn() -> VnodeReq,
        sloppy: Option<([u8; 20], u32)>,
    ) -> FanOut<'a> {
        self.fan_out_vec(targets, req, sloppy).into_iter().collect()
    }

    /// The calls of [`Self::fan_out_with`], in `targets` order.
    fn fan_out_vec<'a>(
        &'a self,
        targets: &[Target],
        req: impl Fn() -> VnodeReq,
        sloppy: Option<([u8; 20], u32)>,
    ) -> Vec<FanOutFuture<'a>> {
        let this = self.this.get().and_then(Weak::upgrade);
        targets
            .iter()
            .map(|t| {
                let (t, r) = (t.clone(), req());
                let f: FanOutFuture<'a> = match &this {
                    Some(node) => {
                        let (node, t2) = (node.clone(), t.clone());
                        let h =
                            tokio::spawn(async move { node.vcall_sloppy(&t2, r, sloppy).await });
                        Box::pin(async move {
                            let res = h
                                .await
                                .unwrap_or_else(|e| Err(VnodeError::Remote(format!("task: {e}"))));
                            (t, res)
                        })
                    }
                    None => Box::pin(async move {
                        let res = self.vcall_sloppy(&t, r, sloppy).await;
                        (t, res)
                    }),
                };
                f
            })
            .collect()
    }

    /// GET: HEAD the `n` vnodes, wait for `r` (and `pr` primaries), GET the
    /// value of each winning version from the least-queued replica holding
    /// it, merge, read-repair stale replicas in the background.
    /// Uses the bucket's `basic_quorum` prop (see [`Node::get_with_basic_quorum`]).
    pub async fn get(
        &self,
        bucket: &[u8],
        key: &[u8],
        opts: &GetOpts,
    ) -> Result<GetOutcome, RequestError> {
        self.get_with_basic_quorum(bucket, key, opts, None).await
    }

    /// [`Node::get`] with Riak's `basic_quorum` (`None` = the bucket's prop).
    /// With it, as `riak_kv_get_core`'s fail threshold, the GET gives up
    /// once `min(n / 2 + 1, n - max(r, pr) + 1)` replicas answered not
    /// found (counted only when `notfound_ok` is off) or failed, replies
    /// taken as they arrive; giving up answers not found when no replica
    /// failed and none answered a live object, else the quorum error (or
    /// `overload`), and does no read repair.
    pub async fn get_with_basic_quorum(
        &self,
        bucket: &[u8],
        key: &[u8],
        opts: &GetOpts,
        basic_quorum: Option<bool>,
    ) -> Result<GetOutcome, RequestError> {
        self.stats.gets.fetch_add(1, Ordering::Relaxed);
        let _timer = self.stats.latency.timer(crate::latency::Op::Get);
        let props = self.props.get(bucket);
        let r = props.resolve(opts.r, props.r, "r")?;
        let pr = props.resolve(opts.pr, props.pr, "pr")?;
        let notfound_ok = opts.notfound_ok.unwrap_or(props.notfound_ok);
        let targets = self.key_targets(bucket, key, props.n_val);
        let head_req = || VnodeReq::Head {
            bucket: bucket.to_vec(),
            key: key.to_vec(),
        };
        // Replies are taken as they come; when every vnode is local (one
        // node) they are taken in preference-list order, which costs
        // nothing and makes single-node results repeatable.
        let calls = self.fan_out_vec(&targets, head_req, None);
        let me = self.cluster.me();
        let mut replies: Replies<'_> = if targets.iter().all(|t| t.node == me) {
            Box::pin(calls.into_iter().collect::<FuturesOrdered<_>>())
        } else {
            Box::pin(calls.into_iter().collect::<FuturesUnordered<_>>())
        };
        let mut heads: Vec<(Target, Option<RiakObject>, u32)> = Vec::new();
        let mut overloaded = false;
        let fail_fast = FailFast::new(
            targets.len(),
            r.max(pr),
            notfound_ok,
            basic_quorum.unwrap_or(props.basic_quorum),
        );
        let mut answered = 0usize;
        // A quorum of "not found" waits this long for the other replicas
        // (see `Limits::notfound_wait_ms`); `basic_quorum` asked not to.
        let notfound_wait = (!basic_quorum.unwrap_or(props.basic_quorum))
            .then(|| Duration::from_millis(self.config.limits.notfound_wait_ms))
            .filter(|d| !d.is_zero());
        let mut deadline: Option<tokio::time::Instant> = None;
        let enough = |heads: &[(Target, Option<RiakObject>, u32)]| {
            let ok = |h: &&(Target, Option<RiakObject>, u32)| notfound_ok || h.1.is_some();
            let got = heads.iter().filter(ok).count() as u32;
            let primaries = heads.iter().filter(ok).filter(|h| h.0.primary).count() as u32;
            got >= r && primaries >= pr
        };
        loop {
            let next = match deadline {
                None => replies.next().await,
                Some(d) => match tokio::time::timeout_at(d, replies.next()).await {
                    Ok(next) => next,
                    Err(_) => break,
                },
            };
            let Some((t, res)) = next else { break };
            match res {
                Ok(VnodeReply::Object(h, q)) => match h.map(|w| w.head()).transpose() {
                    Ok(h) => heads.push((t, h, q)),
                    Err(e) => tracing::warn!(partition = t.partition, error = %e, "get head"),
                },
                Ok(other) => tracing::warn!(?other, "unexpected head reply"),
                Err(VnodeError::Overload) => overloaded = true,
                Err(e) => {
                    tracing::warn!(partition = t.partition, node = %t.node, error = %e, "get head")
                }
            }
            answered += 1;
            let seen: Vec<Option<&RiakObject>> = heads.iter().map(|h| h.1.as_ref()).collect();
            if let Some(out) = fail_fast.check(&seen, answered, overloaded) {
                return out;
            }
            if enough(&heads) {
                let found_any = heads.iter().any(|h| h.1.is_some());
                if !found_any && answered < targets.len() {
                    if let Some(wait) = notfound_wait {
                        // Only "not found" so far: a replica yet to answer
                        // may hold an acknowledged write (e.g. the others
                        // restarted or were not written yet).
                        if deadline.is_none() {
                            self.stats.notfound_waits.fetch_add(1, Ordering::Relaxed);
                            deadline = Some(tokio::time::Instant::now() + wait);
                        }
                        continue;
                    }
                }
                if found_any && deadline.is_some() {
                    self.stats.notfound_rescues.fetch_add(1, Ordering::Relaxed);
                }
                // Replies already in hand also count for read repair.
                while let Some(Some((t, Ok(VnodeReply::Object(h, q))))) =
                    replies.next().now_or_never()
                {
                    if let Ok(h) = h.map(|w| w.head()).transpose() {
                        heads.push((t, h, q));
                    }
                }
                break;
            }
        }
        drop(replies);
        let found: Vec<(&Target, &RiakObject, u32)> = heads
            .iter()
            .filter_map(|(t, h, q)| h.as_ref().map(|h| (t, h, *q)))
            .collect();
        if !enough(&heads) {
            let got = if notfound_ok {
                heads.len()
            } else {
                found.len()
            } as u32;
            if overloaded {
                return Err(RequestError::Overload);
            }
            let need = r.max(pr);
            if found.is_empty() && heads.len() as u32 >= need {
                return Ok(GetOutcome::NotFound);
            }
            return Err(RequestError::Unsatisfied {
                kind: if got >= r { "pr" } else { "r" },
                need: if got >= r { pr } else { r },
                got,
            });
        }
        if found.is_empty() {
            return Ok(GetOutcome::NotFound);
        }
        // One replica per distinct version (clock and siblings) whose clock
        // no other replica dominates: the least-queued one holding it.
        let mut winners: Vec<(&Target, &RiakObject, u32)> = Vec::new();
        for f in &found {
            if found.iter().any(|o| o.1.vclock.dominates(&f.1.vclock)) {
                continue;
            }
            match winners.iter_mut().find(|w| w.1.same_state(f.1)) {
                Some(w) if f.2 < w.2 => *w = *f,
                Some(_) => {}
                None => winners.push(*f),
            }
        }
        let mut merged: Option<RiakObject> = None;
        for (t, _, _) in winners {
            let reply = self
                .vcall(
                    t,
                    VnodeReq::Get {
                        bucket: bucket.to_vec(),
                        key: key.to_vec(),
                    },
                )
                .await?;
            let obj = match reply {
                VnodeReply::Object(Some(w), _) => Some(w.object()?),
                _ => None,
            };
            if let Some(o) = obj {
                merged = Some(match merged {
                    None => o,
                    Some(m) => RiakObject::merge(&m, &o, props.allow_mult),
                });
            }
        }
        let Some(merged) = merged else {
            return Ok(GetOutcome::NotFound);
        };
        // Read repair: stale or missing replicas get the merged object.
        let wire = WireObject::full(&merged);
        for (t, h, _) in &heads {
            let stale = h.as_ref().is_none_or(|h| !h.same_state(&merged));
            if stale {
                tracing::debug!(partition = t.partition, node = %t.node, "read repair");
                self.background(
                    t.clone(),
                    VnodeReq::Reconcile {
                        bucket: bucket.to_vec(),
                        key: key.to_vec(),
                        object: wire.clone(),
                        props: props.clone(),
                    },
                );
            }
        }
        if merged.is_deleted() {
            Ok(GetOutcome::Tombstone(merged.vclock))
        } else {
            Ok(GetOutcome::Found(merged))
        }
    }

    /// PUT (and DELETE when `content.deleted`): conditional checks, then the
    /// coordinating vnode (first of the key's vnodes) builds and writes the
    /// new version, then the other replicas reconcile it; returns once
    /// `max(w, dw)` vnodes (of which `pw` primaries) acknowledged.
    /// Returns the new object (`None`: nothing written).
    pub async fn put(
        &self,
        bucket: &[u8],
        key: &[u8],
        client: Option<VClock>,
        mut content: Content,
        opts: &PutOpts,
    ) -> Result<Option<RiakObject>, RequestError> {
        let counter = if content.deleted {
            &self.stats.deletes
        } else {
            &self.stats.puts
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let _timer = self.stats.latency.timer(if content.deleted {
            crate::latency::Op::Delete
        } else {
            crate::latency::Op::Put
        });
        let props = self.props.get(bucket);
        let w = props.resolve(opts.w, props.w, "w")?;
        let dw = props.resolve(opts.dw, props.dw, "dw")?;
        let pw = props.resolve(opts.pw, props.pw, "pw")?;
        let size = content.value.len();
        if size > self.config.limits.max_object_bytes {
            return Err(RequestError::Invalid(format!(
                "Object too large: {size} bytes (limit {})",
                self.config.limits.max_object_bytes
            )));
        }
        if size > self.config.limits.warn_object_bytes {
            tracing::warn!(size, bucket = %String::from_utf8_lossy(bucket), key = %String::from_utf8_lossy(key), "large object");
        }
        if opts.if_none_match || opts.if_not_modified {
            let cur = self.get(bucket, key, &GetOpts::default()).await?;
            match cur {
                GetOutcome::Found(_) if opts.if_none_match => return Err(RequestError::MatchFound),
                GetOutcome::Found(o)
                    if opts.if_not_modified
                        && !client.as_ref().is_some_and(|c| c.same_events(&o.vclock)) =>
                {
                    return Err(RequestError::Modified)
                }
                GetOutcome::NotFound | GetOutcome::Tombstone(_) if opts.if_not_modified => {
                    return Err(RequestError::NotFound)
                }
                _ => {}
            }
        }
        let (secs, usecs) = now();
        content.last_mod = secs as u32;
        content.last_mod_usecs = usecs;
        content.vtag = Some(unique_id());
        content.value_len = content.value.len() as u32;
        let targets = self.key_targets(bucket, key, props.n_val);
        let need = w.max(dw);
        let primaries_up = targets.iter().filter(|t| t.primary).count() as u32;
        if primaries_up < pw {
            return Err(RequestError::Unsatisfied {
                kind: "pw",
                need: pw,
                got: primaries_up,
            });
        }
        if targets.is_empty() {
            return Err(RequestError::Invalid("empty preference list".into()));
        }
        let req = VnodeReq::Coordinate {
            bucket: bucket.to_vec(),
            key: key.to_vec(),
            client: client.as_ref().map(VClock::encode),
            content: WireObject::full(&RiakObject {
                vclock: VClock::default(),
                contents: vec![content],
            }),
            props: props.clone(),
            now_secs: secs,
        };
        // A local vnode coordinates if the key has one here (no extra hop,
        // no wait on a slow peer), else the first; an unreachable one is
        // skipped (it counts as a failed replica).
        let me = self.cluster.me();
        let local = targets.iter().position(|t| t.node == me);
        let order: Vec<usize> = local
            .into_iter()
            .chain((0..targets.len()).filter(|&i| Some(i) != local))
            .collect();
        let mut coordinated = None;
        let mut last_err = None;
        let mut tried = Vec::new();
        for i in order {
            let t = &targets[i];
            tried.push(i);
            match self.vcall(t, req.clone()).await {
                Ok(reply) => {
                    coordinated = Some((i, reply));
                    break;
                }
                Err(e @ (VnodeError::Remote(_) | VnodeError::Closed)) => {
                    tracing::warn!(partition = t.partition, node = %t.node, error = %e, "coordinating vnode unavailable; trying the next");
                    last_err = Some(e);
                }
                Err(e) => return Err(e.into()),
            }
        }
        let Some((ci, reply)) = coordinated else {
            return Err(last_err.map_or(RequestError::Timeout, RequestError::from));
        };
        let coord = &targets[ci];
        let rest: Vec<Target> = (0..targets.len())
            .filter(|i| !tried.contains(i))
            .map(|i| targets[i].clone())
            .collect();
        let new = match reply {
            VnodeReply::Written(None) => return Ok(None),
            VnodeReply::Written(Some(w)) => w,
            other => {
                return Err(RequestError::Storage(format!(
                    "unexpected coordinator reply {other:?}"
                )))
            }
        };
        let mut acks = 1u32;
        let mut primary_acks = u32::from(coord.primary);
        let mut failed = 0u32;
        let replica_req = || VnodeReq::Reconcile {
            bucket: bucket.to_vec(),
            key: key.to_vec(),
            object: new.clone(),
            props: props.clone(),
        };
        let (btype, bname) = split_storage_bucket(bucket);
        let sloppy = Some((key_hash(btype, bname, key), props.n_val));
        let mut replies = self.fan_out_with(&rest, replica_req, sloppy);
        while acks < need || primary_acks < pw {
            let Some((t, res)) = replies.next().await else {
                break;
            };
            match res {
                Ok(_) => {
                    acks += 1;
                    primary_acks += u32::from(t.primary);
                }
                Err(e) => {
                    tracing::warn!(partition = t.partition, node = %t.node, error = %e, "replica write");
                    failed += 1;
                }
            }
        }
        drop(replies);
        if acks < need || primary_acks < pw {
            tracing::warn!(acks, failed, need, "write quorum not met");
            let (kind, need, got) = if acks < need {
                ("w", need, acks)
            } else {
                ("pw", pw, primary_acks)
            };
            return Err(RequestError::Unsatisfied { kind, need, got });
        }
        self.replicate(bucket, key, &new);
        Ok(Some(new.object()?))
    }

    fn coverage_or_err(&self, n: u32) -> Result<Vec<Target>, RequestError> {
        self.coverage(n)
            .ok_or_else(|| RequestError::Invalid("insufficient_vnodes_available".into()))
    }

    /// Keys of `bucket` that are not tombstones, over a coverage plan: each
    /// covering vnode lists only the keys whose first primary it answers
    /// for (so no key twice, and nothing to remember across vnodes), in
    /// batches of at most [`LIST_KEYS_BATCH`] scanned keys (one vnode job
    /// each, on ordered backends), handed to `batch` as they come; `batch`
    /// resolving to `false` (the client went away) stops the listing.
    pub async fn list_keys<F, Fut>(&self, bucket: &[u8], mut batch: F) -> Result<(), RequestError>
    where
        F: FnMut(Vec<Vec<u8>>) -> Fut,
        Fut: Future<Output = bool>,
    {
        let props = self.props.get(bucket);
        let plan = self
            .coverage_plan(props.n_val)
            .ok_or_else(|| RequestError::Invalid("insufficient_vnodes_available".into()))?;
        for (t, firsts) in plan {
            let mut after: Option<Vec<u8>> = None;
            loop {
                let req = VnodeReq::ListKeys {
                    bucket: bucket.to_vec(),
                    after: after.clone(),
                    limit: LIST_KEYS_BATCH,
                    ring_size: self.ring.size(),
                    firsts: firsts.clone(),
                };
                let VnodeReply::Keys(keys, last, more) = self.vcall(&t, req).await? else {
                    return Err(RequestError::Storage("unexpected list keys reply".into()));
                };
                if !keys.is_empty() && !batch(keys).await {
                    return Ok(());
                }
                if !more || last.is_none() {
                    break;
                }
                after = last;
            }
        }
        Ok(())
    }

    /// Each local vnode's backend statistics, by partition (a vnode whose
    /// queue is full or that does not answer in time is left out).
    pub async fn backend_stats(&self) -> Vec<(u32, basalt_backend::BackendStats)> {
        let local: Vec<(u32, Arc<Vnode>)> = self
            .vnodes
            .read()
            .iter()
            .map(|(p, v)| (*p, v.clone()))
            .collect();
        let mut out = Vec::new();
        for (p, v) in local {
            let Ok(pending) = v.submit(|st| Ok(st.backend.stats()?)) else {
                continue;
            };
            if let Ok(s) = pending.wait(self.timeout()).await {
                out.push((p, s));
            }
        }
        out
    }

    /// Every bucket holding an object on any vnode, sorted.
    pub async fn list_buckets(&self) -> Result<Vec<Vec<u8>>, RequestError> {
        let mut all = BTreeSet::new();
        let targets = self.coverage_or_err(1)?;
        let mut replies = self.fan_out(&targets, || VnodeReq::ListBuckets);
        while let Some((_, res)) = replies.next().await {
            match res? {
                VnodeReply::Buckets(b) => all.extend(b),
                _ => {
                    return Err(RequestError::Storage(
                        "unexpected list buckets reply".into(),
                    ))
                }
            }
        }
        Ok(all.into_iter().collect())
    }

    /// A 2i query over a covering set of vnodes: every vnode's full result,
    /// merged, deduplicated, sorted by (term, key) and paged here; the
    /// continuation is `base64(term_len:u32 | term | key)` of the page's last result.
    pub async fn index_query(&self, q: IndexQuery) -> Result<IndexPage, RequestError> {
        let props = self.props.get(&q.bucket);
        let after = match &q.continuation {
            None => None,
            Some(c) => Some(
                decode_continuation(c)
                    .ok_or_else(|| RequestError::Invalid("invalid continuation".into()))?,
            ),
        };
        let want_terms = q.return_terms;
        let mut sub = q.clone();
        sub.max_results = None;
        sub.continuation = None;
        sub.return_terms = q.end.is_some() || q.field == b"$key";
        let mut all: BTreeSet<IndexResult> = BTreeSet::new();
        let targets = self.coverage_or_err(props.n_val)?;
        let mut replies = self.fan_out(&targets, || VnodeReq::Index(sub.clone()));
        while let Some((_, res)) = replies.next().await {
            match res? {
                VnodeReply::Index(page) => all.extend(page.results),
                _ => return Err(RequestError::Storage("unexpected index reply".into())),
            }
        }
        drop(replies);
        // `_int` terms order numerically (as Riak), not as decimal text.
        let int = q.field.ends_with(b"_int");
        let cmp = |ta: &[u8], ka: &[u8], tb: &[u8], kb: &[u8]| {
            index_term_cmp(int, ta, tb).then_with(|| ka.cmp(kb))
        };
        let mut results: Vec<IndexResult> = all
            .into_iter()
            .filter(|r| {
                after.as_ref().is_none_or(|(t, k)| {
                    cmp(r.term.as_deref().unwrap_or_default(), &r.key, t, k)
                        == std::cmp::Ordering::Greater
                })
            })
            .collect();
        results.sort_by(|a, b| {
            cmp(
                a.term.as_deref().unwrap_or_default(),
                &a.key,
                b.term.as_deref().unwrap_or_default(),
                &b.key,
            )
        });
        let mut continuation = None;
        if let Some(max) = q.max_results.filter(|m| *m > 0) {
            if results.len() >= max as usize {
                results.truncate(max as usize);
                if let Some(last) = results.last() {
                    continuation = Some(encode_continuation(
                        last.term.as_deref().unwrap_or_default(),
                        &last.key,
                    ));
                }
            }
        }
        if !(want_terms && q.end.is_some()) {
            for r in &mut results {
                r.term = None;
            }
        }
        Ok(IndexPage {
            results,
            continuation,
        })
    }
}

/// Objects each covering vnode reads per round of a CS bucket fold.
pub const CS_FOLD_BATCH: usize = 100;

/// Keys a vnode scans per list-keys job (ordered backends).
pub const LIST_KEYS_BATCH: u32 = 1000;

/// Above every valid key (keys are at most 64 KiB): the open end of a range.
static KEY_ABOVE_ALL: [u8; 65_537] = [0xFF; 65_537];

/// A CS bucket fold (`RpbCSBucketReq`): the objects of one bucket whose keys
/// lie between `start` and `end`, in key order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CsFold {
    /// The storage bucket.
    pub bucket: Vec<u8>,
    /// First key.
    pub start: Vec<u8>,
    /// `start` itself is included (Riak's default: true).
    pub start_incl: bool,
    /// Last key; `None` = to the end of the bucket.
    pub end: Option<Vec<u8>>,
    /// `end` itself is included (Riak's default: false).
    pub end_incl: bool,
    /// Resume after the page that returned this continuation.
    pub continuation: Option<Vec<u8>>,
    /// Page size (0 or `None` = everything).
    pub max_results: Option<u32>,
}

/// One covering vnode's position in a CS bucket fold.
struct FoldCursor {
    target: Target,
    /// The last key this vnode returned (the next round starts after it).
    after: Option<Vec<u8>>,
    /// The vnode has nothing more in the range.
    done: bool,
}

/// One round of a CS bucket fold on a vnode: the (at most `limit`) smallest
/// keys of `bucket` in the range, with their stored objects (tombstones
/// included, so a newer tombstone on one replica hides an older live copy on
/// another), the last key chosen (a key may vanish between the key fold
/// and its read) and whether more keys remain.
#[allow(clippy::too_many_arguments)]
pub(crate) fn cs_fold_batch(
    st: &VnodeState,
    bucket: &[u8],
    from: &[u8],
    from_incl: bool,
    end: Option<&[u8]>,
    end_incl: bool,
    limit: usize,
) -> Result<CsBatch, VnodeError> {
    let range = KeyRange::new(from, end.unwrap_or(&KEY_ABOVE_ALL));
    let ordered = st.backend.capabilities().has(Capability::OrderedKeys);
    let mut keys: BTreeSet<Vec<u8>> = BTreeSet::new();
    let mut more = false;
    st.backend.fold_keys(bucket, Some(&range), &mut |k| {
        let above = if from_incl { k >= from } else { k > from };
        let below = end.is_none_or(|e| if end_incl { k <= e } else { k < e });
        if above && below {
            keys.insert(k.to_vec());
            if keys.len() > limit {
                more = true;
                keys.pop_last();
                if ordered {
                    return std::ops::ControlFlow::Break(());
                }
            }
        }
        std::ops::ControlFlow::Continue(())
    })?;
    let last = keys.last().cloned();
    let mut out = Vec::with_capacity(keys.len());
    for k in keys {
        if let Some(o) = st.read(bucket, &k)? {
            out.push((k, o));
        }
    }
    Ok((out, last, more))
}

/// A vnode's round of a CS bucket fold: objects, last key, more to come.
pub(crate) type CsBatch = (Vec<(Vec<u8>, RiakObject)>, Option<Vec<u8>>, bool);

pub(crate) fn encode_cs_continuation(key: &[u8]) -> Vec<u8> {
    let mut raw = vec![1u8];
    raw.extend_from_slice(key);
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, raw).into_bytes()
}

pub(crate) fn decode_cs_continuation(c: &[u8]) -> Option<Vec<u8>> {
    let raw = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, c).ok()?;
    match raw.split_first() {
        Some((1, key)) if !key.is_empty() => Some(key.to_vec()),
        _ => None,
    }
}

/// `riak_kv_get_core`'s early end of a GET (see [`Node::get_with_basic_quorum`]);
/// only applied with `basic_quorum`.
#[derive(Debug, Clone, Copy)]
struct FailFast {
    /// Not-found + failed replies that end the GET (`None`: wait for all).
    threshold: Option<usize>,
    need: usize,
    notfound_ok: bool,
}

impl FailFast {
    fn new(n: usize, need: u32, notfound_ok: bool, basic_quorum: bool) -> FailFast {
        let need = need as usize;
        let threshold = basic_quorum.then(|| (n / 2 + 1).min((n + 1).saturating_sub(need)));
        FailFast {
            threshold,
            need,
            notfound_ok,
        }
    }

    /// After `answered` replicas answered (or failed), `heads` being the
    /// answers: the GET's result if it ends now.
    fn check(
        &self,
        heads: &[Option<&RiakObject>],
        answered: usize,
        overloaded: bool,
    ) -> Option<Result<GetOutcome, RequestError>> {
        let threshold = self.threshold?;
        let notfounds = if self.notfound_ok {
            0
        } else {
            heads.iter().filter(|h| h.is_none()).count()
        };
        let oks = heads.len() - notfounds;
        let fails = answered.saturating_sub(heads.len());
        if oks >= self.need || notfounds + fails < threshold {
            return None;
        }
        let live = heads.iter().any(|h| h.is_some_and(|o| !o.is_deleted()));
        Some(if fails == 0 && !live {
            Ok(GetOutcome::NotFound)
        } else if overloaded {
            Err(RequestError::Overload)
        } else {
            Err(RequestError::Unsatisfied {
                kind: "r",
                need: self.need as u32,
                got: oks as u32,
            })
        })
    }
}

impl Node {
    /// A CS bucket fold over a covering set of vnodes. Each round asks every
    /// covering vnode that is not finished for its next [`CS_FOLD_BATCH`]
    /// keys after its own cursor (one job per vnode), merges the copies of a
    /// key (as a GET's merge; no quorum, no read repair), and hands `emit`
    /// the keys up to the smallest cursor of the unfinished vnodes, in key
    /// order, tombstones left out. So memory stays at about a batch per
    /// vnode whatever the range. `emit` resolving to `false` stops the fold.
    /// Returns the continuation when `max_results` filled the page.
    pub async fn cs_bucket_fold<F, Fut>(
        &self,
        q: &CsFold,
        mut emit: F,
    ) -> Result<Option<Vec<u8>>, RequestError>
    where
        F: FnMut(Vec<(Vec<u8>, RiakObject)>) -> Fut,
        Fut: Future<Output = bool>,
    {
        let props = self.props.get(&q.bucket);
        let (from, from_incl) = match &q.continuation {
            None => (q.start.clone(), q.start_incl),
            Some(c) => {
                let after = decode_cs_continuation(c)
                    .ok_or_else(|| RequestError::Invalid("invalid continuation".into()))?;
                if after < q.start {
                    (q.start.clone(), q.start_incl)
                } else {
                    (after, false)
                }
            }
        };
        let max = q.max_results.filter(|m| *m > 0).map(|m| m as usize);
        let mut cursors: Vec<FoldCursor> = self
            .coverage_or_err(props.n_val)?
            .into_iter()
            .map(|target| FoldCursor {
                target,
                after: None,
                done: false,
            })
            .collect();
        let mut pending: BTreeMap<Vec<u8>, RiakObject> = BTreeMap::new();
        let mut sent = 0usize;
        loop {
            let mut jobs = Vec::new();
            for (i, c) in cursors.iter().enumerate().filter(|(_, c)| !c.done) {
                let (lo, lo_incl) = match &c.after {
                    Some(a) => (a.clone(), false),
                    None => (from.clone(), from_incl),
                };
                let req = VnodeReq::CsFold {
                    bucket: q.bucket.clone(),
                    from: lo,
                    from_incl: lo_incl,
                    end: q.end.clone(),
                    end_incl: q.end_incl,
                    limit: CS_FOLD_BATCH as u32,
                };
                let t = c.target.clone();
                jobs.push(async move { (i, self.vcall(&t, req).await) });
            }
            for (i, reply) in futures_util::future::join_all(jobs).await {
                let VnodeReply::CsBatch(wire, last, more) = reply? else {
                    return Err(RequestError::Storage("unexpected CS fold reply".into()));
                };
                let mut objs = Vec::with_capacity(wire.len());
                for (k, w) in wire {
                    objs.push((k, w.object()?));
                }
                let c = &mut cursors[i];
                c.done = !more;
                if last.is_some() {
                    c.after = last;
                }
                for (k, o) in objs {
                    let merged = match pending.remove(&k) {
                        Some(m) => RiakObject::merge(&m, &o, props.allow_mult),
                        None => o,
                    };
                    pending.insert(k, merged);
                }
            }
            // Every key up to the smallest cursor of an unfinished vnode is
            // final: no vnode can still return a smaller one.
            let safe: Option<Vec<u8>> = cursors
                .iter()
                .filter(|c| !c.done)
                .filter_map(|c| c.after.clone())
                .min();
            let finished = cursors.iter().all(|c| c.done);
            let rest = match &safe {
                Some(s) if !finished => {
                    let mut rest = pending.split_off(s);
                    if let Some(v) = rest.remove(s) {
                        pending.insert(s.clone(), v);
                    }
                    rest
                }
                _ => BTreeMap::new(),
            };
            let ready = std::mem::replace(&mut pending, rest);
            let mut batch = Vec::new();
            let mut full = false;
            for (k, o) in ready {
                if o.is_deleted() {
                    continue;
                }
                batch.push((k, o));
                sent += 1;
                if max.is_some_and(|m| sent >= m) {
                    full = true;
                    break;
                }
            }
            let last = batch.last().map(|(k, _)| k.clone());
            if !batch.is_empty() && !emit(batch).await {
                return Ok(None);
            }
            if full {
                return Ok(last.map(|k| encode_cs_continuation(&k)));
            }
            if finished {
                return Ok(None);
            }
        }
    }

    /// DELETE: a tombstone PUT ([`Node::put`]), then, unless the config's
    /// `delete_mode` is `keep`, a task that waits the mode's delay and reaps
    /// the tombstone ([`Node::reap_tombstone`]). Reaps pending at shutdown
    /// are dropped (the tombstones stay, as in Riak after a vnode restart).
    /// Must run inside a tokio runtime.
    pub async fn delete(
        self: &Arc<Self>,
        bucket: &[u8],
        key: &[u8],
        client: Option<VClock>,
        opts: &PutOpts,
    ) -> Result<(), RequestError> {
        let tomb = Content {
            deleted: true,
            ..Content::default()
        };
        let written = self.put(bucket, key, client, tomb, opts).await?;
        let delay = self.config.delete_mode.delay();
        if let (Some(obj), Some(delay)) = (written, delay) {
            if obj.is_deleted() {
                let node = Arc::clone(self);
                let (b, k) = (bucket.to_vec(), key.to_vec());
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    match node.reap_tombstone(&b, &k, &obj.vclock).await {
                        Ok(n) => tracing::debug!(replicas = n, "tombstone reap"),
                        Err(e) => tracing::debug!(error = %e, "tombstone reap"),
                    }
                });
            }
        }
        Ok(())
    }

    /// Removes a tombstone from the backends of its `n_val` replicas if all
    /// of them hold it with exactly this clock (Riak's reap: every replica
    /// must agree); each replica re-checks the clock in the same job as the
    /// removal, so a write that raced the reap survives. Returns the
    /// replicas reaped (0 when not all held the tombstone).
    pub async fn reap_tombstone(
        &self,
        bucket: &[u8],
        key: &[u8],
        vclock: &VClock,
    ) -> Result<usize, RequestError> {
        let props = self.props.get(bucket);
        let targets = self.key_targets(bucket, key, props.n_val);
        // Every replica must be a reachable primary holding this tombstone.
        if targets.len() < props.n_val as usize || targets.iter().any(|t| !t.primary) {
            return Ok(0);
        }
        let head = || VnodeReq::Head {
            bucket: bucket.to_vec(),
            key: key.to_vec(),
        };
        let mut replies = self.fan_out(&targets, head);
        while let Some((_, res)) = replies.next().await {
            let same = match res? {
                VnodeReply::Object(Some(w), _) => w
                    .head()
                    .is_ok_and(|o| o.is_deleted() && o.vclock.same_events(vclock)),
                _ => false,
            };
            if !same {
                return Ok(0);
            }
        }
        drop(replies);
        let reap = || VnodeReq::ReapTombstone {
            bucket: bucket.to_vec(),
            key: key.to_vec(),
            vclock: vclock.encode(),
        };
        let mut reaped = 0;
        let mut replies = self.fan_out(&targets, reap);
        while let Some((_, res)) = replies.next().await {
            if matches!(res?, VnodeReply::Reaped(true)) {
                reaped += 1;
            }
        }
        Ok(reaped)
    }
}

/// Refuses a data directory written by a node of another name: the vnodes'
/// clocks and the cluster state belong to the name in `<data_dir>/NODE`.
fn check_node_name(config: &Config) -> Result<(), OpenError> {
    let path = config.data_dir.join("NODE");
    match std::fs::read_to_string(&path) {
        Ok(name) if name.trim() == config.node_name => Ok(()),
        Ok(name) => Err(OpenError::Config(ConfigError(format!(
            "data directory {} belongs to node {:?}, not {:?}; start it with --node-name {} or use another --data-dir",
            config.data_dir.display(),
            name.trim(),
            config.node_name,
            name.trim()
        )))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            crate::btypes::atomic_write(&path, format!("{}\n", config.node_name).as_bytes())?;
            Ok(())
        }
        Err(e) => Err(OpenError::Io(e)),
    }
}

/// Orders two 2i terms: numerically when `int` and both parse as `i64`
/// (`_int` fields), else bytewise.
fn index_term_cmp(int: bool, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    let parse = |t: &[u8]| std::str::from_utf8(t).ok()?.parse::<i64>().ok();
    match (int, parse(a), parse(b)) {
        (true, Some(x), Some(y)) => x.cmp(&y),
        _ => a.cmp(b),
    }
}

pub(crate) fn encode_continuation(term: &[u8], key: &[u8]) -> String {
    let mut raw = (term.len() as u32).to_be_bytes().to_vec();
    raw.extend_from_slice(term);
    raw.extend_from_slice(key);
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, raw)
}

pub(crate) fn decode_continuation(c: &str) -> Option<(Vec<u8>, Vec<u8>)> {
    let raw = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, c).ok()?;
    let len = u32::from_be_bytes(raw.get(..4)?.try_into().ok()?) as usize;
    let term = raw.get(4..4usize.checked_add(len)?)?.to_vec();
    let key = raw.get(4 + len..)?.to_vec();
    Some((term, key))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(v: &[u8]) -> Content {
        Content {
            value: v.to_vec(),
            value_len: v.len() as u32,
            ..Content::default()
        }
    }

    #[test]
    fn coordinate_siblings_and_resolution() {
        let props = BucketProps {
            allow_mult: true,
            ..BucketProps::default()
        };
        let o1 = coordinate(None, None, c(b"a"), &props, b"n/1", 10).unwrap_or_default();
        let o2 = coordinate(Some(&o1), None, c(b"b"), &props, b"n/1", 11).unwrap_or_default();
        assert_eq!(o2.contents.len(), 2);
        assert_eq!(o2.vclock.counter(b"n/1"), 2);
        let o3 = coordinate(Some(&o2), Some(&o2.vclock), c(b"c"), &props, b"n/1", 12)
            .unwrap_or_default();
        assert_eq!(o3.contents.len(), 1);
        let single = coordinate(
            Some(&o1),
            None,
            c(b"b"),
            &BucketProps::default(),
            b"n/1",
            11,
        )
        .unwrap_or_default();
        assert_eq!(single.contents.len(), 1);
        let mut tomb = c(b"");
        tomb.deleted = true;
        assert!(coordinate(None, None, tomb.clone(), &props, b"n/1", 1).is_none());
        assert!(
            coordinate(Some(&o3), None, tomb, &props, b"n/1", 13).is_some_and(|o| o.is_deleted())
        );
    }

    #[test]
    fn a_full_disk_is_its_own_error() {
        let io = VnodeError::Backend(BackendError::Io {
            op: "append",
            path: "journal".into(),
            source: std::io::Error::from(std::io::ErrorKind::StorageFull),
        });
        assert!(matches!(RequestError::from(io), RequestError::DiskFull(_)));
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

    #[test]
    fn int_terms_order_numerically() {
        use std::cmp::Ordering::*;
        assert_eq!(index_term_cmp(true, b"-2", b"-1"), Less);
        assert_eq!(index_term_cmp(true, b"9", b"10"), Less);
        assert_eq!(index_term_cmp(true, b"-1", b"0"), Less);
        assert_eq!(index_term_cmp(false, b"9", b"10"), Greater);
    }

    #[test]
    fn fail_fast_follows_riak_get_core() {
        let obj = |deleted: bool| {
            let mut c = c(b"v");
            c.deleted = deleted;
            RiakObject {
                vclock: VClock::default(),
                contents: vec![c],
            }
        };
        let (dead, live) = (obj(true), obj(false));
        // n = 3, r = 1, notfound_ok = false: basic_quorum gives up after 2
        // not-founds (a majority); without it, never early.
        let ff = FailFast::new(3, 1, false, true);
        assert_eq!(ff.threshold, Some(2));
        assert!(ff.check(&[None], 1, false).is_none());
        assert!(matches!(
            ff.check(&[None, None], 2, false),
            Some(Ok(GetOutcome::NotFound))
        ));
        assert!(FailFast::new(3, 1, false, false)
            .check(&[None, None], 2, false)
            .is_none());
        // r = 3: one not-found already makes r unreachable.
        assert_eq!(FailFast::new(3, 3, false, true).threshold, Some(1));
        // Tombstones and not-founds → not found; a live object → r error.
        assert!(matches!(
            FailFast::new(3, 2, false, true).check(&[Some(&dead), None, None], 3, false),
            Some(Ok(GetOutcome::NotFound))
        ));
        assert!(matches!(
            FailFast::new(3, 2, false, true).check(&[Some(&live), None, None], 3, false),
            Some(Err(RequestError::Unsatisfied {
                need: 2,
                got: 1,
                ..
            }))
        ));
        // notfound_ok: not-founds are successes; failures still count.
        let ok = FailFast::new(3, 2, true, true);
        assert!(ok.check(&[None, None], 2, false).is_none());
        assert!(matches!(
            ok.check(&[], 2, true),
            Some(Err(RequestError::Overload))
        ));
    }

    #[test]
    fn cs_continuation_roundtrip() {
        let c = encode_cs_continuation(b"key");
        assert_eq!(decode_cs_continuation(&c), Some(b"key".to_vec()));
        assert_eq!(decode_cs_continuation(b"!!"), None);
        let empty = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, [1u8]);
        assert_eq!(decode_cs_continuation(empty.as_bytes()), None);
    }

    #[test]
    fn continuation_roundtrip() {
        let c = encode_continuation(b"t", b"k");
        assert_eq!(
            decode_continuation(&c),
            Some((b"t".to_vec(), b"k".to_vec()))
        );
        assert_eq!(decode_continuation("!!"), None);
    }
}
