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
//!
//! When both `put_unique` and `put_unique_checkrepl` ran (NHS driver), a
//! "Replication delay" section gives seed 003's headline figure:
//! `put_unique_checkrepl` mean − `put_unique` mean, in ms and in % of the
//! `put_unique` mean, and the same for the medians (see [`ReplDelay`]).

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
    /// File labels of the `put_unique` and `put_unique_checkrepl` ops, when
    /// both ran; `None`: look for the default labels (`put-unique`,
    /// `put-unique-checkrepl`), e.g. in a basho_bench results directory.
    pub repl_pair: Option<(String, String)>,
}

/// `put_unique_checkrepl` (PUT to the active cluster, then GET polled on
/// the passive cluster until found) against `put_unique` (the PUT alone):
/// the difference is the replication delay. Latencies in µs, over the
/// successful ops only.
#[derive(Debug, Clone, PartialEq)]
pub struct ReplDelay {
    /// File label of the `put_unique` op.
    pub put_label: String,
    /// File label of the `put_unique_checkrepl` op.
    pub check_label: String,
    /// Successful `put_unique` ops.
    pub put_n: u64,
    /// Successful `put_unique_checkrepl` ops.
    pub check_n: u64,
    /// `put_unique` mean.
    pub put_mean: f64,
    /// `put_unique_checkrepl` mean.
    pub check_mean: f64,
    /// `put_unique` median; `None` when only the CSV rows are known (they
    /// hold per-interval medians, which do not give the run's median).
    pub put_median: Option<f64>,
    /// `put_unique_checkrepl` median; see `put_median`.
    pub check_median: Option<f64>,
    /// `put_unique_checkrepl` ops that ended in `replication_timeout`
    /// (from `errors.csv`; not in the latencies).
    pub timeouts: u64,
}

fn delay_line(what: &str, put: f64, check: f64) -> String {
    let d = check - put;
    let pct = if put > 0.0 {
        format!("{:+.1} %", d / put * 100.0)
    } else {
        "- %".into()
    };
    format!(
        "replication delay: put_unique_checkrepl {what} − put_unique {what} = {} ms ({pct})",
        ms(d)
    )
}

impl ReplDelay {
    /// `replication delay: put_unique_checkrepl mean − put_unique mean = X ms (+Y %)`.
    pub fn mean_line(&self) -> String {
        delay_line("mean", self.put_mean, self.check_mean)
    }

    /// The same for the medians, if known.
    pub fn median_line(&self) -> Option<String> {
        Some(delay_line("median", self.put_median?, self.check_median?))
    }

    /// The mean line, the median line (or why it is missing) and the
    /// timeouts, one per line.
    pub fn lines(&self) -> Vec<String> {
        let mut v = vec![self.mean_line()];
        v.push(self.median_line().unwrap_or_else(|| {
            "replication delay, medians: not known from the CSV rows alone".into()
        }));
        if self.timeouts > 0 {
            v.push(format!(
                "{} put_unique_checkrepl ended in replication_timeout and are not in these figures",
                self.timeouts
            ));
        }
        v
    }
}

/// Counts the `errors.csv` rows of `op` whose reason starts with `reason`.
fn errors_of(dir: &Path, op: &str, reason: &str) -> u64 {
    let Ok(text) = std::fs::read_to_string(dir.join("errors.csv")) else {
        return 0;
    };
    let needle = format!(",{op}}},{reason}");
    text.lines()
        .filter(|l| l.contains(&needle))
        .filter_map(|l| {
            l.rsplit(',')
                .next()?
                .trim()
                .trim_matches('"')
                .parse::<u64>()
                .ok()
        })
        .sum()
}

