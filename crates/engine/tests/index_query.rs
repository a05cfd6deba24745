//! Secondary-index (2i) behaviour through the public API: equality and range
//! queries on `_bin` and `_int` fields, return_terms, term_regex, paging with
//! continuations, the `$bucket` and `$key` pseudo-indexes, removals, TTL,
//! count-only queries, recovery (crash replay, key-delta replay, repair), the
//! compaction retention hook, and typed errors for every bad input.
//!
//! Method: each test opens a fresh store (`Config::test_min`, so flushes and
//! merges happen) in a temporary directory; data is generated from fixed
//! seeds, and expected answers come from a plain `BTreeSet` model.

use basalt_engine::index::{encode_changes, IndexOp};
use basalt_engine::journal::{Journal, JournalOptions, JournalRecord, NewRecord, RecordKind};
use basalt_engine::stats::Stats;
use basalt_engine::{
    key, Config, Error, IndexChange, IndexCursor, IndexPage, IndexQuery, IndexResult, PutOptions,
    Store,
};
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;
use std::sync::Arc;

fn open(dir: &std::path::Path) -> Store {
    Store::open(Config::test_min(dir)).expect("open store")
}

fn put_idx(s: &Store, b: &[u8], k: &[u8], changes: Vec<IndexChange>) -> u64 {
    let opts = PutOptions {
        index: changes,
        ..PutOptions::default()
    };
    s.put_with(b, k, b"value", b"", &opts).expect("put")
}

fn keys(page: &IndexPage) -> Vec<String> {
    page.results
        .iter()
        .map(|r| String::from_utf8(r.key.clone()).expect("utf-8 key"))
        .collect()
}

fn pairs(page: &IndexPage) -> Vec<(String, String)> {
    page.results
        .iter()
        .map(|r| {
            (
                String::from_utf8(r.term.clone().expect("term")).expect("utf-8 term"),
                String::from_utf8(r.key.clone()).expect("utf-8 key"),
            )
        })
        .collect()
}

fn invalid(e: Error, needles: &[&str]) {
    assert!(matches!(e, Error::InvalidInput(_)), "not InvalidInput: {e}");
    let m = e.to_string();
    for n in needles {
        assert!(m.contains(n), "message {m:?} does not name {n:?}");
    }
}

/// Puts the colour/age fixture: key-i has colour_bin c{i%3}, age_int (i*7 - 50).
fn fixture(s: &Store) {
    for i in 0..30 {
        let k = format!("key-{i:02}");
        put_idx(
            s,
            b"people",
            k.as_bytes(),
            vec![
                IndexChange::add("colour_bin", format!("c{}", i % 3)),
                IndexChange::add("age_int", (i * 7 - 50).to_string()),
            ],
        );
    }
}

#[test]
fn equality_and_range_on_bin() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path());
    fixture(&s);
    put_idx(
        &s,
        b"other",
        b"x",
        vec![IndexChange::add("colour_bin", "c1")],
    );
    let page = s
        .index_query(&IndexQuery::eq(b"people", b"colour_bin", b"c1"))
        .unwrap();
    let want: Vec<String> = (0..30)
        .filter(|i| i % 3 == 1)
        .map(|i| format!("key-{i:02}"))
        .collect();
    assert_eq!(keys(&page), want);
    assert!(page.results.iter().all(|r| r.term.is_none()));
    assert_eq!(page.continuation, None);
    // "c" is a prefix of every term but equality needs the whole term.
    assert!(s
        .index_query(&IndexQuery::eq(b"people", b"colour_bin", b"c"))
        .unwrap()
        .results
        .is_empty());
    let page = s
        .index_query(&IndexQuery::range(b"people", b"colour_bin", b"c1", b"c2"))
        .unwrap();
    assert_eq!(page.results.len(), 20);
    // Sorted by (term, key): all c1 keys before all c2 keys.
    let mut q = IndexQuery::range(b"people", b"colour_bin", b"c1", b"c2");
    q.return_terms = true;
    let got = pairs(&s.index_query(&q).unwrap());
    let mut sorted = got.clone();
    sorted.sort();
    assert_eq!(got, sorted);
    assert_eq!(got.first().unwrap().0, "c1");
    assert_eq!(got.last().unwrap().0, "c2");
    // Inverted range is empty, not an error.
    assert!(s
        .index_query(&IndexQuery::range(b"people", b"colour_bin", b"c2", b"c1"))
        .unwrap()
        .results
        .is_empty());
}

