//! 2i entries recalculated from object metadata (`Config::index_terms`,
//! `basalt_engine::index::recalc`): journal compaction keeps no key deltas,
//! and a ledger rebuilt from the journal (`Store::repair`, a backup's first
//! open) still holds exactly the entries of each key's newest version; a
//! rebuild without the store's term source is refused before anything is
//! deleted.
//!
//! Method: an update load (each object's metadata names its whole term set,
//! `f_bin` and `n_int` terms; each write carries the diffs against the
//! version it replaces, as Riak's vnode computes them) with deletes and
//! re-creations, compacted to the end and reopened each round, then
//! repaired; the index entries are compared with a model after every step.
//! The same load without a term source is the control: it leaves key
//! deltas, and its repair must be right as well. With a source, puts whose
//! changes agree with their metadata are written without them (index blob
//! 2), and replay after a crash recalculates them: the same load, ended by
//! a simulated crash each round instead of a close, must reopen with the
//! model's entries, and without the source such a replay is refused.

mod common;

use basalt_engine::{Config, Error, IndexChange, IndexQuery, IndexTerms, PutOptions, Store};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};

type TermSet = BTreeSet<(String, String)>;

const SOURCE: &str = "test-lines 1";

/// Metadata naming a term set: `field=term` lines. Metadata starting with
/// `!` is unreadable (the source errs).
fn metadata(terms: &TermSet) -> Vec<u8> {
    terms
        .iter()
        .map(|(f, t)| format!("{f}={t}\n"))
        .collect::<String>()
        .into_bytes()
}

fn source(name: &str) -> IndexTerms {
    IndexTerms::new(name, |meta: &[u8]| {
        if meta.starts_with(b"!") {
            return Err("unreadable test metadata".to_string());
        }
        let text = std::str::from_utf8(meta).map_err(|e| e.to_string())?;
        let mut out: Vec<(Vec<u8>, Vec<u8>)> = text
            .lines()
            .filter_map(|l| l.split_once('='))
            .map(|(f, t)| (f.as_bytes().to_vec(), t.as_bytes().to_vec()))
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    })
}

fn config(dir: &std::path::Path, recalc: bool) -> Config {
    Config {
        index_terms: recalc.then(|| source(SOURCE)),
        ..Config::test_min(dir)
    }
}

fn random_terms(rng: &mut StdRng) -> TermSet {
    let mut s = TermSet::new();
    for _ in 0..rng.gen_range(0..3) {
        s.insert(("f_bin".into(), format!("t{:02}", rng.gen_range(0..12))));
    }
    if rng.gen_bool(0.5) {
        s.insert(("n_int".into(), rng.gen_range(-5..6).to_string()));
    }
    s
}

/// Diffs from `old` to `new`, as a Riak vnode computes them.
fn diffs(old: &TermSet, new: &TermSet) -> Vec<IndexChange> {
    let mut v: Vec<IndexChange> = old
        .difference(new)
        .map(|(f, t)| IndexChange::remove(f.clone(), t.clone()))
        .collect();
    v.extend(
        new.difference(old)
            .map(|(f, t)| IndexChange::add(f.clone(), t.clone())),
    );
    v
}

/// Every index entry of bucket `r` as (field, term, key).
fn entries(s: &Store) -> BTreeSet<(String, String, String)> {
    let mut out = BTreeSet::new();
    for (field, lo, hi) in [
        ("f_bin", &b""[..], &b"\xff"[..]),
        ("n_int", &b"-1000"[..], &b"1000"[..]),
    ] {
        let mut q = IndexQuery::range(b"r", field.as_bytes(), lo, hi);
        q.return_terms = true;
        for r in s.index_query(&q).expect("query").results {
            let term = String::from_utf8(r.term.expect("term")).expect("utf-8 term");
            let key = String::from_utf8(r.key).expect("utf-8 key");
            out.insert((field.to_string(), term, key));
        }
    }
    out
}

fn model_entries(model: &BTreeMap<String, TermSet>) -> BTreeSet<(String, String, String)> {
    model
        .iter()
        .flat_map(|(k, ts)| ts.iter().map(|(f, t)| (f.clone(), t.clone(), k.clone())))
        .collect()
}

