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
//! The loop keeps up to [`REPL_SEND_PARALLEL`] batches in flight, each to
//! the sink node [`PeerSet::pick`] chooses next (so they spread over the
//! sink cluster). A batch takes at most [`REPL_BATCH`] entries /
//! [`REPL_BATCH_BYTES`] (strict priority), and no more than its share of
//! what waits: a short queue goes out as several small batches at once
//! rather than one after another, which is what the replication delay
//! measures (one batch at a time cost the NHS mix +120 ms a PUT). Each
//! batch reads its references (a GET here; a key gone by now is
//! acknowledged with nothing to send), pushes, and on `Ok` acknowledges
//! its entries; otherwise it puts them back in their places in the queue
//! and backs that node off.
//!
//! Order per key: a batch that holds a key an earlier batch still in
//! flight holds waits for that batch, and fails with it (both go back in
//! their original order), so the entries of a key reach the sink in the
//! order they were queued (a tombstone before its reap). Only batches
//! still in flight are waited for, and every batch that can end is ended
//! before new ones are made, so one failed push fails the batches behind
//! it once rather than each new batch failing on the last for ever.

use super::queue::{Entry, Payload};
use super::sinks::Sink;
use super::Repl;
use crate::cluster::{Msg, ReplItem, Reply};
use crate::kv::{GetOpts, GetOutcome};
use crate::limits::{
    REPL_APPLY_PARALLEL, REPL_BATCH, REPL_BATCH_BYTES, REPL_DISCOVERY_INTERVAL,
    REPL_FLUSH_INTERVAL, REPL_SEND_PARALLEL,
};
use crate::object::vclock::VClock;
use crate::vnode::request::{VnodeReply, VnodeReq, WireObject};
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

#[cfg(doc)]
use super::peers::PeerSet;

/// A batch in flight: what a later batch with one of its keys waits for
/// (`Some(true)` once acknowledged, `Some(false)` once put back).
type Done = tokio::sync::watch::Receiver<Option<bool>>;

/// A batch's keys, which the order per key follows.
type Key = (Vec<u8>, Vec<u8>);

/// What a finished delivery tells the loop.
struct Finished {
    id: u64,
    keys: Vec<Key>,
    /// Wait before taking more (a failed read of a reference).
    pause: Option<Duration>,
}

/// The newest batch in flight holding each key: what a later batch with
/// one of those keys waits for.
#[derive(Default)]
struct Holders {
    by_key: HashMap<Key, (u64, Done)>,
}

impl Holders {
    /// Batch `id` (which tells `done` how it ended) now holds `keys`: the
    /// earlier batches still in flight it must wait for, each once. A
    /// batch that has already ended is not waited for, even before the
    /// loop released it: its entries are acknowledged, or back at the
    /// front of the queue (a batch nacks before it tells `done`), so this
    /// batch took them in order. Waiting for it would fail this batch too
    /// when it failed, and the next batch after this one, and so on: CI
    /// saw a sender nack 25 million entries in two minutes that way while
    /// its queue never drained (2026-12-04).
    fn hold(&mut self, id: u64, keys: &[Key], done: &Done) -> Vec<(u64, Done)> {
        let mut after: Vec<(u64, Done)> = Vec::new();
        for k in keys {
            if let Some((held_by, rx)) = self.by_key.insert(k.clone(), (id, done.clone())) {
                let ended = rx.borrow().is_some();
                if held_by != id && !ended && !after.iter().any(|(a, _)| *a == held_by) {
                    after.push((held_by, rx));
                }
            }
        }
        after
    }

    /// Batch `id` ended: the keys no later batch holds are free.
    fn release(&mut self, id: u64, keys: Vec<Key>) {
        for k in keys {
            if self
                .by_key
                .get(&k)
                .is_some_and(|(held_by, _)| *held_by == id)
            {
                self.by_key.remove(&k);
            }
        }
    }
}

