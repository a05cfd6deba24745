//! Replication to another cluster (the "sink"), one way, as Riak's
//! real-time replication plus a tictac-tree full-sync.
//!
//! * **Real-time**: every PUT or DELETE this node coordinates is queued
//!   (bounded: `repl.queue_len`; when full the oldest entry is dropped and
//!   counted — full-sync repairs it) and a sender task pushes batches of up
//!   to [`BATCH`] objects to a node of the sink cluster (its cluster address, as
//!   a cluster message). The sink merges each object into all its replicas
//!   as a replica write (vector clocks decide), so a batch sent twice
//!   changes nothing, and it never re-replicates what it receives. A failed
//!   batch stays at the head of the queue and is retried after a back-off,
//!   trying the next sink address.
//! * **Full-sync** (`repl fullsync`, and every `repl.fullsync_interval_secs`):
//!   both clusters compute a tree of all their keys (4096 segments, each key
//!   hashed with its vclock) over a covering set that counts each key once;
//!   segments that differ are dirty; both list their keys in up to
//!   [`crate::limits::MAX_DIRTY_SEGMENTS`] dirty segments; every key the
//!   source holds with another clock than the sink (or that the sink lacks)
//!   is read here and pushed. Keys only the sink holds are left alone (one
//!   way). The trees do not depend on ring size, so clusters of different
//!   ring sizes compare. Each full-sync first sends the source's bucket
//!   types and props, which the sink merges by change stamp (as gossip).

mod memqueue;
pub mod queue;

use crate::cluster::{Msg, Reply, CONTROL_TIMEOUT};
use crate::kv::{GetOpts, GetOutcome};
use crate::node::Node;
use crate::vnode::request::{Obj, VnodeReply, VnodeReq, WireObject};
use crate::vnode::serve::AAE_TREE;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

pub use crate::limits::REPL_BATCH as BATCH;
/// Wait before retrying a failed batch.
const RETRY_AFTER: Duration = Duration::from_millis(500);

pub use crate::cluster::ReplObject;
pub use crate::config::ReplConfig;

pub use memqueue::{ReplQueue, ReplStats};

/// What a full-sync did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FullSync {
    /// Dirty segments found.
    pub dirty_segments: usize,
    /// Objects pushed to the sink.
    pub pushed: usize,
}