/// The replication delay of a run, when both `put_unique` and
/// `put_unique_checkrepl` have successful ops.
pub fn repl_delay(run: &RunData, extra: &ReportExtra) -> Option<ReplDelay> {
    let (put_label, check_label) = extra
        .repl_pair
        .clone()
        .unwrap_or_else(|| ("put-unique".into(), "put-unique-checkrepl".into()));
    // (n, mean, median) of a label: the whole-run histogram when the run
    // was ours, else the n-weighted mean of the CSV rows.
    let figures = |label: &str| -> Option<(u64, f64, Option<f64>)> {
        if let Some((_, t, _)) = extra.totals.iter().find(|(l, _, _)| l == label) {
            return Some((t.n, t.mean, Some(t.median as f64)));
        }
        let (_, rows) = run.ops.iter().find(|(l, _)| l == label)?;
        let n: u64 = rows.iter().map(|r| r.n).sum();
        let mean = if n > 0 {
            rows.iter().map(|r| r.mean * r.n as f64).sum::<f64>() / n as f64
        } else {
            0.0
        };
        Some((n, mean, None))
    };
    let (put_n, put_mean, put_median) = figures(&put_label)?;
    let (check_n, check_mean, check_median) = figures(&check_label)?;
    if put_n == 0 || check_n == 0 {
        return None;
    }
    Some(ReplDelay {
        put_label,
        check_label,
        put_n,
        check_n,
        put_mean,
        check_mean,
        put_median,
        check_median,
        timeouts: errors_of(
            &run.dir,
            "put_unique_checkrepl",
            crate::netdriver::REPLICATION_TIMEOUT,
        ),
    })
}

fn render_repl_delay(s: &mut String, d: &ReplDelay) {
    let _ = writeln!(
        s,
        "
## Replication delay
"
    );
    let _ = writeln!(
        s,
        "`put_unique_checkrepl` = PUT to the active cluster + replication + GET on the \
         passive cluster (polled until found); `put_unique` = the PUT alone. Successful \
         ops only.\n"
    );
    for l in d.lines() {
        let _ = writeln!(s, "- {l}");
    }
    let med = |m: Option<f64>| m.map_or_else(|| "-".into(), ms);
    let _ = writeln!(
        s,
        "\n| op | n | mean (ms) | median (ms) |\n|---|---:|---:|---:|"
    );
    let _ = writeln!(
        s,
        "| {} | {} | {} | {} |",
        d.put_label,
        d.put_n,
        ms(d.put_mean),
        med(d.put_median)
    );
    let _ = writeln!(
        s,
        "| {} | {} | {} | {} |",
        d.check_label,
        d.check_n,
        ms(d.check_mean),
        med(d.check_median)
    );
}

/// One latency summary as table cells: mean, median, 95th, 99th, 99.9th,
/// max (ms).
fn lat_cells(t: &LatencySummary) -> String {
    format!(
        "{} | {} | {} | {} | {} | {}",
        ms(t.mean),
        ms(t.median as f64),
        ms(t.p95 as f64),
        ms(t.p99 as f64),
        ms(t.p999 as f64),
        ms(t.max as f64)
    )
}

fn ms(us: f64) -> String {
    format!("{:.2}", us / 1000.0)
}

/// Renders the report text.
pub fn render(run: &RunData, extra: &ReportExtra) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# Bench report: {}\n", run_title(run));
    for h in &extra.header {
        let _ = writeln!(s, "- {h}");
    }
    if !run.problems.is_empty() {
        let _ = writeln!(
            s,
            "\n## Problems reading the results\n\nLeft out of this report:\n"
        );
        for p in &run.problems {
            let _ = writeln!(s, "- {p}");
        }
    }
    s.push_str(&render_sections(run, extra));
    let _ = writeln!(s, "\n![summary](summary.png)");
    s
}

/// The run's name in titles: its directory's name.
pub fn run_title(run: &RunData) -> String {
    run.dir
        .file_name()
        .map_or_else(String::new, |n| n.to_string_lossy().into_owned())
}

/// The report's sections (throughput, latency, replication delay,
/// resources, waits, where the max latencies came from), without the
/// title, header and problems: shared by `report.md` and `report.html`.
pub fn render_sections(run: &RunData, extra: &ReportExtra) -> String {
    let mut s = String::new();
    render_throughput(&mut s, run);
    render_latency(&mut s, run, extra);
    render_service(&mut s, extra);
    if let Some(d) = repl_delay(run, extra) {
        render_repl_delay(&mut s, &d);
    }
    render_resources(&mut s, run);
    if let Some(w) = &run.waits {
        render_waits(&mut s, run, w);
    }
    s
}

