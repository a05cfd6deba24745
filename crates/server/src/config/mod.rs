//! Node configuration (TOML), plain data per section (`[repl]` in [`repl`]).
//! [`DEFAULT_CONFIG`] (`default.toml`) is the documented default
//! file printed by `basalt start --print-default-config`.

mod repl;

pub use repl::{FullSyncConfig, ReplConfig, SinkConfig};

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Largest `block_cache_mb` and `value_cache_mb` accepted (64 GiB): a typo
/// of a few digits would otherwise reserve a cache's tables for a size no
/// node has.
pub const CACHE_MB_MAX: u64 = 65_536;

/// Range of `journal_file_mb` accepted: a file must hold a few records and
/// a whole file's index is read into memory when it is opened.
pub const JOURNAL_FILE_MB_RANGE: std::ops::RangeInclusive<u64> = 1..=4096;

/// Range of `journal_compactions_at_once` accepted (the engine clamps to
/// `COMPACTION_SLOTS_MAX` too).
pub const JOURNAL_COMPACTIONS_RANGE: std::ops::RangeInclusive<usize> =
    1..=basalt_backends::COMPACTION_SLOTS_MAX;

/// Range of `journal_max_garbage_pct` accepted: below 10 % the trigger
/// would copy nearly live files over and over; 100 turns it off.
pub const JOURNAL_MAX_GARBAGE_PCT_RANGE: std::ops::RangeInclusive<u32> = 10..=100;

/// Range of `journal_file_spread_pct` accepted: at 50 the smallest file is
/// a third of the largest.
pub const JOURNAL_FILE_SPREAD_PCT_RANGE: std::ops::RangeInclusive<u32> = 0..=50;

/// Range of `runtime_threads` accepted (0: one a CPU).
pub const RUNTIME_THREADS_RANGE: std::ops::RangeInclusive<usize> = 0..=256;

/// Range of `l0_merge_trigger` accepted: below the engine's level-0 stall
/// (`l0_stall_files`, 16), where writes would stop before a merge starts.
pub const L0_MERGE_TRIGGER_RANGE: std::ops::RangeInclusive<usize> = 1..=15;

/// Range of `read_threads` accepted (0: reads wait in the vnodes' queues).
pub const READ_THREADS_RANGE: std::ops::RangeInclusive<usize> = 0..=256;

/// `Ok` if `value` of `key` is in `range`, else the error naming both.
fn in_range<T: PartialOrd + std::fmt::Display>(
    key: &str,
    range: &std::ops::RangeInclusive<T>,
    value: T,
) -> Result<(), ConfigError> {
    if range.contains(&value) {
        return Ok(());
    }
    Err(ConfigError(format!(
        "{key} must be in {}..={}, got {value}",
        range.start(),
        range.end()
    )))
}

/// The default configuration file, with comments.
pub const DEFAULT_CONFIG: &str = include_str!("default.toml");

/// Size and queue limits.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Largest PB frame.
    pub max_frame_bytes: usize,
    /// Largest object.
    pub max_object_bytes: usize,
    /// Warn above this object size.
    pub warn_object_bytes: usize,
    /// Bounded queue length of each vnode.
    pub vnode_queue_len: usize,
    /// Vnode request timeout.
    pub request_timeout_ms: u64,
    /// Above this many MiB of replica writes in flight on the node, a PUT
    /// that met its quorum waits until they fall back under it or its own
    /// replicas have answered (0: every PUT waits for its replicas).
    pub replica_writes_in_flight_mb: u64,
    /// Extra wait of a GET whose quorum answered only "not found".
    pub notfound_wait_ms: u64,
    /// Time allowed to send a request's headers over HTTP.
    pub http_header_timeout_ms: u64,
    /// HTTP connections served at once.
    pub http_max_connections: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_frame_bytes: crate::pb::DEFAULT_MAX_FRAME,
            max_object_bytes: 50 * 1024 * 1024,
            warn_object_bytes: 5 * 1024 * 1024,
            vnode_queue_len: 1000,
            request_timeout_ms: 60_000,
            replica_writes_in_flight_mb: 64,
            notfound_wait_ms: 1000,
            http_header_timeout_ms: 10_000,
            http_max_connections: 1024,
        }
    }
}

