//! Snapshots, folds and tictac trees through the public API.
//!
//! Method: each test opens a fresh store in a temporary directory (small
//! `Config::test_min` sizes, inline merges so file replacement is
//! deterministic), loads seeded random data, and checks snapshots against a
//! copy of a `BTreeMap` model taken with them, folds against the model with
//! each filter, and tictac trees against trees built another way.

// The helpers below are test code too (clippy.toml allows unwrap in #[test]
// functions only): a failed setup call should fail the test loudly.
#![allow(clippy::unwrap_used)]

use basalt_engine::fold::{FoldOptions, KeyRange};
use basalt_engine::tictac::segment_of;
use basalt_engine::{
    Config, Error, PutOptions, Snapshot, SnapshotOptions, Store, TicTacTree, TreeSize,
};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::path::Path;
use std::time::Duration;

const SEED: u64 = 0xF01D_5EED;

fn cfg(dir: &Path) -> Config {
    let mut c = Config::test_min(dir);
    c.background_merges = false;
    c
}

fn counter(s: &Store, name: &str) -> u64 {
    s.stats()
        .counters
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |(_, v)| *v)
}

fn sst_files(dir: &Path) -> BTreeSet<String> {
    std::fs::read_dir(dir.join("ledger"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".sst"))
        .collect()
}

fn live_files(s: &Store) -> usize {
    s.stats().levels.iter().map(|l| l.files).sum()
}

fn key(i: u32) -> Vec<u8> {
    format!("key-{i:05}").into_bytes()
}

/// (bucket, key) -> (value, last_modified_us)
type Model = BTreeMap<(Vec<u8>, Vec<u8>), (Vec<u8>, u64)>;

fn all_keys(snap: &Snapshot, bucket: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    snap.fold_keys(bucket, None, |k| {
        out.push(k.to_vec());
        ControlFlow::Continue(())
    })
    .unwrap();
    out
}

