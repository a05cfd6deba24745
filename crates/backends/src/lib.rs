//! The implementations of [`basalt_backend::Backend`] and the registry that
//! opens one by name.
//!
//! | name | module | what |
//! |---|---|---|
//! | `leveled` (default) | [`leveled`] | Basalt's engine (`basalt-engine`): value journal + key/metadata LSM |
//! | `bitcask` | [`bitcask`] | in-memory keydir over append-only data files, hint files, merge |
//! | `rocksdb` | `rocksdb` (feature `rocksdb`) | RocksDB, levelled compaction (the eleveldb stand-in) |
//! | `rocksdb-blob` | `rocksdb` (feature `rocksdb`) | RocksDB with integrated BlobDB (key/value separation) |
//! | `memory` | [`memory`] | an ordered in-memory map (tests, Riak's memory backend) |
//!
//! Persistent backends write `DIR/STORE` (`basalt-leveled 1`,
//! `basalt-bitcask 1`, `basalt-rocksdb 1`, `basalt-rocksdb-blob 1`) and hold
//! `DIR/LOCK`; opening a directory of another kind fails with
//! [`BackendError::WrongBackend`] naming both.

#![warn(missing_docs)]

pub mod aae;
pub mod bitcask;
pub mod leveled;
pub mod memory;
pub(crate) mod ordered;

pub use basalt_engine::compaction::COMPACTION_SLOTS_MAX;
/// How the leveled backend's disk guard starts a refusal (a full disk).
pub use basalt_engine::diskspace::DISK_FULL_MARK;
/// `_int` index terms (arbitrary-precision integers): parsing, canonical
/// text, numeric order; the engine's, shared with the server.
pub use basalt_engine::intterm;
pub use basalt_engine::{
    BlockCache, CompactionSlots, DiskPace, IndexTerms, JournalFlush, MemtableBudget, Punch,
    ValueCache,
};
#[cfg(feature = "rocksdb")]
pub mod rocksdb;

use basalt_backend::{Backend, BackendError, Result, TreeSize};
pub(crate) use basalt_engine::clock::{now_secs, now_us};
use std::path::{Path, PathBuf};

