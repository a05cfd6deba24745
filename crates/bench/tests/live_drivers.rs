//! The network drivers against a live node started in this process
//! (`ServerHandle::spawn`: memory backend, ring of 8, PB and HTTP on
//! ephemeral ports). Each run is short (a fixed number of keys or about
//! two seconds); the assertions are on outcomes, never on speed: ops
//! succeeded, no errors, and what was written reads back (values over PB
//! and HTTP, 2i terms through range queries). A run against a closed port
//! must fail before any load with a message naming the address.
//!
//! `put_unique_checkrepl` needs a passive cluster: node B, with node A
//! configured to replicate to it in real time (`[repl] sinks`), so the op
//! measures real replication; a node that never receives the writes shows
//! the `replication_timeout` path.

use basalt_bench::config::{BenchConfig, OpKind};
use basalt_bench::driver::Outcome;
use basalt_bench::netdriver::{NetShared, REPLICATION_TIMEOUT};
use basalt_bench::riakpb::{PbClient, RiakKv};
use basalt_bench::run::{run_files, RunOptions, RunOutcome};
use basalt_server::config::ReplConfig;
use basalt_server::{Config, ServerHandle};
use riak_pb as pb;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn node_config(data_dir: PathBuf) -> Config {
    Config {
        data_dir,
        pb_listen: "127.0.0.1:0".into(),
        cluster_listen: "127.0.0.1:0".into(),
        http_listen: "127.0.0.1:0".into(),
        ring_size: 8,
        backend: "memory".into(),
        ..Config::default()
    }
}

fn start() -> (ServerHandle, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = node_config(dir.path().join("node"));
    (ServerHandle::spawn(c).expect("spawn"), dir)
}

