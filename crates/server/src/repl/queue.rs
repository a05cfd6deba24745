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
}

/// Wraps an I/O error with what was done to which path.
fn io_err<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> QueueError + 'a {
    move |source| QueueError::Io {
        op,
        path: path.to_path_buf(),
        source,
    }
}

// Records.

/// The body length of `e`'s record.
fn body_len(e: &Entry) -> u64 {
    let payload = match &e.payload {
        Payload::Object { meta, value } => 8 + meta.len() + value.len(),
        Payload::Ref { clock } | Payload::Reap { clock } => 4 + clock.len(),
    };
    (4 + e.bucket.len() + 4 + e.key.len() + 1 + payload) as u64
}

fn record_crc(len: u32, body: &[u8]) -> u32 {
    crc32c::crc32c_append(crc32c::crc32c(&len.to_le_bytes()), body)
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    out.extend_from_slice(&(bytes.len() as u32).to_le_bytes());
    out.extend_from_slice(bytes);
}

/// The record of `e` (header and body), or None if it is too large.
fn encode_record(e: &Entry) -> Option<Vec<u8>> {
    let len = u32::try_from(body_len(e))
        .ok()
        .filter(|&l| l <= MAX_RECORD_BYTES)?;
    let mut out = Vec::with_capacity(RECORD_HEADER_BYTES + len as usize);
    out.extend_from_slice(&RECORD_MAGIC);
    out.extend_from_slice(&len.to_le_bytes());
    out.extend_from_slice(&[0; 4]);
    put_bytes(&mut out, &e.bucket);
    put_bytes(&mut out, &e.key);
    match &e.payload {
        Payload::Object { meta, value } => {
            out.push(1);
            put_bytes(&mut out, meta);
            put_bytes(&mut out, value);
        }
        Payload::Ref { clock } => {
            out.push(2);
            put_bytes(&mut out, clock);
        }
        Payload::Reap { clock } => {
            out.push(3);
            put_bytes(&mut out, clock);
        }
    }
    debug_assert_eq!(out.len(), RECORD_HEADER_BYTES + len as usize);
    let crc = record_crc(len, out.get(RECORD_HEADER_BYTES..)?);
    out.get_mut(8..12)?.copy_from_slice(&crc.to_le_bytes());
    Some(out)
}

/// Bounds-checked reading of a byte string.
struct Cursor<'a> {
    rest: &'a [u8],
}

impl<'a> Cursor<'a> {
    fn u8(&mut self) -> Option<u8> {
        let (&byte, rest) = self.rest.split_first()?;
        self.rest = rest;
        Some(byte)
    }

    fn array<const N: usize>(&mut self) -> Option<[u8; N]> {
        let (head, rest) = self.rest.split_first_chunk::<N>()?;
        self.rest = rest;
        Some(*head)
    }

    fn u32(&mut self) -> Option<u32> {
        self.array().map(u32::from_le_bytes)
    }

    fn u64(&mut self) -> Option<u64> {
        self.array().map(u64::from_le_bytes)
    }

    fn bytes(&mut self) -> Option<Vec<u8>> {
        let len = self.u32()? as usize;
        let bytes = self.rest.get(..len)?;
        self.rest = self.rest.get(len..)?;
        Some(bytes.to_vec())
    }
}

/// The entry of a record body; None unless the body is exactly one entry.
fn decode_body(body: &[u8]) -> Option<Entry> {
    let mut c = Cursor { rest: body };
    let bucket = c.bytes()?;
    let key = c.bytes()?;
    let payload = match c.u8()? {
        1 => Payload::Object {
            meta: c.bytes()?,
            value: c.bytes()?,
        },
        2 => Payload::Ref { clock: c.bytes()? },
        3 => Payload::Reap { clock: c.bytes()? },
        _ => return None,
    };
    c.rest.is_empty().then_some(Entry {
        bucket,
        key,
        payload,
    })
}

fn file_header(p: Priority) -> [u8; FILE_HEADER_BYTES] {
    let mut header = [0; FILE_HEADER_BYTES];
    let version = FORMAT_VERSION.to_le_bytes();
    let priority = [p as u8];
    let fields = FILE_MAGIC.iter().chain(&version).chain(&priority);
    for (slot, byte) in header.iter_mut().zip(fields) {
        *slot = *byte;
    }
    header
}

