//! What every benchmark shares: work directories, the value pool, latency
//! histograms, `/proc` readings, disk usage and the machine description.

use anyhow::{anyhow, bail, Context, Result};
use basalt_engine::{Config, Store, StoreStats};
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The bucket every benchmark writes to.
pub const BUCKET: &[u8] = b"bench";

/// Engine settings a run may change; everything else is `Config::new`'s default.
#[derive(Debug, Clone, clap::Args)]
pub struct EngineOpts {
    /// Ledger memtable size in bytes (default: the engine's).
    #[arg(long, global = true, value_name = "BYTES")]
    pub memtable_bytes: Option<usize>,
    /// Journal file size in bytes before a roll (default: the engine's).
    #[arg(long, global = true, value_name = "BYTES")]
    pub journal_file_bytes: Option<u64>,
    /// Write groups on or off (default: the engine's, on): `--write-group false`
    /// takes the write lock once per record, for A/B runs in one binary.
    #[arg(long, global = true, value_name = "BOOL")]
    pub write_group: Option<bool>,
}

impl EngineOpts {
    /// The store configuration for `dir`.
    pub fn config(&self, dir: &Path) -> Config {
        let mut c = Config::new(dir);
        if let Some(b) = self.memtable_bytes {
            c.memtable_bytes = b;
        }
        if let Some(b) = self.journal_file_bytes {
            c.journal_file_bytes = b;
        }
        if let Some(b) = self.write_group {
            c.write_group = b;
        }
        c
    }

    /// A Markdown line naming the settings that differ from the defaults.
    pub fn describe(&self) -> String {
        let d = Config::new("x");
        let c = self.config(Path::new("x"));
        format!(
            "Engine config: `Config::new` defaults (memtable_bytes {}, journal_file_bytes {}, sst_file_bytes {}, compression {:?}, journal compaction runs/day {}, write groups {}, sync None unless stated){}.",
            c.memtable_bytes,
            c.journal_file_bytes,
            c.sst_file_bytes,
            c.compression,
            c.compaction_runs_per_day,
            c.write_group,
            if c.memtable_bytes != d.memtable_bytes
                || c.journal_file_bytes != d.journal_file_bytes
                || c.write_group != d.write_group
            {
                " — changed by flags"
            } else {
                ""
            }
        )
    }
}

/// Where a benchmark keeps its files: a fresh directory that is removed on
/// drop unless `keep` is set.
#[derive(Debug)]
pub struct WorkDir {
    path: PathBuf,
    keep: bool,
}

impl WorkDir {
    /// A new directory `<base>/<name>-<pid>`, where `base` is `--dir` or
    /// `target/enginebench-tmp`.
    pub fn create(base: Option<&Path>, name: &str, keep: bool) -> Result<WorkDir> {
        let base = match base {
            Some(b) => b.to_path_buf(),
            None => target_dir().join("enginebench-tmp"),
        };
        let path = base.join(format!("{name}-{}", std::process::id()));
        if path.exists() {
            std::fs::remove_dir_all(&path)
                .with_context(|| format!("remove stale {}", path.display()))?;
        }
        std::fs::create_dir_all(&path).with_context(|| format!("create {}", path.display()))?;
        Ok(WorkDir { path, keep })
    }

    /// The directory.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for WorkDir {
    fn drop(&mut self) {
        if self.keep {
            eprintln!("engine-bench: kept {}", self.path.display());
        } else if let Err(e) = std::fs::remove_dir_all(&self.path) {
            eprintln!(
                "engine-bench: could not remove {}: {e}",
                self.path.display()
            );
        }
    }
}

/// The cargo target directory this binary was built into (its grandparent),
/// else `./target`.
pub fn target_dir() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent()?.parent().map(Path::to_path_buf))
        .filter(|t| t.file_name().is_some_and(|n| n == "target"))
        .unwrap_or_else(|| PathBuf::from("target"))
}

/// Pre-generated incompressible values, handed out in rotation so that the
/// random-number generator's cost is not measured.
#[derive(Debug)]
pub struct ValuePool {
    values: Vec<Vec<u8>>,
}

impl ValuePool {
    /// `count` random buffers of `bytes` bytes each.
    pub fn new(count: usize, bytes: usize, seed: u64) -> ValuePool {
        let mut rng = StdRng::seed_from_u64(seed);
        let values = (0..count.max(1))
            .map(|_| {
                let mut v = vec![0u8; bytes];
                rng.fill(v.as_mut_slice());
                v
            })
            .collect();
        ValuePool { values }
    }

    /// The `i`-th value (modulo the pool size).
    pub fn get(&self, i: u64) -> &[u8] {
        &self.values[(i % self.values.len() as u64) as usize]
    }
}

/// The key of object `i`.
pub fn key(i: u64) -> Vec<u8> {
    format!("k{i:010}").into_bytes()
}

/// A latency histogram in microseconds, 1 us .. 10 min.
pub fn histogram() -> Result<Histogram<u64>> {
    Histogram::new_with_bounds(1, 600_000_000, 3).map_err(|e| anyhow!("histogram: {e}"))
}

/// Records `d` (saturating at the histogram's top).
pub fn record(h: &mut Histogram<u64>, d: Duration) {
    h.saturating_record((d.as_micros() as u64).max(1));
}

/// `p50 / p99 / max` in milliseconds, for a table cell.
pub fn latencies(h: &Histogram<u64>) -> String {
    format!(
        "{} / {} / {}",
        ms(h.value_at_quantile(0.50)),
        ms(h.value_at_quantile(0.99)),
        ms(h.max())
    )
}

/// Microseconds as milliseconds with 3 decimals.
pub fn ms(us: u64) -> String {
    format!("{:.3}", us as f64 / 1000.0)
}