/// A node of its own cluster that replicates every write it coordinates,
/// in real time, to the cluster of `sink` (the server's `[repl] sinks`).
fn start_replicating_to(sink: &ServerHandle, dir: &Path) -> ServerHandle {
    let mut c = node_config(dir.join("active"));
    c.repl = ReplConfig {
        sinks: vec![sink.cluster_addr().to_string()],
        ..ReplConfig::default()
    };
    ServerHandle::spawn(c).expect("spawn the active node")
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

fn assert_clean(out: &RunOutcome, what: &str) {
    assert!(out.ok > 0, "{what}: no successful ops");
    assert_eq!(out.errors, 0, "{what}: errors, see {}", out.dir.display());
    assert_eq!(out.exit_code, 0, "{what}");
}

fn pb_client(h: &ServerHandle) -> PbClient {
    PbClient::connect(h.addr(), Duration::from_secs(2), Duration::from_secs(20)).expect("connect")
}

fn get_value(c: &mut PbClient, bucket: &[u8], key: &[u8]) -> Option<Vec<u8>> {
    let req = pb::RpbGetReq {
        bucket: bucket.to_vec(),
        key: key.to_vec(),
        ..Default::default()
    };
    c.get(&req)
        .expect("get")
        .map(|r| r.content[0].value.clone())
}

fn range_count(c: &mut PbClient, bucket: &[u8], field: &[u8], min: &[u8], max: &[u8]) -> usize {
    let req = pb::RpbIndexReq {
        bucket: bucket.to_vec(),
        index: field.to_vec(),
        qtype: pb::INDEX_RANGE,
        range_min: Some(min.to_vec()),
        range_max: Some(max.to_vec()),
        return_terms: Some(true),
        ..Default::default()
    };
    let r = c.index(&req).expect("index query");
    r.results.len() + r.keys.len()
}

#[test]
fn riakc_pb_driver_runs_every_op_and_its_writes_read_back() {
    let (h, dir) = start();
    let ips = format!(
        "{{riakc_pb_ips, [{{\"127.0.0.1\", {}}}]}}.\n",
        h.addr().port()
    );
    // 1. Load 100 keys of 500 bytes, then read them back over PB.
    let out = run(
        dir.path(),
        "pb_load",
        &format!(
            "{ips}{{driver, basho_bench_driver_riakc_pb}}.\n{{mode, max}}.\n{{concurrent, 2}}.\n\
             {{duration, infinity}}.\n{{riakc_pb_replies, 1}}.\n\
             {{key_generator, {{int_to_str, {{partitioned_sequential_int, 100}}}}}}.\n\
             {{value_generator, {{fixed_bin, 500}}}}.\n{{operations, [{{put, 1}}]}}.\n"
        ),
    )
    .expect("load run");
    assert_clean(&out, "load");
    assert_eq!(out.ok, 100);
    let mut c = pb_client(&h);
    for k in 0..100 {
        let v = get_value(&mut c, b"test", k.to_string().as_bytes());
        assert_eq!(v.map(|v| v.len()), Some(500), "key {k}");
    }
    // 2. Every key exists now: get_existing and update_existing must not fail.
    let out = run(
        dir.path(),
        "pb_existing",
        &format!(
            "{ips}{{driver, riakc_pb}}.\n{{mode, max}}.\n{{concurrent, 2}}.\n\
             {{basalt_duration_secs, 2}}.\n{{report_interval, 1}}.\n\
             {{key_generator, {{int_to_str, {{uniform_int, 0, 100}}}}}}.\n\
             {{value_generator, {{fixed_bin, 700}}}}.\n\
             {{operations, [{{get_existing, 3}}, {{update_existing, 1}}]}}.\n"
        ),
    )
    .expect("existing run");
    assert_clean(&out, "existing");
    // Updates carried the vclock: no siblings appeared.
    for k in 0..100 {
        let req = pb::RpbGetReq {
            bucket: b"test".to_vec(),
            key: k.to_string().into_bytes(),
            ..Default::default()
        };
        let r = c.get(&req).expect("get").expect("found");
        assert_eq!(r.content.len(), 1, "key {k} has siblings");
    }
    // 3. The full mix, 2i included, on a fresh bucket.
    let out = run(
        dir.path(),
        "pb_mix",
        &format!(
            "{ips}{{driver, basho_bench_driver_riakc_pb}}.\n{{riakc_pb_bucket, <<\"mix\">>}}.\n\
             {{mode, max}}.\n{{concurrent, 3}}.\n{{basalt_duration_secs, 2}}.\n{{report_interval, 1}}.\n\
             {{key_generator, {{int_to_str, {{pareto_int, 2000}}}}}}.\n\
             {{value_generator, {{fixed_bin, 1000}}}}.\n{{basalt_2i_max_results, 100}}.\n\
             {{operations, [{{get, 4}}, {{put, 1}}, {{update, 2}}, {{update_with2i, 2}}, \
             {{delete, 1}}, {{query_postcode, 1}}, {{query_dob, 1}}]}}.\n"
        ),
    )
    .expect("mix run");
    assert_clean(&out, "mix");
    assert!(range_count(&mut c, b"mix", b"postcode_bin", b"A", b"Z~") > 0);
    assert!(range_count(&mut c, b"mix", b"dateofbirth_bin", b"1900", b"2100") > 0);
    assert!(range_count(&mut c, b"mix", b"lastmodified_bin", b"2000", b"9999") > 0);
    h.shutdown().expect("shutdown");
}

#[test]
fn nhs_driver_runs_the_seed_ops() {
    let (h, dir) = start();
    let out = run(
        dir.path(),
        "nhs",
        &format!(
            "{{driver, basho_bench_driver_nhs}}.\n{{pb_ips, [\"127.0.0.1\"]}}.\n{{pb_port, {}}}.\n\
             {{node_name, testnode1}}.\n{{mode, max}}.\n{{concurrent, 2}}.\n\
             {{basalt_duration_secs, 2}}.\n{{report_interval, 1}}.\n\
             {{key_generator, {{eightytwenty_int, 1000}}}}.\n\
             {{value_generator, {{semi_compressible, 800, 200, 10, 0.2}}}}.\n\
             {{alwaysget, {{60, 5, key_order}}}}.\n{{unique, {{1000, skew_order}}}}.\n\
             {{riakc_pb_replies, 1}}.\n\
             {{operations, [{{alwaysget_pb, 46}}, {{alwaysget_updatewithout2i, 20}}, \
             {{alwaysget_updatewith2i, 5}}, {{put_unique, 15}}, {{get_unique, 19}}, \
             {{get_pb, 5}}, {{update_with2i, 5}}]}}.\n",
            h.addr().port()
        ),
    )
    .expect("nhs run");
    assert_clean(&out, "nhs");
    // alwaysget_pb was counted (not only silent) once the key sets grew.
    let summary = std::fs::read_to_string(out.dir.join("alwaysget-pb_latencies.csv"))
        .expect("alwaysget latencies");
    let gets: u64 = summary
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(2)?.trim().parse::<u64>().ok())
        .sum();
    assert!(gets > 0, "no counted alwaysget_pb:\n{summary}");
    let mut c = pb_client(&h);
    // put_unique wrote documents with a last-modified term; the record
    // updates wrote postcode and date-of-birth terms (YYYYMMDD).
    assert!(
        range_count(
            &mut c,
            b"domainDocument",
            b"lastmodified_bin",
            b"2000",
            b"9999"
        ) > 0
    );
    assert!(range_count(&mut c, b"domainRecord", b"postcode_bin", b"A", b"Z~") > 0);
    assert!(
        range_count(
            &mut c,
            b"domainRecord",
            b"dateofbirth_bin",
            b"19000101",
            b"21000101"
        ) > 0
    );
    h.shutdown().expect("shutdown");
}

