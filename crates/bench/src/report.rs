//! `report.md`: the figures the seeds quote, for one run.
//!
//! Avg TPS (Σ successful ÷ Σ window), TPS in the last sixth of the run (the
//! last hour of a six-hour run), hourly TPS for runs of two hours or more,
//! per op: count, errors, mean / median / 95th / 99th / 99.9th / max over the
//! whole run (from the merged HdrHistograms when the run was ours, else
//! from the CSV rows) and mean(max) — the mean of each report interval's
//! max, as the leveled volume tests quote it; then per-interval process CPU,
//! bytes written and write amplification (from `sysstats.csv`); and, when
//! the store keeps wait timers (`waits.csv`), the waits over the run and
//! "where the max latencies came from": for the intervals with the highest
//! max latency, which waits jumped in them.

use crate::output::{OutputError, RunData};
use crate::stats::LatencySummary;
use std::fmt::Write as _;
use std::path::Path;

/// What the report needs beyond the CSVs.
#[derive(Debug, Clone, Default)]
pub struct ReportExtra {
    /// Lines describing the run (config summary).
    pub header: Vec<String>,
    /// Whole-run latency per op file label, if known.
    pub totals: Vec<(String, LatencySummary, u64)>,
    /// Open-loop: whole-run service time per op file label.
    pub service: Vec<(String, LatencySummary)>,
}

fn ms(us: f64) -> String {
    format!("{:.2}", us / 1000.0)
}

