//! The store (leveled's "bookie"): the public API over journal and ledger.
//!
//! Write path: validate and encode the record (no lock), join the write
//! queue; the writer leading a group takes the write lock, assigns the next
//! SQNs, appends the group's records to the journal with one write, inserts
//! their ledger entries into the memtable in SQN order, releases the lock,
//! passes the lead on, then (if any member asked for `sync`) waits for one
//! group-commit fsync covering them and completes its members (see
//! [`crate::write_group`]). Read path: HEAD asks only the ledger; GET asks the ledger for the
//! SQN, then reads that record from the journal and checks its key.

use crate::backup::BackupReport;
use crate::compaction::{
    CompactionPolicy, CompactionReport, Compactor, Keep, Liveness, Schedule, Scheduler,
};
use crate::config::{Config, SyncStrategy};
use crate::diskspace::DiskGuard;
use crate::entry::{value_hash, LedgerValue, Status};
use crate::error::{Error, Result};
use crate::index::{self, IndexChange, IndexPage, IndexQuery};
use crate::journal::flusher::{FlushPlan, Flusher};
use crate::journal::{record, JournalRecord, JournalView};
use crate::journal::{Journal, JournalFileInfo, JournalOptions, NewRecord, RecordKind, ValueCache};
use crate::key;
use crate::ledger::sst::SstOptions;
use crate::ledger::{BlockCache, Ledger, LedgerOptions, LevelStats};
use crate::limits;
use crate::lock::{check_marker, DirLock, STORE_MARKER};
use crate::slowdown::Slowdown;
use crate::snapshot::{Pinned, Snapshot, SnapshotOptions, SnapshotRegistry, ValueSource};
use crate::stats::Stats;
use crate::tictac::{LiveTree, TicTacTree};
use crate::types::head_of;
pub use crate::types::{Head, Object};
use crate::write_group::{Joined, Member, Slot, WriteQueue};
use parking_lot::Mutex;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Per-put options.
#[derive(Debug, Clone, Default)]
pub struct PutOptions {
    /// Override the store's sync strategy for this put.
    pub sync: Option<SyncStrategy>,
    /// Expiry, seconds since the Unix epoch; 0 = never (TTL).
    pub expires_at: u64,
    /// Last-modified time to record; `None` = now.
    pub last_modified_us: Option<u64>,
    /// Secondary-index changes of this write (the caller supplies the diffs).
    pub index: Vec<IndexChange>,
}

/// A snapshot of the store's counters and shape.
#[derive(Debug, Clone)]
pub struct StoreStats {
    /// Named counters (see [`Stats`]).
    pub counters: Vec<(&'static str, u64)>,
    /// Per ledger level.
    pub levels: Vec<LevelStats>,
    /// Entries still in memory.
    pub memtable_entries: usize,
    /// Highest SQN persisted in the ledger.
    pub persisted_sqn: u64,
    /// Highest SQN in the journal.
    pub last_sqn: u64,
    /// The journal's files.
    pub journal_files: Vec<JournalFileInfo>,
    /// Snapshots currently registered (not dropped, not expired).
    pub live_snapshots: usize,
    /// The ledger block cache: (bytes it may hold, bytes held); (0, 0)
    /// without one. A cache shared by several stores shows its totals.
    pub block_cache: (u64, u64),
    /// The value cache, likewise.
    pub value_cache: (u64, u64),
    /// The journal garbage trigger's latest estimate (`None` before its
    /// first check, or with the trigger off); `Store::journal_garbage`
    /// measures now.
    pub journal_garbage: Option<crate::GarbageEstimate>,
    /// The journal's filesystem at the disk guard's latest sample (`None`
    /// before the first, or with the guard off; see [`crate::diskspace`]).
    pub disk: Option<crate::DiskSpace>,
    /// Write groups the disk guard refused since the store opened.
    pub disk_writes_refused: u64,
    /// Replaced files waiting for removal, in this process (all stores):
    /// (bytes, files). Their space is not free yet ([`crate::remover`]).
    pub removal_queue: (u64, usize),
}

impl StoreStats {
    /// The counter or timer figure named `name` (as in [`Stats::snapshot`]).
    pub fn counter(&self, name: &str) -> Option<u64> {
        self.counters
            .iter()
            .find(|(n, _)| *n == name)
            .map(|(_, v)| *v)
    }
}

/// What `Store::repair` did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RepairReport {
    /// Journal records replayed into the new ledger.
    pub replayed: u64,
    /// Corrupt journal records skipped.
    pub corrupt_records: u64,
}