#[test]
fn http_raw_driver_runs_and_its_writes_read_back() {
    let (h, dir) = start();
    let http = h.http_addr().expect("http listener");
    let ips = format!(
        "{{driver, basho_bench_driver_http_raw}}.\n{{http_raw_ips, [\"127.0.0.1\"]}}.\n\
         {{http_raw_port, {}}}.\n{{http_raw_path, \"/buckets/web/keys\"}}.\n",
        http.port()
    );
    let out = run(
        dir.path(),
        "http_load",
        &format!(
            "{ips}{{mode, max}}.\n{{concurrent, 2}}.\n{{duration, infinity}}.\n\
             {{key_generator, {{int_to_str, {{partitioned_sequential_int, 50}}}}}}.\n\
             {{value_generator, {{fixed_bin, 300}}}}.\n{{operations, [{{put, 1}}]}}.\n"
        ),
    )
    .expect("http load");
    assert_clean(&out, "http load");
    assert_eq!(out.ok, 50);
    let client = reqwest::blocking::Client::new();
    for k in 0..50 {
        let r = client
            .get(format!("http://{http}/buckets/web/keys/{k}"))
            .send()
            .expect("GET");
        assert_eq!(r.status().as_u16(), 200, "key {k}");
        assert!(r.headers().contains_key("x-riak-vclock"));
        assert_eq!(r.bytes().expect("body").len(), 300, "key {k}");
    }
    // The same keys over PB too (one node, two APIs).
    let mut c = pb_client(&h);
    assert_eq!(get_value(&mut c, b"web", b"7").map(|v| v.len()), Some(300));
    let out = run(
        dir.path(),
        "http_mix",
        &format!(
            "{ips}{{mode, max}}.\n{{concurrent, 2}}.\n{{basalt_duration_secs, 2}}.\n\
             {{report_interval, 1}}.\n\
             {{key_generator, {{int_to_str, {{uniform_int, 0, 50}}}}}}.\n\
             {{value_generator, {{fixed_bin, 400}}}}.\n\
             {{operations, [{{get, 3}}, {{put, 1}}, {{update, 2}}, {{delete, 1}}]}}.\n"
        ),
    )
    .expect("http mix");
    assert_clean(&out, "http mix");
    // Updates sent the vclock: a re-read key has one value, no siblings.
    let r = client
        .get(format!("http://{http}/buckets/web/keys/7"))
        .send()
        .expect("GET");
    assert_ne!(r.status().as_u16(), 300, "siblings on key 7");
    h.shutdown().expect("shutdown");
}

