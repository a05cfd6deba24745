//! What replication reports and how an operator drives it: the counters
//! for `/stats` and `/metrics`, `basalt admin repl status`, and the admin
//! commands (sinks added, removed, suspended, resumed; queues cleared).

use super::Repl;
use super::{Check, Sink, SinkConfig};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

impl Repl {
    /// Replication counters summed over the sinks, then the sink side.
    pub fn repl_counters(&self) -> Vec<(&'static str, u64, &'static str)> {
        let sinks = self.repl.sinks();
        let sum = |f: &dyn Fn(&Sink) -> u64| sinks.iter().map(|s| f(s)).sum::<u64>();
        let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let qs = |f: fn(super::queue::QueueStats) -> u64| sum(&|s| f(s.queue.stats()));
        let r = &self.repl_sink;
        let fs = &self.fullsync_state;
        let waiting = sum(&|s| s.queue.waiting().iter().sum::<u64>() + s.queue.in_flight() as u64);
        vec![
            ("repl_sent_total", sum(&|s| ld(&s.stats.sent)), "Replication entries the sink clusters confirmed."),
            ("repl_batches_total", sum(&|s| ld(&s.stats.batches)), "Replication batches the sink clusters confirmed (sent / batches is the mean batch)."),
            ("repl_discarded_total", qs(|q| q.discarded), "Replication entries discarded because a queue was full (a full-sync repairs them)."),
            ("repl_errors_total", sum(&|s| ld(&s.stats.errors)), "Replication batches that failed (they stay queued)."),
            ("repl_requeued_total", qs(|q| q.requeued), "Replication entries put back at the front of their queue after a failed batch."),
            ("repl_spilled_total", qs(|q| q.spilled), "Replication entries spilled from memory to disk."),
            ("repl_queue_corrupt_total", qs(|q| q.corrupt_skipped), "Corrupt replication queue records skipped."),
            ("repl_refs_fetched_total", sum(&|s| ld(&s.stats.refs_fetched)), "Queued references read at delivery."),
            ("repl_refs_missing_total", sum(&|s| ld(&s.stats.refs_missing)), "Queued references whose key was gone at delivery."),
            ("repl_reaps_sent_total", sum(&|s| ld(&s.stats.reaps)), "Tombstone reaps replicated to sink clusters."),
            ("repl_received_total", ld(&r.received), "Objects received from source clusters and applied."),
            ("repl_reaps_applied_total", ld(&r.reaps), "Replicated reaps that removed a tombstone here."),
            ("repl_reaps_skipped_total", ld(&r.reaps_skipped), "Replicated reaps not applied (the replicas here did not all hold that tombstone)."),
            ("repl_refused_total", ld(&r.refused), "Pushes from source clusters refused (not all changes applied)."),
            ("repl_time_lt_1s_total", ld(&r.lag[0]), "Replicated objects applied less than a second after their last modification."),
            ("repl_time_lt_1m_total", ld(&r.lag[1]), "... between a second and a minute after."),
            ("repl_time_lt_1h_total", ld(&r.lag[2]), "... between a minute and an hour after."),
            ("repl_time_lt_1d_total", ld(&r.lag[3]), "... between an hour and a day after."),
            ("repl_time_over_1d_total", ld(&r.lag[4]), "... more than a day after."),
            ("repl_time_ms_sum_total", ld(&r.lag_ms_sum), "Sum of replication times (ms) of those objects, for the mean."),
            ("repl_fullsyncs_total", ld(&r.fullsyncs), "Full-syncs completed."),
            ("repl_fullsync_all_checks_total", ld(&fs.checks[0]), "Full-sync all checks run."),
            ("repl_fullsync_day_checks_total", ld(&fs.checks[1]), "Full-sync day checks run."),
            ("repl_fullsync_hour_checks_total", ld(&fs.checks[2]), "Full-sync hour checks run."),
            ("repl_fullsync_range_checks_total", ld(&fs.checks[3]), "Full-sync range checks run."),
            ("repl_fullsync_in_sync_total", ld(&fs.in_sync), "Full-sync checks that found both clusters in sync."),
            ("repl_fullsync_not_in_sync_total", ld(&fs.not_in_sync), "Full-sync checks that found differences."),
            ("repl_fullsync_failed_total", ld(&fs.failed), "Full-sync checks that failed."),
            ("repl_fullsync_source_ahead_total", ld(&fs.source_ahead), "Keys full-syncs found newer here."),
            ("repl_fullsync_sink_ahead_total", ld(&fs.sink_ahead), "Keys full-syncs found newer on the peer cluster."),
            ("repl_fullsync_requeued_total", ld(&fs.requeued), "Keys full-syncs asked of the peer's queue."),
            ("repl_fullsync_reaped_total", ld(&fs.reaped), "Lone tombstones full-syncs reaped or sent to be reaped."),
            ("repl_fullsync_ms_total", ld(&fs.millis), "Milliseconds spent in full-sync checks."),
            ("repl_fullsync_pushed_total", ld(&r.fullsync_pushed), "References full-syncs queued for the sink."),
            ("repl_queue", waiting, "Entries waiting or in flight in this node's replication queues."),
        ]
    }

