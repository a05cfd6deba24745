//! `sync-writers`: synced puts from one writer against many writers at
//! once, where group commit shares each fsync.

use super::shared::{progress, Ctx, PhaseResult, MIB};
use crate::common::{
    delta, histogram, join, key, latencies, open, rate, record, thousands, ValuePool, BUCKET,
};
use anyhow::{Context, Result};
use basalt_engine::{Store, SyncStrategy};
use hdrhistogram::Histogram;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Options of `sync-writers`.
#[derive(Debug, Clone, clap::Args)]
pub struct SyncWriters {
    /// Seconds per phase.
    #[arg(long, default_value_t = 5)]
    pub secs: u64,
    /// Value size of the puts.
    #[arg(long, default_value_t = 8192)]
    pub value_bytes: usize,
    /// Writer threads in the second phase.
    #[arg(long, default_value_t = 32)]
    pub threads: usize,
}

/// `threads` writers put unique keys with `sync` until `secs` have passed.
fn sync_phase(
    store: &Arc<Store>,
    pool: &Arc<ValuePool>,
    next_key: &Arc<AtomicU64>,
    threads: usize,
    secs: u64,
) -> Result<PhaseResult> {
    let t = Instant::now();
    let deadline = t + Duration::from_secs(secs);
    let handles: Vec<_> = (0..threads)
        .map(|_| {
            let (store, pool, next_key) =
                (Arc::clone(store), Arc::clone(pool), Arc::clone(next_key));
            std::thread::spawn(move || -> Result<(u64, Histogram<u64>)> {
                let mut h = histogram()?;
                let mut ops = 0u64;
                while Instant::now() < deadline {
                    let i = next_key.fetch_add(1, Ordering::Relaxed);
                    let t = Instant::now();
                    store
                        .put(BUCKET, &key(i), pool.get(i), b"")
                        .with_context(|| format!("synced put {i}"))?;
                    record(&mut h, t.elapsed());
                    ops += 1;
                }
                Ok((ops, h))
            })
        })
        .collect();
    let mut hist = histogram()?;
    let mut ops = 0;
    for handle in handles {
        let (n, h) = join(handle)?;
        ops += n;
        hist.add(&h).context("merge histograms")?;
    }
    Ok(PhaseResult {
        ops,
        elapsed: t.elapsed(),
        hist,
    })
}

/// Runs `sync-writers`.
pub fn sync_writers(ctx: &Ctx, a: &SyncWriters) -> Result<String> {
    let work = ctx.workdir("sync-writers")?;
    let mut config = ctx.engine.config(&work.path().join("store"));
    config.sync = SyncStrategy::Sync;
    let store = Arc::new(open(config)?.0);
    let pool = Arc::new(ValuePool::new(256, a.value_bytes, 2));
    let next_key = Arc::new(AtomicU64::new(0));
    let mut rows = Vec::new();
    for threads in [1, a.threads.max(1)] {
        progress(&format!(
            "sync-writers: {threads} writer(s) for {} s",
            a.secs
        ));
        let before = store.stats();
        let r = sync_phase(&store, &pool, &next_key, threads, a.secs)?;
        let after = store.stats();
        rows.push((threads, r, before, after));
    }
    store.close().context("close")?;

    let mut s = String::new();
    let _ = writeln!(
        s,
        "## sync-writers: synced puts of {}-byte values, {} s per phase\n",
        a.value_bytes, a.secs
    );
    let _ = writeln!(s, "{}\n", ctx.engine.describe());
    let _ = writeln!(
        s,
        "| writers | puts/s | MiB/s | latency ms p50 / p99 / max | journal_syncs | journal_syncs_shared | puts per fsync | mean fsync ms | time in fsync |"
    );
    let _ = writeln!(s, "|---:|---:|---:|---|---:|---:|---:|---:|---:|");
    for (threads, r, before, after) in &rows {
        let syncs = delta(before, after, "journal_syncs");
        // How long the fsyncs took, and the share of the phase one was
        // running: below 100 % the disk waited for the writers.
        let fsync_ns = delta(before, after, "journal_fsync_ns");
        let fsyncs = delta(before, after, "journal_fsync_count").max(1);
        let _ = writeln!(
            s,
            "| {threads} | {} | {:.1} | {} | {syncs} | {} | {:.1} | {:.3} | {:.0} % |",
            thousands(rate(r.ops as f64, r.elapsed)),
            rate(
                (r.ops * a.value_bytes as u64) as f64 / MIB as f64,
                r.elapsed
            ),
            latencies(&r.hist),
            delta(before, after, "journal_syncs_shared"),
            r.ops as f64 / syncs.max(1) as f64,
            fsync_ns as f64 / fsyncs as f64 / 1e6,
            100.0 * fsync_ns as f64 / r.elapsed.as_nanos().max(1) as f64
        );
    }
    if let [(_, one, ..), (n, many, ..)] = rows.as_slice() {
        let _ = writeln!(
            s,
            "\n**Ratio {n} writers / 1 writer: {:.2}x puts/s.**\n",
            rate(many.ops as f64, many.elapsed) / rate(one.ops as f64, one.elapsed).max(1e-9)
        );
    }
    Ok(s)
}
