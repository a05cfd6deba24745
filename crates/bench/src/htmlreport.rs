//! `report.html` and `compare.html`: the run's report and the comparison
//! of runs as self-contained pages with interactive charts (uPlot; zoom by
//! dragging, double-click to reset, click a legend entry to hide a series).
//!
//! `report.html` holds a throughput chart (ok and error ops/s), a latency
//! chart per operation (mean, median, 95th, 99th, 99.9th and max, ms), a
//! resources chart (CPU % and MB/s written and put), then the tables of
//! `report.md` (throughput, latency, resources, the store's waits and
//! "where the max latencies came from") and the store's counters at the
//! end of the run (`store_stats.csv`). `compare.html` holds the seeds'
//! table of `compare.md`, links to each run's report, and charts of the
//! runs overlaid: throughput against elapsed time and against accumulated
//! operations, and each operation's max latency against elapsed time.
//!
//! Lines that could not be read (see [`RunData::load_tolerant`]) are named
//! at the top of the page, `file:line: why`; the rest is drawn. The page
//! shell, escaping and downsampling are in [`crate::html`].

use crate::html::{self, chart_div, esc, markdown, Chart, Column, Overlay};
use crate::output::{OutputError, RunData};
use crate::report::{self, ReportExtra};
use percent_encoding::{utf8_percent_encode, AsciiSet, CONTROLS};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

/// The red box naming what could not be read, or nothing.
pub fn problems_html(problems: &[String]) -> String {
    if problems.is_empty() {
        return String::new();
    }
    let mut s = String::from(
        "<section class=\"problems\" id=\"problems\">\n<h2>Problems reading the results</h2>\n\
         <p>These lines or files were left out; everything else is shown.</p>\n<ul>\n",
    );
    for p in problems {
        let _ = writeln!(s, "<li><code>{}</code></li>", esc(p));
    }
    s.push_str("</ul>\n</section>\n");
    s
}

/// The throughput chart of a run: ok and error ops/s against elapsed s.
fn throughput_chart(run: &RunData) -> Chart<'static> {
    let rows: Vec<_> = run.summary.iter().filter(|r| r.window > 0.0).collect();
    let mut series = vec![("ok".to_string(), 0)];
    let mut cols: Vec<Column> = vec![rows
        .iter()
        .map(|r| Some(r.successful as f64 / r.window))
        .collect()];
    if rows.iter().any(|r| r.failed > 0) {
        series.push(("errors".to_string(), 0));
        cols.push(
            rows.iter()
                .map(|r| Some(r.failed as f64 / r.window))
                .collect(),
        );
    }
    Chart {
        id: "tput".into(),
        title: "Throughput".into(),
        x: "elapsed (s)",
        y: "ops/s",
        y2: None,
        log: false,
        series,
        xs: rows.iter().map(|r| r.elapsed).collect(),
        cols,
    }
}

/// The latency chart of op `k` (`label`): its six figures in ms; an
/// interval without successful ops is a gap.
fn latency_chart(k: usize, label: &str, rows: &[crate::output::LatRow]) -> Chart<'static> {
    type Pick = fn(&crate::output::LatRow) -> f64;
    let picks: [(&str, Pick); 6] = [
        ("mean", |r| r.mean),
        ("median", |r| r.median),
        ("95th", |r| r.p95),
        ("99th", |r| r.p99),
        ("99.9th", |r| r.p999),
        ("max", |r| r.max),
    ];
    Chart {
        id: format!("lat-{k}"),
        title: format!("Latency: {label}"),
        x: "elapsed (s)",
        y: "ms (log scale)",
        y2: None,
        log: true,
        series: picks.iter().map(|(n, _)| ((*n).to_string(), 0)).collect(),
        xs: rows.iter().map(|r| r.elapsed).collect(),
        cols: picks
            .iter()
            .map(|(_, pick)| {
                rows.iter()
                    .map(|r| (r.n > 0).then(|| pick(r) / 1000.0))
                    .collect()
            })
            .collect(),
    }
}