/// Reads until `buf` is full or the end of the input; returns bytes read.
fn read_full(input: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut got = 0;
    while let Some(rest) = buf.get_mut(got..).filter(|r| !r.is_empty()) {
        match input.read(rest) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

// Reading a queue file.

/// What the next read of a file found.
#[derive(Debug)]
enum Next {
    Entry(Entry),
    /// The end, at a record boundary.
    End,
    /// A damaged region, skipped up to the next record magic.
    Damaged,
    /// A damaged region up to the end of the file.
    DamagedToEnd,
}

/// What one attempt at the current position found.
enum Parsed {
    Record(Entry, u64),
    Eof,
    Bad,
}

/// Sequential reader of one queue file; `pos` is the next record's offset.
#[derive(Debug)]
struct FileReader {
    input: BufReader<File>,
    pos: u64,
}

impl FileReader {
    /// Opens `path` at `pos`; None if the file does not start with the
    /// header of a queue file of priority `p`.
    fn open(path: &Path, p: Priority, pos: u64) -> io::Result<Option<FileReader>> {
        let mut input = BufReader::with_capacity(READ_BUFFER_BYTES, File::open(path)?);
        let mut header = [0; FILE_HEADER_BYTES];
        let got = read_full(&mut input, &mut header)?;
        if got < FILE_HEADER_BYTES || header != file_header(p) {
            return Ok(None);
        }
        let pos = pos.max(FILE_HEADER_BYTES as u64);
        input.seek(SeekFrom::Start(pos))?;
        Ok(Some(FileReader { input, pos }))
    }

    fn next(&mut self) -> io::Result<Next> {
        match self.parse()? {
            Parsed::Record(entry, len) => {
                self.pos += len;
                Ok(Next::Entry(entry))
            }
            Parsed::Eof => Ok(Next::End),
            Parsed::Bad => self.resync(),
        }
    }

    /// One record at `pos` (the input is there).
    fn parse(&mut self) -> io::Result<Parsed> {
        let mut head = [0; RECORD_HEADER_BYTES];
        let got = read_full(&mut self.input, &mut head)?;
        if got == 0 {
            return Ok(Parsed::Eof);
        }
        let mut c = Cursor { rest: &head };
        let (Some(magic), Some(len), Some(crc)) = (c.array::<4>(), c.u32(), c.u32()) else {
            return Ok(Parsed::Bad);
        };
        if got < RECORD_HEADER_BYTES || magic != RECORD_MAGIC || len > MAX_RECORD_BYTES {
            return Ok(Parsed::Bad);
        }
        // Grown as bytes arrive: a damaged length allocates no more than the file holds.
        let mut body = Vec::with_capacity((len as usize).min(READ_BUFFER_BYTES));
        (&mut self.input)
            .take(u64::from(len))
            .read_to_end(&mut body)?;
        if body.len() != len as usize || record_crc(len, &body) != crc {
            return Ok(Parsed::Bad);
        }
        let total = (RECORD_HEADER_BYTES as u64) + u64::from(len);
        Ok(decode_body(&body).map_or(Parsed::Bad, |e| Parsed::Record(e, total)))
    }

    /// Skips the damaged record at `pos`: on to the next record magic after
    /// it, or to the end of the file.
    fn resync(&mut self) -> io::Result<Next> {
        let from = self.pos + 1;
        self.input.seek(SeekFrom::Start(from))?;
        let mut window = [0; 4];
        let mut byte = [0; 1];
        let mut read = 0u64;
        loop {
            if read_full(&mut self.input, &mut byte)? == 0 {
                self.pos = from + read;
                return Ok(Next::DamagedToEnd);
            }
            read += 1;
            window.rotate_left(1);
            window[3] = byte[0];
            if read >= 4 && window == RECORD_MAGIC {
                self.pos = from + read - 4;
                self.input.seek(SeekFrom::Start(self.pos))?;
                return Ok(Next::Damaged);
            }
        }
    }
}

/// Scans a whole file: (valid records, damaged regions).
fn scan_file(path: &Path, p: Priority) -> io::Result<(u64, u64)> {
    if fs::metadata(path)?.len() == 0 {
        return Ok((0, 0)); // created, crashed before its header was written
    }
    let Some(mut reader) = FileReader::open(path, p, 0)? else {
        return Ok((0, 1));
    };
    let (mut valid, mut damaged) = (0, 0);
    loop {
        match reader.next()? {
            Next::Entry(_) => valid += 1,
            Next::Damaged => damaged += 1,
            Next::DamagedToEnd => return Ok((valid, damaged + 1)),
            Next::End => return Ok((valid, damaged)),
        }
    }
}

// The disk part of one priority.

/// One queue file (spill or head) of a priority.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct QueueFile {
    no: u64,
    /// Offset of the next record to read.
    read_pos: u64,
    /// Records not yet read.
    remaining: u64,
    /// Scanned at open: its damage is already counted.
    scanned: bool,
}

impl QueueFile {
    fn unread(no: u64, remaining: u64, scanned: bool) -> QueueFile {
        QueueFile {
            no,
            read_pos: FILE_HEADER_BYTES as u64,
            remaining,
            scanned,
        }
    }
}

/// The file being appended to (always the priority's last file).
#[derive(Debug)]
struct SpillWriter {
    no: u64,
    out: BufWriter<File>,
    bytes: u64,
    records: u64,
    /// Written since the last fsync.
    dirty: bool,
}

/// The files of a priority, oldest (next to read) first.
#[derive(Debug)]
struct Disk {
    dir: PathBuf,
    p: Priority,
    files: VecDeque<QueueFile>,
    /// Sum of the files' `remaining`.
    entries: u64,
    writer: Option<SpillWriter>,
    /// Reader of the first file (its number).
    reader: Option<(u64, FileReader)>,
    /// Files rolled since the last fsync.
    unsynced: Vec<u64>,
    read_errors: u32,
    /// Write-through: a file read to its end is deleted only once every
    /// entry read from it was acked (`pending` per file; `retired` = read
    /// to the end, waiting for those acks), so a crash finds it again.
    keep_until_acked: bool,
    pending: std::collections::BTreeMap<u64, u64>,
    retired: std::collections::BTreeSet<u64>,
    /// A file was created since the directory was last synced.
    created: bool,
}

fn file_name(p: Priority, no: u64) -> String {
    format!("{}-{no:016x}{FILE_SUFFIX}", p as u8)
}

fn parse_file_name(name: &str) -> Option<(Priority, u64)> {
    let (p, rest) = name.split_once('-')?;
    let no = rest.strip_suffix(FILE_SUFFIX)?;
    if p.len() != 1 || no.len() != 16 {
        return None;
    }
    let p = Priority::from_u8(p.parse().ok()?)?;
    Some((p, u64::from_str_radix(no, 16).ok()?))
}

fn remove_logged(path: &Path) {
    if let Err(e) = fs::remove_file(path) {
        if e.kind() != io::ErrorKind::NotFound {
            tracing::warn!(path = %path.display(), error = %e, "replication queue: cannot delete");
        }
    }
}

/// No file number left (after 2^62 rolls or closes: not in practice).
fn exhausted(dir: &Path) -> QueueError {
    io_err("number a file in", dir)(io::Error::other("file numbers exhausted"))
}

fn sync_dir(dir: &Path) -> Result<(), QueueError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(io_err("sync", dir))
}