/// Settings common to every backend (each ignores what it has no use for).
#[derive(Debug, Clone, Default)]
pub struct BackendConfig {
    /// Sync every write by default (a write's `sync` option also forces it).
    pub sync: bool,
    /// Keep a tictac tree of this size on every write (leveled only: it
    /// turns on `native_aae`).
    pub tictac: Option<TreeSize>,
    /// Small file and memory sizes so tests reach rolls, flushes and merges.
    pub test_min: bool,
    /// leveled: scheduled journal compaction runs per day (the engine's
    /// `compaction_runs_per_day`; `None` keeps its default, 24).
    pub compaction_runs_per_day: Option<u32>,
    /// leveled: the garbage trigger's percentage (the engine's
    /// `compaction_max_garbage_pct`; `None` keeps its default, 60; 100 off).
    pub compaction_max_garbage_pct: Option<f64>,
    /// leveled: reclaim journal garbage in place by punching holes (the
    /// engine's `compaction_punch`; `None` keeps its default, `Auto`).
    pub compaction_punch: Option<Punch>,
    /// leveled: below this percentage of the file system free, writes that
    /// store values are refused (the engine's `disk_min_free_pct`; `None`
    /// keeps its default, 1). Above the engine's low mark it raises that
    /// mark to the same value (the engine wants the minimum at most the
    /// low mark).
    pub disk_min_free_pct: Option<f64>,
    /// leveled: the write slowdown's garbage percentage (the engine's
    /// `journal_slowdown_garbage_pct`; `None` keeps its default, 75; 100 off).
    pub journal_slowdown_garbage_pct: Option<f64>,
    /// leveled: read a value with one positional read (the engine's
    /// `journal_one_read`; `None` keeps its default, true).
    pub journal_one_read: Option<bool>,
    /// leveled: `posix_fadvise(RANDOM)` on the journal handles used for
    /// value reads (the engine's `journal_fadvise_random`; `None` keeps its
    /// default, true).
    pub journal_fadvise_random: Option<bool>,
    /// leveled: GETs of records older than the active journal file skip its
    /// lock (the engine's `journal_skip_active_lock`; `None`: default, true).
    pub journal_skip_active_lock: Option<bool>,
    /// leveled: each new journal file reserves its blocks when created (the
    /// engine's `journal_preallocate`; `None`: default, true).
    pub journal_preallocate: Option<bool>,
    /// leveled: a journal file is closed and a new one started past this
    /// many bytes (the engine's `journal_file_bytes`; `None`: default,
    /// 256 MiB).
    pub journal_file_bytes: Option<u64>,
    /// leveled: the journal's written-back pages leave the page cache (the
    /// engine's `journal_release_written`; `None`: default).
    pub journal_release_written: Option<bool>,
    /// leveled: writes refresh the value cache's entries of their keys (the
    /// engine's `value_cache_refresh`; `None`: default).
    pub value_cache_refresh: Option<bool>,
    /// leveled: concurrent writers share one write-lock trip, journal write
    /// and fsync (the engine's `write_group`; `None`: default, true).
    pub write_group: Option<bool>,
    /// leveled: background fsync of the active journal file every this many
    /// bytes (the engine's `journal_sync_bytes`; `None`: default, 1 MiB).
    pub journal_sync_bytes: Option<u64>,
    /// leveled: with write-back flushing, the flusher also fsyncs the
    /// active journal file every this many bytes (the engine's
    /// `journal_fsync_bytes`; `None`: default, 4 MiB; 0 only at rolls).
    pub journal_fsync_bytes: Option<u64>,
    /// leveled: a ledger SST being written is fsynced every this many bytes
    /// (the engine's `ledger_sync_bytes`; `None`: default, 1 MiB; 0 only
    /// when finished).
    pub ledger_sync_bytes: Option<u64>,
    /// leveled: nice steps for journal compaction and ledger merges (the
    /// engine's `background_nice`; `None`: default).
    pub background_nice: Option<i32>,
    /// leveled: journal compaction fsyncs its output and drops its input and
    /// output from the page cache every this many bytes (the engine's
    /// `compaction_stream_bytes`; `None`: default, 1 MiB).
    pub compaction_stream_bytes: Option<u64>,
    /// leveled: journal compaction's read pace in bytes a second (the
    /// engine's `compaction_read_bytes_per_sec`; `None`: default, 64 MiB/s;
    /// 0 unpaced).
    pub compaction_read_bytes_per_sec: Option<u64>,
    /// leveled: replaced files are removed at most this many bytes a
    /// second (the engine's `remove_bytes_per_sec`; `None`: default,
    /// 256 MiB/s; 0 at once).
    pub remove_bytes_per_sec: Option<u64>,
    /// leveled: what the background flusher does every `journal_sync_bytes`
    /// (the engine's `journal_flush`; `None`: default, write-back).
    pub journal_flush: Option<basalt_engine::JournalFlush>,
    /// leveled: bytes of the ledger's block cache for point lookups (the
    /// engine's `block_cache_bytes`; `None`: default, 64 MiB; 0 none).
    /// Ignored when `block_cache` is set.
    pub block_cache_bytes: Option<u64>,
    /// leveled: a block cache shared by every store opened with it (a
    /// node's vnodes), so their memory is bounded together.
    pub block_cache: Option<basalt_engine::BlockCache>,
    /// leveled: value reads from closed journal files bypass the page
    /// cache (the engine's `journal_direct_reads`; `None`: on when the
    /// store has a value cache, else off).
    pub journal_direct_reads: Option<bool>,
    /// leveled: the ledger's memtable size (the engine's `memtable_bytes`;
    /// `None`: default, 32 MiB).
    pub memtable_bytes: Option<u64>,
    /// leveled: the memtable is also frozen once the journal grew this many
    /// bytes since the last freeze (the engine's `memtable_journal_bytes`;
    /// `None`: default, 256 MiB).
    pub memtable_journal_bytes: Option<u64>,
    /// leveled: a memtable budget shared by every store opened with it (a
    /// node's vnodes), so their memtables are bounded together (the
    /// engine's `memtable_budget`).
    pub memtable_budget: Option<basalt_engine::MemtableBudget>,
    /// leveled: a disk pace shared with the other stores on the disk (the
    /// engine's `disk_pace`).
    pub disk_pace: Option<basalt_engine::DiskPace>,
    /// leveled: journal compaction slots shared with the other stores on
    /// the disk (the engine's `compaction_slots`).
    pub compaction_slots: Option<basalt_engine::CompactionSlots>,
    /// leveled: where the store reads an object's whole 2i term set from
    /// the metadata written with it (the engine's `index_terms`): journal
    /// compaction then keeps no key deltas, and a rebuilt ledger derives
    /// its index entries from the objects. `None`: retained as key deltas.
    pub index_terms: Option<basalt_engine::IndexTerms>,
    /// leveled: L0 files that start a merge into L1 (the engine's
    /// `l0_merge_trigger`; `None`: default, 4).
    pub l0_merge_trigger: Option<usize>,
    /// leveled: files allowed in L1 (the engine's `l1_files`; `None`:
    /// default, 8).
    pub l1_files: Option<usize>,
    /// leveled: bytes of the value cache (the engine's `value_cache_bytes`;
    /// `None`: [`VALUE_CACHE_BUDGET_PCT`] of `memory_budget_bytes`, none
    /// without a budget). Ignored when `value_cache` is set.
    pub value_cache_bytes: Option<u64>,
    /// leveled: a value cache shared by every store opened with it (a
    /// node's vnodes), so their memory is bounded together.
    pub value_cache: Option<basalt_engine::ValueCache>,
    /// Memory this store may use, page cache included (the bench's
    /// `--memory-limit` divided among its stores). RocksDB sizes its block
    /// cache from it, leveled its value cache; `None`: no budget known.
    pub memory_budget_bytes: Option<u64>,
    /// RocksDB settings (`rocksdb`, `rocksdb-blob`).
    pub rocksdb: RocksTuning,
    /// RocksDB: a block cache shared by every store opened with it (a
    /// node's vnodes, as leveled's `block_cache`), so a node's RocksDB
    /// vnodes hold `block_cache_mb` together instead of one cache each.
    /// Overrides `rocksdb.block_cache_bytes`.
    pub rocksdb_block_cache: Option<RocksBlockCache>,
}