#[test]
fn equality_and_range_on_int_are_numeric() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path());
    fixture(&s);
    s.settle().unwrap();
    // ages: i*7-50 for i in 0..30: -50, -43, ..., 153
    let mut q = IndexQuery::range(b"people", b"age_int", b"-10", b"20");
    q.return_terms = true;
    let got = pairs(&s.index_query(&q).unwrap());
    let want: Vec<(String, String)> = (0..30)
        .map(|i| (i * 7 - 50, format!("key-{i:02}")))
        .filter(|(a, _)| (-10..=20).contains(a))
        .map(|(a, k)| (a.to_string(), k))
        .collect();
    assert_eq!(got, want);
    assert_eq!(want.first().unwrap().0, "-8");
    // Leading zeros and '+' parse to the same integer.
    let page = s
        .index_query(&IndexQuery::eq(b"people", b"age_int", b"-008"))
        .unwrap();
    assert_eq!(keys(&page), vec!["key-06"]);
    // Full i64 range.
    let all = s
        .index_query(&IndexQuery::range(
            b"people",
            b"age_int",
            i64::MIN.to_string().as_bytes(),
            i64::MAX.to_string().as_bytes(),
        ))
        .unwrap();
    assert_eq!(all.results.len(), 30);
}

#[test]
fn return_terms_applies_to_ranges_only() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path());
    fixture(&s);
    let mut q = IndexQuery::eq(b"people", b"age_int", b"-50");
    q.return_terms = true;
    let page = s.index_query(&q).unwrap();
    assert_eq!(
        page.results,
        vec![IndexResult {
            term: None,
            key: b"key-00".to_vec()
        }]
    );
    let mut q = IndexQuery::range(b"people", b"age_int", b"-50", b"-50");
    q.return_terms = true;
    let page = s.index_query(&q).unwrap();
    assert_eq!(
        page.results,
        vec![IndexResult {
            term: Some(b"-50".to_vec()),
            key: b"key-00".to_vec()
        }]
    );
}

#[test]
fn term_regex_filters_bin_terms() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path());
    for (k, t) in [
        ("k1", "apple"),
        ("k2", "apricot"),
        ("k3", "banana"),
        ("k4", "avocado"),
    ] {
        put_idx(
            &s,
            b"fruit",
            k.as_bytes(),
            vec![IndexChange::add("name_bin", t)],
        );
    }
    let mut q = IndexQuery::range(b"fruit", b"name_bin", b"a", b"z");
    q.term_regex = Some("^ap".into());
    q.return_terms = true;
    assert_eq!(
        pairs(&s.index_query(&q).unwrap()),
        vec![
            ("apple".into(), "k1".into()),
            ("apricot".into(), "k2".into())
        ]
    );
    assert_eq!(s.index_count(&q).unwrap(), 2);
    q.term_regex = Some("an{2}".into());
    assert!(s.index_query(&q).unwrap().results.is_empty());
    q.term_regex = Some("(an){2}".into());
    assert_eq!(keys(&s.index_query(&q).unwrap()), vec!["k3"]);
}

