//! The cluster seed suite's runner (`scripts/seed-cluster.py`, behind
//! `scripts/seed-suite.sh --cluster N`): its error paths and its report of
//! a node killed mid-run, with this build's `basalt`.
//!
//! - a memory limit below a node's need: exit 2 with the figures, before
//!   anything starts (runs anywhere);
//! - a node that cannot start (an unknown backend): exit 2 naming the node
//!   and its log, and nothing left: no node process, no cgroup;
//! - three nodes (ring 8), each in its own memory cgroup, a 20 s bench with
//!   one node killed (`kill -9`) 6 s in: the run goes on to the end, exit
//!   0, `cluster.md` names the dead node and shows 2 nodes alive in the
//!   intervals after, with ops still served, and `engine.csv` the live
//!   nodes' backend counters each interval; then nothing is left.
//!
//! The last two need root, a v1 memory cgroup hierarchy (or cgroup2 with
//! memory delegated) and python3; without them they print why and pass.
//! About 40 s in a debug build.

#![allow(clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/seed-cluster.py")
}

fn run(work: &Path, extra: &[&str], configs: &[&Path]) -> Output {
    let mut c = Command::new("python3");
    c.arg(script())
        .args(["--basalt", common::bin(), "--work"])
        .arg(work.join("nodes"))
        .args(extra)
        .arg("-d")
        .arg(work.join("results"))
        .args(["-n", "run"]);
    c.args(configs);
    c.output().expect("run python3 scripts/seed-cluster.py")
}

/// Why the cgroup tests cannot run here, if they cannot.
fn no_cgroups() -> Option<String> {
    if Command::new("python3").arg("--version").output().is_err() {
        return Some("no python3".into());
    }
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(2).map(str::to_string))
        })
        .unwrap_or_default();
    if uid != "0" {
        return Some("not root".into());
    }
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let v1 = own.lines().any(|l| {
        l.split(':')
            .nth(1)
            .is_some_and(|c| c.split(',').any(|x| x == "memory"))
    });
    if !v1 && !Path::new("/sys/fs/cgroup/cgroup.controllers").exists() {
        return Some("no memory cgroup controller".into());
    }
    None
}

/// Our cgroups (`basalt-seedcluster-*`) under the current memory cgroup.
fn seedcluster_cgroups() -> Vec<String> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
    let mut dirs = Vec::new();
    for l in own.lines() {
        let f: Vec<&str> = l.splitn(3, ':').collect();
        if f.len() == 3 && f[1].split(',').any(|x| x == "memory") {
            dirs.push(format!("/sys/fs/cgroup/memory{}", f[2]));
        } else if f.len() == 3 && f[0] == "0" {
            dirs.push(format!("/sys/fs/cgroup{}", f[2]));
        }
    }
    let mut found = Vec::new();
    for d in dirs {
        if let Ok(rd) = std::fs::read_dir(&d) {
            for e in rd.flatten() {
                let n = e.file_name().to_string_lossy().to_string();
                if n.starts_with("basalt-seedcluster-") {
                    found.push(format!("{d}/{n}"));
                }
            }
        }
    }
    found
}

/// Processes whose command line names `needle` (our work directory).
fn procs_naming(needle: &str) -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let name = e.file_name().to_string_lossy().to_string();
        if !name.chars().all(|c| c.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmd) = std::fs::read(e.path().join("cmdline")) {
            let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
            if cmd.contains(needle) {
                found.push(format!("{name}: {cmd}"));
            }
        }
    }
    found
}

fn assert_nothing_left(work: &Path, before: &[String]) {
    let work = work.to_string_lossy().to_string();
    common::wait_for(
        "node processes gone",
        std::time::Duration::from_secs(10),
        || procs_naming(&work).is_empty(),
    );
    let left: Vec<String> = seedcluster_cgroups()
        .into_iter()
        .filter(|c| !before.contains(c))
        .collect();
    assert!(left.is_empty(), "cgroups left behind: {left:?}");
}

fn bench_config(dir: &Path, secs: u32) -> PathBuf {
    let p = dir.join("bench.config");
    std::fs::write(
        &p,
        format!(
            "{{mode, max}}.\n{{report_interval, 10}}.\n{{concurrent, 6}}.\n\
             {{basalt_duration_secs, {secs}}}.\n{{driver, basho_bench_driver_riakc_pb}}.\n\
             {{key_generator, {{int_to_str, {{uniform_int, 5000}}}}}}.\n\
             {{value_generator, {{fixed_bin, 1000}}}}.\n\
             {{operations, [{{get, 5}}, {{update, 1}}]}}.\n"
        ),
    )
    .unwrap();
    p
}

