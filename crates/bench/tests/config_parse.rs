//! Config parsing against real basho_bench configs: the Riak 2.9.1
//! volume-test config printed in seed 003 (copied into `tests/data/`) must
//! parse with basho_bench's meaning (its NHS-driver keys known, its
//! operations all accepted, `put_unique_checkrepl` included), and an
//! override file giving only the addresses (later file wins) makes it
//! runnable here (`live_drivers.rs` runs it).
//! basho_bench's own `examples/riakc_pb.config` (copied into `tests/data/`)
//! must load with no warning, its `pb_connect_options` and
//! `pb_timeout_listkeys` read with upstream's meaning.
//! Also: malformed files give the file and line; unknown generators,
//! drivers and operations list the valid ones; basho_bench's drivers and
//! operations that are not run here are refused with why.

use basalt_bench::config::{BenchConfig, DriverKind, Mode, OpKind, RawConfig};
use basalt_bench::keygen::KeyGenSpec;
use basalt_bench::netcfg::{NetOptions, PbConnect, DEFAULT_CHECKREPL_TIMEOUT};
use basalt_bench::valgen::ValGenSpec;
use std::path::PathBuf;
use std::time::Duration;

fn data(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

#[test]
fn seed_003_config_parses_with_basho_bench_meaning() {
    let raw = RawConfig::from_files(&[data("seed_003_riak291.config")]).expect("seed 003 parses");
    assert_eq!(raw.get("duration").and_then(|t| t.as_int()), Some(2880));
    assert_eq!(raw.get("concurrent").and_then(|t| t.as_int()), Some(100));
    assert!(raw.unknown_keys().is_empty(), "{:?}", raw.unknown_keys());
    // Verbatim, only the elided address lists `[ ... ]` stop it, each
    // refused with its key and line.
    let e = raw.build().expect_err("elided pb_ips");
    let msg = e.to_string();
    assert!(
        msg.starts_with("pb_ips: expected a list") && msg.contains("seed_003_riak291.config:20"),
        "{msg}"
    );
    let dir = tempfile::tempdir().expect("tmp");
    let ips = dir.path().join("ips.config");
    std::fs::write(&ips, "{pb_ips, [\"127.0.0.1\"]}.\n").expect("write");
    // put_unique_checkrepl is among the seed's operations, so replpb_ips is
    // read too.
    let e = BenchConfig::from_files(&[data("seed_003_riak291.config"), ips.clone()])
        .expect_err("elided replpb_ips");
    let msg = e.to_string();
    assert!(
        msg.starts_with("replpb_ips: expected a list")
            && msg.contains("seed_003_riak291.config:21"),
        "{msg}"
    );
    // With the two address lists given (the only override), the seed's
    // config builds as it stands, put_unique_checkrepl included.
    std::fs::write(
        &ips,
        "{pb_ips, [\"10.0.0.1\", \"10.0.0.2\"]}.\n{replpb_ips, [\"10.0.1.1\"]}.\n",
    )
    .expect("write");
    let (cfg, warnings) = BenchConfig::from_files(&[data("seed_003_riak291.config"), ips.clone()])
        .expect("nhs config builds");
    assert_eq!(cfg.driver, DriverKind::Nhs);
    assert!(warnings.is_empty(), "{warnings:?}");
    let ops: Vec<(OpKind, u32)> = cfg.operations.iter().map(|o| (o.op, o.weight)).collect();
    assert_eq!(
        ops,
        vec![
            (OpKind::AlwaysGetPb, 460),
            (OpKind::AlwaysGetUpdateWithout2i, 200),
            (OpKind::PutUnique, 148),
            (OpKind::PutUniqueCheckRepl, 2),
            (OpKind::GetUnique, 190)
        ]
    );
    let Some(NetOptions::Nhs(o)) = &cfg.net else {
        panic!("nhs options")
    };
    assert_eq!(o.targets.len(), 2);
    assert_eq!(o.repl_targets.len(), 1);
    assert_eq!(o.repl_targets[0].to_string(), "10.0.1.1:8087");
    assert_eq!(o.checkrepl_timeout, DEFAULT_CHECKREPL_TIMEOUT);

    // A later file overrides the driver and operations.
    let over = dir.path().join("override.config");
    std::fs::write(
        &over,
        "{driver, basalt_embedded}.\n{operations, [{get, 460}, {update, 200}, {put, 148}]}.\n",
    )
    .expect("write");
    let (cfg, warnings) = BenchConfig::from_files(&[data("seed_003_riak291.config"), over])
        .expect("merged config builds");
    assert_eq!(cfg.mode, Mode::Max);
    assert_eq!(cfg.duration, Some(Duration::from_secs(2880 * 60)));
    assert_eq!(cfg.report_interval, Duration::from_secs(10));
    assert_eq!(cfg.concurrent, 100);
    assert_eq!(cfg.driver, DriverKind::Embedded);
    assert_eq!(cfg.key_generator, KeyGenSpec::EightyTwentyInt(100_000_000));
    assert_eq!(
        cfg.value_generator,
        ValGenSpec::SemiCompressible {
            min: 8000,
            mean: 2000.0,
            xl_mult: 10.0,
            xl_prob: 0.2
        }
    );
    assert_eq!(cfg.operations.len(), 3);
    assert!(warnings.is_empty(), "{warnings:?}");
}

#[test]
fn every_example_config_is_valid() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("examples dir") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "config") {
            let (_, warnings) =
                BenchConfig::from_files(&[&p]).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert!(warnings.is_empty(), "{}: {warnings:?}", p.display());
            n += 1;
        }
    }
    assert!(
        n >= 6,
        "expected the quickstart and the scaled seed tests, found {n}"
    );
}

