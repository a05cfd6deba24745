//! `index.html`: one page over a directory of runs and comparisons, such
//! as the seed suite's results (`<results>/<scenario>/<backend>/` runs and
//! `<results>/<scenario>/compare/`), written by `basalt bench index DIR`.
//!
//! A *scenario* is `DIR` itself or one of its subdirectories holding runs
//! (directories with a `summary.csv`; symbolic links such as `current` are
//! not followed). For each, the page shows the scenario's `section.md`
//! when the seed suite wrote one (the seeds' table and what the seed
//! reported), else the comparison table of its runs; a table of its runs
//! (duration, Avg TPS, links to each `report.html` and to the scenario's
//! `compare.html`); and the runs' throughput overlaid against elapsed time
//! and against accumulated operations. The head of `DIR/summary.md` (the
//! suite's machine and settings) opens the page. Lines that could not be
//! read are named, `file:line: why`.

use crate::compare::run_name;
use crate::html::{self, chart_div, esc, markdown};
use crate::htmlreport::{href, problems_html, throughput_overlays};
use crate::output::{OutputError, RunData};
use serde_json::Value;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};

/// Most runs one scenario lists (a directory of thousands of runs still
/// gives a page that opens).
pub const MAX_RUNS_PER_SCENARIO: usize = 50;

/// Most scenarios one index lists.
pub const MAX_SCENARIOS: usize = 200;

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> OutputError + '_ {
    move |source| OutputError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// Subdirectories of `dir` (not symbolic links), sorted by name.
fn subdirs(dir: &Path) -> Result<Vec<PathBuf>, OutputError> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).map_err(io(dir))? {
        let entry = entry.map_err(io(dir))?;
        let is_dir = entry.file_type().map_err(io(dir))?.is_dir();
        if is_dir {
            out.push(entry.path());
        }
    }
    out.sort();
    Ok(out)
}

fn is_run(dir: &Path) -> bool {
    dir.join("summary.csv").is_file()
}

/// The runs directly under `dir`.
fn runs_in(dir: &Path) -> Result<Vec<PathBuf>, OutputError> {
    Ok(subdirs(dir)?.into_iter().filter(|d| is_run(d)).collect())
}

/// One scenario's section of the page; adds its charts.
fn scenario_html(
    k: usize,
    index_dir: &Path,
    scenario: &Path,
    runs: &[PathBuf],
    charts: &mut Vec<Value>,
) -> String {
    let name = if scenario == index_dir {
        ".".to_string()
    } else {
        run_name(scenario)
    };
    let mut s = format!("<section class=\"scenario\">\n<h2>{}</h2>\n", esc(&name));
    let mut loaded: Vec<(String, RunData)> = Vec::new();
    let mut problems = Vec::new();
    for d in runs.iter().take(MAX_RUNS_PER_SCENARIO) {
        match RunData::load_tolerant(d) {
            Ok(r) => {
                problems.extend(r.problems.iter().map(|p| format!("{}: {p}", run_name(d))));
                loaded.push((run_name(d), r));
            }
            Err(e) => problems.push(e.to_string()),
        }
    }
    if runs.len() > MAX_RUNS_PER_SCENARIO {
        problems.push(format!(
            "{} runs, the first {MAX_RUNS_PER_SCENARIO} shown",
            runs.len()
        ));
    }
    s.push_str(&problems_html(&problems));
    match std::fs::read_to_string(scenario.join("section.md")) {
        // The suite's section: its own "## name" heading is dropped.
        Ok(text) => s.push_str(&markdown(
            &text
                .lines()
                .filter(|l| !l.starts_with("## "))
                .collect::<Vec<_>>()
                .join("\n"),
        )),
        Err(_) if !loaded.is_empty() => s.push_str(&markdown(&crate::compare::table(&loaded))),
        Err(_) => {}
    }
    let compare = scenario.join("compare").join("compare.html");
    if compare.is_file() {
        let _ = writeln!(
            s,
            "<p><a href=\"{}\">compare.html</a>: the runs side by side</p>",
            href(index_dir, &compare)
        );
    }
    s.push_str(
        "<table>\n<tr><th>run</th><th>duration (s)</th><th>Avg TPS</th><th>report</th></tr>\n",
    );
    for (n, r) in &loaded {
        let report = r.dir.join("report.html");
        let link = if report.is_file() {
            format!("<a href=\"{}\">report.html</a>", href(index_dir, &report))
        } else {
            "-".into()
        };
        let _ = writeln!(
            s,
            "<tr><td>{}</td><td>{:.0}</td><td>{:.2}</td><td>{link}</td></tr>",
            esc(n),
            r.elapsed(),
            r.avg_tps()
        );
    }
    s.push_str("</table>\n");
    if !loaded.is_empty() {
        s.push_str("<div class=\"charts\">\n");
        for c in throughput_overlays(&format!("s{k}-"), &loaded) {
            if let Some(id) = c["id"].as_str() {
                s.push_str(&chart_div(id));
            }
            charts.push(c);
        }
        s.push_str("</div>\n");
    }
    s.push_str("</section>\n");
    s
}

/// The whole `index.html` of `dir`.
pub fn index_page(dir: &Path) -> Result<String, OutputError> {
    let mut scenarios: Vec<(PathBuf, Vec<PathBuf>)> = Vec::new();
    let top = runs_in(dir)?;
    if !top.is_empty() {
        scenarios.push((dir.to_path_buf(), top));
    }
    for sub in subdirs(dir)? {
        if is_run(&sub) {
            continue;
        }
        let runs = runs_in(&sub)?;
        if !runs.is_empty() {
            scenarios.push((sub, runs));
        }
    }
    let title = format!("Bench results: {}", run_name(dir));
    let mut body = format!("<h1>{}</h1>\n", esc(&title));
    // The head of the suite's summary.md: its settings, not its sections.
    if let Ok(text) = std::fs::read_to_string(dir.join("summary.md")) {
        let head: Vec<&str> = text
            .lines()
            .skip_while(|l| l.starts_with("# "))
            .take_while(|l| !l.starts_with("## "))
            .collect();
        body.push_str(&markdown(&head.join("\n")));
    }
    if scenarios.is_empty() {
        body.push_str("<p>No runs (directories holding a <code>summary.csv</code>) here.</p>\n");
    }
    if scenarios.len() > MAX_SCENARIOS {
        body.push_str(&problems_html(&[format!(
            "{} scenarios, the first {MAX_SCENARIOS} shown",
            scenarios.len()
        )]));
    }
    body.push_str("<ul>\n");
    for (k, (sc, runs)) in scenarios.iter().take(MAX_SCENARIOS).enumerate() {
        let _ = writeln!(
            body,
            "<li><a href=\"#scenario-{k}\">{}</a> ({} runs)</li>",
            esc(&if sc == dir { ".".into() } else { run_name(sc) }),
            runs.len()
        );
    }
    body.push_str("</ul>\n");
    let mut charts = Vec::new();
    for (k, (sc, runs)) in scenarios.iter().take(MAX_SCENARIOS).enumerate() {
        let _ = writeln!(body, "<div id=\"scenario-{k}\"></div>");
        body.push_str(&scenario_html(k, dir, sc, runs, &mut charts));
    }
    Ok(html::page(&title, &body, charts))
}

/// Writes `dir/index.html`.
pub fn write_index(dir: &Path) -> Result<PathBuf, OutputError> {
    let page = index_page(dir)?;
    let path = dir.join("index.html");
    std::fs::write(&path, page).map_err(io(&path))?;
    Ok(path)
}