/// "Throughput": ops, Avg TPS, the last sixth's TPS, TPS per hour.
fn render_throughput(s: &mut String, run: &RunData) {
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
}

/// "Latency": per operation, from the run's histograms (or, for a report
/// rebuilt from CSV files, bounded from the interval rows), with mean(max).
fn render_latency(s: &mut String, run: &RunData, extra: &ReportExtra) {
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
                "| {label} | {} | {e} | {} | **{mm}** |",
                t.n,
                lat_cells(t)
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
}

/// Open loop only: service times beside the latencies from intended starts.
fn render_service(s: &mut String, extra: &ReportExtra) {
    if extra.service.is_empty() {
        return;
    }
    let _ = writeln!(s, "\nOpen loop: the table above is latency from each request's intended start; service time alone:\n");
    let _ = writeln!(
        s,
        "| op | mean | median | 95th | 99th | 99.9th | max |\n|---|---:|---:|---:|---:|---:|---:|"
    );
    for (l, t) in &extra.service {
        let _ = writeln!(s, "| {l} | {} |", lat_cells(t));
    }
}

/// "Resources": CPU, bytes written, write amplification, overall and per
/// interval.
fn render_resources(s: &mut String, run: &RunData) {
    if run.sys.is_empty() {
        return;
    }
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

/// Intervals shown in "where the max latencies came from".
const WORST_INTERVALS: usize = 5;

/// Timers that measure a whole call inside the store rather than a wait
/// (`basalt_engine::stats`: `op_get`, `op_write`).
const WHOLE_CALL_PREFIX: &str = "op_";

/// "in the store: get longest 21.0 ms, write longest 3.2 ms" for interval
/// row `r`, from the whole-call timers' interval maxima; `None` when the
/// store keeps none. An op's max far above its call's longest was spent
/// outside the store (waiting for a CPU, in the driver).
fn whole_calls(w: &crate::waits::WaitsData, r: usize) -> Option<String> {
    let calls: Vec<String> = w
        .timers
        .iter()
        .enumerate()
        .filter_map(|(i, t)| {
            let name = t.strip_prefix(WHOLE_CALL_PREFIX)?;
            let longest = w.interval_max(r, i)?;
            Some(format!("{name} longest {longest:.1} ms"))
        })
        .collect();
    (!calls.is_empty()).then(|| format!("in the store: {}", calls.join(", ")))
}

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
         interval (×), slow waits, and the longest single wait in that interval \
         (\"longest\"; stores without per-interval maxima: \"new max\" when the \
         longest wait since the store opened was set in that interval). \
         \"In the store\" is the longest whole call of each kind in the store \
         in that interval: an op's max far above it was spent outside the \
         store (waiting for a CPU, in the driver).\n",
        worst.len()
    );
    let activity = run.activity.as_deref().unwrap_or(&[]);
    if activity.is_empty() {
        let _ = writeln!(
            s,
            "| interval end (s) | slowest op | its max (ms) | waits in the interval |\n|---:|---|---:|---|"
        );
    } else {
        let _ = writeln!(
            s,
            "\"Machine and background\" is the kernel's pressure stall information \
             over the interval (`activity.csv`; system-wide: the share of time some / \
             every task waited for a CPU, memory or I/O) and the store's compactions \
             and merges in it. A max far above every wait recorded, with high CPU \
             pressure, was queueing for a CPU.\n"
        );
        let _ = writeln!(
            s,
            "| interval end (s) | slowest op | its max (ms) | waits in the interval | machine and background |\n|---:|---|---:|---|---|"
        );
    }
    for (elapsed, op, max) in &worst {
        let Some(r) = w.row_at(*elapsed) else {
            let pad = if activity.is_empty() { "" } else { " |" };
            let _ = writeln!(
                s,
                "| {elapsed:.1} | {op} | {max:.1} | (no wait sample) |{pad}"
            );
            continue;
        };
        let prev_max = |i: usize| {
            r.checked_sub(1)
                .and_then(|p| w.cell(p, i))
                .map_or(0.0, |c| c.3)
        };
        let mut parts: Vec<(f64, String)> = Vec::new();
        for (i, t) in w.timers.iter().enumerate() {
            if t.starts_with(WHOLE_CALL_PREFIX) {
                continue;
            }
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
            if let Some(longest) = w.interval_max(r, i) {
                text.push_str(&format!(", longest {longest:.1} ms"));
            } else if m > prev_max(i) && r > 0 {
                text.push_str(&format!(", new max {m:.1} ms"));
            }
            // Rank by the longest single wait when known (the one nearest the
            // op's max is the likeliest cause), else by how far above its
            // usual level the wait went, then by time.
            let rank = w
                .interval_max(r, i)
                .unwrap_or_else(|| factor.max(1.0) * ms.max(1e-3).ln().max(1.0));
            parts.push((rank, text));
        }
        parts.sort_by(|a, b| b.0.total_cmp(&a.0));
        let shown: Vec<String> = parts.into_iter().take(3).map(|p| p.1).collect();
        let waits = if shown.is_empty() {
            "no store waits recorded (CPU, page faults or the bench)".to_string()
        } else {
            shown.join("; ")
        };
        let text = match whole_calls(w, r) {
            Some(inside) => format!("{inside}; {waits}"),
            None => waits,
        };
        if activity.is_empty() {
            let _ = writeln!(s, "| {elapsed:.1} | {op} | {max:.1} | {text} |");
        } else {
            let bg = crate::activity::at(activity, *elapsed)
                .map_or_else(|| "(no sample)".to_string(), crate::activity::describe);
            let _ = writeln!(s, "| {elapsed:.1} | {op} | {max:.1} | {text} | {bg} |");
        }
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

/// Loads a results directory and writes its `report.md` (for basho_bench
/// runs too). A malformed CSV line is left out and named in the report
/// (see [`RunData::load_tolerant`]). Returns the path and the run read.
pub fn write_for_dir(dir: &Path) -> Result<(std::path::PathBuf, RunData), OutputError> {
    let run = RunData::load_tolerant(dir)?;
    let md = write(&run, &ReportExtra::default())?;
    Ok((md, run))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::LatRow;

    fn row(n: u64, mean: f64, median: f64) -> LatRow {
        LatRow {
            elapsed: 10.0,
            n,
            mean,
            median,
            p95: median,
            p99: median,
            p999: median,
            max: median,
            errors: 0,
        }
    }

    fn summary(n: u64, mean: f64, median: u64) -> LatencySummary {
        LatencySummary {
            n,
            mean,
            median,
            ..LatencySummary::default()
        }
    }

    #[test]
    fn replication_delay_from_whole_run_histograms() {
        let dir = tempfile::tempdir().expect("tmp");
        let run = RunData {
            dir: dir.path().to_path_buf(),
            summary: Vec::new(),
            ops: vec![
                ("pu".into(), vec![row(100, 1.0, 1.0)]),
                ("pucr".into(), vec![row(2, 1.0, 1.0)]),
            ],
            sys: Vec::new(),
            waits: None,
            activity: None,
            problems: Vec::new(),
        };
        // Seed 003's leveldb figure: +3.70 ms over a 74 ms PUT is +5.0 %.
        let mut extra = ReportExtra {
            totals: vec![
                ("pu".into(), summary(148, 74_000.0, 70_000), 0),
                ("pucr".into(), summary(2, 77_700.0, 72_000), 1),
            ],
            repl_pair: Some(("pu".into(), "pucr".into())),
            ..ReportExtra::default()
        };
        std::fs::write(
            dir.path().join("errors.csv"),
            "\"error\",\"count\"\n\
             \"{{pucr,put_unique_checkrepl},replication_timeout}\",\"3\"\n\
             \"{{pucr,put_unique_checkrepl},replication_timeout (last get: econnrefused)}\",\"2\"\n\
             \"{{pucr,put_unique_checkrepl},disconnected}\",\"7\"\n",
        )
        .expect("write");
        let d = repl_delay(&run, &extra).expect("both ran");
        assert_eq!(
            d.mean_line(),
            "replication delay: put_unique_checkrepl mean − put_unique mean = 3.70 ms (+5.0 %)"
        );
        assert_eq!(
            d.median_line().as_deref(),
            Some(
                "replication delay: put_unique_checkrepl median − put_unique median = 2.00 ms (+2.9 %)"
            )
        );
        assert_eq!(d.timeouts, 5);
        let text = render(&run, &extra);
        assert!(text.contains("## Replication delay"), "{text}");
        assert!(
            text.contains("- 5 put_unique_checkrepl ended in replication_timeout"),
            "{text}"
        );
        // No section unless both ops have successful ops.
        extra.totals[1].1.n = 0;
        assert!(repl_delay(&run, &extra).is_none());
        assert!(!render(&run, &extra).contains("Replication delay"));
    }

    #[test]
    fn replication_delay_from_csv_rows_has_no_median() {
        // A basho_bench results directory: default labels, CSV rows only.
        let dir = tempfile::tempdir().expect("tmp");
        let run = RunData {
            dir: dir.path().to_path_buf(),
            summary: Vec::new(),
            ops: vec![
                (
                    "put-unique".into(),
                    vec![row(100, 20_000.0, 19_000.0), row(300, 40_000.0, 39_000.0)],
                ),
                ("put-unique-checkrepl".into(), vec![row(4, 40_000.0, 1.0)]),
            ],
            sys: Vec::new(),
            waits: None,
            activity: None,
            problems: Vec::new(),
        };
        let d = repl_delay(&run, &ReportExtra::default()).expect("both ran");
        // n-weighted mean of the rows: 35 ms.
        assert_eq!(
            d.mean_line(),
            "replication delay: put_unique_checkrepl mean − put_unique mean = 5.00 ms (+14.3 %)"
        );
        assert_eq!(d.median_line(), None);
        assert_eq!(d.timeouts, 0);
        assert!(d.lines()[1].contains("medians: not known from the CSV rows alone"));
    }

    #[test]
    fn slowest_intervals_show_the_whole_call_beside_the_waits() {
        let lat = |elapsed: f64, max: f64| LatRow {
            elapsed,
            max,
            ..row(1000, 500.0, 400.0)
        };
        let waits = crate::waits::WaitsData::parse(
            "elapsed, window, journal_value_read_n, journal_value_read_ms, journal_value_read_slow, \
             journal_value_read_max_ms, journal_value_read_imax_ms, op_get_n, op_get_ms, op_get_slow, \
             op_get_max_ms, op_get_imax_ms\n\
             10, 10, 900, 90, 1, 2.0, 2.0, 1000, 100, 1, 3.0, 3.0\n\
             20, 10, 900, 95, 3, 21.0, 21.0, 1000, 300, 4, 171.3, 171.3\n",
        )
        .expect("parses");
        let run = RunData {
            dir: std::path::PathBuf::from("."),
            summary: Vec::new(),
            ops: vec![("get".into(), vec![lat(10.0, 3_100.0), lat(20.0, 171_800.0)])],
            sys: Vec::new(),
            waits: None,
            activity: None,
            problems: Vec::new(),
        };
        let mut s = String::new();
        render_waits(&mut s, &run, &waits);
        let line = s
            .lines()
            .find(|l| l.starts_with("| 20.0 | get | 171.8 |"))
            .expect("the slowest interval is listed");
        assert!(
            line.contains("in the store: get longest 171.3 ms; journal_value_read"),
            "{line}"
        );
        assert!(
            !line.contains("op_get"),
            "the whole call is not a wait: {line}"
        );
        let quiet = s
            .lines()
            .find(|l| l.starts_with("| 10.0 | get |"))
            .expect("listed");
        assert!(quiet.contains("get longest 3.0 ms"), "{quiet}");
    }
}
