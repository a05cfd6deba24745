//! The conformance suite every [`Backend`] must pass (feature `conformance`).
//!
//! An implementation's tests supply a [`Factory`] and call each check (or
//! [`run_all`]). What is checked:
//!
//! * [`model`]: random put / delete / get / head / fold_keys / list_buckets
//!   (and close + reopen for persistent backends) against a `BTreeMap`
//!   model. The seed is printed; `BASALT_TEST_SEED` replays one;
//!   `BASALT_LONG_TESTS=1` runs more cases.
//! * [`indexes`]: 2i equality, range, `_int` order, `return_terms`, regex,
//!   paging equal to the unpaged answer, removals, `$key`/`$bucket`; or a
//!   typed `NotSupported` without the capability.
//! * `index_cursor_*`: paging by [`IndexQuery::start_after`]:
//!   [`index_cursor_paging`] (a `_bin` range with repeated terms, regex),
//!   [`index_cursor_int_order`] (numeric order, negatives),
//!   [`index_cursor_keys`] (`$key`, `$bucket`), [`index_cursor_equality`],
//!   [`index_cursor_beyond_end`], [`index_cursor_with_continuation`] (an
//!   error) and [`index_cursor_model`] (a property test against a
//!   `BTreeMap`); without the capability, a cursor query is `NotSupported`.
//! * [`fold_filters`]: head folds with segment, last-modified and
//!   `max_objects` filters against the model; or `NotSupported`.
//! * [`snapshots`]: a snapshot does not see later writes and deletes.
//! * [`corruption`] (persistent backends): bytes flipped in data files never
//!   come back as a wrong value; errors are typed; most keys still read.
//! * [`validation`] and [`capabilities_honest`]: bad input is
//!   `InvalidInput`; a missing capability is `NotSupported`.

use crate::*;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// How the suite opens the backend under test.
pub trait Factory {
    /// The backend's name.
    fn name(&self) -> &'static str;
    /// True if data survives close + reopen.
    fn persistent(&self) -> bool;
    /// Opens (creating if new) the backend in `dir`, with small test sizes.
    fn open(&self, dir: &Path) -> Result<Box<dyn Backend>>;
    /// The files of `dir` holding values or keys (the corruption targets).
    fn data_files(&self, dir: &Path) -> Vec<PathBuf>;
}