/// A node's configuration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Config {
    /// Node name.
    pub node_name: String,
    /// Data directory.
    pub data_dir: PathBuf,
    /// PB listen address.
    pub pb_listen: String,
    /// PB address advertised to the cluster; empty = the bound address.
    pub advertise_pb: String,
    /// HTTP listen address; empty = no HTTP listener.
    pub http_listen: String,
    /// Cluster and admin listen address.
    pub cluster_listen: String,
    /// Cluster address advertised to the cluster; empty = the bound address.
    pub advertise_cluster: String,
    /// PEM certificate chain of the PB listener's TLS ("" = none).
    pub tls_certfile: String,
    /// PEM private key of `tls_certfile`.
    pub tls_keyfile: String,
    /// PEM CA certificates that client certificates must chain to ("" =
    /// client certificates not asked for).
    pub tls_cacertfile: String,
    /// HTTPS listen address; empty = none.
    pub https_listen: String,
    /// PEM certificate chain of the cluster port's mutual TLS ("" = plain).
    pub cluster_certfile: String,
    /// PEM private key of `cluster_certfile`.
    pub cluster_keyfile: String,
    /// PEM certificates of the cluster CA.
    pub cluster_cacertfile: String,
    /// Ring partitions.
    pub ring_size: u32,
    /// Backend name.
    pub backend: String,
    /// Sync writes.
    pub sync: bool,
    /// MiB of the leveled ledger block cache shared by this node's vnodes
    /// (0 = none).
    pub block_cache_mb: u64,
    /// MiB of the leveled journal value cache shared by this node's vnodes
    /// (0 = none); with a cache, value reads bypass the page cache.
    pub value_cache_mb: u64,
    /// MiB the leveled memtables of all this node's vnodes may hold
    /// together (0 = no node-wide bound: each vnode's up to
    /// `router::VNODE_MEMTABLE_BYTES`, more while flushes run).
    pub memtable_mb: u64,
    /// MiB at which each leveled vnode's active journal file is closed and
    /// a new one started. A vnode's journal compacts closed files only, so
    /// each vnode holds up to about five files' worth before garbage is
    /// reclaimed (`docs/server.md` "What a node's disk holds").
    pub journal_file_mb: u64,
    /// Journal compaction runs this node's leveled vnodes make at once in
    /// the background; the others wait, the vnode most over its garbage
    /// limit first (engine `compaction::slots`).
    pub journal_compactions_at_once: usize,
    /// Percentage of garbage in a leveled vnode's closed journal files
    /// over which its garbage trigger compacts (engine
    /// `compaction_max_garbage_pct`); 100 turns the trigger, and the write
    /// slowdown behind it, off (scheduled runs only).
    pub journal_max_garbage_pct: u32,
    /// Level-0 files at which each leveled vnode's ledger merges them into
    /// level 1 (engine `l0_merge_trigger`). Higher: fewer merges and less
    /// ledger writing (each merge rewrites the level-1 files its keys
    /// overlap), but a GET may probe more level-0 files.
    pub l0_merge_trigger: usize,
    /// Percent by which a vnode's journal file size is moved from
    /// `journal_file_mb`, either way, fixed by its partition
    /// ([`Config::vnode_journal_file_bytes`]), so that under a uniform load
    /// the node's vnodes do not roll their files, and compact, together.
    pub journal_file_spread_pct: u32,
    /// Answer a HEAD or GET that the backend can serve from memory on the
    /// request's own task instead of the vnode's worker thread (leveled
    /// and memory; other backends always use the worker).
    pub reads_in_request_task: bool,
    /// Make a PUT's coordinate step or a replica's reconcile on the
    /// request's own task, in the vnode's write turn, when the backend can
    /// make it at memory speed (the local version in memory; no sync, no
    /// back-pressure or pacing in force; leveled and memory); anything
    /// else is queued to the vnode as always.
    pub writes_in_request_task: bool,
    /// Threads of the node's async runtime, which serve the PB, HTTP and
    /// cluster connections and the requests' own tasks (0: one a CPU;
    /// Riak's `erlang.schedulers.total`). The vnodes' workers and the
    /// stores' background work have threads of their own beside these.
    pub runtime_threads: usize,
    /// Threads a node reads from disk on beside its vnodes' workers: a
    /// HEAD or GET the backend cannot answer from memory runs on one of
    /// them instead of in its vnode's queue, behind the vnode's writes;
    /// when all are busy it queues as before (0: always queued).
    pub read_threads: usize,
    /// Tombstone reaping after a delete.
    pub delete_mode: DeleteMode,
    /// Seconds between anti-entropy rounds (0 = off).
    pub aae_interval_secs: u64,
    /// Size of the cached anti-entropy trees (`xxsmall` .. `xlarge`).
    pub aae_tree_size: String,
    /// Pause before an exchange confirms its dirty branches (0 = none).
    pub aae_confirm_ms: u64,
    /// Seconds between scheduled rebuilds of a vnode's trees.
    pub aae_rebuild_wait_secs: u64,
    /// Extra delay per vnode and rebuild, drawn in `0..this` seconds.
    pub aae_rebuild_delay_secs: u64,
    /// Keys a rebuild reads per second (0 = unlimited).
    pub aae_rebuild_keys_per_sec: u64,
    /// Rebuilds leave out keys whose value is not in the journal.
    pub aae_rebuild_journal_check: bool,
    /// Anti-entropy read repairs per second, node-wide (0 = unlimited).
    pub aae_repairs_per_sec: u64,
    /// Follow-up loops an exchange may run when it hit its caps (0 = none).
    pub aae_max_loops: u32,
    /// Handoffs run at once (0 = paused).
    pub transfer_limit: usize,
    /// A directory of `basalt bench` results the console lists and serves
    /// read-only (`""` = none).
    pub bench_results_dir: String,
    /// How log lines are written (read by the `basalt` binary, which sets
    /// up logging).
    pub log_format: LogFormat,
    /// Replication to another cluster.
    pub repl: ReplConfig,
    /// MapReduce, JavaScript VMs and commit hooks.
    pub mapred: MapRedConfig,
    /// Limits.
    pub limits: Limits,
}

