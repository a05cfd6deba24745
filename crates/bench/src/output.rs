//! Files of a results directory, named and shaped as basho_bench's:
//!
//! - `summary.csv`: `elapsed, window, total, successful, failed`
//! - `<label>_latencies.csv`: `elapsed, window, n, min, mean, median, 95th,
//!   99th, 99_9th, max, errors` in µs (`mean` with one decimal); `label` is
//!   normalised (`[^0-9A-Za-z]` → `-`)
//! - `errors.csv`: `"error","count"` with rows like `"{{put,put},Io}","3"`
//! - `sysstats.csv` (ours): `elapsed, window, cpu_secs, cpu_pct,
//!   write_bytes, wchar, user_bytes, write_amp`
//! - `<label>_service_latencies.csv` (ours, open-loop runs only): service
//!   time, while `<label>_latencies.csv` holds latency from intended start
//! - `waits.csv` (ours, stores with wait timers): see [`crate::waits`]
//! - `activity.csv` (ours): PSI and the store's background work per
//!   interval, see [`crate::activity`]
//! - copies of the config files
//!
//! Differences from basho_bench: intervals do not overlap (HdrHistogram per
//! interval), and `n` and the figures are written even below 5 samples.
//! [`RunData::load`] reads these files back (also from basho_bench runs) for
//! the report, the charts and `compare`.

use crate::activity::{self, ActivityRow};
use crate::stats::LatencySummary;
use crate::waits::WaitsData;
use std::fs::File;
use std::io::{BufRead, BufReader, BufWriter, Write};
use std::path::{Path, PathBuf};

pub use crate::outerr::OutputError;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> OutputError + '_ {
    move |source| OutputError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Formats seconds as basho_bench's `~w` does: shortest form, always with a
/// decimal point (`10.001016`, `10.0`).
pub fn secs(us: u64) -> String {
    let s = format!("{}", us as f64 / 1e6);
    if s.contains('.') || s.contains('e') {
        s
    } else {
        format!("{s}.0")
    }
}

/// A local-time-free timestamp `YYYYMMDD_HHMMSS` (UTC) for run names.
pub fn timestamp_name() -> String {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let (days, rem) = (t / 86_400, t % 86_400);
    // Civil from days (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}_{:02}{:02}{:02}",
        rem / 3600,
        (rem / 60) % 60,
        rem % 60
    )
}

/// Creates `<parent>/<name>` (name default: a timestamp), checks it can be
/// written, and points `<parent>/current` at it. Fails before any load.
pub fn prepare_results_dir(parent: &Path, name: Option<&str>) -> Result<PathBuf, OutputError> {
    let name = name.map_or_else(timestamp_name, str::to_string);
    if name == "current" || name.is_empty() || name.contains('/') {
        return Err(OutputError::Invalid(format!(
            "bad bench name {name:?}: it must be non-empty, contain no '/', and not be \"current\""
        )));
    }
    let dir = parent.join(&name);
    std::fs::create_dir_all(&dir).map_err(|e| {
        OutputError::Invalid(format!(
            "results directory {} cannot be created: {e}",
            dir.display()
        ))
    })?;
    let probe = dir.join(".write-test");
    File::create(&probe)
        .and_then(|mut f| f.write_all(b"ok"))
        .map_err(|e| {
            OutputError::Invalid(format!(
                "results directory {} cannot be written: {e}",
                dir.display()
            ))
        })?;
    let _ = std::fs::remove_file(&probe);
    let link = parent.join("current");
    if std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink()) {
        let _ = std::fs::remove_file(&link);
    }
    #[cfg(unix)]
    {
        // Best effort, as basho_bench: a failing link does not stop the run.
        let _ = std::os::unix::fs::symlink(&name, &link);
    }
    Ok(dir)
}

/// The CSV writers of a run (opened before the load starts).
pub struct CsvWriters {
    dir: PathBuf,
    summary: BufWriter<File>,
    lat: Vec<BufWriter<File>>,
    service: Vec<BufWriter<File>>,
    sys: BufWriter<File>,
}