/// fsyncs a file by path (gone = nothing to do).
fn sync_path(path: &Path) -> Result<(), QueueError> {
    match File::open(path) {
        Ok(f) => f.sync_data().map_err(io_err("sync", path)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(io_err("sync", path)(e)),
    }
}

impl Disk {
    fn new(dir: &Path, p: Priority, files: VecDeque<QueueFile>) -> Disk {
        let entries = files.iter().map(|f| f.remaining).sum();
        Disk {
            dir: dir.to_path_buf(),
            p,
            files,
            entries,
            writer: None,
            reader: None,
            unsynced: Vec::new(),
            read_errors: 0,
            keep_until_acked: false,
            pending: Default::default(),
            retired: Default::default(),
            created: false,
        }
    }

    /// Deletes file `no` now, or once the entries read from it are acked.
    fn drop_file(&mut self, no: u64) {
        if self.keep_until_acked && self.pending.get(&no).is_some_and(|n| *n > 0) {
            self.retired.insert(no);
        } else {
            remove_logged(&self.path(no));
        }
    }

    /// An entry read from file `no` was acked (or dropped).
    fn release(&mut self, no: u64) {
        let left = match self.pending.get_mut(&no) {
            Some(n) => {
                *n = n.saturating_sub(1);
                *n
            }
            None => return,
        };
        if left == 0 {
            self.pending.remove(&no);
            if self.retired.remove(&no) {
                remove_logged(&self.path(no));
            }
        }
    }

    /// Every entry read but not acked is persisted elsewhere (close) or
    /// dropped (clear): the retired files go.
    fn forget_pending(&mut self) {
        self.pending.clear();
        for no in std::mem::take(&mut self.retired) {
            remove_logged(&self.path(no));
        }
    }

    fn path(&self, no: u64) -> PathBuf {
        self.dir.join(file_name(self.p, no))
    }

    fn is_empty(&self) -> bool {
        self.files.is_empty()
    }

    /// Appends a record to the last file, rolling or starting one first.
    fn append(&mut self, record: &[u8], roll_bytes: u64) -> Result<(), QueueError> {
        let len = record.len() as u64;
        let mut w = match self.writer.take() {
            Some(w) if w.records == 0 || w.bytes.saturating_add(len) <= roll_bytes => w,
            Some(full) => {
                self.seal(full)?;
                self.start_file()?
            }
            None => self.start_file()?,
        };
        let path = self.path(w.no);
        w.out.write_all(record).map_err(io_err("write", &path))?;
        w.bytes += len;
        w.records += 1;
        w.dirty = true;
        let last = self.files.back_mut();
        debug_assert_eq!(last.as_ref().map(|f| f.no), Some(w.no));
        if let Some(last) = last {
            last.remaining += 1;
            self.entries += 1;
        }
        self.writer = Some(w);
        Ok(())
    }

    /// Hands the writer's buffered records to the kernel (no fsync).
    fn write_out(&mut self) -> Result<(), QueueError> {
        let Some(no) = self.writer.as_ref().map(|w| w.no) else {
            return Ok(());
        };
        let path = self.path(no);
        match self.writer.as_mut() {
            Some(w) => w.out.flush().map_err(io_err("write", &path)),
            None => Ok(()),
        }
    }

    /// Creates the next spill file after the last one.
    fn start_file(&mut self) -> Result<SpillWriter, QueueError> {
        // After the last file, including files kept for unacked entries.
        let last = self
            .files
            .back()
            .map(|f| f.no)
            .into_iter()
            .chain(self.retired.iter().copied())
            .chain(self.pending.keys().copied())
            .max();
        let next = last.map_or(Some(FIRST_FILE_NO), |n| n.checked_add(1));
        let no = next.ok_or_else(|| exhausted(&self.dir))?;
        let path = self.path(no);
        let file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .map_err(io_err("create", &path))?;
        let mut out = BufWriter::with_capacity(WRITE_BUFFER_BYTES, file);
        out.write_all(&file_header(self.p))
            .map_err(io_err("write", &path))?;
        self.files.push_back(QueueFile::unread(no, 0, false));
        self.created = true;
        Ok(SpillWriter {
            no,
            out,
            bytes: FILE_HEADER_BYTES as u64,
            records: 0,
            dirty: true,
        })
    }

    /// Ends appends to a file: its buffer to the OS, its fsync for later.
    fn seal(&mut self, w: SpillWriter) -> Result<(), QueueError> {
        let path = self.path(w.no);
        w.out
            .into_inner()
            .map_err(|e| io_err("write", &path)(e.into_error()))?;
        if w.dirty {
            self.unsynced.push(w.no);
        }
        Ok(())
    }

    /// Writes the write buffer to the OS. A writer that fails is dropped
    /// (its buffered records show up as damage or missing when read).
    fn write_buffer(&mut self) -> Result<(), QueueError> {
        let Some(w) = self.writer.as_mut() else {
            return Ok(());
        };
        let no = w.no;
        if let Err(e) = w.out.flush() {
            self.writer = None;
            return Err(io_err("write", &self.path(no))(e));
        }
        Ok(())
    }

    /// The files to fsync: those rolled, and the writer's if written to,
    /// since the last call.
    fn take_unsynced(&mut self) -> Vec<PathBuf> {
        let mut nos: Vec<u64> = self.unsynced.drain(..).collect();
        if let Some(w) = self.writer.as_mut() {
            if std::mem::take(&mut w.dirty) {
                nos.push(w.no);
            }
        }
        nos.into_iter().map(|no| self.path(no)).collect()
    }

    /// Next entry from the first file; None when the disk part is drained
    /// or caught up with the writer. Damage is skipped (and counted).
    fn read_one(&mut self, corrupt: &mut u64) -> Result<Option<(Entry, u64)>, QueueError> {
        while let Some(front) = self.files.front().copied() {
            if self.writer.as_ref().is_some_and(|w| w.no == front.no) {
                self.write_buffer()?;
            }
            match self.read_front(front)? {
                Some(Next::Entry(entry)) => {
                    self.advance();
                    if self.keep_until_acked {
                        *self.pending.entry(front.no).or_default() += 1;
                    }
                    return Ok(Some((entry, front.no)));
                }
                Some(Next::Damaged) => {
                    self.damaged(front, corrupt);
                    self.advance_pos();
                }
                Some(Next::End) if self.writing(front.no) => return Ok(None),
                Some(Next::End) => self.finish_front(),
                Some(Next::DamagedToEnd) | None => {
                    self.damaged(front, corrupt);
                    self.finish_front();
                }
            }
        }
        Ok(None)
    }

    fn writing(&self, no: u64) -> bool {
        self.writer.as_ref().is_some_and(|w| w.no == no)
    }

    /// The next record of the first file; None if its header is bad.
    fn read_front(&mut self, front: QueueFile) -> Result<Option<Next>, QueueError> {
        let path = self.path(front.no);
        if self.reader.as_ref().is_none_or(|(no, _)| *no != front.no) {
            self.reader = None;
            match FileReader::open(&path, self.p, front.read_pos).map_err(io_err("open", &path))? {
                Some(reader) => self.reader = Some((front.no, reader)),
                None => return Ok(None),
            }
        }
        let Some((_, reader)) = self.reader.as_mut() else {
            return Ok(None);
        };
        reader.next().map(Some).map_err(io_err("read", &path))
    }

    /// One record of the first file was read.
    fn advance(&mut self) {
        self.advance_pos();
        self.read_errors = 0;
        if let Some(front) = self.files.front_mut() {
            if front.remaining > 0 {
                front.remaining -= 1;
                self.entries -= 1;
            }
        }
    }

    fn advance_pos(&mut self) {
        let pos = self.reader.as_ref().map(|(_, r)| r.pos);
        if let (Some(front), Some(pos)) = (self.files.front_mut(), pos) {
            debug_assert!(pos >= front.read_pos);
            front.read_pos = pos;
        }
    }

    fn damaged(&self, front: QueueFile, corrupt: &mut u64) {
        if !front.scanned {
            *corrupt += 1;
            tracing::warn!(path = %self.path(front.no).display(), pos = front.read_pos,
                "replication queue: damaged record skipped");
        }
    }

    /// The first file is read through (or given up): forget and delete it.
    fn finish_front(&mut self) {
        let Some(front) = self.files.pop_front() else {
            return;
        };
        self.entries -= front.remaining;
        if front.remaining > 0 {
            tracing::warn!(path = %self.path(front.no).display(), missing = front.remaining,
                "replication queue: records missing from a file");
        }
        if self.reader.as_ref().is_some_and(|(no, _)| *no == front.no) {
            self.reader = None;
        }
        if self.writing(front.no) {
            self.writer = None;
        }
        self.drop_file(front.no);
    }

    /// A read failed: retry at the next refill; after [`READ_ATTEMPTS`]
    /// in a row give the file up.
    fn read_failed(&mut self, error: QueueError, corrupt: &mut u64) {
        tracing::warn!(%error, "replication queue: read failed");
        self.reader = None;
        self.read_errors += 1;
        if self.read_errors >= READ_ATTEMPTS {
            self.read_errors = 0;
            *corrupt += 1;
            self.finish_front();
        }
    }

    /// Deletes the files once nothing is left in them.
    fn settle(&mut self) {
        if self.entries > 0 || self.files.is_empty() {
            return;
        }
        self.reader = None;
        self.writer = None;
        self.unsynced.clear();
        for f in std::mem::take(&mut self.files) {
            self.drop_file(f.no);
        }
    }

    /// Drops every record; returns how many there were.
    fn clear(&mut self) -> Result<u64, QueueError> {
        let dropped = self.entries;
        self.reader = None;
        self.writer = None;
        self.unsynced.clear();
        self.entries = 0;
        let mut result = Ok(dropped);
        for f in std::mem::take(&mut self.files) {
            let path = self.path(f.no);
            if let Err(e) = fs::remove_file(&path) {
                if e.kind() != io::ErrorKind::NotFound && result.is_ok() {
                    result = Err(io_err("delete", &path)(e));
                }
            }
        }
        result
    }

    /// Before close: every append written and fsynced, files closed.
    fn sync_for_close(&mut self) -> Result<(), QueueError> {
        self.reader = None;
        if let Some(w) = self.writer.take() {
            self.seal(w)?;
        }
        self.take_unsynced().iter().try_for_each(|p| sync_path(p))
    }

    /// Number of a new file in front of all others.
    fn head_no(&self) -> Result<u64, QueueError> {
        // Before the first file, including files kept for unacked entries.
        let first = self
            .files
            .front()
            .map(|f| f.no)
            .into_iter()
            .chain(self.retired.iter().copied())
            .chain(self.pending.keys().copied())
            .min();
        let previous = first.map_or(Some(FIRST_FILE_NO), |n| n.checked_sub(1));
        previous.ok_or_else(|| exhausted(&self.dir))
    }
}

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
        write_file_atomic(&self.dir, &path, p, slots.iter().map(|s| &s.entry))?;
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

/// Writes a queue file atomically: temp file, fsync, rename, fsync dir.
fn write_file_atomic<'a>(
    dir: &Path,
    path: &Path,
    p: Priority,
    entries: impl Iterator<Item = &'a Entry>,
) -> Result<(), QueueError> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(TMP_SUFFIX);
    let tmp = PathBuf::from(tmp);
    let write = || -> io::Result<()> {
        let mut out = BufWriter::with_capacity(WRITE_BUFFER_BYTES, File::create(&tmp)?);
        out.write_all(&file_header(p))?;
        for e in entries {
            let record = encode_record(e).ok_or_else(|| io::Error::other("entry too large"))?;
            out.write_all(&record)?;
        }
        out.into_inner().map_err(|e| e.into_error())?.sync_all()
    };
    write().map_err(io_err("write", &tmp))?;
    fs::rename(&tmp, path).map_err(io_err("rename", &tmp))?;
    sync_dir(dir)
}

