//! Unit tests of the configuration: basho_bench's defaults, later files
//! overriding earlier ones, unknown-key warnings, errors that name the key
//! and the line, and the worker seeds.

use super::*;
use crate::keygen::KeyGenSpec;
use crate::valgen::ValGenSpec;
use std::time::Duration;

#[test]
fn defaults_follow_basho_bench() {
    let (c, w) = BenchConfig::from_text("").expect("ok");
    assert_eq!(c.mode, Mode::Rate(5.0));
    assert_eq!(c.duration, Some(Duration::from_secs(300)));
    assert_eq!(c.report_interval, Duration::from_secs(10));
    assert_eq!(c.concurrent, 3);
    assert_eq!(c.operations.len(), 3);
    assert_eq!(
        c.key_generator,
        KeyGenSpec::UniformInt {
            start: 1,
            n: 100_000
        }
    );
    assert_eq!(c.value_generator, ValGenSpec::FixedBin(100));
    assert_eq!(c.rng_seed, RngSeed::Fixed(42, 23, 12));
    assert!(!c.shutdown_on_error);
    assert!(w.is_empty());
}

#[test]
fn disk_min_free_pct_takes_a_fraction_and_refuses_the_rest() {
    let (c, w) = BenchConfig::from_text("{basalt_disk_min_free_pct, 0.25}.").expect("ok");
    assert_eq!(c.disk_min_free_pct, Some(0.25));
    assert!(w.is_empty(), "{w:?}");
    let (c, _) = BenchConfig::from_text("{basalt_disk_min_free_pct, 3}.").expect("ok");
    assert_eq!(c.disk_min_free_pct, Some(3.0));
    assert_eq!(
        BenchConfig::from_text("").expect("ok").0.disk_min_free_pct,
        None
    );
    for bad in ["101", "100.5", "full"] {
        let e = BenchConfig::from_text(&format!("{{basalt_disk_min_free_pct, {bad}}}."))
            .expect_err(bad);
        assert!(e.to_string().contains("basalt_disk_min_free_pct"), "{e}");
    }
}

#[test]
fn later_text_overrides_and_unknown_warns() {
    let mut raw = RawConfig::default();
    raw.add_text("{mode, max}.\n{concurrent, 8}.\n{frobnicate, 1}.", "a")
        .expect("ok");
    raw.add_text(
        "{concurrent, 2}.\n{mode, {rate, max}}.\n{log_level, info}.",
        "b",
    )
    .expect("ok");
    let (c, w) = raw.build().expect("ok");
    assert_eq!(c.concurrent, 2);
    assert_eq!(c.mode, Mode::Max);
    assert_eq!(w.len(), 1);
    assert!(w[0].contains("frobnicate"), "{w:?}");
}

#[test]
fn bad_values_name_the_key_and_line() {
    let e = BenchConfig::from_text("{mode, max}.\n{concurrent, zero}.").expect_err("bad");
    let s = e.to_string();
    assert!(s.contains("concurrent") && s.contains("<text>:2"), "{s}");
    let e = BenchConfig::from_text("{driver, basho_bench_driver_http}.").expect_err("bad");
    assert!(
        e.to_string()
            .contains("valid: basalt_embedded, null, riakc_pb"),
        "{e}"
    );
    let e = BenchConfig::from_text("{operations, [{get, 1}, {frob, 2}]}.").expect_err("bad");
    assert!(e.to_string().contains("valid: get, put, update"), "{e}");
    let e = BenchConfig::from_text("{basalt_backend, leveldb}.").expect_err("bad");
    assert!(
        e.to_string()
            .contains("unknown backend leveldb; valid: leveled, bitcask"),
        "{e}"
    );
}

/// The ledger's shape: sizes and counts parse, a count of 0 names its key.
#[test]
fn ledger_shape_options() {
    let text =
        "{basalt_memtable_bytes, \"16M\"}.\n{basalt_l0_merge_trigger, 8}.\n{basalt_l1_files, 4}.";
    let (c, _) = BenchConfig::from_text(text).expect("ok");
    assert_eq!(
        (c.memtable_bytes, c.l0_merge_trigger, c.l1_files),
        (Some(16 << 20), Some(8), Some(4))
    );
    let (c, _) = BenchConfig::from_text("").expect("ok");
    assert_eq!(
        (c.memtable_bytes, c.l0_merge_trigger, c.l1_files),
        (None, None, None)
    );
    for key in ["basalt_l0_merge_trigger", "basalt_l1_files"] {
        let e = BenchConfig::from_text(&format!("{{{key}, 0}}.")).expect_err("zero");
        assert!(e.to_string().contains(key), "{e}");
    }
}