/// CPU % (left axis) and MB/s written and put (right axis), from
/// `sysstats.csv`; `None` without it.
fn resources_chart(run: &RunData) -> Option<Chart<'static>> {
    let rows: Vec<_> = run.sys.iter().filter(|r| r[1] > 0.0).collect();
    if rows.is_empty() {
        return None;
    }
    // As report.md: write_bytes, or wchar where block I/O is not accounted.
    let use_wchar = rows.iter().all(|r| r[3] == 0.0);
    let (wcol, wname) = if use_wchar {
        (4, "MB/s through write()")
    } else {
        (3, "MB/s written")
    };
    Some(Chart {
        id: "res".into(),
        title: "Resources".into(),
        x: "elapsed (s)",
        y: "CPU % of a core",
        y2: Some("MB/s"),
        log: false,
        series: vec![
            ("CPU %".into(), 0),
            (wname.into(), 1),
            ("MB/s put".into(), 1),
        ],
        xs: rows.iter().map(|r| r[0]).collect(),
        cols: vec![
            rows.iter().map(|r| Some(r[2])).collect(),
            rows.iter().map(|r| Some(r[wcol] / r[1] / 1e6)).collect(),
            rows.iter().map(|r| Some(r[5] / r[1] / 1e6)).collect(),
        ],
    })
}

/// `store_stats.csv` (`counter, value`) as a table, or nothing.
fn store_counters_html(dir: &Path) -> String {
    let Ok(text) = std::fs::read_to_string(dir.join("store_stats.csv")) else {
        return String::new();
    };
    let mut s = String::from(
        "<h2>The store's counters</h2>\n<details><summary>At the end of the run \
         (<code>store_stats.csv</code>)</summary>\n<table>\n<tr><th>counter</th><th>value</th></tr>\n",
    );
    for line in text.lines().skip(1) {
        let Some((k, v)) = line.split_once(',') else {
            continue;
        };
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td style=\"text-align:right\">{}</td></tr>",
            esc(k.trim()),
            esc(v.trim())
        );
    }
    s.push_str("</table>\n</details>\n");
    s
}

/// The whole `report.html` of `run`.
pub fn report_page(run: &RunData, extra: &ReportExtra) -> String {
    let title = format!("Bench report: {}", report::run_title(run));
    let mut body = format!("<h1>{}</h1>\n", esc(&title));
    if !extra.header.is_empty() {
        body.push_str("<ul class=\"header\">\n");
        for h in &extra.header {
            let _ = writeln!(body, "<li>{}</li>", esc(h));
        }
        body.push_str("</ul>\n");
    }
    body.push_str(&problems_html(&run.problems));
    let mut charts: Vec<Value> = Vec::new();
    body.push_str("<h2>Charts</h2>\n<p class=\"muted\">Drag to zoom, double-click to zoom out, click a legend entry to hide its series.</p>\n<div class=\"charts\">\n");
    let mut add = |c: Chart<'_>, body: &mut String| {
        body.push_str(&chart_div(&c.id));
        charts.push(c.json());
    };
    add(throughput_chart(run), &mut body);
    for (k, (label, rows)) in run.ops.iter().enumerate() {
        add(latency_chart(k, label, rows), &mut body);
    }
    if let Some(c) = resources_chart(run) {
        add(c, &mut body);
    }
    body.push_str("</div>\n");
    body.push_str(&markdown(&report::render_sections(run, extra)));
    body.push_str(&store_counters_html(&run.dir));
    body.push_str(
        "<p class=\"muted\">Beside this page: <code>report.md</code> (the same tables), \
         <code>summary.png</code> and the CSV files.</p>\n",
    );
    html::page(&title, &body, charts)
}

/// Writes `report.html` into the run directory.
pub fn write_report(run: &RunData, extra: &ReportExtra) -> Result<PathBuf, OutputError> {
    let path = run.dir.join("report.html");
    std::fs::write(&path, report_page(run, extra)).map_err(|source| OutputError::Io {
        path: path.clone(),
        source,
    })?;
    Ok(path)
}

/// Characters escaped in the path of a relative link.
const HREF: &AsciiSet = &CONTROLS
    .add(b' ')
    .add(b'"')
    .add(b'#')
    .add(b'%')
    .add(b'?')
    .add(b'<')
    .add(b'>')
    .add(b'`')
    .add(b'\'');

/// A link from a page in `from_dir` to `to` (relative when both resolve,
/// else absolute), escaped for an `href`.
pub fn href(from_dir: &Path, to: &Path) -> String {
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (from, to) = (abs(from_dir), abs(to));
    let fc: Vec<Component> = from.components().collect();
    let tc: Vec<Component> = to.components().collect();
    let common = fc.iter().zip(&tc).take_while(|(a, b)| a == b).count();
    let parts: Vec<String> = if common > 0 {
        std::iter::repeat_n("..".to_string(), fc.len() - common)
            .chain(
                tc[common..]
                    .iter()
                    .map(|c| c.as_os_str().to_string_lossy().into_owned()),
            )
            .collect()
    } else {
        vec![to.display().to_string()]
    };
    let joined = parts
        .iter()
        .map(|p| utf8_percent_encode(p, HREF).to_string())
        .collect::<Vec<_>>()
        .join("/");
    esc(&joined)
}