/// Renders the report text.
pub fn render(run: &RunData, extra: &ReportExtra) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "# Bench report: {}\n",
        run.dir
            .file_name()
            .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
    );
    for h in &extra.header {
        let _ = writeln!(s, "- {h}");
    }
    let ok: u64 = run.summary.iter().map(|r| r.successful).sum();
    let failed: u64 = run.summary.iter().map(|r| r.failed).sum();
    let _ = writeln!(s, "\n## Throughput\n");
    let _ = writeln!(s, "| figure | value |\n|---|---:|");
    let _ = writeln!(s, "| elapsed (s) | {:.1} |", run.elapsed());
    let _ = writeln!(s, "| successful ops | {ok} |");
    let _ = writeln!(s, "| failed ops | {failed} |");
    let _ = writeln!(s, "| **Avg TPS** | **{:.2}** |", run.avg_tps());
    let _ = writeln!(
        s,
        "| TPS, last sixth of the run | {:.2} |",
        run.tail_tps(6.0)
    );
    let hourly = run.hourly_tps();
    if !hourly.is_empty() {
        let _ = writeln!(s, "\n| hour | TPS |\n|---:|---:|");
        for (h, t) in hourly {
            let _ = writeln!(s, "| {h} | {t:.2} |");
        }
    }
    let _ = writeln!(s, "\n## Latency (ms)\n");
    let _ = writeln!(
        s,
        "| op | n | errors | mean | median | 95th | 99th | 99.9th | max | mean(max) |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for (label, rows) in &run.ops {
        let mm = run
            .mean_max_ms(label)
            .map_or_else(|| "-".into(), |v| format!("{v:.2}"));
        if let Some((_, t, e)) = extra.totals.iter().find(|(l, _, _)| l == label) {
            let _ = writeln!(
                s,
                "| {label} | {} | {e} | {} | {} | {} | {} | {} | {} | **{mm}** |",
                t.n,
                ms(t.mean),
                ms(t.median as f64),
                ms(t.p95 as f64),
                ms(t.p99 as f64),
                ms(t.p999 as f64),
                ms(t.max as f64)
            );
        } else {
            // From the CSV rows: n-weighted mean; percentiles as row maxima.
            let n: u64 = rows.iter().map(|r| r.n).sum();
            let e: u64 = rows.iter().map(|r| r.errors).sum();
            let mean = if n > 0 {
                rows.iter().map(|r| r.mean * r.n as f64).sum::<f64>() / n as f64
            } else {
                0.0
            };
            let mx = |f: fn(&crate::output::LatRow) -> f64| rows.iter().map(f).fold(0.0, f64::max);
            let _ = writeln!(
                s,
                "| {label} | {n} | {e} | {} | ≤{} | ≤{} | ≤{} | ≤{} | {} | **{mm}** |",
                ms(mean),
                ms(mx(|r| r.median)),
                ms(mx(|r| r.p95)),
                ms(mx(|r| r.p99)),
                ms(mx(|r| r.p999)),
                ms(mx(|r| r.max))
            );
        }
    }
    if !extra.service.is_empty() {
        let _ = writeln!(s, "\nOpen loop: the table above is latency from each request's intended start; service time alone:\n");
        let _ = writeln!(s, "| op | mean | median | 95th | 99th | 99.9th | max |\n|---|---:|---:|---:|---:|---:|---:|");
        for (l, t) in &extra.service {
            let _ = writeln!(
                s,
                "| {l} | {} | {} | {} | {} | {} | {} |",
                ms(t.mean),
                ms(t.median as f64),
                ms(t.p95 as f64),
                ms(t.p99 as f64),
                ms(t.p999 as f64),
                ms(t.max as f64)
            );
        }
    }
    if !run.sys.is_empty() {
        let cpu: f64 = run.sys.iter().map(|r| r[2] * r[1] / 100.0).sum();
        let wb: f64 = run.sys.iter().map(|r| r[3]).sum();
        let wc: f64 = run.sys.iter().map(|r| r[4]).sum();
        let ub: f64 = run.sys.iter().map(|r| r[5]).sum();
        let use_wchar = wb == 0.0;
        let written = if use_wchar { wc } else { wb };
        let counter = if use_wchar {
            "wchar (no block-I/O accounting here)"
        } else {
            "write_bytes"
        };
        let _ = writeln!(s, "\n## Resources\n");
        let _ = writeln!(s, "| figure | value |\n|---|---:|");
        let _ = writeln!(s, "| process CPU (s) | {cpu:.1} |");
        let _ = writeln!(
            s,
            "| mean CPU (% of a core) | {:.0} |",
            if run.elapsed() > 0.0 {
                cpu / run.elapsed() * 100.0
            } else {
                0.0
            }
        );
        let _ = writeln!(
            s,
            "| bytes written, {counter} (MB) | {:.1} |",
            written / 1e6
        );
        let _ = writeln!(s, "| bytes through write() (MB) | {:.1} |", wc / 1e6);
        let _ = writeln!(s, "| user bytes put (MB) | {:.1} |", ub / 1e6);
        let wa = if ub > 0.0 {
            format!("{:.2}", written / ub)
        } else {
            "-".into()
        };
        let _ = writeln!(s, "| **write amplification** | **{wa}** |");
        let _ = writeln!(s, "\nPer interval (grouped to at most 60 lines):\n");
        let _ = writeln!(s, "| elapsed (s) | TPS | CPU % | MB written | MB put | write amp |\n|---:|---:|---:|---:|---:|---:|");
        let group = run.sys.len().div_ceil(60).max(1);
        for (k, chunk) in run.sys.chunks(group).enumerate() {
            let end = chunk.last().map_or(0.0, |r| r[0]);
            let win: f64 = chunk.iter().map(|r| r[1]).sum();
            let cpu_pct = if win > 0.0 {
                chunk.iter().map(|r| r[2] * r[1]).sum::<f64>() / win
            } else {
                0.0
            };
            let w: f64 = chunk
                .iter()
                .map(|r| if use_wchar { r[4] } else { r[3] })
                .sum();
            let u: f64 = chunk.iter().map(|r| r[5]).sum();
            let rows = &run.summary
                [(k * group).min(run.summary.len())..((k + 1) * group).min(run.summary.len())];
            let ok: u64 = rows.iter().map(|r| r.successful).sum();
            let tps = if win > 0.0 { ok as f64 / win } else { 0.0 };
            let wa = if u > 0.0 {
                format!("{:.2}", w / u)
            } else {
                "-".into()
            };
            let _ = writeln!(
                s,
                "| {end:.1} | {tps:.0} | {cpu_pct:.0} | {:.1} | {:.1} | {wa} |",
                w / 1e6,
                u / 1e6
            );
        }
    }
    if let Some(w) = &run.waits {
        render_waits(&mut s, run, w);
    }
    let _ = writeln!(s, "\n![summary](summary.png)");
    s
}

/// Intervals shown in "where the max latencies came from".
const WORST_INTERVALS: usize = 5;

