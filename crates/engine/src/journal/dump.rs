//! `basalt dump` support for journal files: data files (`.jnl`), index files
//! (`.jix`) and the journal `MANIFEST`, recognised by their magic bytes.
//!
//! The dump verifies every checksum and reports damaged regions instead of
//! stopping at the first one. It only reads the file.

use super::file::{self, JIX_MAGIC, JNL_MAGIC};
use super::manifest::{Manifest, MANIFEST_MAGIC};
use super::record::RecordKind;
use crate::error::{Error, IoContext, Result};
use crate::key::{decode_object, display_bytes};
use std::fs::File;
use std::io::Write;
use std::path::Path;

/// Largest index file `dump` reads into memory.
const INDEX_DUMP_BYTES_MAX: u64 = 4 << 30;

/// Which kind of journal file a dump looked at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum JournalFileKind {
    /// A data file (`.jnl`).
    Data,
    /// A closed file's index (`.jix`).
    Index,
    /// The journal manifest.
    Manifest,
}

/// What a dump found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpReport {
    /// The kind of file.
    pub kind: JournalFileKind,
    /// File size in bytes.
    pub size_bytes: u64,
    /// Records (data file), index entries (index) or listed files (manifest).
    pub entries: u64,
    /// Lowest SQN seen (0 if none).
    pub first_sqn: u64,
    /// Highest SQN seen (0 if none).
    pub last_sqn: u64,
    /// Damaged regions found (for an index or manifest: 1 if its checksum or
    /// structure is bad).
    pub corrupt_regions: u64,
    /// Bytes in damaged regions (data files only).
    pub corrupt_bytes: u64,
}

/// Recognises a journal file by its first bytes (at least 8 needed).
pub fn journal_file_kind(first_bytes: &[u8]) -> Option<JournalFileKind> {
    let magic = first_bytes.get(..8)?;
    if magic == JNL_MAGIC {
        Some(JournalFileKind::Data)
    } else if magic == JIX_MAGIC {
        Some(JournalFileKind::Index)
    } else if magic == MANIFEST_MAGIC {
        Some(JournalFileKind::Manifest)
    } else {
        None
    }
}

/// True if `first_bytes` start like a journal data file, index or manifest.
pub fn is_journal_file(first_bytes: &[u8]) -> bool {
    journal_file_kind(first_bytes).is_some()
}

/// Renders an encoded ledger key: `bucket/key` for object keys, else raw.
fn show_key(key: &[u8]) -> String {
    match decode_object(key) {
        Ok((b, k)) => format!("{}/{}", display_bytes(&b), display_bytes(&k)),
        Err(_) => format!("(raw) {}", display_bytes(key)),
    }
}

fn w(out: &mut dyn Write, path: &Path, args: std::fmt::Arguments<'_>) -> Result<()> {
    out.write_fmt(args).ctx("write dump of", path)
}

/// Prints a summary (and with `show_records` each record or entry) of the
/// journal file at `path` to `out`, verifying checksums and reporting damaged
/// regions. Fails if the file is not a journal file or cannot be read.
pub fn dump(path: &Path, out: &mut dyn Write, show_records: bool) -> Result<DumpReport> {
    let f = File::open(path).ctx("open", path)?;
    let size = f.metadata().ctx("stat", path)?.len();
    let mut head = [0u8; 8];
    let n = std::io::Read::read(&mut &f, &mut head).ctx("read", path)?;
    let kind = journal_file_kind(head.get(..n).unwrap_or(&[]))
        .ok_or_else(|| Error::corrupt(path, 0, "not a journal file (unknown magic)"))?;
    match kind {
        JournalFileKind::Data => dump_data(&f, path, size, out, show_records),
        JournalFileKind::Index => dump_index(path, size, out, show_records),
        JournalFileKind::Manifest => dump_manifest(path, size, out, show_records),
    }
}

