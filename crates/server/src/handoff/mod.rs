//! Handoff: a vnode on a node that should not hold it streams its data to
//! the node that should, while both keep serving.
//!
//! * **Ownership** handoff: after a commit, partition `p` has `next[p]`; its
//!   current owner folds its vnode in batches to the new owner, forwards
//!   every write it takes meanwhile, then tells the claimant, which moves
//!   the partition in the ring. Once the old owner sees the new ring it
//!   drops its copy.
//! * **Hinted** handoff: a fallback vnode (it took writes while the owner
//!   was down) or any other vnode this node does not own hands its data to
//!   the owner as soon as the owner is up again, then is deleted.
//!
//! At most `transfer_limit` handoffs run at once per node (Riak's
//! `transfer-limit`, default 2, changed at run time with `basalt admin
//! transfer-limit`); 0 pauses them.
//!
//! Progress (objects sent, the last key the receiver acknowledged) is kept
//! per partition: a failed batch is retried from that key on the next
//! round, not from the start. Receiving merges each object like a replica
//! write (vector clocks decide), so a batch sent twice changes nothing.

use crate::bucket::store::PropsStore;
use crate::cluster::{Handoff, HandoffKind, Msg, Reply, CONTROL_TIMEOUT};
use crate::router::Router;
use crate::vnode::request::{Obj, VnodeReply, VnodeReq, WireObject};
use futures_util::StreamExt;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::sync::Notify;

pub use crate::limits::HANDOFF_BATCH;
pub use crate::limits::HANDOFF_INTERVAL;
pub use crate::limits::MAX_TRANSFER_LIMIT;
/// Passes run when forwarded writes keep failing, before the next round.
const MAX_PASSES: usize = 3;

/// The handoff service: it needs the router (the vnode table, folds, the
/// cluster view and transport), the bucket props (a receiver merges each
/// object by its bucket's rules) and a way to ask for a gossip round now
/// (after a transfer, so the new ring spreads at once).
pub struct HandoffService {
    router: Arc<Router>,
    props: Arc<PropsStore>,
    gossip_now: Arc<Notify>,
    transfer_limit: AtomicUsize,
}

impl HandoffService {
    /// A service over these handles.
    pub fn new(router: Arc<Router>, props: Arc<PropsStore>, gossip_now: Arc<Notify>) -> Self {
        let limit = router.config.transfer_limit;
        HandoffService {
            router,
            props,
            gossip_now,
            transfer_limit: AtomicUsize::new(limit),
        }
    }

