//! The SST format's sections, encoded and checked: the [`Footer`], the
//! index and meta blocks, and the entries of a data block (see the format
//! in [`super`]).

use super::{
    BlockHandle, SstSummary, ENTRY_OVERHEAD_BYTES, FOOTER_BYTES, FORMAT_VERSION,
    FORMAT_VERSION_MIN, INDEX_ENTRY_FIXED_BYTES, MAGIC,
};
use crate::codec::{crc, DecodeError, Encode, Reader};
use crate::entry::LedgerValue;
use crate::error::{IoContext, Result};
use crate::ledger::block::{stored_overhead, BLOCK_COUNT_BYTES};
use crate::limits::SST_BLOCK_BYTES_MAX;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Section {
    pub(super) offset: u64,
    pub(super) len: u32,
}

impl Section {
    pub(super) fn end(self) -> Option<u64> {
        self.offset.checked_add(u64::from(self.len))
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Footer {
    /// The file's format version (how its data blocks are stored).
    pub(super) version: u32,
    pub(super) index: Section,
    pub(super) bloom: Section,
    pub(super) meta: Section,
}

impl Footer {
    pub(crate) fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(FOOTER_BYTES);
        out.extend_from_slice(&MAGIC);
        out.put_u32(self.version);
        for s in [self.index, self.bloom, self.meta] {
            out.put_u64(s.offset);
            out.put_u32(s.len);
        }
        out.resize(FOOTER_BYTES - 4, 0);
        let c = crc(&out);
        out.put_u32(c);
        debug_assert_eq!(out.len(), FOOTER_BYTES);
        out
    }

    /// Decodes and checks a footer of a file of `file_len` bytes.
    pub(crate) fn decode(bytes: &[u8], file_len: u64) -> Result<Footer, String> {
        let mut r = Reader::new(bytes);
        let e = |d: DecodeError| format!("footer: {d}");
        if r.take(MAGIC.len()).map_err(e)? != MAGIC {
            return Err("footer: bad magic, not a Basalt SST file".into());
        }
        let version = r.u32().map_err(e)?;
        let mut sections = [Section { offset: 0, len: 0 }; 3];
        for s in &mut sections {
            s.offset = r.u64().map_err(e)?;
            s.len = r.u32().map_err(e)?;
        }
        r.take(FOOTER_BYTES - 4 - r.position()).map_err(e)?;
        let stored = r.u32().map_err(e)?;
        let computed = crc(bytes.get(..FOOTER_BYTES - 4).unwrap_or_default());
        if stored != computed {
            return Err(format!(
                "footer: crc mismatch (stored {stored:08x}, computed {computed:08x})"
            ));
        }
        if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&version) {
            return Err(format!(
                "unsupported SST format version {version} (this build reads \
                 {FORMAT_VERSION_MIN} to {FORMAT_VERSION})"
            ));
        }
        let [index, bloom, meta] = sections;
        let footer_offset = file_len.saturating_sub(FOOTER_BYTES as u64);
        for (what, s, min) in [
            ("index", index, 8u32),
            ("bloom", bloom, 4),
            ("meta", meta, 4),
        ] {
            if s.len < min || u64::from(s.len) > SST_BLOCK_BYTES_MAX {
                return Err(format!("footer: {what} length {} is impossible", s.len));
            }
            if s.end().is_none_or(|end| end > footer_offset) {
                return Err(format!(
                    "footer: {what} block at {} len {} lies beyond the data (file is {file_len} bytes)",
                    s.offset, s.len
                ));
            }
        }
        if index.offset == 0
            || index.end() != Some(bloom.offset)
            || bloom.end() != Some(meta.offset)
            || meta.end() != Some(footer_offset)
        {
            return Err(format!(
                "footer: sections are not contiguous (index {}+{}, bloom {}+{}, meta {}+{}, footer {})",
                index.offset, index.len, bloom.offset, bloom.len, meta.offset, meta.len, footer_offset
            ));
        }
        Ok(Footer {
            version,
            index,
            bloom,
            meta,
        })
    }
}

/// True if `path` ends with an SST footer (looks at the magic only, not at
/// checksums). Files too short to hold a footer are not SST files.
pub fn is_sst_file(path: &Path) -> Result<bool> {
    let file = File::open(path).ctx("open", path)?;
    let len = file.metadata().ctx("stat", path)?.len();
    if len < FOOTER_BYTES as u64 {
        return Ok(false);
    }
    let mut magic = [0u8; MAGIC.len()];
    file.read_exact_at(&mut magic, len - FOOTER_BYTES as u64)
        .ctx("read footer", path)?;
    Ok(magic == MAGIC)
}

/// One entry's raw key and encoded value.
pub(super) type RawEntry<'a> = (&'a [u8], &'a [u8]);

/// Reads one entry's raw key and value.
pub(crate) fn read_entry<'a>(r: &mut Reader<'a>) -> Result<RawEntry<'a>, DecodeError> {
    let key = r.bytes32()?;
    let value = r.bytes32()?;
    Ok((key, value))
}

