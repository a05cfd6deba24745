//! `compare`: several results directories side by side, as the leveled
//! volume-test reports tabulate them: Avg TPS, TPS delta overall and in
//! the last sixth of the run (the seeds' "last hour" of a six-hour test)
//! against the first (baseline) run, and mean(max) per operation; plus
//! `compare.png` with throughput overlaid against elapsed time and against
//! accumulated operations, and `compare.html` (the same table, the charts
//! interactive, see [`crate::htmlreport`]). Works on any directory holding
//! `summary.csv` and `*_latencies.csv` (basho_bench's too). A malformed
//! CSV line is left out and named (`file:line`) in `compare.md` and
//! `compare.html`; the rest is compared.

use crate::chart;
use crate::output::{OutputError, RunData};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// A compare error.
#[derive(Debug, thiserror::Error)]
pub enum CompareError {
    /// Reading or writing files.
    #[error(transparent)]
    Output(#[from] OutputError),
    /// Drawing.
    #[error(transparent)]
    Chart(#[from] chart::ChartError),
}

fn delta(v: f64, base: f64) -> String {
    if base <= 0.0 {
        return "-".into();
    }
    let d = (v / base - 1.0) * 100.0;
    format!("{}{:.2}%", if d >= 0.0 { "+ " } else { "- " }, d.abs())
}

/// The name of a run: its directory name (following `current`).
pub fn run_name(dir: &Path) -> String {
    let d = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    d.file_name().map_or_else(
        || d.display().to_string(),
        |n| n.to_string_lossy().into_owned(),
    )
}

/// Renders the comparison table (markdown).
pub fn table(runs: &[(String, RunData)]) -> String {
    let mut ops: Vec<String> = Vec::new();
    for (_, r) in runs {
        for (l, _) in &r.ops {
            if !ops.contains(l) {
                ops.push(l.clone());
            }
        }
    }
    // GET and PUT first, as the seeds.
    ops.sort_by_key(|l| match l.as_str() {
        "get" => 0,
        "put" => 1,
        "update" => 2,
        _ => 3,
    });
    let mut s = String::new();
    let _ = write!(
        s,
        "| run | duration (s) | Avg TPS | TPS Delta (Overall) | TPS Delta (Last Sixth) |"
    );
    for o in &ops {
        let _ = write!(s, " {} mean(max) ms |", o.to_uppercase());
    }
    let _ = write!(s, "\n|:---|---:|---:|---:|---:|");
    for _ in &ops {
        let _ = write!(s, "---:|");
    }
    s.push('\n');
    let base = runs.first().map(|(_, r)| (r.avg_tps(), r.tail_tps(6.0)));
    for (i, (name, r)) in runs.iter().enumerate() {
        let (d_all, d_last) = match (i, base) {
            (0, _) | (_, None) => ("baseline".to_string(), "baseline".to_string()),
            (_, Some((b, bl))) => (delta(r.avg_tps(), b), delta(r.tail_tps(6.0), bl)),
        };
        let _ = write!(
            s,
            "| {name} | {:.0} | {:.2} | {d_all} | {d_last} |",
            r.elapsed(),
            r.avg_tps()
        );
        for o in &ops {
            let v = r
                .mean_max_ms(o)
                .map_or_else(|| "-".into(), |v| format!("{v:.2}"));
            let _ = write!(s, " {v} |");
        }
        s.push('\n');
    }
    s
}

/// The files `compare` wrote.
#[derive(Debug, Clone)]
pub struct Written {
    /// `compare.md`.
    pub md: PathBuf,
    /// `compare.png`.
    pub png: PathBuf,
    /// `compare.html`.
    pub html: PathBuf,
}

/// Compares `dirs` (the first is the baseline); writes `compare.md`,
/// `compare.png` and `compare.html` into `out`.
pub fn compare(dirs: &[PathBuf], out: &Path) -> Result<Written, CompareError> {
    let mut runs = Vec::new();
    for d in dirs {
        runs.push((run_name(d), RunData::load_tolerant(d)?));
    }
    std::fs::create_dir_all(out).map_err(|source| OutputError::Io {
        path: out.to_path_buf(),
        source,
    })?;
    let md = out.join("compare.md");
    let png = out.join("compare.png");
    let html = out.join("compare.html");
    let mut text = String::from("# Bench comparison\n\nThe first run is the baseline. mean(max): the mean of each report interval's maximum latency.\n\n");
    let problems: Vec<String> = runs
        .iter()
        .flat_map(|(n, r)| r.problems.iter().map(move |p| format!("{n}: {p}")))
        .collect();
    if !problems.is_empty() {
        text.push_str("Problems reading the results (left out):\n\n");
        for p in &problems {
            let _ = writeln!(text, "- {p}");
        }
        text.push('\n');
    }
    text.push_str(&table(&runs));
    text.push_str("\nRuns:\n\n");
    for (n, r) in &runs {
        let _ = writeln!(text, "- {n}: {}", r.dir.display());
    }
    text.push_str("\n![throughput](compare.png)\n");
    std::fs::write(&md, text).map_err(|source| OutputError::Io {
        path: md.clone(),
        source,
    })?;
    chart::compare_png(&runs, &png)?;
    let page = crate::htmlreport::compare_page(&runs, &table(&runs), out);
    std::fs::write(&html, page).map_err(|source| OutputError::Io {
        path: html.clone(),
        source,
    })?;
    Ok(Written { md, png, html })
}
