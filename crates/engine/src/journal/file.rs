//! Journal files: data files (`.jnl`), their indexes (`.jix`) and the
//! resynchronising record scanner.
//!
//! ## Data file `<file_no:08>.jnl`
//!
//! ```text
//! jnl    := header record*
//! header := magic:"BSLTJNL1" version:u32 reserved:u32      (16 bytes)
//! ```
//!
//! Records are framed as described in [`super::record`]. SQNs ascend
//! strictly within a file and across files.
//!
//! ## Index file `<file_no:08>.jix` (closed files only)
//!
//! ```text
//! jix   := magic:"BSLTJIX1" version:u32 count:u64 (sqn:u64 offset:u64){count} crc:u32
//! crc   := crc32c of every byte before it
//! ```
//!
//! Entries are sorted by SQN; `offset` is the byte offset of the record in the
//! `.jnl`. Written (atomically, fsynced) when a file is rolled, and rebuilt by
//! scanning the `.jnl` if missing or damaged. Loaded whole into memory at open:
//! 16 bytes per record.
//!
//! **Version 2** (a file reclaimed in place, [`super::punch`]) has the same
//! layout; an entry whose offset has its top bit set ([`PUNCHED`]) is not a
//! record but the start of a *punched run*: records that were all garbage,
//! from that offset to the next entry's offset (or the end of the file),
//! whose whole 4 KiB blocks ([`punch_ranges`]) are holes. The entry's SQN is
//! the run's first record's. Version 1 has no such entries.
//!
//! ## Scanning
//!
//! [`scan`] walks records from an offset. When a record fails (bad magic, bad
//! CRC, impossible length, truncated, bad structure, SQN not ascending) it
//! searches forward byte by byte for the next offset where the record magic
//! appears *and* a complete valid record with a higher SQN parses. The bytes
//! skipped form a damaged region; if no valid record follows, the damage runs
//! to the end of the file (a torn tail, for the active file).

use super::record::{
    decode_frame_header, verify_and_decode_body, RecordView, RECORD_HEADER_LEN, RECORD_MAGIC,
};
use crate::codec::{crc, DecodeError, Encode, Reader};
use crate::error::{Error, IoContext, Result};
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Magic bytes at the start of every journal data file.
pub const JNL_MAGIC: &[u8; 8] = b"BSLTJNL1";
/// Magic bytes at the start of every journal index file.
pub const JIX_MAGIC: &[u8; 8] = b"BSLTJIX1";
/// Data file format version.
pub const JNL_VERSION: u32 = 1;
/// Index file format version (without punched runs).
pub const JIX_VERSION: u32 = 1;
/// Index file format version of a file with punched runs.
pub const JIX_VERSION_PUNCHED: u32 = 2;
/// Flag on an index entry's offset: the start of a punched run, not a record.
pub const PUNCHED: u64 = 1 << 63;
pub use super::gate::PUNCH_BLOCK;
/// Size of the data file header; the first record starts here.
pub const JNL_HEADER_LEN: u64 = 16;

const JIX_HEADER_LEN: usize = 8 + 4 + 8;
const SCAN_CHUNK: usize = 1 << 20;

/// Name of data file `file_no`.
pub fn jnl_name(file_no: u64) -> String {
    format!("{file_no:08}.jnl")
}

/// Name of index file `file_no`.
pub fn jix_name(file_no: u64) -> String {
    format!("{file_no:08}.jix")
}

/// Parses a data file name (`<digits>.jnl`) into its number.
pub fn parse_jnl_name(name: &str) -> Option<u64> {
    let stem = name.strip_suffix(".jnl")?;
    if stem.is_empty() || !stem.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    stem.parse().ok()
}

/// The 16-byte data file header.
pub fn jnl_header() -> Vec<u8> {
    let mut h = Vec::with_capacity(JNL_HEADER_LEN as usize);
    h.extend_from_slice(JNL_MAGIC);
    h.put_u32(JNL_VERSION);
    h.put_u32(0);
    h
}

/// Checks a data file header.
pub fn check_jnl_header(buf: &[u8]) -> Result<(), DecodeError> {
    let mut r = Reader::new(buf);
    if r.take(8)? != JNL_MAGIC {
        return Err(DecodeError("bad magic (not a journal data file)".into()));
    }
    let version = r.u32()?;
    if version != JNL_VERSION {
        return Err(DecodeError(format!(
            "unsupported journal file version {version} (this build reads {JNL_VERSION})"
        )));
    }
    Ok(())
}