/// `scripts/seed-suite.sh --cluster`'s configs, with the addresses
/// `scripts/seed-cluster.py` adds, and the floor's `ping` op.
#[test]
fn every_cluster_seed_suite_config_is_valid() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../examples/seed-suite/cluster");
    let tmp = tempfile::tempdir().expect("tempdir");
    let nodes = tmp.path().join("nodes.config");
    std::fs::write(
        &nodes,
        "{riakc_pb_ips, [{\"127.0.0.1\", 18087}]}.\n{pb_ips, [{\"127.0.0.1\", 18087}]}.\n\
         {replpb_ips, [{\"127.0.0.1\", 18088}]}.\n{basalt_duration_secs, 60}.\n",
    )
    .expect("write");
    let mut n = 0;
    for e in std::fs::read_dir(&dir).expect("examples/seed-suite/cluster") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "config") {
            let (cfg, warnings) = BenchConfig::from_files(&[&p, &nodes])
                .unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert!(cfg.driver.is_network(), "{}", p.display());
            // The override names both drivers' keys; each driver ignores
            // the other's with a warning, nothing else.
            for w in &warnings {
                assert!(w.contains("ips"), "{}: {w}", p.display());
            }
            n += 1;
        }
    }
    assert_eq!(n, 5, "8kb_sync, 8kb_nosync, 8kb_2i, nhs_mix, testpilot");
    let ping = tmp.path().join("ping.config");
    std::fs::write(
        &ping,
        "{driver, basho_bench_driver_riakc_pb}.\n{operations, [{ping, 1}]}.\n",
    )
    .expect("write");
    let (cfg, _) = BenchConfig::from_files(&[&ping]).expect("ping parses");
    assert_eq!(cfg.operations[0].op, OpKind::Ping);
}

#[test]
fn every_live_example_config_is_valid() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples");
    let mut names = Vec::new();
    for e in std::fs::read_dir(&dir).expect("examples dir") {
        let p = e.expect("entry").path();
        if p.extension().is_some_and(|x| x == "config") {
            let (cfg, warnings) =
                BenchConfig::from_files(&[&p]).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
            assert!(warnings.is_empty(), "{}: {warnings:?}", p.display());
            assert!(cfg.driver.is_network(), "{}", p.display());
            names.push(p.file_name().map(|n| n.to_string_lossy().into_owned()));
        }
    }
    for want in [
        "live_pb_quick.config",
        "live_seed_291.config",
        "live_pareto_8kb.config",
        "live_2i.config",
    ] {
        assert!(names.contains(&Some(want.to_string())), "{want} missing");
    }
}