fn seed() -> u64 {
    std::env::var("BASALT_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_BA5A)
}

fn long() -> bool {
    std::env::var("BASALT_LONG_TESTS").is_ok_and(|v| v == "1")
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

fn put(b: &dyn Backend, bucket: &[u8], key: &[u8], value: &[u8]) {
    b.put(bucket, key, value, b"meta", &WriteOptions::default())
        .expect("put");
}

fn keys_of(b: &dyn Backend, bucket: &[u8], range: Option<&KeyRange>) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    b.fold_keys(bucket, range, &mut |k| {
        out.push(k.to_vec());
        ControlFlow::Continue(())
    })
    .expect("fold_keys");
    out
}

type Model = BTreeMap<(Vec<u8>, Vec<u8>), (Vec<u8>, Vec<u8>)>;

fn check_fold_keys(b: &dyn Backend, model: &Model, bucket: &[u8], ctx: &str) {
    let mut got = keys_of(b, bucket, None);
    let want: Vec<Vec<u8>> = model
        .keys()
        .filter(|(mb, _)| mb == bucket)
        .map(|(_, k)| k.clone())
        .collect();
    if b.capabilities().ordered_keys {
        assert_eq!(got, want, "{ctx}: fold_keys order/content");
    } else {
        got.sort();
        assert_eq!(got, want, "{ctx}: fold_keys content");
    }
}

/// Random operations against a `BTreeMap` model, with reopens.
pub fn model(f: &dyn Factory) {
    let cases = if long() { 40 } else { 4 };
    let ops = if long() { 2000 } else { 400 };
    let base = seed();
    for case in 0..cases {
        let s = base.wrapping_add(case);
        eprintln!(
            "conformance::model {}: seed {s} (BASALT_TEST_SEED={s} to replay)",
            f.name()
        );
        let mut rng = StdRng::seed_from_u64(s);
        let dir = tempdir();
        let mut b = f.open(dir.path()).expect("open");
        let mut m: Model = BTreeMap::new();
        let buckets: [&[u8]; 3] = [b"b1", b"b2", b"b\x003"];
        for i in 0..ops {
            let ctx = format!("{} seed {s} op {i}", f.name());
            let bucket = buckets[rng.gen_range(0..buckets.len())].to_vec();
            let key = format!("k{:03}", rng.gen_range(0..60)).into_bytes();
            match rng.gen_range(0..100) {
                0..=39 => {
                    let len = rng.gen_range(0..600);
                    let value: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                    let meta = format!("m{i}").into_bytes();
                    b.put(&bucket, &key, &value, &meta, &WriteOptions::default())
                        .expect("put");
                    m.insert((bucket, key), (value, meta));
                }
                40..=54 => {
                    b.delete(&bucket, &key, &WriteOptions::default())
                        .expect("delete");
                    m.remove(&(bucket, key));
                }
                55..=79 => {
                    let got = b.get(&bucket, &key).expect("get");
                    let want = m.get(&(bucket.clone(), key.clone()));
                    assert_eq!(
                        got.as_ref().map(|o| (&o.value, &o.head.metadata)),
                        want.map(|(v, mm)| (v, mm)),
                        "{ctx}: get"
                    );
                    if let Some(o) = got {
                        assert_eq!(o.head.size, o.value.len() as u64, "{ctx}: size");
                        assert_eq!(o.head.value_hash, value_hash(&o.value), "{ctx}: hash");
                    }
                }
                80..=89 => {
                    let got = b.head(&bucket, &key).expect("head");
                    let want = m.get(&(bucket, key));
                    assert_eq!(
                        got.map(|h| (h.size, h.value_hash, h.metadata)),
                        want.map(|(v, mm)| (v.len() as u64, value_hash(v), mm.clone())),
                        "{ctx}: head"
                    );
                }
                90..=94 => check_fold_keys(&*b, &m, &bucket, &ctx),
                95..=96 => {
                    let got = b.list_buckets().expect("list_buckets");
                    let want: BTreeSet<Vec<u8>> = m.keys().map(|(bb, _)| bb.clone()).collect();
                    assert_eq!(got, want.into_iter().collect::<Vec<_>>(), "{ctx}: buckets");
                }
                _ => {
                    if f.persistent() {
                        b.close().expect("close");
                        drop(b);
                        b = f.open(dir.path()).expect("reopen");
                    }
                }
            }
        }
        for ((bucket, key), (v, _)) in &m {
            let got = b.get(bucket, key).expect("final get").map(|o| o.value);
            assert_eq!(got.as_ref(), Some(v), "{} seed {s}: final get", f.name());
        }
        for bucket in buckets {
            check_fold_keys(&*b, &m, bucket, "final");
        }
        b.close().expect("close");
    }
}

/// 2i semantics, or `NotSupported` without the `indexes` capability.
pub fn indexes(f: &dyn Factory) {
    let dir = tempdir();
    let b = f.open(dir.path()).expect("open");
    let with = |changes: Vec<IndexChange>| WriteOptions {
        index: changes,
        ..WriteOptions::default()
    };
    if !b.capabilities().indexes {
        let e = b
            .put(
                b"b",
                b"k",
                b"v",
                b"",
                &with(vec![IndexChange::add("f_bin", "x")]),
            )
            .expect_err("index change without the capability");
        assert!(
            matches!(
                e,
                BackendError::NotSupported {
                    capability: Capability::Indexes,
                    ..
                }
            ),
            "{e}"
        );
        let e = b
            .index_query(&IndexQuery::eq(b"b", b"f_bin", b"x"))
            .expect_err("query");
        assert!(matches!(e, BackendError::NotSupported { .. }), "{e}");
        return;
    }
    for i in 0..30i64 {
        let key = format!("k{i:02}");
        let ch = vec![
            IndexChange::add("colour_bin", if i % 3 == 0 { "red" } else { "blue" }),
            IndexChange::add("age_int", (i - 10).to_string()),
        ];
        b.put(b"b", key.as_bytes(), b"v", b"", &with(ch))
            .expect("put");
    }
    b.put(
        b"other",
        b"k00",
        b"v",
        b"",
        &with(vec![IndexChange::add("colour_bin", "red")]),
    )
    .expect("put");
    let keys = |p: &IndexPage| p.results.iter().map(|r| r.key.clone()).collect::<Vec<_>>();
    // Equality.
    let red = b
        .index_query(&IndexQuery::eq(b"b", b"colour_bin", b"red"))
        .expect("eq");
    let want: Vec<Vec<u8>> = (0..30)
        .filter(|i| i % 3 == 0)
        .map(|i| format!("k{i:02}").into_bytes())
        .collect();
    assert_eq!(keys(&red), want, "equality");
    assert!(
        red.results.iter().all(|r| r.term.is_none()),
        "no terms on equality"
    );
    // Integer range in numeric order, with terms.
    let mut q = IndexQuery::range(b"b", b"age_int", b"-3", b"4");
    q.return_terms = true;
    let page = b.index_query(&q).expect("range");
    let terms: Vec<Vec<u8>> = page.results.iter().filter_map(|r| r.term.clone()).collect();
    let want_terms: Vec<Vec<u8>> = (-3..=4).map(|t: i64| t.to_string().into_bytes()).collect();
    assert_eq!(terms, want_terms, "integer range order and terms");
    // Paging equals the unpaged answer.
    let all = b
        .index_query(&IndexQuery::range(b"b", b"age_int", b"-100", b"100"))
        .expect("all");
    assert_eq!(all.results.len(), 30);
    let mut paged = Vec::new();
    let mut q = IndexQuery::range(b"b", b"age_int", b"-100", b"100");
    q.max_results = Some(7);
    loop {
        let p = b.index_query(&q).expect("page");
        paged.extend(p.results.clone());
        match p.continuation {
            Some(c) => q.continuation = Some(c),
            None => break,
        }
    }
    assert_eq!(paged, all.results, "paging");
    // Regex on _bin.
    let mut q = IndexQuery::range(b"b", b"colour_bin", b"a", b"z");
    q.term_regex = Some("^r".into());
    assert_eq!(b.index_query(&q).expect("regex").results.len(), 10);
    // Removal, and deletes do not remove entries by themselves.
    b.put(
        b"b",
        b"k00",
        b"v",
        b"",
        &with(vec![IndexChange::remove("colour_bin", "red")]),
    )
    .expect("remove");
    b.delete(b"b", b"k03", &WriteOptions::default())
        .expect("delete");
    let red = b
        .index_query(&IndexQuery::eq(b"b", b"colour_bin", b"red"))
        .expect("eq");
    assert_eq!(red.results.len(), 9, "one removed, delete keeps its entry");
    // $key and $bucket.
    let k = b
        .index_query(&IndexQuery::range(b"b", b"$key", b"k10", b"k12"))
        .expect("$key");
    assert_eq!(
        keys(&k),
        vec![b"k10".to_vec(), b"k11".to_vec(), b"k12".to_vec()]
    );
    let all = b
        .index_query(&IndexQuery::eq(b"b", b"$bucket", b""))
        .expect("$bucket");
    assert_eq!(all.results.len(), 29);
    // Bad input is typed.
    for q in [
        IndexQuery::eq(b"b", b"nosuffix", b"x"),
        IndexQuery::eq(b"b", b"age_int", b"notanint"),
    ] {
        let e = b.index_query(&q).expect_err("bad query");
        assert!(matches!(e, BackendError::InvalidInput(_)), "{e}");
    }
    let mut q = IndexQuery::eq(b"b", b"age_int", b"1");
    q.continuation = Some("garbage!".into());
    assert!(matches!(
        b.index_query(&q),
        Err(BackendError::InvalidInput(_))
    ));
    b.close().expect("close");
}

// ------------------------------------------------------------ 2i cursors

fn with_index(changes: Vec<IndexChange>) -> WriteOptions {
    WriteOptions {
        index: changes,
        ..WriteOptions::default()
    }
}

/// Opens the backend for a cursor check; `None` without the `indexes`
/// capability (after checking a cursor query is then `NotSupported`).
fn cursor_backend(f: &dyn Factory) -> Option<(tempfile::TempDir, Box<dyn Backend>)> {
    let dir = tempdir();
    let b = f.open(dir.path()).expect("open");
    if b.capabilities().indexes {
        return Some((dir, b));
    }
    let mut q = IndexQuery::range(b"b", b"f_bin", b"a", b"z");
    q.start_after = Some(IndexCursor::new("m", "k"));
    let e = b
        .index_query(&q)
        .expect_err("cursor query without the capability");
    assert!(
        matches!(
            e,
            BackendError::NotSupported {
                capability: Capability::Indexes,
                ..
            }
        ),
        "{e}"
    );
    b.close().expect("close");
    None
}

fn run_query(b: &dyn Backend, q: &IndexQuery, ctx: &str) -> IndexPage {
    b.index_query(q)
        .unwrap_or_else(|e| panic!("{ctx}: index query: {e}"))
}

/// Pages through `q` from its `start_after` (none: the start), `n` results
/// a page, each page resuming after the last result of the one before
/// ([`IndexCursor::after`]), until an empty page; returns every result.
/// Checks that pages hold at most `n`, that only the last non-empty page is
/// short, and that a full page carries a continuation.
fn page_by_cursor(b: &dyn Backend, q: &IndexQuery, n: u32, ctx: &str) -> Vec<IndexResult> {
    let mut q = q.clone();
    q.max_results = Some(n);
    q.continuation = None;
    let mut out: Vec<IndexResult> = Vec::new();
    let mut seen: BTreeSet<IndexResult> = BTreeSet::new();
    let mut short = false;
    for page_no in 0..100_000 {
        let p = run_query(b, &q, ctx);
        let len = p.results.len();
        assert!(len <= n as usize, "{ctx}: page {page_no} holds {len} > {n}");
        let Some(last) = p.results.last() else {
            return out;
        };
        assert!(!short, "{ctx}: page {page_no} follows a short page");
        if len == n as usize {
            assert!(
                p.continuation.is_some(),
                "{ctx}: full page {page_no} without a continuation"
            );
        } else {
            short = true;
        }
        q.start_after = Some(IndexCursor::after(last));
        for r in p.results {
            assert!(seen.insert(r.clone()), "{ctx}: {r:?} returned twice");
            out.push(r);
        }
    }
    panic!("{ctx}: paging by cursor does not end");
}

fn key_list(results: &[IndexResult]) -> Vec<Vec<u8>> {
    results.iter().map(|r| r.key.clone()).collect()
}

/// Paging by `start_after` through a `_bin` range whose terms repeat over
/// many keys (also with `term_regex`, and from a cursor inside a run of
/// one term) returns exactly the unpaged result, in order, with terms.
pub fn index_cursor_paging(f: &dyn Factory) {
    let Some((_dir, b)) = cursor_backend(f) else {
        return;
    };
    let name = f.name();
    // Written in a scrambled order; 30 keys per term; neighbours in other
    // buckets and fields.
    for j in 0..240u32 {
        let i = (j * 97) % 240;
        let key = format!("k{i:03}");
        let ch = vec![
            IndexChange::add("tag_bin", format!("t{}", i % 8)),
            IndexChange::add("other_bin", format!("t{}", i % 8)),
        ];
        b.put(b"p", key.as_bytes(), b"v", b"", &with_index(ch))
            .expect("put");
        if i % 4 == 0 {
            let ch = vec![IndexChange::add("tag_bin", format!("t{}", i % 8))];
            b.put(b"p2", key.as_bytes(), b"v", b"", &with_index(ch))
                .expect("put");
        }
    }
    let mut q = IndexQuery::range(b"p", b"tag_bin", b"t1", b"t6");
    q.return_terms = true;
    let full = run_query(&*b, &q, name).results;
    assert_eq!(full.len(), 180, "{name}: unpaged range");
    let mut want = full.clone();
    want.sort_by(|a, c| (&a.term, &a.key).cmp(&(&c.term, &c.key)));
    want.dedup();
    assert_eq!(full, want, "{name}: unpaged order");
    for n in [1, 2, 7, 29, 30, 31, 179, 180, 181, 1000] {
        let ctx = format!("{name}: page size {n}");
        let paged = page_by_cursor(&*b, &q, n, &ctx);
        assert!(
            paged.iter().all(|r| r.term.is_some()),
            "{ctx}: a range result without its term"
        );
        assert_eq!(paged, full, "{ctx}: paged by cursor");
    }
    // From a cursor inside the run of t3.
    let mid = full
        .iter()
        .position(|r| r.term.as_deref() == Some(b"t3"))
        .expect("t3")
        + 11;
    let mut from = q.clone();
    from.start_after = Some(IndexCursor::after(&full[mid]));
    assert_eq!(
        page_by_cursor(&*b, &from, 13, name),
        full[mid + 1..],
        "{name}: from a cursor inside a term's run"
    );
    // A cursor key between two stored keys of one term.
    from.start_after = Some(IndexCursor::new("t3", "k050"));
    let want: Vec<IndexResult> = full
        .iter()
        .filter(|r| {
            (r.term.as_deref().unwrap_or_default(), r.key.as_slice()) > (&b"t3"[..], &b"k050"[..])
        })
        .cloned()
        .collect();
    assert_eq!(
        run_query(&*b, &from, name).results,
        want,
        "{name}: between keys"
    );
    // term_regex: paging equals the unpaged filtered answer.
    let mut rq = q.clone();
    rq.term_regex = Some("^t[135]$".into());
    let filtered = run_query(&*b, &rq, name).results;
    assert_eq!(filtered.len(), 90, "{name}: regex");
    assert!(filtered
        .iter()
        .all(|r| matches!(r.term.as_deref(), Some(b"t1" | b"t3" | b"t5"))));
    for n in [1, 4, 30] {
        assert_eq!(
            page_by_cursor(&*b, &rq, n, name),
            filtered,
            "{name}: regex paged by {n}"
        );
    }
    // Without return_terms the page has no terms (as before).
    let mut nq = q.clone();
    nq.return_terms = false;
    nq.start_after = Some(IndexCursor::new("t5", "k200"));
    let p = run_query(&*b, &nq, name);
    assert!(p.results.iter().all(|r| r.term.is_none()));
    assert_eq!(
        key_list(&p.results),
        key_list(
            &full
                .iter()
                .filter(
                    |r| (r.term.as_deref().unwrap_or_default(), r.key.as_slice())
                        > (&b"t5"[..], &b"k200"[..])
                )
                .cloned()
                .collect::<Vec<_>>()
        ),
        "{name}: cursor without return_terms"
    );
    b.close().expect("close");
}

/// `_int` cursors order numerically (negatives, the `i64` extremes),
/// not as decimal text; a cursor term need not be canonical; a term that
/// is not an integer is `InvalidInput`.
pub fn index_cursor_int_order(f: &dyn Factory) {
    let Some((_dir, b)) = cursor_backend(f) else {
        return;
    };
    let name = f.name();
    for i in 0..60i64 {
        let key = format!("k{i:02}");
        let ch = vec![IndexChange::add("n_int", (i % 20 - 10).to_string())];
        b.put(b"n", key.as_bytes(), b"v", b"", &with_index(ch))
            .expect("put");
    }
    for (key, t) in [("min", i64::MIN), ("max", i64::MAX)] {
        let ch = vec![IndexChange::add("n_int", t.to_string())];
        b.put(b"n", key.as_bytes(), b"v", b"", &with_index(ch))
            .expect("put");
    }
    let num = |r: &IndexResult| -> (i64, Vec<u8>) {
        let t = r.term.as_deref().expect("term");
        let t: i64 = std::str::from_utf8(t)
            .ok()
            .and_then(|s| s.parse().ok())
            .expect("integer term");
        (t, r.key.clone())
    };
    let mut q = IndexQuery::range(
        b"n",
        b"n_int",
        i64::MIN.to_string().as_bytes(),
        i64::MAX.to_string().as_bytes(),
    );
    q.return_terms = true;
    let full = run_query(&*b, &q, name).results;
    assert_eq!(full.len(), 62, "{name}: unpaged");
    let order: Vec<(i64, Vec<u8>)> = full.iter().map(num).collect();
    assert!(
        order.windows(2).all(|w| w[0] < w[1]),
        "{name}: numeric order"
    );
    assert_eq!(order[0].0, i64::MIN);
    assert_eq!(order[61].0, i64::MAX);
    for n in [1, 3, 4, 61, 62] {
        assert_eq!(
            page_by_cursor(&*b, &q, n, name),
            full,
            "{name}: paged by {n}"
        );
    }
    let after = |t: i64, k: &[u8]| -> Vec<IndexResult> {
        full.iter()
            .filter(|r| num(r) > (t, k.to_vec()))
            .cloned()
            .collect()
    };
    for (term, t, key) in [
        ("-1", -1, &b"zz"[..]),
        ("-1", -1, b"a"),
        ("-5", -5, b"zz"),
        ("-05", -5, b"zz"),
        ("+3", 3, b"k05"),
        ("-10", -10, b"k20"),
        ("9", 9, b"k18"),
        ("-9223372036854775808", i64::MIN, b"min"),
        ("-9223372036854775808", i64::MIN, b"a"),
        ("-100", -100, b"a"),
        ("100", 100, b"a"),
    ] {
        let mut c = q.clone();
        c.start_after = Some(IndexCursor::new(term, key));
        let ctx = format!("{name}: after ({term}, {})", String::from_utf8_lossy(key));
        assert_eq!(run_query(&*b, &c, &ctx).results, after(t, key), "{ctx}");
        assert_eq!(page_by_cursor(&*b, &c, 4, &ctx), after(t, key), "{ctx}");
    }
    // A sub-range crossing zero, paged.
    let mut sub = IndexQuery::range(b"n", b"n_int", b"-3", b"2");
    sub.return_terms = true;
    sub.start_after = Some(IndexCursor::new("-2", "k47"));
    let want: Vec<IndexResult> = after(-2, b"k47")
        .into_iter()
        .filter(|r| num(r).0 <= 2)
        .collect();
    assert_eq!(page_by_cursor(&*b, &sub, 2, name), want, "{name}: -3..2");
    // Terms are integers of any size (as Riak's), up to 600 digits.
    let too_long = "9".repeat(601);
    for bad in ["abc", "", "1.5", too_long.as_str()] {
        let mut c = q.clone();
        c.start_after = Some(IndexCursor::new(bad, "k"));
        let e = b.index_query(&c).expect_err("bad integer cursor");
        assert!(
            matches!(e, BackendError::InvalidInput(_)),
            "{name}: {bad}: {e}"
        );
    }
    b.close().expect("close");
}

/// `$key` and `$bucket` cursors: key order, the cursor's term ignored.
pub fn index_cursor_keys(f: &dyn Factory) {
    let Some((_dir, b)) = cursor_backend(f) else {
        return;
    };
    let name = f.name();
    for i in 0..50u32 {
        put(&*b, b"kb", format!("k{i:02}").as_bytes(), b"v");
        put(&*b, b"kc", format!("k{i:02}").as_bytes(), b"v");
    }
    let keys = |r: std::ops::RangeInclusive<u32>| -> Vec<Vec<u8>> {
        r.map(|i| format!("k{i:02}").into_bytes()).collect()
    };
    let mut q = IndexQuery::range(b"kb", b"$key", b"k10", b"k40");
    q.return_terms = true;
    let full = run_query(&*b, &q, name).results;
    assert_eq!(key_list(&full), keys(10..=40), "{name}: $key");
    assert!(
        full.iter().all(|r| r.term.as_ref() == Some(&r.key)),
        "{name}: $key terms are the keys"
    );
    for n in [1, 3, 31] {
        assert_eq!(
            page_by_cursor(&*b, &q, n, name),
            full,
            "{name}: $key by {n}"
        );
    }
    for term in [&b""[..], b"k20", b"zzz"] {
        let mut c = q.clone();
        c.start_after = Some(IndexCursor::new(term, "k20"));
        assert_eq!(
            key_list(&run_query(&*b, &c, name).results),
            keys(21..=40),
            "{name}: $key after k20, term ignored"
        );
    }
    let mut c = q.clone();
    c.start_after = Some(IndexCursor::new("", "k205"));
    assert_eq!(
        key_list(&run_query(&*b, &c, name).results),
        keys(21..=40),
        "{name}: $key after a key between keys"
    );
    // $key equality.
    let mut e = IndexQuery::eq(b"kb", b"$key", b"k05");
    e.start_after = Some(IndexCursor::new("", "k04"));
    assert_eq!(key_list(&run_query(&*b, &e, name).results), keys(5..=5));
    e.start_after = Some(IndexCursor::new("", "k05"));
    assert!(
        run_query(&*b, &e, name).results.is_empty(),
        "{name}: $key eq"
    );
    // $bucket.
    let q = IndexQuery::eq(b"kb", b"$bucket", b"");
    let full = run_query(&*b, &q, name).results;
    assert_eq!(key_list(&full), keys(0..=49), "{name}: $bucket");
    for n in [1, 6, 50] {
        assert_eq!(
            page_by_cursor(&*b, &q, n, name),
            full,
            "{name}: $bucket by {n}"
        );
    }
    let mut c = q.clone();
    c.start_after = Some(IndexCursor::new("ignored", "k47"));
    assert_eq!(key_list(&run_query(&*b, &c, name).results), keys(48..=49));
    b.close().expect("close");
}

/// Equality queries with a cursor: an empty cursor term stands for the
/// query's term (equality results carry none); an explicit term compares
/// as in a range.
pub fn index_cursor_equality(f: &dyn Factory) {
    let Some((_dir, b)) = cursor_backend(f) else {
        return;
    };
    let name = f.name();
    for i in 0..40u32 {
        let mut ch = vec![IndexChange::add(
            "colour_bin",
            if i % 2 == 0 { "red" } else { "blue" },
        )];
        if i % 3 == 0 {
            ch.push(IndexChange::add("n_int", "7"));
        }
        b.put(
            b"e",
            format!("e{i:02}").as_bytes(),
            b"v",
            b"",
            &with_index(ch),
        )
        .expect("put");
    }
    let keys = |filter: &dyn Fn(u32) -> bool| -> Vec<Vec<u8>> {
        (0..40)
            .filter(|i| filter(*i))
            .map(|i| format!("e{i:02}").into_bytes())
            .collect()
    };
    let q = IndexQuery::eq(b"e", b"colour_bin", b"red");
    let full = run_query(&*b, &q, name).results;
    assert_eq!(key_list(&full), keys(&|i| i % 2 == 0), "{name}: red");
    for n in [1, 3, 20] {
        assert_eq!(page_by_cursor(&*b, &q, n, name), full, "{name}: red by {n}");
    }
    for (term, key, want) in [
        (&b"red"[..], &b"e10"[..], keys(&|i| i % 2 == 0 && i > 10)),
        (b"", b"e10", keys(&|i| i % 2 == 0 && i > 10)),
        (b"", b"e39", vec![]),
        (b"blue", b"zz", keys(&|i| i % 2 == 0)),
        (b"red\0", b"", vec![]),
        (b"reda", b"e00", vec![]),
    ] {
        let mut c = q.clone();
        c.start_after = Some(IndexCursor::new(term, key));
        let ctx = format!(
            "{name}: red after ({}, {})",
            String::from_utf8_lossy(term),
            String::from_utf8_lossy(key)
        );
        assert_eq!(key_list(&run_query(&*b, &c, &ctx).results), want, "{ctx}");
    }
    let q = IndexQuery::eq(b"e", b"n_int", b"7");
    let full = run_query(&*b, &q, name).results;
    assert_eq!(key_list(&full), keys(&|i| i % 3 == 0), "{name}: n_int 7");
    for n in [1, 2, 14] {
        assert_eq!(page_by_cursor(&*b, &q, n, name), full, "{name}: 7 by {n}");
    }
    for (term, key, want) in [
        (&b"7"[..], &b"e12"[..], keys(&|i| i % 3 == 0 && i > 12)),
        (b"", b"e12", keys(&|i| i % 3 == 0 && i > 12)),
        (b"6", b"zz", keys(&|i| i % 3 == 0)),
        (b"-100", b"a", keys(&|i| i % 3 == 0)),
        (b"8", b"", vec![]),
        (b"10", b"a", vec![]),
    ] {
        let mut c = q.clone();
        c.start_after = Some(IndexCursor::new(term, key));
        let ctx = format!(
            "{name}: 7 after ({}, {})",
            String::from_utf8_lossy(term),
            String::from_utf8_lossy(key)
        );
        assert_eq!(key_list(&run_query(&*b, &c, &ctx).results), want, "{ctx}");
    }
    b.close().expect("close");
}

/// A cursor at or beyond the end of the range gives an empty page without
/// a continuation; one before the range gives all of it.
pub fn index_cursor_beyond_end(f: &dyn Factory) {
    let Some((_dir, b)) = cursor_backend(f) else {
        return;
    };
    let name = f.name();
    for i in 0..10u32 {
        let ch = vec![
            IndexChange::add("t_bin", format!("m{i}")),
            IndexChange::add("n_int", i.to_string()),
        ];
        b.put(b"x", format!("k{i}").as_bytes(), b"v", b"", &with_index(ch))
            .expect("put");
    }
    let mut q = IndexQuery::range(b"x", b"t_bin", b"m0", b"m9");
    q.return_terms = true;
    q.max_results = Some(3);
    let mut all = q.clone();
    all.max_results = None;
    let full = run_query(&*b, &all, name).results;
    assert_eq!(full.len(), 10);
    for (term, key) in [
        (&b"m9"[..], &b"k9"[..]),
        (b"m9", b"\xff\xff"),
        (b"zzz", b"a"),
        (b"\xff\xff\xff", b"\xff"),
    ] {
        let mut c = q.clone();
        c.start_after = Some(IndexCursor::new(term, key));
        let p = run_query(&*b, &c, name);
        assert!(
            p.results.is_empty(),
            "{name}: beyond the end: {:?}",
            p.results
        );
        assert_eq!(p.continuation, None, "{name}: empty page, no continuation");
    }
    let mut c = all.clone();
    c.start_after = Some(IndexCursor::new("m5", &b"\xff"[..]));
    assert_eq!(run_query(&*b, &c, name).results, full[6..], "{name}: m5");
    c.start_after = Some(IndexCursor::new("a", "a"));
    assert_eq!(
        run_query(&*b, &c, name).results,
        full,
        "{name}: before the range"
    );
    c.start_after = Some(IndexCursor::new("", ""));
    assert_eq!(
        run_query(&*b, &c, name).results,
        full,
        "{name}: empty cursor"
    );
    let mut n = IndexQuery::range(b"x", b"n_int", b"0", b"9");
    n.start_after = Some(IndexCursor::new(i64::MAX.to_string(), "a"));
    assert!(run_query(&*b, &n, name).results.is_empty(), "{name}: _int");
    n.start_after = Some(IndexCursor::new("9", "k9"));
    assert!(
        run_query(&*b, &n, name).results.is_empty(),
        "{name}: _int last"
    );
    let mut k = IndexQuery::range(b"x", b"$key", b"k0", b"k9");
    k.start_after = Some(IndexCursor::new("", "zzz"));
    assert!(run_query(&*b, &k, name).results.is_empty(), "{name}: $key");
    let mut bq = IndexQuery::eq(b"x", b"$bucket", b"");
    bq.start_after = Some(IndexCursor::new("", "k9"));
    assert!(
        run_query(&*b, &bq, name).results.is_empty(),
        "{name}: $bucket"
    );
    b.close().expect("close");
}

/// `start_after` together with `continuation` is `InvalidInput` naming
/// both; an oversized cursor is `InvalidInput`.
pub fn index_cursor_with_continuation(f: &dyn Factory) {
    let Some((_dir, b)) = cursor_backend(f) else {
        return;
    };
    let name = f.name();
    for i in 0..10u32 {
        let ch = vec![IndexChange::add("t_bin", format!("m{i}"))];
        b.put(b"c", format!("k{i}").as_bytes(), b"v", b"", &with_index(ch))
            .expect("put");
    }
    let mut q = IndexQuery::range(b"c", b"t_bin", b"m0", b"m9");
    q.max_results = Some(3);
    let cont = run_query(&*b, &q, name)
        .continuation
        .expect("full page continuation");
    for c in [cont, "garbage!".to_string()] {
        let mut both = q.clone();
        both.continuation = Some(c);
        both.start_after = Some(IndexCursor::new("m1", "k1"));
        let e = b
            .index_query(&both)
            .expect_err("continuation and start_after");
        assert!(matches!(e, BackendError::InvalidInput(_)), "{name}: {e}");
        let m = e.to_string();
        assert!(
            m.contains("continuation") && m.contains("start_after"),
            "{name}: message names both: {m}"
        );
    }
    let mut big = q.clone();
    big.start_after = Some(IndexCursor::new("m1", vec![b'k'; 70 * 1024]));
    let e = b.index_query(&big).expect_err("oversized cursor key");
    assert!(matches!(e, BackendError::InvalidInput(_)), "{name}: {e}");
    big.start_after = Some(IndexCursor::new(vec![b'm'; 70 * 1024], "k1"));
    let e = b.index_query(&big).expect_err("oversized cursor term");
    assert!(matches!(e, BackendError::InvalidInput(_)), "{name}: {e}");
    b.close().expect("close");
}

/// One generated case of [`index_cursor_model`].
#[derive(Debug, Clone)]
struct CursorCase {
    int: bool,
    /// (bin term, int term, key, remove)
    ops: Vec<(Vec<u8>, i64, Vec<u8>, bool)>,
    page: u32,
    bin_bounds: (Vec<u8>, Vec<u8>),
    int_bounds: (i64, i64),
    regex: bool,
    cursor: Option<(Vec<u8>, i64, Vec<u8>)>,
}

/// Property test: paging by `start_after` (random page sizes, from a
/// random first cursor, `_bin` or `_int`, with removals and sometimes a
/// `term_regex`) equals a `BTreeMap` model of the entries. The seed comes
/// from `BASALT_TEST_SEED`; `BASALT_LONG_TESTS=1` runs more cases.
pub fn index_cursor_model(f: &dyn Factory) {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    match cursor_backend(f) {
        None => return,
        Some((_dir, b)) => b.close().expect("close"),
    }
    let name = f.name();
    let cases = if long() { 256 } else { 24 };
    let s = seed();
    eprintln!("conformance::index_cursor_model {name}: seed {s} (BASALT_TEST_SEED={s} to replay)");
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&s.to_le_bytes());
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
    let byte = || prop_oneof![Just(0u8), Just(1u8), Just(b'a'), Just(b'b'), Just(0xFFu8)];
    let term = move || proptest::collection::vec(byte(), 0..3);
    let key = move || proptest::collection::vec(byte(), 1..3);
    let op = (term(), -6i64..6, key(), proptest::bool::weighted(0.2));
    let strategy = (
        any::<bool>(),
        proptest::collection::vec(op, 0..80),
        1u32..9,
        (term(), term()),
        (-7i64..7, -7i64..7),
        any::<bool>(),
        proptest::option::of((term(), -7i64..7, proptest::collection::vec(byte(), 0..3))),
    )
        .prop_map(
            |(int, ops, page, bin_bounds, int_bounds, regex, cursor)| CursorCase {
                int,
                ops,
                page,
                bin_bounds,
                int_bounds,
                regex: regex && !int,
                cursor,
            },
        );
    let result = runner.run(&strategy, |c| {
        let dir = tempdir();
        let b = f.open(dir.path()).expect("open");
        let field: &[u8] = if c.int { b"n_int" } else { b"t_bin" };
        // Model: (order term, key) -> user term; the order term is the
        // sign-flipped big-endian form for _int (numeric order).
        let order = |v: i64| ((v as u64) ^ (1 << 63)).to_be_bytes().to_vec();
        let mut m: BTreeMap<(Vec<u8>, Vec<u8>), Vec<u8>> = BTreeMap::new();
        for (bt, it, k, remove) in &c.ops {
            let (ord, user) = if c.int {
                (order(*it), it.to_string().into_bytes())
            } else {
                (bt.clone(), bt.clone())
            };
            let ch = if *remove {
                IndexChange::remove(field, user.clone())
            } else {
                IndexChange::add(field, user.clone())
            };
            b.put(b"pm", k, b"v", b"", &with_index(vec![ch]))
                .expect("put");
            if *remove {
                m.remove(&(ord, k.clone()));
            } else {
                m.insert((ord, k.clone()), user);
            }
        }
        let (lo, hi, lo_ord, hi_ord) = if c.int {
            let (a, z) = (
                c.int_bounds.0.min(c.int_bounds.1),
                c.int_bounds.0.max(c.int_bounds.1),
            );
            (
                a.to_string().into_bytes(),
                z.to_string().into_bytes(),
                order(a),
                order(z),
            )
        } else {
            let (a, z) = if c.bin_bounds.0 <= c.bin_bounds.1 {
                (c.bin_bounds.0.clone(), c.bin_bounds.1.clone())
            } else {
                (c.bin_bounds.1.clone(), c.bin_bounds.0.clone())
            };
            (a.clone(), z.clone(), a, z)
        };
        let mut q = IndexQuery::range(b"pm", field, &lo, &hi);
        q.return_terms = true;
        if c.regex {
            q.term_regex = Some("a".into());
        }
        let cursor = c.cursor.as_ref().map(|(bt, it, k)| {
            if c.int {
                (order(*it), it.to_string().into_bytes(), k.clone())
            } else {
                (bt.clone(), bt.clone(), k.clone())
            }
        });
        q.start_after = cursor
            .as_ref()
            .map(|(_, user, k)| IndexCursor::new(user.clone(), k.clone()));
        let want: Vec<IndexResult> = m
            .iter()
            .filter(|((ord, k), _)| {
                *ord >= lo_ord
                    && *ord <= hi_ord
                    && (!c.regex || ord.contains(&b'a'))
                    && cursor
                        .as_ref()
                        .is_none_or(|(co, _, ck)| (ord, k) > (co, ck))
            })
            .map(|((_, k), user)| IndexResult {
                term: Some(user.clone()),
                key: k.clone(),
            })
            .collect();
        let got = page_by_cursor(&*b, &q, c.page, name);
        b.close().expect("close");
        prop_assert_eq!(got, want);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{name}: index_cursor_model (seed {s}): {e}");
    }
}

/// Head folds with filters against a model, or `NotSupported`.
pub fn fold_filters(f: &dyn Factory) {
    let dir = tempdir();
    let b = f.open(dir.path()).expect("open");
    if !b.capabilities().fold_heads {
        let e = b
            .fold_heads(None, None, &FoldOptions::default(), &mut |_, _, _| {
                ControlFlow::Continue(())
            })
            .expect_err("fold_heads without the capability");
        assert!(
            matches!(
                e,
                BackendError::NotSupported {
                    capability: Capability::FoldHeads,
                    ..
                }
            ),
            "{e}"
        );
        return;
    }
    let mut model = Vec::new();
    for i in 0..200u64 {
        let bucket: &[u8] = if i % 2 == 0 { b"even" } else { b"odd" };
        let key = format!("key{i:04}").into_bytes();
        let opts = WriteOptions {
            last_modified_us: Some(1_000_000 + i * 10),
            ..WriteOptions::default()
        };
        b.put(bucket, &key, &i.to_le_bytes(), b"", &opts)
            .expect("put");
        model.push((bucket.to_vec(), key, 1_000_000 + i * 10));
    }
    let fold = |bucket: Option<&[u8]>, o: &FoldOptions| {
        let mut got = Vec::new();
        let out = b
            .fold_heads(bucket, None, o, &mut |bb, k, h| {
                got.push((bb.to_vec(), k.to_vec(), h.last_modified_us));
                ControlFlow::Continue(())
            })
            .expect("fold_heads");
        got.sort();
        (got, out)
    };
    let mut sorted = model.clone();
    sorted.sort();
    let (all, out) = fold(None, &FoldOptions::default());
    assert_eq!(all, sorted);
    assert!(out.complete);
    let lo = 1_000_000 + 50 * 10;
    let hi = 1_000_000 + 99 * 10;
    let (got, _) = fold(
        None,
        &FoldOptions {
            modified_range: Some((lo, hi)),
            ..FoldOptions::default()
        },
    );
    let want: Vec<_> = sorted
        .iter()
        .filter(|(_, _, t)| *t >= lo && *t <= hi)
        .cloned()
        .collect();
    assert_eq!(got, want, "modified range");
    let size = TreeSize::XXSmall;
    let ids: Vec<u32> = model
        .iter()
        .take(5)
        .map(|(bb, k, _)| segment_of(bb, k, size))
        .collect();
    let (got, _) = fold(
        None,
        &FoldOptions {
            segments: Some((size, ids.clone())),
            ..FoldOptions::default()
        },
    );
    let want: Vec<_> = sorted
        .iter()
        .filter(|(bb, k, _)| ids.contains(&segment_of(bb, k, size)))
        .cloned()
        .collect();
    assert_eq!(got, want, "segments");
    let (got, out) = fold(
        Some(b"odd"),
        &FoldOptions {
            max_objects: Some(7),
            journal_check: true,
            ..FoldOptions::default()
        },
    );
    assert_eq!(got.len(), 7);
    assert!(!out.complete);
    let (got, out) = fold(
        Some(b"odd"),
        &FoldOptions {
            journal_check: true,
            ..FoldOptions::default()
        },
    );
    assert_eq!((got.len(), out.missing_in_journal), (100, 0));
    b.close().expect("close");
}

/// A snapshot keeps its view while writes and deletes go on.
pub fn snapshots(f: &dyn Factory) {
    let dir = tempdir();
    let b = f.open(dir.path()).expect("open");
    for i in 0..100u32 {
        put(&*b, b"s", format!("k{i:03}").as_bytes(), &i.to_le_bytes());
    }
    let snap = b.snapshot().expect("snapshot");
    for i in 0..100u32 {
        let k = format!("k{i:03}");
        if i % 2 == 0 {
            b.delete(b"s", k.as_bytes(), &WriteOptions::default())
                .expect("delete");
        } else {
            put(&*b, b"s", k.as_bytes(), b"new");
        }
    }
    put(&*b, b"s2", b"x", b"y");
    for i in 0..100u32 {
        let k = format!("k{i:03}");
        let o = snap.get(b"s", k.as_bytes()).expect("snapshot get");
        assert_eq!(
            o.map(|o| o.value),
            Some(i.to_le_bytes().to_vec()),
            "snapshot sees {k}"
        );
    }
    let mut n = 0;
    snap.fold_keys(b"s", None, &mut |_| {
        n += 1;
        ControlFlow::Continue(())
    })
    .expect("snapshot fold");
    assert_eq!(n, 100);
    let mut objs = 0;
    snap.fold_objects(
        b"s",
        Some(&KeyRange::new(b"k010", b"k019")),
        &mut |_, _, o| {
            assert_eq!(o.value.len(), 4);
            objs += 1;
            ControlFlow::Continue(())
        },
    )
    .expect("snapshot object fold");
    assert_eq!(objs, 10);
    assert_eq!(snap.list_buckets().expect("buckets"), vec![b"s".to_vec()]);
    drop(snap);
    assert_eq!(keys_of(&*b, b"s", None).len(), 50);
    b.close().expect("close");
}

/// Flipped bytes in data files: never a wrong value, errors typed.
pub fn corruption(f: &dyn Factory) {
    if !f.persistent() {
        return;
    }
    let dir = tempdir();
    let n = 400u32;
    let value = |i: u32| format!("value-{i:05}-").repeat(20).into_bytes();
    {
        let b = f.open(dir.path()).expect("open");
        for i in 0..n {
            put(&*b, b"c", format!("k{i:04}").as_bytes(), &value(i));
        }
        b.close().expect("close");
    }
    let mut files = f.data_files(dir.path());
    files.sort_by_key(|p| std::cmp::Reverse(std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)));
    assert!(!files.is_empty(), "{}: no data files to damage", f.name());
    for p in files.iter().take(2) {
        let mut bytes = std::fs::read(p).expect("read");
        let mid = bytes.len() / 2;
        for x in bytes.iter_mut().skip(mid).take(8) {
            *x ^= 0x5A;
        }
        std::fs::write(p, bytes).expect("write");
    }
    let b = match f.open(dir.path()) {
        Ok(b) => b,
        Err(e) => {
            assert!(
                e.is_corruption(),
                "{}: open after damage must be Corrupt or succeed: {e}",
                f.name()
            );
            return;
        }
    };
    let mut bad = 0;
    for i in 0..n {
        let k = format!("k{i:04}");
        match b.get(b"c", k.as_bytes()) {
            Ok(Some(o)) => assert_eq!(o.value, value(i), "{}: wrong value for {k}", f.name()),
            Ok(None) => bad += 1,
            Err(e) => {
                assert!(e.is_corruption(), "{}: {k}: untyped error {e}", f.name());
                bad += 1;
            }
        }
    }
    assert!(
        bad <= n / 4,
        "{}: {bad} of {n} keys lost to two 8-byte flips",
        f.name()
    );
}

