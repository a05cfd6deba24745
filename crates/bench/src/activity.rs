//! What else went on in each report interval: the kernel's pressure stall
//! information and the store's background work.
//!
//! `activity.csv`:
//!
//! ```text
//! elapsed, window, psi_cpu_some_ms, psi_memory_some_ms, psi_memory_full_ms,
//!   psi_io_some_ms, psi_io_full_ms, compaction_runs, compaction_files_in,
//!   compaction_mb_reclaimed, ledger_flushes, ledger_merges, journal_rolls,
//!   journal_gb_est, journal_garbage_pct_est, removal_queue_mb,
//!   store_disk_gb, rss_mb
//! ```
//!
//! PSI (`/proc/pressure/{cpu,memory,io}`, Linux 4.20+) is the time in the
//! interval during which *some* task (or, `full`, every non-idle task) was
//! stalled waiting for a CPU, for memory (reclaim, refaulting pages evicted
//! from the page cache) or for I/O. It is system-wide: under cgroup v1 there
//! is no per-cgroup figure, so other work on the machine shows in it too.
//! The store columns are deltas of the store's counters (zero for stores
//! that do not keep them), except the last two, leveled's journal garbage
//! trigger's latest estimate at the end of the interval: the closed journal
//! files' GB and the percentage of them it takes for garbage (empty for
//! other stores and before the first estimate), and the MB of replaced
//! files waiting for leveled's remover then (empty for other stores).
//! `store_disk_gb` is the space the stores' files take on disk at the end
//! of the interval (allocated blocks, so a journal's punched holes do not
//! count; empty where the store does not say), `rss_mb` the bench
//! process's resident memory then (`/proc/self/statm`; the page cache is
//! not in it). With the wait timers of `waits.csv` they tell a
//! slow interval's cause apart: a GET max far above every recorded wait with
//! high CPU pressure was queueing for a CPU; with high memory pressure, the
//! page cache thrashing or reclaim.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

use crate::outerr::OutputError;

/// Header of `activity.csv`.
pub const HEADER: &str = "elapsed, window, psi_cpu_some_ms, psi_memory_some_ms, \
psi_memory_full_ms, psi_io_some_ms, psi_io_full_ms, compaction_runs, compaction_files_in, \
compaction_mb_reclaimed, ledger_flushes, ledger_merges, journal_rolls, journal_gb_est, \
journal_garbage_pct_est, removal_queue_mb, store_disk_gb, rss_mb";

/// Store counters whose deltas are columns (after the PSI ones), with the
/// divisor applied to the delta.
const STORE_COLUMNS: [(&str, f64); 6] = [
    ("compaction_runs", 1.0),
    ("compaction_files_in", 1.0),
    ("compaction_bytes_reclaimed", 1e6),
    ("ledger_flushes", 1.0),
    ("ledger_merges", 1.0),
    ("journal_rolls", 1.0),
];

/// Cumulative PSI stall times in µs: cpu some, memory some/full, io some/full.
pub type Psi = [u64; 5];

/// Reads the `total=` fields of `/proc/pressure/*`; `None` without PSI.
pub fn read_psi() -> Option<Psi> {
    let read = |what: &str| std::fs::read_to_string(format!("/proc/pressure/{what}")).ok();
    let (cpu, mem, io) = (read("cpu")?, read("memory")?, read("io")?);
    let cpu = parse_psi(&cpu)?;
    let mem = parse_psi(&mem)?;
    let io = parse_psi(&io)?;
    Some([cpu.0, mem.0, mem.1, io.0, io.1])
}

/// `(some total, full total)` of one pressure file (µs; `full` is 0 where
/// the kernel has none, as for cpu before 5.13).
pub fn parse_psi(text: &str) -> Option<(u64, u64)> {
    let total = |kind: &str| {
        text.lines()
            .find(|l| l.starts_with(kind))
            .and_then(|l| l.split_whitespace().find_map(|f| f.strip_prefix("total=")))
            .and_then(|t| t.parse::<u64>().ok())
    };
    Some((total("some")?, total("full").unwrap_or(0)))
}

/// Writer of `activity.csv`.
pub struct ActivityCsv {
    path: PathBuf,
    w: BufWriter<File>,
    last_psi: Option<Psi>,
    last_store: BTreeMap<String, u64>,
}

impl ActivityCsv {
    /// Creates `dir/activity.csv`, with the store's counters and PSI as of
    /// the start of the load.
    pub fn create(dir: &Path, store: BTreeMap<String, u64>) -> Result<ActivityCsv, OutputError> {
        let path = dir.join("activity.csv");
        let io = |source| OutputError::Io {
            path: path.clone(),
            source,
        };
        let mut w = BufWriter::new(File::create(&path).map_err(io)?);
        writeln!(w, "{HEADER}").map_err(io)?;
        Ok(ActivityCsv {
            path,
            w,
            last_psi: read_psi(),
            last_store: store,
        })
    }