#[test]
fn malformed_file_reports_its_line() {
    let dir = tempfile::tempdir().expect("tmp");
    let p = dir.path().join("bad.config");
    std::fs::write(
        &p,
        "{mode, max}.\n% comment\n{duration, 1}\n{concurrent, 2}.\n",
    )
    .expect("write");
    let e = BenchConfig::from_files(&[&p]).expect_err("missing dot");
    let msg = e.to_string();
    assert!(msg.contains("bad.config:4"), "{msg}");
}

#[test]
fn bad_names_list_the_valid_ones() {
    let e = BenchConfig::from_text("{key_generator, {zipfian_int, 10}}.").expect_err("keygen");
    assert!(
        e.to_string()
            .contains("valid: sequential_int, partitioned_sequential_int, uniform_int"),
        "{e}"
    );
    let e = BenchConfig::from_text("{value_generator, {random_bin, 10}}.").expect_err("valgen");
    assert!(
        e.to_string()
            .contains("valid: fixed_bin, fixed_char, exponential_bin"),
        "{e}"
    );
    let e = BenchConfig::from_text("{driver, basho_bench_driver_riakc_java}.").expect_err("driver");
    assert!(
        e.to_string()
            .contains("valid: basalt_embedded, null, riakc_pb, nhs, http_raw"),
        "{e}"
    );
    let e = BenchConfig::from_text("{operations, [{get_unique, 1}]}.").expect_err("op");
    assert!(
        e.to_string()
            .contains("valid: get, put, update, delete, head, index_query"),
        "{e}"
    );
    let e = BenchConfig::from_text("{basalt_backend, eleveldb}.").expect_err("backend");
    assert!(
        e.to_string()
            .contains("unknown backend eleveldb; valid: leveled, bitcask"),
        "{e}"
    );
    assert!(BenchConfig::from_text("{basalt_backend, bitcask}.").is_ok());
    let e = BenchConfig::from_files(&["/nonexistent/x.config"]).expect_err("io");
    assert!(e.to_string().contains("/nonexistent/x.config"), "{e}");
}

#[test]
fn basho_bench_riakc_pb_example_loads_without_a_warning() {
    let (cfg, warnings) =
        BenchConfig::from_files(&[data("riakc_pb.config")]).expect("the example loads");
    assert!(warnings.is_empty(), "{warnings:?}");
    assert_eq!(cfg.driver, DriverKind::RiakcPb);
    assert_eq!(cfg.mode, Mode::Max);
    assert_eq!(cfg.concurrent, 10);
    let ops: Vec<OpKind> = cfg.operations.iter().map(|o| o.op).collect();
    assert_eq!(ops, vec![OpKind::Get, OpKind::Update]);
    let Some(NetOptions::RiakcPb(o)) = cfg.net else {
        panic!("riakc_pb options")
    };
    // {pb_connect_options, [{auto_reconnect, true}]}: the driver's default.
    assert_eq!(o.connect, PbConnect::default());
    assert!(o.connect.auto_reconnect && !o.connect.queue_if_disconnected);
    assert_eq!(o.timeout_general, Duration::from_millis(30_000));
    assert_eq!(o.timeout_read, Duration::from_millis(5_000));
    assert_eq!(o.timeout_write, Duration::from_millis(5_000));
    assert_eq!(o.timeout_listkeys, Duration::from_millis(50_000));
    // Commented out in the example: the general timeout.
    assert_eq!(o.timeout_mapreduce, Duration::from_millis(30_000));
    assert!(o.security.is_none());
}

