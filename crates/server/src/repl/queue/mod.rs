//! The durable replication queue of one sink cluster: what this node still
//! has to send there, in three strict priorities (real-time before
//! full-sync before requeue, FIFO within one), kept across restarts.
//!
//! Riak's nextgenrepl source queue keeps its entries in memory with a disk
//! overflow that is deleted at shutdown, and a fetch pops an entry before
//! it is delivered, so a restart or a failed push loses entries until a
//! full-sync finds them. This queue differs in three ways: a clean close
//! keeps every undelivered entry, a crash keeps every entry that had
//! reached disk, and an entry taken for sending stays in the queue (*in
//! flight*) until the sender acks it (delivered: gone) or nacks it (back to
//! the front of its priority, in its original place).
//!
//! * **Memory part.** Per priority, a FIFO of up to `memory_entries`
//!   entries. Pushes go there while nothing of that priority is on disk.
//! * **Spill files.** Beyond the memory part, a push appends a record to
//!   the priority's current spill file through a write buffer (no fsync on
//!   the PUT path); once anything of a priority is on disk, its new entries
//!   go to disk too until the disk part drains, so FIFO holds. Files roll at
//!   `spill_file_bytes`; `take` refills the memory part from the oldest
//!   file in batches ([`REFILL_ENTRIES`], [`REFILL_BYTES`]) when it falls
//!   below half, and deletes each file it has read through. [`flush`]
//!   writes the buffers and fsyncs, outside the lock.
//! * **Head file.** `close` writes the in-flight and memory entries of a
//!   priority, in delivery order, to a new file numbered just *before* the
//!   priority's oldest file (atomically: temp file, fsync, rename, fsync of
//!   the directory). It is then read like any spill file, so a head file
//!   not yet drained survives a later crash and the next close's head goes
//!   in front of it.
//! * **Clean marker.** `close` then writes `CLEAN` (atomically): every
//!   file with its read position and the number of records left. `open`
//!   reads and deletes it; with a valid marker matching the files present
//!   the queue resumes at those positions without reading the files. Without
//!   one (a crash) every file is scanned from its beginning: records
//!   already delivered before the crash are delivered again (harmless: the
//!   sink merges by vector clock, so a repeat changes nothing), and
//!   `OpenReport::clean` is false.
//! * **What a crash loses** (kill -9, or Drop without `close`): the
//!   entries that were only in memory: up to `memory_entries` per priority
//!   waiting, plus those in flight (pushed to memory, or refilled from a
//!   spill file already deleted). A machine crash also loses spill appends
//!   since the last [`flush`]. Full-sync repairs all of these.
//! * **Damage.** Every record carries a magic and a CRC32C over its length
//!   and body. A record that fails (bad magic, length, CRC or body, or a
//!   truncated tail) is skipped and counted (`corrupt_skipped`); the reader
//!   resynchronises at the next record magic, or gives up the rest of the
//!   file. A file whose header is wrong is skipped whole. No file content
//!   makes the queue panic or return garbage.
//! * **Limits.** `max_entries` per priority bounds memory + disk (in flight
//!   does not count): beyond it a push is discarded and counted, never
//!   blocks. Disk use is thus bounded by `max_entries` records plus one
//!   partly read file per priority.
//! * **Drop does not close**: the owner calls `close` at shutdown. A
//!   dropped queue writes its spill buffers to the OS (the buffers' own
//!   drop) and nothing else; the next open sees a crash.
//!
//! After `close` the queue refuses pushes ([`QueueError::Closed`]) and
//! takes nothing. File layout: `docs/formats.md`, "Replication queue
//! files".
//!
//! [`flush`]: DurableQueue::flush

