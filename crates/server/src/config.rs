//! Node configuration (TOML). [`DEFAULT_CONFIG`] is the documented default
//! file printed by `basalt start --print-default-config`.

use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Largest `block_cache_mb` and `value_cache_mb` accepted (64 GiB): a typo
/// of a few digits would otherwise reserve a cache's tables for a size no
/// node has.
pub const CACHE_MB_MAX: u64 = 65_536;

/// The default configuration file, with comments.
pub const DEFAULT_CONFIG: &str = r#"# Basalt node configuration.
# Node name: reported by server info and part of every vclock actor id.
node_name = "basalt@127.0.0.1"
# Where the vnodes' stores (data_dir/vnodes/<partition>) and bucket props live.
data_dir = "./data"
# Protocol Buffers listener (Riak's default port).
pb_listen = "127.0.0.1:8087"
# The PB address other nodes and admin tools use to reach this node in a
# cluster; "" = the bound pb_listen address (set it when binding 0.0.0.0).
advertise_pb = ""
# HTTP listener (Riak's default port); "" disables the HTTP API.
http_listen = "127.0.0.1:8098"
# Cluster listener (Riak's handoff port): node-to-node messages and the
# admin requests of `basalt admin` (bucket types, cluster membership,
# replication) are served here only; the PB port speaks only Riak's codes.
cluster_listen = "127.0.0.1:8099"
# The cluster address other nodes and `basalt admin` use to reach this node;
# "" = the bound cluster_listen address (set it when binding 0.0.0.0).
advertise_cluster = ""
# HTTPS listener (Riak's https): the HTTP API over TLS (tls_certfile,
# tls_keyfile) with HTTP basic auth once security is enabled; "" = none.
# With security enabled the plain HTTP listener serves only /ping.
https_listen = ""
# TLS of the PB listener (RpbStartTls) and of https_listen: a PEM
# certificate chain and its PEM private key (`basalt certs node` makes
# them). Needed once security is enabled (`basalt admin security enable`):
# clients must STARTTLS and authenticate. "" = no TLS.
tls_certfile = ""
tls_keyfile = ""
# PEM certificates of the CA(s) whose client certificates this node
# accepts (`basalt certs ca`); a client may then present a certificate
# (optional), and a `certificate` source takes its common name as the
# user. "" = client certificates are not asked for.
tls_cacertfile = ""
# Mutual TLS on the cluster port: this node's certificate and key (`basalt
# certs node`: usable as server and client, OU "basalt-node") and the
# cluster CA. Set all three or none. Then every connection to the cluster
# port must present a certificate of that CA (a node's, or a user's for
# `basalt admin` and replication from another cluster), and this node
# verifies the nodes it dials; a node whose certificate comes from another
# CA cannot join, gossip, hand off or forward. "" = plain TCP, no
# authentication (keep cluster_listen on a private network).
cluster_certfile = ""
cluster_keyfile = ""
cluster_cacertfile = ""
# Number of ring partitions (vnodes); a power of two, 1..=1024.
ring_size = 64
# Storage backend of every vnode: leveled, bitcask, rocksdb, rocksdb-blob, memory.
backend = "leveled"
# Sync every write to stable storage before acknowledging it.
sync = false
# leveled: MiB of the block cache that every vnode's ledger shares for
# GETs and HEADs (the SST data blocks their keys live in stay in memory
# when values crowd the page cache); 0 = none.
block_cache_mb = 128
# leveled: MiB of the value cache that every vnode's journal shares: the
# objects of recent GETs, verified, kept in memory; with it, value reads
# that miss go straight to the disk (O_DIRECT) and leave nothing in the page
# cache. For a node whose data far outgrows its memory (a memory-limited
# container, say): give it about 45 % of the memory the node may use. 0 =
# none: the page cache holds the hot values, the right choice when memory
# is plentiful.
value_cache_mb = 0
# Tombstone reaping after a PB DELETE (Riak's delete_mode): a number of
# milliseconds (reap that long after the delete, once all n replicas hold the
# same tombstone), "immediate" (the same check, no delay) or "keep" (never
# reap: tombstones stay, as with Riak's `keep`). The delay is the grace for
# replica writes still in flight: an older write that lands after the reap
# brings the key back, so "immediate" is for tests, not for production.
delete_mode = 3000
# Active anti-entropy in a cluster: every this many seconds a node compares
# (tictac trees) the replicas of each preference list it leads and repairs
# keys that differ or are missing; 0 turns it off.
aae_interval_secs = 300
# Size of each vnode's cached anti-entropy trees (one per preference list
# and n_val it serves): xxsmall (16 x 256 segments), xsmall (64 x 256),
# small, medium, large (4096 x 256, Riak's), xlarge. Each tree takes
# (segments + width) x 8 bytes: xsmall 129 KiB, large 8 MiB. Bigger trees
# find a difference in fewer keys per segment; memory grows with
# ring_size x n_val / nodes trees per node.
aae_tree_size = "xsmall"
# When the roots of an exchange differ, wait this long (milliseconds) and
# compare again; only branches dirty both times are examined (a write still
# reaching its replicas is not a repair). 0 = no confirmation.
aae_confirm_ms = 1000
# Tree rebuilds: trees are built when missing (first start, after a crash)
# and rebuilt every aae_rebuild_wait_secs (default 14 days) plus a delay
# drawn per vnode in 0..aae_rebuild_delay_secs (default 4 days), so the
# vnodes of a node and of a cluster do not rebuild together (Riak's
# defaults). One rebuild runs at a time per node, reading at most
# aae_rebuild_keys_per_sec keys per second (0 = no limit); exchanges go on
# with the old trees meanwhile. `basalt admin aae rebuild` rebuilds now.
aae_rebuild_wait_secs = 1209600
aae_rebuild_delay_secs = 345600
aae_rebuild_keys_per_sec = 20000
# Leave out of the rebuilt trees the keys whose value is no longer in the
# journal (leveled only: an index lookup per key, no value read), so
# anti-entropy repairs values lost underneath the ledger.
aae_rebuild_journal_check = true
# Anti-entropy read repairs (a GET at r = n per key that differs) are paced
# to at most this many per second over the whole node, so a replica that
# lost everything is refilled without starving client requests; 0 =
# unlimited.
aae_repairs_per_sec = 400
# When an exchange finds more differences than one pass examines, it runs
# up to this many follow-up loops at once, each scoped (where the repairs
# allow) to the bucket and last-modified range most repairs shared; 0 = no
# follow-up loops (the rest waits for the next exchange of that list).
aae_max_loops = 4
# Handoffs (hinted and ownership) this node runs at once, as Riak's
# transfer_limit; `basalt admin transfer-limit N` changes it at run time
# (0 pauses handoffs: fallbacks keep their data until it is raised). At
# most 16.
transfer_limit = 2

