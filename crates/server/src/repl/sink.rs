//! The sink side: changes pushed by a source cluster, applied here.
//!
//! Objects are merged as-is into every replica of their key (fallbacks
//! included; acknowledged once the bucket's write quorum took them, the
//! other replicas finishing on their own): no clock increment, no hooks, no last-modified update, and
//! never queued for replication again, so two clusters that replicate to
//! each other converge without loops. The changes of one key are applied
//! in order; up to [`REPL_APPLY_PARALLEL`] keys at once. The reply is `Ok`
//! only when all were applied, so the source keeps what failed.
//!
//! A reap removes the tombstone here only if every replica holds it with
//! the reaped clock (a write that raced it survives; a replica that missed
//! the tombstone is given it first), and never where `delete_mode` is
//! `keep`. It runs after this node's `delete_mode` delay, as a local
//! delete's reap does, tried again while put off (`Kv::schedule_reap_with`,
//! its bound and schedule); the push is acknowledged once it is scheduled.
//! The delay is the grace for this cluster's own replica writes of the
//! key still in flight: a source that was cut off from this cluster
//! sends a key's PUT, tombstone and reap together, and each merge is
//! acknowledged at quorum, so a reap applied at once could remove the
//! tombstone before the third replica's PUT landed there — the key then
//! lived again on that replica, anti-entropy spread it and full-sync
//! copied it back to the source (CI, `repl.rs`, 2026-12-04: "deleted key
//! a1190 is back"). A reap dropped (shutdown, bound, attempts) leaves the
//! tombstone, which full-sync later reaps as a lone tombstone.
//!
//! Replication time, Riak's `repl_time`: when an object has been applied,
//! now minus its last-modified time (the end-to-end lag, clock skew
//! between the clusters included), counted in Riak's buckets: under a
//! second, a minute, an hour, a day, and older.

use super::Repl;
use crate::cluster::{ReplItem, Reply};
use crate::kv::delete::Reap;
use crate::limits::REPL_APPLY_PARALLEL;
use crate::object::vclock::VClock;
use futures_util::stream::{self, StreamExt};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Repl-wide replication counters: the sink side, and full-syncs.
#[derive(Debug, Default)]
pub struct ReplStats {
    /// Objects applied.
    pub received: AtomicU64,
    /// Reaps applied (the tombstone was removed here).
    pub reaps: AtomicU64,
    /// Reaps not applied (the replicas here did not all hold that
    /// tombstone; anti-entropy and full-sync settle the key). A delayed
    /// reap still put off after its last attempt is counted in the node's
    /// `reaps_dropped` instead.
    pub reaps_skipped: AtomicU64,
    /// Pushes refused (some change not applied).
    pub refused: AtomicU64,
    /// Replication time histogram: < 1 s, < 1 min, < 1 h, < 1 day, older.
    pub lag: [AtomicU64; 5],
    /// Sum of replication times (milliseconds), for the mean.
    pub lag_ms_sum: AtomicU64,
    /// Full-syncs completed.
    pub fullsyncs: AtomicU64,
    /// Objects pushed by full-syncs.
    pub fullsync_pushed: AtomicU64,
}

impl ReplStats {
    fn record_lag(&self, ms: u64) {
        let slot = match ms {
            0..1_000 => 0,
            1_000..60_000 => 1,
            60_000..3_600_000 => 2,
            3_600_000..86_400_000 => 3,
            _ => 4,
        };
        self.lag[slot].fetch_add(1, Ordering::Relaxed);
        self.lag_ms_sum.fetch_add(ms, Ordering::Relaxed);
    }

    /// Objects whose replication time was recorded.
    pub fn lag_count(&self) -> u64 {
        self.lag.iter().map(|c| c.load(Ordering::Relaxed)).sum()
    }
}