/// The share of a store's memory budget that leveled gives its value cache
/// when none is set: the page cache keeps the rest (the ledger's files, the
/// journal's newest pages, compaction's streams), as RocksDB's block cache
/// takes a third of the same budget. Measured against no value cache at
/// 1.5 GiB: `docs/benchmarks/2026-11-27-0617-value-cache-o-direct.md`.
pub const VALUE_CACHE_BUDGET_PCT: u64 = 45;

impl BackendConfig {
    /// The value cache leveled opens with: `value_cache_bytes`, else
    /// [`VALUE_CACHE_BUDGET_PCT`] of the memory budget, else none.
    pub fn leveled_value_cache_bytes(&self) -> u64 {
        self.value_cache_bytes.unwrap_or_else(|| {
            self.memory_budget_bytes
                .map_or(0, |b| b / 100 * VALUE_CACHE_BUDGET_PCT)
        })
    }

    /// Whether leveled reads values with `O_DIRECT`: `journal_direct_reads`,
    /// else whenever it has a value cache, its own or a shared one (which
    /// then holds the hot values the page cache would have).
    pub fn leveled_direct_reads(&self) -> bool {
        self.journal_direct_reads
            .unwrap_or(self.value_cache.is_some() || self.leveled_value_cache_bytes() > 0)
    }
}

/// Block compression of the RocksDB backends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RocksCompression {
    /// None (default: the seeds' values are random bytes, and Riak objects
    /// of random values barely shrink).
    None,
    /// LZ4.
    Lz4,
    /// Snappy (RocksDB's own default).
    Snappy,
    /// Zstandard.
    Zstd,
}

impl RocksCompression {
    /// Parses `none`, `lz4`, `snappy`, `zstd`.
    pub fn parse(s: &str) -> Option<RocksCompression> {
        match s {
            "none" => Some(RocksCompression::None),
            "lz4" => Some(RocksCompression::Lz4),
            "snappy" => Some(RocksCompression::Snappy),
            "zstd" => Some(RocksCompression::Zstd),
            _ => None,
        }
    }
}