/// Throughput of each run against elapsed time and against accumulated
/// successful operations (two overlay charts, ids `<prefix>tput-time` and
/// `<prefix>tput-ops`).
pub fn throughput_overlays(prefix: &str, runs: &[(String, RunData)]) -> [Value; 2] {
    let mut by_time = Vec::new();
    let mut by_ops = Vec::new();
    for (name, run) in runs {
        let rows: Vec<_> = run.summary.iter().filter(|r| r.window > 0.0).collect();
        let ys: Column = rows
            .iter()
            .map(|r| Some(r.successful as f64 / r.window))
            .collect();
        let mut acc = 0u64;
        let ops: Vec<f64> = rows
            .iter()
            .map(|r| {
                acc += r.successful;
                acc as f64
            })
            .collect();
        by_time.push(Overlay {
            label: name.clone(),
            xs: rows.iter().map(|r| r.elapsed).collect(),
            ys: ys.clone(),
        });
        by_ops.push(Overlay {
            label: name.clone(),
            xs: ops,
            ys,
        });
    }
    [
        html::overlay_json(
            &format!("{prefix}tput-time"),
            "Throughput by elapsed time",
            "elapsed (s)",
            "ops/s",
            &by_time,
        ),
        html::overlay_json(
            &format!("{prefix}tput-ops"),
            "Throughput by accumulated operations",
            "operations",
            "ops/s",
            &by_ops,
        ),
    ]
}

