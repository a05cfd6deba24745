//! `rocksdb` and `rocksdb-blob`: RocksDB 7.8 (Debian's `librocksdb`,
//! dynamically linked through the `rocksdb` crate `=0.20.1`), the
//! leveldb-family peer of Riak's eleveldb backend.
//!
//! * `rocksdb`: levelled compaction, whole objects in the LSM (as eleveldb
//!   keeps them), tuned as a careful operator would for a small box
//!   ([`crate::RocksTuning`]: block cache from the memory budget, bloom
//!   filters of 10 bits per key, dynamic level sizes, no compression,
//!   32 MiB write buffers, 2 background jobs, 1 MiB `bytes_per_sync`,
//!   compaction threads at the lowest CPU priority).
//! * `rocksdb-blob`: the same plus integrated BlobDB (`enable_blob_files`,
//!   `min_blob_size` 1 KiB, blob garbage collection during compaction): the
//!   strongest modern key/value-separation peer of leveled.
//!
//! The keyspace is the `ordered` layout (objects and 2i entries in one key
//! space, the engine's key encoding; index removals are deletes, written in
//! the same `WriteBatch` as the object). The database lives in `DIR/db`;
//! `DIR/STORE` (`basalt-rocksdb 1` or `basalt-rocksdb-blob 1`) and
//! `DIR/LOCK` are ours, so the two configurations refuse each other's
//! directories. `close` flushes the memtable so a reopen reads SSTs only.
//!
//! Capabilities: indexes, ordered_keys. Not `fold_heads`: heads are stored
//! with the value, so a head fold would read every value (with BlobDB, every
//! blob). Not `native_aae`.

use crate::ordered::{self, Kv, Op, ScanFn, View};
use crate::{claim_dir, BackendConfig};
use basalt_backend::{
    not_supported, Admin, BackendError, BackendSnapshot, BackendStats, Capabilities, Capability,
    FoldOptions, FoldOutcome, Head, HeadFn, IndexPage, IndexQuery, KeyFn, KeyRange, Object,
    ObjectFn, Reads, Result, Writes,
};
use rocksdb::{BlockBasedOptions, Cache, DBCompressionType, Options, ReadOptions, WriteBatch, DB};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// Name of the plain configuration.
pub const NAME: &str = "rocksdb";
/// Name of the BlobDB configuration.
pub const NAME_BLOB: &str = "rocksdb-blob";

/// Which RocksDB configuration.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RocksConfig {
    /// Levelled compaction, values in the LSM.
    Plain,
    /// Integrated BlobDB: values of 1 KiB or more in blob files.
    Blob,
}

impl RocksConfig {
    fn name(self) -> &'static str {
        match self {
            RocksConfig::Plain => NAME,
            RocksConfig::Blob => NAME_BLOB,
        }
    }
}

/// A RocksDB database behind the trait.
pub struct Rocks {
    db: DB,
    kind: RocksConfig,
    dir: PathBuf,
    sync: bool,
    version: AtomicU64,
    closed: AtomicBool,
    _lock: basalt_engine::lock::DirLock,
}

impl std::fmt::Debug for Rocks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Rocks")
            .field("kind", &self.kind)
            .field("dir", &self.dir)
            .finish()
    }
}

fn rerr(name: &'static str, path: &Path, e: rocksdb::Error) -> BackendError {
    match e.kind() {
        rocksdb::ErrorKind::Corruption => BackendError::corrupt(path, e.into_string()),
        _ => BackendError::Other {
            backend: name,
            message: format!("{}: {}", path.display(), e.into_string()),
        },
    }
}