use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};
use std::fs::{self, File, OpenOptions};
use std::io::{self, BufReader, BufWriter, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

// Limits and defaults.

/// Default entries per priority in memory before spilling to disk.
pub const DEFAULT_MEMORY_ENTRIES: usize = 10_000;
/// Default entries per priority waiting (memory + disk) before new ones
/// are discarded (Riak's code fallback for `replrtq_overflow_limit`).
pub const DEFAULT_MAX_ENTRIES: u64 = 1_000_000;
/// Default size at which a spill file rolls.
pub const DEFAULT_SPILL_FILE_BYTES: u64 = 64 << 20;
/// Records one refill reads from disk at most (it runs under the queue's
/// lock, so a push waits for at most one refill).
pub const REFILL_ENTRIES: usize = 256;
/// A refill stops once the entries it read pass this size.
pub const REFILL_BYTES: usize = 4 << 20;
/// Largest record body; a bigger entry is discarded at push (far above
/// any object the server accepts), and a bigger length on disk is damage.
pub const MAX_RECORD_BYTES: u32 = 1 << 30;
/// Write buffer of a spill file: appends reach the OS when it fills, at a
/// roll, or at [`DurableQueue::flush`].
const WRITE_BUFFER_BYTES: usize = 64 << 10;
/// Read buffer of a spill file.
const READ_BUFFER_BYTES: usize = 64 << 10;
/// Consecutive I/O errors reading a file before its rest is given up
/// (counted as damage), so one bad file cannot stall a priority forever.
const READ_ATTEMPTS: u32 = 3;
/// Number of the first file of an empty priority: spill files count up
/// from it, head files down, each way far beyond any node's lifetime.
const FIRST_FILE_NO: u64 = 1 << 62;
/// Approximate bytes an entry costs beyond its byte strings.
const ENTRY_OVERHEAD_BYTES: usize = 32;

// Formats (docs/formats.md, "Replication queue files"); little-endian.

const FILE_MAGIC: &[u8; 8] = b"BSLTRQF1";
const MARKER_MAGIC: &[u8; 8] = b"BSLTRQC1";
const FORMAT_VERSION: u32 = 1;
const RECORD_MAGIC: [u8; 4] = *b"RQR1";
/// magic, version, priority, 3 reserved bytes.
const FILE_HEADER_BYTES: usize = 16;
/// magic, body length, CRC.
const RECORD_HEADER_BYTES: usize = 12;
/// Per file in the clean marker: priority, number, read position, records left.
const MARKER_FILE_BYTES: usize = 1 + 8 + 8 + 8;
const MARKER_NAME: &str = "CLEAN";
const FILE_SUFFIX: &str = ".rq";
const TMP_SUFFIX: &str = ".tmp";

const _: () = {
    assert!(DEFAULT_MEMORY_ENTRIES >= 1);
    assert!(DEFAULT_MAX_ENTRIES >= DEFAULT_MEMORY_ENTRIES as u64);
    assert!(DEFAULT_SPILL_FILE_BYTES > FILE_HEADER_BYTES as u64);
    assert!(REFILL_ENTRIES > 0 && REFILL_BYTES > 0);
    assert!(READ_ATTEMPTS >= 1);
    assert!(MAX_RECORD_BYTES as u64 <= u32::MAX as u64);
    assert!(FILE_HEADER_BYTES == 8 + 4 + 1 + 3);
    assert!(RECORD_HEADER_BYTES == 4 + 4 + 4);
};

/// Delivery priority, strict: RealTime before FullSync before Requeue.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Priority {
    /// Entries re-queued from elsewhere (e.g. an AAE fold).
    Requeue = 1,
    /// Differences found by a full-sync.
    FullSync = 2,
    /// Writes this node coordinated.
    RealTime = 3,
}

impl Priority {
    /// Every priority, in delivery order.
    pub const ALL: [Priority; 3] = [Priority::RealTime, Priority::FullSync, Priority::Requeue];

    /// Index in per-priority arrays: priority - 1.
    pub fn index(self) -> usize {
        self as usize - 1
    }

    fn from_u8(byte: u8) -> Option<Priority> {
        match byte {
            1 => Some(Priority::Requeue),
            2 => Some(Priority::FullSync),
            3 => Some(Priority::RealTime),
            _ => None,
        }
    }
}

/// What an entry carries.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Payload {
    /// A whole object or tombstone: its encoded metadata and value (opaque bytes here).
    Object {
        /// Encoded metadata.
        meta: Vec<u8>,
        /// Encoded value.
        value: Vec<u8>,
    },
    /// A reference: fetch the current object at delivery. `clock` = encoded
    /// vector clock when queued (may be empty).
    Ref {
        /// Encoded vector clock.
        clock: Vec<u8>,
    },
    /// A tombstone reaped here with this clock: reap it on the sink too.
    Reap {
        /// Encoded vector clock.
        clock: Vec<u8>,
    },
}

impl Payload {
    fn bytes(&self) -> usize {
        match self {
            Payload::Object { meta, value } => meta.len() + value.len(),
            Payload::Ref { clock } | Payload::Reap { clock } => clock.len(),
        }
    }
}

/// One queued change.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Storage bucket.
    pub bucket: Vec<u8>,
    /// Key.
    pub key: Vec<u8>,
    /// What to replicate.
    pub payload: Payload,
}