    /// Writes the interval ending now (elapsed and window as in the other
    /// CSVs); PSI columns are empty where the kernel has none.
    pub fn row(
        &mut self,
        elapsed: &str,
        window: &str,
        store: BTreeMap<String, u64>,
    ) -> Result<(), OutputError> {
        let psi = read_psi();
        let mut line = format!("{elapsed}, {window}");
        for i in 0..5 {
            match (psi, self.last_psi) {
                (Some(now), Some(then)) => {
                    let ms = now[i].saturating_sub(then[i]) as f64 / 1000.0;
                    line.push_str(&format!(", {ms:.1}"));
                }
                _ => line.push_str(", "),
            }
        }
        for (name, div) in STORE_COLUMNS {
            let get = |s: &BTreeMap<String, u64>| s.get(name).copied().unwrap_or(0);
            let d = get(&store).saturating_sub(get(&self.last_store)) as f64 / div;
            line.push_str(&format!(", {}", trim(d)));
        }
        line.push_str(&garbage_columns(&store));
        match store.get("removal_queue_bytes") {
            Some(b) => line.push_str(&format!(", {}", trim((*b as f64 / 1e6).round()))),
            None => line.push_str(", "),
        }
        match store.get("store_disk_bytes") {
            Some(b) => line.push_str(&format!(", {:.2}", *b as f64 / 1e9)),
            None => line.push_str(", "),
        }
        match rss_bytes() {
            Some(b) => line.push_str(&format!(", {}", b / 1_000_000)),
            None => line.push_str(", "),
        }
        self.last_psi = psi;
        self.last_store = store;
        let path = self.path.clone();
        writeln!(self.w, "{line}")
            .and_then(|()| self.w.flush())
            .map_err(|source| OutputError::Io { path, source })
    }
}

/// `, journal_gb_est, journal_garbage_pct_est` from leveled's gauges (empty
/// cells without an estimate).
fn garbage_columns(store: &BTreeMap<String, u64>) -> String {
    let closed = store.get("journal_closed_bytes_estimated").copied();
    let garbage = store.get("journal_garbage_bytes_estimated").copied();
    match (closed, garbage) {
        (Some(c), Some(g)) if c > 0 => {
            debug_assert!(g <= c, "garbage {g} of {c}");
            format!(
                ", {:.2}, {:.1}",
                c as f64 / 1e9,
                100.0 * g as f64 / c as f64
            )
        }
        _ => ", , ".into(),
    }
}

/// The process's resident memory (`/proc/self/statm`, pages of 4 KiB).
fn rss_bytes() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

fn trim(v: f64) -> String {
    if v.fract() == 0.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.1}")
    }
}

/// One row of `activity.csv` read back (PSI as % of the interval, `None`
/// where the file has no figure).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ActivityRow {
    /// Seconds since the start (end of the interval).
    pub elapsed: f64,
    /// PSI cpu some, memory some, memory full, io some, io full, in % of
    /// the interval.
    pub psi_pct: Option<[f64; 5]>,
    /// Compaction runs in the interval.
    pub compaction_runs: f64,
    /// Journal files they replaced.
    pub compaction_files_in: f64,
    /// Ledger merges in the interval.
    pub ledger_merges: f64,
}

/// Parses `activity.csv`.
pub fn parse(text: &str) -> Vec<ActivityRow> {
    text.lines()
        .skip(1)
        .filter_map(|l| {
            let cells: Vec<&str> = l.split(',').map(str::trim).collect();
            let num = |i: usize| cells.get(i).and_then(|c| c.parse::<f64>().ok());
            let elapsed = num(0)?;
            let window = num(1)?;
            let psi = (2..7).map(num).collect::<Option<Vec<f64>>>();
            let psi_pct = psi.filter(|_| window > 0.0).map(|p| {
                let mut out = [0.0; 5];
                for (o, ms) in out.iter_mut().zip(p) {
                    *o = ms / (window * 1000.0) * 100.0;
                }
                out
            });
            Some(ActivityRow {
                elapsed,
                psi_pct,
                compaction_runs: num(7).unwrap_or(0.0),
                compaction_files_in: num(8).unwrap_or(0.0),
                ledger_merges: num(11).unwrap_or(0.0),
            })
        })
        .collect()
}

/// Loads `dir/activity.csv` if the run has one.
pub fn load(dir: &Path) -> Result<Option<Vec<ActivityRow>>, OutputError> {
    let path = dir.join("activity.csv");
    if !path.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path).map_err(|source| OutputError::Io {
        path: path.clone(),
        source,
    })?;
    Ok(Some(parse(&text)))
}

