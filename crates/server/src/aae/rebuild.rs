//! Scheduled rebuilds of the vnodes' anti-entropy trees.
//!
//! Cached trees drift from the store only if something changes it
//! underneath the vnode (a disk losing data, a restored backup, a bug), so
//! they are rebuilt from the store now and then, as Riak does: a vnode's
//! trees are due `aae_rebuild_wait_secs` after they were built plus a delay
//! drawn in `0..aae_rebuild_delay_secs` from (partition, built time), so
//! vnodes spread out instead of rebuilding together. Trees that are missing
//! (a new vnode, a crash, a damaged or foreign tree file) are due at once.
//!
//! One rebuild runs at a time per node
//! ([`AAE_REBUILDS_AT_ONCE`](crate::limits::AAE_REBUILDS_AT_ONCE)): the
//! vnode sweeps its keys in steps (`vnode::aae_rebuild`), paced to
//! `aae_rebuild_keys_per_sec`; exchanges go on with the old trees until the
//! new ones replace them. `basalt admin aae rebuild` asks for every (or
//! one) local vnode to be rebuilt now; while a rebuild runs or a request
//! waits, another request is told so and refused.

use super::Aae;
use crate::limits::{AAE_REBUILD_POLL, AAE_REBUILD_STEP_KEYS};
use crate::vnode::VnodeError;
use basalt_engine::clock::now_secs;
use parking_lot::Mutex;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// A vnode's step that found its queue full or timed out is retried this
/// many times in a row before the rebuild gives up.
const STEP_RETRIES: u32 = 100;

/// The rebuild scheduler's state and counters (one per node).
#[derive(Debug, Default)]
pub struct AaeRebuilds {
    /// The rebuild running: partition, keys swept, start.
    running: Mutex<Option<(u32, u64, Instant)>>,
    /// Partitions an operator asked to rebuild now, not yet started.
    requested: Mutex<BTreeSet<u32>>,
    /// Wakes the scheduler (a request came in).
    wake: Arc<Notify>,
    /// Serialises rebuilds.
    one: tokio::sync::Mutex<()>,
    /// Set once the scheduler runs (anti-entropy on).
    scheduled: std::sync::atomic::AtomicBool,
    /// Rebuilds completed.
    pub rebuilds: AtomicU64,
    /// Keys swept by rebuilds (also those that did not complete).
    pub keys: AtomicU64,
    /// Keys completed rebuilds left out (value not in the journal).
    pub missing_in_journal: AtomicU64,
    /// Wall time of completed rebuilds, microseconds.
    pub micros: AtomicU64,
    /// Rebuilds that failed or were given up.
    pub failures: AtomicU64,
}

/// What a completed rebuild did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rebuilt {
    /// Keys swept.
    pub keys: u64,
    /// Keys left out by the journal check.
    pub missing_in_journal: u64,
    /// Wall time.
    pub elapsed: Duration,
}

/// When trees of `partition` built at `built_at` are due again.
pub fn due_at(partition: u32, built_at: u64, wait: u64, delay: u64) -> u64 {
    let jitter = if delay == 0 {
        0
    } else {
        let mut seed = [0u8; 12];
        seed[..4].copy_from_slice(&partition.to_be_bytes());
        seed[4..].copy_from_slice(&built_at.to_be_bytes());
        xxhash_rust::xxh3::xxh3_64(&seed) % delay
    };
    built_at.saturating_add(wait).saturating_add(jitter)
}

/// Keys per step at `keys_per_sec` (0: unlimited): a tenth of a second's
/// worth, so pacing is smooth, within `1..=AAE_REBUILD_STEP_KEYS`.
fn step_keys(keys_per_sec: u64) -> usize {
    if keys_per_sec == 0 {
        return AAE_REBUILD_STEP_KEYS;
    }
    usize::try_from(keys_per_sec / 10)
        .unwrap_or(AAE_REBUILD_STEP_KEYS)
        .clamp(1, AAE_REBUILD_STEP_KEYS)
}