impl Node {
    /// Starts the real-time sender (and the full-sync timer) when sinks are
    /// configured.
    pub fn start_repl(self: &Arc<Self>) {
        if self.config.repl.sinks.is_empty() {
            return;
        }
        let node = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut next_sink = 0usize;
            loop {
                let Some(n) = node.upgrade() else { break };
                let batch: Vec<ReplObject> = {
                    let q = n.repl.queue.lock();
                    q.iter().take(BATCH).cloned().collect()
                };
                if batch.is_empty() {
                    let _ = tokio::time::timeout(Duration::from_secs(1), n.repl.notify.notified())
                        .await;
                    continue;
                }
                let sinks = &n.config.repl.sinks;
                let addr = &sinks[next_sink % sinks.len()];
                let count = batch.len();
                match n.send_repl(addr, batch).await {
                    Ok(()) => {
                        let mut q = n.repl.queue.lock();
                        for _ in 0..count.min(q.len()) {
                            q.pop_front();
                        }
                        n.repl.stats.sent.fetch_add(count as u64, Ordering::Relaxed);
                    }
                    Err(e) => {
                        n.repl.stats.errors.fetch_add(1, Ordering::Relaxed);
                        tracing::warn!(sink = %addr, error = %e, "real-time replication batch failed; retrying");
                        next_sink += 1;
                        drop(n);
                        tokio::time::sleep(RETRY_AFTER).await;
                    }
                }
            }
        });
        let secs = self.config.repl.fullsync_interval_secs;
        if secs > 0 {
            let node = Arc::downgrade(self);
            tokio::spawn(async move {
                let mut tick = tokio::time::interval(Duration::from_secs(secs));
                tick.tick().await;
                loop {
                    tick.tick().await;
                    let Some(n) = node.upgrade() else { break };
                    if let Err(e) = n.fullsync().await {
                        tracing::warn!(error = %e, "full-sync failed");
                    }
                }
            });
        }
    }

    /// Queues a coordinated write for real-time replication.
    pub(crate) fn replicate(&self, bucket: &[u8], key: &[u8], object: &Obj) {
        if self.config.repl.sinks.is_empty() {
            return;
        }
        self.repl.push(
            (bucket.to_vec(), key.to_vec(), object.wire()),
            self.config.repl.queue_len,
        );
    }

    async fn send_repl(&self, addr: &str, objects: Vec<ReplObject>) -> Result<(), String> {
        match self
            .router
            .cluster
            .peers
            .call(addr, &Msg::ReplPut(objects), self.timeout())
            .await
        {
            Ok(Reply::Ok) => Ok(()),
            Ok(Reply::Refused(e)) => Err(e),
            Ok(other) => Err(format!("unexpected reply {other:?}")),
            Err(e) => Err(e.to_string()),
        }
    }

    /// Sink side: merges replicated objects into all their replicas here;
    /// refused if some object reached no replica.
    pub(crate) async fn apply_repl(&self, objects: Vec<ReplObject>) -> Reply {
        for (bucket, key, object) in objects {
            if let Err(e) = self.merge_everywhere(&bucket, &key, object).await {
                return Reply::Refused(e);
            }
            self.repl.stats.received.fetch_add(1, Ordering::Relaxed);
        }
        Reply::Ok
    }

    /// Merges `object` into every replica of its key (fallbacks included);
    /// fine if at least one replica took it.
    async fn merge_everywhere(
        &self,
        bucket: &[u8],
        key: &[u8],
        object: WireObject,
    ) -> Result<(), String> {
        let props = self.props().get(bucket);
        let targets = self.router.key_targets(bucket, key, props.n_val);
        let req = || VnodeReq::Reconcile {
            bucket: bucket.to_vec(),
            key: key.to_vec(),
            object: Obj::Wire(object.clone()),
            props: props.clone(),
        };
        let mut replies = self.router.fan_out(&targets, req);
        let mut acks = 0;
        let mut last = String::new();
        while let Some((_, r)) = futures_util::StreamExt::next(&mut replies).await {
            match r {
                Ok(_) => acks += 1,
                Err(e) => last = e.to_string(),
            }
        }
        if acks == 0 {
            return Err(format!("no replica took a replicated object: {last}"));
        }
        Ok(())
    }

    /// Sink side: this cluster's full-sync tree.
    pub(crate) async fn repl_tree(&self) -> Result<Vec<u64>, String> {
        let n = self.props().get(b"").n_val;
        let plan = self
            .router
            .coverage_plan(n)
            .ok_or("insufficient_vnodes_available")?;
        let mut tree = vec![0u64; AAE_TREE.segments() as usize];
        for (t, firsts) in plan {
            let req = VnodeReq::AaeTree {
                ring_size: self.router.ring.size(),
                firsts,
            };
            match self
                .router
                .vcall(&t, req)
                .await
                .map_err(|e| e.to_string())?
            {
                VnodeReply::AaeTree(part) => {
                    for (slot, h) in tree.iter_mut().zip(part) {
                        *slot ^= h;
                    }
                }
                _ => return Err("unexpected tree reply".into()),
            }
        }
        Ok(tree)
    }

    /// Sink side: (bucket, key, clock hash) of this cluster's keys in
    /// `segments`.
    pub(crate) async fn repl_keys(
        &self,
        segments: Vec<u32>,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>, u64)>, String> {
        let n = self.props().get(b"").n_val;
        let plan = self
            .router
            .coverage_plan(n)
            .ok_or("insufficient_vnodes_available")?;
        let mut out = Vec::new();
        for (t, firsts) in plan {
            let req = VnodeReq::AaeKeys {
                ring_size: self.router.ring.size(),
                firsts,
                segments: segments.clone(),
            };
            match self
                .router
                .vcall(&t, req)
                .await
                .map_err(|e| e.to_string())?
            {
                VnodeReply::AaeKeys(keys) => out.extend(keys),
                _ => return Err("unexpected keys reply".into()),
            }
        }
        Ok(out)
    }

    /// One full-sync with the first reachable sink.
    pub async fn fullsync(&self) -> Result<FullSync, String> {
        let sinks = &self.config.repl.sinks;
        if sinks.is_empty() {
            return Err("no repl sinks configured (config [repl] sinks)".into());
        }
        let mut last = String::new();
        for addr in sinks {
            match self.fullsync_with(addr).await {
                Ok(r) => {
                    self.repl.stats.fullsyncs.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(sink = %addr, dirty = r.dirty_segments, pushed = r.pushed, "full-sync done");
                    return Ok(r);
                }
                Err(e) => last = format!("{addr}: {e}"),
            }
        }
        Err(last)
    }

    async fn fullsync_with(&self, addr: &str) -> Result<FullSync, String> {
        let call = |m: Msg| async move {
            self.router
                .cluster
                .peers
                .call(addr, &m, CONTROL_TIMEOUT.max(self.timeout()))
                .await
                .map_err(|e| e.to_string())
        };
        // Bucket types and props first (merged by change stamp, as gossip).
        match call(Msg::ReplMeta(self.meta())).await? {
            Reply::Ok => {}
            Reply::Refused(e) => return Err(e),
            other => return Err(format!("unexpected reply {other:?}")),
        }
        let mine = self.repl_tree().await?;
        let theirs = match call(Msg::ReplTree).await? {
            Reply::Tree(t) => t,
            Reply::Refused(e) => return Err(e),
            other => return Err(format!("unexpected reply {other:?}")),
        };
        let dirty: Vec<u32> = (0..mine.len())
            .filter(|&i| mine.get(i) != theirs.get(i))
            .map(|i| i as u32)
            .collect();
        let mut result = FullSync {
            dirty_segments: dirty.len(),
            pushed: 0,
        };
        if dirty.is_empty() {
            return Ok(result);
        }
        let segments: Vec<u32> = dirty
            .into_iter()
            .take(crate::limits::MAX_DIRTY_SEGMENTS)
            .collect();
        let theirs: BTreeMap<(Vec<u8>, Vec<u8>), u64> =
            match call(Msg::ReplKeys(segments.clone())).await? {
                Reply::Keys(k) => k.into_iter().map(|(b, k, h)| ((b, k), h)).collect(),
                Reply::Refused(e) => return Err(e),
                other => return Err(format!("unexpected reply {other:?}")),
            };
        let mut batch = Vec::new();
        for (bucket, key, h) in self.repl_keys(segments).await? {
            if theirs.get(&(bucket.clone(), key.clone())) == Some(&h) {
                continue;
            }
            let obj = match self.get(&bucket, &key, &GetOpts::default()).await {
                Ok(GetOutcome::Found(o)) => o,
                Ok(GetOutcome::Tombstone(vclock)) => crate::object::RiakObject {
                    vclock,
                    contents: vec![crate::object::Content {
                        deleted: true,
                        ..Default::default()
                    }],
                },
                Ok(GetOutcome::NotFound) => continue,
                Err(e) => return Err(format!("reading a key to push: {e}")),
            };
            batch.push((bucket, key, WireObject::full(&obj)));
            if batch.len() >= BATCH {
                result.pushed += batch.len();
                self.send_repl(addr, std::mem::take(&mut batch)).await?;
            }
        }
        if !batch.is_empty() {
            result.pushed += batch.len();
            self.send_repl(addr, batch).await?;
        }
        self.repl
            .stats
            .fullsync_pushed
            .fetch_add(result.pushed as u64, Ordering::Relaxed);
        Ok(result)
    }

    /// Anti-entropy and replication counters: (name, value, help), for
    /// `/stats` and `/metrics` (`repl_queue` is a gauge, the rest counters).
    pub fn cluster_counters(&self) -> Vec<(&'static str, u64, &'static str)> {
        let (s, r) = (self.stats(), &self.repl.stats);
        let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
        vec![
            (
                "aae_exchanges_total",
                ld(&s.aae_exchanges),
                "Anti-entropy exchanges run by this node.",
            ),
            (
                "aae_repairs_total",
                ld(&s.aae_repairs),
                "Keys repaired by anti-entropy.",
            ),
            (
                "aae_fold_requests_total",
                ld(&s.aae_fold_requests),
                "Anti-entropy fold queries (aae_fold) coordinated by this node.",
            ),
            (
                "aae_loops_total",
                ld(&s.aae_loops),
                "Anti-entropy follow-up loops run by exchanges that hit their caps.",
            ),
            (
                "aae_range_repairs_total",
                ld(&s.aae_range_repairs),
                "Keys repaired by scoped (bucket or last-modified range) anti-entropy follow-up loops.",
            ),
            (
                "get_notfound_waits_total",
                ld(&s.notfound_waits),
                "GETs whose quorum answered only not-found and that waited for the other replicas.",
            ),
            (
                "get_notfound_rescues_total",
                ld(&s.notfound_rescues),
                "Of those, GETs that a later replica answered with the object.",
            ),
            (
                "index_results_read_total",
                ld(&s.index_results_read),
                "2i results the covering vnodes returned to this node's queries.",
            ),
            (
                "divergent_merges_total",
                crate::object::DIVERGENT_MERGES.load(Ordering::Relaxed),
                "Merges that met one clock over different siblings (kept the union).",
            ),
            (
                "repl_sent_total",
                ld(&r.sent),
                "Objects replicated to the sink cluster (real-time).",
            ),
            (
                "repl_dropped_total",
                ld(&r.dropped),
                "Real-time replication entries dropped (queue full).",
            ),
            (
                "repl_errors_total",
                ld(&r.errors),
                "Failed real-time replication batches.",
            ),
            (
                "repl_received_total",
                ld(&r.received),
                "Objects received from a source cluster.",
            ),
            (
                "repl_fullsyncs_total",
                ld(&r.fullsyncs),
                "Full-syncs completed.",
            ),
            (
                "repl_fullsync_pushed_total",
                ld(&r.fullsync_pushed),
                "Objects pushed by full-syncs.",
            ),
            (
                "repl_queue",
                self.repl.len() as u64,
                "Writes waiting in the real-time replication queue.",
            ),
        ]
    }

    /// `repl-status`: sinks, queue and counters.
    pub fn repl_status(&self) -> String {
        let sinks = if self.config.repl.sinks.is_empty() {
            "(none)".to_string()
        } else {
            self.config.repl.sinks.join(", ")
        };
        let mut out = format!(
            "sinks: {sinks}\nqueue: {} (limit {})\n",
            self.repl.len(),
            self.config.repl.queue_len
        );
        for (name, v, _) in self.cluster_counters() {
            if let Some(c) = name
                .strip_prefix("repl_")
                .and_then(|n| n.strip_suffix("_total"))
            {
                out.push_str(&format!("{}: {v}\n", c.replace('_', " ")));
            }
        }
        out
    }
}
