//! Per-operation latency of the coordinator (GET, PUT, DELETE, 2i queries,
//! MapReduce jobs, data-type fetches and updates, for every API), for
//! `/stats`, `/metrics` and the console's live charts.
//!
//! Each operation keeps an HDR histogram (1 µs .. 1 h, 3 significant
//! digits) per 10-second slot, six slots: the *recent window* is the last
//! 50–60 seconds (the slots whose epoch is within the last six), like
//! Riak's one-minute spirals and histograms. A slot is reset when it is
//! reused for a new epoch. Totals (count and sum of microseconds since the
//! node started) are kept apart for Prometheus summaries.

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use std::time::Instant;

/// Seconds per slot.
pub const SLOT_SECS: u64 = 10;
/// Slots in the recent window.
pub const SLOTS: usize = 6;
/// Largest recorded latency (1 hour, in µs); longer ones count as this.
pub const MAX_US: u64 = 3_600_000_000;

/// A timed operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// A coordinated GET.
    Get,
    /// A coordinated PUT.
    Put,
    /// A coordinated DELETE (tombstone PUT).
    Delete,
    /// A 2i query (one page).
    Index,
    /// A MapReduce job, whole.
    MapRed,
    /// A data-type fetch or update (an update is also timed as a PUT).
    DataType,
}

impl Op {
    /// Every operation, in report order.
    pub const ALL: [Op; 6] = [
        Op::Get,
        Op::Put,
        Op::Delete,
        Op::Index,
        Op::MapRed,
        Op::DataType,
    ];

    /// `get`, `put`, `delete`, `index`, `mapred`, `datatype`.
    pub fn name(self) -> &'static str {
        match self {
            Op::Get => "get",
            Op::Put => "put",
            Op::Delete => "delete",
            Op::Index => "index",
            Op::MapRed => "mapred",
            Op::DataType => "datatype",
        }
    }

    fn index(self) -> usize {
        match self {
            Op::Get => 0,
            Op::Put => 1,
            Op::Delete => 2,
            Op::Index => 3,
            Op::MapRed => 4,
            Op::DataType => 5,
        }
    }
}

/// A summary of one operation's latencies.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Summary {
    /// Operations in the recent window.
    pub count: u64,
    /// Mean in µs (0 when none).
    pub mean: f64,
    /// Median in µs.
    pub median: u64,
    /// 95th percentile in µs.
    pub p95: u64,
    /// 99th percentile in µs.
    pub p99: u64,
    /// Maximum in µs.
    pub max: u64,
    /// Operations since the node started.
    pub total_count: u64,
    /// Sum of all latencies since the node started, µs.
    pub total_sum_us: u64,
}

fn histogram() -> Option<Histogram<u64>> {
    Histogram::new_with_bounds(1, MAX_US, 3).ok()
}

#[derive(Default)]
struct OpWindow {
    /// (epoch, histogram) per slot; epoch = seconds since start / SLOT_SECS.
    slots: Vec<(u64, Histogram<u64>)>,
    total_count: u64,
    total_sum_us: u64,
}

impl OpWindow {
    fn new() -> OpWindow {
        OpWindow {
            slots: (0..SLOTS)
                .filter_map(|_| histogram().map(|h| (0, h)))
                .collect(),
            ..OpWindow::default()
        }
    }

    fn record(&mut self, us: u64, epoch: u64) {
        self.total_count = self.total_count.saturating_add(1);
        self.total_sum_us = self.total_sum_us.saturating_add(us);
        let n = self.slots.len() as u64;
        if n == 0 {
            return;
        }
        let Some((e, h)) = self.slots.get_mut((epoch % n) as usize) else {
            return;
        };
        if *e != epoch {
            h.reset();
            *e = epoch;
        }
        h.saturating_record(us.clamp(1, MAX_US));
    }