#[test]
fn a_closed_port_fails_fast_with_a_clear_message() {
    let dir = tempfile::tempdir().expect("tmp");
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let e = run(
        dir.path(),
        "closed",
        &format!(
            "{{driver, basho_bench_driver_riakc_pb}}.\n{{riakc_pb_ips, [{{127,0,0,1}}]}}.\n\
             {{riakc_pb_port, {port}}}.\n{{operations, [{{get, 1}}]}}.\n"
        ),
    )
    .expect_err("nothing listens");
    let msg = format!("{e:#}");
    assert!(
        msg.contains(&format!(
            "cannot reach Riak PB at 127.0.0.1:{port}: connection refused"
        )),
        "{msg}"
    );
    // Nothing was written: the check runs before the results directory.
    assert!(!dir.path().join("results").exists());

    let e = run(
        dir.path(),
        "closed_http",
        &format!(
            "{{driver, http_raw}}.\n{{http_raw_ips, [{{\"127.0.0.1\", {port}}}]}}.\n\
             {{operations, [{{get, 1}}]}}.\n"
        ),
    )
    .expect_err("nothing listens");
    assert!(
        format!("{e:#}").contains(&format!(
            "cannot reach Riak HTTP at 127.0.0.1:{port}: connection refused"
        )),
        "{e:#}"
    );

    // The binary exits non-zero with the message on stderr.
    let cfg = dir.path().join("closed.config");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_basalt-bench"))
        .arg(&cfg)
        .arg("-q")
        .arg("-d")
        .arg(dir.path().join("results"))
        .output()
        .expect("run basalt-bench");
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!(
            "cannot reach Riak PB at 127.0.0.1:{port}: connection refused"
        )),
        "{stderr}"
    );
}

fn seed_003() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/seed_003_riak291.config")
}

fn latency_n(dir: &Path, label: &str) -> u64 {
    let text = std::fs::read_to_string(dir.join(format!("{label}_latencies.csv")))
        .unwrap_or_else(|e| panic!("{label}_latencies.csv: {e}"));
    text.lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(2)?.trim().parse::<u64>().ok())
        .sum()
}