// Opening: the files present, the clean marker, the scan.

/// The queue files in `dir` per priority (index priority - 1), ascending;
/// leftover temp files are deleted, other files ignored.
fn list_files(dir: &Path) -> Result<[Vec<u64>; 3], QueueError> {
    let mut found: [Vec<u64>; 3] = Default::default();
    for item in fs::read_dir(dir).map_err(io_err("list", dir))? {
        let item = item.map_err(io_err("list", dir))?;
        let name = item.file_name();
        let Some(name) = name.to_str() else { continue };
        if name.ends_with(TMP_SUFFIX) {
            remove_logged(&item.path());
        } else if let Some((p, no)) = parse_file_name(name) {
            found[p.index()].push(no);
        }
    }
    for nos in &mut found {
        nos.sort_unstable();
    }
    Ok(found)
}

fn encode_marker(lanes: &[Lane; 3]) -> Vec<u8> {
    let files: Vec<(Priority, &QueueFile)> = lanes
        .iter()
        .flat_map(|l| l.disk.files.iter().map(|f| (l.disk.p, f)))
        .collect();
    let mut out = Vec::with_capacity(16 + files.len() * MARKER_FILE_BYTES + 4);
    out.extend_from_slice(MARKER_MAGIC);
    out.extend_from_slice(&FORMAT_VERSION.to_le_bytes());
    out.extend_from_slice(&(files.len() as u32).to_le_bytes());
    for (p, f) in files {
        out.push(p as u8);
        out.extend_from_slice(&f.no.to_le_bytes());
        out.extend_from_slice(&f.read_pos.to_le_bytes());
        out.extend_from_slice(&f.remaining.to_le_bytes());
    }
    let crc = crc32c::crc32c(&out);
    out.extend_from_slice(&crc.to_le_bytes());
    out
}

fn decode_marker(bytes: &[u8]) -> Option<Vec<(Priority, QueueFile)>> {
    let (body, crc) = bytes.split_last_chunk::<4>()?;
    if crc32c::crc32c(body) != u32::from_le_bytes(*crc) {
        return None;
    }
    let mut c = Cursor { rest: body };
    if c.array::<8>()? != *MARKER_MAGIC || c.u32()? != FORMAT_VERSION {
        return None;
    }
    let count = c.u32()? as usize;
    if c.rest.len() != count.checked_mul(MARKER_FILE_BYTES)? {
        return None;
    }
    let mut files = Vec::with_capacity(count);
    for _ in 0..count {
        let p = Priority::from_u8(c.u8()?)?;
        let (no, read_pos, remaining) = (c.u64()?, c.u64()?, c.u64()?);
        files.push((
            p,
            QueueFile {
                no,
                read_pos,
                remaining,
                scanned: false,
            },
        ));
    }
    Some(files)
}