    /// `basalt admin repl status`: each sink, its queue and peers, then
    /// the node's counters.
    pub fn repl_status(&self) -> String {
        let sinks = self.repl.sinks();
        let mut out = String::new();
        if sinks.is_empty() {
            out.push_str("sinks: (none)\n");
        }
        for s in &sinks {
            out.push_str(&sink_status(s));
        }
        if let Some(last) = self.fullsync_state.last.lock().clone() {
            out.push_str(&format!("last {}", last));
        }
        if self.repl.unclean.load(Ordering::Relaxed) {
            out.push_str("warning: a queue was not closed cleanly at the last stop; a full-sync repairs what it held in memory\n");
        }
        for (name, v, _) in self.repl_counters() {
            if name == "repl_queue" {
                out.push_str(&format!("waiting: {v}\n"));
            }
            if let Some(c) = name
                .strip_prefix("repl_")
                .and_then(|n| n.strip_suffix("_total"))
            {
                out.push_str(&format!("{}: {v}\n", c.replace('_', " ")));
            }
        }
        let count = self.repl_sink.lag_count();
        if let Some(mean) = self
            .repl_sink
            .lag_ms_sum
            .load(Ordering::Relaxed)
            .checked_div(count)
        {
            out.push_str(&format!(
                "mean replication time: {mean} ms over {count} objects\n"
            ));
        }
        out
    }

    /// `basalt admin --json repl status`: the facts of [`Self::repl_status`]
    /// as JSON (every counter under its `/stats` name).
    pub fn repl_status_json(&self) -> serde_json::Value {
        let sinks: Vec<serde_json::Value> =
            self.repl.sinks().iter().map(|s| sink_json(s)).collect();
        let counters: serde_json::Map<String, serde_json::Value> = self
            .repl_counters()
            .into_iter()
            .map(|(name, v, _)| (name.to_string(), v.into()))
            .collect();
        let count = self.repl_sink.lag_count();
        let mean = self
            .repl_sink
            .lag_ms_sum
            .load(Ordering::Relaxed)
            .checked_div(count);
        serde_json::json!({
            "sinks": sinks,
            "last_fullsync": self.fullsync_state.last.lock().clone().map(|l| l.trim_end().to_string()),
            "unclean_queue": self.repl.unclean.load(Ordering::Relaxed),
            "counters": counters,
            "replication_time_mean_ms": mean,
            "replication_time_count": count,
        })
    }

    /// `--json repl-fullsync [CHECK]`: the check's findings as JSON;
    /// `None` for the other `repl-*` lines.
    pub async fn repl_fullsync_json(
        self: &Arc<Self>,
        words: &[&str],
    ) -> Option<Result<serde_json::Value, String>> {
        let check = match words {
            ["repl-fullsync"] => Check::Auto,
            ["repl-fullsync", kind] => match Check::parse(kind) {
                Some(c) => c,
                None => {
                    return Some(Err(format!(
                        "full-sync check {kind:?}: all, day, hour, range or auto"
                    )))
                }
            },
            _ => return None,
        };
        Some(self.fullsync(check).await.map(|r| r.json()))
    }