/// The `[mapred]` section: MapReduce, the JavaScript VM pools and commit
/// hooks; see the default config's comments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct MapRedConfig {
    /// VMs running JavaScript map phases.
    pub map_js_vm_count: usize,
    /// VMs running JavaScript reduce phases.
    pub reduce_js_vm_count: usize,
    /// VMs running JavaScript commit hooks.
    pub hook_js_vm_count: usize,
    /// Heap limit of each VM, MiB.
    pub js_max_vm_mem_mb: usize,
    /// Stack limit of each VM, KiB.
    pub js_max_stack_kb: usize,
    /// Calls waiting per pool.
    pub js_queue_len: usize,
    /// Directory of `.js` files loaded into every VM ("" = none).
    pub js_source_dir: String,
    /// Objects and keys a job may read.
    pub max_inputs: u64,
    /// Whole-bucket inputs allowed.
    pub allow_bucket_inputs: bool,
    /// Kept results of a job, JSON bytes.
    pub max_result_bytes: usize,
    /// Time a commit hook may take, ms.
    pub hook_timeout_ms: u64,
    /// Limit of the built-in `basalt_hooks:max_object_size` hook, bytes.
    pub hook_max_object_bytes: usize,
}

impl Default for MapRedConfig {
    fn default() -> Self {
        MapRedConfig {
            map_js_vm_count: 8,
            reduce_js_vm_count: 6,
            hook_js_vm_count: 16,
            js_max_vm_mem_mb: 16,
            js_max_stack_kb: 1024,
            js_queue_len: 1024,
            js_source_dir: String::new(),
            max_inputs: 100_000,
            allow_bucket_inputs: true,
            max_result_bytes: 64 << 20,
            hook_timeout_ms: 5000,
            hook_max_object_bytes: 5 << 20,
        }
    }
}

impl MapRedConfig {
    fn validate(&self) -> Result<(), ConfigError> {
        let counts = [
            ("map_js_vm_count", self.map_js_vm_count),
            ("reduce_js_vm_count", self.reduce_js_vm_count),
            ("hook_js_vm_count", self.hook_js_vm_count),
        ];
        for (name, n) in counts {
            if !(1..=256).contains(&n) {
                return Err(ConfigError(format!(
                    "mapred.{name} must be in 1..=256, got {n}"
                )));
            }
        }
        if !(1..=4096).contains(&self.js_max_vm_mem_mb) {
            return Err(ConfigError(
                "mapred.js_max_vm_mem_mb must be in 1..=4096".into(),
            ));
        }
        if !(64..=65_536).contains(&self.js_max_stack_kb) {
            return Err(ConfigError(
                "mapred.js_max_stack_kb must be in 64..=65536".into(),
            ));
        }
        if self.js_queue_len == 0 || self.hook_timeout_ms == 0 || self.max_result_bytes == 0 {
            return Err(ConfigError(
                "mapred.js_queue_len, hook_timeout_ms and max_result_bytes must be at least 1"
                    .into(),
            ));
        }
        Ok(())
    }
}

