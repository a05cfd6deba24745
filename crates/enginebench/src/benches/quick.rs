//! `quick`: the ~30 s volume test. Loads keys, then 5 GET : 1 UPDATE from a
//! few threads on a hot fifth of the keys, with per-second throughput and
//! the run's write amplification.

use super::shared::{progress, Ctx, MIB};
use super::wa::{finish_phase, wa_lines};
use crate::common::{
    histogram, join, key, latencies, load, open, proc_write_bytes, rate, record, thousands,
    ValuePool, BUCKET,
};
use anyhow::{bail, Context, Result};
use basalt_engine::{Store, SyncStrategy};
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options of `quick`.
#[derive(Debug, Clone, clap::Args)]
pub struct Quick {
    /// Keys loaded.
    #[arg(long, default_value_t = 20_000)]
    pub keys: u64,
    /// Value size.
    #[arg(long, default_value_t = 8192)]
    pub value_bytes: usize,
    /// Seconds of the mixed phase.
    #[arg(long, default_value_t = 15)]
    pub secs: u64,
    /// Client threads in the mixed phase.
    #[arg(long, default_value_t = 4)]
    pub threads: usize,
    /// Sync every update (SyncStrategy::Sync) in the mixed phase.
    #[arg(long)]
    pub sync: bool,
}

#[derive(Default)]
struct Counts {
    gets: AtomicU64,
    updates: AtomicU64,
}

/// One client of the mixed phase: 5 GET : 1 UPDATE (GET then PUT), 80% of
/// the operations on the first 20% of the keys.
fn quick_client(
    store: &Store,
    pool: &ValuePool,
    a: &Quick,
    seed: u64,
    stop: &AtomicBool,
    counts: &Counts,
) -> Result<(Histogram<u64>, Histogram<u64>)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let (mut get_h, mut upd_h) = (histogram()?, histogram()?);
    let hot = (a.keys / 5).max(1);
    let mut n = seed << 32;
    while !stop.load(Ordering::Relaxed) {
        let i = if rng.gen_bool(0.8) || hot == a.keys {
            rng.gen_range(0..hot)
        } else {
            rng.gen_range(hot..a.keys)
        };
        let k = key(i);
        let update = rng.gen_range(0..6) == 0;
        let t = Instant::now();
        if store
            .get(BUCKET, &k)
            .with_context(|| format!("get {i}"))?
            .is_none()
        {
            bail!("key {i} was loaded but is not found");
        }
        if update {
            n += 1;
            store
                .put(BUCKET, &k, pool.get(n), b"")
                .with_context(|| format!("update {i}"))?;
            record(&mut upd_h, t.elapsed());
            counts.updates.fetch_add(1, Ordering::Relaxed);
        } else {
            record(&mut get_h, t.elapsed());
            counts.gets.fetch_add(1, Ordering::Relaxed);
        }
    }
    Ok((get_h, upd_h))
}

