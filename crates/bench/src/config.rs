//! basho_bench configuration: read one or more files of `{Key, Value}.`
//! terms (a later file overrides an earlier one), apply basho_bench's
//! defaults, and check every value.
//!
//! Keys and defaults follow `shared/reference/basho_bench.md` §1. Keys of
//! basho_bench that have no meaning here (`log_level`, `code_paths`, hooks,
//! ...) are accepted and ignored; any other unknown key gives a warning that
//! names it. Our own keys all start with `basalt_` (see [`BenchConfig`]).

use crate::keygen::{KeyGenError, KeyGenSpec};
use crate::netcfg::NetOptions;
use crate::term::{parse_terms, SyntaxError, Term};
use crate::valgen::{ValGenError, ValGenSpec};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// basho_bench keys we accept but do not use.
const IGNORED: &[&str] = &[
    "log_level",
    "code_paths",
    "source_dir",
    "pre_hook",
    "post_hook",
    "stats",
    "measurement_driver",
    "measurements",
    "distribute_work",
    "remote_nodes",
    "disable_sequential_int_progress_report",
    "sequential_int_state_dir",
    "test_dir",
    "app_run_mode",
];

/// Keys this tool reads.
const KNOWN: &[&str] = &[
    "mode",
    "duration",
    "report_interval",
    "concurrent",
    "driver",
    "operations",
    "key_generator",
    "value_generator",
    "rng_seed",
    "shutdown_on_error",
    "value_generator_source_size",
    "basalt_duration_secs",
    "basalt_rate_mode",
    "basalt_backend",
    "basalt_data_dir",
    "basalt_stores",
    "basalt_sync",
    "basalt_bucket",
    "basalt_keep_data",
    "basalt_index_terms",
    "basalt_memory_limit",
    "basalt_compaction_runs_per_day",
    "basalt_compaction_max_garbage_pct",
    "basalt_compaction_punch",
    "basalt_disk_min_free_pct",
    "basalt_journal_slowdown_pct",
    "basalt_journal_one_read",
    "basalt_journal_fadvise_random",
    "basalt_journal_skip_active_lock",
    "basalt_journal_preallocate",
    "basalt_journal_release_written",
    "basalt_value_cache_refresh",
    "basalt_write_group",
    "basalt_journal_sync_bytes",
    "basalt_journal_fsync_bytes",
    "basalt_ledger_sync_bytes",
    "basalt_background_nice",
    "basalt_compaction_stream_bytes",
    "basalt_compaction_read_pace",
    "basalt_remove_pace",
    "basalt_journal_flush",
    "basalt_block_cache",
    "basalt_value_cache",
    "basalt_journal_direct_reads",
    "basalt_memtable_bytes",
    "basalt_l0_merge_trigger",
    "basalt_l1_files",
    "basalt_rocksdb_block_cache",
    "basalt_rocksdb_write_buffer",
    "basalt_rocksdb_compression",
    "basalt_rocksdb_bloom_bits",
    "basalt_rocksdb_dynamic_level_bytes",
    "basalt_rocksdb_lower_priority",
];

/// Driver names accepted in `driver` (each also with the
/// `basho_bench_driver_` prefix).
pub const VALID_DRIVERS: &[&str] = &["basalt_embedded", "null", "riakc_pb", "nhs", "http_raw"];

/// Backends the embedded driver can open (every backend of `basalt-backends`).
pub fn valid_backends() -> Vec<&'static str> {
    basalt_backends::backend_names()
}

/// A configuration error.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file is not valid Erlang terms.
    #[error("{path}:{}: {}", .error.line, .error.message)]
    Syntax {
        /// The file.
        path: PathBuf,
        /// Where and what.
        error: SyntaxError,
    },
    /// A key has a bad value.
    #[error("{key}: {message}{}", .at.as_deref().map(|a| format!(" ({a})")).unwrap_or_default())]
    Invalid {
        /// The key.
        key: String,
        /// What is wrong.
        message: String,
        /// `file:line` where the value was given, if it came from a file.
        at: Option<String>,
    },
    /// A bad key generator.
    #[error(transparent)]
    KeyGen(#[from] KeyGenError),
    /// A bad value generator.
    #[error(transparent)]
    ValGen(#[from] ValGenError),
}

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

/// An operation a driver can run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum OpKind {
    /// Read a value (not found is a success).
    Get,
    /// Write a value.
    Put,
    /// Get, then put a new value.
    Update,
    /// Delete (not found is a success).
    Delete,
    /// Read metadata only.
    Head,
    /// Range query with return_terms on the index terms `put` writes.
    IndexQuery,
    /// `null` driver only: always fails (tests error accounting).
    AnError,
    /// Get; not found is an error.
    GetExisting,
    /// Update; not found is an error.
    UpdateExisting,
    /// Get (not found: a new object), replace the 2i terms with generated
    /// postcode / date-of-birth / last-modified terms, put.
    UpdateWith2i,
    /// 2i range query with return_terms on `postcode_bin`.
    QueryPostcode,
    /// 2i range query with return_terms on `dateofbirth_bin`.
    QueryDob,
    /// NHS: get from the record bucket (not found is a success).
    GetPb,
    /// NHS: get one of this worker's "always get" keys; not found is an error.
    AlwaysGetPb,
    /// NHS: grow the "always get" key set or update one of its keys, with
    /// new 2i terms.
    AlwaysGetUpdateWith2i,
    /// NHS: as `AlwaysGetUpdateWith2i`, keeping the object's 2i terms.
    AlwaysGetUpdateWithout2i,
    /// NHS: put a new object with a unique key in the document bucket.
    PutUnique,
    /// NHS: get one of the unique keys put so far.
    GetUnique,
    /// NHS: `put_unique` on the active cluster, then poll a GET of the key
    /// on the passive cluster (`replpb_ips`) until it is there.
    PutUniqueCheckRepl,
}