fn put(s: &Store, rng: &mut StdRng, k: &str, meta: &[u8], index: Vec<IndexChange>) {
    // 1 KB values that do not compress, so that the load fills many of
    // `test_min`'s 64 KiB journal files.
    let value: Vec<u8> = (0..1000).map(|_| rng.gen()).collect();
    let opts = PutOptions {
        index,
        ..PutOptions::default()
    };
    s.put_with(b"r", k.as_bytes(), &value, meta, &opts)
        .expect("put");
}

/// Runs the load on a store in `dir`; returns (key deltas written, records
/// dropped) by compaction and the model.
fn run_load(dir: &std::path::Path, recalc: bool) -> (u64, u64, BTreeMap<String, TermSet>) {
    run_load_ending(dir, recalc, false)
}

/// [`run_load`], each round ended by a simulated crash if `crash`.
fn run_load_ending(
    dir: &std::path::Path,
    recalc: bool,
    crash: bool,
) -> (u64, u64, BTreeMap<String, TermSet>) {
    const KEYS: usize = 50;
    let mut rng = StdRng::seed_from_u64(20_261_205);
    let mut model: BTreeMap<String, TermSet> = BTreeMap::new();
    let mut s = Store::open(config(dir, recalc)).expect("open");
    let (mut key_deltas, mut dropped, mut replayed) = (0, 0, 0);
    for round in 0..4 {
        for _ in 0..250 {
            let k = format!("k{:03}", rng.gen_range(0..KEYS));
            let old = model.get(&k).cloned();
            if let Some(o) = old.as_ref().filter(|_| rng.gen_bool(0.1)) {
                // A delete carries the removals (Riak's do).
                let removals = diffs(o, &TermSet::new());
                let opts = PutOptions {
                    index: removals,
                    ..PutOptions::default()
                };
                s.delete_with(b"r", k.as_bytes(), &opts).expect("delete");
                model.remove(&k);
                continue;
            }
            // Often the same terms again: the write then changes no entry,
            // whose SQN stays an older record's.
            let new = match &old {
                Some(o) if rng.gen_bool(0.5) => o.clone(),
                _ => random_terms(&mut rng),
            };
            let ch = diffs(&old.unwrap_or_default(), &new);
            put(&s, &mut rng, &k, &metadata(&new), ch);
            model.insert(k, new);
        }
        common::compact_all(&s);
        let st = s.stats();
        key_deltas = st.counter("compaction_key_deltas").unwrap_or(0);
        dropped = st.counter("compaction_records_dropped").unwrap_or(0);
        assert_eq!(
            entries(&s),
            model_entries(&model),
            "round {round}, compacted"
        );
        // The rest of the round after the compaction: records the crash
        // leaves for replay.
        for i in 0..30 {
            let k = format!("k{:03}", (round * 7 + i) % KEYS);
            let old = model.get(&k).cloned().unwrap_or_default();
            let new = random_terms(&mut rng);
            put(&s, &mut rng, &k, &metadata(&new), diffs(&old, &new));
            model.insert(k, new);
        }
        let written = s.stats().counter("index_changes_recalculated").unwrap_or(0);
        assert_eq!(recalc, written > 0, "round {round}: puts without changes");
        if crash {
            s.simulate_crash();
        } else {
            s.close().expect("close");
            drop(s);
        }
        s = Store::open(config(dir, recalc)).expect("reopen");
        replayed += s.stats().counter("journal_replayed_records").unwrap_or(0);
        assert_eq!(s.stats().counter("index_recalc_skipped"), Some(0));
        assert_eq!(
            entries(&s),
            model_entries(&model),
            "round {round}, reopened (crash: {crash})"
        );
    }
    s.close().expect("close");
    // How much each crash leaves depends on when memtables were written;
    // over four rounds some records must have been replayed.
    assert!(!crash || replayed > 0, "the crashes left nothing to replay");
    (key_deltas, dropped, model)
}