/// `n / secs`, guarded against zero time.
pub fn rate(n: f64, d: Duration) -> f64 {
    n / d.as_secs_f64().max(1e-9)
}

/// Formats a float with thousands separators and no decimals.
pub fn thousands(x: f64) -> String {
    let s = format!("{:.0}", x.max(0.0));
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Bytes in MiB with one decimal.
pub fn mib(bytes: u64) -> String {
    format!("{:.1}", bytes as f64 / (1024.0 * 1024.0))
}

/// The named counter of a stats snapshot (0 if unknown).
pub fn counter(s: &StoreStats, name: &str) -> u64 {
    s.counters
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(0, |(_, v)| *v)
}

/// `after - before` for a counter.
pub fn delta(before: &StoreStats, after: &StoreStats, name: &str) -> u64 {
    counter(after, name).saturating_sub(counter(before, name))
}

/// The `write_bytes` field of `/proc/self/io`: bytes this process caused to
/// be sent to storage (counted when pages are dirtied).
pub fn proc_write_bytes() -> Result<u64> {
    let text = std::fs::read_to_string("/proc/self/io").context("read /proc/self/io")?;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("write_bytes:") {
            return v
                .trim()
                .parse()
                .context("parse write_bytes in /proc/self/io");
        }
    }
    bail!("no write_bytes line in /proc/self/io")
}

/// Apparent size and allocated size (st_blocks) of every file under `dir`.
pub fn disk_usage(dir: &Path) -> Result<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let mut apparent = 0;
    let mut allocated = 0;
    for entry in std::fs::read_dir(dir).with_context(|| format!("list {}", dir.display()))? {
        let entry = entry.with_context(|| format!("list {}", dir.display()))?;
        let meta = entry
            .metadata()
            .with_context(|| format!("stat {}", entry.path().display()))?;
        if meta.is_dir() {
            let (a, b) = disk_usage(&entry.path())?;
            apparent += a;
            allocated += b;
        } else {
            apparent += meta.len();
            allocated += meta.blocks() * 512;
        }
    }
    Ok((apparent, allocated))
}

/// `sync`, then drop the page cache. Err says why it could not.
pub fn drop_caches() -> std::result::Result<(), String> {
    match std::process::Command::new("sync").status() {
        Ok(s) if s.success() => {}
        Ok(s) => return Err(format!("`sync` failed: {s}")),
        Err(e) => return Err(format!("`sync` could not run: {e}")),
    }
    std::fs::write("/proc/sys/vm/drop_caches", "1")
        .map_err(|e| format!("writing 1 to /proc/sys/vm/drop_caches failed: {e}"))
}

/// Opens a store, timing the open.
pub fn open(config: Config) -> Result<(Store, Duration)> {
    let dir = config.dir.clone();
    let t = Instant::now();
    let store = Store::open(config).with_context(|| format!("open store {}", dir.display()))?;
    Ok((store, t.elapsed()))
}

/// Loads keys `0..n` with pool values, unsynced, one thread. Returns the
/// elapsed time (including a final `sync`).
pub fn load(store: &Store, pool: &ValuePool, n: u64) -> Result<Duration> {
    let t = Instant::now();
    for i in 0..n {
        store
            .put(BUCKET, &key(i), pool.get(i), b"")
            .with_context(|| format!("load put {i}"))?;
    }
    store.sync().context("sync after load")?;
    Ok(t.elapsed())
}

/// The machine and run description that heads every report.
pub fn header(title: &str) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "# {title}\n");
    let _ = writeln!(s, "- date: {}", utc_now());
    let _ = writeln!(s, "- commit: {}", git_commit());
    let _ = writeln!(s, "- machine: {}", machine());
    let _ = writeln!(
        s,
        "- build: {}",
        if cfg!(debug_assertions) {
            "DEBUG (numbers are not representative: use --release)"
        } else {
            "release"
        }
    );
    let _ = writeln!(s, "- command: `{}`", command_line());
    s
}

fn command_line() -> String {
    std::env::args()
        .map(|a| {
            if !a.is_empty()
                && a.chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_./=:,+@".contains(c))
            {
                a
            } else {
                format!("'{}'", a.replace('\'', r"'\''"))
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

fn git_commit() -> String {
    let run = |args: &[&str]| {
        std::process::Command::new("git")
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
    };
    match run(&["rev-parse", "--short=12", "HEAD"]) {
        Some(c) => {
            let dirty = run(&["status", "--porcelain", "--untracked-files=no"])
                .is_some_and(|s| !s.is_empty());
            if dirty {
                format!("{c} (with uncommitted changes)")
            } else {
                c
            }
        }
        None => "unknown (not in a git work tree)".into(),
    }
}

fn machine() -> String {
    let cpus = std::thread::available_parallelism().map_or(0, |n| n.get());
    let meminfo = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    let mem_kib: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0);
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .map(|v| v.trim_start_matches([' ', '\t', ':']).to_string())
        .unwrap_or_else(|| "unknown CPU".into());
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!(
        "nproc {cpus}, memory {:.1} GiB, {model}, Linux {}",
        mem_kib as f64 / (1024.0 * 1024.0),
        kernel.trim()
    )
}

/// The current UTC time as `YYYY-MM-DD HH:MM:SS UTC`.
pub fn utc_now() -> String {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let (days, rem) = ((secs / 86_400) as i64, secs % 86_400);
    // Civil date from days since 1970-01-01 (H. Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Joins a thread, turning a panic into an error.
pub fn join<T>(h: std::thread::JoinHandle<Result<T>>) -> Result<T> {
    h.join()
        .map_err(|_| anyhow!("a benchmark thread panicked"))?
}