impl OpKind {
    /// All operations, with their config names.
    pub const ALL: &'static [(&'static str, OpKind)] = &[
        ("get", OpKind::Get),
        ("put", OpKind::Put),
        ("update", OpKind::Update),
        ("delete", OpKind::Delete),
        ("head", OpKind::Head),
        ("index_query", OpKind::IndexQuery),
        ("an_error", OpKind::AnError),
        ("get_existing", OpKind::GetExisting),
        ("update_existing", OpKind::UpdateExisting),
        ("update_with2i", OpKind::UpdateWith2i),
        ("query_postcode", OpKind::QueryPostcode),
        ("query_dob", OpKind::QueryDob),
        ("get_pb", OpKind::GetPb),
        ("alwaysget_pb", OpKind::AlwaysGetPb),
        ("alwaysget_updatewith2i", OpKind::AlwaysGetUpdateWith2i),
        (
            "alwaysget_updatewithout2i",
            OpKind::AlwaysGetUpdateWithout2i,
        ),
        ("put_unique", OpKind::PutUnique),
        ("get_unique", OpKind::GetUnique),
        ("put_unique_checkrepl", OpKind::PutUniqueCheckRepl),
    ];

    /// The config name.
    pub fn name(self) -> &'static str {
        OpKind::ALL
            .iter()
            .find(|(_, k)| *k == self)
            .map_or("?", |(n, _)| n)
    }

    /// True when the op writes a value from the value generator.
    pub fn writes(self) -> bool {
        matches!(
            self,
            OpKind::Put
                | OpKind::Update
                | OpKind::UpdateExisting
                | OpKind::UpdateWith2i
                | OpKind::AlwaysGetUpdateWith2i
                | OpKind::AlwaysGetUpdateWithout2i
        )
    }
}

/// Which driver runs the operations.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DriverKind {
    /// `basalt_embedded`: stores opened in this process.
    Embedded,
    /// `null`: does nothing (harness overhead).
    Null,
    /// `basho_bench_driver_riakc_pb`: a Riak node over Protocol Buffers.
    RiakcPb,
    /// `basho_bench_driver_nhs`: the NHS workload over Protocol Buffers.
    Nhs,
    /// `basho_bench_driver_http_raw`: a Riak node over HTTP.
    HttpRaw,
}

impl DriverKind {
    /// Operations this driver accepts.
    pub fn valid_ops(self) -> &'static [&'static str] {
        match self {
            DriverKind::Embedded => &["get", "put", "update", "delete", "head", "index_query"],
            DriverKind::Null => &[
                "get",
                "put",
                "update",
                "delete",
                "head",
                "index_query",
                "an_error",
            ],
            DriverKind::RiakcPb => &[
                "get",
                "get_existing",
                "put",
                "update",
                "update_existing",
                "update_with2i",
                "delete",
                "query_postcode",
                "query_dob",
            ],
            DriverKind::Nhs => &[
                "get_pb",
                "update_with2i",
                "alwaysget_pb",
                "alwaysget_updatewith2i",
                "alwaysget_updatewithout2i",
                "put_unique",
                "get_unique",
                "put_unique_checkrepl",
            ],
            DriverKind::HttpRaw => &[
                "get",
                "get_existing",
                "put",
                "update",
                "update_existing",
                "delete",
            ],
        }
    }

    /// True for the drivers that talk to a node over the network.
    pub fn is_network(self) -> bool {
        matches!(
            self,
            DriverKind::RiakcPb | DriverKind::Nhs | DriverKind::HttpRaw
        )
    }
}

/// One entry of `operations`.
#[derive(Debug, Clone, PartialEq)]
pub struct OpSpec {
    /// Label (the op name unless `{Label, Op, Weight}` was given).
    pub label: String,
    /// The operation.
    pub op: OpKind,
    /// Integer weight.
    pub weight: u32,
}

impl OpSpec {
    /// The label as basho_bench writes it in file names: characters
    /// outside `[0-9A-Za-z]` become `-` (`index_query` → `index-query`).
    pub fn file_label(&self) -> String {
        normalize_label(&self.label)
    }
}