#[test]
fn paging_with_continuation_equals_unpaged() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path());
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x2_1D3);
    for i in 0..3000u32 {
        let k = format!("obj-{i:05}");
        let t: i64 = rng.gen_range(-500..500);
        let term = format!("t{:03}", rng.gen_range(0..200u32));
        put_idx(
            &s,
            b"big",
            k.as_bytes(),
            vec![
                IndexChange::add("n_int", t.to_string()),
                IndexChange::add("t_bin", term),
            ],
        );
        if i == 1500 {
            s.settle().unwrap();
        }
    }
    for (field, start, end) in [("n_int", "-400", "450"), ("t_bin", "t010", "t190")] {
        let mut q = IndexQuery::range(b"big", field.as_bytes(), start.as_bytes(), end.as_bytes());
        q.return_terms = true;
        let full = s.index_query(&q).unwrap();
        assert!(full.results.len() > 2000, "{}", full.results.len());
        assert_eq!(s.index_count(&q).unwrap(), full.results.len() as u64);
        let mut paged = Vec::new();
        let mut pages = 0;
        q.max_results = Some(97);
        loop {
            let page = s.index_query(&q).unwrap();
            assert!(page.results.len() <= 97);
            pages += 1;
            paged.extend(page.results.iter().cloned());
            match page.continuation {
                Some(c) => {
                    assert_eq!(page.results.len(), 97, "continuation only on a full page");
                    q.continuation = Some(c);
                }
                None => break,
            }
        }
        assert_eq!(paged, full.results, "{field}");
        assert_eq!(pages, full.results.len() / 97 + 1);
    }
}

#[test]
fn paging_with_start_after_equals_unpaged() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path());
    let mut rng = rand::rngs::StdRng::seed_from_u64(0x2_1D4);
    for i in 0..3000u32 {
        let k = format!("obj-{i:05}");
        let t: i64 = rng.gen_range(-500..500);
        let term = format!("t{:03}", rng.gen_range(0..200u32));
        put_idx(
            &s,
            b"big",
            k.as_bytes(),
            vec![
                IndexChange::add("n_int", t.to_string()),
                IndexChange::add("t_bin", term),
            ],
        );
        if i == 1500 {
            s.settle().unwrap();
        }
    }
    for (field, start, end) in [("n_int", "-400", "450"), ("t_bin", "t010", "t190")] {
        let mut q = IndexQuery::range(b"big", field.as_bytes(), start.as_bytes(), end.as_bytes());
        q.return_terms = true;
        let full = s.index_query(&q).unwrap();
        assert!(full.results.len() > 2000, "{}", full.results.len());
        let mut paged: Vec<IndexResult> = Vec::new();
        q.max_results = Some(97);
        loop {
            let page = s.index_query(&q).unwrap();
            assert!(page.results.len() <= 97);
            let Some(last) = page.results.last() else {
                break;
            };
            q.start_after = Some(IndexCursor::new(
                last.term.clone().expect("term"),
                last.key.clone(),
            ));
            paged.extend(page.results.iter().cloned());
        }
        assert_eq!(paged, full.results, "{field}");
        // Counting after a cursor counts what the pages would return.
        let mut c = q.clone();
        c.start_after = Some(IndexCursor::new(
            full.results[1000].term.clone().expect("term"),
            full.results[1000].key.clone(),
        ));
        assert_eq!(
            s.index_count(&c).unwrap(),
            (full.results.len() - 1001) as u64
        );
    }
}

#[test]
fn bucket_and_key_pseudo_indexes() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path());
    for k in ["a", "b", "c", "d", "e"] {
        s.put(b"bkt", k.as_bytes(), b"v", b"").unwrap();
    }
    s.put(b"bkt2", b"zz", b"v", b"").unwrap();
    s.delete(b"bkt", b"c").unwrap();
    let mut q = IndexQuery::eq(b"bkt", b"$bucket", b"ignored");
    assert_eq!(keys(&s.index_query(&q).unwrap()), vec!["a", "b", "d", "e"]);
    q.max_results = Some(2);
    let p1 = s.index_query(&q).unwrap();
    assert_eq!(keys(&p1), vec!["a", "b"]);
    q.continuation = p1.continuation;
    let p2 = s.index_query(&q).unwrap();
    assert_eq!(keys(&p2), vec!["d", "e"]);
    q.continuation = p2.continuation;
    assert!(s.index_query(&q).unwrap().results.is_empty());

    let mut q = IndexQuery::range(b"bkt", b"$key", b"b", b"d");
    q.return_terms = true;
    assert_eq!(
        pairs(&s.index_query(&q).unwrap()),
        vec![("b".into(), "b".into()), ("d".into(), "d".into())]
    );
    assert_eq!(s.index_count(&q).unwrap(), 2);
    assert_eq!(
        keys(
            &s.index_query(&IndexQuery::eq(b"bkt", b"$key", b"e"))
                .unwrap()
        ),
        vec!["e"]
    );
    q.term_regex = Some("^d".into());
    assert_eq!(keys(&s.index_query(&q).unwrap()), vec!["d"]);
}

