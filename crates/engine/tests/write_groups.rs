//! Write groups under concurrency: many writers (sync and not, puts, deletes
//! and index changes) through one store, with journal files small enough
//! that groups straddle rolls and memtables small enough that groups
//! straddle flushes.
//!
//! Method: every writer records what it was acknowledged (the SQN and the
//! value); then the test checks, with write groups on and off, that every
//! acknowledged SQN is distinct, that the store answers each key's last
//! acknowledged value before and after a reopen (the journal's records and
//! checksums were sealed with the right SQNs), and that the group counters
//! account for every record.

use basalt_engine::{Config, IndexChange, PutOptions, Store, SyncStrategy};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;

const WRITERS: u64 = 12;
const WRITES_EACH: u64 = 150;

fn config(dir: &std::path::Path, write_group: bool) -> Config {
    let mut c = Config::test_min(dir);
    c.write_group = write_group;
    c
}

fn value(t: u64, i: u64) -> Vec<u8> {
    // Varied sizes so records (and groups) do not line up with file ends.
    let mut v = format!("writer {t} write {i} ").into_bytes();
    v.resize(100 + ((t * 7919 + i * 104_729) % 3000) as usize, b'x');
    v
}

/// Each key's last acknowledged value (None = deleted).
type Expected = BTreeMap<Vec<u8>, Option<Vec<u8>>>;

/// Runs the writers; returns what each key should hold and every
/// acknowledged SQN.
fn run_writers(s: &Arc<Store>) -> (Expected, Vec<u64>) {
    let threads: Vec<_> = (0..WRITERS)
        .map(|t| {
            let s = Arc::clone(s);
            std::thread::spawn(move || {
                let mut last = BTreeMap::new();
                let mut sqns = Vec::new();
                for i in 0..WRITES_EACH {
                    // Each writer owns its keys, so its own order decides
                    // their final state; keys repeat to make replacements.
                    let key = format!("w{t}-k{}", i % 40).into_bytes();
                    let opts = PutOptions {
                        sync: Some(if (t + i) % 3 == 0 {
                            SyncStrategy::Sync
                        } else {
                            SyncStrategy::None
                        }),
                        index: vec![IndexChange::add("idx_bin", format!("t{i}").as_bytes())],
                        ..PutOptions::default()
                    };
                    let sqn = if i % 11 == 10 {
                        last.insert(key.clone(), None);
                        s.delete_with(b"b", &key, &opts).expect("delete")
                    } else {
                        let v = value(t, i);
                        last.insert(key.clone(), Some(v.clone()));
                        s.put_with(b"b", &key, &v, b"meta", &opts).expect("put")
                    };
                    sqns.push(sqn);
                }
                // One writer's writes are sequential: its SQNs increase.
                assert!(sqns.windows(2).all(|w| w[0] < w[1]), "writer {t}");
                (last, sqns)
            })
        })
        .collect();
    let mut all_last = BTreeMap::new();
    let mut all_sqns = Vec::new();
    for t in threads {
        let (last, sqns) = t.join().expect("writer thread");
        all_last.extend(last);
        all_sqns.extend(sqns);
    }
    (all_last, all_sqns)
}

fn check_contents(s: &Store, expect: &Expected, when: &str) {
    for (key, v) in expect {
        let got = s.get(b"b", key).expect("get").map(|o| o.value);
        assert_eq!(&got, v, "{when}: key {}", String::from_utf8_lossy(key));
    }
}

fn counter(s: &Store, name: &str) -> u64 {
    s.stats()
        .counter(name)
        .unwrap_or_else(|| panic!("no counter {name}"))
}

fn writers_then_reopen(write_group: bool) {
    let d = tempfile::tempdir().expect("tempdir");
    let s = Arc::new(Store::open(config(d.path(), write_group)).expect("open"));
    let (expect, sqns) = run_writers(&s);
    let total = WRITERS * WRITES_EACH;
    let distinct: BTreeSet<u64> = sqns.iter().copied().collect();
    assert_eq!(distinct.len() as u64, total, "every write has its own sqn");
    assert_eq!(counter(&s, "journal_records_written"), total);
    if write_group {
        assert_eq!(counter(&s, "write_group_records"), total);
        let groups = counter(&s, "write_groups");
        assert!(groups >= 1 && groups <= total, "{groups} groups");
    } else {
        assert_eq!(counter(&s, "write_groups"), 0);
    }
    check_contents(&s, &expect, "before reopen");
    let rolls = counter(&s, "journal_rolls");
    assert!(rolls > 0, "the journal should have rolled (small files)");
    s.close().expect("close");
    drop(s);
    let s = Store::open(config(d.path(), write_group)).expect("reopen");
    check_contents(&s, &expect, "after reopen");
    assert_eq!(counter(&s, "journal_corrupt_records"), 0);
    // The ledger was rebuilt or reloaded with the same SQNs: the highest
    // acknowledged SQN is the journal's last.
    assert_eq!(s.stats().last_sqn, *distinct.last().expect("some writes"));
}

#[test]
fn concurrent_writers_with_write_groups() {
    writers_then_reopen(true);
}

#[test]
fn concurrent_writers_without_write_groups() {
    writers_then_reopen(false);
}

/// A crash (no close) after concurrent sync writes: every write that was
/// acknowledged with sync is in the reopened store.
#[test]
fn synced_group_writes_survive_a_crash() {
    let d = tempfile::tempdir().unwrap();
    let mut c = config(d.path(), true);
    c.sync = SyncStrategy::Sync;
    let s = Arc::new(Store::open(c.clone()).expect("open"));
    let threads: Vec<_> = (0..8u64)
        .map(|t| {
            let s = Arc::clone(&s);
            std::thread::spawn(move || {
                for i in 0..100u64 {
                    s.put(b"b", format!("{t}-{i}").as_bytes(), &value(t, i), b"")
                        .expect("sync put");
                }
            })
        })
        .collect();
    for t in threads {
        t.join().expect("writer");
    }
    Arc::try_unwrap(s).expect("sole owner").simulate_crash();
    let s = Store::open(c).expect("reopen after crash");
    for t in 0..8u64 {
        for i in 0..100u64 {
            let got = s.get(b"b", format!("{t}-{i}").as_bytes()).expect("get");
            assert_eq!(got.map(|o| o.value), Some(value(t, i)), "{t}-{i}");
        }
    }
}