#[test]
fn nhs_checkrepl_measures_replication_to_a_sink_node() {
    // B is the passive cluster; A replicates every write it coordinates
    // to B (real-time replication of the server, nothing faked here).
    let (b, dir) = start();
    let a = start_replicating_to(&b, dir.path());
    let pb = |h: &ServerHandle| format!("[{{\"127.0.0.1\", {}}}]", h.addr().port());
    // 1. Seed 003's config as printed, with only the addresses, the
    //    duration and the workers overridden. put_unique_checkrepl is 2 of
    //    1000 ops, so a short run may draw none: this checks that the mix
    //    runs cleanly; step 2 measures.
    let over = dir.path().join("seed_003_override.config");
    std::fs::write(
        &over,
        format!(
            "{{pb_ips, {}}}.\n{{replpb_ips, {}}}.\n{{duration, 0.05}}.\n{{concurrent, 2}}.\n",
            pb(&a),
            pb(&b)
        ),
    )
    .expect("write");
    let out = run_files(
        &[seed_003(), over],
        &RunOptions {
            results_parent: dir.path().join("results"),
            name: Some("seed_003".into()),
            quiet: true,
            memory_limit: None,
        },
    )
    .expect("seed 003 run");
    assert_clean(&out, "seed 003");
    assert!(latency_n(&out.dir, "put-unique") > 0);
    assert!(out.dir.join("put-unique-checkrepl_latencies.csv").exists());

    // 2. put_unique and put_unique_checkrepl one to one: the report gives
    //    the replication delay.
    let out = run(
        dir.path(),
        "checkrepl",
        &format!(
            "{{driver, basho_bench_driver_nhs}}.\n{{pb_ips, {}}}.\n{{replpb_ips, {}}}.\n\
             {{mode, max}}.\n{{concurrent, 2}}.\n{{basalt_duration_secs, 3}}.\n\
             {{report_interval, 1}}.\n{{unique, {{8000, skew_order}}}}.\n\
             {{operations, [{{put_unique, 1}}, {{put_unique_checkrepl, 1}}]}}.\n",
            pb(&a),
            pb(&b)
        ),
    )
    .expect("checkrepl run");
    assert_clean(&out, "checkrepl");
    let d = out.replication.clone().expect("replication delay");
    assert!(d.put_n > 0 && d.check_n > 0, "{d:?}");
    assert_eq!(d.timeouts, 0);
    // Each checkrepl is a put_unique plus at least one GET on B (and the
    // replication between): over hundreds of ops its mean is the larger.
    assert!(d.check_mean > d.put_mean, "{d:?}");
    let report = std::fs::read_to_string(&out.report).expect("report");
    assert!(
        report.contains("## Replication delay")
            && report.contains("replication delay: put_unique_checkrepl mean − put_unique mean = ")
            && report
                .contains("replication delay: put_unique_checkrepl median − put_unique median = "),
        "{report}"
    );
    assert!(report.contains("passive cluster (replpb_ips"), "{report}");
    // The documents reached B by replication (the bench wrote only to A):
    // both ops' keys, all with their last-modified term.
    let docs = |h: &ServerHandle| {
        range_count(
            &mut pb_client(h),
            b"domainDocument",
            b"lastmodified_bin",
            b"2000",
            b"9999",
        )
    };
    let on_a = docs(&a);
    assert!(on_a as u64 >= d.put_n + d.check_n, "{on_a} on A, {d:?}");
    let deadline = Instant::now() + Duration::from_secs(30);
    while docs(&b) < on_a && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(docs(&b), on_a, "every document replicated to B");
    // The poll's resolution: one not-found GET round trip on B.
    let mut c = pb_client(&b);
    let req = pb::RpbGetReq {
        bucket: b"domainDocument".to_vec(),
        key: b"never-written".to_vec(),
        ..Default::default()
    };
    let t = Instant::now();
    for _ in 0..200 {
        assert!(c.get(&req).expect("get").is_none());
    }
    eprintln!(
        "replication delay over {} + {} ops: {}; a not-found GET on B takes {:.0} µs",
        d.put_n,
        d.check_n,
        d.lines().join("; "),
        t.elapsed().as_secs_f64() * 1e6 / 200.0
    );
    a.shutdown().expect("shutdown A");
    b.shutdown().expect("shutdown B");
}