impl Aae {
    /// Runs the rebuild scheduler while the node lives (started with
    /// anti-entropy).
    pub fn start_aae_rebuilds(self: &Arc<Self>) {
        self.aae_rebuilds.scheduled.store(true, Ordering::Relaxed);
        let node = Arc::downgrade(self);
        let wake = self.aae_rebuilds.wake.clone();
        tokio::spawn(async move {
            loop {
                let Some(n) = node.upgrade() else { break };
                let next = n.aae_next_rebuild().await;
                match next {
                    Some(p) => {
                        let rate = n.config.aae_rebuild_keys_per_sec;
                        if let Err(e) = n.aae_rebuild_vnode(p, rate).await {
                            tracing::warn!(partition = p, error = %e, "anti-entropy tree rebuild failed; retried later");
                            drop(n);
                            tokio::time::sleep(AAE_REBUILD_POLL).await;
                        }
                    }
                    None => {
                        drop(n);
                        let _ = tokio::time::timeout(AAE_REBUILD_POLL, wake.notified()).await;
                    }
                }
            }
        });
    }

    /// The partitions of the local vnodes.
    fn local_partitions(&self) -> BTreeSet<u32> {
        self.router
            .local_vnodes()
            .into_iter()
            .map(|(p, _)| p)
            .collect()
    }

    /// The local vnode to rebuild next, if one is due: an operator's
    /// request first, then missing trees, then the most overdue.
    async fn aae_next_rebuild(&self) -> Option<u32> {
        let local = self.local_partitions();
        {
            let mut req = self.aae_rebuilds.requested.lock();
            req.retain(|p| local.contains(p));
            if let Some(p) = req.pop_first() {
                return Some(p);
            }
        }
        let now = now_secs();
        let (wait, delay) = (
            self.config.aae_rebuild_wait_secs,
            self.config.aae_rebuild_delay_secs,
        );
        self.aae_tree_states(true)
            .await
            .into_iter()
            .map(|(p, built)| (built.map_or(0, |t| due_at(p, t, wait, delay)), p))
            .filter(|(due, _)| *due <= now)
            .min()
            .map(|(_, p)| p)
    }

    /// Each local vnode's trees: built when (`None`: not built). With
    /// `skip_busy`, a vnode with jobs waiting is left out (the scheduler
    /// asks again at its next poll rather than queue one more job).
    pub async fn aae_tree_states(&self, skip_busy: bool) -> Vec<(u32, Option<u64>)> {
        let mut out = Vec::new();
        for (p, v) in self.router.local_vnodes() {
            if skip_busy && v.queue_len() > 0 {
                continue;
            }
            let Ok(pending) = v.submit(|st| Ok(st.aae_tree_state())) else {
                continue;
            };
            if let Ok((built, _)) = pending.wait(self.timeout()).await {
                out.push((p, built));
            }
        }
        out
    }

    /// Rebuilds the trees of local vnode `p` now, reading at most
    /// `keys_per_sec` keys per second (0: no limit); waits for a rebuild
    /// already running to finish first.
    pub async fn aae_rebuild_vnode(&self, p: u32, keys_per_sec: u64) -> Result<Rebuilt, String> {
        let _one = self.aae_rebuilds.one.lock().await;
        let v = self
            .router
            .local_vnode(p)
            .map_err(|e| format!("partition {p}: {e}"))?;
        let journal_check = self.config.aae_rebuild_journal_check;
        let started = Instant::now();
        *self.aae_rebuilds.running.lock() = Some((p, 0, started));
        let res = self.sweep_vnode(&v, p, journal_check, keys_per_sec).await;
        *self.aae_rebuilds.running.lock() = None;
        let r = &self.aae_rebuilds;
        match res {
            Ok((keys, missing)) => {
                let elapsed = started.elapsed();
                r.rebuilds.fetch_add(1, Ordering::Relaxed);
                r.missing_in_journal.fetch_add(missing, Ordering::Relaxed);
                r.micros
                    .fetch_add(elapsed.as_micros() as u64, Ordering::Relaxed);
                Ok(Rebuilt {
                    keys,
                    missing_in_journal: missing,
                    elapsed,
                })
            }
            Err(e) => {
                r.failures.fetch_add(1, Ordering::Relaxed);
                // Best effort: the vnode may be gone.
                if let Ok(pending) = v.submit(|st| {
                    st.aae_rebuild_abort();
                    Ok(())
                }) {
                    let _ = pending.wait(self.timeout()).await;
                }
                Err(format!("partition {p}: {e}"))
            }
        }
    }