    /// Runs a `repl-*` admin line (already split on spaces).
    pub async fn repl_admin(self: &Arc<Self>, words: &[&str]) -> Result<String, String> {
        match words {
            ["repl-status"] => Ok(self.repl_status()),
            ["repl-fullsync"] => self.fullsync(Check::Auto).await.map(|r| r.summary()),
            ["repl-fullsync", kind] => {
                let check = Check::parse(kind).ok_or(format!(
                    "full-sync check {kind:?}: all, day, hour, range or auto"
                ))?;
                self.fullsync(check).await.map(|r| r.summary())
            }
            ["repl-sink-add", name, filter, peers] => {
                let spec = SinkConfig {
                    name: name.to_string(),
                    filter: filter.to_string(),
                    peers: peers.split(',').map(str::to_string).collect(),
                    suspended: false,
                };
                self.repl_add_sink(spec).await
            }
            ["repl-sink-remove", name] => self
                .repl
                .remove(name)
                .map(|n| format!("sink {name} removed ({n} queued entries dropped)\n"))
                .map_err(|e| e.to_string()),
            ["repl-sink-suspend", name] => self
                .repl
                .set_suspended(name, true)
                .map(|()| format!("sink {name} suspended: writes are queued, not delivered\n"))
                .map_err(|e| e.to_string()),
            ["repl-sink-resume", name] => self
                .repl
                .set_suspended(name, false)
                .map(|()| format!("sink {name} resumed\n"))
                .map_err(|e| e.to_string()),
            ["repl-queue-clear", name] => {
                let sink = self
                    .repl
                    .sink(name)
                    .ok_or(format!("no sink named {name}"))?;
                let n = sink.queue.clear().map_err(|e| e.to_string())?;
                Ok(format!(
                    "queue {name}: {n} entries dropped (a full-sync repairs them)\n"
                ))
            }
            _ => Err(format!("unknown repl command {:?}", words.join(" "))),
        }
    }
}

fn sink_status(s: &Sink) -> String {
    let spec = s.spec.read().clone();
    let state = match (s.refused.lock().clone(), spec.suspended) {
        (Some(why), _) => format!("refused: {why}"),
        (None, true) => "suspended".to_string(),
        (None, false) => "active".to_string(),
    };
    let [p1, p2, p3] = s.queue.waiting();
    let q = s.queue.stats();
    let mut out = format!(
        "sink {}: {state}, filter {}\n  queue: real-time {p3}, full-sync {p2}, requeue {p1}, in flight {}; sent {}, discarded {}{}\n",
        spec.name,
        spec.filter,
        s.queue.in_flight(),
        s.stats.sent.load(Ordering::Relaxed),
        q.discarded,
        if q.discarded > 0 { " (the next full-sync repairs them)" } else { "" },
    );
    for p in s.peers.lock().peers() {
        let health = match &p.last_error {
            None => "ok".to_string(),
            Some(e) => format!("backing off {:?}: {e}", p.backoff),
        };
        let kind = if p.seed { "configured" } else { "discovered" };
        out.push_str(&format!("  peer {} ({kind}): {health}\n", p.addr));
    }
    out
}

/// One sink as JSON: the facts of [`sink_status`].
fn sink_json(s: &Sink) -> serde_json::Value {
    let spec = s.spec.read().clone();
    let refused = s.refused.lock().clone();
    let state = match (&refused, spec.suspended) {
        (Some(_), _) => "refused",
        (None, true) => "suspended",
        (None, false) => "active",
    };
    let [p1, p2, p3] = s.queue.waiting();
    let q = s.queue.stats();
    let peers: Vec<serde_json::Value> = s
        .peers
        .lock()
        .peers()
        .iter()
        .map(|p| {
            serde_json::json!({
                "addr": p.addr,
                "kind": if p.seed { "configured" } else { "discovered" },
                "ok": p.last_error.is_none(),
                "backoff_ms": p.backoff.as_millis() as u64,
                "last_error": p.last_error,
            })
        })
        .collect();
    serde_json::json!({
        "name": spec.name,
        "state": state,
        "refused": refused,
        "filter": spec.filter,
        "queue": {"real_time": p3, "full_sync": p2, "requeue": p1},
        "in_flight": s.queue.in_flight(),
        "sent": s.stats.sent.load(Ordering::Relaxed),
        "discarded": q.discarded,
        "peers": peers,
    })
}
