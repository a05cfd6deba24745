//! Full-sync on cached trees: riak_kv's `ttaaefs_manager`, one per node,
//! no leader.
//!
//! Each node has one peer in the other cluster (`[repl.fullsync] peer`,
//! default: a node of its `sink`) and a scope: `all` (every bucket of one
//! `n_val`) or one bucket. A check compares the two clusters as an
//! anti-entropy exchange whose other side is the peer cluster, asked over
//! the cluster port (`Msg::ReplFold`, any `aae_fold` query):
//!
//! 1. bucket types and props are sent first (merged there by change stamp);
//! 2. scope `all`: the merged roots of both clusters' **cached trees**
//!    (no fold: an in-sync check of any size costs two small messages per
//!    vnode), twice, intersected (writes in flight differ once, not twice);
//!    then the branches that differ, then up to `max_results` segments
//!    (× `range_boost` for a `range` check); scope bucket: a tree of the
//!    bucket folded on both sides (medium, or small for an `hour` check);
//! 3. the keys and clocks of those segments on both sides, filtered by
//!    last-modified time for `day` (24 h), `hour` and `range` checks;
//! 4. [`super::compare`] decides each key's direction: newer here → a
//!    reference queued on the local sink queue at full-sync priority;
//!    newer there → queued on the peer's queue named `peer_queue` (if set;
//!    bi-directional repair), else only counted; lone tombstones reaped
//!    where they are (unless `delete_mode = keep`), after merging them into
//!    every replica (as a replicated reap: a reap cut short by a crash
//!    leaves a tombstone on some replicas only).
//!
//! When checks run is [`super::schedule`]'s: `*_check` per day, sliced by
//! node and `cluster_slice`. After an unclean restart (a queue lost what it
//! held in memory) an `all` check runs a minute after start.

use super::compare::{self, Repairs};
use super::schedule::{self, AutoState, Check, Learnt, Place, Wants};
use super::Repl;
use super::{Entry, Payload, Priority};
use crate::aae::{FoldQuery, FoldResult, RangeFilter};
use crate::cluster::{decode_body, encode_body, Msg, ReplItem, Reply, CONTROL_TIMEOUT};
use crate::config::{DeleteMode, FullSyncConfig};
use crate::limits::AAE_FOLD_MAX_BRANCHES;
use basalt_backend::TreeSize;
use basalt_engine::clock::now_secs;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Segments per branch of a tictac tree.
const BRANCH: u32 = 256;

/// What one check did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FullSync {
    /// The kind run (`auto` resolved).
    pub check: Option<Check>,
    /// The last-modified range it looked at (seconds), if any.
    pub modified: Option<(u64, u64)>,
    /// Both clusters agreed (at the tree level, or every differing key
    /// turned out equal).
    pub in_sync: bool,
    /// Segments whose keys were compared.
    pub segments: usize,
    /// Keys newer here (or only here).
    pub source_ahead: u64,
    /// Keys newer on the peer cluster (or only there).
    pub sink_ahead: u64,
    /// References queued for the sink.
    pub queued: u64,
    /// Keys asked of the peer's queue.
    pub requeued_to_peer: u64,
    /// Lone tombstones reaped here or sent to be reaped there.
    pub reaped: u64,
    /// How long it took.
    pub duration: Duration,
}

impl FullSync {
    /// One line for logs and the admin.
    pub fn summary(&self) -> String {
        let kind = self.check.map_or("none", Check::name);
        if self.check.is_none() {
            return "full-sync skipped (auto check suppressed after a futile one)\n".into();
        }
        format!(
            "full-sync {kind} check: {} in {:.3} s; {} segments compared, source ahead {}, sink ahead {}; {} queued for the sink, {} asked of the peer's queue, {} lone tombstones reaped or sent to be reaped\n",
            if self.in_sync { "in sync" } else { "not in sync" },
            self.duration.as_secs_f64(),
            self.segments,
            self.source_ahead,
            self.sink_ahead,
            self.queued,
            self.requeued_to_peer,
            self.reaped
        )
    }

    /// The facts of [`Self::summary`] as JSON (`--json repl fullsync`).
    pub fn json(&self) -> serde_json::Value {
        serde_json::json!({
            "check": self.check.map(Check::name),
            "in_sync": self.in_sync,
            "seconds": self.duration.as_secs_f64(),
            "segments": self.segments,
            "source_ahead": self.source_ahead,
            "sink_ahead": self.sink_ahead,
            "queued": self.queued,
            "requeued_to_peer": self.requeued_to_peer,
            "reaped": self.reaped,
        })
    }
}

