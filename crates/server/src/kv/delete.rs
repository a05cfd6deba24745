//! DELETE as a tombstone PUT, then the tombstone reap (`delete_mode`):
//! removed from every replica only when all hold it with the same clock
//! and no copy of its partitions waits anywhere to be handed back.
//!
//! A reap is **put off** while any node holds a copy of one of the key's
//! partitions for another owner (a fallback or leftover vnode whose hinted
//! handoff is pending, or either side of an ownership transfer), while any
//! member is down or does not answer (it may hold such a copy), or while a
//! primary is unreachable: an older write handed back after the reap would
//! otherwise bring the deleted key back (and full-sync would copy it to the
//! other cluster). A reap put off is tried again (`REAP_RETRY_*`); one that
//! never succeeds leaves the tombstone, as `delete_mode = keep` would.

use super::Kv;
use super::PutOpts;
use crate::cluster::{Msg, Reply, CONTROL_TIMEOUT};
use crate::error::RequestError;
use crate::limits::{MAX_PENDING_REAPS, REAP_ATTEMPTS, REAP_RETRY_MAX, REAP_RETRY_MIN};
use crate::object::vclock::VClock;
use crate::object::Content;
use crate::vnode::request::{VnodeReply, VnodeReq};
use futures_util::stream::StreamExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// What one reap attempt did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reap {
    /// Removed from this many replicas.
    Reaped(usize),
    /// A replica holds a later or concurrent write: nothing removed, and
    /// the reap is over (the key lives again).
    NotHeld,
    /// A replica does not hold the tombstone yet (it has nothing, or a
    /// version the tombstone replaces: its write was acknowledged without
    /// it and is still on its way, or it missed it and read repair or
    /// anti-entropy will bring it): nothing removed, tried again.
    Behind,
    /// Put off: a copy of the key's partitions may be handed back later
    /// (fallback, transfer, a node down or silent, a primary unreachable,
    /// a replica that did not answer).
    Deferred,
}

impl Reap {
    /// Whether a later attempt may succeed.
    pub(crate) fn retry(self) -> bool {
        matches!(self, Reap::Behind | Reap::Deferred)
    }
}

/// A pending reap: bucket, key and the tombstone's encoded clock.
pub(crate) type ReapKey = (Vec<u8>, Vec<u8>, Vec<u8>);