    /// The steps of one rebuild; (keys swept, keys left out).
    async fn sweep_vnode(
        &self,
        v: &crate::vnode::Vnode,
        p: u32,
        journal_check: bool,
        keys_per_sec: u64,
    ) -> Result<(u64, u64), VnodeError> {
        v.call(self.timeout(), move |st| {
            st.aae_rebuild_start(journal_check)
        })
        .await?;
        let mut retries = 0;
        let step_keys = step_keys(keys_per_sec);
        loop {
            let t0 = Instant::now();
            let step = match v
                .call(self.timeout(), move |st| {
                    st.aae_rebuild_step(step_keys, now_secs())
                })
                .await
            {
                Ok(s) => s,
                Err(VnodeError::Overload | VnodeError::Timeout) if retries < STEP_RETRIES => {
                    retries += 1;
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
                Err(e) => return Err(e),
            };
            retries = 0;
            self.aae_rebuilds
                .keys
                .fetch_add(step.keys, Ordering::Relaxed);
            if let Some(r) = self.aae_rebuilds.running.lock().as_mut() {
                debug_assert_eq!(r.0, p);
                r.1 = step.total_keys;
            }
            if step.done {
                return Ok((step.total_keys, step.missing_in_journal));
            }
            if keys_per_sec > 0 {
                let want = Duration::from_secs_f64(step.keys as f64 / keys_per_sec as f64);
                if let Some(rest) = want.checked_sub(t0.elapsed()) {
                    tokio::time::sleep(rest).await;
                }
            }
        }
    }

    /// Builds, unpaced, the trees of every local vnode that has none; the
    /// number built. For tests and `aae verify`. A vnode handed off while
    /// the walk runs (no longer local when its build fails) is passed over.
    pub async fn aae_build_missing(&self) -> Result<usize, String> {
        let mut built = 0;
        for (p, t) in self.aae_tree_states(false).await {
            if t.is_none() {
                match self.aae_rebuild_vnode(p, 0).await {
                    Ok(_) => built += 1,
                    Err(_) if !self.router.has_local_vnode(p) => {}
                    Err(e) => return Err(e),
                }
            }
        }
        Ok(built)
    }

    /// `basalt admin aae rebuild [partition]`: asks the scheduler to
    /// rebuild every local vnode (or `partition`) now, one at a time;
    /// refused while a rebuild runs or a request waits.
    pub fn aae_request_rebuild(&self, partition: Option<u32>) -> Result<String, String> {
        if !self.aae_rebuilds.scheduled.load(Ordering::Relaxed) {
            return Err("anti-entropy is off on this node (aae_interval_secs = 0)\n".into());
        }
        if let Some((p, keys, t)) = *self.aae_rebuilds.running.lock() {
            return Err(format!(
                "a rebuild is already running: partition {p}, {keys} keys swept in {:.1} s (see `basalt admin aae status`)\n",
                t.elapsed().as_secs_f64()
            ));
        }
        let mut req = self.aae_rebuilds.requested.lock();
        if !req.is_empty() {
            return Err(format!(
                "a rebuild is already requested: {} vnodes waiting (see `basalt admin aae status`)\n",
                req.len()
            ));
        }
        let local = self.local_partitions();
        let want: BTreeSet<u32> = match partition {
            None => local,
            Some(p) if local.contains(&p) => [p].into(),
            Some(p) => return Err(format!("partition {p} has no vnode on this node\n")),
        };
        let n = want.len();
        *req = want;
        drop(req);
        self.aae_rebuilds.wake.notify_one();
        let rate = self.config.aae_rebuild_keys_per_sec;
        Ok(format!(
            "rebuilding the anti-entropy trees of {n} vnodes, one at a time, at most {} keys/s; follow with `basalt admin aae status`\n",
            if rate == 0 { "unlimited".to_string() } else { rate.to_string() }
        ))
    }

    /// The rebuild part of `basalt admin aae status`.
    pub(crate) async fn aae_rebuild_view(&self) -> RebuildStatus {
        let r = &self.aae_rebuilds;
        let running = (*r.running.lock()).map(|(p, keys, t)| RunningRebuild {
            partition: p,
            keys,
            secs: t.elapsed().as_secs_f64(),
        });
        let states = self.aae_tree_states(false).await;
        let missing = states.iter().filter(|(_, t)| t.is_none()).count();
        let (wait, delay) = (
            self.config.aae_rebuild_wait_secs,
            self.config.aae_rebuild_delay_secs,
        );
        let next_in_secs = states
            .iter()
            .filter_map(|(p, t)| t.map(|t| due_at(*p, t, wait, delay)))
            .min()
            .map(|d| d.saturating_sub(now_secs()));
        RebuildStatus {
            running,
            requested: r.requested.lock().len(),
            without_trees: missing,
            next_in_secs,
            done: r.rebuilds.load(Ordering::Relaxed),
            keys: r.keys.load(Ordering::Relaxed),
            missing_in_journal: r.missing_in_journal.load(Ordering::Relaxed),
            secs: r.micros.load(Ordering::Relaxed) as f64 / 1e6,
            failed: r.failures.load(Ordering::Relaxed),
        }
    }
}

/// A tree rebuild running now.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct RunningRebuild {
    /// Its partition.
    pub partition: u32,
    /// Keys swept so far.
    pub keys: u64,
    /// Seconds since it started.
    pub secs: f64,
}

