//! Active anti-entropy between the replicas of each preference list, by
//! exchanges of the vnodes' cached tictac trees (`vnode::aae_tree`: one
//! tree per preference list and n_val, kept up to date on every write).
//! One exchange is [`super::aae_exchange`]; this module schedules them.
//!
//! **Scheduling** (as Riak's tictac AAE): a node's work items are the
//! (first partition, n_val) pairs whose first partition it owns (so each
//! preference list is exchanged by one node), for every n_val in use (the
//! default type's, each bucket type's, each bucket's own). The node keeps
//! them in a shuffled queue ([`ExchangeQueue`]) and pops **one per tick**;
//! a pass over the queue takes `aae_interval_secs`: the tick is the
//! interval divided by the pass's items, never below
//! [`AAE_MIN_TICK`](crate::limits::AAE_MIN_TICK) ([`tick`]; it is the
//! pause from the end of one exchange to the start of the next, so slow
//! exchanges stretch a pass). When the
//! queue is empty it is refilled from the items of that moment and
//! shuffled again, so exchanges do not run in partition order and a list
//! whose exchange is skipped is retried in the next pass.
//!
//! Exchanges are primary-only: one is skipped while ownership transfers
//! are pending, when a replica's node is down (hinted handoff covers that
//! case), or when a replica cannot answer (e.g. its trees are not built
//! yet); the next pass retries it.
//!
//! One exchange of a list runs at a time on a node (an admin round meeting
//! a scheduled exchange of the same list skips it).
//!
//! **Repair throttle**: the read repairs of all exchanges of the node are
//! paced ([`Pacer`]) to `aae_repairs_per_sec` (0 = unlimited).
//!
//! [`Aae::aae_round`] runs every work item now, one after the other (for
//! tests and `basalt admin aae round`).

pub mod exchange;
pub mod fold;
pub mod rebuild;

pub use crate::limits::MAX_DIRTY_SEGMENTS;
/// The name of the fold-query service on the cluster port
/// ([`crate::cluster::Msg::Service`]): a full-sync of another cluster runs
/// an anti-entropy fold query here (cached-tree roots, branches, clocks;
/// range trees and clocks).
pub const FOLD_SERVICE: &str = "aae_fold";

pub use exchange::{follow_up_scope, Exchange, Scope};
pub use fold::{FoldQuery, FoldResult, KeyEntry, RangeFilter};

pub mod http;
pub mod pb;

use crate::kv::Kv;
use crate::limits::AAE_MIN_TICK;
use parking_lot::Mutex;
use rand::rngs::StdRng;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One exchange's work: (first partition, n_val).
pub type WorkItem = (u32, u32);

/// A node's queue of exchanges; see the module docs.
#[derive(Debug)]
pub struct ExchangeQueue {
    pending: Vec<WorkItem>,
    pass_len: usize,
    passes: u64,
    rng: StdRng,
}

impl ExchangeQueue {
    /// An empty queue shuffling with `seed`.
    pub fn new(seed: u64) -> ExchangeQueue {
        ExchangeQueue {
            pending: Vec::new(),
            pass_len: 0,
            passes: 0,
            rng: StdRng::seed_from_u64(seed),
        }
    }

    /// The next item; when the queue is empty it is first refilled from
    /// `items()` (the items of now) and shuffled. `None` if there are none.
    pub fn next(&mut self, items: impl FnOnce() -> Vec<WorkItem>) -> Option<WorkItem> {
        if self.pending.is_empty() {
            let mut all = items();
            all.sort_unstable();
            all.dedup();
            all.shuffle(&mut self.rng);
            self.pass_len = all.len();
            self.passes += 1;
            self.pending = all;
        }
        self.pending.pop()
    }

    /// Items of the current pass (the last refill).
    pub fn pass_len(&self) -> usize {
        self.pass_len
    }

    /// Items of the current pass not popped yet.
    pub fn remaining(&self) -> usize {
        self.pending.len()
    }

    /// Refills so far.
    pub fn passes(&self) -> u64 {
        self.passes
    }
}

/// The pause between two scheduled exchanges: `interval` spread over the
/// pass's `items`, at least [`AAE_MIN_TICK`].
pub fn tick(interval: Duration, items: usize) -> Duration {
    let n = u32::try_from(items.max(1)).unwrap_or(u32::MAX);
    (interval / n).max(AAE_MIN_TICK)
}

/// Paces events to a rate: each [`Pacer::reserve`] takes the next slot.
#[derive(Debug)]
pub struct Pacer {
    every: Option<Duration>,
    next: Mutex<Option<Instant>>,
}