/// Runs the sender of `sink` until the node goes or the sink is removed.
pub(crate) async fn run(node: Weak<Repl>, sink: Arc<Sink>) {
    use futures_util::stream::{FuturesUnordered, StreamExt};
    let mut last_discovery: Option<Instant> = None;
    let mut last_flush = Instant::now();
    let mut flying = FuturesUnordered::new();
    let mut holders = Holders::default();
    let mut next_id = 0u64;
    // After a failed read of a reference: no new batch before this (the
    // batches in flight are still driven meanwhile).
    let mut resume_at: Option<Instant> = None;
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
        // Every batch that can end now ends before new ones are made: a
        // batch failing because the one before it failed (same key) only
        // learns so when polled, and a batch made meanwhile would wait for
        // it — and fail with it, and the next one with that, for ever.
        while let Some(Some(Finished { id, keys, pause })) =
            futures_util::FutureExt::now_or_never(flying.next())
        {
            holders.release(id, keys);
            if let Some(pause) = pause {
                resume_at = Some(Instant::now() + pause);
            }
        }
        let paused = sink.suspended() || sink.refused.lock().is_some();
        let mut wait = if paused {
            Duration::from_secs(1)
        } else {
            REPL_FLUSH_INTERVAL
        };
        if let Some(t) = resume_at.filter(|t| *t > Instant::now()) {
            wait = wait.min(t - Instant::now());
        } else {
            resume_at = None;
        }
        while !paused && resume_at.is_none() && flying.len() < REPL_SEND_PARALLEL {
            let peer = match sink.peers.lock().pick(Instant::now()) {
                Ok(p) => p,
                Err(w) => {
                    wait = w.min(REPL_FLUSH_INTERVAL);
                    break;
                }
            };
            let free = (REPL_SEND_PARALLEL - flying.len()) as u64;
            let share = sink.queue.waiting().iter().sum::<u64>().div_ceil(free);
            let batch = sink
                .queue
                .take((share as usize).clamp(1, REPL_BATCH), REPL_BATCH_BYTES);
            if batch.is_empty() {
                break;
            }
            let id = next_id;
            next_id += 1;
            let (done_tx, done_rx) = tokio::sync::watch::channel(None);
            let keys: Vec<Key> = batch
                .iter()
                .map(|(_, _, e)| (e.bucket.clone(), e.key.clone()))
                .collect();
            let after = holders.hold(id, &keys, &done_rx);
            let (node, sink) = (n.clone(), sink.clone());
            flying.push(async move {
                let pause = deliver(&node, &sink, peer, batch, after, done_tx).await;
                Finished { id, keys, pause }
            });
        }
        drop(n);
        let finished = if flying.is_empty() {
            let _ = tokio::time::timeout(wait, sink.notify.notified()).await;
            None
        } else if flying.len() < REPL_SEND_PARALLEL {
            tokio::select! {
                f = flying.next() => f,
                _ = sink.notify.notified() => None,
                _ = tokio::time::sleep(wait) => None,
            }
        } else {
            // Every slot is taken: only a finished batch frees one.
            tokio::time::timeout(wait, flying.next())
                .await
                .ok()
                .flatten()
        };
        if let Some(f) = finished {
            holders.release(f.id, f.keys);
            if let Some(pause) = f.pause {
                resume_at = Some(Instant::now() + pause);
            }
        }
    }
}

/// Delivers one batch once the batches it waits for are done; `Some(wait)`
/// when the loop should pause before taking more. Tells `done` how it
/// ended.
async fn deliver(
    node: &Repl,
    sink: &Sink,
    peer: String,
    batch: Vec<(u64, super::queue::Priority, Entry)>,
    after: Vec<(u64, Done)>,
    done: tokio::sync::watch::Sender<Option<bool>>,
) -> Option<Duration> {
    let tickets: Vec<u64> = batch.iter().map(|(t, _, _)| *t).collect();
    for (_, mut rx) in after {
        let ok = rx
            .wait_for(Option::is_some)
            .await
            .is_ok_and(|v| *v == Some(true));
        if !ok {
            // An earlier entry of one of these keys goes back: these go
            // back behind it.
            sink.queue.nack(&tickets);
            done.send_replace(Some(false));
            return None;
        }
    }
    let items = match resolve(node, sink, batch).await {
        Ok(items) => items,
        Err(e) => {
            sink.queue.nack(&tickets);
            done.send_replace(Some(false));
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
            done.send_replace(Some(true));
            sink.peers.lock().success(&peer);
            sink.stats.sent.fetch_add(count, Ordering::Relaxed);
            sink.stats.reaps.fetch_add(reaps, Ordering::Relaxed);
            sink.stats.batches.fetch_add(1, Ordering::Relaxed);
        }
        Err(e) => {
            sink.queue.nack(&tickets);
            done.send_replace(Some(false));
            sink.peers.lock().failure(&peer, Instant::now(), &e);
            sink.stats.errors.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(sink = %sink.name(), peer = %peer, error = %e, "replication batch failed; it stays queued");
        }
    }
    None
}