/// How often a GET re-reads the ledger when the record it pointed at was
/// replaced and compacted away meanwhile.
const GET_RETRIES_MAX: u32 = 8;

struct WriteState {
    next_sqn: u64,
    /// The buffer a group's records are laid end to end in for the
    /// journal's one write, kept between groups: a fresh one of a large
    /// group's size came from new pages each time (page faults, zeroing),
    /// ~4 % of the CPU with 32 sync writers. A buffer that grew above
    /// [`GROUP_BUF_KEEP`] is not kept.
    group_buf: Vec<u8>,
}

/// Most capacity [`WriteState::group_buf`] keeps between groups: 32
/// records of 8 KB fit; a node with 64 vnodes keeps at most 16 MiB this way.
const GROUP_BUF_KEEP: usize = 256 << 10;

/// A write prepared outside the write lock (see [`Store::prepare_write`]).
struct WriteItem {
    kind: RecordKind,
    lkey: Vec<u8>,
    /// The encoded journal record; its SQN is set under the write lock.
    record: Vec<u8>,
    index: index::Prepared,
    expires_at: u64,
    last_modified_us: u64,
    /// xxh3 of the value (0 for a delete).
    value_hash: u64,
    size: u64,
    metadata: Vec<u8>,
    /// The writer waits for an fsync covering its record.
    sync: bool,
}

/// An open store. `Send + Sync`: share it with `Arc` across threads.
pub struct Store {
    config: Config,
    journal: Arc<Journal>,
    ledger: Arc<Ledger>,
    write: Mutex<WriteState>,
    /// Writers waiting to join a write group (see [`crate::write_group`]).
    queue: WriteQueue<WriteItem>,
    stats: Arc<Stats>,
    closed: AtomicBool,
    snapshots: SnapshotRegistry,
    tictac: Option<LiveTree>,
    /// Journal compaction (policy, score cache) and its scheduler thread.
    compactor: Arc<Compactor>,
    scheduler: Mutex<Option<Scheduler>>,
    /// Background fsyncs of the active journal file (see `journal::flusher`).
    flusher: Mutex<Option<Flusher>>,
    _lock: DirLock,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store")
            .field("dir", &self.config.dir)
            .finish()
    }
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

fn now_secs() -> u64 {
    now_us() / 1_000_000
}

fn check_name(what: &str, b: &[u8]) -> Result<()> {
    if b.is_empty() {
        return Err(Error::InvalidInput(format!("{what} must not be empty")));
    }
    if b.len() > limits::KEY_SIZE_BYTES_MAX {
        return Err(Error::InvalidInput(format!(
            "{what} is {} bytes; the limit is {} bytes",
            b.len(),
            limits::KEY_SIZE_BYTES_MAX
        )));
    }
    Ok(())
}

impl Store {
    /// Opens the store in `config.dir`, creating it if the directory is new.
    pub fn open(config: Config) -> Result<Store> {
        Self::open_inner(config, false)
    }