impl Repl {
    /// Applies a push from the cluster `source`; see the module docs.
    pub(crate) async fn apply_repl(self: &Arc<Self>, source: &str, items: Vec<ReplItem>) -> Reply {
        if source == self.router.cluster.state().cluster_id {
            return Reply::Refused("replication from this very cluster refused".into());
        }
        let mut by_key: BTreeMap<(Vec<u8>, Vec<u8>), Vec<ReplItem>> = BTreeMap::new();
        for item in items {
            let k = match &item {
                ReplItem::Object((b, k, _)) | ReplItem::Reap(b, k, _) => (b.clone(), k.clone()),
            };
            by_key.entry(k).or_default().push(item);
        }
        let results: Vec<Result<(), String>> = stream::iter(by_key.into_values())
            .map(|items| self.apply_key(items))
            .buffer_unordered(REPL_APPLY_PARALLEL)
            .collect()
            .await;
        match results.into_iter().find_map(Result::err) {
            None => Reply::Ok,
            Some(e) => {
                self.repl_sink.refused.fetch_add(1, Ordering::Relaxed);
                Reply::Refused(e)
            }
        }
    }

    async fn apply_key(self: &Arc<Self>, items: Vec<ReplItem>) -> Result<(), String> {
        for item in items {
            match item {
                ReplItem::Object((bucket, key, object)) => {
                    let modified_us = object
                        .head()
                        .map(|o| o.contents.iter().map(|c| c.last_mod_us()).max())
                        .ok()
                        .flatten()
                        .unwrap_or(0);
                    self.merge_everywhere(&bucket, &key, object, false).await?;
                    self.repl_sink.received.fetch_add(1, Ordering::Relaxed);
                    if modified_us > 0 {
                        let now_us = std::time::SystemTime::now()
                            .duration_since(std::time::UNIX_EPOCH)
                            .map_or(0, |d| d.as_micros() as u64);
                        self.repl_sink
                            .record_lag(now_us.saturating_sub(modified_us) / 1000);
                    }
                }
                ReplItem::Reap(..)
                    if self.config.delete_mode == crate::config::DeleteMode::Keep =>
                {
                    self.repl_sink.reaps_skipped.fetch_add(1, Ordering::Relaxed);
                }
                ReplItem::Reap(bucket, key, clock) => {
                    let vc = VClock::decode(&clock).map_err(|e| format!("bad reap clock: {e}"))?;
                    match self.config.delete_mode.delay() {
                        Some(delay) if !delay.is_zero() => {
                            self.schedule_sink_reap(&bucket, &key, vc, delay);
                        }
                        _ => {
                            let outcome = self.settle_and_try_reap(&bucket, &key, &vc).await?;
                            self.count_sink_reap(outcome);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// Reaps a replicated tombstone after `delay` (see the module docs),
    /// retried while put off or behind.
    fn schedule_sink_reap(
        self: &Arc<Self>,
        bucket: &[u8],
        key: &[u8],
        clock: VClock,
        delay: std::time::Duration,
    ) {
        let me = Arc::downgrade(self);
        self.schedule_reap_with(bucket, key, clock, delay, move |b, k, clock| {
            let me = me.clone();
            async move {
                let repl = me.upgrade()?;
                let outcome = repl.settle_and_try_reap(&b, &k, &clock).await;
                if let Ok(o) = &outcome {
                    if !o.retry() {
                        repl.count_sink_reap(*o);
                    }
                }
                Some(outcome)
            }
        });
    }

    /// Counts a replicated reap that ended: applied, or not (the replicas
    /// here did not all hold the tombstone).
    fn count_sink_reap(&self, outcome: Reap) {
        let c = if matches!(outcome, Reap::Reaped(n) if n > 0) {
            &self.repl_sink.reaps
        } else {
            &self.repl_sink.reaps_skipped
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lag_lands_in_riaks_buckets() {
        let s = ReplStats::default();
        for ms in [
            0,
            999,
            1_000,
            59_999,
            60_000,
            3_600_000,
            86_400_000,
            u64::MAX / 2,
        ] {
            s.record_lag(ms);
        }
        let got: Vec<u64> = s.lag.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        assert_eq!(got, [2, 2, 1, 1, 2]);
        assert_eq!(s.lag_count(), 8);
    }
}