#[test]
fn listkeys_runs_on_riakc_pb_with_its_timeout() {
    let (cfg, w) = BenchConfig::from_text(
        "{driver, basho_bench_driver_riakc_pb}.\n{pb_timeout_general, 900}.\n\
         {operations, [{listkeys, 1}, {get, 9}]}.",
    )
    .expect("listkeys");
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(cfg.operations[0].op, OpKind::ListKeys);
    let Some(NetOptions::RiakcPb(o)) = cfg.net else {
        panic!("riakc_pb options")
    };
    // pb_timeout_listkeys and pb_timeout_mapreduce default to the general.
    assert_eq!(o.timeout_listkeys, Duration::from_millis(900));
    assert_eq!(o.timeout_mapreduce, Duration::from_millis(900));
    for bad in ["{pb_timeout_listkeys, 0}.", "{pb_timeout_mapreduce, soon}."] {
        let e = BenchConfig::from_text(&format!(
            "{{driver, riakc_pb}}.\n{{operations, [{{listkeys, 1}}]}}.\n{bad}"
        ))
        .expect_err(bad)
        .to_string();
        assert!(
            e.contains("expected milliseconds") && e.contains("<text>:3"),
            "{e}"
        );
    }
    // Only the riakc_pb driver lists keys.
    let e = BenchConfig::from_text("{driver, http_raw}.\n{operations, [{listkeys, 1}]}.")
        .expect_err("listkeys over http_raw");
    assert!(e.to_string().contains("unknown operation listkeys"), "{e}");
}

#[test]
fn upstream_ops_not_run_here_say_why() {
    for (op, want) in [
        ("search", "Riak Search"),
        ("search_interval", "Riak Search"),
        ("mr_bucket_js", "MapReduce"),
        ("mr_keylist_erlang", "MapReduce"),
        ("counter_incr", "Riak 1.4 counters"),
        ("counter_val", "Riak 1.4 counters"),
        ("{counter, increment}", "Riak data types"),
        ("{team, player, addition}", "Riak data types"),
        ("{game, completed}", "Riak data types"),
    ] {
        for entry in [format!("{{{op}, 1}}"), format!("{{lbl, {op}, 1}}")] {
            let text = format!(
                "{{driver, basho_bench_driver_riakc_pb}}.\n{{operations, [{{get, 1}}, {entry}]}}."
            );
            let e = BenchConfig::from_text(&text).expect_err(&text).to_string();
            let name = op.replace(' ', "");
            assert!(
                e.starts_with(&format!("operations: operation {name} is not supported: "))
                    && e.contains(want)
                    && e.ends_with("(<text>:2)"),
                "{text}: {e}"
            );
        }
    }
    // A tuple op no driver has is just unknown.
    let e = BenchConfig::from_text("{driver, riakc_pb}.\n{operations, [{{get, fast}, 1}]}.")
        .expect_err("tuple op")
        .to_string();
    assert!(
        e.contains("unknown operation {get,fast}; valid: get"),
        "{e}"
    );
    // basho_bench's null driver ops run on the null driver.
    let (cfg, _) = BenchConfig::from_text(
        "{driver, basho_bench_driver_null}.\n{operations, [{do_something, 7}, {an_error, 1}, \
         {another_error, 2}, {absolutely_nothing, 1}, {do_something_else, 1}]}.",
    )
    .expect("null_err_test's ops");
    assert_eq!(cfg.operations[2].op, OpKind::AnotherError);
    let e = BenchConfig::from_text("{driver, null}.\n{operations, [{print_key, 1}]}.")
        .expect_err("print_key")
        .to_string();
    assert!(
        e.contains("operation print_key is not supported: they print"),
        "{e}"
    );
}

