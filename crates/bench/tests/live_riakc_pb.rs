//! The `riakc_pb` driver's `listkeys` and `pb_connect_options` against a
//! live node started in this process (memory backend, ring of 8, PB on an
//! ephemeral port), as in `live_drivers.rs`:
//!
//! - `listkeys` lists a loaded bucket, with no error;
//! - with `auto_reconnect` (the driver's default), a node that stops and
//!   comes back on the same port mid-run costs no error: the ops cut by
//!   the disconnect are run again once the worker has reconnected, and the
//!   new node receives the writes;
//! - with `queue_if_disconnected`, an op waits for the reconnect at most
//!   its timeout: longer than the outage, no error; shorter, `timeout`
//!   errors only;
//! - without it (`[{auto_reconnect, false}]`), the next op after the
//!   disconnect fails `crash` and the worker's reconnect, with no node
//!   there, stops the run (exit 1, reports written, the reason given).
//!
//! The assertions are on outcomes, never on speed.

use basalt_bench::riakpb::{PbClient, RiakKv};
use basalt_bench::run::{run_files, RunOptions, RunOutcome};
use basalt_server::{Config, ServerHandle};
use riak_pb as pb;
use std::path::{Path, PathBuf};
use std::time::Duration;

fn node_config(data_dir: PathBuf, pb_listen: &str) -> Config {
    Config {
        data_dir,
        pb_listen: pb_listen.into(),
        cluster_listen: "127.0.0.1:0".into(),
        http_listen: String::new(),
        ring_size: 8,
        backend: "memory".into(),
        ..Config::default()
    }
}

fn run(dir: &Path, name: &str, text: &str) -> anyhow::Result<RunOutcome> {
    let cfg = dir.join(format!("{name}.config"));
    std::fs::write(&cfg, text).expect("write config");
    run_files(
        &[cfg],
        &RunOptions {
            results_parent: dir.join("results"),
            name: Some(name.into()),
            quiet: true,
            memory_limit: None,
        },
    )
}

fn list_keys(h: &ServerHandle, bucket: &[u8]) -> u64 {
    let t = Duration::from_secs(20);
    let mut c = PbClient::connect(h.addr(), t, t).expect("connect");
    let req = pb::RpbListKeysReq {
        bucket: bucket.to_vec(),
        ..Default::default()
    };
    c.list_keys(&req, t).expect("list keys")
}

fn errors_csv(out: &RunOutcome) -> String {
    std::fs::read_to_string(out.dir.join("errors.csv")).expect("errors.csv")
}

#[test]
fn listkeys_lists_the_bucket() {
    let dir = tempfile::tempdir().expect("tempdir");
    let h =
        ServerHandle::spawn(node_config(dir.path().join("node"), "127.0.0.1:0")).expect("spawn");
    let ips = format!(
        "{{riakc_pb_ips, [{{\"127.0.0.1\", {}}}]}}.\n{{driver, basho_bench_driver_riakc_pb}}.\n\
         {{riakc_pb_replies, 1}}.\n{{mode, max}}.\n{{concurrent, 2}}.\n",
        h.addr().port()
    );
    let out = run(
        dir.path(),
        "load",
        &format!(
            "{ips}{{duration, infinity}}.\n\
             {{key_generator, {{int_to_str, {{partitioned_sequential_int, 300}}}}}}.\n\
             {{value_generator, {{fixed_bin, 100}}}}.\n{{operations, [{{put, 1}}]}}.\n"
        ),
    )
    .expect("load");
    assert_eq!((out.ok, out.errors), (300, 0));
    assert_eq!(list_keys(&h, b"test"), 300);
    // basho_bench's example timeouts, listkeys with gets beside it.
    let out = run(
        dir.path(),
        "listkeys",
        &format!(
            "{ips}{{basalt_duration_secs, 1.5}}.\n{{report_interval, 1}}.\n\
             {{pb_connect_options, [{{auto_reconnect, true}}, {{keepalive, true}}]}}.\n\
             {{pb_timeout_general, 30000}}.\n{{pb_timeout_read, 5000}}.\n\
             {{pb_timeout_listkeys, 50000}}.\n\
             {{key_generator, {{int_to_str, {{uniform_int, 0, 300}}}}}}.\n\
             {{operations, [{{listkeys, 1}}, {{get, 1}}]}}.\n"
        ),
    )
    .expect("listkeys run");
    assert!(
        out.ok > 0 && out.errors == 0 && out.exit_code == 0,
        "{out:?}"
    );
    let n = std::fs::read_to_string(out.dir.join("listkeys_latencies.csv")).expect("csv");
    let listed: u64 = n
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(2)?.trim().parse::<f64>().ok())
        .map(|n| n as u64)
        .sum();
    assert!(listed > 0, "no listkeys counted:\n{n}");
    h.shutdown().expect("shutdown");
}