/// Counters and memory of the full-sync manager.
#[derive(Debug, Default)]
pub struct FullSyncState {
    /// Checks run, by kind (all, day, hour, range).
    pub checks: [AtomicU64; 4],
    /// Checks that found the clusters in sync.
    pub in_sync: AtomicU64,
    /// Checks that did not.
    pub not_in_sync: AtomicU64,
    /// Checks that failed.
    pub failed: AtomicU64,
    /// Keys found newer here.
    pub source_ahead: AtomicU64,
    /// Keys found newer on the peer cluster.
    pub sink_ahead: AtomicU64,
    /// References queued for the sink.
    pub queued: AtomicU64,
    /// Keys asked of the peer's queue.
    pub requeued: AtomicU64,
    /// Lone tombstones reaped.
    pub reaped: AtomicU64,
    /// Milliseconds spent in checks.
    pub millis: AtomicU64,
    /// What the auto check learnt.
    pub auto: Mutex<AutoState>,
    /// The last check's summary.
    pub last: Mutex<Option<String>>,
    /// One check at a time per node.
    pub running: tokio::sync::Mutex<()>,
}

impl Repl {
    fn fs_config(&self) -> &FullSyncConfig {
        &self.config.repl.fullsync
    }

    /// The peer a check asks: the configured one, else a node of the sink.
    fn fullsync_peer(&self) -> Result<String, String> {
        let c = self.fs_config();
        if !c.peer.is_empty() {
            return Ok(c.peer.clone());
        }
        let sink = self.fullsync_sink()?;
        let peers = sink.peers.lock();
        let p = peers.peers();
        p.iter()
            .find(|p| p.last_error.is_none())
            .or(p.first())
            .map(|p| p.addr.clone())
            .ok_or_else(|| format!("sink {} has no peers", sink.name()))
    }

    /// The local sink whose queue takes the repairs.
    fn fullsync_sink(&self) -> Result<Arc<super::Sink>, String> {
        let name = &self.fs_config().sink;
        self.repl
            .sink(name)
            .or_else(|| {
                if name.is_empty() {
                    self.repl.sinks().into_iter().next()
                } else {
                    None
                }
            })
            .ok_or_else(|| {
                format!("no sink named {name:?} for full-sync repairs ([repl.fullsync] sink)")
            })
    }

    /// Runs one check now (`Auto` resolved first); the admin's
    /// `repl fullsync [KIND]` and the schedule both come here.
    pub async fn fullsync(self: &Arc<Self>, check: Check) -> Result<FullSync, String> {
        let st = &self.fullsync_state;
        let _one = st.running.lock().await;
        let started = now_secs();
        let (kind, modified) = match check {
            Check::Auto => {
                let window = self.fs_config().window();
                match schedule::resolve_auto(&mut st.auto.lock(), started, window) {
                    None => return Ok(FullSync::default()),
                    Some(x) => x,
                }
            }
            Check::All => (Check::All, None),
            Check::Day => (
                Check::Day,
                Some((started.saturating_sub(schedule::DAY), started)),
            ),
            Check::Hour => (Check::Hour, Some((started.saturating_sub(3600), started))),
            Check::Range => {
                let learnt = st.auto.lock().range;
                let since = st
                    .auto
                    .lock()
                    .last_in_sync
                    .map(|t| (t.saturating_sub(schedule::RANGE_SLACK_SECS), started));
                (
                    Check::Range,
                    learnt
                        .or(since)
                        .or(Some((started.saturating_sub(schedule::DAY), started))),
                )
            }
        };
        let t0 = Instant::now();
        let result = self.run_check(kind, modified).await;
        let millis = t0.elapsed().as_millis() as u64;
        st.millis.fetch_add(millis, Ordering::Relaxed);
        let mut r = match result {
            Ok(r) => r,
            Err(e) => {
                st.failed.fetch_add(1, Ordering::Relaxed);
                *st.last.lock() = Some(format!("full-sync {} check failed: {e}\n", kind.name()));
                return Err(e);
            }
        };
        r.duration = t0.elapsed();
        self.account(&r, started, kind);
        Ok(r)
    }