#[test]
fn remove_and_delete_semantics() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path());
    put_idx(
        &s,
        b"b",
        b"k1",
        vec![
            IndexChange::add("f_bin", "x"),
            IndexChange::add("f_bin", "y"),
        ],
    );
    put_idx(&s, b"b", b"k2", vec![IndexChange::add("f_bin", "x")]);
    // Update of k1: the app removes the old term.
    put_idx(&s, b"b", b"k1", vec![IndexChange::remove("f_bin", "x")]);
    let eq = |t: &str| {
        keys(
            &s.index_query(&IndexQuery::eq(b"b", b"f_bin", t.as_bytes()))
                .unwrap(),
        )
    };
    assert_eq!(eq("x"), vec!["k2"]);
    assert_eq!(eq("y"), vec!["k1"]);
    // A plain delete leaves the index entry (Riak: the delete carries removals).
    s.delete(b"b", b"k2").unwrap();
    assert_eq!(eq("x"), vec!["k2"]);
    let opts = PutOptions {
        index: vec![IndexChange::remove("f_bin", "y")],
        ..PutOptions::default()
    };
    s.delete_with(b"b", b"k1", &opts).unwrap();
    assert!(eq("y").is_empty());
    // Within one write, the later change of the same entry wins.
    put_idx(
        &s,
        b"b",
        b"k3",
        vec![
            IndexChange::add("f_bin", "z"),
            IndexChange::remove("f_bin", "z"),
        ],
    );
    put_idx(
        &s,
        b"b",
        b"k4",
        vec![
            IndexChange::remove("f_bin", "z"),
            IndexChange::add("f_bin", "z"),
        ],
    );
    assert_eq!(eq("z"), vec!["k4"]);
}

#[test]
fn expired_objects_index_entries_are_skipped() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path());
    let gone = PutOptions {
        expires_at: 1, // long past
        index: vec![IndexChange::add("f_bin", "t")],
        ..PutOptions::default()
    };
    s.put_with(b"b", b"old", b"v", b"", &gone).unwrap();
    let live = PutOptions {
        expires_at: u64::from(u32::MAX) * 4,
        index: vec![IndexChange::add("f_bin", "t")],
        ..PutOptions::default()
    };
    s.put_with(b"b", b"new", b"v", b"", &live).unwrap();
    let q = IndexQuery::eq(b"b", b"f_bin", b"t");
    assert_eq!(keys(&s.index_query(&q).unwrap()), vec!["new"]);
    assert_eq!(s.index_count(&q).unwrap(), 1);
}

fn all_entries(s: &Store) -> Vec<(String, String)> {
    let mut q = IndexQuery::range(b"r", b"f_bin", b"", b"\xff");
    q.return_terms = true;
    pairs(&s.index_query(&q).expect("query"))
}

#[test]
fn index_entries_survive_crash_and_repair() {
    let d = tempfile::tempdir().unwrap();
    let mut rng = rand::rngs::StdRng::seed_from_u64(77);
    let mut model: BTreeSet<(String, String)> = BTreeSet::new();
    let mut s = open(d.path());
    for round in 0..3 {
        for _ in 0..400 {
            let k = format!("k{:03}", rng.gen_range(0..150));
            let t = format!("t{:02}", rng.gen_range(0..20));
            let add = rng.gen_bool(0.7);
            let ch = if add {
                IndexChange::add("f_bin", t.clone())
            } else {
                IndexChange::remove("f_bin", t.clone())
            };
            put_idx(&s, b"r", k.as_bytes(), vec![ch]);
            if add {
                model.insert((t, k));
            } else {
                model.remove(&(t, k));
            }
        }
        let want: Vec<_> = model.iter().cloned().collect();
        assert_eq!(all_entries(&s), want, "round {round} before crash");
        s.simulate_crash();
        s = open(d.path());
        assert_eq!(all_entries(&s), want, "round {round} after crash");
    }
    s.close().unwrap();
    drop(s);
    let report = Store::repair(Config::test_min(d.path())).unwrap();
    assert!(report.replayed >= 1200, "{report:?}");
    let s = open(d.path());
    assert_eq!(all_entries(&s), model.into_iter().collect::<Vec<_>>());
}

