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

use basalt_engine::{Config, Store};
use proptest::prelude::*;
use proptest::test_runner::{Config as PtConfig, RngAlgorithm, TestRng, TestRunner};
use std::collections::BTreeMap;

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
    Compact,
}

fn op() -> impl Strategy<Value = Op> {
    let bucket = 0u8..3;
    let key = 0u16..200;
    prop_oneof![
        30 => (bucket.clone(), key.clone(), 0u16..600, any::<u8>())
            .prop_map(|(bucket, key, len, fill)| Op::Put { bucket, key, len, fill }),
        6 => (bucket.clone(), key.clone()).prop_map(|(bucket, key)| Op::Delete { bucket, key }),
        10 => (bucket.clone(), key.clone()).prop_map(|(bucket, key)| Op::Get { bucket, key }),
        5 => (bucket.clone(), key.clone()).prop_map(|(bucket, key)| Op::Head { bucket, key }),
        2 => bucket.prop_map(|bucket| Op::Keys { bucket }),
        1 => Just(Op::Reopen),
        1 => Just(Op::Crash),
        1 => Just(Op::Settle),
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
type Model = BTreeMap<(Vec<u8>, Vec<u8>), (Vec<u8>, Vec<u8>)>;

fn run(ops: Vec<Op>, background: bool) -> Result<(), TestCaseError> {
    let dir = tempfile::tempdir().map_err(|e| TestCaseError::fail(e.to_string()))?;
    let cfg = || {
        let mut c = Config::test_min(dir.path());
        c.background_merges = background;
        c
    };
    let open = || Store::open(cfg()).map_err(|e| TestCaseError::fail(format!("open: {e}")));
    let mut store = open()?;
    let mut model: Model = BTreeMap::new();
    for (step, op) in ops.into_iter().enumerate() {
        let ctx = format!("step {step}: {op:?}");
        match op {
            Op::Put {
                bucket,
                key,
                len,
                fill,
            } => {
                let v = value(len, fill, key);
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
            Op::Settle => {
                store
                    .settle()
                    .map_err(|e| TestCaseError::fail(format!("{ctx}: {e}")))?;
            }
            Op::Compact => {
                store
                    .compact_journal()
                    .map_err(|e| TestCaseError::fail(format!("{ctx}: {e}")))?;
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
    let res = r.run(&proptest::collection::vec(op(), 1..400), |ops| {
        run(ops, false)
    });
    assert!(res.is_ok(), "seed {seed}: {res:?}");
}

#[test]
fn store_matches_model_background_merges() {
    let seed = seed().wrapping_add(1);
    println!("store_model seed = {seed} (set BASALT_TEST_SEED to reproduce)");
    let mut r = runner(seed, cases(32, 500));
    let res = r.run(&proptest::collection::vec(op(), 1..400), |ops| {
        run(ops, true)
    });
    assert!(res.is_ok(), "seed {seed}: {res:?}");
}