#[test]
fn upstream_drivers_not_implemented_say_why() {
    for (driver, want) in [
        ("basho_bench_driver_cassandra_cql", "Cassandra (CQL)"),
        ("basho_bench_driver_bitcask", "{basalt_backend, bitcask}"),
        ("basho_bench_driver_riakc_java", "use riakc_pb"),
        ("basho_bench_driver_http", "http_raw runs Riak's HTTP API"),
        ("basho_bench_driver_2i", "query_postcode"),
        ("basho_bench_driver_cs", "S3 API"),
        ("eleveldb", "basalt_embedded"),
    ] {
        let e = BenchConfig::from_text(&format!("{{driver, {driver}}}."))
            .expect_err(driver)
            .to_string();
        assert!(
            e.starts_with(&format!(
                "driver: {driver} is basho_bench's, not basalt bench's: "
            )) && e.contains(want)
                && e.contains("; valid: basalt_embedded, null, riakc_pb, nhs, http_raw"),
            "{e}"
        );
    }
    let e = BenchConfig::from_text("{driver, basho_bench_driver_frobnicate}.")
        .expect_err("unknown")
        .to_string();
    assert!(
        e.starts_with("driver: unknown driver basho_bench_driver_frobnicate; valid: "),
        "{e}"
    );
}

#[test]
fn pb_connect_options_reach_the_driver_and_merge_with_basalt_security() {
    let base = "{driver, riakc_pb}.\n{operations, [{get, 1}]}.\n";
    let (cfg, w) = BenchConfig::from_text(&format!(
        "{base}{{pb_connect_options, [queue_if_disconnected, {{keepalive, true}}, \
         {{connect_timeout, 500}}]}}."
    ))
    .expect("options");
    assert!(w.is_empty(), "{w:?}");
    let Some(NetOptions::RiakcPb(o)) = cfg.net else {
        panic!("riakc_pb options")
    };
    assert!(o.connect.auto_reconnect && o.connect.queue_if_disconnected && o.connect.keepalive);
    assert_eq!(o.connect.connect_timeout, Duration::from_millis(500));
    // Without auto_reconnect: riakc's false, and a warning says so.
    let (cfg, w) =
        BenchConfig::from_text(&format!("{base}{{pb_connect_options, []}}.")).expect("empty list");
    assert!(
        w.len() == 1 && w[0].contains("riakc's default false") && w[0].contains("<text>:3"),
        "{w:?}"
    );
    let Some(NetOptions::RiakcPb(o)) = cfg.net else {
        panic!("riakc_pb options")
    };
    assert!(!o.connect.auto_reconnect);
    // The security spellings: errors before any file is read.
    for (text, want) in [
        (
            "{pb_connect_options, [auto_reconnect, {credentials, \"u\", \"p\"}]}.\n\
             {basalt_pb_user, \"v\"}.\n{basalt_pb_password, \"p\"}.",
            "basalt_pb_password differ",
        ),
        (
            "{pb_connect_options, [auto_reconnect, {credentials, \"u\", \"p\"}, \
             {cacertfile, \"/a.pem\"}]}.\n{basalt_pb_cacertfile, \"/b.pem\"}.",
            "{cacertfile, \"/a.pem\"} and basalt_pb_cacertfile \"/b.pem\" differ",
        ),
        (
            "{pb_connect_options, [auto_reconnect, {cacertfile, \"/a.pem\"}]}.",
            "riakc uses TLS only with credentials",
        ),
        (
            "{pb_connect_options, [auto_reconnect, {credentials, \"u\", \"p\"}]}.",
            "needs TLS",
        ),
    ] {
        let e = BenchConfig::from_text(&format!("{base}{text}"))
            .expect_err(text)
            .to_string();
        assert!(
            e.starts_with("pb_connect_options: ") && e.contains(want) && !e.contains("\"p\""),
            "{text}: {e}"
        );
    }
    // Agreeing spellings go on to read the CA file (missing here).
    let e = BenchConfig::from_text(&format!(
        "{base}{{pb_connect_options, [auto_reconnect, {{credentials, \"u\", \"p\"}}, \
         {{cacertfile, \"/nonexistent/ca.pem\"}}]}}.\n{{basalt_pb_user, \"u\"}}.\n\
         {{basalt_pb_password, \"p\"}}.\n{{basalt_pb_cacertfile, \"/nonexistent/ca.pem\"}}."
    ))
    .expect_err("no CA file")
    .to_string();
    assert!(e.contains("reading /nonexistent/ca.pem"), "{e}");
}