/// The form of the node's log lines on stderr.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// One human-readable line per event.
    #[default]
    Text,
    /// One JSON object per line.
    Json,
}

/// Riak's `delete_mode`: what happens to a tombstone once all `n` replicas
/// hold it. In TOML: a number of milliseconds, `"immediate"` or `"keep"`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "DeleteModeRepr", into = "DeleteModeRepr")]
pub enum DeleteMode {
    /// Never reap.
    Keep,
    /// Reap at once.
    Immediate,
    /// Reap after this many milliseconds.
    DelayMs(u64),
}

impl DeleteMode {
    /// Riak's default: 3 s.
    pub const DEFAULT: DeleteMode = DeleteMode::DelayMs(3000);

    /// The delay before reaping; `None` for `keep`.
    pub fn delay(self) -> Option<std::time::Duration> {
        match self {
            DeleteMode::Keep => None,
            DeleteMode::Immediate => Some(std::time::Duration::ZERO),
            DeleteMode::DelayMs(ms) => Some(std::time::Duration::from_millis(ms)),
        }
    }
}

impl Default for DeleteMode {
    fn default() -> Self {
        DeleteMode::DEFAULT
    }
}

/// The TOML form of [`DeleteMode`].
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
enum DeleteModeRepr {
    Ms(u64),
    Word(String),
}

impl TryFrom<DeleteModeRepr> for DeleteMode {
    type Error = String;
    fn try_from(r: DeleteModeRepr) -> Result<Self, String> {
        match r {
            DeleteModeRepr::Ms(ms) => Ok(DeleteMode::DelayMs(ms)),
            DeleteModeRepr::Word(w) => match w.as_str() {
                "keep" => Ok(DeleteMode::Keep),
                "immediate" => Ok(DeleteMode::Immediate),
                other => Err(format!(
                    "delete_mode must be a number of milliseconds, \"immediate\" or \"keep\", got {other:?}"
                )),
            },
        }
    }
}

impl From<DeleteMode> for DeleteModeRepr {
    fn from(m: DeleteMode) -> Self {
        match m {
            DeleteMode::Keep => DeleteModeRepr::Word("keep".into()),
            DeleteMode::Immediate => DeleteModeRepr::Word("immediate".into()),
            DeleteMode::DelayMs(ms) => DeleteModeRepr::Ms(ms),
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            node_name: "basalt@127.0.0.1".into(),
            data_dir: PathBuf::from("./data"),
            pb_listen: "127.0.0.1:8087".into(),
            advertise_pb: String::new(),
            http_listen: "127.0.0.1:8098".into(),
            cluster_listen: "127.0.0.1:8099".into(),
            advertise_cluster: String::new(),
            tls_certfile: String::new(),
            tls_keyfile: String::new(),
            tls_cacertfile: String::new(),
            cluster_certfile: String::new(),
            cluster_keyfile: String::new(),
            cluster_cacertfile: String::new(),
            https_listen: String::new(),
            ring_size: 64,
            backend: "leveled".into(),
            sync: false,
            block_cache_mb: 128,
            value_cache_mb: 0,
            memtable_mb: 128,
            journal_file_mb: 64,
            journal_compactions_at_once: 2,
            journal_max_garbage_pct: 60,
            journal_file_spread_pct: 25,
            reads_in_request_task: true,
            writes_in_request_task: true,
            runtime_threads: 0,
            l0_merge_trigger: 4,
            read_threads: 4,
            delete_mode: DeleteMode::DEFAULT,
            aae_interval_secs: 300,
            aae_tree_size: "xsmall".into(),
            aae_confirm_ms: 1000,
            aae_rebuild_wait_secs: 14 * 24 * 3600,
            aae_rebuild_delay_secs: 4 * 24 * 3600,
            aae_rebuild_keys_per_sec: 20_000,
            aae_rebuild_journal_check: true,
            aae_repairs_per_sec: 400,
            aae_max_loops: 4,
            transfer_limit: 2,
            bench_results_dir: String::new(),
            log_format: LogFormat::Text,
            repl: ReplConfig::default(),
            mapred: MapRedConfig::default(),
            limits: Limits::default(),
        }
    }
}

