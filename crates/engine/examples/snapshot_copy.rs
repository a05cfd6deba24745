//! How long taking a whole-store snapshot holds the write lock, by the
//! size of the active memtable it takes.
//!
//! For each memtable size (4 and 16 MiB by default) a store is filled with
//! small PUTs over fresh keys until its active memtable is `FILL` (0.9)
//! full (a first store learns how many entries fill it), then
//! `Store::snapshot(SnapshotOptions::all())` is timed `ROUNDS` times (each
//! snapshot dropped before the next). The call takes the active memtable
//! under the store's write lock (it copied it until 2026-11-28, ~38 ms for
//! a full 16 MiB memtable; it now shares it), so its time is how long
//! writers wait. Prints entries in the memtable and the median and max of
//! the calls.
//!
//! ```text
//! cargo run --release -p basalt-engine --example snapshot_copy [MIB...]
//! ```

use basalt_engine::{Config, SnapshotOptions, Store};
use std::time::{Duration, Instant};

const FILL: f64 = 0.9;
const ROUNDS: usize = 21;
const VALUE: &[u8] = &[7u8; 100];

/// Puts `n` fresh keys from `*next` on; returns the memtable's entries.
fn fill(store: &Store, next: &mut u64, n: u64) -> usize {
    for _ in 0..n {
        let k = format!("{:012}", *next);
        store.put(b"bench", k.as_bytes(), VALUE, b"").expect("put");
        *next += 1;
    }
    store.stats().memtable_entries
}

fn open(dir: &std::path::Path, mib: usize) -> Store {
    let mut c = Config::new(dir);
    c.memtable_bytes = mib << 20;
    c.compaction_runs_per_day = 0;
    // Flushes inline: a frozen memtable is written at once, so the entry
    // count (active plus frozen) is the active memtable's.
    c.background_merges = false;
    Store::open(c).expect("open")
}

fn measure(mib: usize) -> (usize, Duration, Duration) {
    // First learn how many of these entries fill the memtable: put until
    // the count stops growing (the memtable was frozen and flushed).
    let probe = tempfile::tempdir().expect("tempdir");
    let (store, mut next, mut peak) = (open(probe.path(), mib), 0u64, 0usize);
    loop {
        let n = fill(&store, &mut next, 1000);
        if n < peak + 1000 {
            break;
        }
        peak = n;
    }
    store.close().expect("close");
    // Then fill a fresh store to FILL of that and time the snapshots.
    let dir = tempfile::tempdir().expect("tempdir");
    let store = open(dir.path(), mib);
    let entries = fill(&store, &mut 0, (FILL * peak as f64) as u64);
    let mut times: Vec<Duration> = (0..ROUNDS)
        .map(|_| {
            let t = Instant::now();
            let snap = store.snapshot(SnapshotOptions::all()).expect("snapshot");
            let d = t.elapsed();
            drop(snap);
            d
        })
        .collect();
    times.sort();
    store.close().expect("close");
    (entries, times[ROUNDS / 2], times[ROUNDS - 1])
}

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("a memtable size in MiB"))
        .collect();
    let sizes = if sizes.is_empty() { vec![4, 16] } else { sizes };
    println!("| memtable | entries in it | snapshot median | max of {ROUNDS} |");
    println!("|---:|---:|---:|---:|");
    for mib in sizes {
        let (n, med, max) = measure(mib);
        println!(
            "| {mib} MiB | {n} | {:.2} ms | {:.2} ms |",
            med.as_secs_f64() * 1e3,
            max.as_secs_f64() * 1e3
        );
    }
}
