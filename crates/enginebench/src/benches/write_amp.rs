//! `write-amp`: write amplification of random overwrites, measured by
//! `/proc/self/io`, then what journal compaction writes and leaves on disk
//! (space amplification).

use super::shared::{progress, Ctx};
use super::wa::{finish_phase, wa_lines};
use crate::common::{
    disk_usage, key, load, mib, open, proc_write_bytes, rate, thousands, ValuePool, BUCKET,
};
use anyhow::{bail, Context, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

/// Options of `write-amp`.
#[derive(Debug, Clone, clap::Args)]
pub struct WriteAmp {
    /// Keys loaded first.
    #[arg(long, default_value_t = 50_000)]
    pub keys: u64,
    /// Random overwrites measured.
    #[arg(long, default_value_t = 200_000)]
    pub overwrites: u64,
    /// Value size.
    #[arg(long, default_value_t = 8192)]
    pub value_bytes: usize,
}

/// Runs `write-amp`.
pub fn write_amp(ctx: &Ctx, a: &WriteAmp) -> Result<String> {
    if a.keys == 0 {
        bail!("--keys must be > 0");
    }
    let work = ctx.workdir("write-amp")?;
    let store_dir = work.path().join("store");
    let pool = ValuePool::new(512, a.value_bytes, 4);
    let (store, _) = open(ctx.engine.config(&store_dir))?;
    progress(&format!("write-amp: loading {} keys", a.keys));
    let load_time = load(&store, &pool, a.keys)?;
    store.settle().context("settle after load")?;

    progress(&format!("write-amp: {} random overwrites", a.overwrites));
    let before = store.stats();
    let os_before = proc_write_bytes()?;
    let mut rng = StdRng::seed_from_u64(5);
    let t = Instant::now();
    for n in 0..a.overwrites {
        let i = rng.gen_range(0..a.keys);
        store
            .put(BUCKET, &key(i), pool.get(a.keys + n), b"")
            .with_context(|| format!("overwrite {n}"))?;
    }
    let put_time = t.elapsed();
    let r = finish_phase(store, &store_dir, os_before, before)?;
    let total = t.elapsed();

    progress("write-amp: journal compaction until no run is worth it");
    let compaction = compact_all(ctx, &store_dir)?;

    let live = a.keys * (key(0).len() + BUCKET.len() + a.value_bytes) as u64;
    let mut s = String::new();
    let _ = writeln!(
        s,
        "## write-amp: {} keys of {} bytes, then {} random overwrites\n",
        a.keys, a.value_bytes, a.overwrites
    );
    let _ = writeln!(s, "{}\n", ctx.engine.describe());
    let _ = writeln!(
        s,
        "Load: {} puts/s. Overwrites: {} puts/s ({:.1} s for the puts, {:.1} s with sync + settle + close).\n",
        thousands(rate(a.keys as f64, load_time)),
        thousands(rate(a.overwrites as f64, put_time)),
        put_time.as_secs_f64(),
        total.as_secs_f64()
    );
    wa_lines(&mut s, &r, live);
    let c = &compaction;
    let _ = writeln!(
        s,
        "\nThen, reopened, `Store::compact_journal()` run until it finds nothing worth rewriting ({} runs compacted, {:.1} s): {} MiB of journal files rewritten into {} MiB, {} records kept, {} dropped; OS write_bytes {} MiB.\n",
        c.runs,
        c.elapsed.as_secs_f64(),
        mib(c.bytes_in),
        mib(c.bytes_out),
        c.records_kept,
        c.records_dropped,
        mib(c.os_bytes)
    );
    let _ = writeln!(s, "| after compaction | value |");
    let _ = writeln!(s, "|---|---:|");
    let _ = writeln!(
        s,
        "| **write amplification incl. compaction** ((overwrite phase + compaction write_bytes) / user bytes) | **{:.3}** |",
        (r.os_bytes + c.os_bytes) as f64 / r.user_bytes.max(1) as f64
    );
    let _ = writeln!(
        s,
        "| disk use (apparent / allocated) | {} / {} MiB |",
        mib(c.disk.0),
        mib(c.disk.1)
    );
    let _ = writeln!(
        s,
        "| **space amplification** (apparent disk use / live data) | **{:.2}** |\n",
        c.disk.0 as f64 / live.max(1) as f64
    );
    Ok(s)
}

/// What [`compact_all`] did.
struct CompactionTotals {
    runs: u64,
    bytes_in: u64,
    bytes_out: u64,
    records_kept: u64,
    records_dropped: u64,
    os_bytes: u64,
    elapsed: Duration,
    disk: (u64, u64),
}

/// Most journal compaction runs [`compact_all`] does.
const COMPACTION_RUNS_MAX: u64 = 50;

/// Opens the store, runs journal compaction until a run finds nothing worth
/// rewriting, closes, and measures what that wrote and what is left on disk.
fn compact_all(ctx: &Ctx, store_dir: &Path) -> Result<CompactionTotals> {
    let (store, _) = open(ctx.engine.config(store_dir))?;
    let os_before = proc_write_bytes()?;
    let t = Instant::now();
    let mut c = CompactionTotals {
        runs: 0,
        bytes_in: 0,
        bytes_out: 0,
        records_kept: 0,
        records_dropped: 0,
        os_bytes: 0,
        elapsed: Duration::ZERO,
        disk: (0, 0),
    };
    while c.runs < COMPACTION_RUNS_MAX {
        let r = store.compact_journal().context("journal compaction")?;
        if !r.compacted {
            break;
        }
        c.runs += 1;
        c.bytes_in += r.bytes_in;
        c.bytes_out += r.bytes_out;
        c.records_kept += r.records_kept;
        c.records_dropped += r.records_dropped;
    }
    store.close().context("close after compaction")?;
    drop(store);
    c.elapsed = t.elapsed();
    c.os_bytes = proc_write_bytes()?.saturating_sub(os_before);
    c.disk = disk_usage(store_dir)?;
    Ok(c)
}
