//! Where requests wait inside the store, per report interval.
//!
//! A store that keeps wait timers (the leveled engine: `basalt_engine::stats`
//! names each `T` as `T_count`, `T_ns`, `T_slow`, `T_max_ns`) is sampled at
//! every report interval through `KvTarget::counters`; the deltas go to
//! `waits.csv`:
//!
//! ```text
//! elapsed, window, T_n, T_ms, T_slow, T_max_ms[, T_imax_ms], ...   (one group per timer)
//! ```
//!
//! `T_n` waits, `T_ms` their total time, `T_slow` those of 1 ms or more, in
//! the interval; `T_max_ms` is the longest wait since the store opened;
//! `T_imax_ms` (stores that report `T_window_max_ns`, i.e. leveled through
//! `Backend::take_wait_maxima`) the longest wait in the interval itself. With several stores, counts and totals are summed and
//! the maximum is the largest. Backends without such counters (RocksDB,
//! bitcask) produce no file. In `mode max` the bench queues nothing (a
//! worker sends its next request when the last one returns); open-loop
//! queueing is the difference between the latency and service-time files.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::outerr::OutputError;

/// One sample: counter name → value, summed over stores (max for `_max_ns`).
pub type Sample = BTreeMap<String, u64>;

/// Sums the counters of several stores.
pub fn merge(per_store: &[Vec<(String, u64)>]) -> Sample {
    let mut out = Sample::new();
    for counters in per_store {
        for (name, v) in counters {
            let e = out.entry(name.clone()).or_insert(0);
            if name.ends_with("_max_ns") {
                *e = (*e).max(*v);
            } else {
                *e = e.saturating_add(*v);
            }
        }
    }
    out
}

/// The timers present in a sample, in name order.
pub fn timers(sample: &Sample) -> Vec<String> {
    sample
        .keys()
        .filter_map(|k| k.strip_suffix("_max_ns"))
        .filter(|t| sample.contains_key(&format!("{t}_count")))
        .map(str::to_string)
        .collect()
}

/// Writer of `waits.csv` (created only when the store has timers).
pub struct WaitsCsv {
    path: PathBuf,
    w: BufWriter<File>,
    timers: Vec<String>,
    /// The store reports per-interval maxima (`T_window_max_ns`).
    interval_max: bool,
    last: Sample,
}

impl WaitsCsv {
    /// Creates `dir/waits.csv` for the timers of `baseline` (the sample
    /// taken when the load starts); `None` if there are none.
    pub fn create(dir: &Path, baseline: Sample) -> Result<Option<WaitsCsv>, OutputError> {
        let timers = timers(&baseline);
        if timers.is_empty() {
            return Ok(None);
        }
        let path = dir.join("waits.csv");
        let io = |source| OutputError::Io {
            path: path.clone(),
            source,
        };
        let mut w = BufWriter::new(File::create(&path).map_err(io)?);
        let interval_max = baseline.keys().any(|k| k.ends_with("_window_max_ns"));
        let mut header = String::from("elapsed, window");
        for t in &timers {
            header.push_str(&format!(", {t}_n, {t}_ms, {t}_slow, {t}_max_ms"));
            if interval_max {
                header.push_str(&format!(", {t}_imax_ms"));
            }
        }
        writeln!(w, "{header}").map_err(io)?;
        Ok(Some(WaitsCsv {
            path,
            w,
            timers,
            interval_max,
            last: baseline,
        }))
    }

    /// Writes the interval ending with `now` (elapsed and window as in the
    /// other CSVs).
    pub fn row(&mut self, elapsed: &str, window: &str, now: Sample) -> Result<(), OutputError> {
        let mut line = format!("{elapsed}, {window}");
        let get = |s: &Sample, k: String| s.get(&k).copied().unwrap_or(0);
        for t in &self.timers {
            let d = |suffix: &str| {
                get(&now, format!("{t}{suffix}"))
                    .saturating_sub(get(&self.last, format!("{t}{suffix}")))
            };
            line.push_str(&format!(
                ", {}, {:.3}, {}, {:.3}",
                d("_count"),
                d("_ns") as f64 / 1e6,
                d("_slow"),
                get(&now, format!("{t}_max_ns")) as f64 / 1e6
            ));
            if self.interval_max {
                let m = get(&now, format!("{t}_window_max_ns")) as f64 / 1e6;
                line.push_str(&format!(", {m:.3}"));
            }
        }
        self.last = now;
        let path = self.path.clone();
        writeln!(self.w, "{line}")
            .and_then(|()| self.w.flush())
            .map_err(|source| OutputError::Io { path, source })
    }
}

/// `waits.csv` read back: the timer names and one row of numbers per interval.
#[derive(Debug, Clone, Default)]
pub struct WaitsData {
    /// Timer names, in column order.
    pub timers: Vec<String>,
    /// Rows: `elapsed, window`, then `n, ms, slow, max_ms` (and `imax_ms`
    /// with `interval_max`) per timer.
    pub rows: Vec<Vec<f64>>,
    /// The file has per-interval maxima (`T_imax_ms`).
    pub interval_max: bool,
}