    fn open_inner(config: Config, repair: bool) -> Result<Store> {
        config.validate()?;
        crate::fsutil::ensure_dir(&config.dir)?;
        let lock = DirLock::acquire(&config.dir)?;
        let created = check_marker(&config.dir, STORE_MARKER)?;
        let stats = Arc::new(Stats::default());
        let journal = Arc::new(Journal::open(
            &config.dir.join("journal"),
            JournalOptions {
                file_bytes: config.journal_file_bytes,
                repair_manifest: repair,
                compression: config.compression,
                zstd_level: config.zstd_level,
                compression_point: config.compression_point,
                one_read: config.journal_one_read,
                fadvise_random: config.journal_fadvise_random,
                skip_active_lock: config.journal_skip_active_lock,
                stream_bytes: config.compaction_stream_bytes,
                compaction_pace: config.compaction_read_bytes_per_sec,
                remove_bytes_per_sec: config.remove_bytes_per_sec,
                direct_reads: config.journal_direct_reads,
                value_cache: config
                    .value_cache
                    .clone()
                    .or_else(|| ValueCache::new(config.value_cache_bytes)),
                preallocate: config.journal_preallocate,
                release_written: config.journal_release_written,
                refresh_cached: config.value_cache_refresh,
            },
            Arc::clone(&stats),
        )?);
        let hook_journal = Arc::clone(&journal);
        let ledger = Arc::new(Ledger::open(
            &config.dir.join("ledger"),
            LedgerOptions {
                memtable_bytes: config.memtable_bytes,
                sst: SstOptions {
                    block_bytes: config.sst_block_bytes,
                    bloom_bits_per_key: config.bloom_bits_per_key,
                    sync_bytes: config.ledger_sync_bytes,
                },
                sst_file_bytes: config.sst_file_bytes,
                l0_merge_trigger: config.l0_merge_trigger,
                l0_stall_files: config.l0_stall_files,
                frozen_memtables_max: config.frozen_memtables_max,
                l1_files: config.l1_files,
                level_fanout: config.level_fanout,
                background: config.background_merges,
                merge_nice: config.background_nice,
                remove_bytes_per_sec: config.remove_bytes_per_sec,
                block_cache: config
                    .block_cache
                    .clone()
                    .or_else(|| BlockCache::new(config.block_cache_bytes)),
            },
            Arc::clone(&stats),
            Box::new(move |sqn| hook_journal.sync_to(sqn)),
            created || repair,
        )?);
        let persisted = ledger.persisted_sqn();
        let mut replayed = 0u64;
        let mut max_seen = persisted;
        journal.replay(persisted, &mut |rec| {
            max_seen = max_seen.max(rec.sqn);
            replayed += 1;
            // A key delta carries only index changes, no object entry.
            let mut batch = index::replay_entries(&rec)?;
            if let Some(v) = ledger_value(&rec) {
                batch.push((rec.key, v));
            }
            ledger.admit()?;
            ledger.insert_batch(batch)
        })?;
        Stats::add(&stats.journal_replayed_records, replayed);
        if replayed > 0 {
            tracing::info!(target: "basalt::store", "B0001 replayed {replayed} journal records after sqn {persisted}");
        }
        let next_sqn = journal.last_sqn().max(max_seen) + 1;
        let (compactor, scheduler) = start_compaction(&config, &journal, &ledger, &stats)?;
        let flusher = if config.sync == SyncStrategy::None {
            let plan = FlushPlan {
                step_bytes: config.journal_sync_bytes,
                mode: config.journal_flush,
                fsync_bytes: config.journal_fsync_bytes,
            };
            Flusher::start(Arc::clone(&journal), plan, &config.dir)?
        } else {
            None
        };
        let store = Store {
            tictac: config.tictac.map(LiveTree::new),
            config,
            journal,
            ledger,
            write: Mutex::new(WriteState {
                next_sqn,
                group_buf: Vec::new(),
            }),
            queue: WriteQueue::default(),
            stats,
            closed: AtomicBool::new(false),
            snapshots: SnapshotRegistry::default(),
            compactor,
            scheduler: Mutex::new(scheduler),
            flusher: Mutex::new(flusher),
            _lock: lock,
        };
        if store.tictac.is_some() {
            store.rebuild_tictac()?;
        }
        Ok(store)
    }

    /// Rebuilds the ledger (and, if damaged, the journal manifest) from the
    /// journal files. The store must not be open elsewhere.
    pub fn repair(config: Config) -> Result<RepairReport> {
        crate::fsutil::ensure_dir(&config.dir)?;
        {
            let _lock = DirLock::acquire(&config.dir)?;
            let ledger_dir = config.dir.join("ledger");
            if ledger_dir.exists() {
                std::fs::remove_dir_all(&ledger_dir)
                    .map_err(|e| Error::io("remove ledger directory", &ledger_dir, e))?;
            }
        }
        let store = Self::open_inner(config, true)?;
        let report = RepairReport {
            replayed: store.stats.journal_replayed_records.load(Ordering::Relaxed),
            corrupt_records: store.stats.journal_corrupt_records.load(Ordering::Relaxed),
        };
        store.close()?;
        Ok(report)
    }