impl Pacer {
    /// At most `per_sec` events a second (0 = unlimited).
    pub fn new(per_sec: u64) -> Pacer {
        Pacer {
            every: (per_sec > 0).then(|| Duration::from_secs(1) / per_sec.min(1 << 30) as u32),
            next: Mutex::new(None),
        }
    }

    /// Reserves the next slot at or after `now`; how long to wait for it.
    /// Unused time is not saved up: after a quiet spell the next event
    /// goes at once, the one after it a slot later.
    pub fn reserve(&self, now: Instant) -> Duration {
        let Some(every) = self.every else {
            return Duration::ZERO;
        };
        let mut next = self.next.lock();
        let at = next.map_or(now, |n| n.max(now));
        *next = Some(at + every);
        at - now
    }
}

/// A node's anti-entropy scheduling state.
#[derive(Debug)]
pub struct AaeService {
    /// The exchange queue.
    pub queue: Mutex<ExchangeQueue>,
    /// The repair pacing.
    pub pacer: Pacer,
    /// Exchanges running (a scheduled one and an admin round may meet).
    running: Mutex<std::collections::BTreeSet<WorkItem>>,
}

/// An exchange marked running until dropped.
pub(crate) struct Running<'a> {
    service: &'a AaeService,
    item: WorkItem,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        self.service.running.lock().remove(&self.item);
    }
}

impl AaeService {
    /// For a node with `config`; the queue's shuffle is seeded from the
    /// clock.
    pub fn new(config: &crate::config::Config) -> AaeService {
        let seed = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        AaeService {
            queue: Mutex::new(ExchangeQueue::new(seed)),
            pacer: Pacer::new(config.aae_repairs_per_sec),
            running: Mutex::new(std::collections::BTreeSet::new()),
        }
    }

    /// Marks the exchange of `item` running; `None` if it already is (one
    /// exchange of a list at a time, so no key is repaired twice).
    pub(crate) fn start(&self, item: WorkItem) -> Option<Running<'_>> {
        // The lock is released before a `Running` exists (its drop locks).
        let inserted = self.running.lock().insert(item);
        inserted.then(|| Running {
            service: self,
            item,
        })
    }
}

/// A queue a `repl_keys` fold fills with the keys it finds (a
/// replication sink's queue, at full-sync priority).
pub trait KeyQueue: Send + Sync {
    /// Queues `keys`; how many were queued.
    fn requeue(&self, keys: Vec<KeyEntry>) -> u64;
}

/// Finds the queue a `repl_keys` fold names: replication's sinks, which the
/// node registers with [`Aae::set_key_queues`] (anti-entropy never names
/// replication).
pub trait KeyQueues: Send + Sync {
    /// The queue named `name` on this node, if there is one.
    fn key_queue(&self, name: &str) -> Option<Arc<dyn KeyQueue>>;
}

/// The anti-entropy capability: the exchange scheduler and repair pacing
/// ([`AaeService`]), the tree rebuild scheduler ([`rebuild::AaeRebuilds`])
/// and the fold queries, over the KV layer it repairs through (a repair
/// is a GET). It dereferences to that [`Kv`]: the platform is all it uses.
pub struct Aae {
    kv: Arc<Kv>,
    /// Scheduling: the exchange queue and repair pacing.
    pub(crate) aae: AaeService,
    /// The tree rebuild scheduler.
    pub(crate) aae_rebuilds: rebuild::AaeRebuilds,
    key_queues: parking_lot::RwLock<Option<Arc<dyn KeyQueues>>>,
}

impl std::ops::Deref for Aae {
    type Target = Kv;
    fn deref(&self) -> &Kv {
        &self.kv
    }
}

impl Aae {
    /// Checks every local vnode's cached anti-entropy trees against a fresh
    /// fold (building them first where there are none); the partitions
    /// whose trees differ. A whole-store read: for tests and operators.
    /// A vnode that closes during the walk and leaves the table (handed
    /// off to its new owner since the list was taken) is no longer local
    /// and is passed over.
    pub async fn aae_verify_trees(&self) -> Result<Vec<u32>, crate::vnode::VnodeError> {
        self.aae_build_missing()
            .await
            .map_err(crate::vnode::VnodeError::Remote)?;
        self.aae_verify_vnodes(self.router.local_vnodes()).await
    }

