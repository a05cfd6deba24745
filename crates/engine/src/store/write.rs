//! The store's write path: PUT and DELETE, validated and encoded without
//! a lock, then written in groups (see [`crate::write_group`]): journal
//! append, memtable inserts, group-commit sync.

use super::{check_name, now_us, PutOptions, Store, WriteItem, GROUP_BUF_KEEP};
use crate::config::SyncStrategy;
use crate::entry::{value_hash, LedgerValue, Status};
use crate::error::{Error, Result};
use crate::index;
use crate::journal::{record, NewRecord, RecordKind};
use crate::key;
use crate::stats::Stats;
use crate::write_group::{Joined, Member, Slot};
use std::sync::Arc;

impl Store {
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

    /// Whether a put of `bytes` (bucket, key, value and metadata) might
    /// wait now instead of running at memory speed: for an fsync (sync
    /// on), the ledger's back-pressure (within a flush of it), the
    /// journal's pace or the roll of its active file, a low or full disk,
    /// a read of the ledger for the tictac tree, or a failed or closed
    /// store (whose error a waiting writer reports). A node writes on a
    /// request's own thread only when this says no, and one writer at a
    /// time, so only background work can change the answer before the
    /// write: the margins above cover one such step. What is left is the
    /// append itself, a buffered write into the page cache that the
    /// journal's flusher keeps from piling up dirty pages.
    pub fn write_would_wait(&self, bytes: u64) -> bool {
        // Record framing, the ledger key and index entries: well under this.
        const OVERHEAD: u64 = 1024;
        self.closed.load(std::sync::atomic::Ordering::Acquire)
            || self.config.sync == SyncStrategy::Sync
            || self.tictac.is_some()
            || self.ledger.admit_would_wait()
            || self.compactor.slowdown().paced()
            || self.compactor.disk().last_state() != crate::diskspace::DiskState::Ample
            || self.journal.append_would_wait(bytes + OVERHEAD)
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
        let mut index = index::prepare(bucket, key, &opts.index, &self.config)?;
        // A put whose changes its metadata implies carries none: replay
        // recalculates them (`index::recalc`, ~120 bytes a record less
        // under a 2i load). Its marker goes first.
        if let (RecordKind::Put, Some(mark), Some(terms)) =
            (kind, &self.recalc_mark, &self.config.index_terms)
        {
            if index::recalc::recalculable(terms, metadata, &opts.index) {
                mark.ensure()?;
                index.blob = index::recalc::RECALC_BLOB.to_vec();
                Stats::incr(&self.stats.index_changes_recalculated);
            }
        }
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
        let disk = self.compactor.disk();
        slowdown.observe_disk(disk.depth());
        slowdown.observe_disk_headroom(disk.headroom());
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
        let group_bytes = buf.len() as u64;
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
        self.ledger.note_journal_bytes(group_bytes);
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
}