    fn account(&self, r: &FullSync, started: u64, kind: Check) {
        let st = &self.fullsync_state;
        let slot = match kind {
            Check::All => 0,
            Check::Day => 1,
            Check::Hour => 2,
            _ => 3,
        };
        st.checks[slot].fetch_add(1, Ordering::Relaxed);
        let c = if r.in_sync {
            &st.in_sync
        } else {
            &st.not_in_sync
        };
        c.fetch_add(1, Ordering::Relaxed);
        for (a, v) in [
            (&st.source_ahead, r.source_ahead),
            (&st.sink_ahead, r.sink_ahead),
            (&st.queued, r.queued),
            (&st.requeued, r.requeued_to_peer),
            (&st.reaped, r.reaped),
        ] {
            a.fetch_add(v, Ordering::Relaxed);
        }
        self.repl_sink.fullsyncs.fetch_add(1, Ordering::Relaxed);
        self.repl_sink
            .fullsync_pushed
            .fetch_add(r.queued, Ordering::Relaxed);
        let learnt = Learnt {
            started,
            in_sync: r.in_sync,
            repaired: r.queued + r.requeued_to_peer + r.reaped,
            differences: r.source_ahead + r.sink_ahead,
            modified: r.modified,
        };
        schedule::learn(
            &mut st.auto.lock(),
            learnt,
            self.fs_config().max_results as u64,
        );
        let line = r.summary();
        tracing::info!("{}", line.trim_end());
        *st.last.lock() = Some(line);
    }

    async fn run_check(
        self: &Arc<Self>,
        kind: Check,
        modified: Option<(u64, u64)>,
    ) -> Result<FullSync, String> {
        let peer = self.fullsync_peer()?;
        let meta = crate::cluster::Meta {
            security: String::new(),
            ..self.gossip.meta()
        };
        self.peer_call(&peer, Msg::ReplMeta(meta)).await?;
        let c = self.fs_config();
        let cap = if kind == Check::Range {
            c.max_results.saturating_mul(c.range_boost)
        } else {
            c.max_results
        };
        let mut out = FullSync {
            check: Some(kind),
            modified,
            ..FullSync::default()
        };
        let (local, remote) = match c.scope_bucket()? {
            None => {
                let Some(segments) = self.dirty_nval(&peer, c.n_val, cap).await? else {
                    out.in_sync = true;
                    return Ok(out);
                };
                out.segments = segments.len();
                let q = FoldQuery::FetchClocksNval {
                    n_val: c.n_val,
                    segments,
                    modified,
                };
                self.both(&peer, q).await?
            }
            Some(bucket) => {
                let size = if kind == Check::Hour {
                    TreeSize::Small
                } else {
                    TreeSize::Medium
                };
                let filter = RangeFilter {
                    bucket,
                    modified,
                    ..RangeFilter::default()
                };
                let Some(segments) = self.dirty_range(&peer, &filter, size, cap).await? else {
                    out.in_sync = true;
                    return Ok(out);
                };
                out.segments = segments.len();
                let q = FoldQuery::FetchClocksRange {
                    filter: RangeFilter {
                        segments: Some((size.width(), segments)),
                        ..filter
                    },
                };
                self.both(&peer, q).await?
            }
        };
        let keep = self.config.delete_mode == DeleteMode::Keep;
        let repairs = compare::compare(keys(local)?, keys(remote)?, keep);
        out.in_sync = repairs.in_sync();
        out.source_ahead = repairs.source_ahead;
        out.sink_ahead = repairs.sink_ahead;
        self.repair(&peer, repairs, &mut out).await?;
        Ok(out)
    }

    /// Dirty segments of the cached trees of `n_val` (root twice and
    /// intersected, then branches), at most `cap`; `None` = in sync.
    async fn dirty_nval(
        self: &Arc<Self>,
        peer: &str,
        n_val: u32,
        cap: usize,
    ) -> Result<Option<Vec<u32>>, String> {
        let root = FoldQuery::MergeRootNval { n_val };
        let mut dirty = diff_root(self.both(peer, root.clone()).await?)?;
        if !dirty.is_empty() {
            let again = diff_root(self.both(peer, root).await?)?;
            dirty.retain(|b| again.contains(b));
        }
        if dirty.is_empty() {
            return Ok(None);
        }
        let mut segments = Vec::new();
        for chunk in dirty.chunks(AAE_FOLD_MAX_BRANCHES) {
            let q = FoldQuery::MergeBranchNval {
                n_val,
                branches: chunk.to_vec(),
            };
            segments.extend(diff_branches(self.both(peer, q).await?)?);
            if segments.len() >= cap {
                break;
            }
        }
        segments.truncate(cap);
        Ok((!segments.is_empty()).then_some(segments))
    }

