//! The request coordinator of a node: GET as n HEADs + 1 GET with sibling
//! merge and read repair, PUT through a coordinating vnode then the other
//! replicas, DELETE as a tombstone PUT (then tombstone reaping per
//! `delete_mode`), listings, 2i and the CS bucket fold over a covering set.

use crate::btypes::{split_storage_bucket, BucketTypes};
use crate::config::{Config, ConfigError};
use crate::object::{Content, RiakObject};
use crate::props::{BucketProps, PropsError, PropsStore};
use crate::ring::{actor, key_hash, Ring};
use crate::vclock::VClock;
use crate::vnode::{Pending, Vnode, VnodeError, VnodeState};
use basalt_backend::{BackendError, Capability, IndexPage, IndexQuery, IndexResult, KeyRange};
use parking_lot::{RwLock, RwLockWriteGuard};
use std::collections::{BTreeMap, BTreeSet};
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

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
    /// A storage failure.
    #[error("storage error: {0}")]
    Storage(String),
}

impl From<VnodeError> for RequestError {
    fn from(e: VnodeError) -> Self {
        match e {
            VnodeError::Overload => RequestError::Overload,
            VnodeError::Timeout => RequestError::Timeout,
            VnodeError::Backend(
                BackendError::NotSupported { .. } | BackendError::InvalidInput(_),
            ) => RequestError::Invalid(e.to_string()),
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
}

/// A node: ring, vnodes and bucket props.
pub struct Node {
    stats: NodeStats,
    config: Config,
    ring: Ring,
    vnodes: Vec<Vnode>,
    props: PropsStore,
    types: Arc<BucketTypes>,
    gate: Arc<RwLock<()>>,
}

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
    let mut obj = match local {
        None => {
            let vclock = client.cloned().unwrap_or_default();
            RiakObject {
                vclock,
                contents: vec![content],
            }
        }
        Some(l) => {
            // A delete without a clock deletes what it sees.
            let client = if is_delete && client.is_none() {
                Some(&l.vclock)
            } else {
                client
            };
            let descends = client.is_some_and(|c| c.descends(&l.vclock));
            let vclock = match client {
                Some(c) => c.merge(&l.vclock),
                None => l.vclock.clone(),
            };
            if props.last_write_wins || descends || !props.allow_mult {
                RiakObject {
                    vclock,
                    contents: vec![content],
                }
            } else {
                let mut contents: Vec<Content> =
                    l.contents.iter().filter(|c| !c.deleted).cloned().collect();
                contents.push(content);
                RiakObject { vclock, contents }
            }
        }
    };
    obj.vclock.increment(actor, now_secs);
    obj.vclock.prune(now_secs, &props.prune());
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
        Some(l) if props.last_write_wins => (l != incoming).then(|| incoming.clone()),
        Some(l) => {
            let merged = RiakObject::merge(l, incoming, props.allow_mult);
            (merged != *l).then_some(merged)
        }
    }
}

impl Node {
    /// Opens every vnode's backend (`<data_dir>/vnodes/<partition>`) and the props file.
    pub fn open(config: Config) -> Result<Node, OpenError> {
        config.validate()?;
        let ring = Ring::new(config.ring_size)
            .ok_or_else(|| ConfigError(format!("bad ring_size {}", config.ring_size)))?;
        std::fs::create_dir_all(config.data_dir.join("vnodes"))?;
        let gate = Arc::new(RwLock::new(()));
        let bcfg = basalt_backends::BackendConfig {
            sync: config.sync,
            ..Default::default()
        };
        let mut vnodes = Vec::with_capacity(ring.size() as usize);
        for p in 0..ring.size() {
            let dir = config.data_dir.join("vnodes").join(p.to_string());
            let backend =
                basalt_backends::open_backend(&config.backend, &dir, &bcfg).map_err(|source| {
                    OpenError::Backend {
                        partition: p,
                        source,
                    }
                })?;
            let state = VnodeState {
                partition: p,
                actor: actor(&config.node_name, p),
                backend,
                sync: config.sync,
            };
            vnodes.push(Vnode::start(
                state,
                config.limits.vnode_queue_len,
                gate.clone(),
            )?);
        }
        let types = Arc::new(BucketTypes::open(Some(
            config.data_dir.join("bucket_types.json"),
        ))?);
        let props = PropsStore::open(
            Some(config.data_dir.join("bucket_props.json")),
            types.clone(),
        )?;
        tracing::info!(ring_size = ring.size(), backend = %config.backend, data_dir = %config.data_dir.display(), "vnodes open");
        Ok(Node {
            stats: NodeStats::default(),
            config,
            ring,
            vnodes,
            props,
            types,
            gate,
        })
    }

