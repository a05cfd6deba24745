//! Checking and showing an SST file: [`SstReader::verify`] (every data
//! block read and decoded), [`dump`], and their reports.

use super::format::{decode_value, read_entry};
use super::reader::SstReader;
use super::{render_key, BlockHandle, SstSummary};
use crate::codec::Reader;
use crate::entry::{LedgerValue, Status};
use crate::error::{Error, IoContext, Result};
use crate::ledger::block::Block;
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
        "  format version {}, {} bytes, {} data blocks",
        reader.version,
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

impl SstReader {
    /// Reads every data block, checking its checksum and structure, and
    /// counts the damaged ones. I/O errors (as opposed to damage) are errors.
    pub fn verify(&self) -> Result<VerifyReport> {
        self.scan_blocks(|_, _, _| Ok(()))
    }

    /// Fully decodes block `i` and checks it against the index.
    fn decode_block(&self, i: usize, block: &Block) -> Result<Vec<(Vec<u8>, LedgerValue)>, String> {
        let handle = self
            .blocks
            .get(i)
            .ok_or_else(|| format!("block {i} is not in the index"))?;
        let prev_last = i
            .checked_sub(1)
            .and_then(|p| self.blocks.get(p))
            .map(|b| b.last_key.as_slice());
        let mut out: Vec<(Vec<u8>, LedgerValue)> = Vec::new();
        let mut r = Reader::new(block.entries());
        let mut max_lm = 0;
        while !r.is_empty() {
            let at = r.position();
            let (k, v) = read_entry(&mut r).map_err(|e| format!("entry at +{at}: {e}"))?;
            let v = decode_value(v).map_err(|e| format!("entry at +{at}: {e}"))?;
            let after = out
                .last()
                .map(|(pk, _)| pk.as_slice())
                .or(prev_last)
                .is_none_or(|p| p < k);
            if !after {
                return Err(format!(
                    "entry at +{at}: key {} out of order",
                    render_key(k)
                ));
            }
            max_lm = max_lm.max(v.last_modified_us);
            out.push((k.to_vec(), v));
        }
        if out.len() as u64 != u64::from(block.count) {
            return Err(format!(
                "block holds {} entries, its trailer says {}",
                out.len(),
                block.count
            ));
        }
        if out.last().map(|(k, _)| k) != Some(&handle.last_key) {
            return Err("last key differs from the index".into());
        }
        if max_lm != handle.max_last_modified_us {
            return Err(format!(
                "max last-modified {max_lm} differs from the index's {}",
                handle.max_last_modified_us
            ));
        }
        Ok(out)
    }

    /// Visits every block with its decoded entries or its damage.
    pub(super) fn scan_blocks(
        &self,
        mut visit: impl FnMut(
            usize,
            &BlockHandle,
            std::result::Result<&[(Vec<u8>, LedgerValue)], &BlockDamage>,
        ) -> Result<()>,
    ) -> Result<VerifyReport> {
        let mut report = VerifyReport {
            blocks: self.blocks.len() as u64,
            ..VerifyReport::default()
        };
        let mut ahead = None;
        for (i, handle) in self.blocks.iter().enumerate() {
            let decoded = match self.next_block(&mut ahead, i, None) {
                Ok(block) => self.decode_block(i, &block),
                Err(Error::Corrupt { reason, .. }) => Err(reason),
                Err(e) => return Err(e),
            };
            match decoded {
                Ok(entries) => {
                    report.entries += entries.len() as u64;
                    report.tombstones += entries
                        .iter()
                        .filter(|(_, v)| v.status == Status::Tombstone)
                        .count() as u64;
                    visit(i, handle, Ok(&entries))?;
                }
                Err(reason) => {
                    let damage = BlockDamage {
                        block: i,
                        offset: handle.offset,
                        len: handle.len,
                        reason,
                    };
                    visit(i, handle, Err(&damage))?;
                    report.damaged_blocks += 1;
                    report.damage.push(damage);
                }
            }
        }
        if report.damaged_blocks == 0
            && (report.entries != self.summary.entries
                || report.tombstones != self.summary.tombstones)
        {
            report.summary_mismatch = Some(format!(
                "blocks hold {} entries ({} tombstones), meta block says {} ({})",
                report.entries, report.tombstones, self.summary.entries, self.summary.tombstones
            ));
        }
        Ok(report)
    }
}