impl Kv {
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
                self.schedule_reap(bucket, key, obj.vclock.clone(), delay);
            }
        }
        Ok(())
    }

    /// Starts the task that reaps a deleted key's tombstone after `delay`,
    /// trying again while the reap is put off or a replica is behind
    /// ([`Reap::retry`]), at most [`REAP_ATTEMPTS`] times, waiting twice
    /// as long each time (from [`REAP_RETRY_MIN`] to [`REAP_RETRY_MAX`]).
    /// One task per tombstone (key and clock): a second request for it is
    /// ignored. At most [`MAX_PENDING_REAPS`] wait at once; beyond, the
    /// tombstone stays (counted as dropped; `aae fold reap-tombs` reaps it
    /// later). The task holds the node weakly: reaps pending at shutdown
    /// are dropped.
    pub(crate) fn schedule_reap(
        &self,
        bucket: &[u8],
        key: &[u8],
        clock: VClock,
        delay: std::time::Duration,
    ) {
        let node = self.me.clone();
        self.schedule_reap_with(bucket, key, clock, delay, move |b, k, clock| {
            let node = node.clone();
            async move {
                let node = node.upgrade()?;
                Some(
                    node.try_reap(&b, &k, &clock, true)
                        .await
                        .map_err(|e| e.to_string()),
                )
            }
        });
    }

    /// [`Self::schedule_reap`] with the attempt its caller chooses (the
    /// replication sink settles the tombstone into every replica first and
    /// does not replicate the reap): `attempt(bucket, key, clock)` answers
    /// `None` once its node is gone (the task ends). Shares the pending
    /// set, its bound and the retry schedule.
    pub(crate) fn schedule_reap_with<F, Fut>(
        &self,
        bucket: &[u8],
        key: &[u8],
        clock: VClock,
        delay: std::time::Duration,
        attempt: F,
    ) where
        F: Fn(Vec<u8>, Vec<u8>, VClock) -> Fut + Send + 'static,
        Fut: std::future::Future<Output = Option<Result<Reap, String>>> + Send,
    {
        let stats = &self.stats;
        let id: ReapKey = (bucket.to_vec(), key.to_vec(), clock.encode());
        {
            let mut pending = self.pending_reaps.lock();
            if pending.contains(&id) {
                return;
            }
            if pending.len() >= MAX_PENDING_REAPS {
                stats.reaps_dropped.fetch_add(1, Ordering::Relaxed);
                return;
            }
            pending.insert(id.clone());
            stats.reaps_pending.store(pending.len(), Ordering::Relaxed);
        }
        let node = self.me.clone();
        tokio::spawn(async move {
            let mut wait = delay;
            let mut outcome = Reap::Deferred;
            for _ in 0..REAP_ATTEMPTS {
                tokio::time::sleep(wait).await;
                let Some(result) = attempt(id.0.clone(), id.1.clone(), clock.clone()).await else {
                    return;
                };
                outcome = match result {
                    Ok(r) => r,
                    Err(e) => {
                        // A replica that failed to answer (overload, a
                        // timeout) may answer next time.
                        tracing::debug!(error = %e, "tombstone reap");
                        Reap::Deferred
                    }
                };
                if !outcome.retry() {
                    break;
                }
                wait = (wait * 2).clamp(REAP_RETRY_MIN, REAP_RETRY_MAX);
            }
            if let Some(node) = node.upgrade() {
                let mut pending = node.pending_reaps.lock();
                pending.remove(&id);
                node.stats
                    .reaps_pending
                    .store(pending.len(), Ordering::Relaxed);
                if outcome.retry() {
                    node.stats.reaps_dropped.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
    }

    /// [`Node::try_reap`] without replicating the reap; the replicas
    /// reaped (0 when not all held the tombstone or the reap was put off).
    pub async fn reap_tombstone(
        &self,
        bucket: &[u8],
        key: &[u8],
        vclock: &VClock,
    ) -> Result<usize, RequestError> {
        Ok(match self.try_reap(bucket, key, vclock, false).await? {
            Reap::Reaped(n) => n,
            Reap::NotHeld | Reap::Behind | Reap::Deferred => 0,
        })
    }

    /// Removes a tombstone from the backends of its `n_val` replicas if all
    /// of them hold it with exactly this clock (Riak's reap: every replica
    /// must agree) and no copy of its partitions is held anywhere for
    /// another owner ([`Node::copy_held_elsewhere`]); each replica
    /// re-checks the clock in the same job as the removal, so a write that
    /// raced the reap survives. With `replicate`, a reap done here is
    /// queued for the replication sinks. Counted in `/stats`.
    pub async fn try_reap(
        &self,
        bucket: &[u8],
        key: &[u8],
        vclock: &VClock,
        replicate: bool,
    ) -> Result<Reap, RequestError> {
        let props = self.props.get(bucket);
        let targets = self.router.key_targets(bucket, key, props.n_val);
        // Every replica must be a reachable primary holding this tombstone.
        if targets.len() < props.n_val as usize || targets.iter().any(|t| !t.primary) {
            self.stats.reaps_deferred.fetch_add(1, Ordering::Relaxed);
            return Ok(Reap::Deferred);
        }
        let partitions: Vec<u32> = targets.iter().map(|t| t.partition).collect();
        if let Some(why) = self.copy_held_elsewhere(&partitions).await {
            tracing::debug!(reason = %why, "tombstone reap put off");
            self.stats.reaps_deferred.fetch_add(1, Ordering::Relaxed);
            return Ok(Reap::Deferred);
        }
        let head = || VnodeReq::Head {
            bucket: bucket.to_vec(),
            key: key.to_vec(),
        };
        let mut replies = self.router.fan_out(&targets, head);
        let mut behind = false;
        while let Some((_, res)) = replies.next().await {
            let held = match res? {
                VnodeReply::Object(Some(w), _) => match w.head() {
                    Ok(o) if o.is_deleted() && o.vclock.same_events(vclock) => Held::Same,
                    Ok(o) if vclock.dominates(&o.vclock) => Held::Older,
                    _ => Held::Other,
                },
                VnodeReply::Object(None, _) => Held::Older,
                _ => Held::Other,
            };
            match held {
                Held::Same => {}
                Held::Older => behind = true,
                Held::Other => return Ok(Reap::NotHeld),
            }
        }
        drop(replies);
        if behind {
            return Ok(Reap::Behind);
        }
        let reap = || VnodeReq::ReapTombstone {
            bucket: bucket.to_vec(),
            key: key.to_vec(),
            vclock: vclock.encode(),
        };
        let mut reaped = 0;
        let mut replies = self.router.fan_out(&targets, reap);
        while let Some((_, res)) = replies.next().await {
            if matches!(res?, VnodeReply::Reaped(true)) {
                reaped += 1;
            }
        }
        if reaped > 0 {
            self.stats.reaps.fetch_add(1, Ordering::Relaxed);
            if replicate {
                self.tell_reaped(bucket, key, vclock);
            }
        }
        Ok(Reap::Reaped(reaped))
    }

    /// Why a reap of a key with these preference-list partitions must wait,
    /// or `None` when no node holds a copy of them for another owner: no
    /// transfer of them pending, no local fallback copy, and every other
    /// member up and answering [`Msg::HeldFor`] with none (a member down or
    /// silent may hold one, so it puts the reap off too).
    pub async fn copy_held_elsewhere(&self, partitions: &[u32]) -> Option<String> {
        let held = self.held_for(partitions);
        if !held.is_empty() {
            return Some(format!("partitions {held:?} held here for another owner"));
        }
        let me = self.router.cluster.me().to_string();
        let others: Vec<String> = self
            .router
            .cluster
            .with_state(|s| s.members.keys().filter(|m| **m != me).cloned().collect());
        if let Some(down) = others.iter().find(|m| !self.router.cluster.is_up(m)) {
            return Some(format!("member {down} is down"));
        }
        let msg = Msg::HeldFor {
            partitions: partitions.to_vec(),
        };
        let asks = others.iter().map(|m| {
            let msg = &msg;
            async move { (m, self.router.cluster.call(m, msg, CONTROL_TIMEOUT).await) }
        });
        for (m, reply) in futures_util::future::join_all(asks).await {
            match reply {
                Ok(Reply::Held(h)) if h.is_empty() => {}
                Ok(Reply::Held(h)) => return Some(format!("{m} holds partitions {h:?}")),
                Ok(other) => return Some(format!("{m} answered {other:?}")),
                Err(e) => return Some(format!("{m}: {e}")),
            }
        }
        None
    }
}

/// What one replica holds, against the tombstone a reap would remove.
enum Held {
    /// The tombstone, with the same clock.
    Same,
    /// Nothing, or a version the tombstone replaces.
    Older,
    /// A later or concurrent version (or something unreadable).
    Other,
}