#[test]
fn key_delta_records_replay_their_index_changes() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path());
    put_idx(&s, b"r", b"k1", vec![IndexChange::add("f_bin", "a")]);
    let last = s.stats().last_sqn;
    s.close().unwrap();
    drop(s);
    // Write a key delta as journal compaction would (after a clean close, so
    // open replays it).
    {
        let j = Journal::open(
            &d.path().join("journal"),
            JournalOptions {
                file_bytes: 1 << 20,
                repair_manifest: false,
                compression: basalt_engine::journal::Compression::None,
                zstd_level: 1,
                compression_point: basalt_engine::journal::CompressionPoint::OnReceipt,
                one_read: true,
                fadvise_random: true,
                skip_active_lock: true,
                stream_bytes: 8 * 1024,
                compaction_pace: 0,
                remove_bytes_per_sec: 0,
                direct_reads: false,
                value_cache: None,
                preallocate: true,
                release_written: false,
                refresh_cached: false,
            },
            Arc::new(Stats::default()),
        )
        .unwrap();
        let blob = encode_changes(&[
            IndexChange::add("f_bin", "b"),
            IndexChange::remove("f_bin", "a"),
        ]);
        j.append(&NewRecord {
            sqn: last + 1,
            kind: RecordKind::KeyDelta,
            key: &key::object(b"r", b"k2"),
            last_modified_us: 1,
            expires_at: 0,
            metadata: b"",
            value: b"",
            index: &blob,
        })
        .unwrap();
        j.close().unwrap();
    }
    let s = open(d.path());
    assert_eq!(
        all_entries(&s),
        vec![("a".into(), "k1".into()), ("b".into(), "k2".into())]
    );
    // No object entry came with it.
    assert!(s.head(b"r", b"k2").unwrap().is_none());
    // The next write gets a higher SQN than the key delta.
    let sqn = s.put(b"r", b"k3", b"v", b"").unwrap();
    assert_eq!(sqn, last + 2);
}

#[test]
fn retention_keeps_only_current_changes() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path());
    let changes = vec![
        IndexChange::add("f_bin", "x"),
        IndexChange::add("n_int", "5"),
    ];
    let sqn1 = put_idx(&s, b"b", b"k", changes.clone());
    let rec = |sqn: u64, changes: &[IndexChange]| JournalRecord {
        sqn,
        kind: RecordKind::Put,
        key: key::object(b"b", b"k"),
        last_modified_us: 0,
        expires_at: 0,
        metadata: vec![],
        value: b"value".to_vec(),
        index: encode_changes(changes),
    };
    let r1 = rec(sqn1, &changes);
    assert_eq!(
        s.index_changes_to_retain(&r1).unwrap(),
        Some(r1.index.clone())
    );
    // A later removal of x supersedes half of r1.
    let sqn2 = put_idx(&s, b"b", b"k", vec![IndexChange::remove("f_bin", "x")]);
    let kept = s.index_changes_to_retain(&r1).unwrap().expect("n_int kept");
    let kept = basalt_engine::index::decode_changes(&kept).unwrap();
    assert_eq!(kept, vec![IndexChange::add("n_int", "5")]);
    // The removal itself is current and is retained.
    let r2 = rec(sqn2, &[IndexChange::remove("f_bin", "x")]);
    assert_eq!(
        basalt_engine::index::decode_changes(&s.index_changes_to_retain(&r2).unwrap().unwrap())
            .unwrap()[0]
            .op,
        IndexOp::Remove
    );
    // Superseding the rest leaves nothing of r1.
    put_idx(&s, b"b", b"k", vec![IndexChange::add("n_int", "5")]);
    assert_eq!(s.index_changes_to_retain(&r1).unwrap(), None);
    // Survives a flush to SSTs (reads through the files).
    s.close().unwrap();
    drop(s);
    let s = open(d.path());
    assert_eq!(s.index_changes_to_retain(&r1).unwrap(), None);
    assert!(s.index_changes_to_retain(&r2).unwrap().is_some());
    assert_eq!(s.index_changes_to_retain(&rec(sqn1, &[])).unwrap(), None);
}

