//! `leveled`: Basalt's own engine (`basalt_engine::Store`), the default
//! backend. Values in the journal, keys and metadata in the ledger LSM.
//!
//! Capabilities: indexes, fold_heads, ordered_keys; native_aae when opened
//! with `BackendConfig::tictac` (the engine then keeps a tictac tree on
//! every write). The directory layout and formats are the engine's
//! (`DIR/STORE` = `basalt-leveled 1`).

use crate::{from_engine, BackendConfig};
use basalt_backend::{
    not_supported, Admin, BackendSnapshot, BackendStats, Cached, Capabilities, Capability,
    FoldOptions, FoldOutcome, Head, HeadFn, IndexPage, IndexQuery, KeyFn, KeyRange, Object,
    ObjectFn, Reads, Result, WriteOptions, Writes,
};
use basalt_engine as engine;
use std::path::Path;

/// The backend's name.
pub const NAME: &str = "leveled";

/// The engine behind the trait.
#[derive(Debug)]
pub struct Leveled {
    store: engine::Store,
    native_aae: bool,
}

fn put_opts(o: &WriteOptions) -> engine::PutOptions {
    engine::PutOptions {
        sync: o.sync.then_some(engine::SyncStrategy::Sync),
        expires_at: o.expires_at,
        last_modified_us: o.last_modified_us,
        index: o.index.clone(),
    }
}

impl Leveled {
    /// Opens (or creates) the engine's store in `dir`.
    pub fn open(dir: &Path, config: &BackendConfig) -> Result<Leveled> {
        let mut c = if config.test_min {
            engine::Config::test_min(dir)
        } else {
            engine::Config::new(dir)
        };
        if config.sync {
            c.sync = engine::SyncStrategy::Sync;
        }
        c.tictac = config.tictac;
        if let Some(n) = config.compaction_runs_per_day {
            c.compaction_runs_per_day = n;
        }
        if let Some(p) = config.compaction_max_garbage_pct {
            c.compaction_max_garbage_pct = p;
        }
        if let Some(p) = config.compaction_punch {
            c.compaction_punch = p;
        }
        if let Some(p) = config.disk_min_free_pct {
            c.disk_min_free_pct = p;
            if c.disk_low_free_pct > 0.0 && c.disk_low_free_pct < p {
                c.disk_low_free_pct = p;
            }
        }
        if let Some(p) = config.journal_slowdown_garbage_pct {
            c.journal_slowdown_garbage_pct = p;
        }
        if let Some(b) = config.journal_one_read {
            c.journal_one_read = b;
        }
        if let Some(b) = config.journal_fadvise_random {
            c.journal_fadvise_random = b;
        }
        if let Some(b) = config.journal_skip_active_lock {
            c.journal_skip_active_lock = b;
        }
        if let Some(b) = config.journal_preallocate {
            c.journal_preallocate = b;
        }
        if let Some(n) = config.journal_file_bytes {
            c.journal_file_bytes = n;
        }
        if let Some(b) = config.journal_release_written {
            c.journal_release_written = b;
        }
        if let Some(b) = config.value_cache_refresh {
            c.value_cache_refresh = b;
        }
        if let Some(b) = config.write_group {
            c.write_group = b;
        }
        if let Some(m) = config.journal_flush {
            c.journal_flush = m;
        }
        if let Some(n) = config.compaction_read_bytes_per_sec {
            c.compaction_read_bytes_per_sec = n;
        }
        if let Some(n) = config.remove_bytes_per_sec {
            c.remove_bytes_per_sec = n;
        }
        if let Some(n) = config.compaction_stream_bytes {
            c.compaction_stream_bytes = n;
        }
        if let Some(n) = config.journal_sync_bytes {
            c.journal_sync_bytes = n;
        }
        if let Some(n) = config.journal_fsync_bytes {
            c.journal_fsync_bytes = n;
        }
        if let Some(n) = config.ledger_sync_bytes {
            c.ledger_sync_bytes = n;
        }
        if let Some(n) = config.background_nice {
            c.background_nice = n;
        }
        if let Some(n) = config.block_cache_bytes {
            c.block_cache_bytes = n;
        }
        if let Some(n) = config.memtable_journal_bytes {
            c.memtable_journal_bytes = n;
        }
        if let Some(n) = config.memtable_bytes {
            c.memtable_bytes = usize::try_from(n).unwrap_or(usize::MAX);
        }
        if let Some(n) = config.l0_merge_trigger {
            c.l0_merge_trigger = n;
        }
        if let Some(n) = config.l1_files {
            c.l1_files = n;
        }
        c.block_cache = config.block_cache.clone();
        c.memtable_budget = config.memtable_budget.clone();
        c.disk_pace = config.disk_pace.clone();
        c.compaction_slots = config.compaction_slots.clone();
        c.index_terms = config.index_terms.clone();
        c.value_cache_bytes = config.leveled_value_cache_bytes();
        c.value_cache = config.value_cache.clone();
        c.journal_direct_reads = config.leveled_direct_reads();
        let store = engine::Store::open(c).map_err(from_engine)?;
        Ok(Leveled {
            store,
            native_aae: config.tictac.is_some(),
        })
    }