/// The tree rebuilds of a node (part of [`super::AaeStatus`]).
#[derive(Debug, Clone, serde::Serialize)]
pub struct RebuildStatus {
    /// The rebuild running now, if any.
    pub running: Option<RunningRebuild>,
    /// Rebuilds requested (`basalt admin aae rebuild`) and waiting.
    pub requested: usize,
    /// Local vnodes without trees.
    pub without_trees: usize,
    /// Seconds until the next scheduled rebuild, if any is scheduled.
    pub next_in_secs: Option<u64>,
    /// Rebuilds done.
    pub done: u64,
    /// Keys swept by them.
    pub keys: u64,
    /// Keys left out by the journal check.
    pub missing_in_journal: u64,
    /// Seconds they took.
    pub secs: f64,
    /// Rebuilds failed.
    pub failed: u64,
}

impl RebuildStatus {
    /// The rebuild lines of `basalt admin aae status`.
    pub fn text(&self) -> String {
        let running = match self.running {
            Some(r) => format!(
                "running: partition {}, {} keys swept in {:.1} s",
                r.partition, r.keys, r.secs
            ),
            None => "idle".into(),
        };
        let next = self
            .next_in_secs
            .map_or("-".into(), |d| format!("in {d} s"));
        format!(
            "rebuild: {running}\nrebuilds waiting: {} requested, {} vnodes without trees; next scheduled {next}\nrebuilds done: {} ({} keys swept, {} left out by the journal check, {:.1} s)\nrebuilds failed: {}\n",
            self.requested,
            self.without_trees,
            self.done,
            self.keys,
            self.missing_in_journal,
            self.secs,
            self.failed,
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_times_spread_within_the_delay() {
        let wait = 100;
        let delay = 50;
        let dues: Vec<u64> = (0..64).map(|p| due_at(p, 1000, wait, delay)).collect();
        assert!(dues.iter().all(|d| (1100..1150).contains(d)), "{dues:?}");
        let distinct: BTreeSet<u64> = dues.iter().copied().collect();
        assert!(distinct.len() > 16, "spread: {distinct:?}");
        assert_eq!(due_at(3, 1000, wait, 0), 1100);
        assert_eq!(due_at(3, 1000, wait, delay), due_at(3, 1000, wait, delay));
        assert_eq!(due_at(1, u64::MAX, wait, delay), u64::MAX);
    }

    #[test]
    fn steps_are_a_tenth_of_a_second_of_keys() {
        assert_eq!(step_keys(0), AAE_REBUILD_STEP_KEYS);
        assert_eq!(step_keys(5), 1);
        assert_eq!(step_keys(200), 20);
        assert_eq!(step_keys(u64::MAX), AAE_REBUILD_STEP_KEYS);
    }
}
