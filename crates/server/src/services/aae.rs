//! Active anti-entropy between the replicas of each preference list, by
//! tictac-tree exchange (the shape of Riak's tictac AAE, computed by fold
//! rather than kept incrementally).
//!
//! Every [`Config::aae_interval_secs`](crate::config::Config), a node
//! exchanges each preference list whose first partition it owns (so each
//! list is exchanged by one node): every replica vnode folds its keys of
//! that list into a 4096-segment tree (each key hashed with its state: clock
//! and siblings, so one clock over different siblings is seen too);
//! segments where the trees differ are dirty; the replicas list their keys
//! in at most [`MAX_DIRTY_SEGMENTS`] dirty segments; every key whose state
//! differs or that some replica lacks is repaired by a GET at `r = n`,
//! whose read repair writes the merged object to the stale replicas.
//! Exchanges are skipped while ownership transfers are pending or when a
//! replica's node is down (hinted handoff covers that case). Cost: each
//! exchange folds the keys of its n replica vnodes; the interval bounds it.

use crate::kv::GetOpts;
use crate::node::Node;
use crate::router::Target;
use crate::vnode::request::{VnodeReply, VnodeReq};
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

type BucketKey = (Vec<u8>, Vec<u8>);

pub use crate::limits::MAX_DIRTY_SEGMENTS;

/// What one exchange found.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Exchange {
    /// Segments whose hashes differed.
    pub dirty_segments: usize,
    /// Keys repaired.
    pub repaired: usize,
}

impl Node {
    /// Runs an anti-entropy round every `aae_interval_secs` (0: never)
    /// while the node lives.
    pub fn start_aae(self: &Arc<Self>) {
        let secs = self.config.aae_interval_secs;
        if secs == 0 {
            return;
        }
        let node = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs(secs));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await; // the first tick is immediate: skip it
            loop {
                tick.tick().await;
                let Some(n) = node.upgrade() else { break };
                n.aae_round().await;
            }
        });
    }

    /// Exchanges every preference list whose first partition this node
    /// owns; returns the totals.
    pub async fn aae_round(&self) -> Exchange {
        let me = self.router.cluster.me().to_string();
        let (firsts, pending) = self
            .router
            .cluster
            .with_state(|s| (s.owned_by(&me), !s.next.is_empty()));
        let mut total = Exchange::default();
        if pending || self.router.cluster.with_state(|s| s.members.len()) < 2 {
            return total;
        }
        for f in firsts {
            match self.aae_exchange(f).await {
                Ok(x) => {
                    total.dirty_segments += x.dirty_segments;
                    total.repaired += x.repaired;
                }
                Err(e) => tracing::debug!(first = f, error = %e, "anti-entropy exchange skipped"),
            }
        }
        if total.repaired > 0 {
            tracing::info!(
                repaired = total.repaired,
                dirty_segments = total.dirty_segments,
                "anti-entropy repaired keys"
            );
        }
        total
    }

    /// One exchange of the preference list starting at partition `first`
    /// (n = the default bucket type's `n_val`).
    pub async fn aae_exchange(&self, first: u32) -> Result<Exchange, String> {
        let n = self
            .props()
            .get(b"")
            .n_val
            .clamp(1, self.router.ring.size());
        let size = self.router.ring.size();
        let targets: Vec<Target> = self.router.cluster.with_state(|s| {
            (0..n)
                .map(|d| {
                    let p = (first + d) % size;
                    Target {
                        partition: p,
                        node: s.owner(p).to_string(),
                        primary: true,
                    }
                })
                .collect()
        });
        if let Some(t) = targets.iter().find(|t| !self.router.cluster.is_up(&t.node)) {
            return Err(format!("{} is down", t.node));
        }
        self.stats().aae_exchanges.fetch_add(1, Ordering::Relaxed);
        let mut trees = Vec::with_capacity(targets.len());
        for t in &targets {
            let req = VnodeReq::AaeTree {
                ring_size: size,
                firsts: vec![first],
            };
            match self.router.vcall(t, req).await.map_err(|e| e.to_string())? {
                VnodeReply::AaeTree(tree) => trees.push(tree),
                _ => return Err("unexpected anti-entropy reply".into()),
            }
        }
        let segments = trees.first().map_or(0, Vec::len);
        let dirty: Vec<u32> = (0..segments)
            .filter(|&i| trees.iter().any(|t| t.get(i) != trees[0].get(i)))
            .map(|i| i as u32)
            .collect();
        let mut x = Exchange {
            dirty_segments: dirty.len(),
            repaired: 0,
        };
        if dirty.is_empty() {
            return Ok(x);
        }
        let dirty: Vec<u32> = dirty.into_iter().take(MAX_DIRTY_SEGMENTS).collect();
        // (bucket, key) → the clock hash each replica holds (None: missing).
        let mut keys: BTreeMap<BucketKey, Vec<Option<u64>>> = BTreeMap::new();
        for (i, t) in targets.iter().enumerate() {
            let req = VnodeReq::AaeKeys {
                ring_size: size,
                firsts: vec![first],
                segments: dirty.clone(),
            };
            let VnodeReply::AaeKeys(list) =
                self.router.vcall(t, req).await.map_err(|e| e.to_string())?
            else {
                return Err("unexpected anti-entropy reply".into());
            };
            for (b, k, h) in list {
                keys.entry((b, k))
                    .or_insert_with(|| vec![None; targets.len()])[i] = Some(h);
            }
        }
        for ((bucket, key), hashes) in keys {
            if hashes.iter().all(|h| *h == hashes[0]) {
                continue;
            }
            let opts = GetOpts {
                r: Some(n),
                ..GetOpts::default()
            };
            match self.get(&bucket, &key, &opts).await {
                Ok(_) => {
                    x.repaired += 1;
                    self.stats().aae_repairs.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => tracing::debug!(error = %e, "anti-entropy repair GET"),
            }
        }
        Ok(x)
    }
}
