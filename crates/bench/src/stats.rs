//! Latency and error accounting: one HdrHistogram per operation per report
//! interval (not overlapping, unlike basho_bench's folsom window), merged
//! into a whole-run histogram at each report.
//!
//! Workers record into a per-op mutex-guarded interval histogram (µs,
//! 1 µs .. 1 h, 3 significant digits); the reporter swaps it out once per
//! interval. Only successful ops are timed (as basho_bench); errors are
//! counted per op and per `(label, reason)`.

use hdrhistogram::Histogram;
use parking_lot::Mutex;
use std::collections::BTreeMap;

const MAX_US: u64 = 3_600_000_000;

fn new_hist() -> Histogram<u64> {
    // 1 µs .. 1 h with 3 significant digits is always a valid range.
    Histogram::new_with_bounds(1, MAX_US, 3).expect("1 us .. 1 h with 3 digits is a valid range")
}

/// Figures of one histogram, as `<op>_latencies.csv` prints them (µs).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct LatencySummary {
    /// Successful ops.
    pub n: u64,
    /// Minimum.
    pub min: u64,
    /// Arithmetic mean.
    pub mean: f64,
    /// 50th percentile.
    pub median: u64,
    /// 95th percentile.
    pub p95: u64,
    /// 99th percentile.
    pub p99: u64,
    /// 99.9th percentile.
    pub p999: u64,
    /// Maximum.
    pub max: u64,
}

impl LatencySummary {
    /// Summarises `h`; all zero when empty.
    pub fn of(h: &Histogram<u64>) -> LatencySummary {
        if h.is_empty() {
            return LatencySummary::default();
        }
        LatencySummary {
            n: h.len(),
            min: h.min(),
            mean: h.mean(),
            median: h.value_at_quantile(0.5),
            p95: h.value_at_quantile(0.95),
            p99: h.value_at_quantile(0.99),
            p999: h.value_at_quantile(0.999),
            max: h.max(),
        }
    }
}

#[derive(Debug)]
struct OpInterval {
    hist: Histogram<u64>,
    /// Latency from the intended start (open-loop mode only).
    intended: Histogram<u64>,
    errors: u64,
}

/// One interval of one op, taken by the reporter.
#[derive(Debug, Clone)]
pub struct OpSnapshot {
    /// Latency (µs) of successful ops.
    pub hist: Histogram<u64>,
    /// Service-time latency in open-loop mode, or empty.
    pub service: Histogram<u64>,
    /// Errors in the interval.
    pub errors: u64,
}

/// Shared statistics of a run.
#[derive(Debug)]
pub struct Stats {
    ops: Vec<Mutex<OpInterval>>,
    errors: Mutex<BTreeMap<(String, String), u64>>,
}

impl Stats {
    /// Statistics for `n_ops` operations (indexed like the config's list).
    pub fn new(n_ops: usize) -> Stats {
        Stats {
            ops: (0..n_ops)
                .map(|_| {
                    Mutex::new(OpInterval {
                        hist: new_hist(),
                        intended: new_hist(),
                        errors: 0,
                    })
                })
                .collect(),
            errors: Mutex::new(BTreeMap::new()),
        }
    }

    /// Records a success of op `i`: `service_us` is the time the op took;
    /// `intended_us`, in open-loop mode, the time since its intended start.
    pub fn record(&self, i: usize, service_us: u64, intended_us: Option<u64>) {
        if let Some(op) = self.ops.get(i) {
            let mut g = op.lock();
            match intended_us {
                None => g.hist.saturating_record(service_us.clamp(1, MAX_US)),
                Some(t) => {
                    // `hist` holds the measured latency (from the intended
                    // start); `intended` keeps the service time.
                    g.hist.saturating_record(t.clamp(1, MAX_US));
                    g.intended.saturating_record(service_us.clamp(1, MAX_US));
                }
            }
        }
    }

    /// Counts an error of op `i` (`label`) with `reason`.
    pub fn error(&self, i: usize, label: &str, reason: &str) {
        if let Some(op) = self.ops.get(i) {
            op.lock().errors += 1;
        }
        *self
            .errors
            .lock()
            .entry((label.to_string(), reason.to_string()))
            .or_insert(0) += 1;
    }

    /// Takes every op's interval figures and starts new intervals.
    pub fn take_interval(&self) -> Vec<OpSnapshot> {
        self.ops
            .iter()
            .map(|op| {
                let mut g = op.lock();
                let hist = std::mem::replace(&mut g.hist, new_hist());
                let service = std::mem::replace(&mut g.intended, new_hist());
                let errors = std::mem::take(&mut g.errors);
                OpSnapshot {
                    hist,
                    service,
                    errors,
                }
            })
            .collect()
    }

    /// Run totals of errors by (label, reason).
    pub fn error_totals(&self) -> BTreeMap<(String, String), u64> {
        self.errors.lock().clone()
    }
}

/// Whole-run histograms, fed by each interval.
#[derive(Debug)]
pub struct Cumulative {
    /// Per op: latency.
    pub hists: Vec<Histogram<u64>>,
    /// Per op: service time (open-loop only).
    pub service: Vec<Histogram<u64>>,
    /// Per op: errors.
    pub errors: Vec<u64>,
}

impl Cumulative {
    /// Empty totals for `n_ops` operations.
    pub fn new(n_ops: usize) -> Self {
        Cumulative {
            hists: (0..n_ops).map(|_| new_hist()).collect(),
            service: (0..n_ops).map(|_| new_hist()).collect(),
            errors: vec![0; n_ops],
        }
    }

    /// Adds an interval.
    pub fn add(&mut self, snaps: &[OpSnapshot]) {
        for (i, s) in snaps.iter().enumerate() {
            if let Some(h) = self.hists.get_mut(i) {
                // Same bounds on both sides: adding cannot fail.
                let _ = h.add(&s.hist);
            }
            if let Some(h) = self.service.get_mut(i) {
                let _ = h.add(&s.service);
            }
            if let Some(e) = self.errors.get_mut(i) {
                *e += s.errors;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn intervals_do_not_overlap() {
        let s = Stats::new(2);
        for v in 1..=100 {
            s.record(0, v, None);
        }
        s.error(1, "put", "timeout");
        let a = s.take_interval();
        let sum = LatencySummary::of(&a[0].hist);
        assert_eq!(sum.n, 100);
        assert_eq!(sum.min, 1);
        assert_eq!(sum.max, 100);
        assert_eq!(sum.median, 50);
        assert_eq!(a[1].errors, 1);
        let b = s.take_interval();
        assert_eq!(LatencySummary::of(&b[0].hist).n, 0);
        let mut c = Cumulative::new(2);
        c.add(&a);
        c.add(&b);
        assert_eq!(c.hists[0].len(), 100);
        assert_eq!(c.errors[1], 1);
        assert_eq!(
            s.error_totals().get(&("put".into(), "timeout".into())),
            Some(&1)
        );
    }
}
