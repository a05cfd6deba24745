//! Snapshots: cheap, immutable point-in-time views of a store.
//!
//! A [`Snapshot`] holds (leveled's clone penciller and clone inker, without
//! the processes):
//!
//! * the ledger's frozen memtables and current [`Version`](crate::ledger::version::Version)
//!   by `Arc` (no copy);
//! * the active memtable as of now, shared too: the memtable is a
//!   persistent map, so [`Memtable::share`](crate::ledger::memtable::Memtable::share)
//!   costs O(1) under the write lock however full it is, and later inserts
//!   copy only the map nodes they change (`examples/snapshot_copy.rs`: a
//!   full 16 MiB memtable took ~38 ms to copy before). Sharing rather than
//!   freezing keeps frequent snapshots from producing tiny L0 files;
//! * the SQN high-water mark (the last SQN assigned when it was taken);
//! * a [`ValueSource`] for values, so values are read from the journal files
//!   of its point in time.
//!
//! The store takes the snapshot under its write lock, so the view is exactly
//! the state after SQN [`Snapshot::sqn`]. Writes then continue; nothing the
//! snapshot sees changes.
//!
//! **Deferred deletion.** SST files a merge replaces are unlinked only when
//! the last `Arc` of their table goes, so a snapshot keeps its files on disk
//! (see [`Table`](crate::ledger::version::Table)).
//!
//! **Timeouts.** Every snapshot has a deadline (by default
//! `Config::snapshot_timeout`). A registry in the store tracks live
//! snapshots; a reaper thread (started with the first snapshot) releases a
//! snapshot's pins at its deadline, so a forgotten snapshot cannot hold disk
//! space forever. Afterwards every call on it returns
//! [`Error::SnapshotExpired`]; a fold running at that moment stops with the
//! same error at its next check (every 1024 entries). Dropping a snapshot
//! releases it at once. Closing the store expires all its snapshots.

use crate::entry::{value_hash, LedgerValue};
use crate::error::{Error, IoContext, Result};
use crate::journal::{Journal, JournalRecord};
use crate::key;
use crate::ledger::LedgerView;
use crate::types::{head_of, Head, KeyRange, KeyRangeExt, Object};
use parking_lot::{Condvar, Mutex};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Where a snapshot reads values from.
///
/// Implemented by [`Journal`]. Journal compaction will provide a view that
/// pins the journal files of its moment; the store builds the value source
/// of a snapshot in one place (`Store::value_source`).
pub trait ValueSource: Send + Sync {
    /// The record with `sqn`, checked to belong to `key` (encoded ledger
    /// key); `None` if the journal holds no such record.
    fn fetch(&self, sqn: u64, key: &[u8]) -> Result<Option<JournalRecord>>;

    /// True if the record with `sqn` is present. The default fetches it;
    /// implementations should answer from an index when they can.
    fn contains(&self, sqn: u64, key: &[u8]) -> Result<bool> {
        Ok(self.fetch(sqn, key)?.is_some())
    }
}

impl ValueSource for Journal {
    fn fetch(&self, sqn: u64, key: &[u8]) -> Result<Option<JournalRecord>> {
        Journal::fetch(self, sqn, key)
    }

    fn contains(&self, sqn: u64, _key: &[u8]) -> Result<bool> {
        Ok(self.has_record(sqn))
    }
}

impl ValueSource for crate::journal::view::JournalView {
    fn fetch(&self, sqn: u64, key: &[u8]) -> Result<Option<JournalRecord>> {
        crate::journal::view::JournalView::fetch(self, sqn, key)
    }

    fn contains(&self, sqn: u64, _key: &[u8]) -> Result<bool> {
        Ok(self.has_record(sqn))
    }
}

/// How to take a snapshot.
#[derive(Debug, Clone, Default)]
pub struct SnapshotOptions {
    /// Limit the snapshot to encoded ledger keys in `[start, end)` (`end`
    /// `None` = unbounded): only that part of the active memtable is copied,
    /// and reads outside it are refused. Build it with
    /// [`SnapshotOptions::bucket`] or [`SnapshotOptions::keys`].
    pub range: Option<(Vec<u8>, Option<Vec<u8>>)>,
    /// Lifetime; `None` = `Config::snapshot_timeout`.
    pub timeout: Option<Duration>,
}

impl SnapshotOptions {
    /// A snapshot of the whole store with the default timeout.
    pub fn all() -> SnapshotOptions {
        SnapshotOptions::default()
    }

    /// A snapshot limited to the objects of `bucket`.
    pub fn bucket(bucket: &[u8]) -> SnapshotOptions {
        let start = key::prefix(key::KeyKind::Object, &[bucket]);
        let end = key::prefix_end(&start);
        SnapshotOptions {
            range: Some((start, end)),
            timeout: None,
        }
    }

    /// A snapshot limited to the keys `start..=end` of `bucket`.
    pub fn keys(bucket: &[u8], start: &[u8], end: &[u8]) -> SnapshotOptions {
        let (s, e) = KeyRange::new(start, end).encoded(bucket);
        SnapshotOptions {
            range: Some((s, e)),
            timeout: None,
        }
    }