impl Entry {
    /// Approximate bytes: the byte strings plus a fixed overhead.
    pub fn size(&self) -> usize {
        self.bucket.len() + self.key.len() + self.payload.bytes() + ENTRY_OVERHEAD_BYTES
    }
}

/// Bounds of a queue (per priority).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QueueLimits {
    /// Entries in memory before spilling (at least 1).
    pub memory_entries: usize,
    /// Entries waiting, memory + disk; beyond it new entries are discarded.
    pub max_entries: u64,
    /// Size at which a spill file rolls.
    pub spill_file_bytes: u64,
    /// Every entry goes to the spill file at once, written to the kernel
    /// (one `write(2)`, no fsync) before `push` returns, so a process
    /// killed at any moment loses nothing it queued; memory only holds
    /// entries read back ahead of delivery.
    pub write_through: bool,
}

impl Default for QueueLimits {
    fn default() -> Self {
        QueueLimits {
            memory_entries: DEFAULT_MEMORY_ENTRIES,
            max_entries: DEFAULT_MAX_ENTRIES,
            spill_file_bytes: DEFAULT_SPILL_FILE_BYTES,
            write_through: false,
        }
    }
}

/// What `open` found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenReport {
    /// Entries waiting per priority (index priority - 1).
    pub recovered: [u64; 3],
    /// Damaged records or files skipped while scanning (after a crash;
    /// damage found later is counted in [`QueueStats::corrupt_skipped`]).
    pub corrupt_skipped: u64,
    /// The last close was clean (else the files were scanned from their
    /// beginning and entries may be delivered twice).
    pub clean: bool,
}

/// Counters since open.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct QueueStats {
    /// Entries accepted by push.
    pub pushed: u64,
    /// Entries refused by push (limit reached, too large, I/O error, closed).
    pub discarded: u64,
    /// Entries pushed to disk rather than memory.
    pub spilled: u64,
    /// Entries acked (delivered).
    pub acked: u64,
    /// Entries nacked back to the queue.
    pub requeued: u64,
    /// Damaged records or files skipped (including those of the open).
    pub corrupt_skipped: u64,
}

/// An error of the queue.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum QueueError {
    /// A file-system call failed.
    #[error("replication queue: cannot {op} {}: {source}", path.display())]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The error.
        #[source]
        source: io::Error,
    },
    /// The queue was closed.
    #[error("replication queue is closed")]
    Closed,
    /// A queue file of a format version this build does not read: the
    /// queue does not open (its entries are not skipped as damage).
    #[error("replication queue file {}: format version {found}; this build reads version {FORMAT_VERSION}. It was written by a newer Basalt: run that version (the file is left untouched); if no newer Basalt wrote it, its header is damaged: move it away (its entries are lost; a full-sync repairs them)", path.display())]
    Version {
        /// The file.
        path: PathBuf,
        /// The version its header names.
        found: u32,
    },
}

/// Wraps an I/O error with what was done to which path.
fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> QueueError + 'a {
    move |source| QueueError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

mod disk;
mod record;
#[cfg(test)]
mod tests;

use disk::*;
use record::*;

// One priority: memory part + disk part.

/// An entry with its place in its priority's delivery order.
#[derive(Debug)]
struct Slot {
    seq: u64,
    entry: Entry,
    /// Write-through: the spill file it was read from (deleted only
    /// once all its entries are acked).
    file: Option<u64>,
}

#[derive(Debug)]
struct Lane {
    /// Ascending `seq`; before everything on disk.
    memory: VecDeque<Slot>,
    disk: Disk,
    next_seq: u64,
}

impl Lane {
    fn open(dir: &Path, p: Priority, files: VecDeque<QueueFile>, keep_until_acked: bool) -> Lane {
        let mut disk = Disk::new(dir, p, files);
        disk.keep_until_acked = keep_until_acked;
        disk.settle();
        Lane {
            memory: VecDeque::new(),
            disk,
            next_seq: 0,
        }
    }

    fn waiting(&self) -> u64 {
        self.memory.len() as u64 + self.disk.entries
    }

    fn push_memory(&mut self, entry: Entry, file: Option<u64>) {
        debug_assert!(self.memory.back().is_none_or(|s| s.seq < self.next_seq));
        self.memory.push_back(Slot {
            seq: self.next_seq,
            entry,
            file,
        });
        self.next_seq += 1;
    }

