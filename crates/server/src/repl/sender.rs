//! Delivery of one sink's queue: the source pushes.
//!
//! Why push, where Riak's sinks pull: the source knows the moment it has
//! something to send (no polling interval in the replication delay, which
//! is the seed's headline figure), and an entry is removed only when the
//! reply to the very request that carried it confirms it (Riak pops
//! before delivery and loses the entry when the push fails). The sink
//! cluster's nodes are learnt from it ([`discover`]), so adding a node to
//! either cluster needs no configuration.
//!
//! The loop: take a batch (strict priority, at most
//! [`REPL_BATCH`] entries / [`REPL_BATCH_BYTES`]); read the references
//! (a GET here; a key gone by now is acknowledged with nothing to send);
//! push to the sink node [`PeerSet::pick`] chooses; on `Ok` acknowledge
//! the batch, otherwise put it back at the front of the queue and back
//! that node off. One batch per sink is in flight per node, so the entries
//! of a key reach the sink in the order they were queued (a tombstone
//! before its reap).

use super::queue::{Entry, Payload};
use super::sinks::Sink;
use super::Repl;
use crate::cluster::{Msg, ReplItem, Reply};
use crate::kv::{GetOpts, GetOutcome};
use crate::limits::{REPL_BATCH, REPL_BATCH_BYTES, REPL_DISCOVERY_INTERVAL, REPL_FLUSH_INTERVAL};
use crate::object::vclock::VClock;
use crate::vnode::request::{VnodeReply, VnodeReq, WireObject};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

#[cfg(doc)]
use super::peers::PeerSet;

/// Runs the sender of `sink` until the node goes or the sink is removed.
pub(crate) async fn run(node: Weak<Repl>, sink: Arc<Sink>) {
    let mut last_discovery: Option<Instant> = None;
    let mut last_flush = Instant::now();
    loop {
        if sink.removed.load(Ordering::Relaxed) {
            break;
        }
        let Some(n) = node.upgrade() else { break };
        if last_flush.elapsed() >= REPL_FLUSH_INTERVAL {
            if let Err(e) = sink.queue.flush() {
                tracing::warn!(sink = %sink.name(), error = %e, "flushing the replication queue");
            }
            last_flush = Instant::now();
        }
        if last_discovery.is_none_or(|t| t.elapsed() >= REPL_DISCOVERY_INTERVAL) {
            last_discovery = Some(Instant::now());
            discover(&n, &sink).await;
        }
        let wait = if sink.suspended() || sink.refused.lock().is_some() {
            Some(Duration::from_secs(1))
        } else {
            deliver_one(&n, &sink).await
        };
        drop(n);
        if let Some(wait) = wait {
            let _ = tokio::time::timeout(wait, sink.notify.notified()).await;
        }
    }
}

/// One batch; `Some(wait)` when there was nothing to do or it failed.
async fn deliver_one(node: &Repl, sink: &Sink) -> Option<Duration> {
    let peer = match sink.peers.lock().pick(Instant::now()) {
        Ok(p) => p,
        Err(wait) => return Some(wait),
    };
    let batch = sink.queue.take(REPL_BATCH, REPL_BATCH_BYTES);
    if batch.is_empty() {
        return Some(REPL_FLUSH_INTERVAL);
    }
    let tickets: Vec<u64> = batch.iter().map(|(t, _, _)| *t).collect();
    let items = match resolve(node, sink, batch).await {
        Ok(items) => items,
        Err(e) => {
            sink.queue.nack(&tickets);
            sink.stats.errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(sink = %sink.name(), error = %e, "reading a replicated key; retrying");
            return Some(crate::limits::REPL_FIRST_BACKOFF);
        }
    };
    let count = items.len() as u64;
    let reaps = items
        .iter()
        .filter(|i| matches!(i, ReplItem::Reap(..)))
        .count() as u64;
    let result = if items.is_empty() {
        Ok(())
    } else {
        push(node, &peer, items).await
    };
    match result {
        Ok(()) => {
            sink.queue.ack(&tickets);
            sink.peers.lock().success(&peer);
            sink.stats.sent.fetch_add(count, Ordering::Relaxed);
            sink.stats.reaps.fetch_add(reaps, Ordering::Relaxed);
            None
        }
        Err(e) => {
            sink.queue.nack(&tickets);
            sink.peers.lock().failure(&peer, Instant::now(), &e);
            sink.stats.errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(sink = %sink.name(), peer = %peer, error = %e, "replication batch failed; it stays queued");
            None
        }
    }
}