/// The flusher mode and the compaction read pace: good values parse,
/// 0 means unpaced, and bad ones name their key.
#[test]
fn journal_flush_and_read_pace() {
    use basalt_backends::JournalFlush;
    for (flush, pace, want_flush, want_pace) in [
        ("fsync", "\"64M\"", JournalFlush::Fsync, 64 << 20),
        ("writeback", "0", JournalFlush::Writeback, 0),
    ] {
        let text =
            format!("{{basalt_journal_flush, {flush}}}.\n{{basalt_compaction_read_pace, {pace}}}.");
        let (c, _) = BenchConfig::from_text(&text).expect("ok");
        assert_eq!(c.journal_flush, Some(want_flush), "{text}");
        assert_eq!(c.compaction_read_bytes_per_sec, Some(want_pace), "{text}");
    }
    let (c, _) = BenchConfig::from_text("").expect("ok");
    assert_eq!(c.journal_flush, None);
    assert_eq!(c.compaction_read_bytes_per_sec, None);
    assert_eq!(c.journal_fsync_bytes, None);
    for (text, want) in [
        ("{basalt_journal_fsync_bytes, \"16M\"}.", 16 << 20),
        ("{basalt_journal_fsync_bytes, 0}.", 0),
    ] {
        let (c, _) = BenchConfig::from_text(text).expect("ok");
        assert_eq!(c.journal_fsync_bytes, Some(want), "{text}");
    }
    let err = BenchConfig::from_text("{basalt_journal_fsync_bytes, \"lots\"}.").unwrap_err();
    assert!(
        err.to_string().contains("basalt_journal_fsync_bytes"),
        "{err}"
    );
    for (text, key) in [
        ("{basalt_journal_flush, fdatasync}.", "basalt_journal_flush"),
        ("{basalt_journal_flush, 1}.", "basalt_journal_flush"),
        (
            "{basalt_compaction_read_pace, \"fast\"}.",
            "basalt_compaction_read_pace",
        ),
        (
            "{basalt_compaction_read_pace, -5}.",
            "basalt_compaction_read_pace",
        ),
    ] {
        let e = BenchConfig::from_text(text).expect_err(text);
        assert!(e.to_string().contains(key), "{text}: {e}");
    }
}

#[test]
fn labels_and_durations() {
    let (c, _) = BenchConfig::from_text(
        "{operations, [{index_query, 1}, {{my, get}, get, 2}]}.\n{duration, 0.05}.\n{basalt_rate_mode, open_loop}.\n{mode, {rate, 20}}.",
    )
    .expect("ok");
    assert_eq!(c.operations[0].file_label(), "index-query");
    assert_eq!(c.operations[1].label, "my-get");
    assert_eq!(c.duration, Some(Duration::from_secs(3)));
    assert_eq!(c.index_terms, 1);
    assert_eq!(c.rate_mode, RateMode::OpenLoop);
    assert_eq!(c.target_rate(), Some(60.0));
    let (c, _) =
        BenchConfig::from_text("{duration, infinity}.\n{basalt_duration_secs, 2}.").expect("ok");
    assert_eq!(c.duration, Some(Duration::from_secs(2)));
}

#[test]
fn worker_seeds_differ_and_repeat() {
    let s = RngSeed::Fixed(42, 23, 12);
    assert_eq!(s.for_worker(1), s.for_worker(1));
    assert_ne!(s.for_worker(1), s.for_worker(2));
}

#[test]
fn config_key_reads_sizes() {
    let (c, _) = BenchConfig::from_text("{basalt_memory_limit, \"1.5G\"}.").expect("text");
    assert_eq!(c.memory_limit, Some(1536 << 20));
    let (c, _) = BenchConfig::from_text("{basalt_memory_limit, 1073741824}.").expect("int");
    assert_eq!(c.memory_limit, Some(1 << 30));
    assert!(BenchConfig::from_text("{basalt_memory_limit, \"lots\"}.").is_err());
}