    /// Puts nacked slots (ascending `seq`) back in their places.
    fn requeue(&mut self, slots: Vec<Slot>) {
        for slot in slots {
            let at = self.memory.partition_point(|s| s.seq < slot.seq);
            debug_assert!(self.memory.get(at).is_none_or(|s| s.seq != slot.seq));
            self.memory.insert(at, slot);
        }
    }

    /// Refills the memory part from disk once it is below half.
    fn refill(&mut self, limits: &QueueLimits, corrupt: &mut u64) {
        let low_water = (limits.memory_entries / 2).max(1);
        if self.memory.len() >= low_water || self.disk.entries == 0 {
            return;
        }
        let (mut read, mut bytes) = (0, 0);
        while self.memory.len() < limits.memory_entries
            && read < REFILL_ENTRIES
            && bytes < REFILL_BYTES
        {
            match self.disk.read_one(corrupt) {
                Ok(Some((entry, no))) => {
                    read += 1;
                    bytes += entry.size();
                    let file = self.disk.keep_until_acked.then_some(no);
                    self.push_memory(entry, file);
                }
                Ok(None) => break,
                Err(error) => {
                    self.disk.read_failed(error, corrupt);
                    break;
                }
            }
        }
        self.disk.settle();
    }
}

// The queue.

/// An entry taken and not yet acked or nacked.
#[derive(Debug)]
struct Taken {
    p: Priority,
    slot: Slot,
}

#[derive(Debug)]
struct Inner {
    dir: PathBuf,
    limits: QueueLimits,
    /// Index priority - 1.
    lanes: [Lane; 3],
    in_flight: HashMap<u64, Taken>,
    next_ticket: u64,
    stats: QueueStats,
    closed: bool,
}

/// The durable, prioritised replication queue of one sink cluster (see the
/// module docs). Share it through an `Arc`.
#[derive(Debug)]
pub struct DurableQueue {
    dir: PathBuf,
    inner: Mutex<Inner>,
}

impl DurableQueue {
    /// Opens (or creates) the queue in `dir`: resumes after a clean close,
    /// scans the files after a crash. One queue per directory: the caller
    /// must not open a directory twice at once. `memory_entries` below 1
    /// counts as 1.
    pub fn open(dir: &Path, limits: QueueLimits) -> Result<(DurableQueue, OpenReport), QueueError> {
        let limits = QueueLimits {
            memory_entries: limits.memory_entries.max(1),
            ..limits
        };
        fs::create_dir_all(dir).map_err(io_err("create", dir))?;
        let found = list_files(dir)?;
        let marker = take_marker(dir)?;
        let mut corrupt = 0;
        let (mut files, clean) = match marker.and_then(|m| marker_files(dir, m, &found)) {
            Some(files) => (files, true),
            None => (scan_files(dir, &found, &mut corrupt)?, false),
        };
        let lanes = [Priority::Requeue, Priority::FullSync, Priority::RealTime].map(|p| {
            Lane::open(
                dir,
                p,
                std::mem::take(&mut files[p.index()]),
                limits.write_through,
            )
        });
        let inner = Inner {
            dir: dir.to_path_buf(),
            limits,
            lanes,
            in_flight: HashMap::new(),
            next_ticket: 1,
            stats: QueueStats {
                corrupt_skipped: corrupt,
                ..QueueStats::default()
            },
            closed: false,
        };
        let report = OpenReport {
            recovered: inner.waiting(),
            corrupt_skipped: corrupt,
            clean,
        };
        inner.check();
        let queue = DurableQueue {
            dir: dir.to_path_buf(),
            inner: Mutex::new(inner),
        };
        Ok((queue, report))
    }

    /// Queues `e`. Never blocks for long (the PUT path calls it): a memory
    /// push, or a buffered append to the spill file. `Ok(false)` =
    /// discarded (limit reached, or an entry over [`MAX_RECORD_BYTES`];
    /// counted). An I/O error while spilling is also counted as discarded
    /// and returned as `Err`, as is a push after `close`.
    pub fn push(&self, p: Priority, e: Entry) -> Result<bool, QueueError> {
        let mut inner = self.inner.lock();
        let result = inner.push(p, e);
        inner.check();
        result
    }

    /// Takes up to `max` entries (and stops before exceeding `max_bytes`,
    /// but always at least one), strict priority order, FIFO within a
    /// priority. Taken entries are in flight: not returned by take again
    /// until nacked, not lost by close(). A closed queue returns nothing.
    pub fn take(&self, max: usize, max_bytes: usize) -> Vec<(u64, Priority, Entry)> {
        let mut inner = self.inner.lock();
        let mut out = Vec::new();
        let mut bytes = 0;
        if !inner.closed {
            for p in Priority::ALL {
                if !inner.take_from(p, max, max_bytes, &mut out, &mut bytes) {
                    break;
                }
            }
        }
        inner.check();
        out
    }