/// Reads and checks the header of an open data file.
pub fn read_jnl_header(file: &File, path: &Path, size: u64) -> Result<()> {
    if size < JNL_HEADER_LEN {
        return Err(Error::corrupt(
            path,
            0,
            format!("file of {size} bytes is shorter than the journal header"),
        ));
    }
    let mut h = [0u8; JNL_HEADER_LEN as usize];
    file.read_exact_at(&mut h, 0).ctx("read header", path)?;
    Error::refuse_unread_header(&h, JNL_MAGIC, &[JNL_VERSION], "journal data file", path)?;
    check_jnl_header(&h).map_err(|e| Error::corrupt(path, 0, e.0))
}

/// True if an index entry is the start of a punched run, not a record.
pub fn is_punched(entry: (u64, u64)) -> bool {
    entry.1 & PUNCHED != 0
}

/// An index entry's offset without its [`PUNCHED`] flag.
pub fn entry_offset(entry: (u64, u64)) -> u64 {
    entry.1 & !PUNCHED
}

/// Serialises an index file (version 2 if it has punched runs).
pub fn encode_index(index: &[(u64, u64)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(JIX_HEADER_LEN + index.len() * 16 + 4);
    out.extend_from_slice(JIX_MAGIC);
    let punched = index.iter().any(|e| is_punched(*e));
    out.put_u32(if punched {
        JIX_VERSION_PUNCHED
    } else {
        JIX_VERSION
    });
    out.put_u64(index.len() as u64);
    for &(sqn, off) in index {
        out.put_u64(sqn);
        out.put_u64(off);
    }
    let sum = crc(&out);
    out.put_u32(sum);
    out
}

/// Parses and validates an index file. `jnl_size` is the size of the data
/// file it describes: offsets must point inside it. Never panics.
pub fn decode_index(buf: &[u8], jnl_size: u64) -> Result<Vec<(u64, u64)>, DecodeError> {
    let body_len = buf
        .len()
        .checked_sub(4)
        .ok_or_else(|| DecodeError(format!("index of {} bytes is too short", buf.len())))?;
    let (body, trailer) = buf.split_at(body_len);
    let stored = Reader::new(trailer).u32()?;
    let sum = crc(body);
    if stored != sum {
        return Err(DecodeError(format!(
            "index checksum mismatch (stored 0x{stored:08x}, computed 0x{sum:08x})"
        )));
    }
    let mut r = Reader::new(body);
    if r.take(8)? != JIX_MAGIC {
        return Err(DecodeError("bad magic (not a journal index)".into()));
    }
    let version = r.u32()?;
    if version != JIX_VERSION && version != JIX_VERSION_PUNCHED {
        return Err(DecodeError(format!("unsupported index version {version}")));
    }
    let count = r.u64()?;
    if count.checked_mul(16) != Some(r.remaining() as u64) {
        return Err(DecodeError(format!(
            "{count} entries do not match the {} bytes left",
            r.remaining()
        )));
    }
    let mut out = Vec::with_capacity(r.remaining() / 16);
    let mut prev: Option<(u64, u64)> = None;
    while !r.is_empty() {
        let sqn = r.u64()?;
        let raw = r.u64()?;
        if is_punched((sqn, raw)) && version == JIX_VERSION {
            return Err(DecodeError(format!(
                "entry for sqn {sqn} is a punched run in a version {version} index"
            )));
        }
        let off = entry_offset((sqn, raw));
        if off < JNL_HEADER_LEN || off >= jnl_size {
            return Err(DecodeError(format!(
                "offset {off} of sqn {sqn} is outside the data file ({jnl_size} bytes)"
            )));
        }
        if let Some((ps, po)) = prev {
            if sqn <= ps || off <= po {
                return Err(DecodeError(format!("entry for sqn {sqn} is out of order")));
            }
        }
        prev = Some((sqn, off));
        out.push((sqn, raw));
    }
    Ok(out)
}

/// A region of a data file that holds no valid record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Damage {
    /// Offset where the damage starts.
    pub offset: u64,
    /// Bytes damaged.
    pub len: u64,
    /// SQN of the last good record before the damage (0 if none).
    pub prev_sqn: u64,
    /// SQN of the first good record after it (`u64::MAX` if none: the damage
    /// runs to the end of the file).
    pub next_sqn: u64,
}

/// How a scan ended.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScanOutcome {
    /// Offset just past the last valid record (or the start offset).
    pub valid_end: u64,
    /// Damaged regions found, in file order. The last one may run to the end
    /// of the file (`next_sqn == u64::MAX`): a torn tail.
    pub damage: Vec<Damage>,
    /// The reason the first byte of each damaged region failed, parallel to `damage`.
    pub reasons: Vec<String>,
}

impl ScanOutcome {
    /// The damaged region running to the end of the file, if any.
    pub fn tail(&self) -> Option<&Damage> {
        self.damage.last().filter(|d| d.next_sqn == u64::MAX)
    }
}

/// A read window over a file, for sequential scans with positional I/O.
struct Window<'f> {
    file: &'f File,
    path: &'f Path,
    end: u64,
    start: u64,
    buf: Vec<u8>,
}