/// How the RocksDB backends are configured: what a careful operator would
/// set on a small box (2 cores, a memory budget of about 1.5 GiB including
/// the page cache). Each setting and why: `docs/bench.md` "RocksDB settings".
#[derive(Debug, Clone, PartialEq)]
pub struct RocksTuning {
    /// LRU block cache; `None`: a third of `memory_budget_bytes` (the rest
    /// holds memtables, index and filter blocks, and the page cache), or
    /// 32 MiB without a budget.
    pub block_cache_bytes: Option<u64>,
    /// Write buffer (memtable) size. Default 32 MiB.
    pub write_buffer_bytes: u64,
    /// Write buffers in memory at most (one active, the rest flushing). Default 2.
    pub max_write_buffers: u32,
    /// Block compression. Default none.
    pub compression: RocksCompression,
    /// Bloom filter bits per key (0 = none). Default 10 (~1 % false positives).
    pub bloom_bits_per_key: f64,
    /// `level_compaction_dynamic_level_bytes`. Default true.
    pub dynamic_level_bytes: bool,
    /// Background flush + compaction jobs. Default 2 (the cores).
    pub background_jobs: u32,
    /// `bytes_per_sync` for SST and blob files: write back in 1 MiB steps
    /// instead of one burst at file close. Default 1 MiB.
    pub bytes_per_sync: u64,
    /// Compaction threads (the low-priority pool) run at the lowest CPU
    /// priority (`Env::lower_thread_pool_cpu_priority`, nice 19), as
    /// leveled's compaction and merge threads do (`background_nice`).
    /// Flushes (the high-priority pool) are left alone, as leveled's flush
    /// clerk is. Default true (since 2026-11-28).
    pub lower_compaction_priority: bool,
}

impl Default for RocksTuning {
    fn default() -> Self {
        RocksTuning {
            block_cache_bytes: None,
            write_buffer_bytes: 32 << 20,
            max_write_buffers: 2,
            compression: RocksCompression::None,
            bloom_bits_per_key: 10.0,
            dynamic_level_bytes: true,
            background_jobs: 2,
            bytes_per_sync: 1 << 20,
            lower_compaction_priority: true,
        }
    }
}

impl RocksTuning {
    /// The block cache size for a store with `budget` bytes.
    pub fn block_cache_for(&self, budget: Option<u64>) -> u64 {
        self.block_cache_bytes
            .unwrap_or_else(|| budget.map_or(32 << 20, |b| (b / 3).max(8 << 20)))
    }
}

/// A RocksDB LRU block cache that several stores share ([`BackendConfig::rocksdb_block_cache`]).
/// Without the `rocksdb` feature it holds nothing and is never made.
#[derive(Clone)]
pub struct RocksBlockCache {
    #[cfg(feature = "rocksdb")]
    pub(crate) cache: ::rocksdb::Cache,
    bytes: u64,
}

impl RocksBlockCache {
    /// An LRU cache of `bytes`; `None` without the `rocksdb` feature or if
    /// RocksDB cannot make one.
    pub fn new(bytes: u64) -> Option<RocksBlockCache> {
        #[cfg(feature = "rocksdb")]
        {
            let cache = ::rocksdb::Cache::new_lru_cache(usize::try_from(bytes).ok()?).ok()?;
            Some(RocksBlockCache { cache, bytes })
        }
        #[cfg(not(feature = "rocksdb"))]
        {
            let _ = bytes;
            None
        }
    }

    /// Its capacity in bytes.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }
}

impl std::fmt::Debug for RocksBlockCache {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RocksBlockCache({} bytes)", self.bytes)
    }
}

/// The names [`open_backend`] accepts, the default first.
pub fn backend_names() -> Vec<&'static str> {
    let mut v = vec![leveled::NAME, bitcask::NAME];
    #[cfg(feature = "rocksdb")]
    {
        v.push(rocksdb::NAME);
        v.push(rocksdb::NAME_BLOB);
    }
    v.push(memory::NAME);
    v
}