#[test]
fn nhs_checkrepl_times_out_when_the_key_never_arrives() {
    // A replicates nowhere; C is a node that never receives A's writes.
    let (a, dir) = start();
    let c_dir = tempfile::tempdir().expect("tempdir");
    let c = ServerHandle::spawn(node_config(c_dir.path().join("node"))).expect("spawn C");
    let text = |bound_ms: u64| {
        format!(
            "{{driver, nhs}}.\n{{pb_ips, [{{\"127.0.0.1\", {}}}]}}.\n\
             {{replpb_ips, [{{\"127.0.0.1\", {}}}]}}.\n{{basalt_checkrepl_timeout, {bound_ms}}}.\n\
             {{unique, {{1000, key_order}}}}.\n{{mode, max}}.\n{{concurrent, 2}}.\n\
             {{basalt_duration_secs, 2}}.\n{{report_interval, 1}}.\n\
             {{operations, [{{put_unique, 1}}, {{put_unique_checkrepl, 1}}]}}.\n",
            a.addr().port(),
            c.addr().port()
        )
    };
    // 1. One driver by hand: the op ends with the named error once the
    //    bound has passed (a GET round trip later), and the same driver
    //    goes on.
    let (cfg, _) = BenchConfig::from_text(&text(300)).expect("cfg");
    let stop = Arc::new(AtomicBool::new(false));
    let shared = NetShared::new(&cfg, cfg.net.clone().expect("net"), stop.clone());
    let mut drv = shared.driver(&cfg, 1).expect("driver");
    let t = Instant::now();
    let e = drv
        .run(OpKind::PutUniqueCheckRepl, b"", b"")
        .expect_err("never replicated");
    let took = t.elapsed();
    assert_eq!(e.reason, REPLICATION_TIMEOUT);
    assert!(
        took >= Duration::from_millis(300) && took < Duration::from_secs(20),
        "{took:?}"
    );
    assert_eq!(
        drv.run(OpKind::PutUnique, b"", b"").expect("put_unique"),
        Outcome::Done
    );
    // The end of the run (the stop flag) cuts the polling short: the op
    // is dropped uncounted (silent), not reported as a timeout.
    let (cfg, _) = BenchConfig::from_text(&text(60_000)).expect("cfg");
    let shared = NetShared::new(&cfg, cfg.net.clone().expect("net"), stop.clone());
    let mut drv = shared.driver(&cfg, 2).expect("driver");
    let setter = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(200));
            stop.store(true, Ordering::SeqCst);
        })
    };
    let t = Instant::now();
    assert_eq!(
        drv.run(OpKind::PutUniqueCheckRepl, b"", b"")
            .expect("cut by the stop"),
        Outcome::Silent
    );
    assert!(t.elapsed() < Duration::from_secs(30), "{:?}", t.elapsed());
    setter.join().expect("setter");

    // 2. A whole run: every checkrepl is a replication_timeout, the
    //    workers keep going (put_unique ops between them), the run ends on
    //    time and the report has no replication figure (nothing measured).
    let t = Instant::now();
    let out = run(dir.path(), "timeout", &text(200)).expect("timeout run");
    // A 2 s run: the bound only catches a worker stuck polling (a loaded
    // 2-core machine takes several seconds to start, report and chart).
    assert!(t.elapsed() < Duration::from_secs(40), "{:?}", t.elapsed());
    assert_eq!(out.exit_code, 0);
    assert!(out.errors > 0, "no timeouts");
    assert_eq!(latency_n(&out.dir, "put-unique-checkrepl"), 0);
    assert!(latency_n(&out.dir, "put-unique") > out.errors);
    let errors = std::fs::read_to_string(out.dir.join("errors.csv")).expect("errors.csv");
    assert_eq!(errors.lines().count(), 2, "{errors}");
    assert!(
        errors.contains(&format!(
            "\"{{{{put_unique_checkrepl,put_unique_checkrepl}},{REPLICATION_TIMEOUT}}}\",\"{}\"",
            out.errors
        )),
        "{errors}"
    );
    assert!(out.replication.is_none());

    // 3. A passive cluster that cannot be reached stops the run before any
    //    load, named as such.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        l.local_addr().expect("addr").port()
    };
    let closed = text(200).replace(
        &format!("{{\"127.0.0.1\", {}}}", c.addr().port()),
        &format!("{{\"127.0.0.1\", {port}}}"),
    );
    let e = run(dir.path(), "closed_passive", &closed).expect_err("passive closed");
    assert!(
        format!("{e:#}").contains(&format!(
            "cannot reach Riak PB of the passive cluster (replpb_ips) at 127.0.0.1:{port}: \
             connection refused"
        )),
        "{e:#}"
    );
    a.shutdown().expect("shutdown A");
    c.shutdown().expect("shutdown C");
}