    /// Sets the timeout.
    pub fn with_timeout(mut self, timeout: Duration) -> SnapshotOptions {
        self.timeout = Some(timeout);
        self
    }
}

/// What a live snapshot pins.
pub(crate) struct Pinned {
    /// The ledger as of the snapshot.
    pub(crate) view: LedgerView,
    /// Where values come from.
    pub(crate) values: Arc<dyn ValueSource>,
    /// The store's directory, for error messages.
    pub(crate) dir: PathBuf,
}

const LIVE: u8 = 0;
const EXPIRED: u8 = 1;
const CLOSED: u8 = 2;

/// One registered snapshot.
pub(crate) struct Slot {
    id: u64,
    deadline: Option<Instant>,
    state: AtomicU8,
    pinned: Mutex<Option<Arc<Pinned>>>,
}

impl Slot {
    /// Drops the pins (outside any registry lock: dropping tables may unlink files).
    fn release(&self, state: u8) {
        let _ = self
            .state
            .compare_exchange(LIVE, state, Ordering::AcqRel, Ordering::Acquire);
        let pinned = self.pinned.lock().take();
        drop(pinned);
    }

    fn check(&self) -> Result<()> {
        match self.state.load(Ordering::Acquire) {
            LIVE => Ok(()),
            s => Err(Error::SnapshotExpired {
                id: self.id,
                reason: if s == CLOSED {
                    "store closed"
                } else {
                    "timeout"
                },
            }),
        }
    }
}

#[derive(Default)]
struct RegState {
    live: BTreeMap<u64, Arc<Slot>>,
    next_id: u64,
    shutdown: bool,
}

#[derive(Default)]
struct RegShared {
    state: Mutex<RegState>,
    cv: Condvar,
}

impl RegShared {
    fn deregister(&self, id: u64) {
        self.state.lock().live.remove(&id);
    }

    /// The reaper: expires snapshots at their deadlines.
    fn run_reaper(&self) {
        let mut st = self.state.lock();
        loop {
            if st.shutdown {
                return;
            }
            let now = Instant::now();
            let due: Vec<u64> = st
                .live
                .values()
                .filter(|s| s.deadline.is_some_and(|d| d <= now))
                .map(|s| s.id)
                .collect();
            if !due.is_empty() {
                let slots: Vec<Arc<Slot>> =
                    due.iter().filter_map(|id| st.live.remove(id)).collect();
                drop(st);
                for s in slots {
                    tracing::warn!(target: "basalt::snapshot", "S0001 snapshot {} expired after its timeout; its files are released", s.id);
                    s.release(EXPIRED);
                }
                st = self.state.lock();
                continue;
            }
            match st.live.values().filter_map(|s| s.deadline).min() {
                Some(d) => {
                    self.cv.wait_until(&mut st, d);
                }
                None => self.cv.wait(&mut st),
            }
        }
    }
}

/// The store's registry of live snapshots and their reaper thread.
#[derive(Default)]
pub(crate) struct SnapshotRegistry {
    shared: Arc<RegShared>,
    reaper: Mutex<Option<JoinHandle<()>>>,
}

impl std::fmt::Debug for SnapshotRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotRegistry")
            .field("live", &self.live())
            .finish()
    }
}

impl SnapshotRegistry {
    /// Registers a new snapshot of `pinned` with lifetime `timeout`.
    pub(crate) fn register(
        &self,
        pinned: Pinned,
        sqn: u64,
        range: Option<(Vec<u8>, Option<Vec<u8>>)>,
        timeout: Duration,
    ) -> Result<Snapshot> {
        {
            let mut reaper = self.reaper.lock();
            if reaper.is_none() {
                let shared = Arc::clone(&self.shared);
                let handle = std::thread::Builder::new()
                    .name("basalt-snapshot-reaper".into())
                    .spawn(move || shared.run_reaper())
                    .ctx("spawn snapshot reaper thread", &pinned.dir)?;
                *reaper = Some(handle);
            }
        }
        let deadline = Instant::now().checked_add(timeout);
        let mut st = self.shared.state.lock();
        if st.shutdown {
            return Err(Error::Closed("store has been closed".into()));
        }
        st.next_id += 1;
        let slot = Arc::new(Slot {
            id: st.next_id,
            deadline,
            state: AtomicU8::new(LIVE),
            pinned: Mutex::new(Some(Arc::new(pinned))),
        });
        st.live.insert(slot.id, Arc::clone(&slot));
        drop(st);
        self.shared.cv.notify_all();
        Ok(Snapshot {
            slot,
            registry: Arc::downgrade(&self.shared),
            sqn,
            range,
        })
    }

    /// Number of live snapshots.
    pub(crate) fn live(&self) -> usize {
        self.shared.state.lock().live.len()
    }