#[test]
fn bad_inputs_are_typed_errors_naming_the_problem() {
    let d = tempfile::tempdir().unwrap();
    let s = open(d.path());
    let put = |changes: Vec<IndexChange>| {
        s.put_with(
            b"b",
            b"k",
            b"v",
            b"",
            &PutOptions {
                index: changes,
                ..PutOptions::default()
            },
        )
        .unwrap_err()
    };
    invalid(
        put(vec![IndexChange::add("colour", "red")]),
        &["colour", "_bin", "_int"],
    );
    invalid(
        put(vec![IndexChange::add("age_int", "twelve")]),
        &["age_int", "twelve"],
    );
    invalid(
        put(vec![IndexChange::remove("age_int", "9".repeat(601))]),
        &["age_int", "at most 600 digits"],
    );
    invalid(
        put(vec![IndexChange::add("f_bin", vec![b'x'; 4097])]),
        &["f_bin", "index_term_bytes_max"],
    );
    invalid(
        put(vec![IndexChange::add("f_bin", "x"); 1025]),
        &["1025", "index_changes_max"],
    );
    invalid(
        put(vec![IndexChange::add(vec![b'a'; 300], "x")]),
        &["limit"],
    );
    let e = s.delete_with(
        b"b",
        b"k",
        &PutOptions {
            index: vec![IndexChange::add("x", "y")],
            ..PutOptions::default()
        },
    );
    invalid(e.unwrap_err(), &["'x'"]);
    // A refused write wrote nothing.
    assert_eq!(s.stats().last_sqn, 0);

    let q = |f: &dyn Fn(&mut IndexQuery)| {
        let mut q = IndexQuery::range(b"b", b"f_bin", b"a", b"z");
        f(&mut q);
        s.index_query(&q).unwrap_err()
    };
    invalid(q(&|q| q.bucket.clear()), &["bucket"]);
    invalid(
        q(&|q| q.field = b"nosuffix".to_vec()),
        &["nosuffix", "$bucket"],
    );
    invalid(
        q(&|q| {
            q.field = b"n_int".to_vec();
            q.start = b"1.5".to_vec();
        }),
        &["n_int", "1.5"],
    );
    invalid(
        q(&|q| {
            q.field = b"n_int".to_vec();
            q.start = b"1".to_vec();
            q.end = Some(b"z".to_vec());
        }),
        &["n_int", "'z'"],
    );
    invalid(
        q(&|q| {
            q.field = b"n_int".to_vec();
            q.start = b"1".to_vec();
            q.end = Some(b"2".to_vec());
            q.term_regex = Some("x".into());
        }),
        &["term_regex", "n_int"],
    );
    invalid(
        q(&|q| q.term_regex = Some("(unclosed".into())),
        &["term_regex", "(unclosed"],
    );
    invalid(
        q(&|q| q.term_regex = Some("a".repeat(2000))),
        &["term_regex", "limit"],
    );
    invalid(q(&|q| q.max_results = Some(0)), &["max_results"]);
    invalid(
        q(&|q| q.continuation = Some("not base64!".into())),
        &["continuation", "not base64!"],
    );
    invalid(
        q(&|q| q.continuation = Some("AQIDBAUGBwg=".into())),
        &["continuation", "checksum"],
    );
    // A continuation from another field is refused.
    for i in 0..3 {
        put_idx(
            &s,
            b"b",
            format!("k{i}").as_bytes(),
            vec![IndexChange::add("g_bin", "a")],
        );
    }
    let mut other = IndexQuery::eq(b"b", b"g_bin", b"a");
    other.max_results = Some(1);
    let c = s.index_query(&other).unwrap().continuation.unwrap();
    invalid(
        q(&|q| q.continuation = Some(c.clone())),
        &["continuation", "another"],
    );
    let e = s
        .index_count(&IndexQuery::eq(b"b", b"bad", b"x"))
        .unwrap_err();
    invalid(e, &["bad"]);
}