    /// Looks for handoffs every [`HANDOFF_INTERVAL`] while `owner` (the
    /// node) lives.
    pub fn start<T: Send + Sync + 'static>(self: Arc<Self>, owner: std::sync::Weak<T>) {
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(HANDOFF_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                if owner.upgrade().is_none() {
                    break;
                }
                self.round().await;
            }
        });
    }

    /// Handoffs this node runs at once (Riak's `transfer-limit`); 0
    /// pauses them (writes still reach fallbacks, which keep their data).
    pub fn transfer_limit(&self) -> usize {
        self.transfer_limit.load(Ordering::Relaxed)
    }

    /// Sets [`Self::transfer_limit`] (from `basalt admin transfer-limit`);
    /// handoffs under way finish their pass.
    pub fn set_transfer_limit(&self, limit: usize) -> Result<(), String> {
        if limit > MAX_TRANSFER_LIMIT {
            return Err(format!(
                "transfer limit {limit} is above the most allowed, {MAX_TRANSFER_LIMIT}"
            ));
        }
        self.transfer_limit.store(limit, Ordering::Relaxed);
        Ok(())
    }

    /// The partitions among `partitions` of which this node holds a copy
    /// for another owner: a fallback or leftover vnode (hinted handoff
    /// pending), either side of an ownership transfer, a vnode being
    /// deleted after its handoff, or a write to a fallback still running
    /// or being forwarded ([`Router::hold`]). A tombstone of such a
    /// partition must not be reaped: the copy handed over later would
    /// bring the key back.
    pub fn held_for(&self, partitions: &[u32]) -> Vec<u32> {
        let me = self.router.cluster.me();
        // The table before the guards: a vnode is dropped after its guard
        // is taken, so one of the two reads sees it.
        let local: Vec<u32> = {
            let vnodes = self.router.vnodes.read();
            partitions
                .iter()
                .copied()
                .filter(|p| vnodes.contains_key(p))
                .collect()
        };
        let guarded = self.router.held(partitions);
        self.router.cluster.with_state(|state| {
            partitions
                .iter()
                .copied()
                .filter(|p| {
                    guarded.contains(p)
                        || state.next.contains_key(p)
                        || (local.contains(p) && state.owner(*p) != me)
                })
                .collect()
        })
    }

    /// One pass over the local vnodes: finished hinted copies are dropped,
    /// the handoffs due run, [`Self::transfer_limit`] at a time.
    pub async fn round(&self) {
        let me = self.router.cluster.me().to_string();
        let state = self.router.cluster.state();
        let local: Vec<u32> = self.router.vnodes.read().keys().copied().collect();
        let mut due = Vec::new();
        for p in local {
            let owner = state.owner(p).to_string();
            let next = state.next.get(&p).cloned();
            let (kind, target) = if owner == me {
                match next {
                    Some(t) if t != me => (HandoffKind::Ownership, t),
                    _ => continue,
                }
            } else if next.as_deref() == Some(me.as_str()) {
                continue; // receiving this partition
            } else {
                (HandoffKind::Hinted, owner)
            };
            let (mut finished, dirty) = self.router.cluster.with_handoffs(|h| {
                h.get(&p).map_or((false, false), |h| {
                    (h.done && h.kind == HandoffKind::Ownership, h.dirty)
                })
            });
            if finished && kind == HandoffKind::Hinted {
                if dirty {
                    // A write reached our copy after the pass and could not
                    // be forwarded: hand the copy over again (hinted).
                    self.router.cluster.with_handoffs(|h| h.remove(&p));
                    finished = false;
                } else {
                    // The ring moved after our ownership handoff: drop the copy.
                    self.drop_vnode(p);
                    continue;
                }
            }
            if finished || !self.router.cluster.is_up(&target) {
                continue;
            }
            due.push((p, kind, target));
        }
        let limit = self.transfer_limit();
        if limit == 0 || due.is_empty() {
            return;
        }
        futures_util::stream::iter(due)
            .for_each_concurrent(limit, |(p, kind, target)| async move {
                if let Err(e) = self.run(p, kind, &target).await {
                    tracing::warn!(partition = p, %target, error = %e, "handoff paused; it resumes on the next round");
                }
            })
            .await;
    }

    async fn run(&self, p: u32, kind: HandoffKind, target: &str) -> Result<(), String> {
        self.router.cluster.with_handoffs(|h| {
            let e = h.entry(p).or_insert_with(|| Handoff::new(kind, target));
            if e.target != target || e.kind != kind {
                *e = Handoff::new(kind, target);
            }
        });
        tracing::info!(partition = p, ?kind, %target, "handoff starts");
        for _ in 0..MAX_PASSES {
            loop {
                let cursor = self
                    .router
                    .cluster
                    .with_handoffs(|h| h.get(&p).and_then(|h| h.cursor.clone()));
                let reply = self
                    .router
                    .local_call(
                        p,
                        VnodeReq::Fold {
                            after: cursor,
                            limit: HANDOFF_BATCH,
                        },
                    )
                    .await
                    .map_err(|e| format!("folding vnode {p}: {e}"))?;
                let VnodeReply::Batch(objects) = reply else {
                    return Err("unexpected fold reply".into());
                };
                let n = objects.len();
                let last = objects.last().map(|(b, k, _)| (b.clone(), k.clone()));
                if n > 0 {
                    let msg = Msg::Handoff {
                        partition: p,
                        objects,
                    };
                    match self
                        .router
                        .cluster
                        .call(target, &msg, self.router.timeout())
                        .await
                    {
                        Ok(Reply::Ok) => {}
                        Ok(Reply::Refused(e)) => return Err(e),
                        Ok(other) => return Err(format!("unexpected reply {other:?}")),
                        Err(e) => return Err(e.to_string()),
                    }
                }
                self.router.cluster.with_handoffs(|h| {
                    if let Some(h) = h.get_mut(&p) {
                        h.sent += n as u64;
                        if last.is_some() {
                            h.cursor = last;
                        }
                    }
                });
                if n == 0 {
                    break;
                }
            }
            let again = self.router.cluster.with_handoffs(|h| {
                h.get_mut(&p).is_some_and(|h| {
                    let d = h.dirty;
                    if d {
                        h.dirty = false;
                        h.cursor = None;
                    }
                    d
                })
            });
            if !again {
                break;
            }
        }
        let sent = self
            .router
            .cluster
            .with_handoffs(|h| h.get(&p).map_or(0, |h| h.sent));
        tracing::info!(partition = p, ?kind, %target, sent, "handoff pass finished");
        match kind {
            HandoffKind::Ownership => {
                self.router.cluster.with_handoffs(|h| {
                    if let Some(h) = h.get_mut(&p) {
                        h.done = true;
                    }
                });
                let me = self.router.cluster.me().to_string();
                let msg = Msg::TransferDone {
                    partition: p,
                    from: me.clone(),
                    to: target.to_string(),
                };
                let claimant = self
                    .router
                    .cluster
                    .with_state(|s| s.claimant().map(str::to_string))
                    .unwrap_or_default();
                if claimant == me {
                    let t = target.to_string();
                    self.router.cluster.update(|s| s.transfer_done(p, &me, &t));
                    self.gossip_now.notify_one();
                } else {
                    match self
                        .router
                        .cluster
                        .call(&claimant, &msg, CONTROL_TIMEOUT)
                        .await
                    {
                        Ok(Reply::Ok) => self.gossip_now.notify_one(),
                        Ok(other) => {
                            self.router.cluster.with_handoffs(|h| h.remove(&p));
                            return Err(format!("claimant refused the transfer: {other:?}"));
                        }
                        Err(e) => {
                            self.router.cluster.with_handoffs(|h| h.remove(&p));
                            return Err(format!("telling the claimant: {e}"));
                        }
                    }
                }
            }
            HandoffKind::Hinted => self.drop_vnode(p),
        }
        Ok(())
    }

    /// Closes the local vnode of `p` and deletes its data. Until that is
    /// done `p` counts as held here ([`Self::held_for`]) and is not
    /// reopened.
    fn drop_vnode(&self, p: u32) {
        let _held = self.router.hold_dropping(p);
        let v = self.router.vnodes.write().remove(&p);
        if let Some(v) = v {
            v.shutdown(); // queued writes finish (and are forwarded) first
        }
        let dirty = self
            .router
            .cluster
            .with_handoffs(|h| h.remove(&p).is_some_and(|h| h.dirty));
        if dirty {
            // A write it took could not be forwarded: keep the data, reopen
            // the vnode, hand it off again on a later round.
            tracing::warn!(
                partition = p,
                "vnode took writes during its last handoff; keeping it"
            );
            match self.router.open_vnode(p) {
                Ok(v) => {
                    self.router.vnodes.write().insert(p, Arc::new(v));
                }
                Err(e) => tracing::error!(partition = p, error = %e, "reopening a vnode"),
            }
            return;
        }
        let dir = self
            .router
            .config
            .data_dir
            .join("vnodes")
            .join(p.to_string());
        // The status file goes first: a crash between the two leaves data
        // without a status, which starts a new incarnation (safe).
        if let Err(e) = crate::vnode::id::remove(&dir) {
            tracing::error!(partition = p, error = %e, "deleting a handed-off vnode's status");
            return;
        }
        if let Err(e) = crate::vnode::aae_tree::remove(&dir) {
            tracing::warn!(partition = p, error = %e, "deleting a handed-off vnode's anti-entropy trees");
        }
        match std::fs::remove_dir_all(&dir) {
            Ok(()) => tracing::info!(partition = p, "handed-off vnode deleted"),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => tracing::error!(partition = p, error = %e, "deleting a handed-off vnode"),
        }
    }

    /// Merges a handoff batch into the local vnode of `p`.
    pub async fn receive(&self, p: u32, objects: Vec<(Vec<u8>, Vec<u8>, WireObject)>) -> Reply {
        for (bucket, key, object) in objects {
            let props = self.props.get(&bucket);
            let req = VnodeReq::Reconcile {
                bucket,
                key,
                object: Obj::Wire(object),
                props,
            };
            if let Err(e) = self.router.local_call(p, req).await {
                return Reply::Refused(format!("partition {p}: {e}"));
            }
        }
        Reply::Ok
    }
}