    /// Expires every snapshot and stops the reaper (store close).
    pub(crate) fn shutdown(&self) {
        let slots: Vec<Arc<Slot>> = {
            let mut st = self.shared.state.lock();
            st.shutdown = true;
            std::mem::take(&mut st.live).into_values().collect()
        };
        self.shared.cv.notify_all();
        for s in slots {
            s.release(CLOSED);
        }
        if let Some(h) = self.reaper.lock().take() {
            if h.join().is_err() {
                tracing::error!(target: "basalt::snapshot", "S0002 snapshot reaper thread panicked");
            }
        }
    }
}

impl Drop for SnapshotRegistry {
    fn drop(&mut self) {
        self.shutdown();
    }
}

/// A point-in-time, read-only view of a store. See the module docs.
///
/// `Send + Sync`. Dropping it releases its files at once.
pub struct Snapshot {
    pub(crate) slot: Arc<Slot>,
    registry: Weak<RegShared>,
    sqn: u64,
    range: Option<(Vec<u8>, Option<Vec<u8>>)>,
}

impl std::fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Snapshot")
            .field("id", &self.slot.id)
            .field("sqn", &self.sqn)
            .field("expired", &self.is_expired())
            .finish()
    }
}

impl Drop for Snapshot {
    fn drop(&mut self) {
        if let Some(r) = self.registry.upgrade() {
            r.deregister(self.slot.id);
        }
        self.slot.release(EXPIRED);
    }
}

pub(crate) use crate::clock::now_secs;

impl Snapshot {
    /// The snapshot's id (unique within its store).
    pub fn id(&self) -> u64 {
        self.slot.id
    }

    /// The SQN high-water mark: the snapshot sees exactly the writes with
    /// SQN at most this.
    pub fn sqn(&self) -> u64 {
        self.sqn
    }

    /// True once the snapshot has timed out or its store has closed.
    pub fn is_expired(&self) -> bool {
        self.slot.state.load(Ordering::Acquire) != LIVE
    }

    /// The pins, or `SnapshotExpired`.
    pub(crate) fn pinned(&self) -> Result<Arc<Pinned>> {
        self.slot.check()?;
        let p = self.slot.pinned.lock().clone();
        match p {
            Some(p) => Ok(p),
            None => {
                self.slot.check()?;
                Err(Error::SnapshotExpired {
                    id: self.slot.id,
                    reason: "released",
                })
            }
        }
    }

    /// Fails unless the snapshot is still live (folds call it periodically).
    pub(crate) fn check_live(&self) -> Result<()> {
        self.slot.check()
    }

    /// Refuses reads of encoded keys `[start, end)` outside the snapshot's range.
    pub(crate) fn check_range(&self, start: &[u8], end: Option<&[u8]>) -> Result<()> {
        let Some((rs, re)) = &self.range else {
            return Ok(());
        };
        let end_ok = match (re, end) {
            (None, _) => true,
            (Some(_), None) => false,
            (Some(re), Some(e)) => e <= re.as_slice(),
        };
        if start < rs.as_slice() || !end_ok {
            return Err(Error::InvalidInput(
                "read outside the key range the snapshot was taken for".into(),
            ));
        }
        Ok(())
    }

    fn entry(&self, lkey: &[u8]) -> Result<(Arc<Pinned>, Option<LedgerValue>)> {
        let mut end = lkey.to_vec();
        end.push(0);
        self.check_range(lkey, Some(&end))?;
        let p = self.pinned()?;
        let v = p.view.get(lkey)?.filter(|v| !v.is_dead(now_secs()));
        Ok((p, v))
    }

    /// The metadata of (`bucket`, `key`) as of the snapshot.
    pub fn head(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Head>> {
        let lkey = key::object(bucket, key);
        Ok(self.entry(&lkey)?.1.map(head_of))
    }

    /// The value and metadata of (`bucket`, `key`) as of the snapshot.
    pub fn get(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Object>> {
        let lkey = key::object(bucket, key);
        let (p, entry) = self.entry(&lkey)?;
        match entry {
            Some(v) => read_object(&p, &lkey, v).map(Some),
            None => Ok(None),
        }
    }
}

/// Reads the value of a live ledger entry and checks it against the entry's hash.
pub(crate) fn read_object(p: &Pinned, lkey: &[u8], entry: LedgerValue) -> Result<Object> {
    let journal_dir = || p.dir.join("journal");
    match p.values.fetch(entry.sqn, lkey)? {
        Some(rec) => {
            if value_hash(&rec.value) != entry.value_hash {
                return Err(Error::corrupt(
                    journal_dir(),
                    0,
                    format!("value of sqn {} does not match its ledger hash", entry.sqn),
                ));
            }
            Ok(Object {
                value: rec.value,
                head: head_of(entry),
            })
        }
        None => Err(Error::corrupt(
            journal_dir(),
            0,
            format!(
                "ledger points at sqn {} for key {} but the journal has no such record",
                entry.sqn,
                key::display_bytes(lkey)
            ),
        )),
    }
}
