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
    fold_filters(f);
    snapshots(f);
    corruption(f);
    validation(f);
    capabilities_honest(f);
}