/// Header of `summary.csv`.
pub const SUMMARY_HEADER: &str = "elapsed, window, total, successful, failed";
/// Header of `<op>_latencies.csv`.
pub const LATENCY_HEADER: &str =
    "elapsed, window, n, min, mean, median, 95th, 99th, 99_9th, max, errors";
/// Header of `sysstats.csv`.
pub const SYS_HEADER: &str =
    "elapsed, window, cpu_secs, cpu_pct, write_bytes, wchar, user_bytes, write_amp";

fn create(dir: &Path, name: &str, header: &str) -> Result<BufWriter<File>, OutputError> {
    let path = dir.join(name);
    let f = File::create(&path).map_err(io(&path))?;
    let mut w = BufWriter::new(f);
    writeln!(w, "{header}").map_err(io(&path))?;
    Ok(w)
}

/// One row of `sysstats.csv`.
#[derive(Debug, Clone, Copy, Default)]
pub struct SysRow {
    /// CPU seconds in the interval.
    pub cpu_secs: f64,
    /// CPU % of one core.
    pub cpu_pct: f64,
    /// `write_bytes` delta.
    pub write_bytes: u64,
    /// `wchar` delta.
    pub wchar: u64,
    /// User bytes put.
    pub user_bytes: u64,
}

impl CsvWriters {
    /// Creates the files for `labels` (file labels); with `service`, also
    /// the open-loop service-time files.
    pub fn create(dir: &Path, labels: &[String], service: bool) -> Result<CsvWriters, OutputError> {
        let mut lat = Vec::new();
        let mut svc = Vec::new();
        for l in labels {
            lat.push(create(dir, &format!("{l}_latencies.csv"), LATENCY_HEADER)?);
            if service {
                svc.push(create(
                    dir,
                    &format!("{l}_service_latencies.csv"),
                    LATENCY_HEADER,
                )?);
            }
        }
        Ok(CsvWriters {
            dir: dir.to_path_buf(),
            summary: create(dir, "summary.csv", SUMMARY_HEADER)?,
            lat,
            service: svc,
            sys: create(dir, "sysstats.csv", SYS_HEADER)?,
        })
    }

    /// Writes one interval: elapsed and window in µs, per-op figures.
    pub fn row(
        &mut self,
        elapsed_us: u64,
        window_us: u64,
        ops: &[(LatencySummary, u64)],
        service: &[LatencySummary],
        sys: &SysRow,
    ) -> Result<(), OutputError> {
        let (e, w) = (secs(elapsed_us), secs(window_us));
        let ok: u64 = ops.iter().map(|(s, _)| s.n).sum();
        let err: u64 = ops.iter().map(|(_, e)| e).sum();
        let path = self.dir.join("summary.csv");
        writeln!(self.summary, "{e}, {w}, {}, {ok}, {err}", ok + err).map_err(io(&path))?;
        self.summary.flush().map_err(io(&path))?;
        for (i, (s, errors)) in ops.iter().enumerate() {
            if let Some(f) = self.lat.get_mut(i) {
                write_lat(f, &e, &w, s, *errors).map_err(io(&self.dir))?;
            }
            if let (Some(f), Some(s)) = (self.service.get_mut(i), service.get(i)) {
                write_lat(f, &e, &w, s, *errors).map_err(io(&self.dir))?;
            }
        }
        let wa = if sys.user_bytes == 0 {
            0.0
        } else {
            sys.write_bytes as f64 / sys.user_bytes as f64
        };
        writeln!(
            self.sys,
            "{e}, {w}, {:.3}, {:.1}, {}, {}, {}, {wa:.3}",
            sys.cpu_secs, sys.cpu_pct, sys.write_bytes, sys.wchar, sys.user_bytes
        )
        .and_then(|_| self.sys.flush())
        .map_err(io(&self.dir))
    }
}

fn write_lat(
    f: &mut BufWriter<File>,
    e: &str,
    w: &str,
    s: &LatencySummary,
    errors: u64,
) -> std::io::Result<()> {
    writeln!(
        f,
        "{e}, {w}, {}, {}, {:.1}, {}, {}, {}, {}, {}, {errors}",
        s.n, s.min, s.mean, s.median, s.p95, s.p99, s.p999, s.max
    )?;
    f.flush()
}

