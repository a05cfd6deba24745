//! The store's read path: HEAD and GET (ledger, then journal), snapshots,
//! folds, key and bucket listing, tictac trees and secondary-index
//! queries.

use super::{check_name, now_secs, Store, GET_RETRIES_MAX};
use crate::entry::{value_hash, LedgerValue};
use crate::error::{Error, Result};
use crate::index::{self, IndexPage, IndexQuery};
use crate::key;
use crate::snapshot::{Pinned, Snapshot, SnapshotOptions, ValueSource};
use crate::stats::Stats;
use crate::tictac::{LiveTree, TicTacTree};
use crate::types::{head_of, Head, Object};
use basalt_backend::Cached;
use std::sync::Arc;

impl Store {
    fn live_entry(&self, lkey: &[u8]) -> Result<Option<LedgerValue>> {
        Ok(self.ledger.get(lkey)?.filter(|v| !v.is_dead(now_secs())))
    }

    /// The metadata of (`bucket`, `key`), from the ledger only.
    pub fn head(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Head>> {
        self.check_open()?;
        check_name("bucket", bucket)?;
        check_name("key", key)?;
        let lkey = key::object(bucket, key);
        let got = self.live_entry(&lkey)?.map(head_of);
        Stats::incr(&self.stats.heads);
        Ok(got)
    }

    /// The value and metadata of (`bucket`, `key`).
    pub fn get(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Object>> {
        let start = std::time::Instant::now();
        let waited = crate::stats::waited_here_ns();
        let got = self.get_timed(bucket, key);
        self.count_get(start, waited);
        got
    }

    /// [`Store::get`] if it can be answered without waiting for the disk
    /// or a writer (the ledger entry from memory, the block cache or the
    /// page cache, the value from the value cache or the page cache), else
    /// [`Cached::Miss`]; see [`crate::nowait`]. Only a hit counts as a GET.
    pub fn get_cached(&self, bucket: &[u8], key: &[u8]) -> Result<Cached<Object>> {
        let start = std::time::Instant::now();
        let waited = crate::stats::waited_here_ns();
        let got = self.no_wait(|| self.get_timed(bucket, key));
        if !matches!(got, Ok(Cached::Miss)) {
            self.count_get(start, waited);
        }
        got
    }

    /// [`Store::head`] under [`Store::get_cached`]'s rules.
    pub fn head_cached(&self, bucket: &[u8], key: &[u8]) -> Result<Cached<Head>> {
        self.no_wait(|| self.head(bucket, key))
    }

    /// Runs `read` in no-wait mode; a refused step is a miss.
    fn no_wait<T>(&self, read: impl FnOnce() -> Result<Option<T>>) -> Result<Cached<T>> {
        let got = {
            let _nowait = crate::nowait::enter();
            read()
        };
        match got {
            Err(e) if crate::nowait::is_blocked(&e) => {
                Stats::incr(&self.stats.get_nowait_misses);
                Ok(Cached::Miss)
            }
            got => got.map(Cached::Hit),
        }
    }

    /// Counts a GET that began at `start` (`waited`: this thread's wait
    /// counter then) in `gets`, `op_get` and `op_get_unwaited`.
    fn count_get(&self, start: std::time::Instant, waited: u64) {
        let total = start.elapsed();
        let inside = crate::stats::waited_here_ns().wrapping_sub(waited);
        Stats::incr(&self.stats.gets);
        self.stats.op_get.record(total);
        self.stats
            .op_get_unwaited
            .record(total.saturating_sub(std::time::Duration::from_nanos(inside)));
    }

    /// [`Store::get`] without its counters (`gets`, `op_get`).
    fn get_timed(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Object>> {
        self.check_open()?;
        check_name("bucket", bucket)?;
        check_name("key", key)?;
        let lkey = key::object(bucket, key);
        // Journal compaction may drop a record between our ledger read and
        // our journal read if a newer write replaced it meanwhile; then the
        // ledger has moved on and we read again. A record that is still
        // current and missing is damage.
        let mut attempts = 0;
        loop {
            let Some(entry) = self.live_entry(&lkey)? else {
                return Ok(None);
            };
            if let Some(rec) = self.journal.fetch(entry.sqn, &lkey)? {
                if value_hash(&rec.value) != entry.value_hash {
                    return Err(Error::corrupt(
                        self.config.dir.join("journal"),
                        0,
                        format!("value of sqn {} does not match its ledger hash", entry.sqn),
                    ));
                }
                return Ok(Some(Object {
                    value: rec.value,
                    head: head_of(entry),
                }));
            }
            let moved_on = self
                .live_entry(&lkey)?
                .is_none_or(|now| now.sqn != entry.sqn);
            attempts += 1;
            if !moved_on || attempts >= GET_RETRIES_MAX {
                return Err(Error::corrupt(
                    self.config.dir.join("journal"),
                    0,
                    format!(
                        "ledger points at sqn {} for key {} but the journal has no such record",
                        entry.sqn,
                        key::display_bytes(key)
                    ),
                ));
            }
        }
    }

    /// Calls `f` with each live key of `bucket` in key order, on a snapshot;
    /// stops early if `f` returns false.
    pub fn fold_keys(&self, bucket: &[u8], f: &mut dyn FnMut(&[u8]) -> bool) -> Result<()> {
        let snap = self.snapshot(SnapshotOptions::bucket(bucket))?;
        snap.fold_keys(bucket, None, |k| {
            if f(k) {
                std::ops::ControlFlow::Continue(())
            } else {
                std::ops::ControlFlow::Break(())
            }
        })?;
        Ok(())
    }

    /// Takes a [`Snapshot`]: a cheap point-in-time view for reads and folds
    /// while writes continue (see [`crate::snapshot`]).
    pub fn snapshot(&self, opts: SnapshotOptions) -> Result<Snapshot> {
        self.snapshot_with(opts, || {})
    }

    /// Takes a snapshot, running `at_point` under the write lock at the
    /// snapshot's exact point in time.
    fn snapshot_with(&self, opts: SnapshotOptions, at_point: impl FnOnce()) -> Result<Snapshot> {
        self.check_open()?;
        let timeout = opts.timeout.unwrap_or(self.config.snapshot_timeout);
        let (view, sqn) = {
            let w = self.write.lock();
            let view = self.ledger.frozen_view();
            at_point();
            (view, w.next_sqn.saturating_sub(1))
        };
        let pinned = Pinned {
            view,
            values: self.value_source(),
            dir: self.config.dir.clone(),
        };
        self.snapshots.register(pinned, sqn, opts.range, timeout)
    }

    /// Where snapshots read values from (the one place to change when the
    /// journal offers pinned views).
    fn value_source(&self) -> Arc<dyn ValueSource> {
        // A view pins the journal files of this moment, so journal
        // compaction cannot take a snapshot's values away.
        Arc::new(self.journal.view())
    }

    /// [`Snapshot::fold_heads`] on a new snapshot.
    pub fn fold_heads(
        &self,
        bucket: Option<&[u8]>,
        range: Option<&crate::types::KeyRange>,
        opts: &crate::fold::FoldOptions,
        f: impl FnMut(&[u8], &[u8], &Head) -> std::ops::ControlFlow<()>,
    ) -> Result<crate::fold::FoldOutcome> {
        let so = bucket.map_or_else(SnapshotOptions::all, SnapshotOptions::bucket);
        self.snapshot(so)?.fold_heads(bucket, range, opts, f)
    }

    /// [`Snapshot::fold_objects`] on a new snapshot.
    pub fn fold_objects(
        &self,
        bucket: &[u8],
        range: Option<&crate::types::KeyRange>,
        f: impl FnMut(&[u8], &[u8], Object) -> std::ops::ControlFlow<()>,
    ) -> Result<crate::fold::FoldOutcome> {
        self.snapshot(SnapshotOptions::bucket(bucket))?
            .fold_objects(bucket, range, f)
    }

    /// Every bucket holding a live object, sorted (on a short-lived snapshot).
    pub fn list_buckets(&self) -> Result<Vec<Vec<u8>>> {
        let opts = SnapshotOptions::all().with_timeout(self.config.snapshot_timeout_short);
        self.snapshot(opts)?.list_buckets()
    }

    /// A copy of the store's tictac tree (`None` unless `Config::tictac`).
    pub fn tictac_tree(&self) -> Option<TicTacTree> {
        self.tictac.as_ref().map(LiveTree::copy)
    }

    /// Rebuilds the tictac tree from a fold over a snapshot; writes continue
    /// meanwhile and are folded in. Does nothing without `Config::tictac`.
    pub fn rebuild_tictac(&self) -> Result<()> {
        let Some(t) = &self.tictac else {
            return Ok(());
        };
        let _one = t.rebuild_lock.lock();
        let snap = self.snapshot_with(SnapshotOptions::all(), || t.begin_rebuild())?;
        match crate::fold::build_tree(&snap, t.size()) {
            Ok(tree) => t.finish_rebuild(tree),
            Err(e) => {
                t.abort_rebuild();
                Err(e)
            }
        }
    }

    /// Every live key of `bucket`, sorted.
    pub fn keys(&self, bucket: &[u8]) -> Result<Vec<Vec<u8>>> {
        let mut out = Vec::new();
        self.fold_keys(bucket, &mut |k| {
            out.push(k.to_vec());
            true
        })?;
        Ok(out)
    }

    /// Runs a secondary-index query over the ledger and returns one page
    /// (see [`crate::index`] for the semantics).
    pub fn index_query(&self, q: &IndexQuery) -> Result<IndexPage> {
        self.check_open()?;
        index::query(&self.ledger, &self.config.dir.join("ledger"), q, now_secs())
    }

    /// Counts the entries a secondary-index query matches (no results).
    pub fn index_count(&self, q: &IndexQuery) -> Result<u64> {
        self.check_open()?;
        index::count(&self.ledger, &self.config.dir.join("ledger"), q, now_secs())
    }

    /// For journal compaction dropping the replaced record `rec`: the index
    /// changes still current in the ledger, re-encoded, or `None` (see
    /// [`index::changes_to_retain`]).
    pub fn index_changes_to_retain(
        &self,
        rec: &crate::journal::JournalRecord,
    ) -> Result<Option<Vec<u8>>> {
        index::changes_to_retain(&self.ledger, rec)
    }
}