#[test]
fn a_limit_below_a_nodes_need_is_refused_before_anything_starts() {
    if Command::new("python3").arg("--version").output().is_err() {
        eprintln!("skipped: no python3");
        return;
    }
    let t = tempfile::tempdir().unwrap();
    let cfg = bench_config(t.path(), 5);
    let out = run(t.path(), &["--nodes", "3", "--limit", "100M"], &[&cfg]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(
        err.contains("memory limit 100M a node is below the") && err.contains("22 vnodes"),
        "{err}"
    );
    assert!(
        !t.path().join("results").exists(),
        "no results for a refused run"
    );
    assert!(
        !t.path().join("nodes").exists(),
        "nothing made for a refused run"
    );
}

#[test]
fn a_node_that_cannot_start_is_an_error_and_nothing_is_left() {
    if let Some(why) = no_cgroups() {
        eprintln!("skipped: {why}");
        return;
    }
    let before = seedcluster_cgroups();
    let t = tempfile::tempdir().unwrap();
    let cfg = bench_config(t.path(), 5);
    let out = run(
        t.path(),
        &[
            "--nodes",
            "2",
            "--ring",
            "8",
            "--backend",
            "no-such-backend",
            "--limit",
            "256M",
        ],
        &[&cfg],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {err}");
    assert!(
        err.contains("refused: node a1") && err.contains("while starting"),
        "{err}"
    );
    assert!(
        !t.path().join("results").exists(),
        "no bench for a cluster that did not start"
    );
    assert_nothing_left(t.path(), &before);
}

#[test]
fn a_node_killed_mid_run_is_reported_per_interval_and_the_run_goes_on() {
    if let Some(why) = no_cgroups() {
        eprintln!("skipped: {why}");
        return;
    }
    let before = seedcluster_cgroups();
    let t = tempfile::tempdir().unwrap();
    let cfg = bench_config(t.path(), 20);
    let out = run(
        t.path(),
        &[
            "--nodes",
            "3",
            "--ring",
            "8",
            "--limit",
            "384M",
            // Small caches and memtables, so 384M holds a node's need.
            "--block-cache-mb",
            "32",
            "--memtable-mb",
            "32",
            "--value-bytes",
            "1000",
            "--kill-node",
            "6",
        ],
        &[&cfg],
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {err}");
    let md = std::fs::read_to_string(t.path().join("results/run/cluster.md")).unwrap();
    assert!(md.contains("| a3 | died at"), "{md}");
    assert!(md.contains("killed by --kill-node"), "{md}");
    // The intervals: | elapsed | ops/s | failed | nodes alive |; the last
    // one has 2 nodes alive and still serves ops.
    let rows: Vec<Vec<String>> = md
        .lines()
        .skip_while(|l| !l.starts_with("| elapsed s"))
        .skip(2)
        .take_while(|l| l.starts_with('|'))
        .map(|l| {
            l.trim_matches('|')
                .split('|')
                .map(|c| c.trim().to_string())
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), 2, "{md}");
    let last = &rows[1];
    assert_eq!(last[3], "2", "2 nodes alive at the end: {md}");
    assert!(
        last[1].parse::<f64>().unwrap() > 0.0,
        "ops served after the kill: {md}"
    );
    assert!(md.contains("**Node-level write amplification**"), "{md}");
    let nodes_csv = std::fs::read_to_string(t.path().join("results/run/nodes.csv")).unwrap();
    assert!(
        nodes_csv.lines().count() > 3 * 2,
        "header and 3 nodes x 2 intervals: {nodes_csv}"
    );
    // The backend counters, a row per live node per interval: the dead node
    // has none in the last interval, the others show the journal written.
    let engine_csv = std::fs::read_to_string(t.path().join("results/run/engine.csv")).unwrap();
    let mut lines = engine_csv.lines();
    let head: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
    let col = |name: &str| head.iter().position(|h| *h == name).expect(name);
    let (node, written) = (col("node"), col("journal_bytes_written"));
    assert!(head.contains(&"ledger_merges"), "{engine_csv}");
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let last_at = rows.last().map(|r| r[0]).expect("engine.csv rows");
    let last: Vec<&Vec<&str>> = rows.iter().filter(|r| r[0] == last_at).collect();
    let names: Vec<&str> = last.iter().map(|r| r[node]).collect();
    assert_eq!(names, ["a1", "a2"], "{engine_csv}");
    for r in last {
        let w: u64 = r[written].parse().expect("a number of bytes");
        assert!(w > 0, "{engine_csv}");
    }
    assert_nothing_left(t.path(), &before);
}