/// The least memory one store of `name` needs once open, before any page
/// cache: its memtables and caches at their configured sizes plus 16 MiB
/// of bookkeeping. It does not count what grows with the data (leveled's
/// in-memory journal and SST indexes, bitcask's keydir, the memory
/// backend's map), so it is a floor for refusing a memory budget that
/// cannot work, not a sizing guide.
pub fn memory_floor_bytes(name: &str, config: &BackendConfig) -> u64 {
    const BOOKKEEPING: u64 = 16 << 20;
    match name {
        leveled::NAME => {
            let c = basalt_engine::Config::new(Path::new("."));
            // A shared cache is counted once by whoever made it.
            let cache = match &config.block_cache {
                Some(_) => 0,
                None => config.block_cache_bytes.unwrap_or(c.block_cache_bytes),
            };
            BOOKKEEPING
                + config.memtable_bytes.unwrap_or(c.memtable_bytes as u64)
                    * (1 + c.frozen_memtables_max as u64)
                + cache
                // A value cache sized from the budget scales with it: only
                // one set explicitly is a floor (a shared one, by its maker).
                + match &config.value_cache {
                    Some(_) => 0,
                    None => config.value_cache_bytes.unwrap_or(0),
                }
        }
        // Its write buffers and block cache (which fills up to its size).
        #[cfg(feature = "rocksdb")]
        rocksdb::NAME | rocksdb::NAME_BLOB => {
            let t = &config.rocksdb;
            // A shared cache is counted once by whoever made it.
            let cache = match &config.rocksdb_block_cache {
                Some(_) => 0,
                None => t.block_cache_for(config.memory_budget_bytes),
            };
            BOOKKEEPING + t.write_buffer_bytes * u64::from(t.max_write_buffers) + cache
        }
        _ => BOOKKEEPING,
    }
}

/// The default backend's name.
pub const DEFAULT_BACKEND: &str = leveled::NAME;

/// Opens (creating if new) the backend `name` in `dir`. `memory` ignores `dir`.
pub fn open_backend(name: &str, dir: &Path, config: &BackendConfig) -> Result<Box<dyn Backend>> {
    match name {
        leveled::NAME => Ok(Box::new(leveled::Leveled::open(dir, config)?)),
        bitcask::NAME => Ok(Box::new(bitcask::Bitcask::open(
            dir,
            bitcask::BitcaskOptions::from_config(config),
        )?)),
        #[cfg(feature = "rocksdb")]
        rocksdb::NAME => Ok(Box::new(rocksdb::Rocks::open(
            dir,
            rocksdb::RocksConfig::Plain,
            config,
        )?)),
        #[cfg(feature = "rocksdb")]
        rocksdb::NAME_BLOB => Ok(Box::new(rocksdb::Rocks::open(
            dir,
            rocksdb::RocksConfig::Blob,
            config,
        )?)),
        memory::NAME => Ok(Box::new(memory::Memory::new())),
        other => Err(BackendError::UnknownBackend {
            name: other.to_string(),
            known: backend_names().join(", "),
        }),
    }
}

/// The `STORE` marker of `name`'s directories (`None` for `memory`).
pub fn marker_of(name: &str) -> Option<String> {
    (name != memory::NAME).then(|| format!("basalt-{name} 1"))
}

/// Which backend wrote `dir`, from its `STORE` marker (`None` if there is none).
pub fn detect_backend(dir: &Path) -> Option<String> {
    let s = std::fs::read_to_string(dir.join("STORE")).ok()?;
    let kind = s.trim().strip_prefix("basalt-")?.strip_suffix(" 1")?;
    Some(kind.to_string())
}

/// Converts an engine error into a backend error.
pub(crate) fn from_engine(e: basalt_engine::Error) -> BackendError {
    use basalt_engine::Error as E;
    match e {
        E::Io { op, path, source } => BackendError::Io { op, path, source },
        E::Corrupt {
            path,
            offset,
            reason,
        } => BackendError::corrupt(path, format!("at offset {offset}: {reason}")),
        E::InvalidInput(m) => BackendError::InvalidInput(m),
        E::Locked { path } => BackendError::Locked { path },
        E::WrongStore {
            path,
            found,
            expected,
        } => BackendError::WrongBackend {
            path,
            found,
            expected,
        },
        E::Manifest { path, .. } => BackendError::corrupt(path, e_to_string_manifest()),
        E::SnapshotExpired { id, reason } => {
            BackendError::Closed(format!("snapshot {id} expired ({reason})"))
        }
        E::Closed(m) => BackendError::Closed(m),
        other => BackendError::Other {
            backend: leveled::NAME,
            message: other.to_string(),
        },
    }
}