fn dump_data(
    f: &File,
    path: &Path,
    size: u64,
    out: &mut dyn Write,
    show: bool,
) -> Result<DumpReport> {
    w(
        out,
        path,
        format_args!("journal data file {} ({size} bytes)\n", path.display()),
    )?;
    let mut rep = DumpReport {
        kind: JournalFileKind::Data,
        size_bytes: size,
        entries: 0,
        first_sqn: 0,
        last_sqn: 0,
        corrupt_regions: 0,
        corrupt_bytes: 0,
    };
    if let Err(e) = file::read_jnl_header(f, path, size) {
        w(out, path, format_args!("CORRUPT header: {e}\n"))?;
        rep.corrupt_regions += 1;
        return Ok(rep);
    }
    // A file reclaimed in place has holes its `.jix` marks: only the
    // stretches holding records are scanned (a damaged or missing `.jix`
    // scans the whole file, and the holes show as damage).
    let index = std::fs::read(path.with_extension("jix"))
        .ok()
        .and_then(|b| file::decode_index(&b, size).ok())
        .unwrap_or_default();
    let segments = file::record_segments(&index, size);
    let holes = file::punched_bytes(&index, size);
    if holes > 0 {
        w(
            out,
            path,
            format_args!(
                "reclaimed in place: {} garbage runs, {holes} bytes punched (per its .jix)\n",
                index.iter().filter(|e| file::is_punched(**e)).count()
            ),
        )?;
    }
    let mut write_err: Option<Error> = None;
    let mut outcome = file::ScanOutcome::default();
    let mut on_record = |off: u64, len: u64, v: super::record::RecordView<'_>| {
        rep.entries += 1;
        if rep.first_sqn == 0 {
            rep.first_sqn = v.sqn;
        }
        rep.last_sqn = v.sqn;
        if show && write_err.is_none() {
            let kind = match v.kind {
                RecordKind::Put => "put",
                RecordKind::Delete => "delete",
                RecordKind::KeyDelta => "keydelta",
            };
            let r = writeln!(
                out,
                "  @{off} sqn={} {kind} key={} meta={}B value={}B index={}B record={len}B modified_us={} expires_at={}",
                v.sqn,
                show_key(v.key),
                v.metadata.len(),
                v.value.len(),
                v.index.len(),
                v.last_modified_us,
                v.expires_at
            );
            if let Err(e) = r {
                write_err = Some(Error::io("write dump of", path, e));
            }
        }
        Ok(())
    };
    for (start, end) in segments {
        let min_sqn = file::sqn_before(&index, start);
        let o = file::scan(f, path, start, end, min_sqn, &mut on_record)?;
        outcome.damage.extend(o.damage);
        outcome.reasons.extend(o.reasons);
    }
    if let Some(e) = write_err {
        return Err(e);
    }
    for (d, why) in outcome.damage.iter().zip(&outcome.reasons) {
        rep.corrupt_regions += 1;
        rep.corrupt_bytes += d.len;
        let after = if d.next_sqn == u64::MAX {
            "runs to the end of the file (torn tail?)".to_string()
        } else {
            format!("next good sqn {}", d.next_sqn)
        };
        w(
            out,
            path,
            format_args!(
                "CORRUPT @{} len={} after sqn {}: {why}; {after}\n",
                d.offset, d.len, d.prev_sqn
            ),
        )?;
    }
    w(
        out,
        path,
        format_args!(
            "records={} sqn={}..{} corrupt_regions={} corrupt_bytes={}\n",
            rep.entries, rep.first_sqn, rep.last_sqn, rep.corrupt_regions, rep.corrupt_bytes
        ),
    )?;
    Ok(rep)
}

fn read_small(path: &Path, size: u64, max: u64) -> Result<Vec<u8>> {
    if size > max {
        return Err(Error::corrupt(
            path,
            0,
            format!("file of {size} bytes is too large to dump"),
        ));
    }
    std::fs::read(path).ctx("read", path)
}

fn dump_index(path: &Path, size: u64, out: &mut dyn Write, show: bool) -> Result<DumpReport> {
    w(
        out,
        path,
        format_args!("journal index file {} ({size} bytes)\n", path.display()),
    )?;
    let bytes = read_small(path, size, INDEX_DUMP_BYTES_MAX)?;
    let mut rep = DumpReport {
        kind: JournalFileKind::Index,
        size_bytes: size,
        entries: 0,
        first_sqn: 0,
        last_sqn: 0,
        corrupt_regions: 0,
        corrupt_bytes: 0,
    };
    // Offsets are checked against the data file when the journal opens;
    // here only their order and the checksum are verified.
    match file::decode_index(&bytes, u64::MAX) {
        Ok(idx) => {
            rep.entries = idx.len() as u64;
            rep.first_sqn = idx.first().map_or(0, |e| e.0);
            rep.last_sqn = idx.last().map_or(0, |e| e.0);
            if show {
                for e in &idx {
                    let (sqn, off) = (e.0, file::entry_offset(*e));
                    let what = if file::is_punched(*e) {
                        " punched run"
                    } else {
                        ""
                    };
                    w(out, path, format_args!("  sqn={sqn} offset={off}{what}\n"))?;
                }
            }
            w(
                out,
                path,
                format_args!(
                    "entries={} sqn={}..{} checksum ok\n",
                    rep.entries, rep.first_sqn, rep.last_sqn
                ),
            )?;
        }
        Err(e) => {
            rep.corrupt_regions = 1;
            w(out, path, format_args!("CORRUPT index: {e}\n"))?;
        }
    }
    Ok(rep)
}

fn dump_manifest(path: &Path, size: u64, out: &mut dyn Write, show: bool) -> Result<DumpReport> {
    w(
        out,
        path,
        format_args!("journal manifest {} ({size} bytes)\n", path.display()),
    )?;
    let bytes = read_small(path, size, crate::limits::MANIFEST_BYTES_MAX)?;
    let mut rep = DumpReport {
        kind: JournalFileKind::Manifest,
        size_bytes: size,
        entries: 0,
        first_sqn: 0,
        last_sqn: 0,
        corrupt_regions: 0,
        corrupt_bytes: 0,
    };
    match Manifest::decode(&bytes) {
        Ok(m) => {
            rep.entries = m.files.len() as u64;
            rep.first_sqn = m
                .files
                .iter()
                .map(|e| e.first_sqn)
                .find(|s| *s > 0)
                .unwrap_or(0);
            rep.last_sqn = m.files.iter().map(|e| e.last_sqn).max().unwrap_or(0);
            if show {
                for e in &m.files {
                    w(
                        out,
                        path,
                        format_args!(
                            "  {} sqn={}..{}{}\n",
                            file::jnl_name(e.file_no),
                            e.first_sqn,
                            e.last_sqn,
                            if e.active {
                                " active (range may be stale)"
                            } else {
                                ""
                            }
                        ),
                    )?;
                }
            }
            w(
                out,
                path,
                format_args!(
                    "files={} next_file_no={} checksum ok\n",
                    rep.entries, m.next_file_no
                ),
            )?;
        }
        Err(e) => {
            rep.corrupt_regions = 1;
            w(out, path, format_args!("CORRUPT manifest: {e}\n"))?;
        }
    }
    Ok(rep)
}