/// Every top-level key of basho_bench's `examples/*.config` (commented-out
/// ones included), as of basho/basho_bench aa66398: each is read, ignored
/// knowingly, or named with why it is not used (never "unknown").
const BASHO_BENCH_EXAMPLE_KEYS: &[&str] = &[
    "be_backend_mod",
    "be_config",
    "be_disable_uses_r_object",
    "bitcask_dir",
    "bitcask_flags",
    "carbon_batch_size",
    "carbon_keep_connect",
    "cassandra_column",
    "cassandra_columnfamily",
    "cassandra_composite_partition_column",
    "cassandra_composite_row_column",
    "cassandra_consistencylevel",
    "cassandra_hosts",
    "cassandra_ips",
    "cassandra_keyspace",
    "cassandra_port",
    "cassandra_range_query_num_rows",
    "cassandra_read_consistency",
    "cassandra_write_consistency",
    "cluster_actors",
    "code_paths",
    "concurrent",
    "cookie",
    "cs2_bucket_prefix",
    "cs2_host_base",
    "cs2_hosts",
    "cs2_port",
    "cs2_user_count",
    "cs2_user_prefix",
    "cs_access_key",
    "cs_bucket",
    "cs_disconnect_frequency",
    "cs_display_name",
    "cs_http_proxy_host",
    "cs_http_proxy_port",
    "cs_measurement_units",
    "cs_raw_ip",
    "cs_raw_port",
    "cs_request_timeout",
    "cs_secret_key",
    "disable_sequential_int_progress_report",
    "distribute_work",
    "driver",
    "duration",
    "eleveldb_dir",
    "eleveldb_num_instances",
    "enforce_keyrange",
    "generators",
    "headers",
    "hibari_client_type",
    "hibari_native_1node",
    "hibari_native_cookie",
    "hibari_native_my_sname",
    "hibari_native_ticktime",
    "hibari_server_service",
    "hibari_server_tcp_port",
    "hibari_servers",
    "hibari_table",
    "http_ips",
    "http_port",
    "http_raw_append_headers",
    "http_raw_port",
    "http_search_generator",
    "http_timeout_general",
    "innostore_config",
    "key_generator",
    "log_level",
    "measurement_driver",
    "measurements",
    "mode",
    "nodes",
    "operations",
    "pb_connect_options",
    "pb_ips",
    "pb_replies",
    "pb_timeout_general",
    "pb_timeout_listkeys",
    "pb_timeout_mapreduce",
    "pb_timeout_read",
    "pb_timeout_write",
    "query_step_interval",
    "remote_nodes",
    "report_interval",
    "riakc_java_nodes",
    "riakc_java_pbc_buffer",
    "riakc_java_replies",
    "riakc_java_transport",
    "riakc_pb_bucket",
    "riakc_pb_content_type",
    "riakc_pb_ips",
    "riakc_pb_keylist_length",
    "riakc_pb_preloaded_keys",
    "riakc_pb_replies",
    "riakc_pb_search_queries",
    "riakclient_mynode",
    "riakclient_nodes",
    "riakclient_replies",
    "rng_seed",
    "shortcut_backend",
    "shortcut_backend_flags",
    "shortcut_bucket",
    "shortcut_data_dir",
    "shortcut_n_val",
    "shortcut_ring_creation_size",
    "shortcut_store_riak_object",
    "source_dir",
    "targets",
    "test_dir",
    "value_generator",
    "value_generator_blob_file",
    "values",
];

#[test]
fn every_key_of_basho_bench_examples_is_read_ignored_or_explained() {
    let mut raw = RawConfig::default();
    let text: String = BASHO_BENCH_EXAMPLE_KEYS
        .iter()
        .map(|k| format!("{{{k}, 1}}.\n"))
        .collect();
    raw.add_text(&text, "keys").expect("syntax");
    assert!(raw.unknown_keys().is_empty(), "{:?}", raw.unknown_keys());
    let explained: Vec<String> = raw.upstream_keys().into_iter().map(|(k, _)| k).collect();
    assert!(
        explained.contains(&"cassandra_hosts".to_string()),
        "{explained:?}"
    );
    assert!(!explained.contains(&"pb_connect_options".to_string()));
}