/// A configuration that cannot be used.
#[derive(Debug, thiserror::Error)]
#[error("config: {0}")]
pub struct ConfigError(pub String);

impl Config {
    /// Parses TOML (missing keys take their defaults) and validates it.
    pub fn from_toml(text: &str) -> Result<Config, ConfigError> {
        let c: Config = toml::from_str(text).map_err(|e| ConfigError(e.to_string()))?;
        c.validate()?;
        Ok(c)
    }

    /// Checks ranges.
    pub fn validate(&self) -> Result<(), ConfigError> {
        for (key, mb) in [
            ("block_cache_mb", self.block_cache_mb),
            ("value_cache_mb", self.value_cache_mb),
            ("memtable_mb", self.memtable_mb),
        ] {
            if mb > CACHE_MB_MAX {
                return Err(ConfigError(format!(
                    "{key} must be at most {CACHE_MB_MAX} (64 GiB), got {mb}"
                )));
            }
        }
        in_range(
            "journal_file_mb",
            &JOURNAL_FILE_MB_RANGE,
            self.journal_file_mb,
        )?;
        in_range(
            "runtime_threads",
            &RUNTIME_THREADS_RANGE,
            self.runtime_threads,
        )?;
        in_range("read_threads", &READ_THREADS_RANGE, self.read_threads)?;
        in_range(
            "l0_merge_trigger",
            &L0_MERGE_TRIGGER_RANGE,
            self.l0_merge_trigger,
        )?;
        in_range(
            "journal_compactions_at_once",
            &JOURNAL_COMPACTIONS_RANGE,
            self.journal_compactions_at_once,
        )?;
        in_range(
            "journal_max_garbage_pct",
            &JOURNAL_MAX_GARBAGE_PCT_RANGE,
            self.journal_max_garbage_pct,
        )?;
        in_range(
            "journal_file_spread_pct",
            &JOURNAL_FILE_SPREAD_PCT_RANGE,
            self.journal_file_spread_pct,
        )?;
        if crate::ring::Ring::new(self.ring_size).is_none() {
            return Err(ConfigError(format!(
                "ring_size must be a power of two in 1..=1024, got {}",
                self.ring_size
            )));
        }
        if self.limits.vnode_queue_len == 0 {
            return Err(ConfigError(
                "limits.vnode_queue_len must be at least 1".into(),
            ));
        }
        if self.limits.max_frame_bytes < 16 {
            return Err(ConfigError(
                "limits.max_frame_bytes must be at least 16".into(),
            ));
        }
        if self.cluster_listen.is_empty() {
            return Err(ConfigError(
                "cluster_listen must be set (the cluster and admin listener)".into(),
            ));
        }
        if self.node_name.is_empty() {
            return Err(ConfigError("node_name must not be empty".into()));
        }
        if self.tls_certfile.is_empty() != self.tls_keyfile.is_empty() {
            return Err(ConfigError(
                "tls_certfile and tls_keyfile go together: set both or neither".into(),
            ));
        }
        if self.tls_certfile.is_empty() && !self.https_listen.is_empty() {
            return Err(ConfigError(
                "https_listen needs tls_certfile and tls_keyfile".into(),
            ));
        }
        if self.tls_certfile.is_empty() && !self.tls_cacertfile.is_empty() {
            return Err(ConfigError(
                "tls_cacertfile needs tls_certfile and tls_keyfile".into(),
            ));
        }
        let cluster_tls = [
            &self.cluster_certfile,
            &self.cluster_keyfile,
            &self.cluster_cacertfile,
        ];
        if cluster_tls.iter().any(|f| f.is_empty()) && cluster_tls.iter().any(|f| !f.is_empty()) {
            return Err(ConfigError(
                "cluster_certfile, cluster_keyfile and cluster_cacertfile go together: set all three or none".into(),
            ));
        }
        self.repl.check_tls()?;
        self.aae_tree_size()?;
        if self.aae_rebuild_wait_secs == 0 {
            return Err(ConfigError(
                "aae_rebuild_wait_secs must be at least 1".into(),
            ));
        }
        if self.transfer_limit > crate::limits::MAX_TRANSFER_LIMIT {
            return Err(ConfigError(format!(
                "transfer_limit must be at most {}, got {}",
                crate::limits::MAX_TRANSFER_LIMIT,
                self.transfer_limit
            )));
        }
        self.repl.validate()?;
        self.mapred.validate()?;
        Ok(())
    }