/// The batch as wire items, in the batch's order: references read now,
/// up to [`REPL_APPLY_PARALLEL`] at once (a key gone by now is dropped:
/// its tombstone or reap follows in the queue).
async fn resolve(
    node: &Repl,
    sink: &Sink,
    batch: Vec<(u64, super::queue::Priority, Entry)>,
) -> Result<Vec<ReplItem>, String> {
    use futures_util::stream::{self, StreamExt, TryStreamExt};
    let items: Vec<Option<ReplItem>> = stream::iter(batch)
        .map(|(_, _, e)| async move {
            let Entry {
                bucket,
                key,
                payload,
            } = e;
            Ok::<_, String>(match payload {
                Payload::Object { meta, value } => {
                    Some(ReplItem::Object((bucket, key, WireObject { meta, value })))
                }
                Payload::Reap { clock } => Some(ReplItem::Reap(bucket, key, clock)),
                Payload::Ref { .. } => {
                    sink.stats.refs_fetched.fetch_add(1, Ordering::Relaxed);
                    match read_current(node, &bucket, &key).await? {
                        Some(w) => Some(ReplItem::Object((bucket, key, w))),
                        None => {
                            sink.stats.refs_missing.fetch_add(1, Ordering::Relaxed);
                            None
                        }
                    }
                }
            })
        })
        .buffered(REPL_APPLY_PARALLEL)
        .try_collect()
        .await?;
    Ok(items.into_iter().flatten().collect())
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

#[cfg(test)]
mod tests {
    use super::*;

    fn key(k: &str) -> Key {
        (b"b".to_vec(), k.as_bytes().to_vec())
    }

    fn ids(after: &[(u64, Done)]) -> Vec<u64> {
        after.iter().map(|(id, _)| *id).collect()
    }

    #[test]
    fn a_batch_waits_for_the_newest_earlier_batch_holding_each_of_its_keys() {
        let mut h = Holders::default();
        let (_tx, rx) = tokio::sync::watch::channel(None);
        assert!(h.hold(0, &[key("a"), key("b"), key("a")], &rx).is_empty());
        assert_eq!(ids(&h.hold(1, &[key("c")], &rx)), Vec::<u64>::new());
        // "a" and "b" are both held by batch 0: waited for once.
        assert_eq!(
            ids(&h.hold(2, &[key("b"), key("a"), key("c")], &rx)),
            [0, 1]
        );
        // Batch 2 is now the newest holder of all three.
        assert_eq!(ids(&h.hold(3, &[key("a")], &rx)), [2]);
        // Batch 0 ends: it holds no key any more, nothing is freed.
        h.release(0, vec![key("a"), key("b")]);
        assert_eq!(h.by_key.len(), 3);
        h.release(2, vec![key("b"), key("a"), key("c")]);
        assert_eq!(h.by_key.len(), 1, "batch 3 still holds a");
        assert_eq!(ids(&h.hold(4, &[key("b"), key("a")], &rx)), [3]);
        h.release(3, vec![key("a")]);
        h.release(4, vec![key("b"), key("a")]);
        h.release(1, vec![key("c")]);
        assert_eq!(h.by_key.len(), 0);
    }

    /// A batch that ended (failed here) before the loop released it is not
    /// waited for: the batch after it took its entries back in order. Were
    /// it waited for, each new batch of the key would fail on the last one
    /// for ever (the livelock CI saw).
    #[test]
    fn a_batch_that_already_ended_is_not_waited_for() {
        let mut h = Holders::default();
        let (tx0, rx0) = tokio::sync::watch::channel(None);
        let (_tx1, rx1) = tokio::sync::watch::channel(None);
        let (_tx2, rx2) = tokio::sync::watch::channel(None);
        assert!(h.hold(0, &[key("a")], &rx0).is_empty());
        // Batch 1 takes "a" while batch 0 is in flight: it waits.
        assert_eq!(ids(&h.hold(1, &[key("a")], &rx1)), [0]);
        tx0.send_replace(Some(false));
        // Batch 1 is still in flight: batch 2 waits for it, not for 0.
        assert_eq!(ids(&h.hold(2, &[key("a")], &rx2)), [1]);
        let (tx3, rx3) = tokio::sync::watch::channel(None);
        assert!(h.hold(3, &[key("b")], &rx3).is_empty());
        tx3.send_replace(Some(false));
        let (_tx4, rx4) = tokio::sync::watch::channel(None);
        assert!(
            h.hold(4, &[key("b")], &rx4).is_empty(),
            "batch 3 ended: not waited for"
        );
        assert_eq!(h.by_key[&key("b")].0, 4, "batch 4 holds b now");
    }
}