impl<'f> Window<'f> {
    fn new(file: &'f File, path: &'f Path, end: u64) -> Self {
        Window {
            file,
            path,
            end,
            start: 0,
            buf: Vec::new(),
        }
    }

    /// The bytes `[off, off + len)`, or `None` if they run past the end.
    fn get(&mut self, off: u64, len: usize) -> Result<Option<&[u8]>> {
        let Some(stop) = off.checked_add(len as u64).filter(|s| *s <= self.end) else {
            return Ok(None);
        };
        let have = off >= self.start && stop <= self.start + self.buf.len() as u64;
        if !have {
            let want = len.max(SCAN_CHUNK) as u64;
            let read_len = want.min(self.end - off) as usize;
            self.buf.clear();
            self.buf.resize(read_len, 0);
            self.file
                .read_exact_at(&mut self.buf, off)
                .ctx("read", self.path)?;
            self.start = off;
        }
        let lo = (off - self.start) as usize;
        Ok(self.buf.get(lo..lo + len))
    }

    /// Tries to parse a valid record at `off` whose SQN is above `min_sqn`.
    fn record_at(
        &mut self,
        off: u64,
        min_sqn: u64,
    ) -> Result<Result<(RecordView<'_>, u64), String>> {
        let room = self.end.saturating_sub(off);
        let Some(head) = self.get(off, RECORD_HEADER_LEN)? else {
            return Ok(Err(format!("truncated record header ({room} bytes left)")));
        };
        let h = match decode_frame_header(head, room) {
            Ok(h) => h,
            Err(e) => return Ok(Err(e.0)),
        };
        let body_off = off + RECORD_HEADER_LEN as u64;
        let Some(body) = self.get(body_off, h.body_len as usize)? else {
            return Ok(Err("truncated record body".into()));
        };
        match verify_and_decode_body(&h, body) {
            Ok(v) if v.sqn <= min_sqn => Ok(Err(format!(
                "record sqn {} does not ascend (previous {min_sqn})",
                v.sqn
            ))),
            Ok(v) => Ok(Ok((v, h.total_len()))),
            Err(e) => Ok(Err(e.0)),
        }
    }

    /// Finds the first offset after `from` where a valid record with SQN
    /// above `min_sqn` starts.
    fn resync(&mut self, from: u64, min_sqn: u64) -> Result<Option<u64>> {
        let magic = RECORD_MAGIC.to_le_bytes();
        let mut p = from;
        while p + RECORD_HEADER_LEN as u64 <= self.end {
            let n = (self.end - p).min(SCAN_CHUNK as u64) as usize;
            let Some(chunk) = self.get(p, n)? else {
                break;
            };
            let found = chunk.windows(magic.len()).position(|w| w == magic);
            match found {
                Some(i) => {
                    let cand = p + i as u64;
                    if self.record_at(cand, min_sqn)?.is_ok() {
                        return Ok(Some(cand));
                    }
                    p = cand + 1;
                }
                None => {
                    // Keep the last 3 bytes: the magic may straddle chunks.
                    let step = (chunk.len() as u64).saturating_sub(magic.len() as u64 - 1);
                    if step == 0 {
                        break;
                    }
                    p += step;
                }
            }
        }
        Ok(None)
    }
}

