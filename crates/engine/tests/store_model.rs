//! Model-based test of the store: random sequences of put / delete / get /
//! head / keys / close+reopen / crash+reopen / journal compaction, checked after every step against
//! a `BTreeMap` model.
//!
//! Method: proptest generates the operation sequences from a seed printed at
//! the start (override with `BASALT_TEST_SEED=<u64>`; `BASALT_LONG_TESTS=1`
//! runs many more cases). The store uses `Config::test_min`, so journal rolls,
//! memtable flushes and ledger merges all happen within a short sequence.
//! "Crash" drops the store without persisting the ledger or syncing: every
//! acknowledged write has reached the OS, so all of them must survive.

use basalt_engine::{Config, IndexChange, IndexQuery, Punch, PutOptions, Store};
use proptest::prelude::*;
use proptest::test_runner::{Config as PtConfig, RngAlgorithm, TestRng, TestRunner};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};

#[derive(Debug, Clone)]
enum Op {
    Put {
        bucket: u8,
        key: u16,
        len: u16,
        fill: u8,
    },
    Delete {
        bucket: u8,
        key: u16,
    },
    Get {
        bucket: u8,
        key: u16,
    },
    Head {
        bucket: u8,
        key: u16,
    },
    Keys {
        bucket: u8,
    },
    Reopen,
    Crash,
    Settle,
    /// A put carrying index changes: (add?, int field?, term).
    PutIndexed {
        bucket: u8,
        key: u16,
        changes: Vec<(bool, bool, i8)>,
    },
    /// A 2i range query (return_terms), paged when `page` is set.
    Query {
        bucket: u8,
        int: bool,
        lo: i8,
        hi: i8,
        page: Option<u8>,
    },
    /// Take a snapshot and keep a copy of the model with it.
    Snapshot,
    /// Compare the snapshot's reads and key fold with the copied model.
    CheckSnapshot {
        bucket: u8,
        key: u16,
    },
    Compact,
}

/// An operation on `keys` keys per bucket.
fn op(keys: u16) -> impl Strategy<Value = Op> {
    let bucket = 0u8..3;
    let key = 0u16..keys;
    prop_oneof![
        30 => (bucket.clone(), key.clone(), 0u16..600, any::<u8>())
            .prop_map(|(bucket, key, len, fill)| Op::Put { bucket, key, len, fill }),
        6 => (bucket.clone(), key.clone()).prop_map(|(bucket, key)| Op::Delete { bucket, key }),
        10 => (bucket.clone(), key.clone()).prop_map(|(bucket, key)| Op::Get { bucket, key }),
        5 => (bucket.clone(), key.clone()).prop_map(|(bucket, key)| Op::Head { bucket, key }),
        2 => bucket.clone().prop_map(|bucket| Op::Keys { bucket }),
        1 => Just(Op::Reopen),
        1 => Just(Op::Crash),
        1 => Just(Op::Settle),
        8 => (bucket.clone(), key.clone(), proptest::collection::vec((any::<bool>(), any::<bool>(), -6i8..6), 0..4))
            .prop_map(|(bucket, key, changes)| Op::PutIndexed { bucket, key, changes }),
        3 => (bucket.clone(), any::<bool>(), -7i8..7, -7i8..7, proptest::option::of(1u8..6))
            .prop_map(|(bucket, int, lo, hi, page)| Op::Query { bucket, int, lo, hi, page }),
        1 => Just(Op::Snapshot),
        3 => (bucket.clone(), key).prop_map(|(bucket, key)| Op::CheckSnapshot { bucket, key }),
        2 => Just(Op::Compact),
    ]
}

fn bname(b: u8) -> Vec<u8> {
    // Bucket names include a zero byte and a prefix relation ("b", "b\0", "bb").
    match b {
        0 => b"b".to_vec(),
        1 => b"b\0".to_vec(),
        _ => b"bb".to_vec(),
    }
}

fn kname(k: u16) -> Vec<u8> {
    format!("key-{k:05}").into_bytes()
}