[repl]
# Replication to other Basalt clusters ("sinks"): every write this node
# coordinates goes to the queue of each sink whose filter takes it, and the
# node pushes each queue to a node of that sink cluster, removing entries
# only once the sink confirmed them. Queues survive restarts (on disk under
# <data_dir>/repl). Shorthand for one sink named "default" taking every
# write: cluster addresses (cluster_listen) of nodes of the sink cluster,
# e.g. ["10.0.0.5:8099"]; the sink cluster's other nodes are discovered.
sinks = []
# Objects up to this size (bytes) are queued whole; larger ones as
# references, read when delivered. Tombstones are always whole.
object_limit_bytes = 204800
# Every queued entry is written to the queue's file before the PUT that
# queued it returns (to the kernel, no fsync: one write(2)), so a node
# killed at any moment loses nothing queued. false: the first
# queue_memory_entries of each priority stay in memory (a kill -9 loses
# them; a clean stop does not; a full-sync repairs them, but a lost delete
# or reap can then come back from the other cluster unless
# delete_mode = "keep").
queue_write_through = true
# Entries of each priority kept in memory per queue (read ahead of
# delivery; without write-through also new entries) before spilling.
queue_memory_entries = 10000
# Entries of each priority per queue (memory + disk); beyond it new entries
# are discarded and counted (a full-sync repairs them).
queue_max_entries = 1000000
# Replication's own TLS credentials: every connection to a sink cluster
# (real-time and full-sync) is mutual TLS with this certificate and key
# (one the sink cluster's CA issued; its common name is a user there that
# needs the basalt.repl grant once the sink cluster enables security),
# verifying the sink nodes against cacertfile (the sink cluster's CA).
# Set all three or none ("" = plain TCP to the sink clusters).
certfile = ""
keyfile = ""
cacertfile = ""
# More sinks, each with its own queue:
# [[repl.sink]]
# name = "dc2"
# peers = ["10.0.1.5:8099"]
# filter = "any"   # any | block_rt | bucket:NAME | prefix:PREFIX | type:TYPE
# suspended = false

