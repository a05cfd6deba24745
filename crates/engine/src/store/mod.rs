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
//!
//! This file holds the store's types, its counters and closing; `open`
//! opens, replays and repairs, `write` is the write path, `read` the read
//! path (HEAD, GET, snapshots, folds, 2i), `maintenance` the journal's
//! upkeep (compaction, backup, journal views).

use crate::clock::{now_secs, now_us};
use crate::compaction::{Compactor, Scheduler};
use crate::config::{Config, SyncStrategy};
use crate::error::{Error, Result};
use crate::index::{self, IndexChange};
use crate::journal::flusher::Flusher;
use crate::journal::{Journal, JournalFileInfo, RecordKind};
use crate::ledger::{Ledger, LevelStats};
use crate::limits;
use crate::lock::{DirLock, STORE_MARKER};
use crate::snapshot::SnapshotRegistry;
use crate::stats::Stats;
use crate::tictac::LiveTree;
pub use crate::types::{Head, Object};
use crate::write_group::WriteQueue;
use parking_lot::Mutex;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

mod maintenance;
mod open;
mod read;
mod write;

/// Per-put options.
///
/// Not `basalt_backend::WriteOptions`, on purpose: `sync` here overrides
/// the store's [`SyncStrategy`] per write (`None` = the store's own, which
/// may be `Sync`), whereas the trait's `sync: bool` can only ask for more
/// durability; the leveled backend maps one onto the other.
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
    /// Bytes this store's memtables hold (active and frozen, as counted).
    pub memtable_bytes: u64,
    /// The memtable budget shared with other stores: (bytes it allows,
    /// bytes all their memtables hold, memtables frozen early for it);
    /// (0, 0, 0) without one.
    pub memtable_budget: (u64, u64, u64),
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
    /// With a 2i term source: the store's marker, written before the first
    /// put that carries no changes (`index::recalc::RECALC_BLOB`) or the
    /// first compaction run that drops some.
    recalc_mark: Option<Arc<crate::index::recalc::Mark>>,
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

    /// Counters and shape of the store.
    pub fn stats(&self) -> StoreStats {
        StoreStats {
            counters: self.stats.snapshot(),
            levels: self.ledger.level_stats(),
            memtable_entries: self.ledger.memtable_entries(),
            memtable_bytes: self.ledger.memtable_bytes() as u64,
            memtable_budget: self.ledger.memtable_budget().map_or((0, 0, 0), |b| {
                (b.limit() as u64, b.used() as u64, b.freezes())
            }),
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

impl Drop for Store {
    fn drop(&mut self) {
        if !self.closed.load(Ordering::Acquire) {
            if let Err(e) = self.close() {
                tracing::error!(target: "basalt::store", "B0002 close on drop failed: {e}");
            }
        }
    }
}

/// True if `path` looks like a store directory of this engine.
pub fn is_store_dir(path: &Path) -> bool {
    std::fs::read_to_string(path.join("STORE")).is_ok_and(|s| s.trim() == STORE_MARKER)
}
