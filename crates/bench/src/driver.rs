//! Drivers: what one operation does.
//!
//! - `basalt_embedded` ([`EmbeddedDriver`]) opens `basalt_stores` stores in
//!   this process (`<data_dir>/instance.N`, like basho_bench's eleveldb
//!   driver) and routes each key to one of them by hash. It reaches the
//!   stores only through [`KvTarget`], implemented once for every backend
//!   of `basalt-backends` (through the `Backend` trait); a new kind of
//!   target implements `KvTarget` and is returned from
//!   [`open_targets`].
//! - `null` ([`NullDriver`]) does nothing (or fails, for `an_error` and
//!   `another_error`), to measure the harness itself; it also takes
//!   basho_bench's null-driver op names `absolutely_nothing`,
//!   `do_something`, `do_something_else` (a key, and a value for the last,
//!   are drawn for every op).
//!
//! `put` writes `basalt_index_terms` secondary-index terms per object in the
//! field `bench_bin`, derived from the key (so a re-put of a key writes the
//! same terms and a delete removes them): term *i* is `DDDD|<hex key>` with
//! `DDDD` = `(xxh3(key) + i) mod 10000`. `index_query` asks the range
//! `DDDD|` .. `DDDD|~` for a generated key, with return_terms, like the
//! postcode queries of the seeds' 2i test.

use crate::config::{valid_backends, BenchConfig, OpKind};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// The index field `put` writes and `index_query` reads.
pub const INDEX_FIELD: &[u8] = b"bench_bin";

/// Why an operation failed; `reason` becomes the `errors.csv` key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{reason}")]
pub struct DriverError {
    /// A short reason (an error kind rather than a full message, so that
    /// `errors.csv` groups like errors).
    pub reason: String,
    /// Why the run cannot go on, in full, when it cannot: a store's I/O
    /// error such as a full disk (`the store failed: ...`), or a `riakc_pb`
    /// worker that cannot reconnect without `auto_reconnect`. The run stops
    /// with it and writes its reports for the time measured.
    pub fatal: Option<String>,
}

impl DriverError {
    /// An error with `reason`.
    pub fn new(reason: impl Into<String>) -> Self {
        DriverError {
            reason: reason.into(),
            fatal: None,
        }
    }
}

/// What a successful operation reports.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// Done: timed and counted.
    Done,
    /// basho_bench's `silent`: nothing was done (e.g. the NHS driver's
    /// `alwaysget_pb` before its key set is large enough); not counted.
    Silent,
}

/// Runs operations; one per worker.
pub trait Driver: Send {
    /// Runs `op` on `key` (with `value` for writes).
    fn run(&mut self, op: OpKind, key: &[u8], value: &[u8]) -> Result<Outcome, DriverError>;
}

/// What the embedded driver needs from a store: the seam for backends.
///
/// Implementations are shared by all workers (`Send + Sync`). Errors are
/// returned as short reasons. "Not found" is not an error.
pub trait KvTarget: Send + Sync {
    /// Reads a value; `Ok(false)` when not found.
    fn get(&self, bucket: &[u8], key: &[u8]) -> Result<bool, DriverError>;
    /// Writes a value with index terms to add.
    fn put(
        &self,
        bucket: &[u8],
        key: &[u8],
        value: &[u8],
        index: &[(Vec<u8>, Vec<u8>)],
    ) -> Result<(), DriverError>;
    /// Deletes a key, removing the given index terms.
    fn delete(
        &self,
        bucket: &[u8],
        key: &[u8],
        index: &[(Vec<u8>, Vec<u8>)],
    ) -> Result<(), DriverError>;
    /// Reads metadata only; `Ok(false)` when not found.
    fn head(&self, bucket: &[u8], key: &[u8]) -> Result<bool, DriverError>;
    /// Range query on `field` from `start` to `end` with return_terms;
    /// returns the number of results.
    fn index_query(
        &self,
        bucket: &[u8],
        field: &[u8],
        start: &[u8],
        end: &[u8],
    ) -> Result<usize, DriverError>;
    /// Get then put (Riak's update): the default reads, then writes.
    fn update(
        &self,
        bucket: &[u8],
        key: &[u8],
        value: &[u8],
        index: &[(Vec<u8>, Vec<u8>)],
    ) -> Result<(), DriverError> {
        self.get(bucket, key)?;
        self.put(bucket, key, value, index)
    }
    /// Flushes and closes (end of run).
    fn close(&self) -> Result<(), DriverError>;
    /// The store's named counters (`Backend::stats`), sampled once per
    /// report interval for the wait counters (see [`crate::waits`]); none
    /// by default.
    fn counters(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
}

/// Any backend of `basalt-backends`, through the `Backend` trait.
pub struct BackendTarget {
    backend: Box<dyn basalt_backend::Backend>,
}

fn backend_reason(e: &basalt_backend::BackendError) -> DriverError {
    use basalt_backend::BackendError as B;
    let s = format!("{e:?}");
    let kind = s
        .split(['(', ' ', '{'])
        .next()
        .unwrap_or("error")
        .to_string();
    // Errors after which the store cannot serve the run: I/O (a full disk),
    // a store that closed itself after one, RocksDB's "IO error" reports.
    let fatal = match e {
        B::Io { .. } | B::Closed(_) => true,
        B::Other { message, .. } => {
            message.contains("IO error") || message.contains("No space left")
        }
        _ => false,
    };
    DriverError {
        reason: kind,
        fatal: fatal.then(|| format!("the store failed: {e}")),
    }
}

impl KvTarget for BackendTarget {
    fn get(&self, bucket: &[u8], key: &[u8]) -> Result<bool, DriverError> {
        self.backend
            .get(bucket, key)
            .map(|o| o.is_some())
            .map_err(|e| backend_reason(&e))
    }