/// `riakc_pb` with `basalt_pb_cacertfile` / `basalt_pb_user` /
/// `basalt_pb_password` against a node with security on: every worker
/// STARTTLSes and authenticates, the writes land; a wrong password stops
/// the run before any load with the node's error.
#[test]
fn riakc_pb_driver_over_tls_with_a_password() {
    use basalt_server::security::certs::{self, Validity};
    let dir = tempfile::tempdir().expect("tempdir");
    let ca = certs::new_ca("bench CA", Validity::days(1)).expect("ca");
    let n = certs::node_cert(&ca, "node1", &[], Validity::days(1)).expect("node cert");
    let p = |f: &str| dir.path().join(f);
    std::fs::write(p("ca.pem"), &ca.cert_pem).expect("write");
    std::fs::write(p("node.pem"), &n.cert_pem).expect("write");
    std::fs::write(p("node-key.pem"), &n.key_pem).expect("write");
    let h = ServerHandle::spawn(Config {
        tls_certfile: p("node.pem").display().to_string(),
        tls_keyfile: p("node-key.pem").display().to_string(),
        ..node_config(p("node"))
    })
    .expect("spawn");
    let mut admin = PbClient::connect(
        h.cluster_addr(),
        Duration::from_secs(2),
        Duration::from_secs(20),
    )
    .expect("admin connect");
    for line in [
        "security add-user bench password=b3nch",
        "security add-source all 127.0.0.1/32 password",
        "security grant riak_kv.get,riak_kv.put on any to bench",
        "security enable",
    ] {
        let reply = admin
            .call_raw(pb::code::basalt::ADMIN_CLUSTER_REQ, line.as_bytes())
            .expect(line);
        assert_eq!(reply.0, pb::code::basalt::ADMIN_CLUSTER_RESP, "{line}");
    }
    let config = |password: &str| {
        format!(
            "{{riakc_pb_ips, [{{\"127.0.0.1\", {}}}]}}.\n{{driver, basho_bench_driver_riakc_pb}}.\n\
             {{mode, max}}.\n{{concurrent, 2}}.\n{{duration, infinity}}.\n{{riakc_pb_replies, 1}}.\n\
             {{basalt_pb_cacertfile, \"{}\"}}.\n{{basalt_pb_user, \"bench\"}}.\n\
             {{basalt_pb_password, \"{password}\"}}.\n\
             {{key_generator, {{int_to_str, {{partitioned_sequential_int, 50}}}}}}.\n\
             {{value_generator, {{fixed_bin, 100}}}}.\n{{operations, [{{put, 1}}, {{get, 1}}]}}.\n",
            h.addr().port(),
            p("ca.pem").display()
        )
    };
    let out = run(dir.path(), "pb_tls", &config("b3nch")).expect("tls run");
    assert_clean(&out, "tls + password");
    assert_eq!(out.ok, 50);
    // The same with riakc's spelling, in pb_connect_options.
    let riakc = config("b3nch")
        .lines()
        .filter(|l| !l.starts_with("{basalt_pb_"))
        .collect::<Vec<_>>()
        .join("\n")
        + &format!(
            "\n{{pb_connect_options, [{{auto_reconnect, true}}, \
             {{credentials, \"bench\", \"b3nch\"}}, {{cacertfile, \"{}\"}}]}}.\n",
            p("ca.pem").display()
        );
    let out = run(dir.path(), "pb_tls_riakc", &riakc).expect("riakc spelling");
    assert_clean(&out, "tls + password, riakc's spelling");
    assert_eq!(out.ok, 50);
    let err = run(dir.path(), "pb_tls_bad", &config("wrong")).expect_err("wrong password");
    assert!(
        format!("{err:#}").contains("Authentication failed"),
        "{err:#}"
    );
    h.shutdown().expect("shutdown");
}