impl Rocks {
    /// Opens (or creates) a database of configuration `kind` in `dir`.
    pub fn open(dir: &Path, kind: RocksConfig, config: &BackendConfig) -> Result<Rocks> {
        let lock = claim_dir(dir, kind.name())?;
        let t = &config.rocksdb;
        let mut opts = Options::default();
        opts.create_if_missing(true);
        opts.set_paranoid_checks(true);
        let jobs = i32::try_from(t.background_jobs.max(1)).unwrap_or(2);
        opts.increase_parallelism(jobs);
        opts.set_max_background_jobs(jobs);
        opts.set_write_buffer_size(usize::try_from(t.write_buffer_bytes).unwrap_or(32 << 20));
        opts.set_max_write_buffer_number(i32::try_from(t.max_write_buffers.max(2)).unwrap_or(2));
        opts.set_level_compaction_dynamic_level_bytes(t.dynamic_level_bytes);
        opts.set_bytes_per_sync(t.bytes_per_sync);
        if t.lower_compaction_priority {
            // The default Env's thread pools are the process's: this
            // lowers every store's compaction threads.
            let mut env = rocksdb::Env::new().map_err(|e| rerr(kind.name(), dir, e))?;
            env.lower_thread_pool_cpu_priority();
            opts.set_env(&env);
        }
        let compression = match t.compression {
            crate::RocksCompression::None => DBCompressionType::None,
            crate::RocksCompression::Lz4 => DBCompressionType::Lz4,
            crate::RocksCompression::Snappy => DBCompressionType::Snappy,
            crate::RocksCompression::Zstd => DBCompressionType::Zstd,
        };
        opts.set_compression_type(compression);
        opts.set_bottommost_compression_type(compression);
        let mut table = BlockBasedOptions::default();
        if t.bloom_bits_per_key > 0.0 {
            table.set_bloom_filter(t.bloom_bits_per_key, false);
        }
        match &config.rocksdb_block_cache {
            Some(shared) => {
                table.set_block_cache(&shared.cache);
                // Many stores in one process (a node's vnodes): their index
                // and filter blocks live in the shared cache too, so the
                // node's memory stays within its budget as the data grows
                // (outside it they grow with every SST, and 512 MiB nodes
                // of the NHS mix were OOM-killed). Level 0's stay pinned:
                // every read looks at them.
                table.set_cache_index_and_filter_blocks(true);
                table.set_pin_l0_filter_and_index_blocks_in_cache(true);
            }
            None => {
                let cache_bytes = t.block_cache_for(config.memory_budget_bytes);
                let cache = Cache::new_lru_cache(usize::try_from(cache_bytes).unwrap_or(32 << 20))
                    .map_err(|e| rerr(kind.name(), dir, e))?;
                table.set_block_cache(&cache);
            }
        }
        opts.set_block_based_table_factory(&table);
        if config.test_min {
            opts.set_write_buffer_size(64 * 1024);
            opts.set_target_file_size_base(64 * 1024);
            opts.set_max_bytes_for_level_base(256 * 1024);
        }
        if kind == RocksConfig::Blob {
            opts.set_enable_blob_files(true);
            opts.set_min_blob_size(1024);
            opts.set_enable_blob_gc(true);
            opts.set_blob_compression_type(compression);
            if config.test_min {
                opts.set_blob_file_size(256 * 1024);
            }
        }
        let path = dir.join("db");
        let db = DB::open(&opts, &path).map_err(|e| rerr(kind.name(), &path, e))?;
        Ok(Rocks {
            db,
            kind,
            dir: dir.to_path_buf(),
            sync: config.sync,
            version: AtomicU64::new(crate::now_us()),
            closed: AtomicBool::new(false),
            _lock: lock,
        })
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(BackendError::Closed(format!(
                "{} backend is closed",
                self.kind.name()
            )));
        }
        Ok(())
    }

    fn err(&self, e: rocksdb::Error) -> BackendError {
        rerr(self.kind.name(), &self.dir.join("db"), e)
    }

    fn apply(&self, ops: Vec<Op>, sync: bool) -> Result<()> {
        self.check_open()?;
        let mut batch = WriteBatch::default();
        for op in ops {
            match op {
                Op::Put(k, v) => batch.put(k, v),
                Op::Delete(k) => batch.delete(k),
            }
        }
        let mut wo = rocksdb::WriteOptions::default();
        wo.set_sync(sync || self.sync);
        self.db.write_opt(batch, &wo).map_err(|e| self.err(e))
    }

    fn live(&self) -> Result<Live<'_>> {
        self.check_open()?;
        Ok(Live(self))
    }
}

/// The live database as a [`Kv`].
struct Live<'a>(&'a Rocks);

fn scan_iter(
    mut it: rocksdb::DBRawIteratorWithThreadMode<'_, DB>,
    lo: &[u8],
    f: &mut ScanFn<'_>,
) -> std::result::Result<Result<()>, rocksdb::Error> {
    it.seek(lo);
    while it.valid() {
        let (Some(k), Some(v)) = (it.key(), it.value()) else {
            break;
        };
        match f(k, v) {
            Ok(flow) if flow.is_break() => return Ok(Ok(())),
            Ok(_) => {}
            Err(e) => return Ok(Err(e)),
        }
        it.next();
    }
    it.status()?;
    Ok(Ok(()))
}

fn read_opts(hi: Option<&[u8]>) -> ReadOptions {
    let mut ro = ReadOptions::default();
    ro.set_verify_checksums(true);
    if let Some(h) = hi {
        ro.set_iterate_upper_bound(h.to_vec());
    }
    ro
}

impl Kv for Live<'_> {
    fn get_raw(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.0.db.get(key).map_err(|e| self.0.err(e))
    }
    fn scan(&self, lo: &[u8], hi: Option<&[u8]>, f: &mut ScanFn<'_>) -> Result<()> {
        let it = self.0.db.raw_iterator_opt(read_opts(hi));
        scan_iter(it, lo, f).map_err(|e| self.0.err(e))?
    }
    fn path(&self) -> PathBuf {
        self.0.dir.join("db")
    }
}

/// A RocksDB snapshot (it borrows the database).
struct RocksSnap<'a> {
    rocks: &'a Rocks,
    snap: rocksdb::SnapshotWithThreadMode<'a, DB>,
}