    fn put(
        &self,
        bucket: &[u8],
        key: &[u8],
        value: &[u8],
        index: &[(Vec<u8>, Vec<u8>)],
    ) -> Result<(), DriverError> {
        let opts = basalt_backend::WriteOptions {
            index: index
                .iter()
                .map(|(f, t)| basalt_backend::IndexChange::add(f.clone(), t.clone()))
                .collect(),
            ..basalt_backend::WriteOptions::default()
        };
        self.backend
            .put(bucket, key, value, b"", &opts)
            .map_err(|e| backend_reason(&e))
    }

    fn delete(
        &self,
        bucket: &[u8],
        key: &[u8],
        index: &[(Vec<u8>, Vec<u8>)],
    ) -> Result<(), DriverError> {
        let opts = basalt_backend::WriteOptions {
            index: index
                .iter()
                .map(|(f, t)| basalt_backend::IndexChange::remove(f.clone(), t.clone()))
                .collect(),
            ..basalt_backend::WriteOptions::default()
        };
        self.backend
            .delete(bucket, key, &opts)
            .map_err(|e| backend_reason(&e))
    }

    fn head(&self, bucket: &[u8], key: &[u8]) -> Result<bool, DriverError> {
        self.backend
            .head(bucket, key)
            .map(|o| o.is_some())
            .map_err(|e| backend_reason(&e))
    }

    fn index_query(
        &self,
        bucket: &[u8],
        field: &[u8],
        start: &[u8],
        end: &[u8],
    ) -> Result<usize, DriverError> {
        let q = basalt_backend::IndexQuery {
            end: Some(end.to_vec()),
            return_terms: true,
            ..basalt_backend::IndexQuery::eq(bucket, field, start)
        };
        self.backend
            .index_query(&q)
            .map(|p| p.results.len())
            .map_err(|e| backend_reason(&e))
    }

    fn close(&self) -> Result<(), DriverError> {
        self.backend.close().map_err(|e| backend_reason(&e))
    }

