//! The complete, checked configuration of a run, [`BenchConfig`], with its
//! value types ([`Mode`], [`RateMode`], [`RngSeed`]) and the entry points
//! that read it from files or text.

use super::error::ConfigError;
use super::ops::{DriverKind, OpSpec};
use super::raw::RawConfig;
use crate::keygen::KeyGenSpec;
use crate::netcfg::NetOptions;
use crate::valgen::ValGenSpec;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// How fast workers issue requests.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Mode {
    /// `max` / `{rate, max}`: closed loop, no pause.
    Max,
    /// `{rate, N}`: N ops/s per worker on average (exponential gaps).
    Rate(f64),
}

/// How `{rate, N}` is scheduled.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RateMode {
    /// basho_bench's behaviour: sleep an exponential gap after each op
    /// (the sleep ignores service time; latency = service time).
    #[default]
    ClosedLoop,
    /// A per-worker schedule of intended start times (Poisson arrivals);
    /// a late worker does not sleep, and latency is measured from each
    /// request's intended start (coordinated omission corrected).
    OpenLoop,
}

/// `rng_seed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RngSeed {
    /// `{A, B, C}`: worker Id seeds with `{A+Id, B+Id, C+Id}`.
    Fixed(i64, i64, i64),
    /// `now`: a different seed every run.
    Now,
}

impl RngSeed {
    /// The 64-bit seed of worker `id` (1-based); id 0 is the run itself.
    pub fn for_worker(self, id: usize) -> u64 {
        let (a, b, c) = match self {
            RngSeed::Fixed(a, b, c) => (a, b, c),
            RngSeed::Now => {
                let t = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as i64)
                    .unwrap_or(0);
                (t, t >> 20, t >> 40)
            }
        };
        let id = id as i64;
        let mut h = xxhash_rust::xxh3::Xxh3::new();
        for v in [a + id, b + id, c + id] {
            h.update(&v.to_le_bytes());
        }
        h.digest()
    }
}