/// Decodes a value that must fill `bytes` exactly.
pub(crate) fn decode_value(bytes: &[u8]) -> Result<LedgerValue, DecodeError> {
    let mut r = Reader::new(bytes);
    let v = LedgerValue::decode(&mut r)?;
    if !r.is_empty() {
        return Err(DecodeError(format!(
            "{} bytes after the ledger value",
            r.remaining()
        )));
    }
    Ok(v)
}

/// Parses the index block's content (CRC already checked) of a file of
/// format `version`.
pub(crate) fn parse_index(
    bytes: &[u8],
    data_end: u64,
    version: u32,
) -> Result<Vec<BlockHandle>, String> {
    // A version 1 block holds at least one entry's lengths and its count; a
    // version 2 block's content may be compressed, so at least one byte.
    let min_len = stored_overhead(version)
        + if version >= 2 {
            1
        } else {
            BLOCK_COUNT_BYTES + ENTRY_OVERHEAD_BYTES
        };
    let entries_len = bytes
        .len()
        .checked_sub(4)
        .ok_or_else(|| "too short for its count".to_string())?;
    let (entries, count_bytes) = bytes
        .split_at_checked(entries_len)
        .ok_or_else(|| "too short".to_string())?;
    let count = Reader::new(count_bytes).u32().map_err(|e| e.0)?;
    if count == 0 {
        return Err("no data blocks".into());
    }
    let mut r = Reader::new(entries);
    let cap = (count as usize).min(entries.len() / INDEX_ENTRY_FIXED_BYTES);
    let mut blocks: Vec<BlockHandle> = Vec::with_capacity(cap);
    let mut expected_offset = 0u64;
    for i in 0..count {
        let e = |d: DecodeError| format!("entry {i}: {d}");
        let last_key = r.bytes32().map_err(e)?;
        let offset = r.u64().map_err(e)?;
        let len = r.u32().map_err(e)?;
        let max_last_modified_us = r.u64().map_err(e)?;
        if offset != expected_offset {
            return Err(format!(
                "entry {i}: block at {offset}, expected {expected_offset}"
            ));
        }
        if (len as usize) < min_len || u64::from(len) > SST_BLOCK_BYTES_MAX {
            return Err(format!("entry {i}: impossible block length {len}"));
        }
        if blocks
            .last()
            .is_some_and(|p| p.last_key.as_slice() >= last_key)
        {
            return Err(format!("entry {i}: keys out of order"));
        }
        expected_offset = offset
            .checked_add(u64::from(len))
            .ok_or_else(|| format!("entry {i}: offset overflow"))?;
        blocks.push(BlockHandle {
            last_key: last_key.to_vec(),
            offset,
            len,
            max_last_modified_us,
        });
    }
    if !r.is_empty() {
        return Err(format!("{} bytes after {count} entries", r.remaining()));
    }
    if expected_offset != data_end {
        return Err(format!(
            "data blocks end at {expected_offset}, index starts at {data_end}"
        ));
    }
    Ok(blocks)
}

/// Parses the meta block's content (CRC already checked) and checks it against the index.
pub(crate) fn parse_meta(
    bytes: &[u8],
    blocks: &[BlockHandle],
    file_len: u64,
) -> Result<SstSummary, String> {
    let mut r = Reader::new(bytes);
    let e = |d: DecodeError| d.0;
    let entries = r.u64().map_err(e)?;
    let tombstones = r.u64().map_err(e)?;
    let min_key = r.bytes32().map_err(e)?.to_vec();
    let max_key = r.bytes32().map_err(e)?.to_vec();
    let min_sqn = r.u64().map_err(e)?;
    let max_sqn = r.u64().map_err(e)?;
    let max_last_modified_us = r.u64().map_err(e)?;
    if !r.is_empty() {
        return Err(format!("{} trailing bytes", r.remaining()));
    }
    if entries < blocks.len() as u64 || tombstones > entries {
        return Err(format!(
            "{entries} entries, {tombstones} tombstones in {} blocks is impossible",
            blocks.len()
        ));
    }
    if min_key > max_key || blocks.last().map(|b| &b.last_key) != Some(&max_key) {
        return Err("key range disagrees with the index".into());
    }
    if blocks.first().is_some_and(|b| b.last_key < min_key) {
        return Err("min key is above the first block's last key".into());
    }
    if min_sqn > max_sqn {
        return Err(format!("min sqn {min_sqn} > max sqn {max_sqn}"));
    }
    let index_max_lm = blocks
        .iter()
        .map(|b| b.max_last_modified_us)
        .max()
        .unwrap_or(0);
    if index_max_lm != max_last_modified_us {
        return Err(format!(
            "max last-modified {max_last_modified_us} disagrees with the index ({index_max_lm})"
        ));
    }
    Ok(SstSummary {
        size_bytes: file_len,
        entries,
        tombstones,
        min_key,
        max_key,
        min_sqn,
        max_sqn,
        max_last_modified_us,
    })
}