fn e_to_string_manifest() -> String {
    "manifest missing or damaged; run `basalt kv --data-dir DIR repair`".into()
}

/// Takes `DIR/LOCK` and checks (or writes) `DIR/STORE` for a persistent
/// backend other than leveled (which does both itself).
pub(crate) fn claim_dir(dir: &Path, name: &str) -> Result<basalt_engine::lock::DirLock> {
    basalt_engine::fsutil::ensure_dir(dir).map_err(from_engine)?;
    let lock = basalt_engine::lock::DirLock::acquire(dir).map_err(from_engine)?;
    let marker = marker_of(name).unwrap_or_default();
    basalt_engine::lock::check_marker(dir, &marker).map_err(from_engine)?;
    Ok(lock)
}

/// Bytes of disk every file under `dir` (recursively) holds: allocated
/// blocks (`st_blocks`), so holes punched out of journal files are not
/// counted and blocks reserved ahead of appends are; errors count as 0.
pub fn disk_usage(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack: Vec<PathBuf> = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            match e.metadata() {
                Ok(m) if m.is_dir() => stack.push(e.path()),
                Ok(m) => total += std::os::unix::fs::MetadataExt::blocks(&m) * 512,
                Err(_) => {}
            }
        }
    }
    total
}

/// Largest accepted value (the engine's default `value_bytes_max`).
pub(crate) const VALUE_BYTES_MAX: usize = 50 * 1024 * 1024;
/// Largest accepted metadata.
pub(crate) const METADATA_BYTES_MAX: usize = 1024 * 1024;

/// Checks bucket, key, value and metadata sizes as the engine does.
pub(crate) fn check_write(bucket: &[u8], key: &[u8], value: &[u8], meta: &[u8]) -> Result<()> {
    check_name("bucket", bucket)?;
    check_name("key", key)?;
    if value.len() > VALUE_BYTES_MAX {
        return Err(BackendError::InvalidInput(format!(
            "value is {} bytes; the limit is {VALUE_BYTES_MAX} bytes",
            value.len()
        )));
    }
    if meta.len() > METADATA_BYTES_MAX {
        return Err(BackendError::InvalidInput(format!(
            "metadata is {} bytes; the limit is {METADATA_BYTES_MAX} bytes",
            meta.len()
        )));
    }
    Ok(())
}

/// Checks a bucket or key is 1 byte to 64 KiB.
pub(crate) fn check_name(what: &str, b: &[u8]) -> Result<()> {
    if b.is_empty() {
        return Err(BackendError::InvalidInput(format!(
            "{what} must not be empty"
        )));
    }
    if b.len() > basalt_engine::limits::KEY_SIZE_BYTES_MAX {
        return Err(BackendError::InvalidInput(format!(
            "{what} is {} bytes; the limit is {} bytes",
            b.len(),
            basalt_engine::limits::KEY_SIZE_BYTES_MAX
        )));
    }
    Ok(())
}