/// The "Waits inside the store" and "Where the max latencies came from"
/// sections, from `waits.csv`.
fn render_waits(s: &mut String, run: &RunData, w: &crate::waits::WaitsData) {
    if w.rows.is_empty() {
        return;
    }
    let rows = w.rows.len() as f64;
    let _ = writeln!(s, "\n## Waits inside the store\n");
    let _ = writeln!(
        s,
        "Engine wait timers over the run (`waits.csv` has them per interval). \
         slow = waits of 1 ms or more; max = the longest since the store opened. \
         In `mode max` the bench itself queues nothing.\n"
    );
    let _ = writeln!(
        s,
        "| wait | count | total (s) | mean (µs) | slow (≥ 1 ms) | max (ms) |\n|---|---:|---:|---:|---:|---:|"
    );
    // Per timer: run totals, and the mean total ms per interval.
    let mut mean_ms = Vec::new();
    for (i, t) in w.timers.iter().enumerate() {
        let (mut n, mut ms, mut slow, mut max) = (0.0, 0.0, 0.0, 0.0f64);
        for r in 0..w.rows.len() {
            if let Some((cn, cms, cs, cm)) = w.cell(r, i) {
                n += cn;
                ms += cms;
                slow += cs;
                max = max.max(cm);
            }
        }
        mean_ms.push(ms / rows);
        let mean_us = if n > 0.0 { ms * 1000.0 / n } else { 0.0 };
        let _ = writeln!(
            s,
            "| {t} | {n:.0} | {:.2} | {mean_us:.1} | {slow:.0} | {max:.2} |",
            ms / 1000.0
        );
    }
    // The intervals with the highest max latency of any op.
    let mut worst: Vec<(f64, String, f64)> = Vec::new(); // (elapsed, op, max ms)
    for (label, lrows) in &run.ops {
        for r in lrows.iter().filter(|r| r.n > 0) {
            match worst
                .iter_mut()
                .find(|(e, _, _)| (e - r.elapsed).abs() < 1e-3)
            {
                Some(x) if x.2 < r.max / 1000.0 => {
                    x.1.clone_from(label);
                    x.2 = r.max / 1000.0;
                }
                Some(_) => {}
                None => worst.push((r.elapsed, label.clone(), r.max / 1000.0)),
            }
        }
    }
    worst.sort_by(|a, b| b.2.total_cmp(&a.2));
    worst.truncate(WORST_INTERVALS);
    let _ = writeln!(s, "\n## Where the max latencies came from\n");
    let _ = writeln!(
        s,
        "The {} intervals with the highest max latency, and the store's waits that \
         jumped in them: total wait time in the interval against the run's mean per \
         interval (×), slow waits, and \"new max\" when the longest wait so far was set \
         in that interval.\n",
        worst.len()
    );
    let _ = writeln!(
        s,
        "| interval end (s) | slowest op | its max (ms) | waits in the interval |\n|---:|---|---:|---|"
    );
    for (elapsed, op, max) in &worst {
        let Some(r) = w.row_at(*elapsed) else {
            let _ = writeln!(s, "| {elapsed:.1} | {op} | {max:.1} | (no wait sample) |");
            continue;
        };
        let prev_max = |i: usize| {
            r.checked_sub(1)
                .and_then(|p| w.cell(p, i))
                .map_or(0.0, |c| c.3)
        };
        let mut parts: Vec<(f64, String)> = Vec::new();
        for (i, t) in w.timers.iter().enumerate() {
            let Some((n, ms, slow, m)) = w.cell(r, i) else {
                continue;
            };
            if ms <= 0.0 {
                continue;
            }
            let factor = if mean_ms[i] > 0.0 {
                ms / mean_ms[i]
            } else {
                0.0
            };
            let mut text = format!("{t} {ms:.1} ms in {n:.0} ({factor:.1}×)");
            if slow > 0.0 {
                text.push_str(&format!(", {slow:.0} slow"));
            }
            if m > prev_max(i) && r > 0 {
                text.push_str(&format!(", new max {m:.1} ms"));
            }
            // Rank by how far above its usual level the wait went, then by time.
            parts.push((factor.max(1.0) * ms.max(1e-3).ln().max(1.0), text));
        }
        parts.sort_by(|a, b| b.0.total_cmp(&a.0));
        let shown: Vec<String> = parts.into_iter().take(3).map(|p| p.1).collect();
        let text = if shown.is_empty() {
            "no store waits recorded (CPU, page faults or the bench)".to_string()
        } else {
            shown.join("; ")
        };
        let _ = writeln!(s, "| {elapsed:.1} | {op} | {max:.1} | {text} |");
    }
}

/// Writes `report.md` into the run directory.
pub fn write(run: &RunData, extra: &ReportExtra) -> Result<std::path::PathBuf, OutputError> {
    let path = run.dir.join("report.md");
    std::fs::write(&path, render(run, extra)).map_err(|source| OutputError::Io {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// Loads a results directory and writes its report (for basho_bench runs too).
pub fn write_for_dir(dir: &Path) -> Result<std::path::PathBuf, OutputError> {
    write(&RunData::load(dir)?, &ReportExtra::default())
}