    /// Dirty segments of a bucket's folded trees, at most `cap`.
    async fn dirty_range(
        self: &Arc<Self>,
        peer: &str,
        filter: &RangeFilter,
        size: TreeSize,
        cap: usize,
    ) -> Result<Option<Vec<u32>>, String> {
        let q = FoldQuery::MergeTreeRange {
            filter: filter.clone(),
            size,
        };
        let mut segments = diff_branches(self.both(peer, q).await?)?;
        segments.truncate(cap);
        Ok((!segments.is_empty()).then_some(segments))
    }

    /// Runs `q` here and on the peer cluster.
    async fn both(
        self: &Arc<Self>,
        peer: &str,
        q: FoldQuery,
    ) -> Result<(FoldResult, FoldResult), String> {
        let (local, remote) = tokio::join!(
            self.aae.aae_fold(&q),
            self.peer_call(
                peer,
                Msg::Service {
                    service: crate::aae::FOLD_SERVICE.into(),
                    body: encode_body(&q)?,
                }
            )
        );
        let local = local.map_err(|e| format!("here: {e}"))?;
        match remote? {
            Reply::Service(Ok(b)) => Ok((local, decode_body(&b)?)),
            Reply::Service(Err(e)) => Err(format!("{peer}: {e}")),
            other => Err(format!("{peer}: unexpected reply {other:?}")),
        }
    }

    async fn peer_call(&self, peer: &str, msg: Msg) -> Result<Reply, String> {
        let timeout = CONTROL_TIMEOUT.max(self.timeout()) * 4;
        match self.repl_peers.call(peer, &msg, timeout).await {
            Ok(Reply::Refused(e)) => Err(format!("{peer}: {e}")),
            Ok(r) => Ok(r),
            Err(e) => Err(format!("{peer}: {e}")),
        }
    }

    /// Applies a comparison: queues, asks the peer, reaps.
    async fn repair(
        self: &Arc<Self>,
        peer: &str,
        r: Repairs,
        out: &mut FullSync,
    ) -> Result<(), String> {
        let c = self.fs_config();
        if !r.to_sink.is_empty() {
            let sink = self.fullsync_sink()?;
            for (bucket, key) in r.to_sink {
                let e = Entry {
                    bucket,
                    key,
                    payload: Payload::Ref { clock: Vec::new() },
                };
                if sink.queue.push(Priority::FullSync, e).unwrap_or(false) {
                    out.queued += 1;
                }
            }
            sink.notify.notify_one();
        }
        if !r.to_source.is_empty() && !c.peer_queue.is_empty() {
            let n = r.to_source.len() as u64;
            let msg = Msg::ReplRequeue {
                queue: c.peer_queue.clone(),
                keys: r.to_source,
            };
            self.peer_call(peer, msg).await?;
            out.requeued_to_peer += n;
        }
        // Settled first: a reap cut short (a node killed between replicas)
        // leaves the tombstone on some replicas only, which a plain reap
        // never removes — every check would find it again.
        for ((b, k), clock) in r.reap_local {
            let vc = crate::object::vclock::VClock::decode(&clock).map_err(|e| e.to_string())?;
            if self.settle_and_reap(&b, &k, &vc).await? > 0 {
                out.reaped += 1;
            }
        }
        if !r.reap_remote.is_empty() {
            let n = r.reap_remote.len() as u64;
            let items = r
                .reap_remote
                .into_iter()
                .map(|((b, k), clock)| ReplItem::Reap(b, k, clock))
                .collect();
            super::sender::push(self, peer, items).await?;
            out.reaped += n;
        }
        Ok(())
    }

