//! `seq-vs-put`: the disk's sequential write bandwidth (buffered 1 MiB
//! writes and one fsync, like `dd conv=fsync`), measured before and after
//! unsynced puts of large values, against the puts' own bandwidth.

use super::shared::{progress, Ctx, MIB};
use crate::common::{delta, key, mib, open, rate, thousands, ValuePool, BUCKET};
use anyhow::{bail, Context, Result};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::Path;
use std::time::Instant;

/// Options of `seq-vs-put`.
#[derive(Debug, Clone, clap::Args)]
pub struct SeqVsPut {
    /// MiB written by each phase.
    #[arg(long, default_value_t = 1024)]
    pub mib: u64,
    /// Value size of the puts.
    #[arg(long, default_value_t = 8192)]
    pub value_bytes: usize,
}

/// Writes `mib` MiB to a new file in 1 MiB buffered writes, then one fsync
/// (like `dd bs=1M conv=fsync`); returns MiB/s.
fn seq_write(dir: &Path, mib_count: u64) -> Result<f64> {
    let path = dir.join("seq-write.bin");
    let mut buf = vec![0u8; MIB as usize];
    StdRng::seed_from_u64(7).fill(buf.as_mut_slice());
    let t = Instant::now();
    let mut f =
        std::fs::File::create(&path).with_context(|| format!("create {}", path.display()))?;
    for _ in 0..mib_count {
        f.write_all(&buf)
            .with_context(|| format!("write {}", path.display()))?;
    }
    f.sync_all()
        .with_context(|| format!("fsync {}", path.display()))?;
    let elapsed = t.elapsed();
    drop(f);
    std::fs::remove_file(&path).with_context(|| format!("remove {}", path.display()))?;
    Ok(rate(mib_count as f64, elapsed))
}

/// Runs `seq-vs-put`.
pub fn seq_vs_put(ctx: &Ctx, a: &SeqVsPut) -> Result<String> {
    if a.value_bytes == 0 || a.mib == 0 {
        bail!("--mib and --value-bytes must be > 0");
    }
    let work = ctx.workdir("seq-vs-put")?;
    progress(&format!("seq-vs-put: sequential write of {} MiB", a.mib));
    let seq_before = seq_write(work.path(), a.mib)?;

    let n = a.mib * MIB / a.value_bytes as u64;
    progress(&format!(
        "seq-vs-put: {n} unsynced puts of {} bytes",
        a.value_bytes
    ));
    let pool = ValuePool::new(256, a.value_bytes, 1);
    let (store, _) = open(ctx.engine.config(&work.path().join("store")))?;
    let before = store.stats();
    let t = Instant::now();
    for i in 0..n {
        store
            .put(BUCKET, &key(i), pool.get(i), b"")
            .with_context(|| format!("put {i}"))?;
    }
    let puts_only = t.elapsed();
    store.sync().context("sync")?;
    let after = store.stats();
    store.close().context("close")?;
    let total = t.elapsed();
    drop(store);
    let value_bytes = n * a.value_bytes as u64;
    let put_mib_s = rate(value_bytes as f64 / MIB as f64, total);

    progress("seq-vs-put: sequential write again");
    let seq_after = seq_write(work.path(), a.mib)?;
    let seq_mean = (seq_before + seq_after) / 2.0;

    let mut s = String::new();
    let _ = writeln!(
        s,
        "## seq-vs-put: {} MiB, {}-byte values\n",
        a.mib, a.value_bytes
    );
    let _ = writeln!(s, "{}\n", ctx.engine.describe());
    let _ = writeln!(s, "| phase | MiB/s | puts/s | time s |");
    let _ = writeln!(s, "|---|---:|---:|---:|");
    let _ = writeln!(
        s,
        "| (a) sequential write, 1 MiB writes + 1 fsync (before) | {seq_before:.1} | | {:.2} |",
        a.mib as f64 / seq_before
    );
    let _ = writeln!(
        s,
        "| (b) store puts, sync=None, then sync + close | {put_mib_s:.1} | {} | {:.2} |",
        thousands(rate(n as f64, total)),
        total.as_secs_f64()
    );
    let _ = writeln!(
        s,
        "| (b) puts alone (before sync + close) | {:.1} | {} | {:.2} |",
        rate(value_bytes as f64 / MIB as f64, puts_only),
        thousands(rate(n as f64, puts_only)),
        puts_only.as_secs_f64()
    );
    let _ = writeln!(
        s,
        "| (a) sequential write (after) | {seq_after:.1} | | {:.2} |\n",
        a.mib as f64 / seq_after
    );
    let _ = writeln!(
        s,
        "**Ratio (b)/(a): {:.2}** against the mean of both (a) runs ({:.2} against the first, {:.2} against the second; their spread shows the disk's noise).\n",
        put_mib_s / seq_mean,
        put_mib_s / seq_before,
        put_mib_s / seq_after
    );
    let _ = writeln!(
        s,
        "Engine counters during (b): journal {} MiB written, ledger {} MiB written ({} flushes, {} merges), {} write stalls ({} ms stalled).\n",
        mib(delta(&before, &after, "journal_bytes_written")),
        mib(delta(&before, &after, "ledger_bytes_written")),
        delta(&before, &after, "ledger_flushes"),
        delta(&before, &after, "ledger_merges"),
        delta(&before, &after, "write_stalls"),
        delta(&before, &after, "write_stall_us") / 1000
    );
    Ok(s)
}