/// Scans the records of `file` in `[start, end)`, calling `on_record` with
/// each valid record and its offset and total length. Records must have SQNs
/// above `min_sqn` and ascending. Damaged regions are skipped (see the module
/// docs) and reported in the outcome; nothing is modified.
pub fn scan(
    file: &File,
    path: &Path,
    start: u64,
    end: u64,
    min_sqn: u64,
    on_record: &mut dyn FnMut(u64, u64, RecordView<'_>) -> Result<()>,
) -> Result<ScanOutcome> {
    let mut w = Window::new(file, path, end);
    let mut out = ScanOutcome {
        valid_end: start,
        ..ScanOutcome::default()
    };
    let mut prev_sqn = min_sqn;
    let mut off = start;
    while off < end {
        match w.record_at(off, prev_sqn)? {
            Ok((view, len)) => {
                let sqn = view.sqn;
                on_record(off, len, view)?;
                prev_sqn = sqn;
                off += len;
                out.valid_end = off;
            }
            Err(reason) => {
                let next = w.resync(off + 1, prev_sqn)?;
                let (stop, next_sqn) = match next {
                    Some(n) => {
                        // Read the SQN again; it is known to parse.
                        let sqn = match w.record_at(n, prev_sqn)? {
                            Ok((v, _)) => v.sqn,
                            Err(_) => u64::MAX,
                        };
                        (n, sqn)
                    }
                    None => (end, u64::MAX),
                };
                debug_assert!(stop > off);
                out.damage.push(Damage {
                    offset: off,
                    len: stop - off,
                    prev_sqn,
                    next_sqn,
                });
                out.reasons.push(reason);
                off = stop;
            }
        }
    }
    Ok(out)
}

/// Reads the record at `offset` of a data file of `size` bytes with
/// positional I/O, verifying magic, CRC and structure (and decompressing the
/// value: a value that fails to decompress is [`Error::Corrupt`]).
pub fn read_record_at(
    file: &File,
    path: &Path,
    offset: u64,
    size: u64,
) -> Result<super::record::JournalRecord> {
    read_record_at_opt(file, path, offset, size, true)
}

/// [`read_record_at`], optionally without the value (`with_value == false`
/// leaves `value` empty and skips decompression).
pub fn read_record_at_opt(
    file: &File,
    path: &Path,
    offset: u64,
    size: u64,
    with_value: bool,
) -> Result<super::record::JournalRecord> {
    let room = size.saturating_sub(offset);
    let mut head = [0u8; RECORD_HEADER_LEN];
    if room < RECORD_HEADER_LEN as u64 {
        return Err(Error::corrupt(
            path,
            offset,
            "record header runs past the end of the file",
        ));
    }
    crate::nowait::read_exact_at(file, &mut head, offset).ctx("read", path)?;
    let h = decode_frame_header(&head, room).map_err(|e| Error::corrupt(path, offset, e.0))?;
    let mut body = vec![0u8; h.body_len as usize];
    crate::nowait::read_exact_at(file, &mut body, offset + RECORD_HEADER_LEN as u64)
        .ctx("read", path)?;
    let view = verify_and_decode_body(&h, &body).map_err(|e| Error::corrupt(path, offset, e.0))?;
    if with_value {
        view.to_record()
            .map_err(|e| Error::corrupt(path, offset, e.0))
    } else {
        Ok(view.to_record_meta())
    }
}

/// Most bytes [`read_record_span`] reads in its one read. A span longer than
/// this (a large value, or a damaged region before the next indexed record)
/// is read as header, then exactly the body.
pub const ONE_READ_BYTES_MAX: u64 = 1 << 20;

/// Reads the record at `offset` whose index span ends at `end` (the next
/// indexed record's offset, or the file size), verifying it as
/// [`read_record_at`] does. With `one_read`, header and body come from one
/// positional read of `[offset, end)` (capped at [`ONE_READ_BYTES_MAX`]), so
/// a GET costs one syscall and, when the pages are not cached, one disk
/// read; the bytes read are checked against the record's own length, never
/// trusted from the index. Without `one_read`, or when the record turns out
/// longer than what was read, it falls back to reading what is missing.
pub fn read_record_span(
    file: &File,
    path: &Path,
    offset: u64,
    end: u64,
    size: u64,
    one_read: bool,
) -> Result<super::record::JournalRecord> {
    let span = end.min(size).saturating_sub(offset);
    if !one_read || span < RECORD_HEADER_LEN as u64 || span > ONE_READ_BYTES_MAX {
        return read_record_at(file, path, offset, size);
    }
    let mut buf = vec![0u8; span as usize];
    crate::nowait::read_exact_at(file, &mut buf, offset).ctx("read", path)?;
    match decode_span(&buf, path, offset, size)? {
        Some(rec) => Ok(rec),
        // The index said less than the record claims (its length is CRC
        // checked): read it whole rather than fail.
        None => read_record_at(file, path, offset, size),
    }
}

/// Decodes and verifies the record at `offset` from `bytes`, which hold the
/// file from `offset` on; `None` if the record's header claims more bytes
/// than `bytes` has (the caller reads it whole).
fn decode_span(
    bytes: &[u8],
    path: &Path,
    offset: u64,
    size: u64,
) -> Result<Option<super::record::JournalRecord>> {
    let room = size.saturating_sub(offset);
    let head = bytes.get(..RECORD_HEADER_LEN).unwrap_or_default();
    let h = decode_frame_header(head, room).map_err(|e| Error::corrupt(path, offset, e.0))?;
    let Some(body) = usize::try_from(h.total_len())
        .ok()
        .and_then(|total| bytes.get(RECORD_HEADER_LEN..total))
    else {
        return Ok(None);
    };
    let view = verify_and_decode_body(&h, body).map_err(|e| Error::corrupt(path, offset, e.0))?;
    view.to_record()
        .map(Some)
        .map_err(|e| Error::corrupt(path, offset, e.0))
}

/// Alignment of direct reads (`O_DIRECT`): their offsets, lengths and
/// buffer addresses are multiples of it. 4 KiB covers devices with 512-byte
/// and 4 KiB logical blocks.
pub const DIRECT_ALIGN: u64 = 4096;

/// Opens `path` read-only for direct reads (`O_DIRECT`: the kernel reads
/// the disk into our buffer and keeps nothing in the page cache). `None`,
/// logged, where the file system refuses it (tmpfs, some overlays): the
/// caller reads through the page cache instead.
pub fn open_direct(path: &Path) -> Option<File> {
    use rustix::fs::{Mode, OFlags};
    match rustix::fs::open(
        path,
        OFlags::RDONLY | OFlags::DIRECT | OFlags::CLOEXEC,
        Mode::empty(),
    ) {
        Ok(fd) => Some(File::from(fd)),
        Err(e) => {
            tracing::debug!(path = %path.display(), error = %e, "O_DIRECT refused; value reads of this file go through the page cache");
            None
        }
    }
}

/// [`read_record_span`] through `direct`, a handle opened by
/// [`open_direct`]: one aligned read of the pages holding `[offset, end)`,
/// verified as every read is. Anything the aligned read cannot serve (a
/// span over [`ONE_READ_BYTES_MAX`], a record longer than its index span, a
/// short read) is read through `buffered` instead, so the answer never
/// depends on which handle read it.
pub fn read_record_direct(
    direct: &File,
    buffered: &File,
    path: &Path,
    offset: u64,
    end: u64,
    size: u64,
) -> Result<super::record::JournalRecord> {
    if crate::nowait::active() {
        // A direct read always goes to the disk.
        return Err(crate::nowait::blocked("read (O_DIRECT)", path));
    }
    let stop = end.min(size);
    let span = stop.saturating_sub(offset);
    if span < RECORD_HEADER_LEN as u64 || span > ONE_READ_BYTES_MAX {
        return read_record_at(buffered, path, offset, size);
    }
    let first = offset - offset % DIRECT_ALIGN;
    let last = stop.div_ceil(DIRECT_ALIGN) * DIRECT_ALIGN;
    let len = (last - first) as usize;
    let align = DIRECT_ALIGN as usize;
    let mut raw = vec![0u8; len + align];
    let pad = raw.as_ptr().align_offset(align);
    let Some(buf) = raw.get_mut(pad..pad + len) else {
        return read_record_at(buffered, path, offset, size);
    };
    debug_assert_eq!(
        buf.as_ptr() as usize % align,
        0,
        "direct read buffer is not aligned"
    );
    let got = read_up_to(direct, buf, first).ctx("read (O_DIRECT)", path)?;
    let lo = (offset - first) as usize;
    let hi = (stop - first) as usize;
    let decoded = match buf.get(lo..hi.min(got)) {
        Some(bytes) if hi <= got => decode_span(bytes, path, offset, size)?,
        _ => None,
    };
    match decoded {
        Some(rec) => Ok(rec),
        None => read_record_at(buffered, path, offset, size),
    }
}

/// Reads into `buf` at `offset` until it is full or the file ends; returns
/// the bytes read (a direct read may end early only at the end of file).
fn read_up_to(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<usize> {
    let mut got = 0usize;
    while let Some(rest) = buf.get_mut(got..).filter(|r| !r.is_empty()) {
        match file.read_at(rest, offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

/// The offset of `sqn` in a sorted index and the end of its span: the next
/// record's offset, or `size` for the last record.
///
/// SQNs of a file written by appends are consecutive, so `sqn - first` is
/// tried first (one probe instead of a binary search's ~17 cache misses on
/// a 256 MiB file's index); files with gaps (compaction output) fall back
/// to the binary search.
pub fn index_span(index: &[(u64, u64)], sqn: u64, size: u64) -> Option<(u64, u64)> {
    let guess = index
        .first()
        .and_then(|f| sqn.checked_sub(f.0))
        .and_then(|d| usize::try_from(d).ok())
        .filter(|&d| index.get(d).is_some_and(|e| e.0 == sqn));
    let i = match guess {
        Some(i) => i,
        None => index.binary_search_by_key(&sqn, |e| e.0).ok()?,
    };
    let e = *index.get(i)?;
    if is_punched(e) {
        return None;
    }
    let end = index.get(i + 1).map_or(size, |n| entry_offset(*n));
    Some((e.1, end))
}

/// A journal file that is no longer appended to.
#[derive(Debug)]
pub struct ClosedFile {
    /// File number.
    pub file_no: u64,
    /// Path of the `.jnl`.
    pub path: PathBuf,
    /// The open data file (positional reads need no lock). For a file that
    /// was the active one, the handle it was written through: a
    /// [`super::JournalView`] made then holds it too, which is how removal
    /// knows that someone still reads the file (see `Drop`).
    pub file: Arc<File>,
    /// A second handle for value reads that bypass the page cache
    /// ([`open_direct`]), when `Config::journal_direct_reads` is on and the
    /// file system allows it.
    pub direct: Option<File>,
    /// Size in bytes.
    pub size: u64,
    /// (sqn, offset) of every record, sorted by SQN.
    pub index: Vec<(u64, u64)>,
    /// Damaged regions found when the index was rebuilt by scanning (empty if
    /// the `.jix` was loaded).
    pub damage: Vec<Damage>,
    /// Highest SQN in this file or any older one: ascending over the files,
    /// so a binary search works even if a file is empty.
    pub search_hi: u64,
    /// Bytes of the file in holes ([`punch_ranges`] of `index`).
    pub punched: u64,
    /// Orders the punches of this file's successive indexes
    /// ([`super::punch`]).
    pub gate: Arc<super::gate::PunchGate>,
    /// Set once journal compaction has replaced this file in the manifest:
    /// when the last `Arc` (a reader, a [`super::JournalView`], a backup)
    /// is dropped, the `.jix` is unlinked and the `.jnl` handed to
    /// [`crate::remover`] (deferred deletion).
    pub obsolete: crate::remover::Obsolete,
}

impl Drop for ClosedFile {
    fn drop(&mut self) {
        let Some(rate) = self.obsolete.rate() else {
            return;
        };
        // Another holder of this handle (a `JournalView` made while this
        // was the active file, a fetch begun then) reads on after the
        // unlink, so the file is shrunk first only when nobody does.
        let alone = Arc::strong_count(&self.file) == 1;
        let removed = crate::remover::remove(&self.path, Some(&self.file), alone, rate);
        let jix = self.path.with_extension("jix");
        let jix_removed = std::fs::remove_file(&jix);
        for (p, r) in [(&self.path, removed), (&jix, jix_removed)] {
            match r {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                // Not fatal: the file is not in the manifest, so the next
                // open removes it as a leftover.
                Err(e) => {
                    tracing::warn!(path = %p.display(), error = %e, "could not delete a compacted journal file")
                }
            }
        }
        tracing::debug!(path = %self.path.display(), "removing compacted journal file");
    }
}

impl ClosedFile {
    /// Lowest SQN in the file (0 if empty).
    pub fn first_sqn(&self) -> u64 {
        self.index.first().map_or(0, |e| e.0)
    }

    /// Highest SQN in the file (0 if empty).
    pub fn last_sqn(&self) -> u64 {
        self.index.last().map_or(0, |e| e.0)
    }

    /// Bytes of the file not in holes: what it holds on disk.
    pub fn disk_bytes(&self) -> u64 {
        self.size - self.punched
    }

    /// Scans the file's records ([`scan`] over each of its
    /// [`record_segments`], so never its holes) through `file`, a handle
    /// of its own; the outcomes' damage is concatenated.
    pub fn scan_records(
        &self,
        file: &File,
        on_record: &mut dyn FnMut(u64, u64, RecordView<'_>) -> Result<()>,
    ) -> Result<ScanOutcome> {
        let mut all = ScanOutcome::default();
        for (start, end) in record_segments(&self.index, self.size) {
            let min_sqn = sqn_before(&self.index, start);
            let out = scan(file, &self.path, start, end, min_sqn, on_record)?;
            all.valid_end = out.valid_end;
            all.damage.extend(out.damage);
            all.reasons.extend(out.reasons);
        }
        Ok(all)
    }
}

/// The SQN of the last index entry before offset `off` (0 if none): every
/// record from `off` on has a higher one.
pub fn sqn_before(index: &[(u64, u64)], off: u64) -> u64 {
    let before = index.partition_point(|e| entry_offset(*e) < off);
    before
        .checked_sub(1)
        .and_then(|i| index.get(i))
        .map_or(0, |e| e.0)
}

/// Bytes in the holes of a file with this index.
pub fn punched_bytes(index: &[(u64, u64)], size: u64) -> u64 {
    punch_ranges(index, size).iter().map(|r| r.1).sum()
}

/// Offset of `sqn` in a sorted index (`None` for a punched run's entry).
pub fn index_lookup(index: &[(u64, u64)], sqn: u64) -> Option<u64> {
    index
        .binary_search_by_key(&sqn, |e| e.0)
        .ok()
        .and_then(|i| index.get(i))
        .filter(|e| !is_punched(**e))
        .map(|e| e.1)
}

/// The holes of a file with this index: the whole [`PUNCH_BLOCK`]s inside
/// each punched run, `(offset, len)` in file order.
pub fn punch_ranges(index: &[(u64, u64)], size: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    for (i, e) in index.iter().enumerate() {
        if !is_punched(*e) {
            continue;
        }
        let end = index.get(i + 1).map_or(size, |n| entry_offset(*n));
        if let Some(r) = block_interior(entry_offset(*e), end) {
            out.push(r);
        }
    }
    out
}

/// The parts of `ranges` outside every range of `holes` (both sorted and
/// non-overlapping, `(offset, len)`): what a pass must punch that earlier
/// passes have not.
pub fn ranges_outside(ranges: &[(u64, u64)], holes: &[(u64, u64)]) -> Vec<(u64, u64)> {
    debug_assert!(ranges.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0));
    debug_assert!(holes.windows(2).all(|w| w[0].0 + w[0].1 <= w[1].0));
    let mut out = Vec::new();
    let mut h = holes.iter().peekable();
    for &(off, len) in ranges {
        let (mut at, end) = (off, off + len);
        while let Some(&&(ho, hl)) = h.peek() {
            if ho + hl <= at {
                h.next();
                continue;
            }
            if ho >= end {
                break;
            }
            if ho > at {
                out.push((at, ho - at));
            }
            at = at.max(ho + hl);
            if ho + hl > end {
                break;
            }
            h.next();
        }
        if at < end {
            out.push((at, end - at));
        }
    }
    out
}

/// The whole [`PUNCH_BLOCK`]s inside `[start, end)` as `(offset, len)`, if any.
pub fn block_interior(start: u64, end: u64) -> Option<(u64, u64)> {
    let lo = start.div_ceil(PUNCH_BLOCK) * PUNCH_BLOCK;
    let hi = end / PUNCH_BLOCK * PUNCH_BLOCK;
    (hi > lo).then(|| (lo, hi - lo))
}

/// The stretches of a file holding records, `[start, end)` in file order:
/// from the header, or each record entry that follows a punched run, to the
/// next punched run or the end of the file. Scans walk these only, never
/// the holes; a file without punched runs is one stretch, header to end.
pub fn record_segments(index: &[(u64, u64)], size: u64) -> Vec<(u64, u64)> {
    let mut out = Vec::new();
    let mut start: Option<u64> = match index.first() {
        Some(e) if is_punched(*e) => None,
        _ => Some(JNL_HEADER_LEN.min(size)),
    };
    for e in index {
        match (is_punched(*e), start) {
            (false, None) => start = Some(e.1),
            (true, Some(s)) => {
                out.push((s, entry_offset(*e)));
                start = None;
            }
            _ => {}
        }
    }
    if let Some(s) = start.filter(|s| *s < size) {
        out.push((s, size));
    }
    out
}

/// The damaged region that may have held `sqn`, if any.
pub fn damage_covering(damage: &[Damage], sqn: u64) -> Option<&Damage> {
    damage.iter().find(|d| d.prev_sqn < sqn && sqn < d.next_sqn)
}

/// Builds the index of a data file by scanning it (no modification).
pub fn build_index(file: &File, path: &Path, size: u64) -> Result<(Vec<(u64, u64)>, ScanOutcome)> {
    let mut index = Vec::new();
    let outcome = scan(file, path, JNL_HEADER_LEN, size, 0, &mut |off, _, v| {
        index.push((v.sqn, off));
        Ok(())
    })?;
    Ok((index, outcome))
}

#[cfg(test)]
mod tests {
    use super::super::record::{encode_record, NewRecord, RecordKind};
    use super::*;
    use proptest::prelude::*;
    use std::io::Write;

    fn write_file(path: &Path, sqns: &[u64]) -> Vec<u64> {
        let mut f = File::create(path).unwrap();
        f.write_all(&jnl_header()).unwrap();
        let mut offs = Vec::new();
        let mut off = JNL_HEADER_LEN;
        for &s in sqns {
            let mut buf = Vec::new();
            let v = vec![b'v'; s as usize];
            encode_record(
                &NewRecord {
                    sqn: s,
                    kind: RecordKind::Put,
                    key: b"k",
                    last_modified_us: 0,
                    expires_at: 0,
                    metadata: b"",
                    value: &v,
                    index: &[],
                },
                &mut buf,
            )
            .unwrap();
            f.write_all(&buf).unwrap();
            offs.push(off);
            off += buf.len() as u64;
        }
        offs
    }

    #[test]
    fn index_round_trip_and_damage() {
        let idx = vec![(1, 16), (2, 80), (5, 200)];
        let bytes = encode_index(&idx);
        assert_eq!(decode_index(&bytes, 1000).unwrap(), idx);
        assert!(decode_index(&bytes, 100).is_err());
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 4;
            assert!(decode_index(&bad, 1000).is_err());
        }
        assert_eq!(parse_jnl_name("00000012.jnl"), Some(12));
        assert_eq!(parse_jnl_name("x.jnl"), None);
        assert_eq!(parse_jnl_name("00000012.jix"), None);
    }

    #[test]
    fn scan_skips_middle_damage_and_reports_tail() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(jnl_name(1));
        let offs = write_file(&p, &[1, 2, 3, 4]);
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[offs[1] as usize + 20] ^= 0xff; // damage record 2's body
        bytes.extend_from_slice(b"garbage tail");
        std::fs::write(&p, &bytes).unwrap();
        let f = File::open(&p).unwrap();
        let (idx, out) = build_index(&f, &p, bytes.len() as u64).unwrap();
        assert_eq!(idx.iter().map(|e| e.0).collect::<Vec<_>>(), vec![1, 3, 4]);
        assert_eq!(out.damage.len(), 2);
        assert_eq!(out.damage[0].offset, offs[1]);
        assert_eq!((out.damage[0].prev_sqn, out.damage[0].next_sqn), (1, 3));
        assert_eq!(out.tail().unwrap().len, 12);
        assert_eq!(damage_covering(&out.damage, 2).unwrap().offset, offs[1]);
        assert!(damage_covering(&out.damage, 3).is_none());
    }

    #[test]
    fn one_read_takes_its_length_from_the_record_not_the_span() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join(jnl_name(1));
        let offs = write_file(&p, &[1, 30, 200, 5]);
        let size = std::fs::metadata(&p).unwrap().len();
        let f = File::open(&p).unwrap();
        crate::fsutil::no_readahead(&f, &p);
        for (i, &off) in offs.iter().enumerate() {
            let exact = offs.get(i + 1).copied().unwrap_or(size);
            let want = read_record_at(&f, &p, off, size).unwrap();
            // The exact span, a span running to the end of the file (a
            // damaged region before the next record), and spans shorter
            // than the record (only the header, a few body bytes) all give
            // the same record.
            for end in [exact, size, off + RECORD_HEADER_LEN as u64, off + 20] {
                for one_read in [true, false] {
                    let got = read_record_span(&f, &p, off, end, size, one_read).unwrap();
                    assert_eq!(got, want, "record {i} end {end} one_read {one_read}");
                }
            }
        }
        // A damaged byte is still corruption, never data.
        let mut bytes = std::fs::read(&p).unwrap();
        bytes[offs[2] as usize + 40] ^= 0x10;
        std::fs::write(&p, &bytes).unwrap();
        let f = File::open(&p).unwrap();
        let err = read_record_span(&f, &p, offs[2], offs[3], size, true).unwrap_err();
        assert!(err.is_corruption(), "{err}");
        assert_eq!(index_span(&[(1, 16), (3, 90)], 3, 200), Some((90, 200)));
        assert_eq!(index_span(&[(1, 16), (3, 90)], 1, 200), Some((16, 90)));
        assert_eq!(index_span(&[(1, 16), (3, 90)], 2, 200), None);
        // Consecutive SQNs (an appended file): found by position.
        let dense = [(5, 16), (6, 40), (7, 90)];
        assert_eq!(index_span(&dense, 6, 200), Some((40, 90)));
        assert_eq!(index_span(&dense, 7, 200), Some((90, 200)));
        assert_eq!(index_span(&dense, 5, 200), Some((16, 40)));
        assert_eq!(index_span(&dense, 4, 200), None);
        assert_eq!(index_span(&dense, 8, 200), None);
        assert_eq!(index_span(&[], 1, 200), None);
        // A gap before `sqn` moves it off its position: the search finds it.
        let gapped = [(5, 16), (9, 40), (10, 90)];
        assert_eq!(index_span(&gapped, 10, 200), Some((90, 200)));
        assert_eq!(index_span(&gapped, 9, 200), Some((40, 90)));
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]
        #[test]
        fn scanning_damaged_files_never_panics_or_returns_damaged_records(
            flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 0..4),
            cut in any::<prop::sample::Index>(),
            junk in proptest::collection::vec(any::<u8>(), 0..64),
        ) {
            let d = tempfile::tempdir().unwrap();
            let p = d.path().join(jnl_name(1));
            let offs = write_file(&p, &[1, 2, 3, 4, 5, 6]);
            let mut bytes = std::fs::read(&p).unwrap();
            let pristine = bytes.clone();
            for (at, x) in &flips {
                let i = at.index(bytes.len() - JNL_HEADER_LEN as usize) + JNL_HEADER_LEN as usize;
                bytes[i] ^= x;
            }
            let keep = cut.index(bytes.len() + 1).max(JNL_HEADER_LEN as usize);
            bytes.truncate(keep);
            bytes.extend_from_slice(&junk);
            std::fs::write(&p, &bytes).unwrap();
            let f = File::open(&p).unwrap();
            let mut seen = Vec::new();
            scan(&f, &p, JNL_HEADER_LEN, bytes.len() as u64, 0, &mut |off, len, v| {
                // Every record returned is byte-identical to one written.
                let i = offs.iter().position(|o| *o == off).unwrap();
                let end = (off + len) as usize;
                assert_eq!(&bytes[off as usize..end], &pristine[off as usize..end]);
                assert_eq!(v.sqn, i as u64 + 1);
                seen.push(v.sqn);
                Ok(())
            }).unwrap();
            prop_assert!(seen.windows(2).all(|w| w[0] < w[1]));
        }
    }
}
