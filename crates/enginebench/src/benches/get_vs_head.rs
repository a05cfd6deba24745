//! `get-vs-head`: random GET against HEAD rates from one thread, cold
//! (page cache dropped) and warm, with the first reads of each cold phase
//! timed on their own.

use super::shared::{progress, Ctx, PhaseResult};
use crate::common::{
    drop_caches, histogram, key, latencies, load, open, rate, record, thousands, ValuePool, BUCKET,
};
use anyhow::{bail, Context, Result};
use basalt_engine::Store;
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// Reads timed separately at the start of a read phase (the coldest ones).
const FIRST_READS: u64 = 1000;

/// Options of `get-vs-head`.
#[derive(Debug, Clone, clap::Args)]
pub struct GetVsHead {
    /// Keys loaded.
    #[arg(long, default_value_t = 100_000)]
    pub keys: u64,
    /// Value size.
    #[arg(long, default_value_t = 8192)]
    pub value_bytes: usize,
    /// Seconds per read phase.
    #[arg(long, default_value_t = 5)]
    pub secs: u64,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum ReadOp {
    Get,
    Head,
}

/// Random reads of loaded keys from one thread for `secs`.
/// Also returns the latencies of the first [`FIRST_READS`] reads alone.
fn read_phase(
    store: &Store,
    op: ReadOp,
    keys: u64,
    secs: u64,
    seed: u64,
) -> Result<(PhaseResult, Histogram<u64>)> {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut hist = histogram()?;
    let mut first = histogram()?;
    let mut ops = 0u64;
    let t = Instant::now();
    let deadline = t + Duration::from_secs(secs);
    while Instant::now() < deadline {
        let i = rng.gen_range(0..keys);
        let k = key(i);
        let t = Instant::now();
        let found = match op {
            ReadOp::Get => store.get(BUCKET, &k).map(|o| o.is_some()),
            ReadOp::Head => store.head(BUCKET, &k).map(|h| h.is_some()),
        }
        .with_context(|| format!("read key {i}"))?;
        let d = t.elapsed();
        record(&mut hist, d);
        if ops < FIRST_READS {
            record(&mut first, d);
        }
        if !found {
            bail!("key {i} was loaded but is not found");
        }
        ops += 1;
    }
    let r = PhaseResult {
        ops,
        elapsed: t.elapsed(),
        hist,
    };
    Ok((r, first))
}

/// Reads every file under `dir` so it sits in the page cache.
fn warm_files(dir: &Path) -> Result<()> {
    for entry in std::fs::read_dir(dir).with_context(|| format!("list {}", dir.display()))? {
        let path = entry
            .with_context(|| format!("list {}", dir.display()))?
            .path();
        if path.is_dir() {
            warm_files(&path)?;
        } else {
            let mut f =
                std::fs::File::open(&path).with_context(|| format!("open {}", path.display()))?;
            std::io::copy(&mut f, &mut std::io::sink())
                .with_context(|| format!("read {}", path.display()))?;
        }
    }
    Ok(())
}

/// Runs `get-vs-head`.
pub fn get_vs_head(ctx: &Ctx, a: &GetVsHead) -> Result<String> {
    if a.keys == 0 {
        bail!("--keys must be > 0");
    }
    let work = ctx.workdir("get-vs-head")?;
    let config = ctx.engine.config(&work.path().join("store"));
    let pool = ValuePool::new(256, a.value_bytes, 3);
    progress(&format!("get-vs-head: loading {} keys", a.keys));
    let (store, _) = open(config.clone())?;
    let load_time = load(&store, &pool, a.keys)?;
    store.close().context("close after load")?;
    drop(store);

    let mut notes = Vec::new();
    let mut cold_ok = true;
    if let Err(e) = drop_caches() {
        cold_ok = false;
        notes.push(format!("Dropping the page cache before the cold GET phase FAILED ({e}): the \"cold\" rows below ran with whatever was cached."));
    }
    // Opening scans the active journal file (torn-tail recovery), which pulls
    // it into the page cache: drop the cache again after the open.
    let (store, open_time) = open(config)?;
    if let Err(e) = drop_caches() {
        cold_ok = false;
        notes.push(format!(
            "Dropping the page cache after the reopen FAILED ({e})."
        ));
    }
    progress(&format!("get-vs-head: cold GETs for {} s", a.secs));
    let cold_get = read_phase(&store, ReadOp::Get, a.keys, a.secs, 10)?;
    if let Err(e) = drop_caches() {
        cold_ok = false;
        notes.push(format!(
            "Dropping the page cache before the cold HEAD phase FAILED ({e})."
        ));
    }
    progress(&format!("get-vs-head: cold HEADs for {} s", a.secs));
    let cold_head = read_phase(&store, ReadOp::Head, a.keys, a.secs, 11)?;
    warm_files(work.path())?;
    progress(&format!(
        "get-vs-head: warm GETs and HEADs for {} s each",
        a.secs
    ));
    let warm_get = read_phase(&store, ReadOp::Get, a.keys, a.secs, 12)?;
    let warm_head = read_phase(&store, ReadOp::Head, a.keys, a.secs, 13)?;
    store.close().context("close")?;

    let mut s = String::new();
    let _ = writeln!(
        s,
        "## get-vs-head: {} keys of {} bytes, {} s per phase, one thread, uniform random keys\n",
        a.keys, a.value_bytes, a.secs
    );
    let _ = writeln!(s, "{}\n", ctx.engine.describe());
    let _ = writeln!(
        s,
        "Load: {} puts/s ({:.1} s). Reopen with a cold page cache took {:.1} ms; the cache is dropped again after the open, since open reads the active journal file.\n",
        thousands(rate(a.keys as f64, load_time)),
        load_time.as_secs_f64(),
        open_time.as_secs_f64() * 1000.0
    );
    for n in &notes {
        let _ = writeln!(s, "**NOTE:** {n}\n");
    }
    let _ = writeln!(
        s,
        "| phase | ops/s | latency ms p50 / p99 / max | first {FIRST_READS} reads: p50 / p99 / max |"
    );
    let _ = writeln!(s, "|---|---:|---|---|");
    let cold = if cold_ok {
        "cold (page cache dropped)"
    } else {
        "\"cold\" (cache NOT dropped)"
    };
    for (name, r) in [
        (format!("GET, {cold}"), &cold_get),
        (format!("HEAD, {cold}"), &cold_head),
        ("GET, warm (all files read first)".to_string(), &warm_get),
        ("HEAD, warm".to_string(), &warm_head),
    ] {
        let _ = writeln!(
            s,
            "| {name} | {} | {} | {} |",
            thousands(rate(r.0.ops as f64, r.0.elapsed)),
            latencies(&r.0.hist),
            latencies(&r.1)
        );
    }
    let ratio = |h: &(PhaseResult, _), g: &(PhaseResult, _)| {
        rate(h.0.ops as f64, h.0.elapsed) / rate(g.0.ops as f64, g.0.elapsed).max(1e-9)
    };
    let _ = writeln!(
        s,
        "\n**HEAD/GET ratio: {:.2}x cold, {:.2}x warm.** A cold phase warms the cache as it runs (and readahead brings in neighbours), so its first reads show the cold cost best.\n",
        ratio(&cold_head, &cold_get),
        ratio(&warm_head, &warm_get)
    );
    Ok(s)
}