/// Bad input is `InvalidInput`.
pub fn validation(f: &dyn Factory) {
    let dir = tempdir();
    let b = f.open(dir.path()).expect("open");
    for (bucket, key) in [(&b""[..], &b"k"[..]), (b"b", b"")] {
        let e = b
            .put(bucket, key, b"v", b"", &WriteOptions::default())
            .expect_err("empty name");
        assert!(matches!(e, BackendError::InvalidInput(_)), "{e}");
    }
    let big = vec![0u8; 70 * 1024];
    let e = b
        .put(b"b", &big, b"v", b"", &WriteOptions::default())
        .expect_err("huge key");
    assert!(matches!(e, BackendError::InvalidInput(_)), "{e}");
    assert!(matches!(
        b.fold_heads(
            None,
            Some(&KeyRange::new(b"a", b"b")),
            &FoldOptions::default(),
            &mut |_, _, _| ControlFlow::Continue(())
        ),
        Err(BackendError::InvalidInput(_) | BackendError::NotSupported { .. })
    ));
    b.close().expect("close");
    assert!(
        matches!(b.get(b"b", b"k"), Err(BackendError::Closed(_))),
        "get after close"
    );
}

/// Every missing capability answers `NotSupported` naming it.
pub fn capabilities_honest(f: &dyn Factory) {
    let dir = tempdir();
    let b = f.open(dir.path()).expect("open");
    let caps = b.capabilities();
    assert_eq!(b.name(), f.name());
    match b.tictac_tree() {
        Ok(t) => assert!(caps.native_aae && t.starts_with(b"BSLTTIC1")),
        Err(e) => {
            assert!(!caps.native_aae);
            assert!(
                matches!(
                    e,
                    BackendError::NotSupported {
                        capability: Capability::NativeAae,
                        ..
                    }
                ),
                "{e}"
            );
            assert!(e.to_string().contains(f.name()) && e.to_string().contains("native_aae"));
        }
    }
    b.close().expect("close");
}

/// Every check above.
pub fn run_all(f: &dyn Factory) {
    model(f);
    indexes(f);
    index_cursor_paging(f);
    index_cursor_int_order(f);
    index_cursor_keys(f);
    index_cursor_equality(f);
    index_cursor_beyond_end(f);
    index_cursor_with_continuation(f);
    index_cursor_model(f);
    fold_filters(f);
    snapshots(f);
    corruption(f);
    validation(f);
    capabilities_honest(f);
}