    /// The parsed `aae_tree_size`.
    pub fn aae_tree_size(&self) -> Result<basalt_backend::TreeSize, ConfigError> {
        basalt_backend::TreeSize::from_name(&self.aae_tree_size).ok_or_else(|| {
            ConfigError(format!(
                "aae_tree_size must be one of xxsmall, xsmall, small, medium, large, xlarge; got {:?}",
                self.aae_tree_size
            ))
        })
    }

    /// The size at which partition `p`'s leveled journal rolls its file
    /// (engine `journal_file_bytes`): `journal_file_mb` moved by up to
    /// `journal_file_spread_pct` percent either way, at least 1 MiB. The
    /// move is the partition's place in a golden-ratio sequence, so the
    /// vnodes of any node (every k-th partition, or a run of them) get sizes
    /// spread evenly over the range, the same on every start. A node's
    /// vnodes take equal shares of the writes; with one size they rolled
    /// their files in the same minute, and the garbage trigger, which waits
    /// for four closed files, started every vnode's first compaction in the
    /// same minute too: Phase 4's 2i load on three nodes had 42–56 runs in
    /// the minute after 13 minutes and the rate fell to 0.7–0.75× for it
    /// (docs/benchmarks/2026-12-05-0105-cluster-8kb-2i-one-hour.md). What
    /// 25 % (the default) did to that wave:
    /// docs/benchmarks/2026-12-05-0450-vnode-compaction-spread.md.
    pub fn vnode_journal_file_bytes(&self, p: u32) -> u64 {
        const GOLDEN: f64 = 0.618_033_988_749_894_9;
        const MIB: f64 = 1024.0 * 1024.0;
        let base = self.journal_file_mb as f64 * MIB;
        let place = (f64::from(p) * GOLDEN).fract(); // in [0, 1)
        let moved = f64::from(self.journal_file_spread_pct) / 100.0 * (2.0 * place - 1.0);
        (base * (1.0 + moved)).max(MIB) as u64
    }
}

