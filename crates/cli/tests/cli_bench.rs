//! `basalt bench` delegates to the basalt-bench library: a 2-second run of
//! the null driver through the `basalt` binary writes basho_bench's files
//! under `-d DIR/-n NAME`; `basalt bench compare` writes the comparison (and `bench index` a page
//! linking the run); an unknown driver is a one-line error with exit 2 listing the valid ones.

#![allow(clippy::unwrap_used)]

mod common;

use common::{basalt, code, stderr, stdout};

#[test]
fn bench_run_and_compare_through_basalt() {
    let tmp = tempfile::tempdir().unwrap();
    let cfg = tmp.path().join("null.config");
    std::fs::write(
        &cfg,
        "{mode, max}.\n{basalt_duration_secs, 2}.\n{report_interval, 1}.\n{concurrent, 2}.\n\
         {driver, null}.\n{operations, [{get, 1}, {put, 1}]}.\n{value_generator_source_size, 1048576}.\n",
    )
    .unwrap();
    let results = tmp.path().join("tests");
    let out = basalt(
        &[
            "bench",
            cfg.to_str().unwrap(),
            "-d",
            results.to_str().unwrap(),
            "-n",
            "r1",
            "-q",
        ],
        b"",
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("report:"), "{}", stdout(&out));
    for f in [
        "summary.csv",
        "get_latencies.csv",
        "put_latencies.csv",
        "errors.csv",
        "report.md",
        "report.html",
        "summary.png",
    ] {
        assert!(results.join("r1").join(f).exists(), "{f}");
    }
    let cmp = tmp.path().join("cmp");
    let out = basalt(
        &[
            "bench",
            "compare",
            results.join("r1").to_str().unwrap(),
            "-o",
            cmp.to_str().unwrap(),
        ],
        b"",
    );
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    assert!(stdout(&out).contains("Avg TPS"), "{}", stdout(&out));
    assert!(cmp.join("compare.png").exists());
    assert!(cmp.join("compare.html").exists());
    let out = basalt(&["bench", "index", tmp.path().to_str().unwrap()], b"");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let index = std::fs::read_to_string(tmp.path().join("index.html")).unwrap();
    assert!(index.contains("r1/report.html"), "the run is linked");

    std::fs::write(&cfg, "{driver, basho_bench_driver_riakc_java}.\n").unwrap();
    let out = basalt(&["bench", cfg.to_str().unwrap(), "-q"], b"");
    assert_eq!(code(&out), 2);
    let err = stderr(&out);
    assert!(
        err.starts_with("basalt: error:") && err.contains("valid: basalt_embedded, null"),
        "{err}"
    );
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
}