/// A reap waits while a partition is held here for another owner.
impl crate::kv::HeldCopies for HandoffService {
    fn held_for(&self, partitions: &[u32]) -> Vec<u32> {
        HandoffService::held_for(self, partitions)
    }
}

#[cfg(test)]
mod tests {
    use crate::config::Config;
    use crate::node::Node;

    fn node(dir: &std::path::Path) -> Node {
        Node::open(Config::ephemeral(dir)).expect("open")
    }

    /// A write to a copy held for another owner, and the drop of a
    /// handed-off vnode, count as held until they end (a reap waits on
    /// them); a vnode being dropped is not reopened meanwhile, however many
    /// drops of it overlap.
    #[test]
    fn guarded_partitions_are_held_and_a_dropping_vnode_is_not_reopened() {
        let dir = tempfile::tempdir().expect("tempdir");
        let node = node(dir.path());
        let (router, handoff) = (&node.router, &node.handoff);
        // One node owns every partition: nothing is held for another.
        assert!(handoff.held_for(&[1, 2]).is_empty());
        let first = router.hold(1);
        let second = router.hold(1);
        assert_eq!(handoff.held_for(&[1, 2]), vec![1]);
        drop(first);
        assert_eq!(
            handoff.held_for(&[1, 2]),
            vec![1],
            "one write still holds it"
        );
        drop(second);
        assert!(handoff.held_for(&[1, 2]).is_empty());

        let v = router.vnodes.write().remove(&2).expect("vnode 2 open");
        v.shutdown();
        let dropping = router.hold_dropping(2);
        assert_eq!(handoff.held_for(&[1, 2]), vec![2]);
        let refused = router.local_vnode(2).err().map(|e| e.to_string());
        assert!(
            refused
                .as_deref()
                .is_some_and(|e| e.contains("being deleted")),
            "{refused:?}"
        );
        // Two overlapping drops of one partition: the first to end does
        // not let the other's vnode be reopened.
        let overlapping = router.hold_dropping(2);
        drop(dropping);
        assert!(
            router.local_vnode(2).is_err(),
            "reopened while another drop of it runs"
        );
        drop(overlapping);
        assert!(handoff.held_for(&[1, 2]).is_empty());
        assert!(
            router.local_vnode(2).is_ok(),
            "reopened once the drop ended"
        );
    }
}