/// Reads and deletes the clean marker (so a crash from now on is seen as
/// one); None if there is none or it is damaged.
fn take_marker(dir: &Path) -> Result<Option<Vec<(Priority, QueueFile)>>, QueueError> {
    let path = dir.join(MARKER_NAME);
    let bytes = match fs::read(&path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(io_err("read", &path)(e)),
    };
    fs::remove_file(&path).map_err(io_err("delete", &path))?;
    sync_dir(dir)?;
    let files = decode_marker(&bytes);
    if files.is_none() {
        tracing::warn!(path = %path.display(), "replication queue: damaged clean marker ignored");
    }
    Ok(files)
}

/// The files as the marker describes them, if it names exactly the files
/// present with plausible read positions.
fn marker_files(
    dir: &Path,
    marker: Vec<(Priority, QueueFile)>,
    found: &[Vec<u64>; 3],
) -> Option<[VecDeque<QueueFile>; 3]> {
    let mut files: [VecDeque<QueueFile>; 3] = Default::default();
    for (p, f) in marker {
        let len = fs::metadata(dir.join(file_name(p, f.no))).ok()?.len();
        if f.read_pos < FILE_HEADER_BYTES as u64 || f.read_pos > len {
            return None;
        }
        files[p.index()].push_back(f);
    }
    let matches = files
        .iter()
        .zip(found)
        .all(|(f, nos)| f.iter().map(|f| f.no).eq(nos.iter().copied()));
    matches.then_some(files)
}