/// basho_bench's label normalisation for file names.
pub fn normalize_label(label: &str) -> String {
    label
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect()
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
    /// `value_generator_source_size` (default 96 MiB).
    pub value_source_size: usize,
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

/// A value with where it came from.
#[derive(Debug, Clone)]
struct Located {
    value: Term,
    at: String,
}

/// The merged `{Key, Value}` pairs of several files.
#[derive(Debug, Clone, Default)]
pub struct RawConfig {
    entries: BTreeMap<String, Located>,
    /// Keys in first-seen order (for warnings).
    order: Vec<String>,
    files: Vec<PathBuf>,
}

impl RawConfig {
    /// Reads and merges `paths` in order (a later file wins).
    pub fn from_files<P: AsRef<Path>>(paths: &[P]) -> Result<RawConfig, ConfigError> {
        let mut raw = RawConfig::default();
        for p in paths {
            let p = p.as_ref();
            let text = std::fs::read_to_string(p).map_err(|source| ConfigError::Io {
                path: p.to_path_buf(),
                source,
            })?;
            raw.add_text(&text, &p.display().to_string())
                .map_err(|error| ConfigError::Syntax {
                    path: p.to_path_buf(),
                    error,
                })?;
            raw.files.push(p.to_path_buf());
        }
        Ok(raw)
    }

    /// Merges the terms of `text` (named `source` in messages).
    pub fn add_text(&mut self, text: &str, source: &str) -> Result<(), SyntaxError> {
        for (term, line) in parse_terms(text)? {
            // Like basho_bench, only {Key, Value} pairs are applied.
            if let Term::Tuple(items) = term {
                if let [Term::Atom(k), v] = items.as_slice() {
                    if !self.entries.contains_key(k) {
                        self.order.push(k.clone());
                    }
                    self.entries.insert(
                        k.clone(),
                        Located {
                            value: v.clone(),
                            at: format!("{source}:{line}"),
                        },
                    );
                }
            }
        }
        Ok(())
    }

    /// The value of `key`, if given.
    pub fn get(&self, key: &str) -> Option<&Term> {
        self.entries.get(key).map(|l| &l.value)
    }

    /// Keys neither read nor knowingly ignored.
    pub fn unknown_keys(&self) -> Vec<String> {
        self.order
            .iter()
            .filter(|k| {
                !KNOWN.contains(&k.as_str())
                    && !IGNORED.contains(&k.as_str())
                    && !crate::netcfg::KNOWN_KEYS.contains(&k.as_str())
            })
            .cloned()
            .collect()
    }

    /// `file:line` where `key` was given, if it came from a file.
    pub(crate) fn location(&self, key: &str) -> Option<String> {
        self.entries.get(key).map(|l| l.at.clone())
    }

    pub(crate) fn invalid(&self, key: &str, message: impl Into<String>) -> ConfigError {
        ConfigError::Invalid {
            key: key.into(),
            message: message.into(),
            at: self.location(key),
        }
    }

    pub(crate) fn int(&self, key: &str, default: i64, min: i64) -> Result<i64, ConfigError> {
        match self.get(key) {
            None => Ok(default),
            Some(t) => match t.as_int() {
                Some(i) if i >= min => Ok(i),
                _ => Err(self.invalid(key, format!("expected an integer >= {min}, got {t}"))),
            },
        }
    }

    fn bool(&self, key: &str, default: bool) -> Result<bool, ConfigError> {
        match self.get(key).map(|t| t.as_atom()) {
            None => Ok(default),
            Some(Some("true")) => Ok(true),
            Some(Some("false")) => Ok(false),
            Some(_) => Err(self.invalid(key, "expected true or false")),
        }
    }

    pub(crate) fn text(&self, key: &str) -> Result<Option<String>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(t) => t
                .as_text()
                .map(Some)
                .ok_or_else(|| self.invalid(key, format!("expected a string, got {t}"))),
        }
    }

    /// Builds the typed configuration; returns it with the warnings.
    pub fn build(&self) -> Result<(BenchConfig, Vec<String>), ConfigError> {
        let mut warnings = Vec::new();
        let unknown = self.unknown_keys();
        if !unknown.is_empty() {
            warnings.push(format!(
                "unknown config keys (ignored): {}",
                unknown.join(", ")
            ));
        }
        let mode = match self.get("mode") {
            None => Mode::Rate(5.0),
            Some(t) => parse_mode(t).ok_or_else(|| {
                self.invalid(
                    "mode",
                    format!("expected max, {{rate, max}} or {{rate, N}} with N > 0, got {t}"),
                )
            })?,
        };
        let rate_mode = match self.get("basalt_rate_mode").map(|t| t.as_atom()) {
            None | Some(Some("closed_loop")) => RateMode::ClosedLoop,
            Some(Some("open_loop")) => RateMode::OpenLoop,
            Some(_) => {
                return Err(self.invalid("basalt_rate_mode", "expected closed_loop or open_loop"))
            }
        };
        if rate_mode == RateMode::OpenLoop && mode == Mode::Max {
            warnings.push("basalt_rate_mode open_loop has no effect with mode max".into());
        }
        let duration = self.duration()?;
        let report_interval = self.report_interval()?;
        let concurrent = self.int("concurrent", 3, 1)? as usize;
        let driver = self.driver()?;
        let operations = match self.get("operations") {
            None => vec![
                op("get", OpKind::Get, 4),
                op("put", OpKind::Put, 4),
                op("delete", OpKind::Delete, 1),
            ],
            Some(t) => self.parse_ops(t, driver)?,
        };
        let key_generator = match self.get("key_generator") {
            None => KeyGenSpec::UniformInt {
                start: 1,
                n: 100_000,
            },
            Some(t) => KeyGenSpec::from_term(t)?,
        };
        let value_generator = match self.get("value_generator") {
            None => ValGenSpec::FixedBin(100),
            Some(t) => ValGenSpec::from_term(t)?,
        };
        let value_source_size = self.int("value_generator_source_size", 96 * 1048576, 1)? as usize;
        let rng_seed = self.rng_seed()?;
        let shutdown_on_error = self.bool("shutdown_on_error", false)?;
        let backend = self
            .text("basalt_backend")?
            .unwrap_or_else(|| "leveled".into());
        if driver == DriverKind::Embedded && !valid_backends().contains(&backend.as_str()) {
            return Err(self.invalid(
                "basalt_backend",
                format!(
                    "unknown backend {backend}; valid: {}",
                    valid_backends().join(", ")
                ),
            ));
        }
        let data_dir = self.text("basalt_data_dir")?.map(PathBuf::from);
        let stores = self.int("basalt_stores", 1, 1)? as usize;
        let sync = self.bool("basalt_sync", false)?;
        let bucket = self
            .text("basalt_bucket")?
            .map_or_else(|| b"test".to_vec(), String::into_bytes);
        if bucket.is_empty() {
            return Err(self.invalid("basalt_bucket", "must not be empty"));
        }
        let keep_data = self.bool("basalt_keep_data", false)?;
        let memory_limit = self.memory_limit()?;
        let compaction_runs_per_day = match self.get("basalt_compaction_runs_per_day") {
            None => None,
            Some(_) => Some(
                u32::try_from(self.int("basalt_compaction_runs_per_day", 24, 0)?)
                    .map_err(|_| self.invalid("basalt_compaction_runs_per_day", "too large"))?,
            ),
        };
        let compaction_max_garbage_pct = self.pct("basalt_compaction_max_garbage_pct", 60)?;
        let compaction_punch = self.opt_bool("basalt_compaction_punch")?;
        let disk_min_free_pct = self.fraction_pct("basalt_disk_min_free_pct")?;
        let journal_slowdown_garbage_pct = self.pct("basalt_journal_slowdown_pct", 75)?;
        let journal_one_read = self.opt_bool("basalt_journal_one_read")?;
        let journal_fadvise_random = self.opt_bool("basalt_journal_fadvise_random")?;
        let journal_skip_active_lock = self.opt_bool("basalt_journal_skip_active_lock")?;
        let journal_preallocate = self.opt_bool("basalt_journal_preallocate")?;
        let journal_release_written = self.opt_bool("basalt_journal_release_written")?;
        let value_cache_refresh = self.opt_bool("basalt_value_cache_refresh")?;
        let write_group = self.opt_bool("basalt_write_group")?;
        let journal_sync_bytes = self.size("basalt_journal_sync_bytes")?;
        let journal_fsync_bytes = self.size_or_zero("basalt_journal_fsync_bytes")?;
        let background_nice = match self.get("basalt_background_nice") {
            None => None,
            Some(Term::Int(n)) if (0..=19).contains(n) => Some(*n as i32),
            Some(_) => {
                return Err(self.invalid("basalt_background_nice", "expected an integer in 0..=19"))
            }
        };
        let ledger_sync_bytes = self.size_or_zero("basalt_ledger_sync_bytes")?;
        let compaction_stream_bytes = self.size("basalt_compaction_stream_bytes")?;
        let compaction_read_bytes_per_sec = self.size_or_zero("basalt_compaction_read_pace")?;
        let remove_bytes_per_sec = self.size_or_zero("basalt_remove_pace")?;
        let journal_flush = match self.get("basalt_journal_flush").map(|t| t.as_atom()) {
            None => None,
            Some(Some("fsync")) => Some(basalt_backends::JournalFlush::Fsync),
            Some(Some("writeback")) => Some(basalt_backends::JournalFlush::Writeback),
            Some(_) => {
                return Err(self.invalid("basalt_journal_flush", "expected fsync or writeback"))
            }
        };
        let block_cache_bytes = self.size_or_zero("basalt_block_cache")?;
        let value_cache_bytes = self.size_or_zero("basalt_value_cache")?;
        let journal_direct_reads = self.opt_bool("basalt_journal_direct_reads")?;
        let memtable_bytes = self.size("basalt_memtable_bytes")?;
        let l0_merge_trigger = self.opt_count("basalt_l0_merge_trigger")?;
        let l1_files = self.opt_count("basalt_l1_files")?;
        let rocksdb = self.rocks_tuning()?;
        let net = match driver {
            DriverKind::RiakcPb => Some(NetOptions::RiakcPb(self.pb_options()?)),
            DriverKind::Nhs => Some(NetOptions::Nhs(self.nhs_options(&operations)?)),
            DriverKind::HttpRaw => Some(NetOptions::HttpRaw(self.http_options()?)),
            DriverKind::Embedded | DriverKind::Null => None,
        };
        let has_query = operations.iter().any(|o| o.op == OpKind::IndexQuery);
        let index_terms = self.int("basalt_index_terms", i64::from(has_query), 0)? as usize;
        if key_generator.is_finite() && duration.is_none() {
            // Fine: the run ends when every worker's keys run out.
        } else if duration.is_none() {
            warnings.push("duration infinity with an endless key generator: the run stops only when interrupted".into());
        }
        if matches!(key_generator, KeyGenSpec::SequentialInt(_)) && concurrent > 1 {
            warnings.push(
                "sequential_int gives every worker the same keys; partitioned_sequential_int splits them"
                    .into(),
            );
        }
        Ok((
            BenchConfig {
                mode,
                rate_mode,
                duration,
                report_interval,
                concurrent,
                driver,
                operations,
                key_generator,
                value_generator,
                value_source_size,
                rng_seed,
                shutdown_on_error,
                backend,
                data_dir,
                stores,
                sync,
                bucket,
                keep_data,
                index_terms,
                memory_limit,
                compaction_runs_per_day,
                compaction_max_garbage_pct,
                compaction_punch,
                disk_min_free_pct,
                journal_slowdown_garbage_pct,
                journal_one_read,
                journal_fadvise_random,
                journal_skip_active_lock,
                journal_preallocate,
                journal_release_written,
                value_cache_refresh,
                write_group,
                journal_sync_bytes,
                journal_fsync_bytes,
                ledger_sync_bytes,
                background_nice,
                compaction_stream_bytes,
                compaction_read_bytes_per_sec,
                remove_bytes_per_sec,
                journal_flush,
                block_cache_bytes,
                value_cache_bytes,
                journal_direct_reads,
                memtable_bytes,
                l0_merge_trigger,
                l1_files,
                rocksdb,
                net,
                files: self.files.clone(),
            },
            warnings,
        ))
    }

    /// `basalt_duration_secs`, else `duration` in minutes or `infinity`
    /// (`None`); 5 minutes by default.
    fn duration(&self) -> Result<Option<Duration>, ConfigError> {
        Ok(
            match (self.get("basalt_duration_secs"), self.get("duration")) {
                (Some(t), _) => match t.as_number() {
                    Some(s) if s > 0.0 && s.is_finite() => Some(Duration::from_secs_f64(s)),
                    _ => {
                        return Err(self.invalid(
                            "basalt_duration_secs",
                            "expected a positive number of seconds",
                        ))
                    }
                },
                (None, None) => Some(Duration::from_secs(5 * 60)),
                (None, Some(Term::Atom(a))) if a == "infinity" => None,
                (None, Some(t)) => match t.as_number() {
                    Some(m) if m > 0.0 && m.is_finite() => Some(Duration::from_secs_f64(m * 60.0)),
                    _ => {
                        return Err(self.invalid(
                            "duration",
                            format!("expected minutes (a positive number) or infinity, got {t}"),
                        ))
                    }
                },
            },
        )
    }

    /// `report_interval` in seconds (10 by default).
    fn report_interval(&self) -> Result<Duration, ConfigError> {
        Ok(match self.get("report_interval") {
            None => Duration::from_secs(10),
            Some(t) => match t.as_number() {
                Some(s) if s > 0.0 && s.is_finite() => Duration::from_secs_f64(s),
                _ => {
                    return Err(
                        self.invalid("report_interval", format!("expected seconds > 0, got {t}"))
                    )
                }
            },
        })
    }

    /// `driver`, with or without basho_bench's `basho_bench_driver_` prefix.
    fn driver(&self) -> Result<DriverKind, ConfigError> {
        Ok(match self.get("driver") {
            None => DriverKind::Embedded,
            Some(t) => {
                let name = t.as_atom().unwrap_or_default();
                match name.strip_prefix("basho_bench_driver_").unwrap_or(name) {
                    "basalt_embedded" => DriverKind::Embedded,
                    "null" => DriverKind::Null,
                    "riakc_pb" => DriverKind::RiakcPb,
                    "nhs" => DriverKind::Nhs,
                    "http_raw" => DriverKind::HttpRaw,
                    _ => {
                        return Err(self.invalid(
                            "driver",
                            format!("unknown driver {t}; valid: {}", VALID_DRIVERS.join(", ")),
                        ))
                    }
                }
            }
        })
    }

    /// `rng_seed`: `{A, B, C}` or `now`.
    fn rng_seed(&self) -> Result<RngSeed, ConfigError> {
        Ok(match self.get("rng_seed") {
            None => RngSeed::Fixed(42, 23, 12),
            Some(Term::Atom(a)) if a == "now" => RngSeed::Now,
            Some(Term::Tuple(v)) => match v.as_slice() {
                [Term::Int(a), Term::Int(b), Term::Int(c)] => RngSeed::Fixed(*a, *b, *c),
                _ => return Err(self.invalid("rng_seed", "expected {A, B, C} or now")),
            },
            Some(_) => return Err(self.invalid("rng_seed", "expected {A, B, C} or now")),
        })
    }

    /// `basalt_memory_limit`: a size such as `"1.5G"` or a byte count.
    fn memory_limit(&self) -> Result<Option<u64>, ConfigError> {
        Ok(match self.get("basalt_memory_limit") {
            None => None,
            Some(Term::Int(n)) if *n > 0 => Some(*n as u64),
            Some(t) => match t.as_text() {
                Some(text) => Some(
                    crate::memlimit::parse_size(&text)
                        .map_err(|e| self.invalid("basalt_memory_limit", e.to_string()))?,
                ),
                None => {
                    return Err(self.invalid(
                        "basalt_memory_limit",
                        format!("expected a size such as \"1.5G\" or a byte count, got {t}"),
                    ))
                }
            },
        })
    }

    /// A percentage 0..=100 that is `None` when not given (the store's
    /// default, `default` here only for `int`'s message).
    fn pct(&self, key: &str, default: i64) -> Result<Option<f64>, ConfigError> {
        Ok(match self.get(key) {
            None => None,
            Some(_) => {
                let n = self.int(key, default, 0)?;
                if n > 100 {
                    return Err(self.invalid(key, format!("expected a percentage 0..100, got {n}")));
                }
                Some(n as f64)
            }
        })
    }

    /// A percentage 0..=100 that may have a fraction, `None` when not given.
    fn fraction_pct(&self, key: &str) -> Result<Option<f64>, ConfigError> {
        let Some(t) = self.get(key) else {
            return Ok(None);
        };
        match t.as_number() {
            Some(p) if (0.0..=100.0).contains(&p) => Ok(Some(p)),
            _ => Err(self.invalid(key, "expected a percentage 0..100 (a fraction is allowed)")),
        }
    }

    /// A boolean that is `None` when not given (the store's default).
    fn opt_bool(&self, key: &str) -> Result<Option<bool>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(_) => self.bool(key, true).map(Some),
        }
    }

    /// A count of at least 1, or `None` when not given.
    fn opt_count(&self, key: &str) -> Result<Option<usize>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(_) => Ok(Some(self.int(key, 1, 1)? as usize)),
        }
    }

    /// [`RawConfig::size`], where a plain `0` is allowed too (it turns the
    /// setting off).
    fn size_or_zero(&self, key: &str) -> Result<Option<u64>, ConfigError> {
        match self.get(key) {
            Some(Term::Int(0)) => Ok(Some(0)),
            _ => self.size(key),
        }
    }

    /// A size given as text (`"32M"`) or a byte count.
    fn size(&self, key: &str) -> Result<Option<u64>, ConfigError> {
        match self.get(key) {
            None => Ok(None),
            Some(Term::Int(n)) if *n > 0 => Ok(Some(*n as u64)),
            Some(t) => match t.as_text() {
                Some(text) => crate::memlimit::parse_size(&text)
                    .map(Some)
                    .map_err(|e| self.invalid(key, e.to_string())),
                None => Err(self.invalid(key, format!("expected a size such as \"32M\", got {t}"))),
            },
        }
    }

    fn rocks_tuning(&self) -> Result<basalt_backends::RocksTuning, ConfigError> {
        let mut t = basalt_backends::RocksTuning {
            block_cache_bytes: self.size("basalt_rocksdb_block_cache")?,
            ..Default::default()
        };
        if let Some(b) = self.size("basalt_rocksdb_write_buffer")? {
            t.write_buffer_bytes = b;
        }
        if let Some(c) = self.get("basalt_rocksdb_compression") {
            t.compression = c
                .as_atom()
                .and_then(basalt_backends::RocksCompression::parse)
                .ok_or_else(|| {
                    self.invalid(
                        "basalt_rocksdb_compression",
                        format!("expected none, lz4, snappy or zstd, got {c}"),
                    )
                })?;
        }
        t.bloom_bits_per_key = self.int("basalt_rocksdb_bloom_bits", 10, 0)? as f64;
        t.dynamic_level_bytes = self.bool("basalt_rocksdb_dynamic_level_bytes", true)?;
        t.lower_compaction_priority = self.bool("basalt_rocksdb_lower_priority", true)?;
        Ok(t)
    }

    fn parse_ops(&self, t: &Term, driver: DriverKind) -> Result<Vec<OpSpec>, ConfigError> {
        let Term::List(items) = t else {
            return Err(self.invalid("operations", "expected a list of {Op, Weight}"));
        };
        let valid = driver.valid_ops();
        let mut out = Vec::new();
        for item in items {
            let (label, name, weight) = match item {
                Term::Tuple(v) => match v.as_slice() {
                    [Term::Atom(o), w] => (o.clone(), o.as_str(), w),
                    [l, Term::Atom(o), w] => {
                        let label = match l {
                            Term::Tuple(parts) => parts
                                .iter()
                                .map(|p| p.as_text().unwrap_or_else(|| p.to_string()))
                                .collect::<Vec<_>>()
                                .join("-"),
                            other => other.as_text().unwrap_or_else(|| other.to_string()),
                        };
                        (label, o.as_str(), w)
                    }
                    _ => {
                        return Err(self.invalid(
                            "operations",
                            format!("expected {{Op, Weight}} or {{Label, Op, Weight}}, got {item}"),
                        ))
                    }
                },
                _ => {
                    return Err(
                        self.invalid("operations", format!("expected {{Op, Weight}}, got {item}"))
                    )
                }
            };
            let kind = OpKind::ALL
                .iter()
                .find(|(n, _)| *n == name)
                .map(|(_, k)| *k)
                .filter(|_| valid.contains(&name))
                .ok_or_else(|| {
                    self.invalid(
                        "operations",
                        format!("unknown operation {name}; valid: {}", valid.join(", ")),
                    )
                })?;
            let weight = weight
                .as_int()
                .filter(|w| (0..=u32::MAX as i64).contains(w))
                .ok_or_else(|| self.invalid("operations", format!("bad weight in {item}")))?;
            if weight > 0 {
                out.push(OpSpec {
                    label,
                    op: kind,
                    weight: weight as u32,
                });
            }
        }
        if out.is_empty() {
            return Err(self.invalid("operations", "no operation with a weight above 0"));
        }
        let mut labels: Vec<String> = out.iter().map(OpSpec::file_label).collect();
        labels.sort();
        labels.dedup();
        if labels.len() != out.len() {
            return Err(self.invalid(
                "operations",
                "two operations share a label; use {Label, Op, Weight} to tell them apart",
            ));
        }
        Ok(out)
    }
}

