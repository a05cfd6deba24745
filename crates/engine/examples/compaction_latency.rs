//! Put latency with and without continuous journal compaction.
//!
//! Two writer threads put 8 KB values (random bytes, so lz4 stores them as
//! they are) over a 20,000-key space for `SECS` seconds (default 10) with no
//! compaction, then for `SECS` seconds while another thread compacts the
//! journal in a loop. Prints p50 / p99 / p99.9 / max put latency of each phase.
//!
//! ```text
//! cargo run --release -p basalt-engine --example compaction_latency [SECS]
//! ```

use basalt_engine::{Config, Store};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const KEYS: u64 = 20_000;
const VALUE: usize = 8192;

fn phase(store: &Arc<Store>, secs: u64, compact: bool, seed: u64) -> (Vec<u64>, u64, u64) {
    let stop = Arc::new(AtomicBool::new(false));
    let compactor = compact.then(|| {
        let (s, stop) = (Arc::clone(store), Arc::clone(&stop));
        std::thread::spawn(move || {
            let mut runs = 0u64;
            while !stop.load(Ordering::Relaxed) {
                match s.compact_journal() {
                    Ok(r) if r.compacted => runs += 1,
                    Ok(_) => std::thread::sleep(Duration::from_millis(20)),
                    Err(e) => panic!("compaction failed: {e}"),
                }
            }
            runs
        })
    });
    let writers: Vec<_> = (0..2u64)
        .map(|t| {
            let (s, stop) = (Arc::clone(store), Arc::clone(&stop));
            std::thread::spawn(move || {
                let mut rng = StdRng::seed_from_u64(seed + t);
                let mut v = vec![0u8; VALUE];
                let mut lat = Vec::new();
                while !stop.load(Ordering::Relaxed) {
                    rng.fill(&mut v[..]);
                    let k = format!("key-{:06}", rng.gen_range(0..KEYS));
                    let t0 = Instant::now();
                    s.put(b"bench", k.as_bytes(), &v, b"").expect("put");
                    lat.push(t0.elapsed().as_micros() as u64);
                }
                lat
            })
        })
        .collect();
    std::thread::sleep(Duration::from_secs(secs));
    stop.store(true, Ordering::Relaxed);
    let mut all = Vec::new();
    for w in writers {
        all.extend(w.join().expect("writer"));
    }
    let runs = compactor.map_or(0, |c| c.join().expect("compactor"));
    let reclaimed = store
        .stats()
        .counters
        .iter()
        .find(|(n, _)| *n == "compaction_bytes_reclaimed")
        .map_or(0, |(_, v)| *v);
    all.sort_unstable();
    (all, runs, reclaimed)
}

fn pct(sorted: &[u64], p: f64) -> u64 {
    let i = ((sorted.len() as f64 * p).ceil() as usize).saturating_sub(1);
    sorted.get(i).copied().unwrap_or(0)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let secs: u64 = std::env::args().nth(1).map_or(Ok(10), |s| s.parse())?;
    let dir = tempfile::tempdir()?;
    let cfg = Config {
        journal_file_bytes: 8 * 1024 * 1024,
        // Small enough that 20,000 hot keys flush the memtable: compaction
        // can only drop records at or below the ledger's persisted SQN.
        memtable_bytes: 1024 * 1024,
        compaction_runs_per_day: 0,
        ..Config::new(dir.path())
    };
    let store = Arc::new(Store::open(cfg)?);
    for (name, compact, seed) in [
        ("no compaction", false, 1),
        ("continuous compaction", true, 2),
    ] {
        let (lat, runs, reclaimed) = phase(&store, secs, compact, seed);
        let journal: u64 = store
            .stats()
            .journal_files
            .iter()
            .map(|f| f.size_bytes)
            .sum();
        println!(
            "{name:>22}: {} puts ({:.0}/s)  p50 {} us  p99 {} us  p99.9 {} us  max {} us  | compaction runs {runs}, reclaimed {} MiB total, journal now {} MiB",
            lat.len(),
            lat.len() as f64 / secs as f64,
            pct(&lat, 0.50),
            pct(&lat, 0.99),
            pct(&lat, 0.999),
            lat.last().copied().unwrap_or(0),
            reclaimed >> 20,
            journal >> 20
        );
    }
    Arc::try_unwrap(store)
        .map_err(|_| "store still shared")?
        .close()?;
    Ok(())
}