/// Runs `config` (with `{riakc_pb_ips, ...}` to a node on a fixed port)
/// while the node stops after `down_after` and, if `back_after` is given,
/// a new node opens on the same port that long later; returns the run and
/// the node running at the end.
fn run_across_a_restart(
    name: &'static str,
    options: &str,
    down_after: Duration,
    back_after: Option<Duration>,
) -> (RunOutcome, Option<ServerHandle>, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let first =
        ServerHandle::spawn(node_config(dir.path().join("n1"), "127.0.0.1:0")).expect("spawn");
    let listen = first.addr().to_string();
    let config = format!(
        "{{riakc_pb_ips, [{{\"127.0.0.1\", {}}}]}}.\n{{driver, basho_bench_driver_riakc_pb}}.\n\
         {{riakc_pb_replies, 1}}.\n{{mode, max}}.\n{{concurrent, 2}}.\n\
         {{basalt_duration_secs, 4}}.\n{{report_interval, 1}}.\n{options}\
         {{key_generator, {{int_to_str, {{uniform_int, 0, 1000}}}}}}.\n\
         {{value_generator, {{fixed_bin, 100}}}}.\n\
         {{operations, [{{put, 1}}, {{get, 1}}]}}.\n",
        first.addr().port()
    );
    let path = dir.path().to_path_buf();
    let bench = std::thread::spawn(move || run(&path, name, &config));
    std::thread::sleep(down_after);
    first.shutdown().expect("stop the first node");
    let second = back_after.map(|after| {
        std::thread::sleep(after);
        ServerHandle::spawn(node_config(dir.path().join("n2"), &listen)).expect("restart")
    });
    let out = bench.join().expect("bench thread").expect("run");
    (out, second, dir)
}

#[test]
fn auto_reconnect_rides_through_a_node_restart() {
    let (out, second, _dir) = run_across_a_restart(
        "restart",
        // Long enough for riakc's back-off (attempts 0.1, 0.3, 0.7, 1.5,
        // 3.1 s after the disconnect) to meet the new node on a loaded
        // machine.
        "{pb_connect_options, [{auto_reconnect, true}]}.\n{basalt_duration_secs, 7}.\n",
        Duration::from_millis(1200),
        Some(Duration::from_millis(700)),
    );
    eprintln!(
        "{}",
        std::fs::read_to_string(out.dir.join("summary.csv")).unwrap_or_default()
    );
    assert_eq!(out.exit_code, 0, "{out:?}");
    assert_eq!(out.errors, 0, "errors:\n{}", errors_csv(&out));
    assert!(out.stopped.is_none(), "{out:?}");
    // The workers reconnected: the new node (empty at its start) got puts.
    let second = second.expect("second node");
    assert!(
        list_keys(&second, b"test") > 0,
        "no write reached the new node"
    );
    second.shutdown().expect("shutdown");
}

#[test]
fn queue_if_disconnected_waits_at_most_the_ops_timeout() {
    // Timeouts longer than the outage: the queued requests wait it out.
    let (out, second, _dir) = run_across_a_restart(
        "queue_long",
        "{pb_connect_options, [queue_if_disconnected]}.\n{pb_timeout_general, 20000}.\n\
         {basalt_duration_secs, 7}.\n",
        Duration::from_millis(1000),
        Some(Duration::from_millis(700)),
    );
    assert_eq!(
        (out.exit_code, out.errors),
        (0, 0),
        "errors:\n{}",
        errors_csv(&out)
    );
    let second = second.expect("second node");
    assert!(
        list_keys(&second, b"test") > 0,
        "no write reached the new node"
    );
    second.shutdown().expect("shutdown");
    // Timeouts shorter than the outage: the ops waiting for the reconnect
    // fail `timeout`, nothing else, and the run goes on once it is back.
    let (out, second, _dir) = run_across_a_restart(
        "queue_short",
        // riakc's back-off puts the attempts 0.1, 0.3, 0.7, 1.5 and 3.1 s
        // after the disconnect: a longer run sees the one after the node
        // is back (a later entry of the config wins).
        "{pb_connect_options, [queue_if_disconnected]}.\n{pb_timeout_general, 250}.\n\
         {basalt_duration_secs, 7}.\n",
        Duration::from_millis(1000),
        Some(Duration::from_millis(1200)),
    );
    assert_eq!(out.exit_code, 0, "{out:?}");
    let errors = errors_csv(&out);
    assert!(out.errors > 0, "no timeouts");
    assert!(
        errors.lines().skip(1).all(|l| l.contains(",timeout}")),
        "{errors}"
    );
    let second = second.expect("second node");
    assert!(
        list_keys(&second, b"test") > 0,
        "no write reached the new node"
    );
    second.shutdown().expect("shutdown");
}

#[test]
fn without_auto_reconnect_a_lost_node_crashes_the_worker_and_stops_the_run() {
    let (out, _, _dir) = run_across_a_restart(
        "no_reconnect",
        "{pb_connect_options, [{auto_reconnect, false}]}.\n",
        Duration::from_millis(1200),
        None,
    );
    assert_eq!(out.exit_code, 1, "{out:?}");
    let why = out.stopped.clone().expect("stopped early");
    assert!(
        why.contains("cannot connect to Riak PB") && why.contains("auto_reconnect"),
        "{why}"
    );
    let errors = errors_csv(&out);
    assert!(errors.contains(",crash}"), "{errors}");
    assert!(out.ok > 0, "{out:?}");
    let report = std::fs::read_to_string(&out.report).expect("report");
    assert!(report.contains("**stopped early**"), "{report}");
}