    /// Sink side of `Msg::ReplRequeue`: the keys go to this node's sink
    /// `queue` as references at full-sync priority.
    pub(crate) fn repl_requeue(&self, queue: &str, keys: Vec<(Vec<u8>, Vec<u8>)>) -> Reply {
        let Some(sink) = self.repl.sink(queue) else {
            return Reply::Refused(format!("no sink named {queue} here (peer_queue)"));
        };
        for (bucket, key) in keys {
            let e = Entry {
                bucket,
                key,
                payload: Payload::Ref { clock: Vec::new() },
            };
            let _ = sink.queue.push(Priority::FullSync, e);
        }
        sink.notify.notify_one();
        Reply::Ok
    }

    /// Starts the schedule of checks, if any are wanted and there is a
    /// peer to sync with.
    pub(crate) fn start_fullsync(self: &Arc<Self>) {
        let c = self.fs_config();
        if Wants::of(c) == Wants::default() || self.fullsync_peer().is_err() {
            return;
        }
        let node = Arc::downgrade(self);
        tokio::spawn(async move {
            if node
                .upgrade()
                .is_some_and(|n| n.repl.unclean.load(Ordering::Relaxed))
            {
                tokio::time::sleep(Duration::from_secs(60)).await;
                if let Some(n) = node.upgrade() {
                    let _ = n.fullsync(Check::All).await;
                }
            }
            loop {
                let Some(n) = node.upgrade() else { break };
                let now = now_secs();
                let Some((at, kind)) =
                    schedule::next_after(Wants::of(n.fs_config()), n.fullsync_place(), now)
                else {
                    break;
                };
                let wait = Duration::from_secs((at - now).min(60));
                drop(n);
                tokio::time::sleep(wait).await;
                if now_secs() < at {
                    continue;
                }
                let Some(n) = node.upgrade() else { break };
                if let Err(e) = n.fullsync(kind).await {
                    tracing::warn!(error = %e, check = kind.name(), "full-sync failed");
                }
            }
        });
    }

    fn fullsync_place(&self) -> Place {
        let state = self.router.cluster.state();
        let names: Vec<&String> = state.members.keys().collect();
        let me = self.router.cluster.me();
        Place {
            index: names.iter().position(|n| n.as_str() == me).unwrap_or(0) as u32,
            count: names.len().max(1) as u32,
            cluster_slice: self.fs_config().cluster_slice,
        }
    }
}

fn keys(r: FoldResult) -> Result<Vec<compare::Listed>, String> {
    match r {
        FoldResult::Keys(k) => Ok(k),
        other => Err(format!("unexpected fold result {other:?}")),
    }
}

/// A merged tree: its size, root, and branches by number.
type Tree = (TreeSize, Vec<u64>, BTreeMap<u32, Vec<u64>>);

fn trees(pair: (FoldResult, FoldResult)) -> Result<[Tree; 2], String> {
    let one = |r: FoldResult| match r {
        FoldResult::Tree {
            size,
            root,
            branches,
        } => Ok((size, root, branches.into_iter().collect())),
        other => Err(format!("unexpected fold result {other:?}")),
    };
    let (a, b) = (one(pair.0)?, one(pair.1)?);
    if a.0 != b.0 {
        return Err(format!(
            "the clusters keep trees of different sizes ({:?} here, {:?} there): set the same aae_tree_size on both",
            a.0, b.0
        ));
    }
    Ok([a, b])
}

/// Branches whose root hashes differ.
fn diff_root(pair: (FoldResult, FoldResult)) -> Result<Vec<u32>, String> {
    let [(_, a, _), (_, b, _)] = trees(pair)?;
    Ok((0..a.len().max(b.len()) as u32)
        .filter(|&i| a.get(i as usize) != b.get(i as usize))
        .collect())
}

/// Segments whose hashes differ, over the branches either side returned.
fn diff_branches(pair: (FoldResult, FoldResult)) -> Result<Vec<u32>, String> {
    let [(_, _, a), (_, _, b)] = trees(pair)?;
    let zero = vec![0u64; BRANCH as usize];
    let mut out = Vec::new();
    let branches: std::collections::BTreeSet<u32> = a.keys().chain(b.keys()).copied().collect();
    for br in branches {
        let (x, y) = (a.get(&br).unwrap_or(&zero), b.get(&br).unwrap_or(&zero));
        for s in 0..BRANCH {
            if x.get(s as usize) != y.get(s as usize) {
                out.push(br * BRANCH + s);
            }
        }
    }
    Ok(out)
}