[repl.fullsync]
# Full-sync with another cluster on the cached anti-entropy trees (as
# riak_kv's ttaaefs): this node's peer there (a cluster address; empty = a
# node of `sink`), the local sink whose queue takes repairs (empty = the
# first sink), and the peer's sink queue name pointing back here for keys
# newer there (empty = one way: such keys are only counted).
peer = ""
sink = ""
peer_queue = ""
# "all" (every bucket of n_val, on the cached trees) or "bucket" (one
# bucket, `bucket` in `bucket_type`, its trees folded at each check).
scope = "all"
n_val = 3
bucket = ""
bucket_type = ""
# Checks per day by kind: all keys, modified in the last day / hour, in a
# learnt range, or auto (the node picks). All 0 = only
# `basalt admin repl fullsync`.
all_check = 0
day_check = 0
hour_check = 0
range_check = 0
auto_check = 24
# Segments compared per check (a range check: times range_boost).
max_results = 32
range_boost = 16
# 1-4: shifts this cluster's checks by quarters of a node's share of each
# slice, so two clusters syncing with each other do not check at once.
cluster_slice = 1
# Hours of the day (UTC, [from, to), may wrap) when an auto check may run
# an `all` check.
allcheck_window = [0, 24]

[mapred]
# MapReduce (PB 23, HTTP POST /mapred) and commit hooks. JavaScript runs in
# pools of QuickJS VMs, one OS thread each, created on first use: map
# phases, reduce phases and commit hooks each have their own pool (Riak's
# map_js_vm_count, reduce_js_vm_count, hook_js_vm_count).
map_js_vm_count = 8
reduce_js_vm_count = 6
hook_js_vm_count = 2
# Each VM's heap limit (MiB; Riak's js_max_vm_mem) and stack limit (KiB);
# a script past either gets an error, and the VM is rebuilt.
js_max_vm_mem_mb = 16
js_max_stack_kb = 1024
# Calls waiting per pool; a caller waits for a place up to its deadline.
js_queue_len = 1024
# A directory of .js files evaluated in every VM at start: their global
# functions can be named in phases ({"language":"javascript","name":"f"})
# and hooks ({"name":"f"}). "" = none. A directory that cannot be read
# stops the node at start.
js_source_dir = ""
# Objects (and listed keys) a job may read at most; a job passing it is
# stopped with an error naming this limit.
max_inputs = 100000
# Whole-bucket inputs (a bucket, a key-filter input) read every key of the
# bucket through a coverage fold; false refuses them (Riak operators saw
# whole-bucket MapReduce take clusters down).
allow_bucket_inputs = true
# The kept results of a job (JSON bytes) at most; more stops the job.
max_result_bytes = 67108864
# Time a pre-commit or post-commit hook may take (ms); a pre-commit hook
# past it refuses the write.
hook_timeout_ms = 5000
# The built-in pre-commit hook basalt_hooks:max_object_size refuses objects
# larger than this (bytes; the Test Pilot study's 5 MB).
hook_max_object_bytes = 5242880

[limits]
# Largest PB frame accepted (bytes, counting the message code).
max_frame_bytes = 67108864
# Largest object accepted (sum of sibling values); larger puts get an error.
max_object_bytes = 52428800
# Log a warning for objects above this size.
warn_object_bytes = 5242880
# Requests waiting per vnode; a full queue answers `overload`.
vnode_queue_len = 1000
# Time a request may wait for its vnodes (milliseconds) before `timeout`.
request_timeout_ms = 60000
# A GET whose quorum answered only "not found" waits up to this long
# (milliseconds) for the replicas that have not answered yet, so a write
# held by a slower replica (e.g. while a node restarts) is still found.
# 0 = answer at once, as Riak does with notfound_ok. `basic_quorum` GETs
# never wait.
notfound_wait_ms = 1000
# HTTP: a client must send a request's headers within this time
# (milliseconds; also closes idle keep-alive connections), else the
# connection is closed.
http_header_timeout_ms = 10000
# HTTP: connections served at once; more are closed at accept.
http_max_connections = 1024
"#;

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
            hook_js_vm_count: 2,
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
        ] {
            if mb > CACHE_MB_MAX {
                return Err(ConfigError(format!(
                    "{key} must be at most {CACHE_MB_MAX} (64 GiB), got {mb}"
                )));
            }
        }
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
}