/// The batch as wire items: references read now (a key gone by now is
/// dropped: its tombstone or reap follows in the queue).
async fn resolve(
    node: &Repl,
    sink: &Sink,
    batch: Vec<(u64, super::queue::Priority, Entry)>,
) -> Result<Vec<ReplItem>, String> {
    let mut items = Vec::with_capacity(batch.len());
    for (_, _, e) in batch {
        let Entry {
            bucket,
            key,
            payload,
        } = e;
        match payload {
            Payload::Object { meta, value } => {
                items.push(ReplItem::Object((bucket, key, WireObject { meta, value })));
            }
            Payload::Reap { clock } => items.push(ReplItem::Reap(bucket, key, clock)),
            Payload::Ref { .. } => {
                sink.stats.refs_fetched.fetch_add(1, Ordering::Relaxed);
                match read_current(node, &bucket, &key).await? {
                    Some(w) => items.push(ReplItem::Object((bucket, key, w))),
                    None => {
                        sink.stats.refs_missing.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
        }
    }
    Ok(items)
}

/// The current object or tombstone of a key, or `None` when there is none.
pub(crate) async fn read_current(
    node: &Repl,
    bucket: &[u8],
    key: &[u8],
) -> Result<Option<WireObject>, String> {
    match node.get(bucket, key, &GetOpts::default()).await {
        Ok(GetOutcome::Found(o)) => Ok(Some(WireObject::full(&o))),
        Ok(GetOutcome::Tombstone(vclock)) => stored_tombstone(node, bucket, key, &vclock).await,
        Ok(GetOutcome::NotFound) => Ok(None),
        Err(e) => Err(e.to_string()),
    }
}

/// The tombstone a replica stores with `clock`, as stored (its metadata
/// and last-modified time: a tombstone rebuilt from the clock alone would
/// be another sibling under the same clock), or `None` if no replica
/// holds it.
pub(crate) async fn stored_tombstone(
    node: &Repl,
    bucket: &[u8],
    key: &[u8],
    clock: &VClock,
) -> Result<Option<WireObject>, String> {
    let targets = node.preflist_of(bucket, key);
    let get = || VnodeReq::Get {
        bucket: bucket.to_vec(),
        key: key.to_vec(),
    };
    let mut replies = node.router.fan_out(&targets, get);
    while let Some((_, r)) = futures_util::StreamExt::next(&mut replies).await {
        if let Ok(VnodeReply::Object(Some(w), _)) = r {
            if w.head()
                .is_ok_and(|o| o.is_deleted() && o.vclock.same_events(clock))
            {
                return Ok(Some(w));
            }
        }
    }
    Ok(None)
}

/// Pushes `items` to the sink node `addr`.
pub(crate) async fn push(node: &Repl, addr: &str, items: Vec<ReplItem>) -> Result<(), String> {
    let msg = Msg::ReplPush {
        source: node.router.cluster.state().cluster_id,
        items,
    };
    match node.repl_peers.call(addr, &msg, node.timeout()).await {
        Ok(Reply::Ok) => Ok(()),
        Ok(Reply::Refused(e)) => Err(e),
        Ok(other) => Err(format!("unexpected reply {other:?}")),
        Err(e) => Err(e.to_string()),
    }
}

/// Asks a node of the sink cluster who it is; on success learns its
/// members. A sink that is this very cluster is refused for good.
pub(crate) async fn discover(node: &Repl, sink: &Sink) {
    let addrs: Vec<String> = sink
        .peers
        .lock()
        .peers()
        .iter()
        .map(|p| p.addr.clone())
        .collect();
    for addr in addrs {
        match hello(node, &addr).await {
            Ok((cluster_id, members)) => {
                if cluster_id == node.router.cluster.state().cluster_id {
                    let why = format!(
                        "{addr} is a node of this cluster: a cluster cannot replicate to itself"
                    );
                    tracing::error!(sink = %sink.name(), "{why}");
                    *sink.refused.lock() = Some(why);
                } else {
                    *sink.refused.lock() = None;
                    sink.peers.lock().discovered(&members);
                }
                return;
            }
            Err(e) => {
                tracing::debug!(sink = %sink.name(), peer = %addr, error = %e, "sink discovery");
            }
        }
    }
}

/// `Msg::ReplHello` to `addr`: (its cluster id, its members' cluster
/// addresses), or why not (not a Basalt cluster listener, unreachable).
pub(crate) async fn hello(node: &Repl, addr: &str) -> Result<(String, Vec<String>), String> {
    let msg = Msg::ReplHello {
        source: node.router.cluster.state().cluster_id,
    };
    match node
        .repl_peers
        .call(addr, &msg, crate::limits::CONTROL_TIMEOUT)
        .await
    {
        Ok(Reply::ReplHello {
            cluster_id,
            members,
        }) => Ok((cluster_id, members)),
        Ok(Reply::Refused(e)) => Err(e),
        Ok(other) => Err(format!("{addr} answered {other:?}: not a Basalt node")),
        Err(e) => Err(format!(
            "{addr}: {e} (is it a Basalt node's cluster address?)"
        )),
    }
}