impl Config {
    /// One node for tests and tools, keeping its data in `dir`: PB and
    /// cluster ports chosen by the OS, no HTTP, 8 partitions, the memory
    /// backend; everything else the defaults.
    pub fn ephemeral(dir: &std::path::Path) -> Config {
        Config {
            data_dir: dir.to_path_buf(),
            pb_listen: "127.0.0.1:0".into(),
            cluster_listen: "127.0.0.1:0".into(),
            http_listen: String::new(),
            ring_size: 8,
            backend: "memory".into(),
            ..Config::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_file_is_the_default() {
        let c = Config::from_toml(DEFAULT_CONFIG).ok();
        assert_eq!(c, Some(Config::default()));
        assert!(Config::from_toml("ring_size = 6").is_err());
        assert!(Config::from_toml("block_cache_mb = 65537").is_err());
        assert!(Config::from_toml("block_cache_mb = 0").is_ok());
        let e = Config::from_toml("value_cache_mb = 65537").err();
        assert!(e.is_some_and(|e| e.0.contains("value_cache_mb must be at most 65536")));
        assert!(Config::from_toml("value_cache_mb = 512").is_ok());
        assert!(Config::from_toml("bogus = 1").is_err());
        let json = Config::from_toml("log_format = \"json\"").map(|c| c.log_format);
        assert_eq!(json.ok(), Some(LogFormat::Json));
        assert!(Config::from_toml("log_format = \"xml\"").is_err());
    }

    #[test]
    fn node_settings_with_a_range_are_bounded() {
        // (key, default, a value accepted, values refused, the range named)
        let cases = [
            ("journal_compactions_at_once", 2, 5, [0, 65], "1..=64"),
            ("journal_max_garbage_pct", 60, 100, [9, 101], "10..=100"),
            ("journal_file_spread_pct", 25, 0, [51, 100], "0..=50"),
            ("runtime_threads", 0, 1, [257, 1000], "0..=256"),
            ("read_threads", 4, 0, [257, 1000], "0..=256"),
            ("l0_merge_trigger", 4, 8, [0, 16], "1..=15"),
        ];
        for (key, default, ok, bad, range) in cases {
            let get = |t: &str| {
                Config::from_toml(t).map(|c| match key {
                    "journal_compactions_at_once" => c.journal_compactions_at_once as u64,
                    "journal_file_spread_pct" => u64::from(c.journal_file_spread_pct),
                    "runtime_threads" => c.runtime_threads as u64,
                    "read_threads" => c.read_threads as u64,
                    "l0_merge_trigger" => c.l0_merge_trigger as u64,
                    _ => u64::from(c.journal_max_garbage_pct),
                })
            };
            assert_eq!(get("").ok(), Some(default), "{key}");
            assert_eq!(get(&format!("{key} = {ok}")).ok(), Some(ok), "{key}");
            for v in bad {
                let want = format!("{key} must be in {range}, got {v}");
                let err = get(&format!("{key} = {v}")).err();
                assert!(err.is_some_and(|e| e.0.contains(&want)), "{key} = {v}");
            }
        }
    }

    #[test]
    fn vnode_journal_file_sizes_spread_evenly_around_the_node_size() {
        const MIB: f64 = 1024.0 * 1024.0;
        let sizes = |text: &str, ring: u32, nodes: u32, node: u32| {
            let c = Config::from_toml(text).expect("config");
            (0..ring)
                .filter(|p| p % nodes == node)
                .map(|p| c.vnode_journal_file_bytes(p) as f64 / MIB)
                .collect::<Vec<f64>>()
        };
        // 64 MiB +- 25 % (48..80), for each node of three on a ring of 64.
        for node in 0..3 {
            let l = sizes("journal_file_spread_pct = 25", 64, 3, node);
            let (min, max) = l
                .iter()
                .fold((f64::MAX, f64::MIN), |(a, b), &x| (a.min(x), b.max(x)));
            let mean = l.iter().sum::<f64>() / l.len() as f64;
            assert!(min >= 48.0 && max <= 80.0, "node {node}: {min}..{max}");
            assert!(
                min < 51.0 && max > 77.0,
                "node {node} not spread: {min}..{max}"
            );
            assert!((mean - 64.0).abs() < 1.5, "node {node}: mean {mean}");
            // Evenly: every fifth of the range holds some of the node's vnodes.
            for fifth in 0..5 {
                let lo = 48.0 + 6.4 * f64::from(fifth);
                assert!(
                    l.iter().any(|&x| x >= lo && x < lo + 6.4),
                    "node {node}: none in {lo}+6.4"
                );
            }
        }
        // The default spreads; 0 gives every vnode the node's size; never
        // below 1 MiB.
        let default = sizes("", 64, 3, 0);
        assert!(default.iter().any(|&x| x < 60.0), "{default:?}");
        let none = sizes("journal_file_spread_pct = 0", 64, 1, 0);
        assert!(none.iter().all(|&x| x == 64.0), "{none:?}");
        let tiny = sizes(
            "journal_file_mb = 1\njournal_file_spread_pct = 50",
            64,
            1,
            0,
        );
        assert!(tiny.iter().all(|&x| (1.0..=1.5).contains(&x)), "{tiny:?}");
        assert!(tiny.contains(&1.0), "held at 1 MiB: {tiny:?}");
    }

    #[test]
    fn journal_file_mb_is_bounded() {
        let size = |t: &str| Config::from_toml(t).map(|c| c.journal_file_mb);
        assert_eq!(size("journal_file_mb = 256").ok(), Some(256));
        assert_eq!(size("").ok(), Some(64));
        for bad in ["journal_file_mb = 0", "journal_file_mb = 4097"] {
            let e = size(bad).err();
            assert!(
                e.as_ref()
                    .is_some_and(|e| e.0.contains("journal_file_mb must be in 1..=4096")),
                "{bad}: {e:?}"
            );
        }
    }

    #[test]
    fn delete_mode_forms() {
        let mode = |t: &str| Config::from_toml(t).map(|c| c.delete_mode).ok();
        assert_eq!(mode("delete_mode = 250"), Some(DeleteMode::DelayMs(250)));
        assert_eq!(mode("delete_mode = \"keep\""), Some(DeleteMode::Keep));
        assert_eq!(
            mode("delete_mode = \"immediate\""),
            Some(DeleteMode::Immediate)
        );
        assert_eq!(mode(""), Some(DeleteMode::DelayMs(3000)));
        assert_eq!(mode("delete_mode = \"later\""), None);
        assert_eq!(mode("delete_mode = -1"), None);
        let c = Config {
            delete_mode: DeleteMode::Keep,
            ..Config::default()
        };
        let text = toml::to_string(&c).unwrap_or_default();
        assert_eq!(Config::from_toml(&text).ok(), Some(c));
    }
}