/// Runs `quick`.
pub fn quick(ctx: &Ctx, a: &Quick) -> Result<String> {
    if a.keys == 0 || a.threads == 0 {
        bail!("--keys and --threads must be > 0");
    }
    let work = ctx.workdir("quick")?;
    let store_dir = work.path().join("store");
    let mut config = ctx.engine.config(&store_dir);
    if a.sync {
        config.sync = SyncStrategy::Sync;
    }
    let pool = Arc::new(ValuePool::new(512, a.value_bytes, 6));
    let (store, _) = open(config)?;
    progress(&format!(
        "quick: loading {} keys of {} bytes",
        a.keys, a.value_bytes
    ));
    let load_time = load(&store, &pool, a.keys)?;
    store.settle().context("settle after load")?;

    progress(&format!(
        "quick: 5 GET : 1 UPDATE from {} threads for {} s",
        a.threads, a.secs
    ));
    let store = Arc::new(store);
    let before = store.stats();
    let os_before = proc_write_bytes()?;
    let stop = Arc::new(AtomicBool::new(false));
    let counts = Arc::new(Counts::default());
    let t = Instant::now();
    let handles: Vec<_> = (0..a.threads)
        .map(|c| {
            let (store, pool, stop, counts, a) = (
                Arc::clone(&store),
                Arc::clone(&pool),
                Arc::clone(&stop),
                Arc::clone(&counts),
                a.clone(),
            );
            std::thread::spawn(move || {
                let r = quick_client(&store, &pool, &a, c as u64 + 100, &stop, &counts);
                if r.is_err() {
                    stop.store(true, Ordering::Relaxed);
                }
                r
            })
        })
        .collect();
    let mut per_second = Vec::new();
    let (mut last_g, mut last_u) = (0, 0);
    for sec in 1..=a.secs {
        let wake = t + Duration::from_secs(sec);
        std::thread::sleep(wake.saturating_duration_since(Instant::now()));
        if stop.load(Ordering::Relaxed) {
            break; // a client failed: its error is reported below
        }
        let (g, u) = (
            counts.gets.load(Ordering::Relaxed),
            counts.updates.load(Ordering::Relaxed),
        );
        let line = format!(
            "| {sec} | {} | {} | {} |",
            thousands((g + u - last_g - last_u) as f64),
            thousands((g - last_g) as f64),
            thousands((u - last_u) as f64)
        );
        eprintln!(
            "engine-bench: t={sec:>3}s ops/s {:>8} (get {:>8}, update {:>7})",
            g + u - last_g - last_u,
            g - last_g,
            u - last_u
        );
        per_second.push(line);
        (last_g, last_u) = (g, u);
    }
    stop.store(true, Ordering::Relaxed);
    let (mut get_h, mut upd_h) = (histogram()?, histogram()?);
    for h in handles {
        let (g, u) = join(h)?;
        get_h.add(&g).context("merge histograms")?;
        upd_h.add(&u).context("merge histograms")?;
    }
    let mixed = t.elapsed();
    let store = Arc::try_unwrap(store).map_err(|_| anyhow::anyhow!("store still shared"))?;
    let r = finish_phase(store, &store_dir, os_before, before)?;

    let (gets, updates) = (get_h.len(), upd_h.len());
    let live = a.keys * (key(0).len() + BUCKET.len() + a.value_bytes) as u64;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## quick: {} keys of {} bytes, then 5 GET : 1 UPDATE from {} threads for {} s ({})\n",
        a.keys,
        a.value_bytes,
        a.threads,
        a.secs,
        if a.sync {
            "updates synced"
        } else {
            "sync=None"
        }
    );
    let _ = writeln!(s, "{}\n", ctx.engine.describe());
    let _ = writeln!(
        s,
        "Key choice: 80% of operations on the first 20% of the keys (uniform within each part). UPDATE = GET then PUT of a new value.\n"
    );
    let _ = writeln!(
        s,
        "Load: {} puts/s ({:.1} s, {} MiB/s of values).\n",
        thousands(rate(a.keys as f64, load_time)),
        load_time.as_secs_f64(),
        format_args!(
            "{:.1}",
            rate(
                (a.keys * a.value_bytes as u64) as f64 / MIB as f64,
                load_time
            )
        )
    );
    let _ = writeln!(
        s,
        "| operation | count | ops/s | latency ms p50 / p99 / max |"
    );
    let _ = writeln!(s, "|---|---:|---:|---|");
    let _ = writeln!(
        s,
        "| **all** | {} | **{}** | |",
        gets + updates,
        thousands(rate((gets + updates) as f64, mixed))
    );
    let _ = writeln!(
        s,
        "| GET | {gets} | {} | {} |",
        thousands(rate(gets as f64, mixed)),
        latencies(&get_h)
    );
    let _ = writeln!(
        s,
        "| UPDATE (GET + PUT) | {updates} | {} | {} |\n",
        thousands(rate(updates as f64, mixed)),
        latencies(&upd_h)
    );
    wa_lines(&mut s, &r, live);
    let _ = writeln!(s, "\nPer second:\n");
    let _ = writeln!(s, "| second | ops | get | update |");
    let _ = writeln!(s, "|---:|---:|---:|---:|");
    for line in per_second {
        let _ = writeln!(s, "{line}");
    }
    let _ = writeln!(s);
    Ok(s)
}