impl Kv for RocksSnap<'_> {
    fn get_raw(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        self.rocks.check_open()?;
        self.snap.get(key).map_err(|e| self.rocks.err(e))
    }
    fn scan(&self, lo: &[u8], hi: Option<&[u8]>, f: &mut ScanFn<'_>) -> Result<()> {
        self.rocks.check_open()?;
        let it = self.snap.raw_iterator_opt(read_opts(hi));
        scan_iter(it, lo, f).map_err(|e| self.rocks.err(e))?
    }
    fn path(&self) -> PathBuf {
        self.rocks.dir.join("db")
    }
}

impl BackendSnapshot for RocksSnap<'_> {}

impl Reads for RocksSnap<'_> {
    fn get(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Object>> {
        View(self).get(bucket, key)
    }
    fn head(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Head>> {
        View(self).head(bucket, key)
    }
    fn fold_keys(
        &self,
        bucket: &[u8],
        range: Option<&KeyRange>,
        f: &mut KeyFn<'_>,
    ) -> Result<FoldOutcome> {
        View(self).fold_keys(bucket, range, f)
    }
    fn fold_heads(
        &self,
        _bucket: Option<&[u8]>,
        _range: Option<&KeyRange>,
        _opts: &FoldOptions,
        _f: &mut HeadFn<'_>,
    ) -> Result<FoldOutcome> {
        Err(not_supported(self.rocks.kind.name(), Capability::FoldHeads))
    }
    fn fold_objects(
        &self,
        bucket: &[u8],
        range: Option<&KeyRange>,
        f: &mut ObjectFn<'_>,
    ) -> Result<FoldOutcome> {
        View(self).fold_objects(bucket, range, f)
    }
    fn list_buckets(&self) -> Result<Vec<Vec<u8>>> {
        View(self).list_buckets()
    }
}

// get and head read the live DB (no snapshot); fold_heads is NotSupported
// whatever the state; the other reads go through a snapshot.
impl Reads for Rocks {
    fn get(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Object>> {
        View(&self.live()?).get(bucket, key)
    }

    fn head(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Head>> {
        View(&self.live()?).head(bucket, key)
    }

    fn fold_heads(
        &self,
        _bucket: Option<&[u8]>,
        _range: Option<&KeyRange>,
        _opts: &FoldOptions,
        _f: &mut HeadFn<'_>,
    ) -> Result<FoldOutcome> {
        Err(not_supported(self.kind.name(), Capability::FoldHeads))
    }

    basalt_backend::snapshot_reads!(fold_keys, fold_objects, list_buckets);
}

impl Writes for Rocks {
    fn put(
        &self,
        bucket: &[u8],
        key: &[u8],
        value: &[u8],
        metadata: &[u8],
        opts: &basalt_backend::WriteOptions,
    ) -> Result<()> {
        let v = self.version.fetch_add(1, Ordering::AcqRel) + 1;
        self.apply(
            ordered::put_ops(bucket, key, value, metadata, opts, v)?,
            opts.sync,
        )
    }

    fn delete(&self, bucket: &[u8], key: &[u8], opts: &basalt_backend::WriteOptions) -> Result<()> {
        self.apply(ordered::delete_ops(bucket, key, opts)?, opts.sync)
    }

    fn index_query(&self, q: &IndexQuery) -> Result<IndexPage> {
        self.check_open()?;
        let snap = RocksSnap {
            rocks: self,
            snap: self.db.snapshot(),
        };
        View(&snap).index_query(q)
    }
}

impl Admin for Rocks {
    fn name(&self) -> &'static str {
        self.kind.name()
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            indexes: true,
            fold_heads: false,
            ordered_keys: true,
            native_aae: false,
        }
    }

    fn snapshot(&self) -> Result<Box<dyn BackendSnapshot + '_>> {
        self.check_open()?;
        Ok(Box::new(RocksSnap {
            rocks: self,
            snap: self.db.snapshot(),
        }))
    }

    fn tictac_tree(&self) -> Result<Vec<u8>> {
        Err(not_supported(self.kind.name(), Capability::NativeAae))
    }

    fn stats(&self) -> Result<BackendStats> {
        self.check_open()?;
        let mut counters = Vec::new();
        for p in [
            "rocksdb.estimate-num-keys",
            "rocksdb.total-sst-files-size",
            "rocksdb.live-blob-file-size",
            "rocksdb.num-running-compactions",
            "rocksdb.actual-delayed-write-rate",
        ] {
            if let Ok(Some(v)) = self.db.property_int_value(p) {
                counters.push((p.trim_start_matches("rocksdb.").to_string(), v));
            }
        }
        Ok(BackendStats {
            backend: self.kind.name(),
            counters,
            disk_bytes: crate::disk_usage(&self.dir),
        })
    }

    fn sync(&self) -> Result<()> {
        self.check_open()?;
        self.db.flush_wal(true).map_err(|e| self.err(e))
    }

    fn close(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Ok(());
        }
        self.db.flush().map_err(|e| self.err(e))?;
        self.closed.store(true, Ordering::Release);
        Ok(())
    }
}

impl Drop for Rocks {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::error!(target: "basalt::backends", "R0001 rocksdb close on drop failed: {e}");
        }
    }
}