#[test]
fn a_recalculating_store_keeps_no_key_deltas_and_its_rebuild_holds_every_entry() {
    for recalc in [true, false] {
        let d = tempfile::tempdir().unwrap();
        let (key_deltas, dropped, model) = run_load(d.path(), recalc);
        // Counters restart at each open: these are the last round's.
        if recalc {
            assert_eq!(key_deltas, 0, "a recalculating store wrote key deltas");
            assert!(dropped > 0, "compaction dropped no replaced record");
        } else {
            assert!(
                key_deltas > 0,
                "the control (no term source) wrote no key deltas: the load replaces nothing"
            );
        }
        Store::repair(config(d.path(), recalc)).expect("repair");
        let s = Store::open(config(d.path(), recalc)).expect("open after repair");
        assert_eq!(
            entries(&s),
            model_entries(&model),
            "after repair (recalc: {recalc})"
        );
        s.close().unwrap();
    }
}

/// The error of `r`, which must have failed.
fn err<T>(r: Result<T, Error>) -> Error {
    match r {
        Ok(_) => panic!("expected an error"),
        Err(e) => e,
    }
}

fn invalid(e: Error, needles: &[&str]) {
    assert!(matches!(e, Error::InvalidInput(_)), "not InvalidInput: {e}");
    let m = e.to_string();
    for n in needles {
        assert!(m.contains(n), "message {m:?} does not name {n:?}");
    }
}

#[test]
fn a_rebuild_without_the_term_source_is_refused_before_anything_is_deleted() {
    let d = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(7);
    let s = Store::open(config(d.path(), true)).expect("open");
    // Opening leaves no marker: nothing relies on it yet.
    assert!(!d.path().join("INDEX_RECALC").exists());
    let mut model: BTreeMap<String, TermSet> = BTreeMap::new();
    for round in 0..5 {
        for i in 0..40 {
            let k = format!("k{i:03}");
            let t = random_terms(&mut rng);
            let old = model.insert(k.clone(), t.clone()).unwrap_or_default();
            put(&s, &mut rng, &k, &metadata(&t), diffs(&old, &t));
        }
        if round == 0 {
            // The first put written without its changes wrote the marker.
            assert!(d.path().join("INDEX_RECALC").exists());
        }
    }
    common::compact_all(&s);
    s.close().unwrap();
    drop(s);
    assert_eq!(
        std::fs::read_to_string(d.path().join("INDEX_RECALC")).unwrap(),
        format!("{SOURCE}\n")
    );
    let ledger_files = || std::fs::read_dir(d.path().join("ledger")).unwrap().count();
    let before = ledger_files();
    invalid(
        err(Store::repair(Config::test_min(d.path()))),
        &["INDEX_RECALC", SOURCE, "given: none"],
    );
    let other = Config {
        index_terms: Some(source("other 1")),
        ..Config::test_min(d.path())
    };
    invalid(err(Store::repair(other.clone())), &[SOURCE, "'other 1'"]);
    // Opening with another source is refused too: it would record it.
    invalid(err(Store::open(other)), &[SOURCE, "'other 1'"]);
    assert_eq!(
        ledger_files(),
        before,
        "a refused repair deleted ledger files"
    );
    // Without a rebuild the store opens without its source (the ledger is
    // persisted), and then keeps key deltas as any store does.
    let s = Store::open(Config::test_min(d.path())).expect("open without the source");
    assert_eq!(entries(&s), model_entries(&model));

    // A backup carries the marker: its first open rebuilds the ledger.
    let b = tempfile::tempdir().unwrap();
    let dest = b.path().join("backup");
    s.backup(&dest).expect("backup");
    s.close().unwrap();
    drop(s);
    invalid(
        err(Store::open(Config::test_min(&dest))),
        &["INDEX_RECALC", "given: none"],
    );
    let restored = Store::open(config(&dest, true)).expect("open the backup");
    assert_eq!(entries(&restored), model_entries(&model));
    restored.close().unwrap();
    Store::repair(config(d.path(), true)).expect("repair with the source");
}

#[test]
fn a_record_whose_metadata_gives_no_terms_is_rebuilt_from_its_own_changes() {
    let d = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(9);
    let s = Store::open(config(d.path(), true)).expect("open");
    let t: TermSet = [("f_bin".to_string(), "x".to_string())].into();
    put(
        &s,
        &mut rng,
        "good",
        &metadata(&t),
        diffs(&TermSet::new(), &t),
    );
    put(
        &s,
        &mut rng,
        "odd",
        b"!unreadable",
        diffs(&TermSet::new(), &t),
    );
    s.close().unwrap();
    drop(s);
    Store::repair(config(d.path(), true)).expect("repair");
    let s = Store::open(config(d.path(), true)).expect("open");
    let want: BTreeSet<_> = ["good", "odd"]
        .iter()
        .map(|k| ("f_bin".to_string(), "x".to_string(), k.to_string()))
        .collect();
    assert_eq!(entries(&s), want);
    s.close().unwrap();
}

