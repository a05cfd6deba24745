//! Conformance: secondary indexes ([`indexes`]): equality, range, `_int`
//! order, `return_terms`, regex, paging, removals, `$key` / `$bucket`; or
//! a typed `NotSupported` without the capability.

use super::{tempdir, Factory};
use crate::{BackendError, Capability, IndexChange, IndexPage, IndexQuery, WriteOptions};

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