fn value(len: u16, fill: u8, key: u16) -> Vec<u8> {
    (0..len as usize)
        .map(|i| fill.wrapping_add(i as u8).wrapping_mul(key as u8 | 1))
        .collect()
}

/// (bucket, key) -> (value, metadata).
/// Most files one case's store punched (the in-place test checks that some
/// case did).
static FILES_PUNCHED: AtomicU64 = AtomicU64::new(0);

type Model = BTreeMap<(Vec<u8>, Vec<u8>), (Vec<u8>, Vec<u8>)>;

fn run(ops: Vec<Op>, background: bool, punch: Punch) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
    let cfg = || {
        let mut c = Config::test_min(dir.path());
        c.background_merges = background;
        c.compaction_punch = punch;
        if punch == Punch::On {
            // Records of several blocks, so that garbage runs free some.
            c.compression = basalt_engine::Compression::None;
        }
        c
    };
    let scale = if punch == Punch::On { 16 } else { 1 };
    let open = || Store::open(cfg()).map_err(|e| TestCaseError::fail(format!("open: {e}")));
    let mut store = open()?;
    let mut model: Model = BTreeMap::new();
    let mut imodel = IndexModel::default();
    let mut snap: Option<(basalt_engine::Snapshot, Model)> = None;
    for (step, op) in ops.into_iter().enumerate() {
        let ctx = format!("step {step}: {op:?}");
        if matches!(op, Op::Reopen | Op::Crash) {
            snap = None; // Snapshots do not outlive their store.
        }
        match op {
            Op::Snapshot => {
                let s = store
                    .snapshot(basalt_engine::SnapshotOptions::all())
                    .map_err(|e| TestCaseError::fail(format!("{ctx}: {e}")))?;
                snap = Some((s, model.clone()));
            }
            Op::CheckSnapshot { bucket, key } => {
                let Some((s, m)) = &snap else { continue };
                let fail = |e: basalt_engine::Error| TestCaseError::fail(format!("{ctx}: {e}"));
                let got = s.get(&bname(bucket), &kname(key)).map_err(fail)?;
                let want = m.get(&(bname(bucket), kname(key)));
                prop_assert_eq!(
                    got.as_ref().map(|o| (&o.value, &o.head.metadata)),
                    want.map(|(v, md)| (v, md)),
                    "{}",
                    ctx
                );
                let mut keys = Vec::new();
                s.fold_keys(&bname(bucket), None, |k| {
                    keys.push(k.to_vec());
                    std::ops::ControlFlow::Continue(())
                })
                .map_err(fail)?;
                let want: Vec<Vec<u8>> = m
                    .keys()
                    .filter(|(b, _)| *b == bname(bucket))
                    .map(|(_, k)| k.clone())
                    .collect();
                prop_assert_eq!(keys, want, "{}", ctx);
            }
            Op::Put {
                bucket,
                key,
                len,
                fill,
            } => {
                let v = value(len.saturating_mul(scale), fill, key);
                let meta = vec![fill; (fill % 7) as usize];
                store
                    .put(&bname(bucket), &kname(key), &v, &meta)
                    .map_err(|e| TestCaseError::fail(format!("{ctx}: {e}")))?;
                model.insert((bname(bucket), kname(key)), (v, meta));
            }
            Op::Delete { bucket, key } => {
                store
                    .delete(&bname(bucket), &kname(key))
                    .map_err(|e| TestCaseError::fail(format!("{ctx}: {e}")))?;
                model.remove(&(bname(bucket), kname(key)));
            }
            Op::Get { bucket, key } => {
                let got = store
                    .get(&bname(bucket), &kname(key))
                    .map_err(|e| TestCaseError::fail(format!("{ctx}: {e}")))?;
                let want = model.get(&(bname(bucket), kname(key)));
                prop_assert_eq!(
                    got.as_ref().map(|o| (&o.value, &o.head.metadata)),
                    want.map(|(v, m)| (v, m)),
                    "{}",
                    ctx
                );
            }
            Op::Head { bucket, key } => {
                let got = store
                    .head(&bname(bucket), &kname(key))
                    .map_err(|e| TestCaseError::fail(format!("{ctx}: {e}")))?;
                let want = model.get(&(bname(bucket), kname(key)));
                prop_assert_eq!(
                    got.as_ref().map(|h| (h.size, &h.metadata)),
                    want.map(|(v, m)| (v.len() as u64, m)),
                    "{}",
                    ctx
                );
            }
            Op::Keys { bucket } => {
                let got = store
                    .keys(&bname(bucket))
                    .map_err(|e| TestCaseError::fail(format!("{ctx}: {e}")))?;
                let want: Vec<Vec<u8>> = model
                    .keys()
                    .filter(|(b, _)| *b == bname(bucket))
                    .map(|(_, k)| k.clone())
                    .collect();
                prop_assert_eq!(got, want, "{}", ctx);
            }
            Op::Reopen => {
                store
                    .close()
                    .map_err(|e| TestCaseError::fail(format!("{ctx}: {e}")))?;
                drop(store);
                store = open()?;
                let replayed = store
                    .stats()
                    .counters
                    .iter()
                    .find(|(n, _)| *n == "journal_replayed_records")
                    .map_or(u64::MAX, |(_, v)| *v);
                prop_assert_eq!(replayed, 0, "clean reopen must not replay: {}", ctx);
            }
            Op::Crash => {
                store.simulate_crash();
                store = open()?;
            }
            Op::PutIndexed {
                bucket,
                key,
                changes,
            } => {
                let opts = PutOptions {
                    index: changes
                        .iter()
                        .map(|c| imodel.change(bucket, key, *c))
                        .collect(),
                    ..PutOptions::default()
                };
                store
                    .put_with(&bname(bucket), &kname(key), b"v", b"", &opts)
                    .map_err(|e| TestCaseError::fail(format!("{ctx}: {e}")))?;
                model.insert((bname(bucket), kname(key)), (b"v".to_vec(), Vec::new()));
            }
            Op::Query {
                bucket,
                int,
                lo,
                hi,
                page,
            } => {
                let got = query_all(&store, bucket, int, lo, hi, page)
                    .map_err(|e| TestCaseError::fail(format!("{ctx}: {e}")))?;
                prop_assert_eq!(got, imodel.query(bucket, int, lo, hi), "{}", ctx);
            }
            Op::Settle => {
                store
                    .settle()
                    .map_err(|e| TestCaseError::fail(format!("{ctx}: {e}")))?;
            }
            Op::Compact => {
                store
                    .compact_journal()
                    .map_err(|e| TestCaseError::fail(format!("{ctx}: {e}")))?;
                let punched = store.stats().counter("compaction_files_punched");
                FILES_PUNCHED.fetch_max(punched.unwrap_or(0), Ordering::Relaxed);
            }
        }
    }
    // Final full check, then once more after a reopen.
    for round in 0..2 {
        for ((b, k), (v, m)) in &model {
            let got = store
                .get(b, k)
                .map_err(|e| TestCaseError::fail(format!("final get: {e}")))?;
            prop_assert_eq!(
                got.map(|o| (o.value, o.head.metadata)),
                Some((v.clone(), m.clone()))
            );
        }
        if round == 0 {
            store
                .close()
                .map_err(|e| TestCaseError::fail(format!("final close: {e}")))?;
            drop(store);
            store = open()?;
        }
    }
    Ok(())
}