    fn summary(&self, epoch: u64) -> Summary {
        let mut s = Summary {
            total_count: self.total_count,
            total_sum_us: self.total_sum_us,
            ..Summary::default()
        };
        let Some(mut all) = histogram() else { return s };
        for (e, h) in &self.slots {
            if *e + (SLOTS as u64) > epoch && *e <= epoch {
                // Same bounds, so adding cannot fail.
                let _ = all.add(h);
            }
        }
        if all.is_empty() {
            return s;
        }
        s.count = all.len();
        s.mean = all.mean();
        s.median = all.value_at_quantile(0.5);
        s.p95 = all.value_at_quantile(0.95);
        s.p99 = all.value_at_quantile(0.99);
        s.max = all.max();
        s
    }
}

/// Latencies of every operation.
pub struct Latencies {
    start: Instant,
    ops: Mutex<Vec<OpWindow>>,
}

impl Default for Latencies {
    fn default() -> Self {
        Latencies {
            start: Instant::now(),
            ops: Mutex::new(Op::ALL.iter().map(|_| OpWindow::new()).collect()),
        }
    }
}

impl std::fmt::Debug for Latencies {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Latencies").finish_non_exhaustive()
    }
}

impl Latencies {
    fn epoch(&self) -> u64 {
        self.start.elapsed().as_secs() / SLOT_SECS
    }

    /// Records one operation of `us` microseconds now.
    pub fn record(&self, op: Op, us: u64) {
        self.record_at(op, us, self.epoch());
    }

    /// Records one operation in slot epoch `epoch` (tests).
    pub fn record_at(&self, op: Op, us: u64, epoch: u64) {
        if let Some(w) = self.ops.lock().get_mut(op.index()) {
            w.record(us, epoch);
        }
    }

    /// The summary of `op` now.
    pub fn summary(&self, op: Op) -> Summary {
        self.summary_at(op, self.epoch())
    }

    /// The summary of `op` as of slot epoch `epoch` (tests).
    pub fn summary_at(&self, op: Op, epoch: u64) -> Summary {
        self.ops
            .lock()
            .get(op.index())
            .map(|w| w.summary(epoch))
            .unwrap_or_default()
    }

    /// A guard that records `op`'s latency when dropped.
    pub fn timer(&self, op: Op) -> Timer<'_> {
        Timer {
            lat: self,
            op,
            start: Instant::now(),
        }
    }
}

/// Records the time from [`Latencies::timer`] to its drop.
pub struct Timer<'a> {
    lat: &'a Latencies,
    op: Op,
    start: Instant,
}

impl Drop for Timer<'_> {
    fn drop(&mut self) {
        let us = u64::try_from(self.start.elapsed().as_micros()).unwrap_or(u64::MAX);
        self.lat.record(self.op, us);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_summaries_and_expiry() {
        let l = Latencies::default();
        for us in 1..=100 {
            l.record_at(Op::Get, us, 0);
        }
        l.record_at(Op::Put, 5_000, 0);
        let s = l.summary_at(Op::Get, 0);
        assert_eq!(s.count, 100);
        assert_eq!(s.median, 50);
        assert_eq!(s.p95, 95);
        assert_eq!(s.p99, 99);
        assert_eq!(s.max, 100);
        assert!((s.mean - 50.5).abs() < 0.01, "{}", s.mean);
        // 3 significant digits: within 0.1%.
        assert!((5_000..=5_005).contains(&l.summary_at(Op::Put, 0).max));
        assert_eq!(l.summary_at(Op::Delete, 0).count, 0);
        // Still in the window five slots later; gone after six.
        assert_eq!(l.summary_at(Op::Get, 5).count, 100);
        let old = l.summary_at(Op::Get, 6);
        assert_eq!(
            (old.count, old.total_count, old.total_sum_us),
            (0, 100, 5050)
        );
        // Reusing slot 0 for epoch 6 drops the old values.
        l.record_at(Op::Get, 7, 6);
        let s = l.summary_at(Op::Get, 6);
        assert_eq!((s.count, s.max, s.total_count), (1, 7, 101));
        // Over-long latencies are clamped, not lost.
        l.record_at(Op::Delete, u64::MAX, 6);
        assert!(l.summary_at(Op::Delete, 6).max >= MAX_US);
    }

    #[test]
    fn timer_records_on_drop() {
        let l = Latencies::default();
        drop(l.timer(Op::Put));
        assert_eq!(l.summary(Op::Put).count, 1);
    }
}