#[test]
fn replay_after_a_crash_recalculates_the_puts_written_without_their_changes() {
    let d = tempfile::tempdir().unwrap();
    let (_, _, model) = run_load_ending(d.path(), true, true);
    // Closed cleanly at the end: opens without the source (nothing to
    // replay), as a build from before the blob would.
    let s = Store::open(Config::test_min(d.path())).expect("open without the source");
    assert_eq!(entries(&s), model_entries(&model));
    s.close().unwrap();
}

/// A recalculating store in `dir` with one put persisted in its ledger
/// (closed and reopened), so that a crash after more puts leaves a replay:
/// an empty ledger would be a rebuild, refused without the source whatever
/// the records hold.
fn reopened_with_a_persisted_ledger(dir: &std::path::Path, rng: &mut StdRng) -> Store {
    let s = Store::open(config(dir, true)).expect("open");
    put(&s, rng, "plain", b"", Vec::new());
    s.close().expect("close");
    drop(s);
    Store::open(config(dir, true)).expect("reopen")
}

/// The term set `{f_bin: term}`.
fn one_term(term: &str) -> TermSet {
    [("f_bin".to_string(), term.to_string())].into()
}

#[test]
fn a_replay_of_puts_without_changes_needs_the_term_source() {
    let d = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(11);
    let s = reopened_with_a_persisted_ledger(d.path(), &mut rng);
    let (a, b) = (one_term("a"), one_term("b"));
    put(&s, &mut rng, "k", &metadata(&a), diffs(&TermSet::new(), &a));
    put(&s, &mut rng, "k", &metadata(&b), diffs(&a, &b));
    // Changes its metadata does not imply keep their blob.
    put(
        &s,
        &mut rng,
        "odd",
        &metadata(&a),
        diffs(&TermSet::new(), &b),
    );
    assert_eq!(
        s.stats().counter("index_changes_recalculated"),
        Some(2),
        "the agreeing puts only"
    );
    s.simulate_crash();
    let e = err(Store::open(Config::test_min(d.path())));
    invalid(e, &["sqn", "term source", "INDEX_RECALC"]);
    let s = Store::open(config(d.path(), true)).expect("open with the source");
    let want: BTreeSet<_> = [("f_bin", "b", "k"), ("f_bin", "b", "odd")]
        .iter()
        .map(|(f, t, k)| (f.to_string(), t.to_string(), k.to_string()))
        .collect();
    assert_eq!(entries(&s), want);
    s.close().unwrap();
    // Decoded as changes (as a build from before the blob does at replay),
    // it is refused, not read as none.
    let old = basalt_engine::index::decode_changes(basalt_engine::index::recalc::RECALC_BLOB);
    assert!(old.is_err());
}

/// A put written without its changes over a version whose metadata the
/// source cannot read: replay after a crash still adds the new version's
/// terms (read when it was written), cannot know the old version's to
/// remove, and counts the record as skipped in part.
#[test]
fn a_put_without_changes_over_unreadable_metadata_keeps_its_own_terms() {
    let d = tempfile::tempdir().unwrap();
    let mut rng = StdRng::seed_from_u64(13);
    let s = reopened_with_a_persisted_ledger(d.path(), &mut rng);
    let (a, b) = (one_term("a"), one_term("b"));
    put(
        &s,
        &mut rng,
        "k",
        b"!unreadable",
        diffs(&TermSet::new(), &a),
    );
    put(&s, &mut rng, "k", &metadata(&b), diffs(&a, &b));
    assert_eq!(s.stats().counter("index_changes_recalculated"), Some(1));
    s.simulate_crash();
    let s = Store::open(config(d.path(), true)).expect("open after the crash");
    assert_eq!(s.stats().counter("index_recalc_skipped"), Some(1));
    let got = entries(&s);
    assert!(
        got.contains(&("f_bin".to_string(), "b".to_string(), "k".to_string())),
        "the new version's own term: {got:?}"
    );
    s.close().unwrap();
}