#[test]
fn value_blob_file_is_the_source_of_sliced_values() {
    use crate::valgen::{ValGen, ValuePool};
    use rand::SeedableRng;
    let dir = tempfile::tempdir().expect("tmp");
    let blob = dir.path().join("book.txt");
    let text = "It was a fine day in London, and Phileas Fogg went out. ".repeat(100);
    std::fs::write(&blob, &text).expect("write");
    // basho_bench's riakc_pb_text.config, with the file's path.
    let (c, w) = BenchConfig::from_text(&format!(
        "{{driver, basho_bench_driver_riakc_pb}}.\n{{key_generator, {{int_to_str, {{uniform_int, 1000}}}}}}.\n\
         {{value_generator, {{fixed_bin, 1000}}}}.\n{{riakc_pb_content_type, \"text/plain\"}}.\n\
         {{value_generator_blob_file, \"{}\"}}.\n{{riakc_pb_ips, [{{127,0,0,1}}]}}.\n\
         {{operations, [{{put, 1}},{{get, 1}},{{update, 1}}]}}.\n\
         {{pb_connect_options, [{{auto_reconnect, true}}]}}.\n{{pb_timeout_general, 30000}}.\n\
         {{pb_timeout_read, 5000}}.\n{{pb_timeout_write, 5000}}.\n{{pb_timeout_listkeys, 50000}}.",
        blob.display()
    ))
    .expect("riakc_pb_text");
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(c.value_blob_file.as_deref(), Some(blob.as_path()));
    assert_eq!(c.value_source_size, text.len());
    let pool =
        ValuePool::for_run(&c.value_generator, c.value_blob_file.as_deref(), 0, 1).expect("pool");
    assert_eq!(pool.len(), text.len());
    let mut g = ValGen::new(&c.value_generator, pool);
    let mut rng = rand::rngs::StdRng::seed_from_u64(3);
    let v = g.next_value(&mut rng).to_vec();
    assert_eq!(v.len(), 1000);
    assert!(text.contains(std::str::from_utf8(&v).expect("text")));
    // Values not cut from a source: the file is unused, with a warning.
    let (_, w) = BenchConfig::from_text(&format!(
        "{{value_generator, {{fixed_char, 10}}}}.\n{{value_generator_blob_file, \"{}\"}}.",
        blob.display()
    ))
    .expect("fixed_char");
    assert!(w.len() == 1 && w[0].contains("has no effect"), "{w:?}");
    for (path, want) in [("/nonexistent/book.txt", "No such file"), ("", "")] {
        let e = BenchConfig::from_text(&format!("\n{{value_generator_blob_file, \"{path}\"}}."))
            .expect_err(path)
            .to_string();
        assert!(
            e.starts_with("value_generator_blob_file: ")
                && e.contains(want)
                && e.contains("<text>:2"),
            "{e}"
        );
    }
}

#[test]
fn upstream_keys_warn_with_why_and_http_headers_are_refused() {
    let (_, w) = BenchConfig::from_text(
        "{driver, null}.\n{cassandra_hosts, [\"h\"]}.\n{frobnicate, 1}.\n{pb_replies, 1}.\n\
         {riakc_pb_search_queries, []}.",
    )
    .expect("warnings only");
    assert_eq!(w.len(), 2, "{w:?}");
    assert_eq!(w[0], "unknown config keys (ignored): frobnicate");
    assert!(
        w[1].starts_with("basho_bench keys not used by basalt bench (ignored): ")
            && w[1].contains("cassandra_hosts (the cassandra drivers', which are not implemented)")
            && w[1].contains("pb_replies (the 2i driver's"),
        "{w:?}"
    );
    // With http_raw they would change every request: refused.
    let e = BenchConfig::from_text(
        "{driver, http_raw}.\n{operations, [{get, 1}]}.\n\
         {http_raw_append_headers, [{\"Authorization\", \"Basic x\"}]}.",
    )
    .expect_err("headers")
    .to_string();
    assert!(
        e.starts_with("http_raw_append_headers: extra HTTP headers are not sent")
            && e.ends_with("(<text>:3)"),
        "{e}"
    );
}
