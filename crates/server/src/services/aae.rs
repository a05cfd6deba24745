//! Active anti-entropy between the replicas of each preference list, by
//! exchanges of the vnodes' cached tictac trees (`vnode::aae_tree`: one
//! tree per preference list and n_val, kept up to date on every write).
//!
//! Every [`Config::aae_interval_secs`](crate::config::Config), a node
//! exchanges each (preference list, n_val) whose first partition it owns
//! (so each list is exchanged by one node), for every n_val in use (the
//! default type's, each bucket type's, each bucket's own):
//!
//! 1. **root**: each replica vnode answers its tree's root (one hash per
//!    branch); equal roots end the exchange — in-sync replicas cost a
//!    root compare, no fold; differing roots are compared again after
//!    `aae_confirm_ms` and only branches dirty both times go on (a write
//!    still reaching its replicas is not a repair);
//! 2. **branches**: the segment hashes of at most
//!    [`AAE_MAX_BRANCHES`](crate::limits::AAE_MAX_BRANCHES) dirty branches;
//! 3. **keys**: each replica lists its keys (with their key-state hashes)
//!    in at most [`MAX_DIRTY_SEGMENTS`] dirty segments — a fold filtered by
//!    segment;
//! 4. **repair**: every key whose state differs or that some replica lacks
//!    is repaired by a GET at `r = n`, whose read repair writes the merged
//!    object to the stale replicas.
//!
//! A vnode builds its trees by one fold the first time an exchange asks.
//! Exchanges are skipped while ownership transfers are pending or when a
//! replica's node is down (hinted handoff covers that case).

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
        self.start_aae_rebuilds();
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

    /// `basalt admin aae status`: the cached trees and exchange counters.
    pub async fn aae_status(&self) -> String {
        let (bytes, built, folds) = self.aae_tree_stats().await;
        let s = self.stats();
        format!(
            "tree size: {} ({} segments)\nvnodes with trees built: {built} of {}\ntree memory: {bytes} bytes\nfolds (builds + segment listings): {folds}\nexchanges: {}\nrepairs: {}\nn_vals exchanged: {:?}\n{}",
            self.config.aae_tree_size,
            self.config.aae_tree_size().map_or(0, |t| t.segments()),
            self.router.local_vnodes().len(),
            s.aae_exchanges.load(Ordering::Relaxed),
            s.aae_repairs.load(Ordering::Relaxed),
            self.aae_n_vals(),
            self.aae_rebuild_status().await,
        )
    }

    /// The n_vals in use: the default type's, each bucket type's and each
    /// bucket's own.
    pub fn aae_n_vals(&self) -> Vec<u32> {
        let mut n: std::collections::BTreeSet<u32> = std::collections::BTreeSet::new();
        n.insert(self.props().get(b"").n_val);
        for (_, t) in self.types().list() {
            n.insert(t.props.n_val);
        }
        for patch in self.props().snapshot().values() {
            if let Some(v) = patch.n_val {
                n.insert(v);
            }
        }
        n.into_iter()
            .map(|v| v.clamp(1, self.router.ring.size()))
            .collect::<std::collections::BTreeSet<u32>>()
            .into_iter()
            .collect()
    }

    /// One exchange of the preference list starting at partition `first`,
    /// for each n_val in use ([`Self::aae_n_vals`]); the totals.
    pub async fn aae_exchange(&self, first: u32) -> Result<Exchange, String> {
        let mut total = Exchange::default();
        for n in self.aae_n_vals() {
            let x = self.aae_exchange_n(first, n).await?;
            total.dirty_segments += x.dirty_segments;
            total.repaired += x.repaired;
        }
        Ok(total)
    }

    /// One exchange of the tree (`first`, `n`) between its `n` replicas.
    pub async fn aae_exchange_n(&self, first: u32, n: u32) -> Result<Exchange, String> {
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
        let mut x = Exchange::default();
        // 1. Roots; if they differ, again after a pause: only branches
        // dirty both times count (writes in flight are not repairs).
        let mut dirty_branches = differing(&self.aae_roots(&targets, first, n).await?);
        let pause = self.config.aae_confirm_ms;
        if !dirty_branches.is_empty() && pause > 0 {
            tokio::time::sleep(Duration::from_millis(pause)).await;
            let again = differing(&self.aae_roots(&targets, first, n).await?);
            dirty_branches.retain(|b| again.contains(b));
        }
        dirty_branches.truncate(crate::limits::AAE_MAX_BRANCHES);
        if dirty_branches.is_empty() {
            return Ok(x);
        }
        // 2. Branches: segment hashes of the dirty branches.
        let mut branch_sets = Vec::with_capacity(targets.len());
        for t in &targets {
            let req = VnodeReq::AaeBranches {
                first,
                n_val: n,
                branches: dirty_branches.clone(),
            };
            match self.vcall_aae(t, req).await? {
                VnodeReply::AaeBranches(b) => branch_sets.push(b),
                _ => return Err("unexpected anti-entropy branch reply".into()),
            }
        }
        let mut dirty = Vec::new();
        for (i, branch) in dirty_branches.iter().enumerate() {
            let segs: Vec<Vec<u64>> = branch_sets
                .iter()
                .map(|set| {
                    set.get(i)
                        .filter(|(b, _)| b == branch)
                        .map_or_else(Vec::new, |(_, s)| s.clone())
                })
                .collect();
            for s in differing(&segs) {
                dirty.push(branch * 256 + s);
            }
        }
        x.dirty_segments = dirty.len();
        let dirty: Vec<u32> = dirty.into_iter().take(MAX_DIRTY_SEGMENTS).collect();
        if dirty.is_empty() {
            return Ok(x);
        }
        // 3. Keys in the dirty segments.
        let mut keys: BTreeMap<BucketKey, Vec<Option<u64>>> = BTreeMap::new();
        for (i, t) in targets.iter().enumerate() {
            let req = VnodeReq::AaeSegmentKeys {
                first,
                n_val: n,
                segments: dirty.clone(),
            };
            let VnodeReply::AaeKeys(list) = self.vcall_aae(t, req).await? else {
                return Err("unexpected anti-entropy keys reply".into());
            };
            for (b, k, h) in list {
                keys.entry((b, k))
                    .or_insert_with(|| vec![None; targets.len()])[i] = Some(h);
            }
        }
        // 4. Repair what differs.
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

    /// Each target's root of tree (`first`, `n`).
    async fn aae_roots(
        &self,
        targets: &[Target],
        first: u32,
        n: u32,
    ) -> Result<Vec<Vec<u64>>, String> {
        let mut roots = Vec::with_capacity(targets.len());
        for t in targets {
            match self
                .vcall_aae(t, VnodeReq::AaeRoot { first, n_val: n })
                .await?
            {
                VnodeReply::AaeRoot(r) => roots.push(r),
                _ => return Err("unexpected anti-entropy root reply".into()),
            }
        }
        Ok(roots)
    }

    async fn vcall_aae(&self, t: &Target, req: VnodeReq) -> Result<VnodeReply, String> {
        self.router
            .vcall(t, req)
            .await
            .map_err(|e| format!("{} partition {}: {e}", t.node, t.partition))
    }
}

/// Positions where the vectors differ (a shorter or empty vector counts as
/// zeros there).
fn differing(v: &[Vec<u64>]) -> Vec<u32> {
    let len = v.iter().map(Vec::len).max().unwrap_or(0);
    (0..len)
        .filter(|&i| {
            let at = |x: &Vec<u64>| x.get(i).copied().unwrap_or(0);
            v.iter().any(|x| at(x) != at(&v[0]))
        })
        .map(|i| i as u32)
        .collect()
}