/// Scans every file from its beginning; files without a record are deleted.
fn scan_files(
    dir: &Path,
    found: &[Vec<u64>; 3],
    corrupt: &mut u64,
) -> Result<[VecDeque<QueueFile>; 3], QueueError> {
    let mut files: [VecDeque<QueueFile>; 3] = Default::default();
    for p in Priority::ALL {
        for &no in &found[p.index()] {
            let path = dir.join(file_name(p, no));
            let (valid, damaged) = scan_file(&path, p).map_err(io_err("scan", &path))?;
            if damaged > 0 {
                tracing::warn!(path = %path.display(), damaged,
                    "replication queue: damaged records skipped");
            }
            *corrupt += damaged;
            if valid == 0 {
                remove_logged(&path);
            } else {
                files[p.index()].push_back(QueueFile::unread(no, valid, true));
            }
        }
    }
    Ok(files)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    /// An entry whose key is `id` (big-endian), of all three payload kinds.
    fn entry(id: u64, len: usize) -> Entry {
        let payload = match id % 3 {
            0 => Payload::Object {
                meta: vec![1; 3],
                value: vec![(id % 251) as u8; len],
            },
            1 => Payload::Ref {
                clock: vec![7; len],
            },
            _ => Payload::Reap {
                clock: vec![9; len % 5],
            },
        };
        Entry {
            bucket: b"bucket".to_vec(),
            key: id.to_be_bytes().to_vec(),
            payload,
        }
    }

    fn id_of(e: &Entry) -> u64 {
        u64::from_be_bytes(e.key.clone().try_into().expect("an 8-byte key"))
    }

    fn limits(memory_entries: usize, max_entries: u64, spill_file_bytes: u64) -> QueueLimits {
        QueueLimits {
            memory_entries,
            max_entries,
            spill_file_bytes,
            write_through: false,
        }
    }

    fn open(dir: &Path, limits: QueueLimits) -> (DurableQueue, OpenReport) {
        DurableQueue::open(dir, limits).expect("open")
    }

    fn push_ids(q: &DurableQueue, p: Priority, ids: impl IntoIterator<Item = u64>) {
        for id in ids {
            assert!(q.push(p, entry(id, 20)).expect("push"), "{id} accepted");
        }
    }

    /// Takes and acks everything: (priority, id) in delivery order.
    fn drain(q: &DurableQueue) -> Vec<(Priority, u64)> {
        let mut out = Vec::new();
        loop {
            let batch = q.take(7, usize::MAX);
            if batch.is_empty() {
                return out;
            }
            let tickets: Vec<u64> = batch.iter().map(|(t, _, _)| *t).collect();
            q.ack(&tickets);
            out.extend(batch.iter().map(|(_, p, e)| (*p, id_of(e))));
        }
    }

    fn ids(delivered: &[(Priority, u64)]) -> Vec<u64> {
        delivered.iter().map(|(_, id)| *id).collect()
    }

    /// The queue files in `dir`, in name order (head files first).
    fn queue_files(dir: &Path) -> Vec<PathBuf> {
        let mut files: Vec<PathBuf> = fs::read_dir(dir)
            .expect("read dir")
            .map(|e| e.expect("dir entry").path())
            .filter(|p| p.extension().is_some_and(|x| x == "rq"))
            .collect();
        files.sort();
        files
    }

    fn flip_byte(path: &Path, at: usize) {
        let mut bytes = fs::read(path).expect("read");
        let at = at % bytes.len();
        bytes[at] ^= 0x5a;
        fs::write(path, bytes).expect("write");
    }

    #[test]
    fn strict_priority_and_fifo_within_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (q, report) = open(dir.path(), limits(2, 100, 200));
        assert_eq!((report.recovered, report.clean), ([0; 3], false));
        push_ids(&q, Priority::Requeue, [1, 2]);
        push_ids(&q, Priority::FullSync, [3, 4, 5]);
        push_ids(&q, Priority::RealTime, [6, 7, 8, 9]);
        assert_eq!(q.waiting(), [2, 3, 4]);
        assert_eq!(ids(&drain(&q)), [6, 7, 8, 9, 3, 4, 5, 1, 2]);
        assert_eq!(q.stats().spilled, 3, "beyond 2 in memory per priority");
        assert!(
            queue_files(dir.path()).is_empty(),
            "drained spill files are deleted"
        );
    }

    #[test]
    fn take_respects_the_byte_limit_but_takes_one() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (q, _) = open(dir.path(), QueueLimits::default());
        push_ids(&q, Priority::RealTime, 1..=4);
        let size = entry(1, 20).size();
        assert_eq!(q.take(10, 1).len(), 1, "always at least one");
        assert_eq!(q.take(10, 2 * size).len(), 2);
        assert_eq!(q.take(0, usize::MAX).len(), 0);
        assert_eq!((q.in_flight(), q.waiting()), (3, [0, 0, 1]));
    }

    #[test]
    fn nack_restores_the_original_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (q, _) = open(dir.path(), limits(3, 100, 200));
        push_ids(&q, Priority::RealTime, 1..=6);
        let first = q.take(2, usize::MAX);
        let (t1, t2) = (first[0].0, first[1].0);
        q.nack(&[t1]);
        let again = q.take(1, usize::MAX);
        assert_eq!(id_of(&again[0].2), 1);
        q.nack(&[t2]);
        q.nack(&[again[0].0, t1, 999]);
        assert_eq!(q.stats().requeued, 3, "the stale ticket is ignored");
        assert_eq!(ids(&drain(&q)), (1..=6).collect::<Vec<_>>());
    }

    #[test]
    fn discards_beyond_max_entries_are_counted() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (q, _) = open(dir.path(), limits(2, 5, 200));
        let accepted: Vec<bool> = (1..=8)
            .map(|id| q.push(Priority::RealTime, entry(id, 20)).expect("push"))
            .collect();
        assert_eq!(
            accepted,
            [true, true, true, true, true, false, false, false]
        );
        assert!(
            q.push(Priority::FullSync, entry(20, 20)).expect("push"),
            "limits are per priority"
        );
        let taken = q.take(2, usize::MAX);
        assert_eq!(q.waiting(), [0, 1, 3]);
        assert!(
            q.push(Priority::RealTime, entry(9, 20)).expect("push"),
            "in flight does not count"
        );
        assert!(q.push(Priority::RealTime, entry(10, 20)).expect("push"));
        assert!(!q.push(Priority::RealTime, entry(11, 20)).expect("push"));
        let stats = q.stats();
        // 3, 4, 5 spilled, and 9, 10 after them (FIFO: the disk part was not drained).
        assert_eq!((stats.pushed, stats.discarded, stats.spilled), (8, 4, 5));
        q.nack(&taken.iter().map(|(t, _, _)| *t).collect::<Vec<_>>());
        assert_eq!(ids(&drain(&q)), [1, 2, 3, 4, 5, 9, 10, 20]);
    }

    #[test]
    fn oversized_entries_are_discarded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (q, _) = open(dir.path(), limits(2, 5, 200));
        let mut huge = entry(1, 0);
        huge.bucket = vec![0; MAX_RECORD_BYTES as usize];
        assert!(!q.push(Priority::RealTime, huge).expect("push"));
        assert_eq!((q.stats().discarded, q.waiting()), (1, [0; 3]));
    }

    #[test]
    fn clean_close_keeps_memory_and_in_flight_in_order() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (q, _) = open(dir.path(), limits(3, 100, 200));
        push_ids(&q, Priority::RealTime, 1..=8);
        push_ids(&q, Priority::Requeue, [50, 51]);
        let taken = q.take(2, usize::MAX);
        q.nack(&[taken[0].0]);
        q.close().expect("close");
        q.close().expect("close is idempotent");
        assert!(matches!(
            q.push(Priority::RealTime, entry(9, 1)),
            Err(QueueError::Closed)
        ));
        assert!(q.take(10, usize::MAX).is_empty());
        assert!(matches!(q.clear(), Err(QueueError::Closed)));
        drop(q);
        let (q, report) = open(dir.path(), limits(3, 100, 200));
        assert_eq!(
            (report.recovered, report.clean, report.corrupt_skipped),
            ([2, 0, 8], true, 0)
        );
        push_ids(&q, Priority::RealTime, [9]);
        let taken = q.take(1, usize::MAX);
        q.close().expect("close");
        drop(q);
        let (q, report) = open(dir.path(), limits(3, 100, 200));
        assert_eq!((report.recovered, report.clean), ([2, 0, 9], true));
        assert_eq!(
            id_of(&taken[0].2),
            1,
            "a second head file goes in front of the first"
        );
        assert_eq!(ids(&drain(&q)), [1, 2, 3, 4, 5, 6, 7, 8, 9, 50, 51]);
        assert!(queue_files(dir.path()).is_empty());
    }

    #[test]
    fn clear_drops_waiting_but_not_in_flight() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (q, _) = open(dir.path(), limits(2, 100, 200));
        push_ids(&q, Priority::RealTime, 1..=6);
        push_ids(&q, Priority::FullSync, 7..=8);
        let taken = q.take(1, usize::MAX);
        assert_eq!(q.clear().expect("clear"), 7);
        assert!(queue_files(dir.path()).is_empty());
        assert_eq!((q.waiting(), q.in_flight()), ([0; 3], 1));
        q.nack(&[taken[0].0]);
        push_ids(&q, Priority::RealTime, [9]);
        assert_eq!(ids(&drain(&q)), [1, 9]);
    }

    #[test]
    fn crash_keeps_the_spilled_entries() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (q, _) = open(dir.path(), limits(3, 100, 200));
        push_ids(&q, Priority::RealTime, 1..=10);
        q.flush().expect("flush");
        assert!(queue_files(dir.path()).len() > 1, "spill files rolled");
        std::mem::forget(q); // kill -9: nothing more is written
        let (q, report) = open(dir.path(), limits(3, 100, 200));
        assert_eq!(
            (report.recovered, report.clean, report.corrupt_skipped),
            ([0, 0, 7], false, 0)
        );
        assert_eq!(
            ids(&drain(&q)),
            (4..=10).collect::<Vec<_>>(),
            "the 3 in memory are lost"
        );
    }

    #[test]
    fn drop_without_close_is_a_crash() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (q, _) = open(dir.path(), limits(3, 100, 200));
        push_ids(&q, Priority::FullSync, 1..=10);
        drop(q); // the write buffers reach the OS, nothing else
        let (q, report) = open(dir.path(), limits(3, 100, 200));
        assert_eq!((report.recovered, report.clean), ([0, 7, 0], false));
        assert_eq!(ids(&drain(&q)), (4..=10).collect::<Vec<_>>());
    }

    #[test]
    fn a_crash_rereads_unfinished_files_from_their_start() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (q, _) = open(dir.path(), limits(3, 100, 1 << 20));
        push_ids(&q, Priority::RealTime, 1..=10);
        let taken = q.take(5, usize::MAX);
        assert_eq!(
            ids(&taken
                .iter()
                .map(|(_, p, e)| (*p, id_of(e)))
                .collect::<Vec<_>>()),
            [1, 2, 3, 4, 5]
        );
        q.ack(&taken.iter().map(|(t, _, _)| *t).collect::<Vec<_>>());
        q.flush().expect("flush");
        std::mem::forget(q);
        let (q, report) = open(dir.path(), limits(3, 100, 1 << 20));
        assert!(!report.clean);
        // 4 and 5 again (delivered, harmless), 6 not lost (it was in memory
        // but its file was not read through).
        assert_eq!(ids(&drain(&q)), (4..=10).collect::<Vec<_>>());
    }

    #[test]
    fn damaged_records_are_skipped_after_a_clean_close() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (q, _) = open(dir.path(), limits(3, 100, 200));
        push_ids(&q, Priority::RealTime, 1..=12);
        q.close().expect("close");
        drop(q);
        let files = queue_files(dir.path());
        assert!(files.len() >= 3, "a head file and spill files");
        flip_byte(&files[0], FILE_HEADER_BYTES + 20); // head file, first record
        flip_byte(&files[2], FILE_HEADER_BYTES + 20); // a spill file's first record
        let (q, report) = open(dir.path(), limits(3, 100, 200));
        assert_eq!((report.clean, report.recovered), (true, [0, 0, 12]));
        let delivered = ids(&drain(&q));
        assert_eq!(delivered.len(), 10, "{delivered:?}");
        assert!(delivered.windows(2).all(|w| w[0] < w[1]), "{delivered:?}");
        assert_eq!(q.stats().corrupt_skipped, 2);
        assert_eq!(q.waiting(), [0; 3]);
        assert!(queue_files(dir.path()).is_empty());
    }

    #[test]
    fn damage_found_by_the_scan_after_a_crash_is_reported_once() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (q, _) = open(dir.path(), limits(3, 100, 200));
        push_ids(&q, Priority::RealTime, 1..=10);
        q.flush().expect("flush");
        drop(q);
        let files = queue_files(dir.path());
        flip_byte(&files[0], FILE_HEADER_BYTES + 5);
        let (q, report) = open(dir.path(), limits(3, 100, 200));
        assert_eq!(
            (report.clean, report.corrupt_skipped, report.recovered),
            (false, 1, [0, 0, 6])
        );
        assert_eq!(ids(&drain(&q)), (5..=10).collect::<Vec<_>>());
        assert_eq!(q.stats().corrupt_skipped, 1, "not counted again when read");
    }

    #[test]
    fn a_truncated_tail_is_skipped() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (q, _) = open(dir.path(), limits(3, 100, 200));
        push_ids(&q, Priority::RealTime, 1..=10);
        q.flush().expect("flush");
        drop(q);
        let last = queue_files(dir.path()).pop().expect("a spill file");
        let len = fs::metadata(&last).expect("metadata").len();
        File::options()
            .write(true)
            .open(&last)
            .expect("open")
            .set_len(len - 3)
            .expect("truncate");
        let (q, report) = open(dir.path(), limits(3, 100, 200));
        assert_eq!((report.corrupt_skipped, report.recovered), (1, [0, 0, 6]));
        assert_eq!(ids(&drain(&q)), (4..=9).collect::<Vec<_>>());
    }

    #[test]
    fn foreign_and_garbage_files_do_no_harm() {
        let dir = tempfile::tempdir().expect("tempdir");
        fs::write(
            dir.path()
                .join(file_name(Priority::RealTime, FIRST_FILE_NO)),
            b"garbage",
        )
        .expect("write");
        fs::write(
            dir.path()
                .join(file_name(Priority::FullSync, FIRST_FILE_NO)),
            b"",
        )
        .expect("write");
        fs::write(dir.path().join(MARKER_NAME), b"not a marker").expect("write");
        fs::write(dir.path().join("3-zz.rq"), b"x").expect("write");
        fs::write(dir.path().join("notes.txt"), b"x").expect("write");
        let (q, report) = open(dir.path(), limits(3, 100, 200));
        assert_eq!(
            (report.clean, report.corrupt_skipped, report.recovered),
            (false, 1, [0; 3])
        );
        push_ids(&q, Priority::RealTime, 1..=5);
        assert_eq!(ids(&drain(&q)), [1, 2, 3, 4, 5]);
        assert!(dir.path().join("notes.txt").exists());
    }

    #[test]
    fn records_round_trip() {
        for id in 0..6 {
            let e = entry(id, id as usize * 7);
            let record = encode_record(&e).expect("encode");
            let body = &record[RECORD_HEADER_BYTES..];
            assert_eq!(body.len() as u64, body_len(&e));
            assert_eq!(decode_body(body), Some(e));
            assert_eq!(decode_body(&body[..body.len() - 1]), None);
        }
    }

    #[derive(Debug, Clone)]
    enum Op {
        Push { p: usize, len: usize },
        Take { max: usize, max_bytes: usize },
        Ack(u64),
        Nack(u64),
        Flush,
        Clear,
        Reopen,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            20 => (0usize..3, 0usize..60).prop_map(|(p, len)| Op::Push { p, len }),
            10 => (0usize..5, 1usize..400).prop_map(|(max, max_bytes)| Op::Take { max, max_bytes }),
            4 => any::<u64>().prop_map(Op::Ack),
            4 => any::<u64>().prop_map(Op::Nack),
            2 => Just(Op::Flush),
            2 => Just(Op::Reopen),
            1 => Just(Op::Clear),
        ]
    }

    /// The queue as it should behave: per priority a FIFO ordered by push
    /// (ids ascend), plus the entries in flight by ticket.
    #[derive(Default)]
    struct Model {
        waiting: [VecDeque<Entry>; 3],
        in_flight: BTreeMap<u64, (usize, Entry)>,
        next_id: u64,
    }

    impl Model {
        fn counts(&self) -> [u64; 3] {
            self.waiting.each_ref().map(|w| w.len() as u64)
        }

        fn take(&mut self, max: usize, max_bytes: usize) -> Vec<(usize, Entry)> {
            let (mut out, mut bytes) = (Vec::new(), 0);
            for i in [2, 1, 0] {
                while out.len() < max {
                    let Some(size) = self.waiting[i].front().map(Entry::size) else {
                        break;
                    };
                    if !out.is_empty() && bytes + size > max_bytes {
                        return out;
                    }
                    bytes += size;
                    out.push((i, self.waiting[i].pop_front().expect("front")));
                }
            }
            out
        }

        fn requeue(&mut self, i: usize, e: Entry) {
            let at = self.waiting[i].partition_point(|w| id_of(w) < id_of(&e));
            self.waiting[i].insert(at, e);
        }

        /// The tickets in flight that `mask` picks.
        fn pick(&self, mask: u64) -> Vec<u64> {
            let tickets = self.in_flight.keys().enumerate();
            tickets
                .filter(|(i, _)| mask & (1 << (i % 64)) != 0)
                .map(|(_, t)| *t)
                .collect()
        }
    }

    fn priority(i: usize) -> Priority {
        [Priority::Requeue, Priority::FullSync, Priority::RealTime][i]
    }

    #[test]
    fn write_through_loses_nothing_at_a_crash() {
        let d = tempfile::tempdir().expect("tempdir");
        let lim = QueueLimits {
            write_through: true,
            ..limits(100, 1000, 1 << 20)
        };
        let (q, _) = open(d.path(), lim);
        push_ids(&q, Priority::RealTime, 0..20);
        let taken = q.take(5, usize::MAX);
        q.ack(&taken.iter().map(|t| t.0).collect::<Vec<_>>());
        std::mem::forget(q); // as a kill -9: no close, no buffer flushed
        let (q, report) = open(d.path(), lim);
        assert!(!report.clean);
        // Delivered entries come again (delivery is idempotent); none lost.
        assert_eq!(q.waiting()[Priority::RealTime.index()], 20);
    }

    const MODEL_LIMITS: QueueLimits = QueueLimits {
        memory_entries: 3,
        max_entries: 12,
        spill_file_bytes: 160,
        write_through: false,
    };

    /// Applies one op to both; checks what take returns.
    fn step(
        q: &mut DurableQueue,
        m: &mut Model,
        dir: &Path,
        op: Op,
        lim: QueueLimits,
    ) -> Result<(), TestCaseError> {
        match op {
            Op::Push { p, len } => {
                m.next_id += 1;
                let e = entry(m.next_id, len);
                let expected = m.waiting[p].len() < lim.max_entries as usize;
                if expected {
                    m.waiting[p].push_back(e.clone());
                }
                prop_assert_eq!(q.push(priority(p), e).expect("push"), expected);
            }
            Op::Take { max, max_bytes } => {
                let got = q.take(max, max_bytes);
                let want = m.take(max, max_bytes);
                let got_ids: Vec<(Priority, u64)> =
                    got.iter().map(|(_, p, e)| (*p, id_of(e))).collect();
                let want_ids: Vec<(Priority, u64)> =
                    want.iter().map(|(i, e)| (priority(*i), id_of(e))).collect();
                prop_assert_eq!(got_ids, want_ids);
                for ((ticket, _, e), (i, _)) in got.into_iter().zip(want) {
                    m.in_flight.insert(ticket, (i, e));
                }
            }
            Op::Ack(mask) => {
                let tickets = m.pick(mask);
                q.ack(&tickets);
                tickets.iter().for_each(|t| drop(m.in_flight.remove(t)));
            }
            Op::Nack(mask) => {
                let tickets = m.pick(mask);
                q.nack(&tickets);
                for t in tickets {
                    let (i, e) = m.in_flight.remove(&t).expect("in flight");
                    m.requeue(i, e);
                }
            }
            Op::Flush => q.flush().expect("flush"),
            Op::Clear => {
                let expected: u64 = m.counts().iter().sum();
                prop_assert_eq!(q.clear().expect("clear"), expected);
                m.waiting = Default::default();
            }
            Op::Reopen => {
                q.close().expect("close");
                for (_, (i, e)) in std::mem::take(&mut m.in_flight) {
                    m.requeue(i, e);
                }
                let (reopened, report) = open(dir, lim);
                *q = reopened;
                prop_assert_eq!(
                    (report.recovered, report.clean, report.corrupt_skipped),
                    (m.counts(), true, 0)
                );
            }
        }
        prop_assert_eq!(q.waiting(), m.counts());
        prop_assert_eq!(q.in_flight(), m.in_flight.len());
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(128))]

        /// Against the model, with 3 entries in memory and files rolling
        /// every record or two: every take returns what the model says,
        /// counts agree after every step, close + reopen loses nothing,
        /// and once everything is delivered no file is left.
        #[test]
        fn the_queue_behaves_as_the_model(
            ops in proptest::collection::vec(op(), 1..120),
            write_through in any::<bool>(),
        ) {
            let lim = QueueLimits { write_through, ..MODEL_LIMITS };
            let dir = tempfile::tempdir().expect("tempdir");
            let (mut q, _) = open(dir.path(), lim);
            let mut m = Model::default();
            for op in ops {
                step(&mut q, &mut m, dir.path(), op, lim)?;
            }
            step(&mut q, &mut m, dir.path(), Op::Nack(u64::MAX), lim)?;
            let rest = m.take(usize::MAX, usize::MAX);
            let expected: Vec<(Priority, u64)> =
                rest.iter().map(|(i, e)| (priority(*i), id_of(e))).collect();
            prop_assert_eq!(drain(&q), expected);
            prop_assert!(queue_files(dir.path()).is_empty());
        }

        /// Damage anywhere (bytes flipped in any file, the clean marker
        /// included; a file truncated) never panics and never delivers
        /// anything that was not pushed, nor out of order.
        #[test]
        fn damaged_files_never_panic(
            n in 1u64..30,
            clean in any::<bool>(),
            flips in proptest::collection::vec((any::<usize>(), any::<usize>(), 1u8..=255), 0..4),
            cut in proptest::option::of((any::<usize>(), any::<usize>())),
        ) {
            let dir = tempfile::tempdir().expect("tempdir");
            let (q, _) = open(dir.path(), limits(2, 100, 150));
            push_ids(&q, Priority::RealTime, 1..=n);
            let _in_flight = q.take(1, usize::MAX);
            if clean {
                q.close().expect("close");
            } else {
                q.flush().expect("flush");
            }
            drop(q);
            let mut files = queue_files(dir.path());
            files.push(dir.path().join(MARKER_NAME));
            files.retain(|f| f.exists());
            if files.is_empty() {
                return Ok(()); // nothing reached disk
            }
            for (file, at, xor) in &flips {
                let path = &files[file % files.len()];
                let mut bytes = fs::read(path).expect("read");
                if !bytes.is_empty() {
                    let at = at % bytes.len();
                    bytes[at] ^= xor;
                    fs::write(path, bytes).expect("write");
                }
            }
            if let Some((file, at)) = cut {
                let path = &files[file % files.len()];
                let len = fs::metadata(path).expect("metadata").len();
                let to = (at as u64) % (len + 1);
                let file = File::options().write(true).open(path).expect("open");
                file.set_len(to).expect("truncate");
            }
            let (q, _) = open(dir.path(), limits(2, 100, 150));
            let delivered = ids(&drain(&q));
            prop_assert!(delivered.windows(2).all(|w| w[0] < w[1]), "{:?}", delivered);
            prop_assert!(delivered.iter().all(|id| (1..=n).contains(id)));
            if clean && flips.is_empty() && cut.is_none() {
                prop_assert_eq!(delivered, (1..=n).collect::<Vec<_>>());
            }
            prop_assert_eq!(q.waiting(), [0; 3]);
        }
    }

    #[test]
    fn the_queue_is_send_and_sync() {
        fn shared<T: Send + Sync>() {}
        shared::<DurableQueue>();
    }
}