/// True if an object expiring at `expires_at` (0 = never) is dead now.
pub(crate) fn expired(expires_at: u64, now_secs: u64) -> bool {
    expires_at != 0 && expires_at <= now_secs
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter(b: &dyn Backend, name: &str) -> u64 {
        let s = b.stats().expect("stats");
        s.counters
            .iter()
            .find(|(n, _)| n.as_str() == name)
            .map(|(_, v)| *v)
            .unwrap_or_else(|| panic!("no counter {name}"))
    }

    #[test]
    fn leveled_value_cache_follows_the_budget_unless_set() {
        let none = BackendConfig::default();
        assert_eq!(none.leveled_value_cache_bytes(), 0);
        assert!(!none.leveled_direct_reads());
        let budget = BackendConfig {
            memory_budget_bytes: Some(1000 << 20),
            ..BackendConfig::default()
        };
        assert_eq!(budget.leveled_value_cache_bytes(), 450 << 20);
        assert!(budget.leveled_direct_reads());
        let off = BackendConfig {
            value_cache_bytes: Some(0),
            ..budget.clone()
        };
        assert_eq!(off.leveled_value_cache_bytes(), 0);
        assert!(!off.leveled_direct_reads());
        // Only a cache set explicitly raises the memory floor.
        let floor = memory_floor_bytes(leveled::NAME, &none);
        assert_eq!(memory_floor_bytes(leveled::NAME, &budget), floor);
        let set = BackendConfig {
            value_cache_bytes: Some(100 << 20),
            ..none.clone()
        };
        assert_eq!(memory_floor_bytes(leveled::NAME, &set), floor + (100 << 20));
    }

    #[test]
    fn leveled_takes_the_store_shape_it_is_given_and_counts_its_memtables() {
        let d = tempfile::tempdir().expect("tempdir");
        let cfg = BackendConfig {
            test_min: true,
            memtable_bytes: Some(64 << 10),
            l0_merge_trigger: Some(3),
            l1_files: Some(5),
            journal_file_bytes: Some(96 << 10),
            ..BackendConfig::default()
        };
        let b = leveled::Leveled::open(d.path(), &cfg).expect("open");
        let c = b.store().config();
        assert_eq!(
            (c.memtable_bytes, c.l0_merge_trigger, c.l1_files),
            (64 << 10, 3, 5)
        );
        // test_min's own journal files are 64 KiB: the setting wins.
        assert_eq!(c.journal_file_bytes, 96 << 10);
        // The floor counts the active and frozen memtables at their size.
        let big = BackendConfig {
            memtable_bytes: Some(64 << 20),
            ..BackendConfig::default()
        };
        let small = BackendConfig {
            memtable_bytes: Some(32 << 20),
            ..BackendConfig::default()
        };
        let frozen = basalt_engine::Config::new(".").frozen_memtables_max as u64;
        assert_eq!(
            memory_floor_bytes(leveled::NAME, &big) - memory_floor_bytes(leveled::NAME, &small),
            (32 << 20) * (1 + frozen)
        );
    }

    #[test]
    fn leveled_opens_with_the_value_cache_it_was_given() {
        let d = tempfile::tempdir().expect("tempdir");
        let cfg = BackendConfig {
            test_min: true,
            memory_budget_bytes: Some(100 << 20),
            ..BackendConfig::default()
        };
        let b = open_backend(leveled::NAME, d.path(), &cfg).expect("open");
        assert_eq!(counter(b.as_ref(), "value_cache_capacity_bytes"), 45 << 20);
    }

    #[test]
    fn leveled_stores_share_the_value_cache_they_are_given() {
        let shared = basalt_engine::ValueCache::new(8 << 20);
        let cfg = BackendConfig {
            test_min: true,
            value_cache_bytes: Some(0),
            value_cache: shared.clone(),
            ..BackendConfig::default()
        };
        assert!(
            cfg.leveled_direct_reads(),
            "a shared cache turns direct reads on"
        );
        let floor = memory_floor_bytes(leveled::NAME, &BackendConfig::default());
        assert_eq!(memory_floor_bytes(leveled::NAME, &cfg), floor);
        let (d1, d2) = (
            tempfile::tempdir().expect("tempdir"),
            tempfile::tempdir().expect("tempdir"),
        );
        let a = open_backend(leveled::NAME, d1.path(), &cfg).expect("open a");
        let b = open_backend(leveled::NAME, d2.path(), &cfg).expect("open b");
        for (s, v) in [(&a, b"from a".as_slice()), (&b, b"from b".as_slice())] {
            s.put(b"bucket", b"key", v, b"", &Default::default())
                .expect("put");
            for _ in 0..2 {
                let got = s.get(b"bucket", b"key").expect("get").map(|o| o.value);
                assert_eq!(got.as_deref(), Some(v), "each store reads its own value");
            }
        }
        for s in [&a, &b] {
            assert_eq!(counter(s.as_ref(), "value_cache_capacity_bytes"), 8 << 20);
            assert_eq!(counter(s.as_ref(), "journal_value_cache_hits"), 1);
        }
        let held = counter(a.as_ref(), "value_cache_bytes");
        assert!(held > 0, "both stores' records are in the one cache");
        assert_eq!(counter(b.as_ref(), "value_cache_bytes"), held);
    }
}