/// The whole `compare.html` of `runs` (the first is the baseline), written
/// into `out`; `table` is the seeds' table in markdown
/// ([`crate::compare::table`]).
pub fn compare_page(runs: &[(String, RunData)], table: &str, out: &Path) -> String {
    let title = "Bench comparison";
    let mut body = format!(
        "<h1>{title}</h1>\n<p>The first run is the baseline. mean(max): the mean of each \
         report interval's maximum latency.</p>\n"
    );
    let problems: Vec<String> = runs
        .iter()
        .flat_map(|(n, r)| r.problems.iter().map(move |p| format!("{n}: {p}")))
        .collect();
    body.push_str(&problems_html(&problems));
    body.push_str(&markdown(table));
    body.push_str("<h2>Runs</h2>\n<ul>\n");
    for (name, run) in runs {
        let report = run.dir.join("report.html");
        let link = if report.is_file() {
            format!(" — <a href=\"{}\">report.html</a>", href(out, &report))
        } else {
            String::new()
        };
        let _ = writeln!(
            body,
            "<li>{}: <code>{}</code>{link}</li>",
            esc(name),
            esc(&run.dir.display().to_string())
        );
    }
    body.push_str("</ul>\n<h2>Charts</h2>\n<p class=\"muted\">Drag to zoom, double-click to zoom out, click a legend entry to hide its run.</p>\n<div class=\"charts\">\n");
    let mut charts: Vec<Value> = throughput_overlays("", runs).into();
    // Max latency per op, the runs overlaid.
    let mut ops: Vec<&str> = Vec::new();
    for (_, r) in runs {
        for (l, _) in &r.ops {
            if !ops.contains(&l.as_str()) {
                ops.push(l);
            }
        }
    }
    for (k, op) in ops.iter().enumerate() {
        let lines: Vec<Overlay> = runs
            .iter()
            .filter_map(|(name, r)| {
                let (_, rows) = r.ops.iter().find(|(l, _)| l == op)?;
                Some(Overlay {
                    label: name.clone(),
                    xs: rows.iter().map(|r| r.elapsed).collect(),
                    ys: rows
                        .iter()
                        .map(|r| (r.n > 0).then_some(r.max / 1000.0))
                        .collect(),
                })
            })
            .collect();
        charts.push(html::overlay_json(
            &format!("max-{k}"),
            &format!("Max latency: {op}"),
            "elapsed (s)",
            "ms",
            &lines,
        ));
    }
    for c in &charts {
        if let Some(id) = c["id"].as_str() {
            body.push_str(&chart_div(id));
        }
    }
    body.push_str("</div>\n");
    html::page(title, &body, charts)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::output::{LatRow, SummaryRow};

    fn run(dir: &Path, label: &str, rows: usize) -> RunData {
        RunData {
            dir: dir.to_path_buf(),
            summary: (1..=rows)
                .map(|i| SummaryRow {
                    elapsed: i as f64,
                    window: 1.0,
                    successful: 1000 + i as u64,
                    failed: 0,
                })
                .collect(),
            ops: vec![(
                label.to_string(),
                (1..=rows)
                    .map(|i| LatRow {
                        elapsed: i as f64,
                        n: 1000,
                        mean: 500.0,
                        median: 400.0,
                        p95: 900.0,
                        p99: 1500.0,
                        p999: 3000.0,
                        max: if i == rows / 2 { 987_654.0 } else { 5000.0 },
                        errors: 0,
                    })
                    .collect(),
            )],
            ..RunData::default()
        }
    }

    /// The JSON document of a page, read back.
    fn data_of(page: &str) -> Value {
        let start = page.find("id=\"bench-data\">").expect("data") + 16;
        let end = start + page[start..].find("</script>").expect("end");
        serde_json::from_str(&page[start..end]).expect("JSON")
    }

    #[test]
    fn a_report_page_holds_the_charts_and_tables() {
        let tmp = tempfile::tempdir().expect("tmp");
        let r = run(tmp.path(), "get", 30);
        let extra = ReportExtra {
            header: vec!["driver basalt_embedded".into()],
            ..ReportExtra::default()
        };
        let page = report_page(&r, &extra);
        assert!(page.contains("<li>driver basalt_embedded</li>"));
        assert!(page.contains("<h2>Latency (ms)</h2>"), "report.md's tables");
        assert!(page.contains("<td>get</td>"));
        let data = data_of(&page);
        let charts = data["charts"].as_array().expect("charts");
        assert_eq!(charts[0]["id"], "tput");
        assert_eq!(charts[0]["data"][1][0], 1001.0, "ok/s of the first row");
        assert_eq!(charts[1]["title"], "Latency: get");
        let max: Vec<f64> = charts[1]["data"][6]
            .as_array()
            .expect("max")
            .iter()
            .filter_map(Value::as_f64)
            .collect();
        assert!(max.contains(&987.7), "the max latency in ms: {max:?}");
        for c in charts {
            let id = c["id"].as_str().expect("id");
            assert!(
                page.contains(&format!("id=\"chart-{id}\"")),
                "{id} has a place"
            );
        }
        assert!(!page.contains("id=\"problems\""));
    }

    #[test]
    fn an_operation_named_like_markup_stays_text() {
        let tmp = tempfile::tempdir().expect("tmp");
        let evil = "get</script><script>alert(1)</script><b>";
        let r = run(tmp.path(), evil, 5);
        let page = report_page(
            &r,
            &ReportExtra {
                header: vec![format!("operations {evil}")],
                ..ReportExtra::default()
            },
        );
        assert!(
            !page.contains("alert(1)</script>"),
            "no markup from the label"
        );
        assert!(!page.contains("<b>"));
        assert!(page.contains("get&lt;/script&gt;&lt;script&gt;alert(1)"));
        assert_eq!(
            data_of(&page)["charts"][1]["title"],
            format!("Latency: {evil}")
        );
        // Exactly the page's own scripts: JSON, uPlot, ours.
        assert_eq!(page.matches("</script>").count(), 3);
        let other = run(tmp.path(), "put", 5);
        let runs = [(evil.to_string(), r), ("b".to_string(), other)];
        let cmp = compare_page(&runs, &crate::compare::table(&runs), tmp.path());
        assert_eq!(cmp.matches("</script>").count(), 3);
        assert!(!cmp.contains("<b>"));
        assert_eq!(data_of(&cmp)["charts"][0]["overlay"][0]["label"], evil);
    }

    #[test]
    fn long_runs_are_downsampled() {
        let tmp = tempfile::tempdir().expect("tmp");
        let r = run(tmp.path(), "get", 86_400);
        let page = report_page(&r, &ReportExtra::default());
        let data = data_of(&page);
        for c in data["charts"].as_array().expect("charts") {
            for col in c["data"].as_array().expect("data") {
                assert!(col.as_array().expect("col").len() <= html::MAX_CHART_POINTS);
            }
            assert!(c["note"].as_str().is_some_and(|n| n.contains("86400 rows")));
        }
        assert!(
            data["charts"][1]["data"][6]
                .as_array()
                .expect("max")
                .contains(&serde_json::json!(987.7)),
            "the one spike survives"
        );
        assert!(page.len() < 1_000_000, "{} bytes", page.len());
    }

    #[test]
    fn links_are_relative() {
        let tmp = tempfile::tempdir().expect("tmp");
        let a = tmp.path().join("t/leveled");
        let out = tmp.path().join("t/compare");
        std::fs::create_dir_all(&a).expect("mk");
        std::fs::create_dir_all(&out).expect("mk");
        assert_eq!(href(&out, &a.join("report.html")), "../leveled/report.html");
        assert_eq!(href(tmp.path(), &tmp.path().join("a b#c")), "a%20b%23c");
    }
}
