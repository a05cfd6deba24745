//! End-to-end runs, each about 2-3 seconds: the `null` driver and the
//! `basalt_embedded` driver write every basho_bench file with the right
//! headers and row shapes, a report and a PNG; errors are counted in
//! `errors.csv` and the run continues unless `shutdown_on_error`; an
//! unwritable results directory fails before any load; `compare` writes
//! its table and chart. Runs use `basalt_duration_secs` (or fractional
//! `duration` minutes) to stay short.

use basalt_bench::cli;
use basalt_bench::output::{LATENCY_HEADER, SUMMARY_HEADER, SYS_HEADER};
use std::path::{Path, PathBuf};

fn write_config(dir: &Path, name: &str, text: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, text).expect("write config");
    p
}

fn lines(p: &Path) -> Vec<String> {
    std::fs::read_to_string(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .lines()
        .map(str::to_string)
        .collect()
}

/// Held by the tests whose stores take disk space, so that the full-disk
/// test's threshold is not crossed by another test's files (a journal file
/// reserves 256 MiB when created) before its own run writes anything.
static DISK_USE: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn disk_use() -> std::sync::MutexGuard<'static, ()> {
    DISK_USE
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

fn args(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// `basalt bench CFG -d RESULTS -n NAME -q`: the run's exit code.
fn run_named(cfg: &Path, results: &Path, name: &str) -> i32 {
    cli::run(&args(&[
        cfg.to_str().expect("utf8"),
        "-d",
        results.to_str().expect("utf8"),
        "-n",
        name,
        "-q",
    ]))
    .unwrap_or_else(|e| panic!("run {name}: {e}"))
}

fn check_csvs(run: &Path, labels: &[&str], min_rows: usize) {
    let s = lines(&run.join("summary.csv"));
    assert_eq!(s[0], SUMMARY_HEADER);
    assert!(s.len() > min_rows, "summary rows: {s:?}");
    for row in &s[1..] {
        assert_eq!(row.split(", ").count(), 5, "{row}");
    }
    for l in labels {
        let f = lines(&run.join(format!("{l}_latencies.csv")));
        assert_eq!(f[0], LATENCY_HEADER);
        assert_eq!(f.len(), s.len(), "{l}: one row per summary row");
        for row in &f[1..] {
            let cells: Vec<&str> = row.split(", ").collect();
            assert_eq!(cells.len(), 11, "{row}");
            assert!(cells[4].contains('.'), "mean has one decimal: {row}");
        }
    }
    assert_eq!(lines(&run.join("sysstats.csv"))[0], SYS_HEADER);
    assert_eq!(lines(&run.join("errors.csv"))[0], "\"error\",\"count\"");
    assert!(run.join("report.md").exists());
    assert!(run.join("report.html").exists());
    let png = std::fs::read(run.join("summary.png")).expect("png");
    assert_eq!(&png[1..4], b"PNG");
}

#[test]
fn null_driver_run_writes_all_files_and_counts_errors() {
    let tmp = tempfile::tempdir().expect("tmp");
    let cfg = write_config(
        tmp.path(),
        "null.config",
        "{mode, max}.\n{duration, 0.04}.\n{report_interval, 1}.\n{concurrent, 2}.\n{driver, null}.\n\
         {operations, [{get, 10}, {put, 10}, {an_error, 1}]}.\n{key_generator, {uniform_int, 1000}}.\n\
         {value_generator, {fixed_bin, 100}}.\n{value_generator_source_size, 1048576}.\n",
    );
    let results = tmp.path().join("tests");
    let code = run_named(&cfg, &results, "n1");
    assert_eq!(code, 0);
    let run = results.join("n1");
    check_csvs(&run, &["get", "put", "an-error"], 2);
    assert!(results.join("current").exists(), "tests/current link");
    assert!(run.join("null.config").exists(), "config copied");
    let errors = lines(&run.join("errors.csv"));
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert!(
        errors[1].starts_with("\"{{an_error,an_error},an_error}\",\""),
        "{errors:?}"
    );
    let report = std::fs::read_to_string(run.join("report.md")).expect("report");
    assert!(
        report.contains("Avg TPS") && report.contains("mean(max)"),
        "{report}"
    );
}

#[test]
fn shutdown_on_error_stops_with_exit_1() {
    let tmp = tempfile::tempdir().expect("tmp");
    let cfg = write_config(
        tmp.path(),
        "stop.config",
        "{mode, max}.\n{basalt_duration_secs, 30}.\n{report_interval, 1}.\n{concurrent, 1}.\n{driver, null}.\n\
         {shutdown_on_error, true}.\n{operations, [{get, 1}, {an_error, 1}]}.\n{value_generator_source_size, 1048576}.\n",
    );
    let results = tmp.path().join("tests");
    let t = std::time::Instant::now();
    let code = cli::run(&args(&[
        cfg.to_str().expect("utf8"),
        "-d",
        results.to_str().expect("utf8"),
        "-q",
    ]))
    .expect("run");
    assert_eq!(code, 1);
    assert!(t.elapsed().as_secs() < 10, "stopped early");
}

/// A disk that fills during a run: the store's guard is set to trip once
/// about 256 MiB more of the file system is used (its `disk_min_free_pct`
/// a little below what is free now), so a run of 8 KB puts meets the full
/// disk within seconds. The run stops at once with the store's
/// error and exit 1, and writes its CSVs and report for the time measured.
/// The other tests of this file that take disk space wait meanwhile
/// ([`disk_use`]).
#[test]
fn a_disk_that_fills_mid_run_stops_the_run_with_its_reports() {
    let _disk = disk_use();
    let tmp = tempfile::tempdir().expect("tmp");
    let space = basalt_engine::diskspace::DiskSpace::of(tmp.path()).expect("statvfs");
    let margin = 256u64 << 20;
    if space.free_bytes < 4 * margin || space.total_bytes == 0 {
        eprintln!("skipped: {} bytes free", space.free_bytes);
        return;
    }
    let min_pct = (space.free_bytes - margin) as f64 * 100.0 / space.total_bytes as f64;
    let cfg = write_config(
        tmp.path(),
        "full.config",
        &format!(
            "{{mode, max}}.\n{{basalt_duration_secs, 60}}.\n{{report_interval, 1}}.\n{{concurrent, 2}}.\n\
             {{driver, basalt_embedded}}.\n{{operations, [{{put, 1}}]}}.\n\
             {{key_generator, {{int_to_bin_bigendian, {{uniform_int, 1000000}}}}}}.\n\
             {{value_generator, {{fixed_bin, 8000}}}}.\n{{value_generator_source_size, 1048576}}.\n\
             {{basalt_journal_preallocate, false}}.\n{{basalt_disk_min_free_pct, {min_pct:.6}}}.\n"
        ),
    );
    let results = tmp.path().join("tests");
    let t = std::time::Instant::now();
    let code = run_named(&cfg, &results, "full");
    assert_eq!(code, 1, "a full disk stops the run with exit 1");
    assert!(t.elapsed().as_secs() < 45, "stopped well before its 60 s");
    let run = results.join("full");
    let report = std::fs::read_to_string(run.join("report.md")).expect("report.md");
    let stopped = report
        .lines()
        .find(|l| l.contains("**stopped early**"))
        .unwrap_or_else(|| panic!("no stop line in the report:\n{report}"));
    assert!(stopped.contains("disk nearly full"), "{stopped}");
    let summary = lines(&run.join("summary.csv"));
    assert_eq!(summary[0], SUMMARY_HEADER);
    let puts = lines(&run.join("put_latencies.csv"));
    assert_eq!(puts.len(), summary.len(), "one latency row per summary row");
    // The interval rows count the puts acknowledged before the stop.
    let acked: u64 = summary[1..]
        .iter()
        .filter_map(|r| r.split(", ").nth(3))
        .filter_map(|c| c.trim().parse::<u64>().ok())
        .sum();
    assert!(acked > 0, "puts measured before the stop: {summary:?}");
}

#[test]
fn embedded_run_with_two_stores_and_2i() {
    let _disk = disk_use();
    let tmp = tempfile::tempdir().expect("tmp");
    let cfg = write_config(
        tmp.path(),
        "emb.config",
        "{mode, max}.\n{basalt_duration_secs, 3}.\n{report_interval, 1}.\n{concurrent, 2}.\n{driver, basalt_embedded}.\n\
         {basalt_stores, 2}.\n{operations, [{put, 4}, {get, 4}, {update, 1}, {delete, 1}, {head, 1}, {index_query, 1}]}.\n\
         {key_generator, {int_to_bin_bigendian, {uniform_int, 2000}}}.\n{value_generator, {fixed_bin, 1000}}.\n\
         {value_generator_source_size, 1048576}.\n",
    );
    let results = tmp.path().join("tests");
    let code = run_named(&cfg, &results, "e1");
    assert_eq!(code, 0);
    let run = results.join("e1");
    check_csvs(
        &run,
        &["put", "get", "update", "delete", "head", "index-query"],
        2,
    );
    assert_eq!(lines(&run.join("errors.csv")).len(), 1, "no errors");
    assert!(
        !run.join("data").exists(),
        "store data removed after the run"
    );
    let report = std::fs::read_to_string(run.join("report.md")).expect("report");
    assert!(report.contains("write amplification"), "{report}");

    // compare: the run against itself and a null run.
    let null_cfg = write_config(
        tmp.path(),
        "null.config",
        "{mode, {rate, 200}}.\n{basalt_rate_mode, open_loop}.\n{basalt_duration_secs, 2}.\n{report_interval, 1}.\n\
         {concurrent, 2}.\n{driver, null}.\n{operations, [{get, 1}, {put, 1}]}.\n{value_generator_source_size, 1048576}.\n",
    );
    assert_eq!(run_named(&null_cfg, &results, "n2"), 0);
    assert!(
        results.join("n2/get_service_latencies.csv").exists(),
        "open loop keeps service time"
    );
    let out = tmp.path().join("cmp");
    cli::run(&args(&[
        "compare",
        run.to_str().expect("utf8"),
        results.join("n2").to_str().expect("utf8"),
        "-o",
        out.to_str().expect("utf8"),
    ]))
    .expect("compare");
    let table = std::fs::read_to_string(out.join("compare.md")).expect("compare.md");
    assert!(
        table.contains("| Avg TPS | TPS Delta (Overall) | TPS Delta (Last Sixth) |"),
        "{table}"
    );
    assert!(
        table.contains("GET mean(max) ms") && table.contains("PUT mean(max) ms"),
        "{table}"
    );
    assert!(
        table.contains("| e1 |") && table.contains("baseline"),
        "{table}"
    );
    assert!(out.join("compare.png").exists());
    assert!(out.join("compare.html").exists());
}

#[test]
fn unwritable_results_dir_fails_before_load() {
    let tmp = tempfile::tempdir().expect("tmp");
    let cfg = write_config(
        tmp.path(),
        "c.config",
        "{driver, null}.\n{basalt_duration_secs, 30}.\n",
    );
    // A regular file where the results directory should be.
    let blocker = tmp.path().join("file");
    std::fs::write(&blocker, "x").expect("write");
    let t = std::time::Instant::now();
    let e = cli::run(&args(&[
        cfg.to_str().expect("utf8"),
        "-d",
        blocker.to_str().expect("utf8"),
        "-q",
    ]))
    .expect_err("cannot write");
    assert!(e.to_string().contains("cannot be created"), "{e}");
    assert!(t.elapsed().as_secs() < 5, "failed before the 30 s load");
    let e =
        cli::run(&args(&[cfg.to_str().expect("utf8"), "-n", "current", "-q"])).expect_err("name");
    assert!(e.to_string().contains("current"), "{e}");
}

/// Every backend other than the default goes through the `Backend` trait:
/// a short run on each writes its CSVs without errors (2i only where the
/// backend has indexes; bitcask has none, so its run leaves index_query out).
#[test]
fn embedded_runs_on_other_backends() {
    let _disk = disk_use();
    let tmp = tempfile::tempdir().expect("tmp");
    for (backend, ops) in [
        (
            "memory",
            "[{put, 4}, {get, 4}, {update, 1}, {index_query, 1}]",
        ),
        ("bitcask", "[{put, 4}, {get, 4}, {update, 1}, {delete, 1}]"),
    ] {
        let cfg = write_config(
            tmp.path(),
            &format!("{backend}.config"),
            &format!(
                "{{mode, max}}.\n{{basalt_duration_secs, 2}}.\n{{report_interval, 1}}.\n{{concurrent, 2}}.\n\
                 {{driver, basalt_embedded}}.\n{{basalt_backend, {backend}}}.\n{{operations, {ops}}}.\n\
                 {{key_generator, {{int_to_bin_bigendian, {{uniform_int, 2000}}}}}}.\n\
                 {{value_generator, {{fixed_bin, 1000}}}}.\n"
            ),
        );
        let results = tmp.path().join("tests");
        let code = run_named(&cfg, &results, backend);
        assert_eq!(code, 0, "{backend}");
        let run = results.join(backend);
        check_csvs(&run, &["put", "get", "update"], 1);
        assert_eq!(
            lines(&run.join("errors.csv")).len(),
            1,
            "{backend}: no errors"
        );
    }
}