    /// The configuration the store was opened with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(Error::Closed("store has been closed".into()));
        }
        Ok(())
    }

    /// Stores `value` with `metadata` under (`bucket`, `key`); returns its SQN.
    pub fn put(&self, bucket: &[u8], key: &[u8], value: &[u8], metadata: &[u8]) -> Result<u64> {
        self.put_with(bucket, key, value, metadata, &PutOptions::default())
    }

    /// [`Store::put`] with per-put options.
    pub fn put_with(
        &self,
        bucket: &[u8],
        key: &[u8],
        value: &[u8],
        metadata: &[u8],
        opts: &PutOptions,
    ) -> Result<u64> {
        check_name("bucket", bucket)?;
        check_name("key", key)?;
        if value.len() as u64 > self.config.value_bytes_max {
            return Err(Error::InvalidInput(format!(
                "value is {} bytes; the limit is {} bytes (value_bytes_max)",
                value.len(),
                self.config.value_bytes_max
            )));
        }
        if metadata.len() as u64 > self.config.metadata_bytes_max {
            return Err(Error::InvalidInput(format!(
                "metadata is {} bytes; the limit is {} bytes (metadata_bytes_max)",
                metadata.len(),
                self.config.metadata_bytes_max
            )));
        }
        let sqn = self.write_record(RecordKind::Put, bucket, key, value, metadata, opts)?;
        Stats::incr(&self.stats.puts);
        Stats::add(
            &self.stats.user_bytes_written,
            (key.len() + bucket.len() + value.len() + metadata.len()) as u64,
        );
        Ok(sqn)
    }

    /// Deletes (`bucket`, `key`) by writing a tombstone; returns its SQN.
    pub fn delete(&self, bucket: &[u8], key: &[u8]) -> Result<u64> {
        self.delete_with(bucket, key, &PutOptions::default())
    }

    /// [`Store::delete`] with per-write options.
    pub fn delete_with(&self, bucket: &[u8], key: &[u8], opts: &PutOptions) -> Result<u64> {
        check_name("bucket", bucket)?;
        check_name("key", key)?;
        let sqn = self.write_record(RecordKind::Delete, bucket, key, &[], &[], opts)?;
        Stats::incr(&self.stats.deletes);
        Ok(sqn)
    }

    fn write_record(
        &self,
        kind: RecordKind,
        bucket: &[u8],
        key: &[u8],
        value: &[u8],
        metadata: &[u8],
        opts: &PutOptions,
    ) -> Result<u64> {
        let start = std::time::Instant::now();
        let written = self
            .check_open()
            .and_then(|()| self.prepare_write(kind, bucket, key, value, metadata, opts))
            .and_then(|item| self.write_prepared(item));
        self.stats.op_write.since(start);
        written
    }

    /// Writes a prepared record: alone, or in a write group (leading it or
    /// joining another's).
    fn write_prepared(&self, item: WriteItem) -> Result<u64> {
        if !self.config.write_group {
            // One writer per trip through the write lock (the A side of the
            // write-group benchmarks; see `Config::write_group`).
            let sync = item.sync;
            let sqn = self.write_items(std::slice::from_mut(&mut Some(item)))?;
            if sync {
                self.sync_journal(sqn)?;
            }
            return Ok(sqn);
        }
        let bytes = item.record.len();
        let joined = std::time::Instant::now();
        match self.queue.join(item, bytes) {
            Joined::Done(result) => {
                self.stats.wait_write_group.since(joined);
                result
            }
            Joined::Lead { group, own } => self.lead_group(group, &own),
        }
    }

    /// Everything about a write that needs no lock: the checks of its index
    /// changes, the encoded (and compressed) journal record with a
    /// placeholder SQN, the value hash.
    fn prepare_write(
        &self,
        kind: RecordKind,
        bucket: &[u8],
        key: &[u8],
        value: &[u8],
        metadata: &[u8],
        opts: &PutOptions,
    ) -> Result<WriteItem> {
        let index = index::prepare(bucket, key, &opts.index, &self.config)?;
        let lkey = key::object(bucket, key);
        let last_modified_us = opts.last_modified_us.unwrap_or_else(now_us);
        let record = self.journal.encode(&NewRecord {
            sqn: 0,
            kind,
            key: &lkey,
            last_modified_us,
            expires_at: opts.expires_at,
            metadata,
            value,
            index: &index.blob,
        })?;
        Ok(WriteItem {
            kind,
            lkey,
            record,
            index,
            expires_at: opts.expires_at,
            last_modified_us,
            value_hash: if kind == RecordKind::Put {
                value_hash(value)
            } else {
                0
            },
            size: value.len() as u64,
            metadata: metadata.to_vec(),
            sync: opts.sync.unwrap_or(self.config.sync) == SyncStrategy::Sync,
        })
    }

    /// The leader's part (see [`crate::write_group`]): write the group, pass
    /// the lead on, fsync once if any member asked for it, complete the
    /// members; returns the leader's own result.
    fn lead_group(&self, group: Vec<Member<WriteItem>>, own: &Arc<Slot>) -> Result<u64> {
        let n = group.len();
        let sync = group.iter().any(|m| m.item.sync);
        let mut slots = Vec::with_capacity(n);
        let mut items = Vec::with_capacity(n);
        for m in group {
            slots.push((m.slot, m.item.sync));
            items.push(Some(m.item));
        }
        let written = self.write_items(&mut items);
        self.queue.pass_lead();
        Stats::incr(&self.stats.write_groups);
        Stats::add(&self.stats.write_group_records, n as u64);
        let own_at = slots.iter().position(|(s, _)| Arc::ptr_eq(s, own));
        debug_assert!(own_at.is_some(), "a leader's own record is in its group");
        let others = || {
            slots
                .iter()
                .enumerate()
                .filter(move |(i, _)| Some(*i) != own_at)
        };
        let last = match written {
            Ok(last) => last,
            Err(e) => {
                for (_, (slot, _)) in others() {
                    slot.complete(Err(e.for_another_writer()));
                }
                return Err(e);
            }
        };
        let first = last + 1 - n as u64;
        // Writers that did not ask for sync are done now.
        for (i, (slot, _)) in others().filter(|(_, (_, s))| !*s) {
            slot.complete(Ok(first + i as u64));
        }
        let synced = if sync {
            self.sync_journal(last)
        } else {
            Ok(())
        };
        for (i, (slot, _)) in others().filter(|(_, (_, s))| *s) {
            slot.complete(match &synced {
                Ok(()) => Ok(first + i as u64),
                Err(e) => Err(e.for_another_writer()),
            });
        }
        let Some(own_at) = own_at else {
            return Err(Error::Closed(
                "a write group lost its leader's record".into(),
            ));
        };
        let own_sync = slots.get(own_at).is_some_and(|(_, s)| *s);
        match synced {
            Err(e) if own_sync => Err(e),
            _ => Ok(first + own_at as u64),
        }
    }

    /// Waits until the journal is durable up to `sqn` (group commit).
    fn sync_journal(&self, sqn: u64) -> Result<()> {
        let syncing = std::time::Instant::now();
        let r = self.journal.sync_to(sqn);
        self.stats.journal_sync_wait.since(syncing);
        r
    }

    /// Waits, under the write lock, while journal compaction is behind
    /// (see [`crate::slowdown`]) for a group of `bytes`.
    fn pace_journal(&self, bytes: u64) {
        // The pace follows the disk guard's latest sample (at most 250 ms
        // old, just taken by `admit`).
        let slowdown = self.compactor.slowdown();
        slowdown.observe_disk(self.compactor.disk().depth());
        let wait = slowdown.wait_for(bytes);
        if wait.is_zero() {
            return;
        }
        std::thread::sleep(wait);
        Stats::incr(&self.stats.journal_slowdowns);
        Stats::add(&self.stats.journal_slowdown_us, wait.as_micros() as u64);
        self.stats.wait_journal_slowdown.record(wait);
    }

    /// Writes prepared records (taken out of `items`) under the write lock:
    /// consecutive SQNs, one journal write, then the ledger in SQN order.
    /// Returns the last SQN. An error means none of them was acknowledged.
    fn write_items(&self, items: &mut [Option<WriteItem>]) -> Result<u64> {
        debug_assert!(!items.is_empty() && items.iter().all(Option::is_some));
        let waited = std::time::Instant::now();
        let mut w = self.write.lock();
        self.stats.wait_write_lock.since(waited);
        self.check_open()?;
        // Back-pressure (or a refusal) before anything is written, so a
        // write that returns an error has left no trace.
        self.ledger.admit()?;
        let stores_values = items.iter().flatten().any(|i| i.kind == RecordKind::Put);
        self.compactor.disk().admit(stores_values)?;
        let total: usize = items.iter().flatten().map(|i| i.record.len()).sum();
        self.pace_journal(total as u64);
        let first = w.next_sqn;
        let mut buf = std::mem::take(&mut w.group_buf);
        buf.clear();
        buf.reserve(total);
        let mut at = Vec::with_capacity(items.len());
        for (sqn, item) in (first..).zip(items.iter_mut().flatten()) {
            record::reseal(&mut item.record, sqn);
            at.push((sqn, buf.len() as u64));
            buf.extend_from_slice(&item.record);
        }
        let appending = std::time::Instant::now();
        let appended = self.journal.append_encoded(&buf, &at);
        if buf.capacity() <= GROUP_BUF_KEEP {
            w.group_buf = buf;
        }
        appended?;
        self.stats.journal_append.since(appending);
        w.next_sqn += at.len() as u64;
        for (sqn, item) in (first..).zip(items.iter_mut()) {
            if let Some(item) = item.take() {
                self.apply_to_ledger(sqn, item)?;
            }
        }
        Ok(w.next_sqn - 1)
    }

    /// The ledger (and tictac tree) side of one written record; the caller
    /// holds the write lock.
    fn apply_to_ledger(&self, sqn: u64, item: WriteItem) -> Result<()> {
        let is_put = item.kind == RecordKind::Put;
        if let Some(t) = &self.tictac {
            // The old object hash is needed to XOR it out (only with a tree).
            let old = self.ledger.get(&item.lkey)?;
            let old = old.filter(|v| v.status == Status::Active);
            t.apply(
                &item.lkey,
                old.map(|v| v.value_hash),
                is_put.then_some(item.value_hash),
            );
        }
        // One batch: the object and its index entries reach the same memtable.
        let mut batch = Vec::with_capacity(1 + item.index.len());
        batch.extend(
            item.index
                .ledger_entries(sqn, item.expires_at, item.last_modified_us),
        );
        batch.push((
            item.lkey,
            LedgerValue {
                sqn,
                status: if is_put {
                    Status::Active
                } else {
                    Status::Tombstone
                },
                expires_at: item.expires_at,
                value_hash: item.value_hash,
                size: item.size,
                last_modified_us: item.last_modified_us,
                metadata: item.metadata,
            },
        ));
        self.ledger.insert_batch(batch)
    }

    fn live_entry(&self, lkey: &[u8]) -> Result<Option<LedgerValue>> {
        Ok(self.ledger.get(lkey)?.filter(|v| !v.is_dead(now_secs())))
    }

    /// The metadata of (`bucket`, `key`), from the ledger only.
    pub fn head(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Head>> {
        self.check_open()?;
        check_name("bucket", bucket)?;
        check_name("key", key)?;
        Stats::incr(&self.stats.heads);
        let lkey = key::object(bucket, key);
        Ok(self.live_entry(&lkey)?.map(head_of))
    }

    /// The value and metadata of (`bucket`, `key`).
    pub fn get(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Object>> {
        let start = std::time::Instant::now();
        let waited = crate::stats::waited_here_ns();
        let got = self.get_timed(bucket, key);
        let total = start.elapsed();
        let inside = crate::stats::waited_here_ns().wrapping_sub(waited);
        self.stats.op_get.record(total);
        self.stats
            .op_get_unwaited
            .record(total.saturating_sub(std::time::Duration::from_nanos(inside)));
        got
    }

    /// [`Store::get`] without its whole-call timer (`op_get`).
    fn get_timed(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Object>> {
        self.check_open()?;
        check_name("bucket", bucket)?;
        check_name("key", key)?;
        Stats::incr(&self.stats.gets);
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

    /// Counters and shape of the store.
    pub fn stats(&self) -> StoreStats {
        StoreStats {
            counters: self.stats.snapshot(),
            levels: self.ledger.level_stats(),
            memtable_entries: self.ledger.memtable_entries(),
            persisted_sqn: self.ledger.persisted_sqn(),
            last_sqn: self.journal.last_sqn(),
            journal_files: self.journal.files(),
            live_snapshots: self.snapshots.live(),
            block_cache: self
                .ledger
                .block_cache()
                .map_or((0, 0), |c| (c.capacity(), c.bytes())),
            value_cache: self
                .journal
                .value_cache()
                .map_or((0, 0), |c| (c.capacity(), c.bytes())),
            journal_garbage: self.compactor.last_estimate(),
            disk: {
                // Samples the filesystem if the latest sample is stale.
                let _ = self.compactor.disk().state();
                self.compactor.disk().space()
            },
            disk_writes_refused: self.compactor.disk().refused(),
            removal_queue: crate::remover::queued(),
        }
    }

    /// The longest wait of every wait timer since the previous call
    /// (`<t>_window_max_ns`), resetting them (see
    /// [`Stats::take_window_maxima`]): the bench's per-interval maxima.
    pub fn take_wait_maxima(&self) -> Vec<(&'static str, u64)> {
        self.stats.take_window_maxima()
    }

    /// Makes every acknowledged write durable (fsync of the journal).
    pub fn sync(&self) -> Result<()> {
        let last = self.journal.last_sqn();
        self.journal.sync_to(last)
    }

    /// Runs every due ledger flush and merge now, and finishes the
    /// removal of the files they replaced (tools and tests).
    pub fn settle(&self) -> Result<()> {
        self.journal.reap_retired();
        self.ledger.settle()?;
        // The store's directory holds its journal's and ledger's.
        crate::remover::settle(&self.config.dir);
        Ok(())
    }

    /// Persists the ledger's memory, syncs the journal and closes. Reopening
    /// after a clean close replays nothing.
    pub fn close(&self) -> Result<()> {
        let _w = self.write.lock();
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        self.snapshots.shutdown();
        // A paced compaction run in progress finishes unpaced: close waits
        // for it.
        self.journal.hurry_compaction();
        if let Some(mut s) = self.scheduler.lock().take() {
            s.stop();
        }
        if let Some(mut f) = self.flusher.lock().take() {
            f.stop();
        }
        self.ledger.close()?;
        self.journal.close()
    }

    /// Drops the store without persisting the ledger or syncing: what a
    /// process crash leaves behind (written data has reached the OS).
    #[doc(hidden)]
    pub fn simulate_crash(self) {
        self.closed.store(true, Ordering::Release);
        self.journal.hurry_compaction();
        if let Some(mut s) = self.scheduler.lock().take() {
            s.stop();
        }
        if let Some(mut f) = self.flusher.lock().take() {
            f.stop();
        }
        self.ledger.abandon();
    }
}

// ---- Journal compaction, hot backup and journal views (see compaction.rs,
// ---- journal/compact.rs, backup.rs). Kept together to ease merging.

/// `path` made absolute through its nearest existing ancestor, so a
/// destination that does not exist yet still compares with real paths.
fn resolve_existing_prefix(path: &Path) -> std::io::Result<std::path::PathBuf> {
    let mut missing = Vec::new();
    let mut cur = path.to_path_buf();
    loop {
        match cur.canonicalize() {
            Ok(base) => {
                let mut out = base;
                for part in missing.iter().rev() {
                    out.push(part);
                }
                return Ok(out);
            }
            Err(e) => {
                let Some(name) = cur.file_name().map(|n| n.to_os_string()) else {
                    return Err(e);
                };
                missing.push(name);
                if !cur.pop() || cur.as_os_str().is_empty() {
                    cur = std::env::current_dir()?;
                }
            }
        }
    }
}

/// Creates the store's compactor and (if configured) its scheduler thread.
fn start_compaction(
    config: &Config,
    journal: &Arc<Journal>,
    ledger: &Arc<Ledger>,
    stats: &Arc<Stats>,
) -> Result<(Arc<Compactor>, Option<Scheduler>)> {
    let l = Arc::clone(ledger);
    let compactor = Arc::new(
        Compactor::new(
            Arc::clone(journal),
            Arc::clone(stats),
            CompactionPolicy::from_config(config),
            Box::new(move || {
                Box::new(StoreLiveness {
                    ledger: Arc::clone(&l),
                    persisted_sqn: l.persisted_sqn(),
                })
            }),
        )
        .with_slowdown(Arc::new(Slowdown::new(
            config
                .journal_slowdown_garbage_pct
                .max(config.compaction_max_garbage_pct),
        )))
        .with_disk_guard(Arc::new(DiskGuard::new(
            &config.dir,
            config.disk_low_free_pct,
            config.disk_min_free_pct,
        ))),
    );
    let scheduler = Scheduler::start(
        Arc::clone(&compactor),
        Schedule::from_config(config),
        &config.dir,
    )?;
    Ok((compactor, scheduler))
}

impl Store {
    /// Runs one journal compaction now, on the caller's thread: scores the
    /// closed journal files, rewrites the best run if worth it. Writers and
    /// readers continue meanwhile. An error abandons the run and leaves the
    /// store fully usable (it is also counted in `compaction_failures`).
    pub fn compact_journal(&self) -> Result<CompactionReport> {
        self.check_open()?;
        let report = self.compactor.run();
        // The run's inputs are no longer held by the compactor: unlink those
        // no reader holds now rather than at the flusher's next poll.
        self.journal.reap_retired();
        report
    }

    /// Scores every closed journal file now, as compaction does (sampled
    /// records judged against the ledger), oldest first: how much of each
    /// is live. Costs about `files × compaction_sample_records` small reads.
    pub fn journal_garbage(&self) -> Result<Vec<crate::FileScore>> {
        self.check_open()?;
        self.compactor.rescore()
    }

    /// The write slowdown (see [`crate::slowdown`]): the garbage estimate
    /// and reclaim rate it paces writes by, fed by journal compaction.
    pub fn journal_slowdown(&self) -> &Slowdown {
        self.compactor.slowdown()
    }

    /// Hot backup into `dest` (created if missing; an earlier backup there is
    /// updated incrementally). `Store::open` on `dest` then holds every write
    /// acknowledged before this call. Writers continue meanwhile. See
    /// [`crate::backup`].
    pub fn backup(&self, dest: &Path) -> Result<BackupReport> {
        self.check_open()?;
        let same = match (
            resolve_existing_prefix(dest),
            self.config.dir.canonicalize(),
        ) {
            (Ok(a), Ok(b)) => a.starts_with(&b) || b.starts_with(&a),
            _ => false,
        };
        if same {
            return Err(Error::InvalidInput(format!(
                "backup destination {} overlaps the store directory",
                dest.display()
            )));
        }
        crate::backup::backup_journal(&self.journal, dest, &self.stats)
    }

    /// A point-in-time view of the journal (for snapshots): it keeps reading
    /// the values of its moment whatever compaction does afterwards.
    pub fn journal_view(&self) -> JournalView {
        self.journal.view()
    }

    /// Test hook: the next journal compaction fails with an injected "no space
    /// left on device" error after writing `records` output records.
    #[doc(hidden)]
    pub fn fail_next_compaction_after(&self, records: u64) {
        self.journal.fail_compaction_after(records);
    }
}

/// Journal compaction's view of the store: which journal records the ledger
/// (or a replay after a crash, or a rebuild from the journal) still needs.
struct StoreLiveness {
    ledger: Arc<Ledger>,
    /// The ledger's persisted SQN when the run started: records above it are
    /// needed by replay after a crash, whatever the ledger says now.
    persisted_sqn: u64,
}

impl StoreLiveness {
    /// **2i hook.** The index changes of a replaced (or key-delta) record
    /// that must survive compaction, as the bytes of a key-delta record;
    /// `None` drops the record entirely. For now the whole index blob is kept
    /// when non-empty; the 2i engine narrows it to the changes whose index
    /// entries are still live in the ledger.
    fn index_changes_to_retain(&self, rec: &JournalRecord) -> Result<Option<Vec<u8>>> {
        Ok((!rec.index.is_empty()).then(|| rec.index.clone()))
    }

    /// A record the ledger no longer points at: keep its index changes only.
    fn replaced(&self, rec: &JournalRecord) -> Result<Keep> {
        Ok(match self.index_changes_to_retain(rec)? {
            Some(ix) => Keep::KeyDelta(ix),
            None => Keep::Drop,
        })
    }
}

impl Liveness for StoreLiveness {
    fn keep(&self, rec: &JournalRecord) -> Result<Keep> {
        if rec.sqn > self.persisted_sqn {
            return Ok(Keep::Record);
        }
        if rec.kind == RecordKind::KeyDelta {
            return self.replaced(rec);
        }
        match self.ledger.get(&rec.key)? {
            // Current, tombstones included: journal tombstones are never reaped.
            Some(v) if v.sqn == rec.sqn => Ok(Keep::Record),
            // Superseded by a newer put or delete, which replay applies later.
            Some(v) if v.sqn > rec.sqn => self.replaced(rec),
            // Unexpected (ledger older than a persisted record): keep.
            Some(_) => Ok(Keep::Record),
            // The ledger reaped the key. A tombstone stays: it must shadow
            // older puts of the key still in other journal files when the
            // ledger is rebuilt from the journal. A put with an expiry (reaped
            // once expired) becomes a tombstone for the same reason; a put
            // without one was deleted by a later tombstone, which is kept.
            None => Ok(match rec.kind {
                RecordKind::Delete => Keep::Record,
                _ if rec.expires_at != 0 => Keep::Tombstone,
                _ => self.replaced(rec)?,
            }),
        }
    }
}

impl Drop for Store {
    fn drop(&mut self) {
        if !self.closed.load(Ordering::Acquire) {
            if let Err(e) = self.close() {
                tracing::error!(target: "basalt::store", "B0002 close on drop failed: {e}");
            }
        }
    }
}

/// The object ledger entry a journal record implies (used by replay); key
/// deltas imply none.
fn ledger_value(rec: &crate::journal::JournalRecord) -> Option<LedgerValue> {
    let status = match rec.kind {
        RecordKind::Put => Status::Active,
        RecordKind::Delete => Status::Tombstone,
        RecordKind::KeyDelta => return None,
    };
    Some(LedgerValue {
        sqn: rec.sqn,
        status,
        expires_at: rec.expires_at,
        value_hash: if rec.kind == RecordKind::Put {
            value_hash(&rec.value)
        } else {
            0
        },
        size: rec.value.len() as u64,
        last_modified_us: rec.last_modified_us,
        metadata: rec.metadata.clone(),
    })
}

/// True if `path` looks like a store directory of this engine.
pub fn is_store_dir(path: &Path) -> bool {
    std::fs::read_to_string(path.join("STORE")).is_ok_and(|s| s.trim() == STORE_MARKER)
}