fn op(name: &str, op: OpKind, weight: u32) -> OpSpec {
    OpSpec {
        label: name.into(),
        op,
        weight,
    }
}

fn parse_mode(t: &Term) -> Option<Mode> {
    match t {
        Term::Atom(a) if a == "max" => Some(Mode::Max),
        Term::Tuple(v) => match v.as_slice() {
            [Term::Atom(r), Term::Atom(m)] if r == "rate" && m == "max" => Some(Mode::Max),
            [Term::Atom(r), n] if r == "rate" => n
                .as_number()
                .filter(|n| *n > 0.0 && n.is_finite())
                .map(Mode::Rate),
            _ => None,
        },
        _ => None,
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_basho_bench() {
        let (c, w) = BenchConfig::from_text("").expect("ok");
        assert_eq!(c.mode, Mode::Rate(5.0));
        assert_eq!(c.duration, Some(Duration::from_secs(300)));
        assert_eq!(c.report_interval, Duration::from_secs(10));
        assert_eq!(c.concurrent, 3);
        assert_eq!(c.operations.len(), 3);
        assert_eq!(
            c.key_generator,
            KeyGenSpec::UniformInt {
                start: 1,
                n: 100_000
            }
        );
        assert_eq!(c.value_generator, ValGenSpec::FixedBin(100));
        assert_eq!(c.rng_seed, RngSeed::Fixed(42, 23, 12));
        assert!(!c.shutdown_on_error);
        assert!(w.is_empty());
    }

    #[test]
    fn disk_min_free_pct_takes_a_fraction_and_refuses_the_rest() {
        let (c, w) = BenchConfig::from_text("{basalt_disk_min_free_pct, 0.25}.").expect("ok");
        assert_eq!(c.disk_min_free_pct, Some(0.25));
        assert!(w.is_empty(), "{w:?}");
        let (c, _) = BenchConfig::from_text("{basalt_disk_min_free_pct, 3}.").expect("ok");
        assert_eq!(c.disk_min_free_pct, Some(3.0));
        assert_eq!(
            BenchConfig::from_text("").expect("ok").0.disk_min_free_pct,
            None
        );
        for bad in ["101", "100.5", "full"] {
            let e = BenchConfig::from_text(&format!("{{basalt_disk_min_free_pct, {bad}}}."))
                .expect_err(bad);
            assert!(e.to_string().contains("basalt_disk_min_free_pct"), "{e}");
        }
    }

    #[test]
    fn later_text_overrides_and_unknown_warns() {
        let mut raw = RawConfig::default();
        raw.add_text("{mode, max}.\n{concurrent, 8}.\n{frobnicate, 1}.", "a")
            .expect("ok");
        raw.add_text(
            "{concurrent, 2}.\n{mode, {rate, max}}.\n{log_level, info}.",
            "b",
        )
        .expect("ok");
        let (c, w) = raw.build().expect("ok");
        assert_eq!(c.concurrent, 2);
        assert_eq!(c.mode, Mode::Max);
        assert_eq!(w.len(), 1);
        assert!(w[0].contains("frobnicate"), "{w:?}");
    }

    #[test]
    fn bad_values_name_the_key_and_line() {
        let e = BenchConfig::from_text("{mode, max}.\n{concurrent, zero}.").expect_err("bad");
        let s = e.to_string();
        assert!(s.contains("concurrent") && s.contains("<text>:2"), "{s}");
        let e = BenchConfig::from_text("{driver, basho_bench_driver_http}.").expect_err("bad");
        assert!(
            e.to_string()
                .contains("valid: basalt_embedded, null, riakc_pb"),
            "{e}"
        );
        let e = BenchConfig::from_text("{operations, [{get, 1}, {frob, 2}]}.").expect_err("bad");
        assert!(e.to_string().contains("valid: get, put, update"), "{e}");
        let e = BenchConfig::from_text("{basalt_backend, leveldb}.").expect_err("bad");
        assert!(
            e.to_string()
                .contains("unknown backend leveldb; valid: leveled, bitcask"),
            "{e}"
        );
    }

    /// The ledger's shape: sizes and counts parse, a count of 0 names its key.
    #[test]
    fn ledger_shape_options() {
        let text = "{basalt_memtable_bytes, \"16M\"}.\n{basalt_l0_merge_trigger, 8}.\n{basalt_l1_files, 4}.";
        let (c, _) = BenchConfig::from_text(text).expect("ok");
        assert_eq!(
            (c.memtable_bytes, c.l0_merge_trigger, c.l1_files),
            (Some(16 << 20), Some(8), Some(4))
        );
        let (c, _) = BenchConfig::from_text("").expect("ok");
        assert_eq!(
            (c.memtable_bytes, c.l0_merge_trigger, c.l1_files),
            (None, None, None)
        );
        for key in ["basalt_l0_merge_trigger", "basalt_l1_files"] {
            let e = BenchConfig::from_text(&format!("{{{key}, 0}}.")).expect_err("zero");
            assert!(e.to_string().contains(key), "{e}");
        }
    }

    /// The flusher mode and the compaction read pace: good values parse,
    /// 0 means unpaced, and bad ones name their key.
    #[test]
    fn journal_flush_and_read_pace() {
        use basalt_backends::JournalFlush;
        for (flush, pace, want_flush, want_pace) in [
            ("fsync", "\"64M\"", JournalFlush::Fsync, 64 << 20),
            ("writeback", "0", JournalFlush::Writeback, 0),
        ] {
            let text = format!(
                "{{basalt_journal_flush, {flush}}}.\n{{basalt_compaction_read_pace, {pace}}}."
            );
            let (c, _) = BenchConfig::from_text(&text).expect("ok");
            assert_eq!(c.journal_flush, Some(want_flush), "{text}");
            assert_eq!(c.compaction_read_bytes_per_sec, Some(want_pace), "{text}");
        }
        let (c, _) = BenchConfig::from_text("").expect("ok");
        assert_eq!(c.journal_flush, None);
        assert_eq!(c.compaction_read_bytes_per_sec, None);
        assert_eq!(c.journal_fsync_bytes, None);
        for (text, want) in [
            ("{basalt_journal_fsync_bytes, \"16M\"}.", 16 << 20),
            ("{basalt_journal_fsync_bytes, 0}.", 0),
        ] {
            let (c, _) = BenchConfig::from_text(text).expect("ok");
            assert_eq!(c.journal_fsync_bytes, Some(want), "{text}");
        }
        let err = BenchConfig::from_text("{basalt_journal_fsync_bytes, \"lots\"}.").unwrap_err();
        assert!(
            err.to_string().contains("basalt_journal_fsync_bytes"),
            "{err}"
        );
        for (text, key) in [
            ("{basalt_journal_flush, fdatasync}.", "basalt_journal_flush"),
            ("{basalt_journal_flush, 1}.", "basalt_journal_flush"),
            (
                "{basalt_compaction_read_pace, \"fast\"}.",
                "basalt_compaction_read_pace",
            ),
            (
                "{basalt_compaction_read_pace, -5}.",
                "basalt_compaction_read_pace",
            ),
        ] {
            let e = BenchConfig::from_text(text).expect_err(text);
            assert!(e.to_string().contains(key), "{text}: {e}");
        }
    }

    #[test]
    fn labels_and_durations() {
        let (c, _) = BenchConfig::from_text(
            "{operations, [{index_query, 1}, {{my, get}, get, 2}]}.\n{duration, 0.05}.\n{basalt_rate_mode, open_loop}.\n{mode, {rate, 20}}.",
        )
        .expect("ok");
        assert_eq!(c.operations[0].file_label(), "index-query");
        assert_eq!(c.operations[1].label, "my-get");
        assert_eq!(c.duration, Some(Duration::from_secs(3)));
        assert_eq!(c.index_terms, 1);
        assert_eq!(c.rate_mode, RateMode::OpenLoop);
        assert_eq!(c.target_rate(), Some(60.0));
        let (c, _) = BenchConfig::from_text("{duration, infinity}.\n{basalt_duration_secs, 2}.")
            .expect("ok");
        assert_eq!(c.duration, Some(Duration::from_secs(2)));
    }

    #[test]
    fn worker_seeds_differ_and_repeat() {
        let s = RngSeed::Fixed(42, 23, 12);
        assert_eq!(s.for_worker(1), s.for_worker(1));
        assert_ne!(s.for_worker(1), s.for_worker(2));
    }
}