impl WaitsData {
    /// Parses the file's text.
    pub fn parse(text: &str) -> Option<WaitsData> {
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next()?.split(',').map(str::trim).collect();
        let timers: Vec<String> = header
            .iter()
            .filter_map(|h| h.strip_suffix("_max_ms"))
            .map(str::to_string)
            .collect();
        let interval_max = header.iter().any(|h| h.ends_with("_imax_ms"));
        let width = 2 + Self::stride(interval_max) * timers.len();
        let rows = lines
            .filter_map(|l| {
                let r: Vec<f64> = l.split(',').filter_map(|c| c.trim().parse().ok()).collect();
                (r.len() == width).then_some(r)
            })
            .collect();
        Some(WaitsData {
            timers,
            rows,
            interval_max,
        })
    }

    fn stride(interval_max: bool) -> usize {
        if interval_max {
            5
        } else {
            4
        }
    }

    /// The longest wait of timer `i` within interval `r` (files with
    /// `interval_max` only).
    pub fn interval_max(&self, r: usize, i: usize) -> Option<f64> {
        if !self.interval_max {
            return None;
        }
        self.rows.get(r)?.get(2 + 5 * i + 4).copied()
    }

    /// `(n, ms, slow, max_ms)` of timer `i` in row `r`.
    pub fn cell(&self, r: usize, i: usize) -> Option<(f64, f64, f64, f64)> {
        let row = self.rows.get(r)?;
        let b = 2 + Self::stride(self.interval_max) * i;
        Some((
            *row.get(b)?,
            *row.get(b + 1)?,
            *row.get(b + 2)?,
            *row.get(b + 3)?,
        ))
    }

    /// The row whose elapsed time is `elapsed` (within 1 ms).
    pub fn row_at(&self, elapsed: f64) -> Option<usize> {
        self.rows
            .iter()
            .position(|r| r.first().is_some_and(|e| (e - elapsed).abs() < 1e-3))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: u64, ns: u64, max: u64) -> Vec<(String, u64)> {
        vec![
            ("puts".into(), n),
            ("journal_fsync_count".into(), n),
            ("journal_fsync_ns".into(), ns),
            ("journal_fsync_slow".into(), 0),
            ("journal_fsync_max_ns".into(), max),
        ]
    }

    #[test]
    fn deltas_round_trip() {
        let tmp = tempfile::tempdir().expect("tmp");
        let base = merge(&[sample(1, 1_000_000, 1_000_000), sample(1, 0, 0)]);
        assert_eq!(timers(&base), vec!["journal_fsync".to_string()]);
        assert_eq!(base["journal_fsync_count"], 2);
        let mut w = WaitsCsv::create(tmp.path(), base)
            .expect("create")
            .expect("timers");
        w.row("10.0", "10.0", merge(&[sample(5, 9_000_000, 4_000_000)]))
            .expect("row");
        drop(w);
        let text = std::fs::read_to_string(tmp.path().join("waits.csv")).expect("read");
        let d = WaitsData::parse(&text).expect("parse");
        assert_eq!(d.timers, vec!["journal_fsync".to_string()]);
        assert_eq!(d.cell(0, 0), Some((3.0, 8.0, 0.0, 4.0)));
        assert_eq!(d.row_at(10.0), Some(0));
        assert_eq!(
            d.interval_max(0, 0),
            None,
            "no window maxima in these samples"
        );
        assert!(
            WaitsCsv::create(tmp.path(), merge(&[vec![("puts".into(), 1)]]))
                .expect("create")
                .is_none()
        );
    }

    #[test]
    fn interval_maxima_are_their_own_column() {
        let tmp = tempfile::tempdir().expect("tmp");
        let with_window = |n, ns, max, window| {
            let mut s = sample(n, ns, max);
            s.push(("journal_fsync_window_max_ns".into(), window));
            s
        };
        let base = merge(&[with_window(1, 1_000_000, 9_000_000, 0)]);
        assert_eq!(timers(&base), vec!["journal_fsync".to_string()]);
        let mut w = WaitsCsv::create(tmp.path(), base)
            .expect("create")
            .expect("timers");
        w.row(
            "10.0",
            "10.0",
            merge(&[with_window(3, 3_000_000, 9_000_000, 2_500_000)]),
        )
        .expect("row");
        drop(w);
        let text = std::fs::read_to_string(tmp.path().join("waits.csv")).expect("read");
        let d = WaitsData::parse(&text).expect("parse");
        assert_eq!(d.cell(0, 0), Some((2.0, 2.0, 0.0, 9.0)));
        assert_eq!(d.interval_max(0, 0), Some(2.5));
    }
}