/// The `[repl]` section of the config.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ReplConfig {
    /// Shorthand: seed addresses of one sink named `default`, filter `any`.
    pub sinks: Vec<String>,
    /// Objects up to this size are queued whole, larger ones as references.
    pub object_limit_bytes: u64,
    /// Every entry written to disk (the kernel) before `push` returns.
    pub queue_write_through: bool,
    /// Entries of each priority in memory per queue before spilling.
    pub queue_memory_entries: usize,
    /// Entries of each priority per queue; beyond it new ones are discarded.
    pub queue_max_entries: u64,
    /// Sinks (`[[repl.sink]]`).
    pub sink: Vec<SinkConfig>,
    /// Full-sync (`[repl.fullsync]`).
    pub fullsync: FullSyncConfig,
    /// Certificate chain presented to sink clusters ("" = plain TCP).
    pub certfile: String,
    /// Private key of `certfile`.
    pub keyfile: String,
    /// The sink clusters' CA certificates.
    pub cacertfile: String,
}

/// The `[repl.fullsync]` section; see the default config's comments.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FullSyncConfig {
    /// Cluster address of this node's peer in the other cluster.
    pub peer: String,
    /// The local sink whose queue takes repairs.
    pub sink: String,
    /// The peer's sink queue pointing back here (bi-directional repair).
    pub peer_queue: String,
    /// `all` or `bucket`.
    pub scope: String,
    /// The n_val of scope `all`.
    pub n_val: u32,
    /// The bucket of scope `bucket`.
    pub bucket: String,
    /// Its bucket type (empty: none).
    pub bucket_type: String,
    /// `all` checks per day.
    pub all_check: u32,
    /// `day` checks per day.
    pub day_check: u32,
    /// `hour` checks per day.
    pub hour_check: u32,
    /// `range` checks per day.
    pub range_check: u32,
    /// `auto` checks per day.
    pub auto_check: u32,
    /// Segments compared per check.
    pub max_results: usize,
    /// Multiplier of `max_results` for range checks.
    pub range_boost: usize,
    /// 1-4.
    pub cluster_slice: u32,
    /// [from, to) hours (UTC) when auto may run an `all` check.
    pub allcheck_window: Vec<u32>,
}

impl Default for FullSyncConfig {
    fn default() -> Self {
        FullSyncConfig {
            peer: String::new(),
            sink: String::new(),
            peer_queue: String::new(),
            scope: "all".into(),
            n_val: 3,
            bucket: String::new(),
            bucket_type: String::new(),
            all_check: 0,
            day_check: 0,
            hour_check: 0,
            range_check: 0,
            auto_check: 24,
            max_results: 32,
            range_boost: 16,
            cluster_slice: 1,
            allcheck_window: vec![0, 24],
        }
    }
}

impl FullSyncConfig {
    /// The all-check window.
    pub fn window(&self) -> (u32, u32) {
        match self.allcheck_window.as_slice() {
            [a, b] => (*a, *b),
            _ => (0, 24),
        }
    }

    /// The storage bucket of scope `bucket`, `None` for scope `all`.
    pub fn scope_bucket(&self) -> Result<Option<Vec<u8>>, String> {
        match self.scope.as_str() {
            "all" => Ok(None),
            "bucket" if !self.bucket.is_empty() => {
                let t = (!self.bucket_type.is_empty()).then_some(self.bucket_type.as_bytes());
                Ok(Some(crate::bucket::keying::storage_bucket(
                    t,
                    self.bucket.as_bytes(),
                )))
            }
            "bucket" => Err("repl.fullsync scope \"bucket\" needs `bucket`".into()),
            s => Err(format!("repl.fullsync scope {s:?}: \"all\" or \"bucket\"")),
        }
    }