/// The row of `rows` ending at `elapsed` (within 1 ms).
pub fn at(rows: &[ActivityRow], elapsed: f64) -> Option<&ActivityRow> {
    rows.iter().find(|r| (r.elapsed - elapsed).abs() < 1e-3)
}

/// A short text for the report: PSI and background work in one interval.
pub fn describe(r: &ActivityRow) -> String {
    let mut parts = Vec::new();
    if let Some(p) = r.psi_pct {
        parts.push(format!(
            "PSI cpu {:.0} %, memory {:.0}/{:.0} %, io {:.0}/{:.0} % (some/full)",
            p[0], p[1], p[2], p[3], p[4]
        ));
    }
    if r.compaction_runs > 0.0 {
        parts.push(format!(
            "{} journal compaction run(s), {} files in",
            trim(r.compaction_runs),
            trim(r.compaction_files_in)
        ));
    }
    if r.ledger_merges > 0.0 {
        parts.push(format!("{} ledger merge(s)", trim(r.ledger_merges)));
    }
    if parts.is_empty() {
        "no PSI, no background work".into()
    } else {
        parts.join("; ")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn psi_files_parse_with_and_without_full() {
        let cpu = "some avg10=78.89 avg60=69.85 avg300=64.77 total=18615394889\n";
        assert_eq!(parse_psi(cpu), Some((18_615_394_889, 0)));
        let mem = "some avg10=1.00 avg60=0.00 avg300=0.00 total=3435084409\n\
                   full avg10=0.00 avg60=0.00 avg300=0.00 total=1304764186\n";
        assert_eq!(parse_psi(mem), Some((3_435_084_409, 1_304_764_186)));
        assert_eq!(parse_psi("garbage"), None);
    }

    #[test]
    fn rows_round_trip_with_store_deltas() {
        let tmp = tempfile::tempdir().expect("tmp");
        let start: BTreeMap<String, u64> = [
            ("compaction_runs".to_string(), 2),
            ("compaction_files_in".to_string(), 8),
            ("compaction_bytes_reclaimed".to_string(), 1_000_000),
        ]
        .into();
        let mut w = ActivityCsv::create(tmp.path(), start).expect("create");
        let later: BTreeMap<String, u64> = [
            ("compaction_runs".to_string(), 3),
            ("compaction_files_in".to_string(), 12),
            ("compaction_bytes_reclaimed".to_string(), 801_000_000),
            ("ledger_merges".to_string(), 2),
            ("journal_closed_bytes_estimated".to_string(), 4_000_000_000),
            ("journal_garbage_bytes_estimated".to_string(), 2_600_000_000),
            ("removal_queue_bytes".to_string(), 512_000_000),
            ("store_disk_bytes".to_string(), 12_345_000_000),
        ]
        .into();
        w.row("10.0", "10.0", later).expect("row");
        drop(w);
        let text = std::fs::read_to_string(tmp.path().join("activity.csv")).expect("read");
        let row = text.lines().nth(1).expect("row");
        assert_eq!(row.split(',').count(), HEADER.split(',').count(), "{row}");
        let (gauges, rss) = row.rsplit_once(", ").expect("rss cell");
        assert!(
            gauges.ends_with(", 4.00, 65.0, 512, 12.35"),
            "the gauges as they are: {row}"
        );
        let rss: u64 = rss.parse().expect("rss in MB");
        assert!(rss > 0 && rss < 1 << 20, "{row}");
        let rows = load(tmp.path()).expect("load").expect("file");
        assert_eq!(rows.len(), 1);
        let r = &rows[0];
        assert_eq!(r.elapsed, 10.0);
        assert_eq!((r.compaction_runs, r.compaction_files_in), (1.0, 4.0));
        assert_eq!(r.ledger_merges, 2.0);
        if let Some(p) = r.psi_pct {
            assert!(p.iter().all(|v| (0.0..=100.5 * 2.0).contains(v)), "{p:?}");
        }
        let text = describe(r);
        assert!(
            text.contains("1 journal compaction run(s), 4 files in"),
            "{text}"
        );
        assert!(text.contains("2 ledger merge(s)"), "{text}");
        assert!(at(&rows, 10.0).is_some() && at(&rows, 20.0).is_none());
    }

    #[test]
    fn rows_without_psi_still_parse() {
        let text = format!("{HEADER}\n10.0, 10.0, , , , , , 1, 4, 800, 0, 0, 1\n");
        let rows = parse(&text);
        assert_eq!(rows.len(), 1);
        assert_eq!(rows[0].psi_pct, None);
        assert_eq!(rows[0].compaction_runs, 1.0);
    }
}