    /// Delivered: gone for good. Unknown tickets are ignored.
    pub fn ack(&self, tickets: &[u64]) {
        let mut inner = self.inner.lock();
        for ticket in tickets {
            if let Some(taken) = inner.in_flight.remove(ticket) {
                inner.stats.acked += 1;
                if let Some(no) = taken.slot.file {
                    inner.lanes[taken.p.index()].disk.release(no);
                }
            }
        }
        inner.check();
    }

    /// Failed: back to the front of their priority, each in its original
    /// place (the order of pushes). Unknown tickets are ignored.
    pub fn nack(&self, tickets: &[u64]) {
        let mut inner = self.inner.lock();
        let mut back: [Vec<Slot>; 3] = Default::default();
        for ticket in tickets {
            if let Some(taken) = inner.in_flight.remove(ticket) {
                back[taken.p.index()].push(taken.slot);
                inner.stats.requeued += 1;
            }
        }
        for (lane, mut slots) in inner.lanes.iter_mut().zip(back) {
            slots.sort_by_key(|s| s.seq);
            lane.requeue(slots);
        }
        inner.check();
    }

    /// Entries waiting per priority (index priority - 1), in memory + on
    /// disk, excluding in flight.
    pub fn waiting(&self) -> [u64; 3] {
        self.inner.lock().waiting()
    }

    /// Entries taken and not yet acked or nacked.
    pub fn in_flight(&self) -> usize {
        self.inner.lock().in_flight.len()
    }

    /// Counters since open.
    pub fn stats(&self) -> QueueStats {
        self.inner.lock().stats
    }

    /// Drops everything waiting (not in flight); returns how many.
    pub fn clear(&self) -> Result<u64, QueueError> {
        let mut inner = self.inner.lock();
        if inner.closed {
            return Err(QueueError::Closed);
        }
        let mut dropped = 0;
        let mut result = Ok(());
        for lane in &mut inner.lanes {
            dropped += lane.memory.len() as u64;
            for slot in std::mem::take(&mut lane.memory) {
                if let Some(no) = slot.file {
                    lane.disk.release(no);
                }
            }
            match lane.disk.clear() {
                Ok(n) => dropped += n,
                Err(e) => result = result.and(Err(e)),
            }
        }
        inner.check();
        result.map(|()| dropped)
    }

    /// Persists memory + in-flight entries so the next open() finds every
    /// undelivered entry in order, then closes the queue. Idempotent. On an
    /// error the queue stays open (what was persisted is on disk) and close
    /// can be called again.
    pub fn close(&self) -> Result<(), QueueError> {
        let mut inner = self.inner.lock();
        let result = inner.close();
        inner.check();
        result
    }

    /// Writes buffered spill appends to the OS and fsyncs them (the fsyncs
    /// outside the lock), so a crash loses little. Called periodically by
    /// the sender.
    pub fn flush(&self) -> Result<(), QueueError> {
        let (paths, created) = self.inner.lock().flush_buffers()?;
        paths.iter().try_for_each(|p| sync_path(p))?;
        if created {
            sync_dir(&self.dir)?;
        }
        Ok(())
    }
}

impl Inner {
    fn waiting(&self) -> [u64; 3] {
        self.lanes.each_ref().map(Lane::waiting)
    }

    fn push(&mut self, p: Priority, e: Entry) -> Result<bool, QueueError> {
        if self.closed {
            self.stats.discarded += 1;
            return Err(QueueError::Closed);
        }
        let lane = &mut self.lanes[p.index()];
        if lane.waiting() >= self.limits.max_entries || body_len(&e) > u64::from(MAX_RECORD_BYTES) {
            self.stats.discarded += 1;
            return Ok(false);
        }
        let to_memory = !self.limits.write_through
            && lane.disk.is_empty()
            && lane.memory.len() < self.limits.memory_entries;
        if to_memory {
            lane.push_memory(e, None);
            self.stats.pushed += 1;
            return Ok(true);
        }
        let Some(record) = encode_record(&e) else {
            self.stats.discarded += 1; // not reached: the size was checked
            return Ok(false);
        };
        let appended = lane
            .disk
            .append(&record, self.limits.spill_file_bytes)
            .and_then(|()| {
                if self.limits.write_through {
                    lane.disk.write_out()
                } else {
                    Ok(())
                }
            });
        if let Err(error) = appended {
            self.stats.discarded += 1;
            lane.disk.settle();
            return Err(error);
        }
        self.stats.pushed += 1;
        self.stats.spilled += 1;
        Ok(true)
    }

