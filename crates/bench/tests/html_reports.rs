//! The HTML pages end to end, about 2 s: a `null`-driver run writes
//! `report.html` with its data; `bench report` over a results directory
//! with a malformed CSV line names the file and line in `report.md` and
//! `report.html` and draws the rest; `bench compare` over a good and a
//! broken directory does the same in `compare.html`; `bench index` writes
//! one page over the scenarios of a directory, linking every report.

use basalt_bench::cli;
use std::path::{Path, PathBuf};

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

fn s(p: &Path) -> &str {
    p.to_str().expect("utf8 path")
}

fn read(p: &Path) -> String {
    std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The JSON document of a page.
fn data_of(page: &str) -> serde_json::Value {
    let start = page.find("id=\"bench-data\">").expect("data") + 16;
    let end = start + page[start..].find("</script>").expect("end");
    serde_json::from_str(&page[start..end]).expect("JSON")
}

/// A one-second-interval `null` run of about 2 s into `results/name`.
fn null_run(dir: &Path, results: &Path, name: &str) -> PathBuf {
    let cfg = dir.join("null.config");
    std::fs::write(
        &cfg,
        "{mode, max}.\n{duration, 0.04}.\n{report_interval, 1}.\n{concurrent, 2}.\n{driver, null}.\n\
         {operations, [{get, 10}, {put, 10}]}.\n{key_generator, {uniform_int, 1000}}.\n\
         {value_generator, {fixed_bin, 100}}.\n{value_generator_source_size, 1048576}.\n",
    )
    .expect("config");
    let code = cli::run(&args(&[s(&cfg), "-d", s(results), "-n", name, "-q"])).expect("run");
    assert_eq!(code, 0);
    results.join(name)
}

/// Copies the files of run `from` into a new directory `to`.
fn copy_run(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("mkdir");
    for e in std::fs::read_dir(from).expect("ls") {
        let e = e.expect("entry");
        if e.file_type().expect("type").is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).expect("copy");
        }
    }
}

#[test]
fn reports_compare_and_index_pages_with_a_broken_csv() {
    let tmp = tempfile::tempdir().expect("tmp");
    let results = tmp.path().join("scenario");
    let good = null_run(tmp.path(), &results, "good");

    // The run's own report.html: both ops, their rows, the tables.
    let page = read(&good.join("report.html"));
    assert!(page.contains("<h2>Latency (ms)</h2>"), "report.md's tables");
    let data = data_of(&page);
    let titles: Vec<&str> = data["charts"]
        .as_array()
        .expect("charts")
        .iter()
        .filter_map(|c| c["title"].as_str())
        .collect();
    assert!(titles.contains(&"Throughput"), "{titles:?}");
    assert!(titles.contains(&"Latency: get") && titles.contains(&"Latency: put"));
    let rows = read(&good.join("summary.csv")).lines().count() - 1;
    assert_eq!(
        data["charts"][0]["data"][0].as_array().expect("x").len(),
        rows,
        "one point per summary row"
    );

    // Break line 3 of a copy's get_latencies.csv.
    let broken = results.join("broken");
    copy_run(&good, &broken);
    std::fs::remove_file(broken.join("report.html")).expect("rm");
    let lat = broken.join("get_latencies.csv");
    let mut lines: Vec<String> = read(&lat).lines().map(str::to_string).collect();
    assert!(lines.len() >= 3, "{lines:?}");
    lines[2] = "2.0, 1.0, 10, oops, 5.0".into();
    std::fs::write(&lat, lines.join("\n") + "\n").expect("write");
    let code = cli::run(&args(&["report", s(&broken)])).expect("report of a broken dir");
    assert_eq!(code, 0);
    let where_ = "get_latencies.csv:3: not a row of numbers: 2.0, 1.0, 10, oops, 5.0";
    let md = read(&broken.join("report.md"));
    assert!(md.contains("## Problems reading the results"), "{md}");
    assert!(md.contains(where_), "{md}");
    let page = read(&broken.join("report.html"));
    assert!(page.contains("id=\"problems\""));
    assert!(page.contains(where_), "the page names the file and line");
    let data = data_of(&page);
    let get = data["charts"]
        .as_array()
        .expect("charts")
        .iter()
        .find(|c| c["title"] == "Latency: get")
        .expect("get is still drawn");
    assert_eq!(
        get["data"][0].as_array().expect("x").len(),
        rows - 1,
        "the other rows are drawn"
    );

    // compare: a good and a broken run.
    let out = results.join("compare");
    let code = cli::run(&args(&["compare", s(&good), s(&broken), "-o", s(&out)])).expect("compare");
    assert_eq!(code, 0);
    let cmp = read(&out.join("compare.html"));
    assert!(cmp.contains("<li><code>broken: "), "the run is named");
    assert!(cmp.contains(where_), "the file and line are named");
    assert!(cmp.contains(">good</td>") && cmp.contains(">broken</td>"));
    assert!(
        cmp.contains("href=\"../good/report.html\""),
        "links to the reports"
    );
    let data = data_of(&cmp);
    let lines = data["charts"][0]["overlay"].as_array().expect("overlay");
    assert_eq!(lines.len(), 2, "both runs drawn");
    assert!(read(&out.join("compare.md")).contains(where_));

    // index over the directory holding the scenario.
    let code = cli::run(&args(&["index", s(tmp.path())])).expect("index");
    assert_eq!(code, 0);
    let index = read(&tmp.path().join("index.html"));
    assert!(
        index.contains("<h2>scenario</h2>"),
        "the scenario is listed"
    );
    assert!(index.contains("href=\"scenario/compare/compare.html\""));
    assert!(index.contains("href=\"scenario/good/report.html\""));
    assert!(index.contains("href=\"scenario/broken/report.html\""));
    assert!(
        index.contains(where_),
        "the index names the broken line too"
    );
    assert_eq!(
        data_of(&index)["charts"].as_array().expect("charts").len(),
        2,
        "throughput by time and by operations"
    );
}