/// The complete, checked configuration of a run.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// `mode` (default `{rate, 5}`).
    pub mode: Mode,
    /// `basalt_rate_mode`: `closed_loop` (default) or `open_loop`.
    pub rate_mode: RateMode,
    /// `duration` in minutes (default 5; floats allowed here), or
    /// `basalt_duration_secs`; `None` = `infinity`.
    pub duration: Option<Duration>,
    /// `report_interval` in seconds (default 10).
    pub report_interval: Duration,
    /// `concurrent` workers (default 3).
    pub concurrent: usize,
    /// `driver` (basho_bench's default, the HTTP driver, is not available;
    /// our default is `basalt_embedded`).
    pub driver: DriverKind,
    /// `operations` (default `[{get,4},{put,4},{delete,1}]`).
    pub operations: Vec<OpSpec>,
    /// `key_generator` (default `{uniform_int, 100000}`).
    pub key_generator: KeyGenSpec,
    /// `value_generator` (default `{fixed_bin, 100}`).
    pub value_generator: ValGenSpec,
    /// `value_generator_source_size` (default 96 MiB), or the size of
    /// `value_blob_file` when one is given (as upstream's source size).
    pub value_source_size: usize,
    /// `value_generator_blob_file`: the file whose bytes `fixed_bin`,
    /// `exponential_bin` and `uniform_bin` values are sliced from, instead
    /// of random bytes (basho_bench's `init_source`).
    pub value_blob_file: Option<PathBuf>,
    /// `rng_seed` (default `{42, 23, 12}`).
    pub rng_seed: RngSeed,
    /// `shutdown_on_error` (default false).
    pub shutdown_on_error: bool,
    /// `basalt_backend` (default `leveled`).
    pub backend: String,
    /// `basalt_data_dir` (default: `data` inside the results directory).
    pub data_dir: Option<PathBuf>,
    /// `basalt_stores`: stores opened side by side (default 1), keys routed by hash.
    pub stores: usize,
    /// `basalt_sync`: fsync every put (default false).
    pub sync: bool,
    /// `basalt_bucket` (default `<<"test">>`).
    pub bucket: Vec<u8>,
    /// `basalt_keep_data`: keep the stores after the run (default false).
    pub keep_data: bool,
    /// `basalt_index_terms`: 2i terms written by each put (default 1 when
    /// `index_query` is among the operations, else 0).
    pub index_terms: usize,
    /// `basalt_memory_limit`: hold the bench process and its page cache to
    /// this many bytes in a memory cgroup (`"1.5G"`, `<<"512M">>` or a byte
    /// count; see [`crate::memlimit`]); `--memory-limit` overrides it.
    pub memory_limit: Option<u64>,
    /// `basalt_compaction_runs_per_day`: leveled's scheduled journal
    /// compaction runs per day (default: the engine's, 24); others ignore it.
    pub compaction_runs_per_day: Option<u32>,
    /// `basalt_compaction_max_garbage_pct`: leveled's garbage trigger
    /// (0..=100; 100 turns it off; default: the engine's, 60); others
    /// ignore it.
    pub compaction_max_garbage_pct: Option<f64>,
    /// `basalt_compaction_punch`: leveled reclaims journal garbage in place,
    /// punching holes instead of copying live records (`true`: wherever the
    /// file system can, even where punching proves slow; `false`: never;
    /// default: the engine's `Auto`, in place until punching proves slow);
    /// others ignore it.
    pub compaction_punch: Option<bool>,
    /// `basalt_disk_min_free_pct`: leveled refuses writes that store values
    /// below this percentage of its file system free (the engine's
    /// `disk_min_free_pct`, a number 0..100, fractions allowed; default:
    /// the engine's, 1); others ignore it. A full disk stops the run with
    /// its reports, as a failed write would.
    pub disk_min_free_pct: Option<f64>,
    /// `basalt_journal_slowdown_pct`: leveled's write slowdown, the
    /// journal garbage percentage above which writes are paced to
    /// compaction (0..=100; 100 turns it off; default: the engine's, 75);
    /// others ignore it.
    pub journal_slowdown_garbage_pct: Option<f64>,
    /// `basalt_journal_one_read`: leveled reads a value record with one
    /// positional read (default: the engine's, true); others ignore it.
    pub journal_one_read: Option<bool>,
    /// `basalt_journal_fadvise_random`: leveled advises the kernel that
    /// journal value reads are random (no read-ahead; default: the
    /// engine's, true); others ignore it.
    pub journal_fadvise_random: Option<bool>,
    /// `basalt_journal_skip_active_lock`: leveled GETs of records older
    /// than the active journal file skip its lock (default: the engine's,
    /// true); others ignore it.
    pub journal_skip_active_lock: Option<bool>,
    /// `basalt_journal_preallocate`: leveled reserves each new journal
    /// file's blocks when it is created (default: the engine's, true);
    /// others ignore it.
    pub journal_preallocate: Option<bool>,
    /// `basalt_journal_release_written`: leveled drops the journal's pages
    /// from the page cache once written back, when it reads closed files
    /// with `O_DIRECT` (default: the engine's); others ignore it.
    pub journal_release_written: Option<bool>,
    /// `basalt_value_cache_refresh`: a leveled write of a key its value
    /// cache holds replaces the cached version (default: the engine's);
    /// others ignore it.
    pub value_cache_refresh: Option<bool>,
    /// `basalt_write_group`: leveled writers share write-lock trips,
    /// journal writes and fsyncs (default: the engine's, true); others
    /// ignore it.
    pub write_group: Option<bool>,
    /// `basalt_journal_sync_bytes`: leveled's background fsync of the
    /// active journal file every this many bytes (a size such as "2M";
    /// default: the engine's, 1 MiB); others ignore it.
    pub journal_sync_bytes: Option<u64>,
    /// `basalt_journal_fsync_bytes`: with write-back flushing, leveled's
    /// flusher also fsyncs the active journal file every this many bytes
    /// (a size; 0: only at rolls; default: the engine's, 4 MiB); others
    /// ignore it.
    pub journal_fsync_bytes: Option<u64>,
    /// `basalt_ledger_sync_bytes`: leveled fsyncs a ledger SST being
    /// written every this many bytes (a size; 0: only when finished;
    /// default: the engine's, 1 MiB); others ignore it.
    pub ledger_sync_bytes: Option<u64>,
    /// `basalt_background_nice`: 0..=19, how many nice steps below the
    /// bench leveled's journal compaction and ledger merge threads run
    /// (default: the engine's); others ignore it.
    pub background_nice: Option<i32>,
    /// `basalt_compaction_stream_bytes`: leveled's journal compaction
    /// fsyncs and drops from the page cache every this many bytes (default:
    /// the engine's, 1 MiB; a size larger than a run, e.g. `"64GB"`, gives
    /// the old behaviour for A/B runs); others ignore it.
    pub compaction_stream_bytes: Option<u64>,
    /// `basalt_compaction_read_pace`: leveled's journal compaction reads at
    /// most this many bytes a second (a size such as `"128M"`; 0 unpaced;
    /// default: the engine's, 64 MiB/s); others ignore it.
    pub compaction_read_bytes_per_sec: Option<u64>,
    /// `basalt_remove_pace`: leveled removes the files compaction and
    /// merges replaced at most this many bytes a second, in the background
    /// (a size such as `"256M"`; 0: at once, by the thread that drops them;
    /// default: the engine's, 256 MiB/s); others ignore it.
    pub remove_bytes_per_sec: Option<u64>,
    /// `basalt_journal_flush`: `fsync` or `writeback`, what leveled's
    /// background flusher does every `basalt_journal_sync_bytes` (default:
    /// the engine's, writeback); others ignore it.
    pub journal_flush: Option<basalt_backends::JournalFlush>,
    /// `basalt_block_cache`: bytes of leveled's ledger block cache per
    /// store (a size such as `"64M"`; 0 none; default: the engine's,
    /// 64 MiB); others ignore it.
    pub block_cache_bytes: Option<u64>,
    /// `basalt_value_cache`: bytes of leveled's value cache per store (a
    /// size; 0: none; default: 45 % of the store's share of the memory
    /// limit, none without a limit); others ignore it.
    pub value_cache_bytes: Option<u64>,
    /// `basalt_journal_direct_reads`: leveled reads values from closed
    /// journal files with `O_DIRECT` (default: when it has a value cache).
    pub journal_direct_reads: Option<bool>,
    /// `basalt_memtable_bytes`: leveled's ledger memtable size (a size such
    /// as `"8M"`; default: the engine's, 16 MiB); others ignore it.
    pub memtable_bytes: Option<u64>,
    /// `basalt_l0_merge_trigger`: leveled merges L0 into L1 at this many L0
    /// files (default: the engine's, 4; below its stall mark of 16);
    /// others ignore it.
    pub l0_merge_trigger: Option<usize>,
    /// `basalt_l1_files`: files leveled's ledger keeps in L1 (default: the
    /// engine's, 8); others ignore it.
    pub l1_files: Option<usize>,
    /// RocksDB settings: `basalt_rocksdb_block_cache` (size; default a
    /// third of the store's share of the memory limit, else 32 MiB),
    /// `basalt_rocksdb_write_buffer` (size, 32 MiB), `basalt_rocksdb_compression`
    /// (`none` | `lz4` | `snappy` | `zstd`, none), `basalt_rocksdb_bloom_bits`
    /// (10; 0 = no filter), `basalt_rocksdb_dynamic_level_bytes` (true),
    /// `basalt_rocksdb_lower_priority` (true: compaction threads at nice 19).
    pub rocksdb: basalt_backends::RocksTuning,
    /// The network driver's options (`None` for `basalt_embedded` and
    /// `null`); see [`crate::netcfg`].
    pub net: Option<NetOptions>,
    /// The files read, in order.
    pub files: Vec<PathBuf>,
}

impl BenchConfig {
    /// Reads, merges and checks `paths`; returns the config and its warnings.
    pub fn from_files<P: AsRef<Path>>(
        paths: &[P],
    ) -> Result<(BenchConfig, Vec<String>), ConfigError> {
        RawConfig::from_files(paths)?.build()
    }

    /// Parses config text (tests and examples).
    pub fn from_text(text: &str) -> Result<(BenchConfig, Vec<String>), ConfigError> {
        let mut raw = RawConfig::default();
        raw.add_text(text, "<text>")
            .map_err(|error| ConfigError::Syntax {
                path: PathBuf::from("<text>"),
                error,
            })?;
        raw.build()
    }

    /// Total `{rate, N}` target over all workers (ops/s), if rate-limited.
    pub fn target_rate(&self) -> Option<f64> {
        match self.mode {
            Mode::Max => None,
            Mode::Rate(n) => Some(n * self.concurrent as f64),
        }
    }
}