    fn counters(&self) -> Vec<(String, u64)> {
        let mut c = match self.backend.stats() {
            Ok(s) => {
                let mut c = s.counters;
                c.push(("store_disk_bytes".into(), s.disk_bytes));
                c
            }
            Err(_) => Vec::new(),
        };
        c.extend(self.backend.take_wait_maxima());
        c
    }
}

/// The backend settings of a run's stores (also used to size the memory
/// floor of `--memory-limit`).
pub fn backend_config(cfg: &BenchConfig) -> basalt_backends::BackendConfig {
    // A store's share of the memory limit, after the process and the value pool.
    let budget = cfg.memory_limit.map(|l| {
        l.saturating_sub(crate::memlimit::PROCESS_FLOOR_BYTES + cfg.value_source_size as u64)
            / cfg.stores.max(1) as u64
    });
    basalt_backends::BackendConfig {
        sync: cfg.sync,
        compaction_runs_per_day: cfg.compaction_runs_per_day,
        compaction_max_garbage_pct: cfg.compaction_max_garbage_pct,
        compaction_punch: cfg.compaction_punch.map(|on| match on {
            true => basalt_backends::Punch::On,
            false => basalt_backends::Punch::Off,
        }),
        journal_slowdown_garbage_pct: cfg.journal_slowdown_garbage_pct,
        disk_min_free_pct: cfg.disk_min_free_pct,
        journal_one_read: cfg.journal_one_read,
        journal_fadvise_random: cfg.journal_fadvise_random,
        journal_skip_active_lock: cfg.journal_skip_active_lock,
        journal_preallocate: cfg.journal_preallocate,
        journal_release_written: cfg.journal_release_written,
        value_cache_refresh: cfg.value_cache_refresh,
        write_group: cfg.write_group,
        journal_sync_bytes: cfg.journal_sync_bytes,
        journal_fsync_bytes: cfg.journal_fsync_bytes,
        ledger_sync_bytes: cfg.ledger_sync_bytes,
        background_nice: cfg.background_nice,
        compaction_stream_bytes: cfg.compaction_stream_bytes,
        compaction_read_bytes_per_sec: cfg.compaction_read_bytes_per_sec,
        remove_bytes_per_sec: cfg.remove_bytes_per_sec,
        journal_flush: cfg.journal_flush,
        block_cache_bytes: cfg.block_cache_bytes,
        journal_direct_reads: cfg.journal_direct_reads,
        memtable_bytes: cfg.memtable_bytes,
        l0_merge_trigger: cfg.l0_merge_trigger,
        l1_files: cfg.l1_files,
        value_cache_bytes: cfg.value_cache_bytes,
        memory_budget_bytes: budget,
        rocksdb: cfg.rocksdb.clone(),
        ..basalt_backends::BackendConfig::default()
    }
}

/// Opens the stores of a run under `data_dir` (`instance.1` ...), every
/// backend (the default `leveled` included) through the `Backend` trait, so
/// a comparison runs the same code path for each.
pub fn open_targets(cfg: &BenchConfig, data_dir: &Path) -> Result<Vec<Arc<dyn KvTarget>>, String> {
    if !valid_backends().contains(&cfg.backend.as_str()) {
        return Err(format!(
            "unknown backend {}; valid: {}",
            cfg.backend,
            valid_backends().join(", ")
        ));
    }
    (1..=cfg.stores)
        .map(|i| {
            let dir = data_dir.join(format!("instance.{i}"));
            let bc = backend_config(cfg);
            let target = basalt_backends::open_backend(&cfg.backend, &dir, &bc)
                .map(|backend| Arc::new(BackendTarget { backend }) as Arc<dyn KvTarget>)
                .map_err(|e| e.to_string());
            target.map_err(|e| format!("opening {} store {}: {e}", cfg.backend, dir.display()))
        })
        .collect()
}

/// The index terms of `key` (see the module doc).
pub fn index_terms(key: &[u8], n: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
    let h = xxhash_rust::xxh3::xxh3_64(key);
    (0..n as u64)
        .map(|i| {
            let mut t = format!("{:04}|", (h.wrapping_add(i)) % 10_000).into_bytes();
            for b in key {
                t.extend_from_slice(format!("{b:02x}").as_bytes());
            }
            (INDEX_FIELD.to_vec(), t)
        })
        .collect()
}

/// The query range `index_query` asks for a generated key.
pub fn query_range(key: &[u8]) -> (Vec<u8>, Vec<u8>) {
    let d = xxhash_rust::xxh3::xxh3_64(key) % 10_000;
    (
        format!("{d:04}|").into_bytes(),
        format!("{d:04}|~").into_bytes(),
    )
}

/// The `basalt_embedded` driver of one worker.
pub struct EmbeddedDriver {
    targets: Vec<Arc<dyn KvTarget>>,
    bucket: Vec<u8>,
    index_terms: usize,
    user_bytes: Arc<AtomicU64>,
}

impl EmbeddedDriver {
    /// A driver over shared `targets`; adds key+value bytes of each
    /// successful write to `user_bytes`.
    pub fn new(
        targets: Vec<Arc<dyn KvTarget>>,
        cfg: &BenchConfig,
        user_bytes: Arc<AtomicU64>,
    ) -> Self {
        EmbeddedDriver {
            targets,
            bucket: cfg.bucket.clone(),
            index_terms: cfg.index_terms,
            user_bytes,
        }
    }