    /// The walk of [`Self::aae_verify_trees`] over `local`, a snapshot of
    /// the node's vnodes that may be stale by the time each is asked.
    pub async fn aae_verify_vnodes(
        &self,
        local: Vec<(u32, Arc<crate::vnode::Vnode>)>,
    ) -> Result<Vec<u32>, crate::vnode::VnodeError> {
        let mut bad = Vec::new();
        for (p, v) in local {
            match v.call(self.timeout(), |st| st.aae_verify()).await {
                Ok(true) => {}
                Ok(false) => bad.push(p),
                Err(crate::vnode::VnodeError::Closed) if !self.router.has_local_vnode(p) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(bad)
    }

    /// Anti-entropy trees over the local vnodes: (bytes in memory, vnodes
    /// with trees built, anti-entropy folds run since each vnode opened:
    /// completed tree rebuilds and segment key listings).
    pub async fn aae_tree_stats(&self) -> (u64, u64, u64) {
        let (mut bytes, mut built, mut builds) = (0u64, 0u64, 0u64);
        for (_, v) in self.router.local_vnodes() {
            let Ok(pending) = v.submit(|st| {
                Ok(st.aae.as_ref().map(|a| {
                    let trees = a.trees.lock();
                    (
                        trees.as_ref().map_or(0, |t| t.memory_bytes() as u64),
                        u64::from(trees.is_some()),
                        a.folds.load(std::sync::atomic::Ordering::Relaxed),
                    )
                }))
            }) else {
                continue;
            };
            if let Ok(Some((b, t, f))) = pending.wait(self.timeout()).await {
                bytes += b;
                built += t;
                builds += f;
            }
        }
        (bytes, built, builds)
    }
}

impl Aae {
    /// Anti-entropy over `kv`, with the config's schedule.
    pub fn new(kv: Arc<Kv>) -> Aae {
        let aae = AaeService::new(&kv.config);
        Aae {
            kv,
            aae,
            aae_rebuilds: Default::default(),
            key_queues: Default::default(),
        }
    }

    /// The KV layer it runs on.
    pub fn kv(&self) -> &Arc<Kv> {
        &self.kv
    }

    /// Registers where `repl_keys` folds queue their keys.
    pub fn set_key_queues(&self, q: Arc<dyn KeyQueues>) {
        *self.key_queues.write() = Some(q);
    }

    pub(crate) fn key_queue(&self, name: &str) -> Option<Arc<dyn KeyQueue>> {
        self.key_queues
            .read()
            .as_ref()
            .and_then(|q| q.key_queue(name))
    }
}

impl Aae {
    /// Runs scheduled exchanges (module docs) while the node lives;
    /// nothing if `aae_interval_secs` is 0.
    pub fn start_aae(self: &Arc<Self>) {
        let secs = self.config.aae_interval_secs;
        if secs == 0 {
            return;
        }
        self.start_aae_rebuilds();
        let interval = Duration::from_secs(secs);
        let node = Arc::downgrade(self);
        let mut wait = tick(interval, self.aae_work_items().len());
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(wait).await;
                let Some(n) = node.upgrade() else { break };
                let (item, pass_len) = {
                    let mut q = n.aae.queue.lock();
                    let item = q.next(|| n.aae_work_items());
                    (item, q.pass_len())
                };
                wait = tick(interval, pass_len);
                if let Some((first, nv)) = item {
                    n.aae_scheduled(first, nv).await;
                }
            }
        });
    }

    /// One scheduled exchange, unless the cluster cannot run it now.
    async fn aae_scheduled(&self, first: u32, n: u32) {
        if !self.aae_can_run() {
            return;
        }
        let me = self.router.cluster.me().to_string();
        if !self.router.cluster.with_state(|s| s.owner(first) == me) {
            return; // no longer this node's list
        }
        match self.aae_exchange_n(first, n).await {
            Ok(x) => log_repairs(&x),
            Err(e) => {
                tracing::debug!(first, n, error = %e, "anti-entropy exchange skipped")
            }
        }
    }

    /// Exchanges need two members and no pending transfers.
    fn aae_can_run(&self) -> bool {
        let (pending, members) = self
            .router
            .cluster
            .with_state(|s| (!s.next.is_empty(), s.members.len()));
        !pending && members >= 2
    }

    /// This node's exchange work items: each (first partition it owns,
    /// n_val in use).
    pub fn aae_work_items(&self) -> Vec<WorkItem> {
        let me = self.router.cluster.me().to_string();
        let firsts = self.router.cluster.with_state(|s| s.owned_by(&me));
        let n_vals = self.aae_n_vals();
        firsts
            .into_iter()
            .flat_map(|f| n_vals.iter().map(move |&n| (f, n)))
            .collect()
    }

    /// Exchanges every work item of this node now, one after the other;
    /// returns the totals (with the exchanges skipped: a round that
    /// skipped none and found no dirty segment saw every list in sync).
    pub async fn aae_round(&self) -> Exchange {
        let mut total = Exchange::default();
        let items = self.aae_work_items();
        if !self.aae_can_run() {
            total.skipped = items.len();
            return total;
        }
        for (f, n) in items {
            match self.aae_exchange_n(f, n).await {
                Ok(x) => total.add(&x),
                Err(e) => {
                    total.skipped += 1;
                    tracing::debug!(first = f, n, error = %e, "anti-entropy exchange skipped")
                }
            }
        }
        log_repairs(&total);
        total
    }

    /// `basalt admin aae status`: the cached trees, the exchange queue and
    /// the exchange counters.
    pub async fn aae_status(&self) -> String {
        self.aae_status_view().await.text()
    }

    /// What `basalt admin aae status` shows, as data (its `--json` form).
    pub async fn aae_status_view(&self) -> AaeStatus {
        let (bytes, built, folds) = self.aae_tree_stats().await;
        let s = self.stats();
        let (pass_len, remaining, passes) = {
            let q = self.aae.queue.lock();
            (q.pass_len(), q.remaining(), q.passes())
        };
        let interval = Duration::from_secs(self.config.aae_interval_secs);
        AaeStatus {
            tree_size: self.config.aae_tree_size.clone(),
            segments: self.config.aae_tree_size().map_or(0, |t| t.segments()),
            vnodes_built: built,
            vnodes: self.router.local_vnodes().len(),
            tree_bytes: bytes,
            folds,
            exchanges: s.aae_exchanges.load(Ordering::Relaxed),
            repairs: s.aae_repairs.load(Ordering::Relaxed),
            loops: s.aae_loops.load(Ordering::Relaxed),
            range_repairs: s.aae_range_repairs.load(Ordering::Relaxed),
            n_vals: self.aae_n_vals(),
            queue_remaining: remaining,
            queue_pass_len: pass_len,
            queue_passes: passes,
            tick_ms: tick(interval, pass_len).as_millis(),
            repairs_per_sec: self.config.aae_repairs_per_sec,
            rebuild: self.aae_rebuild_view().await,
        }
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
            total.add(&self.aae_exchange_n(first, n).await?);
        }
        Ok(total)
    }
}