    /// Operation counters.
    pub fn stats(&self) -> &NodeStats {
        &self.stats
    }

    /// Jobs waiting in each vnode's queue, by partition.
    pub fn vnode_queue_lengths(&self) -> Vec<usize> {
        self.vnodes.iter().map(Vnode::queue_len).collect()
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

    /// The `n_val` primary partitions of a key (`bucket` = storage bucket).
    pub fn preflist_of(&self, bucket: &[u8], key: &[u8]) -> Vec<u32> {
        self.preflist(bucket, key, self.props.get(bucket).n_val)
    }

    /// Holds every vnode worker before its next job while the guard lives
    /// (for overload tests and maintenance).
    pub fn pause_vnodes(&self) -> RwLockWriteGuard<'_, ()> {
        self.gate.write()
    }

    /// Stops every vnode (queued jobs finish) and closes the backends.
    pub fn close(&self) {
        for v in &self.vnodes {
            v.shutdown();
        }
    }

    fn timeout(&self) -> Duration {
        Duration::from_millis(self.config.limits.request_timeout_ms)
    }

    fn preflist(&self, bucket: &[u8], key: &[u8], n: u32) -> Vec<u32> {
        let (btype, name) = split_storage_bucket(bucket);
        self.ring.preflist(&key_hash(btype, name, key), n)
    }

    fn submit<T, F>(&self, p: u32, f: F) -> Result<Pending<T>, VnodeError>
    where
        T: Send + 'static,
        F: FnOnce(&VnodeState) -> Result<T, VnodeError> + Send + 'static,
    {
        self.vnodes
            .get(p as usize)
            .ok_or(VnodeError::Closed)?
            .submit(f)
    }