    fn target(&self, key: &[u8]) -> &dyn KvTarget {
        let i = if self.targets.len() == 1 {
            0
        } else {
            (xxhash_rust::xxh3::xxh3_64_with_seed(key, 7) % self.targets.len() as u64) as usize
        };
        &*self.targets[i]
    }
}

impl Driver for EmbeddedDriver {
    fn run(&mut self, op: OpKind, key: &[u8], value: &[u8]) -> Result<Outcome, DriverError> {
        self.run_op(op, key, value).map(|()| Outcome::Done)
    }
}

impl EmbeddedDriver {
    fn run_op(&mut self, op: OpKind, key: &[u8], value: &[u8]) -> Result<(), DriverError> {
        let t = self.target(key);
        let b = &self.bucket;
        match op {
            OpKind::Get => t.get(b, key).map(|_| ()),
            OpKind::Head => t.head(b, key).map(|_| ()),
            OpKind::Put | OpKind::Update => {
                let idx = index_terms(key, self.index_terms);
                if op == OpKind::Put {
                    t.put(b, key, value, &idx)?;
                } else {
                    t.update(b, key, value, &idx)?;
                }
                self.user_bytes
                    .fetch_add((key.len() + value.len()) as u64, Ordering::Relaxed);
                Ok(())
            }
            OpKind::Delete => t.delete(b, key, &index_terms(key, self.index_terms)),
            OpKind::IndexQuery => {
                let (s, e) = query_range(key);
                // Index entries live with their object: ask every store.
                for t in &self.targets {
                    t.index_query(b, INDEX_FIELD, &s, &e)?;
                }
                Ok(())
            }
            _ => Err(DriverError::new("unsupported_op")),
        }
    }
}

/// basho_bench's null driver: every op succeeds at once, except `an_error`
/// and `another_error`.
#[derive(Debug, Default)]
pub struct NullDriver;

impl Driver for NullDriver {
    fn run(&mut self, op: OpKind, _key: &[u8], _value: &[u8]) -> Result<Outcome, DriverError> {
        match op {
            // basho_bench's null driver: `{error, went_wrong}` and
            // `{error, {bad, things, happened}}`.
            OpKind::AnError => Err(DriverError::new("an_error")),
            OpKind::AnotherError => Err(DriverError::new("another_error")),
            _ => Ok(Outcome::Done),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_ops_round_trip() {
        let dir = tempfile::tempdir().expect("tmp");
        let (cfg, _) = BenchConfig::from_text(
            "{driver, basalt_embedded}.\n{basalt_stores, 2}.\n{operations, [{put,1},{index_query,1}]}.",
        )
        .expect("cfg");
        let targets = open_targets(&cfg, dir.path()).expect("open");
        let bytes = Arc::new(AtomicU64::new(0));
        let mut d = EmbeddedDriver::new(targets.clone(), &cfg, bytes.clone());
        for k in 0..50u32 {
            d.run(OpKind::Put, k.to_string().as_bytes(), b"value")
                .expect("put");
        }
        assert_eq!(bytes.load(Ordering::Relaxed), (90 + 50 * 5) as u64);
        d.run(OpKind::Get, b"7", b"").expect("get");
        d.run(OpKind::Update, b"7", b"v2").expect("update");
        d.run(OpKind::Head, b"nope", b"").expect("head");
        let (s, e) = query_range(b"7");
        let found: usize = targets
            .iter()
            .map(|t| t.index_query(b"test", INDEX_FIELD, &s, &e).expect("query"))
            .sum();
        assert!(found >= 1);
        d.run(OpKind::IndexQuery, b"7", b"").expect("query");
        d.run(OpKind::Delete, b"7", b"").expect("delete");
        let found: usize = targets
            .iter()
            .map(|t| t.index_query(b"test", INDEX_FIELD, &s, &e).expect("query"))
            .sum();
        assert_eq!(found, 0);
        for t in &targets {
            t.close().expect("close");
        }
    }

    #[test]
    fn rocksdb_keys_and_budget() {
        let (c, _) = BenchConfig::from_text(
            "{basalt_backend, rocksdb}.\n{basalt_memory_limit, \"1.5G\"}.\n\
             {basalt_rocksdb_compression, lz4}.\n{basalt_rocksdb_write_buffer, \"16M\"}.",
        )
        .expect("cfg");
        let bc = backend_config(&c);
        assert_eq!(
            bc.rocksdb.compression,
            basalt_backends::RocksCompression::Lz4
        );
        assert_eq!(bc.rocksdb.write_buffer_bytes, 16 << 20);
        // (1536 - 64 - 96) MiB for the one store, a third of it for blocks.
        assert_eq!(bc.memory_budget_bytes, Some(1376 << 20));
        assert_eq!(
            bc.rocksdb.block_cache_for(bc.memory_budget_bytes),
            (1376 << 20) / 3
        );
        assert!(BenchConfig::from_text("{basalt_rocksdb_compression, gzip}.").is_err());
    }
}