/// Live index entries: (bucket, int field?, term, key). Terms of both
/// fields are small integers so one ordering serves both (the `_bin` term is
/// a fixed-width text form that sorts like the number).
#[derive(Default)]
struct IndexModel(std::collections::BTreeSet<(u8, bool, i8, u16)>);

fn bin_term(t: i8) -> String {
    format!("t{:02}", i16::from(t) + 50)
}

impl IndexModel {
    fn change(&mut self, bucket: u8, key: u16, (add, int, t): (bool, bool, i8)) -> IndexChange {
        let e = (bucket, int, t, key);
        let (field, term) = if int {
            ("n_int", t.to_string())
        } else {
            ("s_bin", bin_term(t))
        };
        if add {
            self.0.insert(e);
            IndexChange::add(field, term)
        } else {
            self.0.remove(&e);
            IndexChange::remove(field, term)
        }
    }

    fn query(&self, bucket: u8, int: bool, lo: i8, hi: i8) -> Vec<(Vec<u8>, Vec<u8>)> {
        self.0
            .iter()
            .filter(|(b, i, t, _)| *b == bucket && *i == int && (lo..=hi).contains(t))
            .map(|(_, _, t, k)| {
                let term = if int { t.to_string() } else { bin_term(*t) };
                (term.into_bytes(), kname(*k))
            })
            .collect()
    }
}

