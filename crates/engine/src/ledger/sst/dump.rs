//! Checking and showing an SST file: the [`VerifyReport`] of
//! [`SstReader::verify`] and [`dump`], and [`dump`] itself.

use super::*;
use crate::entry::Status;
use crate::error::{IoContext, Result};
use std::io::Write;
use std::path::Path;

/// What [`SstReader::verify`] (and [`dump`]) found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VerifyReport {
    /// Data blocks in the file.
    pub blocks: u64,
    /// Data blocks that failed their checksum or structural checks.
    pub damaged_blocks: u64,
    /// Entries in the undamaged blocks.
    pub entries: u64,
    /// Tombstones in the undamaged blocks.
    pub tombstones: u64,
    /// One line per damaged block.
    pub damage: Vec<BlockDamage>,
    /// Set if all blocks are intact but disagree with the meta block's counts.
    pub summary_mismatch: Option<String>,
}

impl VerifyReport {
    /// True if nothing is damaged.
    pub fn is_clean(&self) -> bool {
        self.damaged_blocks == 0 && self.summary_mismatch.is_none()
    }
}

/// One damaged data block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BlockDamage {
    /// Position of the block in the index (0-based).
    pub block: usize,
    /// Offset of the block in the file.
    pub offset: u64,
    /// Length of the block.
    pub len: u32,
    /// What check failed.
    pub reason: String,
}

/// What [`dump`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpReport {
    /// The file's summary, from its meta block.
    pub summary: SstSummary,
    /// The result of checking every data block.
    pub verify: VerifyReport,
}

/// Writes a human-readable account of the SST file at `path` to `out`: the
/// summary, every data block and (with `show_records`) every entry. Damaged
/// blocks are reported and skipped. Errors if the file cannot be opened (a
/// damaged footer, index, bloom or meta block) or `out` fails.
pub fn dump(path: &Path, out: &mut dyn Write, show_records: bool) -> Result<DumpReport> {
    let reader = SstReader::open(path)?;
    let s = reader.summary();
    let w = |r: std::io::Result<()>| r.ctx("write dump of", path);
    w(writeln!(out, "SST file {}", path.display()))?;
    w(writeln!(
        out,
        "  format version {FORMAT_VERSION}, {} bytes, {} data blocks",
        s.size_bytes,
        reader.blocks.len()
    ))?;
    w(writeln!(
        out,
        "  entries {} (tombstones {}), sqn {}..={}, max last-modified {} us",
        s.entries, s.tombstones, s.min_sqn, s.max_sqn, s.max_last_modified_us
    ))?;
    w(writeln!(out, "  min key {}", render_key(&s.min_key)))?;
    w(writeln!(out, "  max key {}", render_key(&s.max_key)))?;
    w(writeln!(
        out,
        "  bloom {} bits, k = {}",
        reader.bloom.bit_count(),
        reader.bloom.k()
    ))?;
    let verify = reader.scan_blocks(|i, h, res| {
        match res {
            Ok(entries) => {
                w(writeln!(
                    out,
                    "block {i} offset {} len {}: {} entries, last key {}, max last-modified {} us",
                    h.offset,
                    h.len,
                    entries.len(),
                    render_key(&h.last_key),
                    h.max_last_modified_us
                ))?;
                if show_records {
                    for (k, v) in entries {
                        let status = match v.status {
                            Status::Active => "active",
                            Status::Tombstone => "tombstone",
                        };
                        w(writeln!(
                            out,
                            "  {} sqn {} {status} size {} hash 0x{:016x} last-modified {} us \
                             expires {} metadata {} bytes",
                            render_key(k),
                            v.sqn,
                            v.size,
                            v.value_hash,
                            v.last_modified_us,
                            v.expires_at,
                            v.metadata.len()
                        ))?;
                    }
                }
            }
            Err(d) => {
                w(writeln!(
                    out,
                    "block {i} offset {} len {}: DAMAGED: {}",
                    d.offset, d.len, d.reason
                ))?;
            }
        }
        Ok(())
    })?;
    w(writeln!(
        out,
        "{} blocks, {} damaged, {} readable entries",
        verify.blocks, verify.damaged_blocks, verify.entries
    ))?;
    if let Some(m) = &verify.summary_mismatch {
        w(writeln!(out, "MISMATCH: {m}"))?;
    }
    Ok(DumpReport {
        summary: s.clone(),
        verify,
    })
}
