//! The benchmarks. Each returns a Markdown section; numbers that are meant to
//! be compared are measured in the same run, back to back.

use crate::common::{
    delta, disk_usage, drop_caches, histogram, join, key, latencies, load, mib, open,
    proc_write_bytes, rate, record, thousands, EngineOpts, ValuePool, WorkDir, BUCKET,
};
use anyhow::{bail, Context, Result};
use basalt_engine::{Store, StoreStats, SyncStrategy};
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt::Write as _;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const MIB: u64 = 1024 * 1024;

/// Options every benchmark gets.
#[derive(Debug, Clone)]
pub struct Ctx {
    /// Parent of the work directory.
    pub dir: Option<PathBuf>,
    /// Keep the work directory.
    pub keep: bool,
    /// Engine settings.
    pub engine: EngineOpts,
}

impl Ctx {
    fn workdir(&self, name: &str) -> Result<WorkDir> {
        WorkDir::create(self.dir.as_deref(), name, self.keep)
    }
}

fn progress(msg: &str) {
    eprintln!("engine-bench: {msg}");
}

// ---------------------------------------------------------------------------
// seq-vs-put
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// sync-writers
// ---------------------------------------------------------------------------

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

struct PhaseResult {
    ops: u64,
    elapsed: Duration,
    hist: Histogram<u64>,
}

/// Reads timed separately at the start of a read phase (the coldest ones).
const FIRST_READS: u64 = 1000;

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

// ---------------------------------------------------------------------------
// get-vs-head
// ---------------------------------------------------------------------------

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

// ---------------------------------------------------------------------------
// write-amp
// ---------------------------------------------------------------------------

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

/// Write amplification and disk use of a write phase that ends with
/// `sync` + `settle` + `close`.
struct WaResult {
    /// `/proc/self/io` write_bytes over the phase, including the final close.
    os_bytes: u64,
    /// User bytes written in the phase (engine counter).
    user_bytes: u64,
    /// Engine counters across the phase (up to before `close`).
    before: StoreStats,
    after: StoreStats,
    /// Apparent and allocated bytes under the store directory after close.
    disk: (u64, u64),
}

impl WaResult {
    fn wa(&self) -> f64 {
        self.os_bytes as f64 / self.user_bytes.max(1) as f64
    }
}

/// Finishes a measured phase: sync, settle, close, then reads the counters.
fn finish_phase(store: Store, dir: &Path, os_before: u64, before: StoreStats) -> Result<WaResult> {
    store.sync().context("sync")?;
    store.settle().context("settle")?;
    let after = store.stats();
    store.close().context("close")?;
    drop(store);
    let os_bytes = proc_write_bytes()?.saturating_sub(os_before);
    Ok(WaResult {
        os_bytes,
        user_bytes: delta(&before, &after, "user_bytes_written"),
        before,
        after,
        disk: disk_usage(dir)?,
    })
}

fn wa_lines(s: &mut String, r: &WaResult, live_bytes: u64) {
    let (b, a) = (&r.before, &r.after);
    let journal = delta(b, a, "journal_bytes_written");
    let ledger = delta(b, a, "ledger_bytes_written");
    let _ = writeln!(s, "| measure | value |");
    let _ = writeln!(s, "|---|---:|");
    let _ = writeln!(
        s,
        "| **write amplification** (/proc/self/io write_bytes / user bytes, incl. sync + settle + close) | **{:.3}** |",
        r.wa()
    );
    let _ = writeln!(
        s,
        "| user bytes written (key + bucket + value) | {} MiB |",
        mib(r.user_bytes)
    );
    let _ = writeln!(s, "| OS write_bytes | {} MiB |", mib(r.os_bytes));
    let _ = writeln!(
        s,
        "| engine: journal bytes written | {} MiB ({:.3} x user) |",
        mib(journal),
        journal as f64 / r.user_bytes.max(1) as f64
    );
    let _ = writeln!(
        s,
        "| engine: ledger bytes written | {} MiB ({:.3} x user; {} flushes, {} merges) |",
        mib(ledger),
        ledger as f64 / r.user_bytes.max(1) as f64,
        delta(b, a, "ledger_flushes"),
        delta(b, a, "ledger_merges")
    );
    let _ = writeln!(
        s,
        "| engine: write stalls | {} ({} ms) |",
        delta(b, a, "write_stalls"),
        delta(b, a, "write_stall_us") / 1000
    );
    let _ = writeln!(
        s,
        "| disk use after close (apparent / allocated) | {} / {} MiB |",
        mib(r.disk.0),
        mib(r.disk.1)
    );
    let _ = writeln!(
        s,
        "| live data (keys x (key + bucket + value)) | {} MiB |",
        mib(live_bytes)
    );
    let _ = writeln!(
        s,
        "| **space amplification** (apparent disk use / live data) | **{:.2}** |",
        r.disk.0 as f64 / live_bytes.max(1) as f64
    );
    let files: u64 = a.journal_files.len() as u64;
    let levels: Vec<String> = a
        .levels
        .iter()
        .enumerate()
        .filter(|(_, l)| l.files > 0)
        .map(|(i, l)| {
            format!(
                "L{i}: {} files {} MiB {} entries",
                l.files,
                mib(l.bytes),
                l.entries
            )
        })
        .collect();
    let _ = writeln!(
        s,
        "| shape at the end | {files} journal files; {} |",
        if levels.is_empty() {
            "ledger empty".to_string()
        } else {
            levels.join("; ")
        }
    );
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

// ---------------------------------------------------------------------------
// all
// ---------------------------------------------------------------------------

/// Runs the four benchmarks with quick defaults, in one report.
pub fn all(ctx: &Ctx) -> Result<String> {
    let seq = SeqVsPut {
        mib: 1024,
        value_bytes: 8192,
    };
    let sync = SyncWriters {
        secs: 5,
        value_bytes: 8192,
        threads: 32,
    };
    let reads = GetVsHead {
        keys: 100_000,
        value_bytes: 8192,
        secs: 5,
    };
    let wa = WriteAmp {
        keys: 50_000,
        overwrites: 200_000,
        value_bytes: 8192,
    };
    let mut s = String::new();
    let _ = writeln!(
        s,
        "Sizes: seq-vs-put --mib {}; sync-writers --secs {}; get-vs-head --keys {} --secs {}; write-amp --keys {} --overwrites {}; 8 KiB values.\n",
        seq.mib, sync.secs, reads.keys, reads.secs, wa.keys, wa.overwrites
    );
    s.push_str(&seq_vs_put(ctx, &seq)?);
    s.push_str(&sync_writers(ctx, &sync)?);
    s.push_str(&get_vs_head(ctx, &reads)?);
    s.push_str(&write_amp(ctx, &wa)?);
    Ok(s)
}

// ---------------------------------------------------------------------------
// quick
// ---------------------------------------------------------------------------

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