fn query_all(
    store: &Store,
    bucket: u8,
    int: bool,
    lo: i8,
    hi: i8,
    page: Option<u8>,
) -> basalt_engine::Result<Vec<(Vec<u8>, Vec<u8>)>> {
    let (field, lo, hi) = if int {
        ("n_int", lo.to_string(), hi.to_string())
    } else {
        ("s_bin", bin_term(lo), bin_term(hi))
    };
    let mut q = IndexQuery::range(
        &bname(bucket),
        field.as_bytes(),
        lo.as_bytes(),
        hi.as_bytes(),
    );
    q.return_terms = true;
    q.max_results = page.map(u32::from);
    let mut out = Vec::new();
    loop {
        let p = store.index_query(&q)?;
        out.extend(
            p.results
                .into_iter()
                .map(|r| (r.term.unwrap_or_default(), r.key)),
        );
        match p.continuation {
            Some(c) => q.continuation = Some(c),
            None => return Ok(out),
        }
    }
}

fn seed() -> u64 {
    std::env::var("BASALT_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_BA5A)
}

fn cases(short: u32, long: u32) -> u32 {
    if std::env::var("BASALT_LONG_TESTS").is_ok_and(|v| v == "1") {
        long
    } else {
        short
    }
}

fn runner(seed: u64, cases: u32) -> TestRunner {
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    let config = PtConfig {
        cases,
        failure_persistence: None,
        ..PtConfig::default()
    };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
}

#[test]
fn store_matches_model_inline_merges() {
    let seed = seed();
    println!("store_model seed = {seed} (set BASALT_TEST_SEED to reproduce)");
    let mut r = runner(seed, cases(64, 1000));
    let res = r.run(&proptest::collection::vec(op(200), 1..400), |ops| {
        run(ops, false, Punch::Off)
    });
    assert!(res.is_ok(), "seed {seed}: {res:?}");
}

#[test]
fn store_matches_model_background_merges() {
    let seed = seed().wrapping_add(1);
    println!("store_model seed = {seed} (set BASALT_TEST_SEED to reproduce)");
    let mut r = runner(seed, cases(32, 500));
    let res = r.run(&proptest::collection::vec(op(200), 1..400), |ops| {
        run(ops, true, Punch::Off)
    });
    assert!(res.is_ok(), "seed {seed}: {res:?}");
}

/// The same with journal garbage reclaimed in place (where the file
/// system punches holes; elsewhere it copies, as above): snapshots, crash
/// and reopen among the punched files.
#[test]
fn store_matches_model_reclaiming_in_place() {
    let seed = seed().wrapping_add(2);
    println!("store_model seed = {seed} (set BASALT_TEST_SEED to reproduce)");
    let mut r = runner(seed, cases(32, 500));
    let res = r.run(&proptest::collection::vec(op(12), 1..400), |ops| {
        run(ops, false, Punch::On)
    });
    assert!(res.is_ok(), "seed {seed}: {res:?}");
    let punched = FILES_PUNCHED.load(Ordering::Relaxed);
    println!("most files punched in one case: {punched}");
    let d = tempfile::tempdir().expect("test setup");
    if basalt_engine::journal::punch::probe_punch(d.path()) {
        assert!(punched > 0, "no case reclaimed in place");
    }
}