    /// GET: HEAD the preference list, wait for `r`, fetch the value from the
    /// replica(s) holding the winning version(s), merge, read-repair. Uses
    /// the bucket's `basic_quorum` prop (see [`Node::get_with_basic_quorum`]).
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
    /// taken in preference-list order; giving up answers not found when no
    /// replica failed and none answered a live object, else the quorum
    /// error (or `overload`), and does no read repair. Without it the GET
    /// waits for every replica.
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
        let pl = self.preflist(bucket, key, props.n_val);
        let mut pending = Vec::new();
        let mut overloaded = false;
        for &p in &pl {
            let (b, k) = (bucket.to_vec(), key.to_vec());
            match self.submit(p, move |st| st.read_head(&b, &k)) {
                Ok(w) => pending.push((p, w)),
                Err(VnodeError::Overload) => overloaded = true,
                Err(e) => tracing::warn!(partition = p, error = %e, "get head"),
            }
        }
        let mut heads: Vec<(u32, Option<RiakObject>)> = Vec::new();
        let fail_fast = FailFast::new(
            pl.len(),
            r.max(pr),
            notfound_ok,
            basic_quorum.unwrap_or(props.basic_quorum),
        );
        let submit_fails = pl.len() - pending.len();
        for (i, (p, w)) in pending.into_iter().enumerate() {
            match w.wait(self.timeout()).await {
                Ok(h) => heads.push((p, h)),
                Err(VnodeError::Overload) => overloaded = true,
                Err(e) => tracing::warn!(partition = p, error = %e, "get head"),
            }
            if let Some(out) = fail_fast.check(&heads, submit_fails + i + 1, overloaded) {
                return out;
            }
        }
        let found: Vec<(u32, RiakObject)> = heads
            .iter()
            .filter_map(|(p, h)| h.clone().map(|h| (*p, h)))
            .collect();
        let successes = if notfound_ok {
            heads.len()
        } else {
            found.len()
        } as u32;
        let need = r.max(pr);
        if successes < need {
            if overloaded {
                return Err(RequestError::Overload);
            }
            if found.is_empty() && heads.len() as u32 >= need {
                return Ok(GetOutcome::NotFound);
            }
            return Err(RequestError::Unsatisfied {
                kind: "r",
                need,
                got: successes,
            });
        }
        if found.is_empty() {
            return Ok(GetOutcome::NotFound);
        }
        // Replicas whose clock no other replica dominates, one per distinct clock.
        let mut winners: Vec<&(u32, RiakObject)> = Vec::new();
        for f in &found {
            let dominated = found.iter().any(|o| o.1.vclock.dominates(&f.1.vclock));
            if !dominated && !winners.iter().any(|w| w.1.vclock.same_events(&f.1.vclock)) {
                winners.push(f);
            }
        }
        let mut merged: Option<RiakObject> = None;
        for (p, _) in winners {
            let (b, k) = (bucket.to_vec(), key.to_vec());
            let obj = self
                .submit(*p, move |st| st.read(&b, &k))?
                .wait(self.timeout())
                .await?;
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
        for (p, h) in &heads {
            let stale = h.as_ref().is_none_or(|h| {
                !h.vclock.same_events(&merged.vclock) || h.contents.len() != merged.contents.len()
            });
            if stale {
                let (b, k, o, pp) = (bucket.to_vec(), key.to_vec(), merged.clone(), props.clone());
                tracing::debug!(partition = p, "read repair");
                let _ = self.submit(*p, move |st| {
                    let local = st.read(&b, &k)?;
                    if let Some(new) = reconcile(local.as_ref(), &o, &pp) {
                        st.write(&b, &k, local.as_ref(), &new)?;
                    }
                    Ok(())
                });
            }
        }
        if merged.is_deleted() {
            Ok(GetOutcome::Tombstone(merged.vclock))
        } else {
            Ok(GetOutcome::Found(merged))
        }
    }