/// Writes `errors.csv` from run totals keyed by (label, reason).
pub fn write_errors(
    dir: &Path,
    totals: &std::collections::BTreeMap<(String, String), u64>,
    ops: &[(String, &'static str)],
) -> Result<(), OutputError> {
    let path = dir.join("errors.csv");
    let mut w = BufWriter::new(File::create(&path).map_err(io(&path))?);
    writeln!(w, "\"error\",\"count\"").map_err(io(&path))?;
    for ((label, reason), n) in totals {
        let op = ops.iter().find(|(l, _)| l == label).map_or("?", |(_, o)| o);
        let reason = reason.replace('"', "'");
        writeln!(w, "\"{{{{{label},{op}}},{reason}}}\",\"{n}\"").map_err(io(&path))?;
    }
    w.flush().map_err(io(&path))
}

/// A row of `summary.csv`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SummaryRow {
    /// Seconds since start.
    pub elapsed: f64,
    /// Seconds since the previous row.
    pub window: f64,
    /// Successful ops.
    pub successful: u64,
    /// Failed ops.
    pub failed: u64,
}

/// A row of `<op>_latencies.csv` (µs).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LatRow {
    /// Seconds since start.
    pub elapsed: f64,
    /// Successful ops in the row.
    pub n: u64,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// 95th.
    pub p95: f64,
    /// 99th.
    pub p99: f64,
    /// 99.9th.
    pub p999: f64,
    /// Max.
    pub max: f64,
    /// Errors.
    pub errors: u64,
}

/// The CSV data of one results directory.
#[derive(Debug, Clone, Default)]
pub struct RunData {
    /// The directory.
    pub dir: PathBuf,
    /// `summary.csv` rows.
    pub summary: Vec<SummaryRow>,
    /// `(label, rows)` per `<label>_latencies.csv`, sorted by label.
    pub ops: Vec<(String, Vec<LatRow>)>,
    /// `sysstats.csv` rows `(elapsed, window, cpu_pct, write_bytes, wchar, user_bytes)`, if present.
    pub sys: Vec<[f64; 6]>,
    /// `waits.csv` (the store's wait counters per interval), if present.
    pub waits: Option<WaitsData>,
    /// `activity.csv` (PSI and the store's background work per interval),
    /// if present.
    pub activity: Option<Vec<ActivityRow>>,
    /// What [`RunData::load_tolerant`] could not read: `file:line: why`
    /// per line left out, or a whole file; empty after [`RunData::load`].
    pub problems: Vec<String>,
}

/// The rows of numbers of a CSV file (header skipped) that have at least
/// `min_cells` cells. A line that is not such a row is an error, or, with
/// `problems`, noted there (`file:line: why`) and left out.
fn read_rows(
    path: &Path,
    min_cells: usize,
    mut problems: Option<&mut Vec<String>>,
) -> Result<Vec<Vec<f64>>, OutputError> {
    let f = File::open(path).map_err(io(path))?;
    let mut out = Vec::new();
    for (i, line) in BufReader::new(f).lines().enumerate() {
        let line = match line {
            Ok(l) => l,
            Err(e) => match problems.as_deref_mut() {
                // Not text (or unreadable from here on): keep what was read.
                Some(p) => {
                    p.push(format!("{}:{}: unreadable: {e}", path.display(), i + 1));
                    break;
                }
                None => return Err(io(path)(e)),
            },
        };
        if i == 0 || line.trim().is_empty() {
            continue;
        }
        let row: Result<Vec<f64>, _> = line.split(',').map(|c| c.trim().parse::<f64>()).collect();
        // (why, strict load fails): short rows were always left out quietly.
        let (why, fatal) = match row {
            Ok(r) if r.len() >= min_cells => {
                out.push(r);
                continue;
            }
            Ok(r) => (format!("{} cells, expected {min_cells}", r.len()), false),
            Err(_) => ("not a row of numbers".to_string(), true),
        };
        let shown: String = line.chars().take(120).collect();
        let msg = format!("{}:{}: {why}: {shown}", path.display(), i + 1);
        match problems.as_deref_mut() {
            Some(p) => p.push(msg),
            None if fatal => return Err(OutputError::Invalid(msg)),
            None => {}
        }
    }
    Ok(out)
}