/// The anti-entropy state of a node, as `basalt admin aae status` shows
/// it ([`Aae::aae_status_view`]).
#[derive(Debug, Clone, serde::Serialize)]
pub struct AaeStatus {
    /// `aae_tree_size`.
    pub tree_size: String,
    /// Segments of a tree of that size.
    pub segments: u32,
    /// Local vnodes whose cached trees are built.
    pub vnodes_built: u64,
    /// Local vnodes.
    pub vnodes: usize,
    /// Memory of the cached trees.
    pub tree_bytes: u64,
    /// Folds run (tree builds and segment listings).
    pub folds: u64,
    /// Exchanges run by this node.
    pub exchanges: u64,
    /// Keys repaired.
    pub repairs: u64,
    /// Follow-up loops.
    pub loops: u64,
    /// Keys repaired by scoped follow-up loops.
    pub range_repairs: u64,
    /// The n_vals exchanged.
    pub n_vals: Vec<u32>,
    /// Exchanges left in the current pass.
    pub queue_remaining: usize,
    /// Exchanges in a pass.
    pub queue_pass_len: usize,
    /// Passes started.
    pub queue_passes: u64,
    /// One exchange every this many milliseconds.
    pub tick_ms: u128,
    /// `aae_repairs_per_sec` (0: unlimited).
    pub repairs_per_sec: u64,
    /// Tree rebuilds.
    pub rebuild: rebuild::RebuildStatus,
}

impl AaeStatus {
    /// The text of `basalt admin aae status`.
    pub fn text(&self) -> String {
        format!(
            "tree size: {} ({} segments)\nvnodes with trees built: {} of {}\ntree memory: {} bytes\nfolds (builds + segment listings): {}\nexchanges: {}\nrepairs: {}\nfollow-up loops: {}\nrange repairs: {}\nn_vals exchanged: {:?}\nexchange queue: {} of {} left in pass {}, one every {} ms\nrepairs per second: {}\n{}",
            self.tree_size,
            self.segments,
            self.vnodes_built,
            self.vnodes,
            self.tree_bytes,
            self.folds,
            self.exchanges,
            self.repairs,
            self.loops,
            self.range_repairs,
            self.n_vals,
            self.queue_remaining,
            self.queue_pass_len,
            self.queue_passes,
            self.tick_ms,
            match self.repairs_per_sec {
                0 => "unlimited".to_string(),
                r => r.to_string(),
            },
            self.rebuild.text(),
        )
    }
}