    /// PUT (and DELETE when `content.deleted`): conditional checks, then the
    /// coordinating vnode (first in the preference list) builds and writes
    /// the new version, then the other replicas reconcile it; waits for
    /// `max(w, dw, pw)` acks. Returns the new object (`None`: nothing written).
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
        let pl = self.preflist(bucket, key, props.n_val);
        let Some((&coord, rest)) = pl.split_first() else {
            return Err(RequestError::Invalid("empty preference list".into()));
        };
        let (b, k, pp) = (bucket.to_vec(), key.to_vec(), props.clone());
        let new = self
            .submit(coord, move |st| {
                let local = st.read(&b, &k)?;
                let new = coordinate(
                    local.as_ref(),
                    client.as_ref(),
                    content,
                    &pp,
                    &st.actor,
                    secs,
                );
                if let Some(n) = &new {
                    st.write(&b, &k, local.as_ref(), n)?;
                }
                Ok(new)
            })?
            .wait(self.timeout())
            .await?;
        let Some(new) = new else { return Ok(None) };
        let mut pending = Vec::new();
        let mut failed = 0u32;
        for &p in rest {
            let (b, k, o, pp) = (bucket.to_vec(), key.to_vec(), new.clone(), props.clone());
            match self.submit(p, move |st| {
                let local = st.read(&b, &k)?;
                if let Some(n) = reconcile(local.as_ref(), &o, &pp) {
                    st.write(&b, &k, local.as_ref(), &n)?;
                }
                Ok(())
            }) {
                Ok(x) => pending.push(x),
                Err(e) => {
                    tracing::warn!(partition = p, error = %e, "replica write");
                    failed += 1;
                }
            }
        }
        let mut acks = 1u32;
        for x in pending {
            match x.wait(self.timeout()).await {
                Ok(()) => acks += 1,
                Err(e) => {
                    tracing::warn!(error = %e, "replica write");
                    failed += 1;
                }
            }
        }
        let need = w.max(dw).max(pw);
        if acks < need {
            tracing::warn!(acks, failed, need, "write quorum not met");
            return Err(RequestError::Unsatisfied {
                kind: "w",
                need,
                got: acks,
            });
        }
        Ok(Some(new))
    }

    /// Keys of `bucket` that are not tombstones, one batch per covering vnode
    /// (deduplicated across batches), handed to `batch` as each vnode
    /// answers; `batch` resolving to `false` (the client went away) stops
    /// the listing.
    pub async fn list_keys<F, Fut>(&self, bucket: &[u8], mut batch: F) -> Result<(), RequestError>
    where
        F: FnMut(Vec<Vec<u8>>) -> Fut,
        Fut: Future<Output = bool>,
    {
        let props = self.props.get(bucket);
        let mut seen = BTreeSet::new();
        for p in self.ring.covering_set(props.n_val) {
            let b = bucket.to_vec();
            let keys = self
                .submit(p, move |st| {
                    let mut keys = Vec::new();
                    st.backend.fold_keys(&b, None, &mut |k| {
                        keys.push(k.to_vec());
                        std::ops::ControlFlow::Continue(())
                    })?;
                    let mut live = Vec::new();
                    for k in keys {
                        if st.read_head(&b, &k)?.is_some_and(|o| !o.is_deleted()) {
                            live.push(k);
                        }
                    }
                    Ok(live)
                })?
                .wait(self.timeout())
                .await?;
            let fresh: Vec<Vec<u8>> = keys
                .into_iter()
                .filter(|k| seen.insert(k.clone()))
                .collect();
            if !fresh.is_empty() && !batch(fresh).await {
                break;
            }
        }
        Ok(())
    }

    /// Each vnode's backend statistics, by partition (a vnode whose queue
    /// is full or that does not answer in time is left out).
    pub async fn backend_stats(&self) -> Vec<(u32, basalt_backend::BackendStats)> {
        let mut out = Vec::new();
        for p in 0..self.ring.size() {
            let Ok(pending) = self.submit(p, |st| Ok(st.backend.stats()?)) else {
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
        for p in 0..self.ring.size() {
            let b = self
                .submit(p, |st| Ok(st.backend.list_buckets()?))?
                .wait(self.timeout())
                .await?;
            all.extend(b);
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
        for p in self.ring.covering_set(props.n_val) {
            let sq = sub.clone();
            let page = self
                .submit(p, move |st| Ok(st.backend.index_query(&sq)?))?
                .wait(self.timeout())
                .await?;
            all.extend(page.results);
        }
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
    partition: u32,
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
fn cs_fold_batch(
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
type CsBatch = (Vec<(Vec<u8>, RiakObject)>, Option<Vec<u8>>, bool);

fn encode_cs_continuation(key: &[u8]) -> Vec<u8> {
    let mut raw = vec![1u8];
    raw.extend_from_slice(key);
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, raw).into_bytes()
}

fn decode_cs_continuation(c: &[u8]) -> Option<Vec<u8>> {
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
        heads: &[(u32, Option<RiakObject>)],
        answered: usize,
        overloaded: bool,
    ) -> Option<Result<GetOutcome, RequestError>> {
        let threshold = self.threshold?;
        let notfounds = if self.notfound_ok {
            0
        } else {
            heads.iter().filter(|h| h.1.is_none()).count()
        };
        let oks = heads.len() - notfounds;
        let fails = answered.saturating_sub(heads.len());
        if oks >= self.need || notfounds + fails < threshold {
            return None;
        }
        let live = heads
            .iter()
            .any(|h| h.1.as_ref().is_some_and(|o| !o.is_deleted()));
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
            .ring
            .covering_set(props.n_val)
            .into_iter()
            .map(|partition| FoldCursor {
                partition,
                after: None,
                done: false,
            })
            .collect();
        let mut pending: BTreeMap<Vec<u8>, RiakObject> = BTreeMap::new();
        let mut sent = 0usize;
        loop {
            let mut jobs = Vec::new();
            for (i, c) in cursors.iter().enumerate().filter(|(_, c)| !c.done) {
                let (b, end, end_incl) = (q.bucket.clone(), q.end.clone(), q.end_incl);
                let (lo, lo_incl) = match &c.after {
                    Some(a) => (a.clone(), false),
                    None => (from.clone(), from_incl),
                };
                let job = self.submit(c.partition, move |st| {
                    cs_fold_batch(
                        st,
                        &b,
                        &lo,
                        lo_incl,
                        end.as_deref(),
                        end_incl,
                        CS_FOLD_BATCH,
                    )
                })?;
                jobs.push((i, job));
            }
            for (i, job) in jobs {
                let (objs, last, more) = job.wait(self.timeout()).await?;
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
        let pl = self.preflist(bucket, key, props.n_val);
        let mut heads = Vec::with_capacity(pl.len());
        for &p in &pl {
            let (b, k) = (bucket.to_vec(), key.to_vec());
            heads.push(self.submit(p, move |st| st.read_head(&b, &k))?);
        }
        for h in heads {
            let same = h
                .wait(self.timeout())
                .await?
                .is_some_and(|o| o.is_deleted() && o.vclock.same_events(vclock));
            if !same {
                return Ok(0);
            }
        }
        let mut jobs = Vec::with_capacity(pl.len());
        for &p in &pl {
            let (b, k, vc) = (bucket.to_vec(), key.to_vec(), vclock.clone());
            jobs.push(self.submit(p, move |st| st.reap_tombstone(&b, &k, &vc))?);
        }
        let mut reaped = 0;
        for j in jobs {
            if j.wait(self.timeout()).await? {
                reaped += 1;
            }
        }
        Ok(reaped)
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

fn encode_continuation(term: &[u8], key: &[u8]) -> String {
    let mut raw = (term.len() as u32).to_be_bytes().to_vec();
    raw.extend_from_slice(term);
    raw.extend_from_slice(key);
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, raw)
}

fn decode_continuation(c: &str) -> Option<(Vec<u8>, Vec<u8>)> {
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
            Some(RiakObject {
                vclock: VClock::default(),
                contents: vec![c],
            })
        };
        // n = 3, r = 1, notfound_ok = false: basic_quorum gives up after 2
        // not-founds (a majority); without it, never early.
        let ff = FailFast::new(3, 1, false, true);
        assert_eq!(ff.threshold, Some(2));
        assert!(ff.check(&[(0, None)], 1, false).is_none());
        assert!(matches!(
            ff.check(&[(0, None), (1, None)], 2, false),
            Some(Ok(GetOutcome::NotFound))
        ));
        assert!(FailFast::new(3, 1, false, false)
            .check(&[(0, None), (1, None)], 2, false)
            .is_none());
        // r = 3: one not-found already makes r unreachable.
        assert_eq!(FailFast::new(3, 3, false, true).threshold, Some(1));
        // Tombstones and not-founds → not found; a live object → r error.
        assert!(matches!(
            FailFast::new(3, 2, false, true).check(
                &[(0, obj(true)), (1, None), (2, None)],
                3,
                false
            ),
            Some(Ok(GetOutcome::NotFound))
        ));
        assert!(matches!(
            FailFast::new(3, 2, false, true).check(
                &[(0, obj(false)), (1, None), (2, None)],
                3,
                false
            ),
            Some(Err(RequestError::Unsatisfied {
                need: 2,
                got: 1,
                ..
            }))
        ));
        // notfound_ok: not-founds are successes; failures still count.
        let ok = FailFast::new(3, 2, true, true);
        assert!(ok.check(&[(0, None), (1, None)], 2, false).is_none());
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