impl RunData {
    /// Loads `summary.csv`, every `<label>_latencies.csv` and `sysstats.csv` of `dir`.
    /// A line that is not a row of numbers is an error naming the file and line.
    pub fn load(dir: &Path) -> Result<RunData, OutputError> {
        Self::load_with(dir, None)
    }

    /// As [`RunData::load`], but a malformed line (or an unreadable file)
    /// is left out and named in [`RunData::problems`] (`file:line: why`),
    /// so that a report can say what is missing and show the rest. Only a
    /// directory that cannot be listed is an error.
    pub fn load_tolerant(dir: &Path) -> Result<RunData, OutputError> {
        let mut problems = Vec::new();
        let mut run = Self::load_with(dir, Some(&mut problems))?;
        run.problems = problems;
        Ok(run)
    }

    fn load_with(
        dir: &Path,
        mut problems: Option<&mut Vec<String>>,
    ) -> Result<RunData, OutputError> {
        // A whole file that cannot be read: an error, or a problem noted.
        fn rows_of(
            path: &Path,
            min: usize,
            problems: &mut Option<&mut Vec<String>>,
        ) -> Result<Vec<Vec<f64>>, OutputError> {
            match read_rows(path, min, problems.as_deref_mut()) {
                Ok(r) => Ok(r),
                Err(e) => match problems.as_deref_mut() {
                    Some(p) => {
                        p.push(e.to_string());
                        Ok(Vec::new())
                    }
                    None => Err(e),
                },
            }
        }
        let summary = rows_of(&dir.join("summary.csv"), 5, &mut problems)?
            .into_iter()
            .map(|r| SummaryRow {
                elapsed: r[0],
                window: r[1],
                successful: r[3] as u64,
                failed: r[4] as u64,
            })
            .collect();
        let mut ops = Vec::new();
        for entry in std::fs::read_dir(dir).map_err(io(dir))? {
            let entry = entry.map_err(io(dir))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(label) = name.strip_suffix("_latencies.csv") else {
                continue;
            };
            // Normalised labels have no '_': anything else is an extra file.
            if label.contains('_') {
                continue;
            }
            let rows = rows_of(&entry.path(), 11, &mut problems)?
                .into_iter()
                .map(|r| LatRow {
                    elapsed: r[0],
                    n: r[2] as u64,
                    mean: r[4],
                    median: r[5],
                    p95: r[6],
                    p99: r[7],
                    p999: r[8],
                    max: r[9],
                    errors: r[10] as u64,
                })
                .collect();
            ops.push((label.to_string(), rows));
        }
        ops.sort_by(|a, b| a.0.cmp(&b.0));
        let sys_path = dir.join("sysstats.csv");
        let sys = if sys_path.exists() {
            rows_of(&sys_path, 8, &mut problems)?
                .into_iter()
                .map(|r| [r[0], r[1], r[3], r[4], r[5], r[6]])
                .collect()
        } else {
            Vec::new()
        };
        let waits_path = dir.join("waits.csv");
        let waits = if waits_path.exists() {
            match (
                std::fs::read_to_string(&waits_path),
                problems.as_deref_mut(),
            ) {
                (Ok(text), _) => WaitsData::parse(&text),
                (Err(e), Some(p)) => {
                    p.push(io(&waits_path)(e).to_string());
                    None
                }
                (Err(e), None) => return Err(io(&waits_path)(e)),
            }
        } else {
            None
        };
        let activity = match (activity::load(dir), problems) {
            (Ok(a), _) => a,
            (Err(e), Some(p)) => {
                p.push(e.to_string());
                None
            }
            (Err(e), None) => return Err(e),
        };
        Ok(RunData {
            dir: dir.to_path_buf(),
            summary,
            ops,
            sys,
            waits,
            activity,
            problems: Vec::new(),
        })
    }

    /// Run length in seconds (last row's elapsed).
    pub fn elapsed(&self) -> f64 {
        self.summary.last().map_or(0.0, |r| r.elapsed)
    }

