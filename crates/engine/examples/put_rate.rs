//! PUT rate of an embedded store with small values, with or without
//! whole-store snapshots being taken meanwhile: the cost of the memtable
//! insert (and, with snapshots, of what a snapshot does to writers).
//!
//! `THREADS` writers (default 4) put 100-byte values over 2 M random keys
//! for `SECS` seconds (default 20) into a fresh store with the default
//! config. With `SNAP_EVERY_MS` > 0 a further thread takes a whole-store
//! snapshot that often and holds it `SNAP_HOLD_MS` (default half the
//! period). Prints PUTs per second, the slowest PUT, how many PUTs took
//! over 5 ms, and the snapshots' median and slowest call.
//!
//! ```text
//! cargo run --release -p basalt-engine --example put_rate [SECS] [THREADS] [SNAP_EVERY_MS] [SNAP_HOLD_MS]
//! ```

use basalt_engine::{Config, SnapshotOptions, Store};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

const KEYS: u64 = 2_000_000;
const VALUE: &[u8] = &[7u8; 100];
const SLOW: Duration = Duration::from_millis(5);

/// Per writer: PUTs done, slowest PUT, PUTs slower than [`SLOW`].
fn writer(store: &Store, seed: u64, stop: &AtomicBool) -> (u64, Duration, u64) {
    let (mut x, mut n, mut max, mut slow) = (seed | 1, 0u64, Duration::ZERO, 0u64);
    while !stop.load(Ordering::Relaxed) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let key = format!("{:010}", x % KEYS);
        let t = Instant::now();
        store
            .put(b"bench", key.as_bytes(), VALUE, b"")
            .expect("put");
        let d = t.elapsed();
        max = max.max(d);
        slow += u64::from(d > SLOW);
        n += 1;
    }
    (n, max, slow)
}

/// Takes and holds snapshots until `stop`; returns each call's time.
fn snapshotter(store: &Store, every: Duration, hold: Duration, stop: &AtomicBool) -> Vec<Duration> {
    let mut times = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let t = Instant::now();
        let snap = store.snapshot(SnapshotOptions::all()).expect("snapshot");
        times.push(t.elapsed());
        std::thread::sleep(hold);
        drop(snap);
        std::thread::sleep(every.saturating_sub(hold));
    }
    times
}

fn main() {
    let arg = |i: usize, default: u64| -> u64 {
        std::env::args()
            .nth(i)
            .map_or(default, |a| a.parse().expect("a number"))
    };
    let (secs, threads, every_ms) = (arg(1, 20), arg(2, 4), arg(3, 0));
    let hold_ms = arg(4, every_ms / 2);
    let dir = tempfile::tempdir().expect("tempdir");
    let store = Store::open(Config::new(dir.path())).expect("open");
    let stop = AtomicBool::new(false);
    let t = Instant::now();
    let (results, snaps) = std::thread::scope(|s| {
        let writers: Vec<_> = (0..threads)
            .map(|i| {
                let (store, stop) = (&store, &stop);
                s.spawn(move || writer(store, 0x9E37_79B9_7F4A_7C15 ^ (i + 1), stop))
            })
            .collect();
        let snaps = (every_ms > 0).then(|| {
            let (store, stop) = (&store, &stop);
            let (every, hold) = (
                Duration::from_millis(every_ms),
                Duration::from_millis(hold_ms),
            );
            s.spawn(move || snapshotter(store, every, hold, stop))
        });
        std::thread::sleep(Duration::from_secs(secs));
        stop.store(true, Ordering::Relaxed);
        let results: Vec<_> = writers
            .into_iter()
            .map(|w| w.join().expect("writer"))
            .collect();
        (results, snaps.map(|h| h.join().expect("snapshotter")))
    });
    let elapsed = t.elapsed().as_secs_f64();
    store.close().expect("close");
    let puts: u64 = results.iter().map(|r| r.0).sum();
    let max = results.iter().map(|r| r.1).max().unwrap_or_default();
    let slow: u64 = results.iter().map(|r| r.2).sum();
    println!(
        "puts/s {:.0}  puts {puts}  slowest put {:.2} ms  puts over {} ms {slow}",
        puts as f64 / elapsed,
        max.as_secs_f64() * 1e3,
        SLOW.as_millis()
    );
    if let Some(mut times) = snaps {
        times.sort();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        println!(
            "snapshots {}  median {:.3} ms  slowest {:.3} ms",
            times.len(),
            times.get(times.len() / 2).map_or(0.0, |d| ms(*d)),
            times.last().map_or(0.0, |d| ms(*d))
        );
    }
}
