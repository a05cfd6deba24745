//! `memory`: an ordered in-memory backend (tests, and Riak's memory backend
//! use cases: caches, ephemeral data). Nothing is persisted.
//!
//! One `BTreeMap` of encoded keys (the `ordered` layout shared with RocksDB)
//! behind an `Arc` under a `RwLock`. A snapshot clones the `Arc` (O(1)); the
//! next write copies the map if a snapshot still shares it
//! (copy-on-write), so a snapshot costs one copy of the map at most.
//! Capabilities: indexes, fold_heads, ordered_keys.

use crate::ordered::{self, Kv, Op, ScanFn, View};
use basalt_backend::{
    not_supported, Admin, BackendError, BackendSnapshot, BackendStats, Cached, Capabilities,
    Capability, FoldOptions, FoldOutcome, Head, HeadFn, IndexPage, IndexQuery, KeyFn, KeyRange,
    Object, ObjectFn, Reads, Result, WriteOptions, Writes,
};
use parking_lot::RwLock;
use std::collections::BTreeMap;
use std::ops::Bound;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The backend's name.
pub const NAME: &str = "memory";

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// The in-memory backend.
#[derive(Debug, Default)]
pub struct Memory {
    map: RwLock<Arc<Map>>,
    version: AtomicU64,
    closed: AtomicBool,
}

impl Memory {
    /// An empty store.
    pub fn new() -> Memory {
        Memory::default()
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(BackendError::Closed("memory backend is closed".into()));
        }
        Ok(())
    }

    fn apply(&self, ops: Vec<Op>) -> Result<()> {
        self.check_open()?;
        let mut guard = self.map.write();
        let map = Arc::make_mut(&mut guard);
        for op in ops {
            match op {
                Op::Put(k, v) => {
                    map.insert(k, v);
                }
                Op::Delete(k) => {
                    map.remove(&k);
                }
            }
        }
        Ok(())
    }

    fn current(&self) -> Result<Frozen> {
        self.check_open()?;
        Ok(Frozen(Arc::clone(&self.map.read())))
    }
}

/// An immutable map: the read side of the backend and of its snapshots.
struct Frozen(Arc<Map>);

impl Kv for Frozen {
    fn get_raw(&self, key: &[u8]) -> Result<Option<Vec<u8>>> {
        Ok(self.0.get(key).cloned())
    }
    fn scan(&self, lo: &[u8], hi: Option<&[u8]>, f: &mut ScanFn<'_>) -> Result<()> {
        let upper = hi.map_or(Bound::Unbounded, Bound::Excluded);
        for (k, v) in self.0.range::<[u8], _>((Bound::Included(lo), upper)) {
            if f(k, v)?.is_break() {
                break;
            }
        }
        Ok(())
    }
    fn path(&self) -> std::path::PathBuf {
        "(memory)".into()
    }
}

/// A snapshot: the shared map of its moment.
struct MemSnapshot(Frozen);

impl BackendSnapshot for MemSnapshot {}

impl Reads for MemSnapshot {
    fn get(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Object>> {
        View(&self.0).get(bucket, key)
    }
    fn head(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Head>> {
        View(&self.0).head(bucket, key)
    }
    fn fold_keys(
        &self,
        bucket: &[u8],
        range: Option<&KeyRange>,
        f: &mut KeyFn<'_>,
    ) -> Result<FoldOutcome> {
        View(&self.0).fold_keys(bucket, range, f)
    }
    fn fold_heads(
        &self,
        bucket: Option<&[u8]>,
        range: Option<&KeyRange>,
        opts: &FoldOptions,
        f: &mut HeadFn<'_>,
    ) -> Result<FoldOutcome> {
        View(&self.0).fold_heads(bucket, range, opts, f)
    }
    fn fold_objects(
        &self,
        bucket: &[u8],
        range: Option<&KeyRange>,
        f: &mut ObjectFn<'_>,
    ) -> Result<FoldOutcome> {
        View(&self.0).fold_objects(bucket, range, f)
    }
    fn list_buckets(&self) -> Result<Vec<Vec<u8>>> {
        View(&self.0).list_buckets()
    }
}

// get and head read the current map without boxing a snapshot; the folds
// and the listing go through one.
impl Reads for Memory {
    fn get(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Object>> {
        View(&self.current()?).get(bucket, key)
    }

    fn head(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Head>> {
        View(&self.current()?).head(bucket, key)
    }

    // Everything is in memory.
    fn get_cached(&self, bucket: &[u8], key: &[u8]) -> Result<Cached<Object>> {
        self.get(bucket, key).map(Cached::Hit)
    }

    fn head_cached(&self, bucket: &[u8], key: &[u8]) -> Result<Cached<Head>> {
        self.head(bucket, key).map(Cached::Hit)
    }

    basalt_backend::snapshot_reads!(fold_keys, fold_heads, fold_objects, list_buckets);
}

impl Writes for Memory {
    fn put(
        &self,
        bucket: &[u8],
        key: &[u8],
        value: &[u8],
        metadata: &[u8],
        opts: &WriteOptions,
    ) -> Result<()> {
        let v = self.version.fetch_add(1, Ordering::AcqRel) + 1;
        self.apply(ordered::put_ops(bucket, key, value, metadata, opts, v)?)
    }

    /// Memory only: a put never waits.
    fn put_would_wait(&self, _bytes: u64) -> bool {
        false
    }

    fn delete(&self, bucket: &[u8], key: &[u8], opts: &WriteOptions) -> Result<()> {
        self.version.fetch_add(1, Ordering::AcqRel);
        self.apply(ordered::delete_ops(bucket, key, opts)?)
    }

    fn index_query(&self, q: &IndexQuery) -> Result<IndexPage> {
        View(&self.current()?).index_query(q)
    }
}

impl Admin for Memory {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities {
            indexes: true,
            fold_heads: true,
            ordered_keys: true,
            native_aae: false,
        }
    }

    fn snapshot(&self) -> Result<Box<dyn BackendSnapshot + '_>> {
        Ok(Box::new(MemSnapshot(self.current()?)))
    }

    fn tictac_tree(&self) -> Result<Vec<u8>> {
        Err(not_supported(NAME, Capability::NativeAae))
    }

    fn stats(&self) -> Result<BackendStats> {
        let m = self.current()?;
        let objects = m.0.keys().filter(|k| k.first() == Some(&b'o')).count() as u64;
        Ok(BackendStats {
            backend: NAME,
            counters: vec![
                ("objects".into(), objects),
                ("index_entries".into(), m.0.len() as u64 - objects),
            ],
            disk_bytes: 0,
        })
    }

    fn sync(&self) -> Result<()> {
        self.check_open()
    }

    fn close(&self) -> Result<()> {
        self.closed.store(true, Ordering::Release);
        Ok(())
    }
}