    /// Checks the section; the error names the setting.
    pub fn validate(&self) -> Result<(), String> {
        self.scope_bucket()?;
        let (a, b) = match self.allcheck_window.as_slice() {
            [a, b] => (*a, *b),
            _ => return Err("repl.fullsync allcheck_window: [from_hour, to_hour]".into()),
        };
        if a > 24 || b > 24 {
            return Err("repl.fullsync allcheck_window: hours in 0..=24".into());
        }
        if !(1..=4).contains(&self.cluster_slice) {
            return Err("repl.fullsync cluster_slice: 1 to 4".into());
        }
        if self.max_results == 0 || self.range_boost == 0 || self.n_val == 0 {
            return Err("repl.fullsync max_results, range_boost and n_val must be > 0".into());
        }
        let total =
            self.all_check + self.day_check + self.hour_check + self.range_check + self.auto_check;
        if total > 24 * 60 {
            return Err(format!(
                "repl.fullsync: {total} checks a day; at most one a minute"
            ));
        }
        Ok(())
    }
}

impl Default for ReplConfig {
    fn default() -> Self {
        ReplConfig {
            sinks: Vec::new(),
            object_limit_bytes: 200 * 1024,
            queue_write_through: true,
            queue_memory_entries: 10_000,
            queue_max_entries: 1_000_000,
            sink: Vec::new(),
            fullsync: FullSyncConfig::default(),
            certfile: String::new(),
            keyfile: String::new(),
            cacertfile: String::new(),
        }
    }
}

/// One sink cluster (`[[repl.sink]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SinkConfig {
    /// The sink's name (its queue's name): letters, digits, `_`, `-`.
    pub name: String,
    /// Cluster addresses of some of its nodes (the rest are discovered).
    pub peers: Vec<String>,
    /// Which real-time writes it takes (`any`, `block_rt`, `bucket:NAME`,
    /// `prefix:PREFIX`, `type:TYPE`).
    pub filter: String,
    /// Queue but do not deliver.
    pub suspended: bool,
}

impl Default for SinkConfig {
    fn default() -> Self {
        SinkConfig {
            name: String::new(),
            peers: Vec::new(),
            filter: "any".into(),
            suspended: false,
        }
    }
}

impl ReplConfig {
    /// `certfile`, `keyfile` and `cacertfile` are all set or all empty.
    pub fn check_tls(&self) -> Result<(), ConfigError> {
        let files = [&self.certfile, &self.keyfile, &self.cacertfile];
        if files.iter().any(|f| f.is_empty()) && files.iter().any(|f| !f.is_empty()) {
            return Err(ConfigError(
                "[repl] certfile, keyfile and cacertfile go together: set all three or none".into(),
            ));
        }
        Ok(())
    }

    /// The configured sinks: `[[repl.sink]]` plus the `sinks` shorthand
    /// (as `default`).
    pub fn all_sinks(&self) -> Vec<SinkConfig> {
        let mut all = self.sink.clone();
        if !self.sinks.is_empty() {
            all.push(SinkConfig {
                name: "default".into(),
                peers: self.sinks.clone(),
                ..SinkConfig::default()
            });
        }
        all
    }

    /// Checks names, filters, peers and limits; the error says which.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let all = self.all_sinks();
        let mut names = std::collections::BTreeSet::new();
        for s in &all {
            s.validate().map_err(ConfigError)?;
            if !names.insert(s.name.as_str()) {
                return Err(ConfigError(format!("repl: two sinks named {:?}", s.name)));
            }
        }
        if all.len() > crate::limits::REPL_MAX_SINKS {
            return Err(ConfigError(format!(
                "repl: {} sinks; at most {}",
                all.len(),
                crate::limits::REPL_MAX_SINKS
            )));
        }
        self.fullsync.validate().map_err(ConfigError)?;
        if self.queue_memory_entries == 0 || self.queue_max_entries == 0 {
            return Err(ConfigError(
                "repl: queue_memory_entries and queue_max_entries must be > 0".into(),
            ));
        }
        Ok(())
    }
}

impl SinkConfig {
    /// Checks the name and that there is a peer. The filter is replication's
    /// to parse: a sink with a bad one does not open (`repl::sinks`).
    pub fn validate(&self) -> Result<(), String> {
        let ok = |c: char| c.is_ascii_alphanumeric() || c == '_' || c == '-';
        if self.name.is_empty() || self.name.len() > 64 || !self.name.chars().all(ok) {
            return Err(format!(
                "repl sink name {:?}: 1-64 letters, digits, '_' or '-'",
                self.name
            ));
        }
        if self.peers.is_empty() || self.peers.iter().any(|p| p.trim().is_empty()) {
            return Err(format!(
                "repl sink {}: needs the cluster address of at least one of its nodes (peers)",
                self.name
            ));
        }
        Ok(())
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