#[test]
fn snapshot_is_isolated_from_later_writes_and_merges() {
    let d = tempfile::tempdir().unwrap();
    let s = Store::open(cfg(d.path())).unwrap();
    let mut rng = StdRng::seed_from_u64(SEED);
    let mut model: Model = BTreeMap::new();
    for i in 0..400 {
        let v: Vec<u8> = (0..rng.gen_range(10..200)).map(|_| rng.gen()).collect();
        s.put(b"b", &key(i), &v, b"m1").unwrap();
        model.insert((b"b".to_vec(), key(i)), (v, 0));
    }
    s.delete(b"b", &key(7)).unwrap();
    model.remove(&(b"b".to_vec(), key(7)));
    let snap = s.snapshot(SnapshotOptions::all()).unwrap();
    let merges_before = counter(&s, "ledger_merges");
    // Overwrite everything (twice), delete some, add new keys; force merges.
    for round in 0..2u8 {
        for i in 0..400 {
            s.put(b"b", &key(i), &[round; 300], b"m2").unwrap();
        }
    }
    for i in (0..400).step_by(3) {
        s.delete(b"b", &key(i)).unwrap();
    }
    s.put(b"b", &key(7), b"back", b"").unwrap();
    s.put(b"new", b"k", b"v", b"").unwrap();
    s.settle().unwrap();
    assert!(counter(&s, "ledger_merges") > merges_before, "no merge ran");

    for i in 0..400 {
        let want = model.get(&(b"b".to_vec(), key(i)));
        let got = snap.get(b"b", &key(i)).unwrap();
        assert_eq!(
            got.as_ref().map(|o| &o.value),
            want.map(|(v, _)| v),
            "key {i}"
        );
        let head = snap.head(b"b", &key(i)).unwrap();
        assert!(head.is_none_or(|h| h.version <= snap.sqn() && h.metadata == b"m1"));
    }
    assert_eq!(snap.get(b"new", b"k").unwrap(), None);
    let want: Vec<Vec<u8>> = model.keys().map(|(_, k)| k.clone()).collect();
    assert_eq!(all_keys(&snap, b"b"), want);
    let mut n = 0;
    snap.fold_objects(b"b", None, |_, k, o| {
        assert_eq!(
            Some(&o.value),
            model.get(&(b"b".to_vec(), k.to_vec())).map(|(v, _)| v)
        );
        n += 1;
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(n, model.len());
    assert_eq!(snap.list_buckets().unwrap(), vec![b"b".to_vec()]);
    // The store itself sees the new state.
    assert_eq!(s.get(b"b", &key(7)).unwrap().unwrap().value, b"back");
    assert_eq!(
        s.list_buckets().unwrap(),
        vec![b"b".to_vec(), b"new".to_vec()]
    );
}

#[test]
fn range_limited_snapshot_refuses_reads_outside_its_range() {
    let d = tempfile::tempdir().unwrap();
    let s = Store::open(cfg(d.path())).unwrap();
    s.put(b"a", b"k", b"1", b"").unwrap();
    s.put(b"b", b"k", b"2", b"").unwrap();
    let snap = s.snapshot(SnapshotOptions::bucket(b"a")).unwrap();
    s.put(b"a", b"k", b"3", b"").unwrap();
    assert_eq!(snap.get(b"a", b"k").unwrap().unwrap().value, b"1");
    assert!(matches!(snap.get(b"b", b"k"), Err(Error::InvalidInput(_))));
    assert!(matches!(snap.list_buckets(), Err(Error::InvalidInput(_))));
    let ranged = s.snapshot(SnapshotOptions::keys(b"a", b"j", b"l")).unwrap();
    assert_eq!(ranged.get(b"a", b"k").unwrap().unwrap().value, b"3");
    assert!(ranged.get(b"a", b"z").is_err());
}

/// Writes enough to create SST files, then overwrites and settles so that
/// merges replace them.
fn load_and_merge(s: &Store, round: u8) {
    for i in 0..300 {
        s.put(b"b", &key(i), &[round; 200], b"").unwrap();
    }
    s.settle().unwrap();
}

#[test]
fn replaced_sst_files_stay_while_a_snapshot_holds_them() {
    let d = tempfile::tempdir().unwrap();
    let s = Store::open(cfg(d.path())).unwrap();
    load_and_merge(&s, 1);
    let pinned = sst_files(d.path());
    assert!(!pinned.is_empty());
    let snap = s.snapshot(SnapshotOptions::all()).unwrap();
    assert_eq!(s.stats().live_snapshots, 1);
    for r in 2..5 {
        load_and_merge(&s, r);
    }
    let now = sst_files(d.path());
    assert!(pinned.is_subset(&now), "a pinned file was removed");
    assert!(now.len() > live_files(&s), "no file was replaced");
    assert_eq!(snap.get(b"b", &key(5)).unwrap().unwrap().value, [1u8; 200]);
    drop(snap);
    assert_eq!(s.stats().live_snapshots, 0);
    // The last holder let go without unlinking anything itself (a reader
    // must not pay for a merge's unlinks); the ledger's next step does.
    assert_eq!(
        sst_files(d.path()),
        now,
        "the dropping thread unlinked files"
    );
    s.settle().unwrap();
    let after = sst_files(d.path());
    assert_eq!(
        after.len(),
        live_files(&s),
        "replaced files not removed: {after:?}"
    );
    assert!(!pinned.is_subset(&after));
}

#[test]
fn forgotten_snapshot_expires_and_releases_its_files() {
    let d = tempfile::tempdir().unwrap();
    let s = Store::open(cfg(d.path())).unwrap();
    load_and_merge(&s, 1);
    let snap = s
        .snapshot(SnapshotOptions::all().with_timeout(Duration::from_millis(1)))
        .unwrap();
    for r in 2..5 {
        load_and_merge(&s, r);
    }
    // Wait for the reaper (a condition, not a duration, is asserted).
    let mut polls = 0;
    while !snap.is_expired() {
        polls += 1;
        assert!(polls < 60_000, "snapshot never expired");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(s.stats().live_snapshots, 0);
    let e = snap.get(b"b", &key(1)).unwrap_err();
    assert!(matches!(e, Error::SnapshotExpired { .. }), "{e}");
    assert!(e.to_string().contains("take a new snapshot"), "{e}");
    assert!(matches!(
        snap.fold_keys(b"b", None, |_| ControlFlow::Continue(())),
        Err(Error::SnapshotExpired { .. })
    ));
    // Its pins are gone while the handle still exists (the ledger's next
    // step unlinks what they held).
    s.settle().unwrap();
    assert_eq!(sst_files(d.path()).len(), live_files(&s));
    // Closing the store expires the others.
    let other = s.snapshot(SnapshotOptions::all()).unwrap();
    s.close().unwrap();
    assert!(matches!(
        other.head(b"b", &key(1)),
        Err(Error::SnapshotExpired { .. })
    ));
}

/// Loads three buckets (one emptied by deletes) with increasing
/// last-modified times; returns the model.
fn load_model(s: &Store, rng: &mut StdRng) -> Model {
    let mut model: Model = BTreeMap::new();
    let buckets: [&[u8]; 4] = [b"alpha", b"beta", b"beta\0x", b"gone"];
    for step in 0..3000u64 {
        let b = buckets[rng.gen_range(0..buckets.len())];
        let k = key(rng.gen_range(0..400));
        let lm = 1_000_000 + step * 1_000;
        if rng.gen_ratio(1, 8) {
            s.delete_with(b, &k, &PutOptions::default()).unwrap();
            model.remove(&(b.to_vec(), k));
        } else {
            let v: Vec<u8> = (0..rng.gen_range(0..60)).map(|_| rng.gen()).collect();
            let opts = PutOptions {
                last_modified_us: Some(lm),
                ..PutOptions::default()
            };
            s.put_with(b, &k, &v, b"md", &opts).unwrap();
            model.insert((b.to_vec(), k), (v, lm));
        }
        if step == 1500 {
            s.settle().unwrap();
        }
    }
    let gone: Vec<_> = model
        .keys()
        .filter(|(b, _)| b == b"gone")
        .cloned()
        .collect();
    for (b, k) in gone {
        s.delete(&b, &k).unwrap();
        model.remove(&(b, k));
    }
    model
}

/// A predicate on model entries.
type ModelFilter<'a> = dyn Fn(&(Vec<u8>, Vec<u8>), &(Vec<u8>, u64)) -> bool + 'a;

fn heads(
    snap: &Snapshot,
    bucket: Option<&[u8]>,
    range: Option<&KeyRange>,
    opts: &FoldOptions,
) -> Vec<(Vec<u8>, Vec<u8>, u64)> {
    let mut out = Vec::new();
    let outcome = snap
        .fold_heads(bucket, range, opts, |b, k, h| {
            out.push((b.to_vec(), k.to_vec(), h.last_modified_us));
            ControlFlow::Continue(())
        })
        .unwrap();
    assert_eq!(outcome.passed, out.len() as u64);
    assert_eq!(outcome.missing_in_journal, 0);
    out
}

#[test]
fn folds_match_the_model_with_each_filter() {
    let d = tempfile::tempdir().unwrap();
    let s = Store::open(cfg(d.path())).unwrap();
    let mut rng = StdRng::seed_from_u64(SEED + 1);
    let model = load_model(&s, &mut rng);
    let snap = s.snapshot(SnapshotOptions::all()).unwrap();
    let expect = |f: &ModelFilter<'_>| {
        model
            .iter()
            .filter(|(k, v)| f(k, v))
            .map(|((b, k), (_, lm))| (b.clone(), k.clone(), *lm))
            .collect::<Vec<_>>()
    };

    // Keys, per bucket and in a range.
    for b in [&b"alpha"[..], b"beta", b"beta\0x", b"gone", b"nope"] {
        let want: Vec<Vec<u8>> = model
            .keys()
            .filter(|(mb, _)| mb == b)
            .map(|(_, k)| k.clone())
            .collect();
        assert_eq!(all_keys(&snap, b), want);
    }
    let r = KeyRange::new(&key(100), &key(200));
    let mut got = Vec::new();
    snap.fold_keys(b"alpha", Some(&r), |k| {
        got.push(k.to_vec());
        ControlFlow::Continue(())
    })
    .unwrap();
    let want: Vec<Vec<u8>> = model
        .keys()
        .filter(|(b, k)| b == b"alpha" && *k >= key(100) && *k <= key(200))
        .map(|(_, k)| k.clone())
        .collect();
    assert_eq!(got, want);

    // Heads: all buckets, one bucket with a range, journal check.
    let none = FoldOptions::default();
    assert_eq!(heads(&snap, None, None, &none), expect(&|_, _| true));
    assert_eq!(
        heads(&snap, Some(b"beta"), Some(&r), &none),
        expect(&|(b, k), _| b == b"beta" && *k >= key(100) && *k <= key(200))
    );
    let jc = FoldOptions {
        journal_check: true,
        ..FoldOptions::default()
    };
    assert_eq!(heads(&snap, None, None, &jc), expect(&|_, _| true));

    // Last-modified range.
    let (lo, hi) = (1_000_000 + 2_000 * 1_000, 1_000_000 + 2_600 * 1_000);
    let lm = FoldOptions {
        modified_range: Some((lo, hi)),
        ..FoldOptions::default()
    };
    let want = expect(&|_, (_, m)| *m >= lo && *m <= hi);
    assert!(!want.is_empty());
    assert_eq!(heads(&snap, None, None, &lm), want);

    // Segments of a small tree.
    let size = TreeSize::Small;
    let picked: Vec<u32> = model
        .keys()
        .step_by(37)
        .map(|(b, k)| segment_of(b, k, size))
        .collect();
    let seg = FoldOptions {
        segments: Some((size, picked.clone())),
        ..FoldOptions::default()
    };
    let want = expect(&|(b, k), _| picked.contains(&segment_of(b, k, size)));
    assert!(want.len() >= picked.len() / 2);
    assert_eq!(heads(&snap, None, None, &seg), want);

    // All filters at once plus a limit.
    let both = FoldOptions {
        segments: Some((size, picked.clone())),
        modified_range: Some((lo, hi)),
        max_objects: Some(3),
        journal_check: true,
    };
    let want: Vec<_> =
        expect(&|(b, k), (_, m)| picked.contains(&segment_of(b, k, size)) && *m >= lo && *m <= hi)
            .into_iter()
            .take(3)
            .collect();
    assert_eq!(heads(&snap, None, None, &both), want);

    // max_objects reports an incomplete fold.
    let limited = FoldOptions {
        max_objects: Some(10),
        ..FoldOptions::default()
    };
    let o = snap
        .fold_heads(None, None, &limited, |_, _, _| ControlFlow::Continue(()))
        .unwrap();
    assert_eq!((o.passed, o.complete), (10, false));
    let o = snap
        .fold_heads(None, None, &none, |_, _, _| ControlFlow::Continue(()))
        .unwrap();
    assert_eq!((o.passed, o.complete), (model.len() as u64, true));

    // Objects.
    let mut got = BTreeMap::new();
    let o = s
        .fold_objects(b"alpha", None, |b, k, obj| {
            assert_eq!(obj.head.metadata, b"md");
            got.insert(
                (b.to_vec(), k.to_vec()),
                (obj.value, obj.head.last_modified_us),
            );
            ControlFlow::Continue(())
        })
        .unwrap();
    assert!(o.complete);
    let want: Model = model
        .iter()
        .filter(|((b, _), _)| b == b"alpha")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(got, want);

    // Buckets: "gone" only has tombstones.
    let want: Vec<Vec<u8>> = vec![b"alpha".to_vec(), b"beta".to_vec(), b"beta\0x".to_vec()];
    assert_eq!(snap.list_buckets().unwrap(), want);
    assert_eq!(s.list_buckets().unwrap(), want);
    // The store's own key listing agrees.
    assert_eq!(s.keys(b"beta").unwrap(), all_keys(&snap, b"beta"));
}

#[test]
fn folds_stop_early() {
    let d = tempfile::tempdir().unwrap();
    let s = Store::open(cfg(d.path())).unwrap();
    for i in 0..100 {
        s.put(b"b", &key(i), b"v", b"").unwrap();
    }
    let snap = s.snapshot(SnapshotOptions::all()).unwrap();
    let mut seen = 0;
    let o = snap
        .fold_keys(b"b", None, |_| {
            seen += 1;
            if seen == 5 {
                ControlFlow::Break(())
            } else {
                ControlFlow::Continue(())
            }
        })
        .unwrap();
    assert_eq!((seen, o.passed, o.complete), (5, 5, false));
    let mut seen = 0;
    let o = snap
        .fold_objects(b"b", None, |_, _, _| {
            seen += 1;
            ControlFlow::Break(())
        })
        .unwrap();
    assert_eq!((seen, o.complete), (1, false));
    let mut n = 0;
    s.fold_keys(b"b", &mut |_| {
        n += 1;
        n < 3
    })
    .unwrap();
    assert_eq!(n, 3);
}

fn tictac_store(dir: &Path) -> Store {
    let mut c = cfg(dir);
    c.tictac = Some(TreeSize::XSmall);
    Store::open(c).unwrap()
}

fn data(n: u32, rng: &mut StdRng) -> Vec<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    (0..n)
        .map(|i| {
            let b = format!("b{}", i % 3).into_bytes();
            let v: Vec<u8> = (0..rng.gen_range(1..40)).map(|_| rng.gen()).collect();
            (b, key(i), v)
        })
        .collect()
}

#[test]
fn tictac_equal_data_equal_roots_and_one_dirty_segment() {
    let d = tempfile::tempdir().unwrap();
    let (a, b) = (
        tictac_store(&d.path().join("a")),
        tictac_store(&d.path().join("b")),
    );
    let mut rng = StdRng::seed_from_u64(SEED + 2);
    let items = data(800, &mut rng);
    for (bk, k, v) in &items {
        a.put(bk, k, v, b"").unwrap();
    }
    let mut shuffled = items.clone();
    for i in (1..shuffled.len()).rev() {
        shuffled.swap(i, rng.gen_range(0..=i));
    }
    for (bk, k, v) in &shuffled {
        // Extra history on b: an older value first, then the same final one.
        b.put(bk, k, b"older", b"").unwrap();
        b.put(bk, k, v, b"").unwrap();
    }
    let (ta, tb) = (a.tictac_tree().unwrap(), b.tictac_tree().unwrap());
    assert_eq!(ta.root(), tb.root());
    assert_eq!(ta, tb);
    assert_ne!(ta, TicTacTree::new(TreeSize::XSmall));

    b.put(b"b1", &key(301), b"changed", b"").unwrap();
    let dirty = a
        .tictac_tree()
        .unwrap()
        .dirty_segments(&b.tictac_tree().unwrap())
        .unwrap();
    assert_eq!(dirty, vec![segment_of(b"b1", &key(301), TreeSize::XSmall)]);
    // The dirty segment's head fold finds exactly the changed key among those that differ.
    let opts = FoldOptions {
        segments: Some((TreeSize::XSmall, dirty.clone())),
        ..FoldOptions::default()
    };
    let (mut fa, mut fb) = (BTreeMap::new(), BTreeMap::new());
    for (s, m) in [(&a, &mut fa), (&b, &mut fb)] {
        s.fold_heads(None, None, &opts, |bk, k, h| {
            m.insert((bk.to_vec(), k.to_vec()), h.value_hash);
            ControlFlow::Continue(())
        })
        .unwrap();
    }
    let differing: Vec<_> = fa
        .iter()
        .filter(|(k, v)| fb.get(*k) != Some(*v))
        .map(|(k, _)| k.clone())
        .collect();
    assert_eq!(differing, vec![(b"b1".to_vec(), key(301))]);
    // Deleting it on both makes the trees equal again.
    a.delete(b"b1", &key(301)).unwrap();
    b.delete(b"b1", &key(301)).unwrap();
    assert_eq!(a.tictac_tree(), b.tictac_tree());
}

#[test]
fn tictac_merge_of_disjoint_halves_is_the_union() {
    let d = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(SEED + 3);
    let items = data(600, &mut rng);
    let (h1, h2, all) = (
        tictac_store(&d.path().join("1")),
        tictac_store(&d.path().join("2")),
        tictac_store(&d.path().join("all")),
    );
    for (i, (b, k, v)) in items.iter().enumerate() {
        if i % 2 == 0 { &h1 } else { &h2 }
            .put(b, k, v, b"")
            .unwrap();
        all.put(b, k, v, b"").unwrap();
    }
    let mut merged = h1.tictac_tree().unwrap();
    merged.merge(&h2.tictac_tree().unwrap()).unwrap();
    assert_eq!(merged, all.tictac_tree().unwrap());
    let exported = merged.export();
    assert_eq!(TicTacTree::import(&exported).unwrap(), merged);
}

#[test]
fn tictac_incremental_equals_rebuilt_after_random_writes() {
    let d = tempfile::tempdir().unwrap();
    let s = tictac_store(d.path());
    let mut rng = StdRng::seed_from_u64(SEED + 4);
    for step in 0..3000 {
        let b = format!("b{}", rng.gen_range(0..3)).into_bytes();
        let k = key(rng.gen_range(0..300));
        if rng.gen_ratio(1, 4) {
            s.delete(&b, &k).unwrap();
        } else {
            let v: Vec<u8> = (0..rng.gen_range(0..50)).map(|_| rng.gen()).collect();
            s.put(&b, &k, &v, b"").unwrap();
        }
        if step % 1000 == 999 {
            s.settle().unwrap();
        }
    }
    let incremental = s.tictac_tree().unwrap();
    s.rebuild_tictac().unwrap();
    assert_eq!(s.tictac_tree().unwrap(), incremental);
    // Built from scratch by a head fold as well.
    let mut by_fold = TicTacTree::new(TreeSize::XSmall);
    s.fold_heads(None, None, &FoldOptions::default(), |b, k, h| {
        by_fold.add(b, k, h.value_hash);
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_eq!(by_fold, incremental);
    // And after a reopen (the tree is rebuilt at open).
    s.close().unwrap();
    drop(s);
    let s = tictac_store(d.path());
    assert_eq!(s.tictac_tree().unwrap(), incremental);
    // Without the option there is no tree.
    s.close().unwrap();
    drop(s);
    let plain = Store::open(cfg(d.path())).unwrap();
    assert!(plain.tictac_tree().is_none());
}