    /// Takes from priority `p` into `out`; false once `max_bytes` stops it.
    fn take_from(
        &mut self,
        p: Priority,
        max: usize,
        max_bytes: usize,
        out: &mut Vec<(u64, Priority, Entry)>,
        bytes: &mut usize,
    ) -> bool {
        let lane = &mut self.lanes[p.index()];
        while out.len() < max {
            lane.refill(&self.limits, &mut self.stats.corrupt_skipped);
            let Some(size) = lane.memory.front().map(|s| s.entry.size()) else {
                return true;
            };
            if !out.is_empty() && bytes.saturating_add(size) > max_bytes {
                return false;
            }
            let Some(slot) = lane.memory.pop_front() else {
                return true;
            };
            *bytes += size;
            let ticket = self.next_ticket;
            self.next_ticket += 1;
            out.push((ticket, p, slot.entry.clone()));
            let previous = self.in_flight.insert(ticket, Taken { p, slot });
            debug_assert!(previous.is_none(), "tickets are unique");
        }
        true
    }

    fn flush_buffers(&mut self) -> Result<(Vec<PathBuf>, bool), QueueError> {
        let mut paths = Vec::new();
        let mut created = false;
        if !self.closed {
            for lane in &mut self.lanes {
                lane.disk.write_buffer()?;
                paths.extend(lane.disk.take_unsynced());
                created |= std::mem::take(&mut lane.disk.created);
            }
        }
        Ok((paths, created))
    }

    fn close(&mut self) -> Result<(), QueueError> {
        if self.closed {
            return Ok(());
        }
        for lane in &mut self.lanes {
            lane.disk.sync_for_close()?;
        }
        sync_dir(&self.dir)?;
        for p in Priority::ALL {
            self.persist_head(p)?;
        }
        let marker = encode_marker(&self.lanes);
        let path = self.dir.join(MARKER_NAME);
        crate::fsutil::atomic_write(&path, &marker).map_err(io_err("write", &path))?;
        self.closed = true;
        Ok(())
    }

    /// Writes the in-flight and memory entries of `p`, in delivery order,
    /// to a new file in front of its others, then forgets them.
    fn persist_head(&mut self, p: Priority) -> Result<(), QueueError> {
        let lane = &self.lanes[p.index()];
        let taken = self.in_flight.iter().filter(|(_, t)| t.p == p);
        let tickets: Vec<u64> = taken.clone().map(|(&ticket, _)| ticket).collect();
        let mut slots: Vec<&Slot> = taken.map(|(_, t)| &t.slot).chain(&lane.memory).collect();
        if slots.is_empty() {
            return Ok(());
        }
        slots.sort_by_key(|s| s.seq);
        let no = lane.disk.head_no()?;
        let path = lane.disk.path(no);
        write_file_atomic(&path, p, slots.iter().map(|s| &s.entry))?;
        let count = slots.len() as u64;
        for ticket in tickets {
            self.in_flight.remove(&ticket);
        }
        let lane = &mut self.lanes[p.index()];
        lane.memory.clear();
        lane.disk.forget_pending();
        lane.disk
            .files
            .push_front(QueueFile::unread(no, count, false));
        lane.disk.entries += count;
        Ok(())
    }

    /// The invariants (debug builds).
    fn check(&self) {
        if !cfg!(debug_assertions) {
            return;
        }
        for lane in &self.lanes {
            let disk = &lane.disk;
            debug_assert_eq!(
                disk.entries,
                disk.files.iter().map(|f| f.remaining).sum::<u64>()
            );
            debug_assert!(disk.files.is_empty() || disk.entries > 0 || self.closed);
            if let Some(w) = &disk.writer {
                debug_assert_eq!(disk.files.back().map(|f| f.no), Some(w.no));
            }
            if let (Some(front), Some(back)) = (lane.memory.front(), lane.memory.back()) {
                debug_assert!(front.seq <= back.seq);
                debug_assert!(back.seq < lane.next_seq);
            }
        }
        debug_assert!(self.in_flight.keys().all(|&t| t < self.next_ticket));
        debug_assert!(!self.closed || self.in_flight.is_empty());
    }
}