    /// Σ successful ÷ Σ window over all rows.
    pub fn avg_tps(&self) -> f64 {
        tps(&self.summary)
    }

    /// Throughput over the rows that start in the last `1/part` of the run
    /// (the last sixth of a 6-hour run is its last hour).
    pub fn tail_tps(&self, part: f64) -> f64 {
        let t = self.elapsed();
        let from = t - t / part;
        let rows: Vec<SummaryRow> = self
            .summary
            .iter()
            .copied()
            .filter(|r| r.elapsed - r.window >= from - 1e-3)
            .collect();
        if rows.is_empty() {
            self.summary.last().map_or(0.0, |r| tps(&[*r]))
        } else {
            tps(&rows)
        }
    }

    /// Throughput per hour `(hour, ops/s)`, for runs of two hours or more.
    pub fn hourly_tps(&self) -> Vec<(usize, f64)> {
        if self.elapsed() < 7200.0 {
            return Vec::new();
        }
        let mut out: Vec<(usize, f64)> = Vec::new();
        let hours = (self.elapsed() / 3600.0).ceil() as usize;
        for h in 0..hours {
            let rows: Vec<SummaryRow> = self
                .summary
                .iter()
                .copied()
                .filter(|r| ((r.elapsed - r.window / 2.0) / 3600.0) as usize == h)
                .collect();
            if !rows.is_empty() {
                out.push((h + 1, tps(&rows)));
            }
        }
        out
    }

    /// mean(max) of op `label` in ms: the mean over rows with n > 0 of each row's max.
    pub fn mean_max_ms(&self, label: &str) -> Option<f64> {
        let rows = &self.ops.iter().find(|(l, _)| l == label)?.1;
        let maxes: Vec<f64> = rows.iter().filter(|r| r.n > 0).map(|r| r.max).collect();
        if maxes.is_empty() {
            None
        } else {
            Some(maxes.iter().sum::<f64>() / maxes.len() as f64 / 1000.0)
        }
    }
}

fn tps(rows: &[SummaryRow]) -> f64 {
    let ok: u64 = rows.iter().map(|r| r.successful).sum();
    let w: f64 = rows.iter().map(|r| r.window).sum();
    if w > 0.0 {
        ok as f64 / w
    } else {
        0.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_format_like_erlang() {
        assert_eq!(secs(10_001_016), "10.001016");
        assert_eq!(secs(10_000_000), "10.0");
        assert_eq!(timestamp_name().len(), 15);
    }

    #[test]
    fn writes_and_reads_back() {
        let tmp = tempfile::tempdir().expect("tmp");
        let dir = prepare_results_dir(tmp.path(), Some("r1")).expect("dir");
        assert!(tmp.path().join("current").exists());
        assert!(prepare_results_dir(tmp.path(), Some("current")).is_err());
        let labels = vec!["get".to_string(), "put".to_string()];
        let mut w = CsvWriters::create(&dir, &labels, false).expect("create");
        let s = LatencySummary {
            n: 10,
            min: 1,
            mean: 5.0,
            median: 5,
            p95: 9,
            p99: 10,
            p999: 10,
            max: 2000,
        };
        for k in 1..=6u64 {
            w.row(
                k * 1_000_000,
                1_000_000,
                &[(s, 0), (s, 1)],
                &[],
                &SysRow::default(),
            )
            .expect("row");
        }
        drop(w);
        let d = RunData::load(&dir).expect("load");
        assert_eq!(d.summary.len(), 6);
        assert_eq!(d.ops.len(), 2);
        assert!((d.avg_tps() - 20.0).abs() < 1e-9);
        assert!((d.tail_tps(6.0) - 20.0).abs() < 1e-9);
        assert_eq!(d.mean_max_ms("get"), Some(2.0));
        let text = std::fs::read_to_string(dir.join("get_latencies.csv")).expect("read");
        assert_eq!(text.lines().next(), Some(LATENCY_HEADER));
        assert_eq!(
            text.lines().nth(1),
            Some("1.0, 1.0, 10, 1, 5.0, 5, 9, 10, 10, 2000, 0")
        );
    }
}
