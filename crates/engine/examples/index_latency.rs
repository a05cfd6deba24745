//! 2i query latency under write load.
//!
//! Loads `--objects` objects (200-byte values), each with one `n_int` index
//! term (a random integer below 10 × objects) and one `s_bin` term, then runs
//! `--queries` range queries `n_int >= random start` with `max_results 1000`
//! (each returns 1,000 results) while `--writers` threads keep putting new
//! objects with index entries into the same fields. Prints p50 / p99 / max
//! query latency and the writers' throughput.
//!
//! ```text
//! cargo run --release -p basalt-engine --example index_latency -- \
//!     [--objects 200000] [--queries 2000] [--writers 2] [--dir PATH]
//! ```

use basalt_engine::{Config, IndexChange, IndexQuery, PutOptions, Store};
use rand::{Rng, SeedableRng};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

fn arg(name: &str, default: u64) -> u64 {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn put(store: &Store, key: u64, rng: &mut impl Rng, term_max: i64) -> basalt_engine::Result<()> {
    let opts = PutOptions {
        index: vec![
            IndexChange::add("n_int", rng.gen_range(0..term_max).to_string()),
            IndexChange::add("s_bin", format!("s{:06}", rng.gen_range(0..100_000))),
        ],
        ..PutOptions::default()
    };
    let value = [b'v'; 200];
    store.put_with(
        b"bench",
        format!("key-{key:012}").as_bytes(),
        &value,
        b"",
        &opts,
    )?;
    Ok(())
}

fn pct(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(i).copied().unwrap_or_default()
}

fn main() -> basalt_engine::Result<()> {
    let objects = arg("--objects", 200_000);
    let queries = arg("--queries", 2_000);
    let writers = arg("--writers", 2);
    let tmp = tempfile::tempdir().map_err(|e| basalt_engine::Error::io("tempdir", "/tmp", e))?;
    let dir = std::env::args()
        .skip_while(|a| a != "--dir")
        .nth(1)
        .map_or_else(|| tmp.path().to_path_buf(), Into::into);
    let store = Arc::new(Store::open(Config::new(&dir))?);
    let term_max = (objects * 10) as i64;

    let t = Instant::now();
    let mut rng = rand::rngs::StdRng::seed_from_u64(1);
    for k in 0..objects {
        put(&store, k, &mut rng, term_max)?;
    }
    store.settle()?;
    println!(
        "loaded {objects} objects with 2 index entries each in {:.1}s",
        t.elapsed().as_secs_f64()
    );

    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for w in 0..writers {
        let (store, stop, written) = (Arc::clone(&store), Arc::clone(&stop), Arc::clone(&written));
        handles.push(std::thread::spawn(move || -> basalt_engine::Result<()> {
            let mut rng = rand::rngs::StdRng::seed_from_u64(100 + w);
            let mut k = objects + w * 1_000_000_000;
            while !stop.load(Ordering::Relaxed) {
                put(&store, k, &mut rng, term_max)?;
                k += 1;
                written.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        }));
    }

    let mut lat = Vec::with_capacity(queries as usize);
    let mut rng = rand::rngs::StdRng::seed_from_u64(2);
    let t = Instant::now();
    let w0 = written.load(Ordering::Relaxed);
    for _ in 0..queries {
        // Start low enough that at least 1,000 preloaded terms follow.
        let start = rng.gen_range(0..term_max * 9 / 10);
        let mut q = IndexQuery::range(
            b"bench",
            b"n_int",
            start.to_string().as_bytes(),
            i64::MAX.to_string().as_bytes(),
        );
        q.max_results = Some(1000);
        q.return_terms = true;
        let qt = Instant::now();
        let page = store.index_query(&q)?;
        lat.push(qt.elapsed());
        assert_eq!(page.results.len(), 1000, "query from {start}");
    }
    let elapsed = t.elapsed();
    let writes = written.load(Ordering::Relaxed) - w0;
    stop.store(true, Ordering::Relaxed);
    for h in handles {
        match h.join() {
            Ok(r) => r?,
            Err(_) => eprintln!("writer thread panicked"),
        }
    }
    lat.sort();
    println!(
        "{queries} range queries x 1000 results, {writers} writers: p50 {:.2} ms  p99 {:.2} ms  max {:.2} ms  ({:.0} queries/s; writers {:.0} puts/s)",
        pct(&lat, 0.50).as_secs_f64() * 1e3,
        pct(&lat, 0.99).as_secs_f64() * 1e3,
        lat.last().copied().unwrap_or_default().as_secs_f64() * 1e3,
        queries as f64 / elapsed.as_secs_f64(),
        writes as f64 / elapsed.as_secs_f64(),
    );
    store.close()
}