    /// The engine's store, for engine-specific operations.
    pub fn store(&self) -> &engine::Store {
        &self.store
    }
}

struct LevSnapshot(engine::Snapshot);

impl BackendSnapshot for LevSnapshot {}

impl Reads for LevSnapshot {
    fn get(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Object>> {
        self.0.get(bucket, key).map_err(from_engine)
    }
    fn head(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Head>> {
        self.0.head(bucket, key).map_err(from_engine)
    }
    fn fold_keys(
        &self,
        bucket: &[u8],
        r: Option<&KeyRange>,
        f: &mut KeyFn<'_>,
    ) -> Result<FoldOutcome> {
        self.0.fold_keys(bucket, r, f).map_err(from_engine)
    }
    fn fold_heads(
        &self,
        bucket: Option<&[u8]>,
        r: Option<&KeyRange>,
        opts: &FoldOptions,
        f: &mut HeadFn<'_>,
    ) -> Result<FoldOutcome> {
        self.0.fold_heads(bucket, r, opts, f).map_err(from_engine)
    }
    fn fold_objects(
        &self,
        bucket: &[u8],
        r: Option<&KeyRange>,
        f: &mut ObjectFn<'_>,
    ) -> Result<FoldOutcome> {
        self.0.fold_objects(bucket, r, f).map_err(from_engine)
    }
    fn list_buckets(&self) -> Result<Vec<Vec<u8>>> {
        self.0.list_buckets().map_err(from_engine)
    }
}

// Every read is direct: get and head are the hot path, and the folds take
// a snapshot of only the bucket they read.
impl Reads for Leveled {
    fn get(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Object>> {
        self.store.get(bucket, key).map_err(from_engine)
    }

    fn head(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Head>> {
        self.store.head(bucket, key).map_err(from_engine)
    }

    fn get_cached(&self, bucket: &[u8], key: &[u8]) -> Result<Cached<Object>> {
        self.store.get_cached(bucket, key).map_err(from_engine)
    }

    fn head_cached(&self, bucket: &[u8], key: &[u8]) -> Result<Cached<Head>> {
        self.store.head_cached(bucket, key).map_err(from_engine)
    }

    fn fold_keys(
        &self,
        bucket: &[u8],
        r: Option<&KeyRange>,
        f: &mut KeyFn<'_>,
    ) -> Result<FoldOutcome> {
        let snap = self
            .store
            .snapshot(engine::SnapshotOptions::bucket(bucket))
            .map_err(from_engine)?;
        LevSnapshot(snap).fold_keys(bucket, r, f)
    }

    fn fold_heads(
        &self,
        bucket: Option<&[u8]>,
        r: Option<&KeyRange>,
        opts: &FoldOptions,
        f: &mut HeadFn<'_>,
    ) -> Result<FoldOutcome> {
        self.store
            .fold_heads(bucket, r, opts, f)
            .map_err(from_engine)
    }

    fn fold_objects(
        &self,
        bucket: &[u8],
        r: Option<&KeyRange>,
        f: &mut ObjectFn<'_>,
    ) -> Result<FoldOutcome> {
        self.store.fold_objects(bucket, r, f).map_err(from_engine)
    }

    fn list_buckets(&self) -> Result<Vec<Vec<u8>>> {
        self.store.list_buckets().map_err(from_engine)
    }
}

impl Writes for Leveled {
    fn put(
        &self,
        bucket: &[u8],
        key: &[u8],
        value: &[u8],
        metadata: &[u8],
        opts: &WriteOptions,
    ) -> Result<()> {
        self.store
            .put_with(bucket, key, value, metadata, &put_opts(opts))
            .map(|_| ())
            .map_err(from_engine)
    }

    fn put_would_wait(&self, bytes: u64) -> bool {
        self.store.write_would_wait(bytes)
    }

    fn delete(&self, bucket: &[u8], key: &[u8], opts: &WriteOptions) -> Result<()> {
        self.store
            .delete_with(bucket, key, &put_opts(opts))
            .map(|_| ())
            .map_err(from_engine)
    }

    fn index_query(&self, q: &IndexQuery) -> Result<IndexPage> {
        q.check_resume()?;
        self.store.index_query(q).map_err(from_engine)
    }
}

impl Admin for Leveled {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            indexes: true,
            fold_heads: true,
            ordered_keys: true,
            native_aae: self.native_aae,
        }
    }

    fn snapshot(&self) -> Result<Box<dyn BackendSnapshot + '_>> {
        let snap = self
            .store
            .snapshot(engine::SnapshotOptions::all())
            .map_err(from_engine)?;
        Ok(Box::new(LevSnapshot(snap)))
    }

    fn tictac_tree(&self) -> Result<Vec<u8>> {
        match self.store.tictac_tree() {
            Some(t) => Ok(t.export()),
            None => Err(not_supported(NAME, Capability::NativeAae)),
        }
    }

    fn stats(&self) -> Result<BackendStats> {
        let s = self.store.stats();
        let mut counters: Vec<(String, u64)> = s
            .counters
            .iter()
            .map(|(n, v)| ((*n).to_string(), *v))
            .collect();
        counters.push(("persisted_sqn".into(), s.persisted_sqn));
        counters.push(("last_sqn".into(), s.last_sqn));
        counters.push(("journal_files".into(), s.journal_files.len() as u64));
        counters.push((
            "journal_bytes".into(),
            s.journal_files.iter().map(|f| f.size_bytes).sum(),
        ));
        // The ledger's shape: bytes and files in all, files per level.
        counters.push((
            "ledger_bytes".into(),
            s.levels.iter().map(|l| l.bytes).sum(),
        ));
        counters.push((
            "ledger_files".into(),
            s.levels.iter().map(|l| l.files as u64).sum(),
        ));
        for (i, l) in s.levels.iter().enumerate() {
            counters.push((format!("ledger_l{i}_files"), l.files as u64));
        }
        counters.push(("ledger_memtable_entries".into(), s.memtable_entries as u64));
        if let Some(d) = &s.disk {
            counters.push(("disk_free_bytes".into(), d.free_bytes));
            counters.push(("disk_total_bytes".into(), d.total_bytes));
        }
        counters.push(("ledger_memtable_bytes".into(), s.memtable_bytes));
        counters.push(("memtable_budget_bytes".into(), s.memtable_budget.0));
        counters.push(("memtable_budget_used_bytes".into(), s.memtable_budget.1));
        counters.push(("memtable_budget_freezes".into(), s.memtable_budget.2));
        counters.push(("block_cache_capacity_bytes".into(), s.block_cache.0));
        counters.push(("block_cache_bytes".into(), s.block_cache.1));
        counters.push(("value_cache_capacity_bytes".into(), s.value_cache.0));
        counters.push(("value_cache_bytes".into(), s.value_cache.1));
        let (closed, garbage) = s
            .journal_garbage
            .map_or((0, 0), |e| (e.closed_bytes, e.garbage_bytes));
        counters.push(("journal_closed_bytes_estimated".into(), closed));
        counters.push(("journal_garbage_bytes_estimated".into(), garbage));
        counters.push(("removal_queue_bytes".into(), s.removal_queue.0));
        counters.push(("removal_queue_files".into(), s.removal_queue.1 as u64));
        Ok(BackendStats {
            backend: NAME,
            counters,
            disk_bytes: crate::disk_usage(&self.store.config().dir),
        })
    }

    fn take_wait_maxima(&self) -> Vec<(String, u64)> {
        self.store
            .take_wait_maxima()
            .into_iter()
            .map(|(n, v)| (n.to_string(), v))
            .collect()
    }

    fn sync(&self) -> Result<()> {
        self.store.sync().map_err(from_engine)
    }

    fn close(&self) -> Result<()> {
        self.store.close().map_err(from_engine)
    }
}
