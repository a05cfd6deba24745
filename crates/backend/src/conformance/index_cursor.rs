//! Conformance: paging 2i queries by [`IndexQuery::start_after`] cursors,
//! case by case (`_bin` ranges, `_int` order, `$key` / `$bucket`,
//! equality, past the end, with a continuation); plus the helpers the
//! cursor model test shares.

use super::{put, tempdir, Factory};
use crate::{
    Backend, BackendError, Capability, IndexChange, IndexCursor, IndexPage, IndexQuery,
    IndexResult, WriteOptions,
};
use std::collections::BTreeSet;

pub(super) fn with_index(changes: Vec<IndexChange>) -> WriteOptions {
    WriteOptions {
        index: changes,
        ..WriteOptions::default()
    }
}

/// Opens the backend for a cursor check; `None` without the `indexes`
/// capability (after checking a cursor query is then `NotSupported`).
pub(super) fn cursor_backend(f: &dyn Factory) -> Option<(tempfile::TempDir, Box<dyn Backend>)> {
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
pub(super) fn page_by_cursor(
    b: &dyn Backend,
    q: &IndexQuery,
    n: u32,
    ctx: &str,
) -> Vec<IndexResult> {
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