fn log_repairs(x: &Exchange) {
    if x.repaired > 0 {
        tracing::info!(
            repaired = x.repaired,
            dirty_segments = x.dirty_segments,
            loops = x.loops,
            range_repairs = x.range_repairs,
            "anti-entropy repaired keys"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn items(n: u32) -> Vec<WorkItem> {
        (0..n).map(|f| (f, 3)).collect()
    }

    #[test]
    fn every_item_is_popped_once_per_pass_then_the_queue_refills_reshuffled() {
        let mut q = ExchangeQueue::new(7);
        let mut passes = Vec::new();
        for _ in 0..4 {
            let pass: Vec<WorkItem> = (0..16)
                .map(|_| q.next(|| items(16)).expect("item"))
                .collect();
            let mut sorted = pass.clone();
            sorted.sort_unstable();
            assert_eq!(sorted, items(16), "each item once per pass");
            assert_eq!(q.remaining(), 0);
            passes.push(pass);
        }
        assert_eq!(q.passes(), 4);
        assert!(
            passes.windows(2).any(|w| w[0] != w[1]),
            "passes are reshuffled"
        );
        assert_ne!(passes[0], items(16), "not in partition order");
        // The same seed gives the same order.
        let mut again = ExchangeQueue::new(7);
        let first: Vec<WorkItem> = (0..16)
            .map(|_| again.next(|| items(16)).expect("item"))
            .collect();
        assert_eq!(first, passes[0]);
    }

    #[test]
    fn a_refill_takes_the_items_of_that_moment_and_an_empty_set_gives_none() {
        let mut q = ExchangeQueue::new(1);
        assert_eq!(q.next(Vec::new), None);
        assert_eq!(q.pass_len(), 0);
        let a = q.next(|| items(2)).expect("item");
        // Mid-pass, a change of items does not disturb the pass...
        let b = q.next(|| panic!("no refill mid-pass")).expect("item");
        assert_ne!(a, b);
        // ...the next refill sees it (duplicates dropped).
        let c = q.next(|| vec![(9, 2), (9, 2)]).expect("item");
        assert_eq!(c, (9, 2));
        assert_eq!(q.pass_len(), 1);
    }

    #[test]
    fn the_tick_spreads_a_pass_over_the_interval_with_a_floor() {
        let s300 = Duration::from_secs(300);
        assert_eq!(tick(s300, 10), Duration::from_secs(30));
        assert_eq!(tick(s300, 0), s300);
        assert_eq!(tick(Duration::from_secs(1), 1000), AAE_MIN_TICK);
        assert_eq!(tick(Duration::ZERO, 5), AAE_MIN_TICK);
        for n in [1usize, 3, 64, 4096, usize::MAX] {
            let t = tick(s300, n);
            assert!(t >= AAE_MIN_TICK && t <= s300, "{n}: {t:?}");
        }
    }

    #[test]
    fn one_exchange_of_a_list_runs_at_a_time() {
        let service = AaeService::new(&crate::config::Config::default());
        let a = service.start((1, 3)).expect("first");
        assert!(service.start((1, 3)).is_none(), "already running");
        let b = service.start((2, 3)).expect("another list");
        drop(a);
        assert!(service.start((1, 3)).is_some(), "free again once done");
        drop(b);
    }

    #[test]
    fn the_pacer_spaces_events_and_zero_is_unlimited() {
        let p = Pacer::new(10);
        let t0 = Instant::now();
        let waits: Vec<Duration> = (0..4).map(|_| p.reserve(t0)).collect();
        assert_eq!(
            waits,
            [0, 100, 200, 300].map(Duration::from_millis).to_vec()
        );
        // After a quiet spell nothing is saved up.
        let later = t0 + Duration::from_secs(10);
        assert_eq!(p.reserve(later), Duration::ZERO);
        assert_eq!(p.reserve(later), Duration::from_millis(100));
        let free = Pacer::new(0);
        assert!((0..100).all(|_| free.reserve(t0).is_zero()));
    }
}
