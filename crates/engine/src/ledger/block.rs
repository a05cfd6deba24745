//! A verified SST data block, as reads and the block cache hold it.
//!
//! [`Block::from_raw`] checks a data block's CRC32C and trailer (see the
//! format in [`super::sst`]); a [`Block`] exists only for a block that
//! passed. It lives below both [`super::sst`] (which reads blocks) and
//! [`super::block_cache`] (which keeps them), so each imports it one way.

use crate::codec::{crc, Reader};

/// `entry_count:u32 crc:u32` after each data block's entries.
pub(crate) const BLOCK_TRAILER_BYTES: usize = 8;

/// Splits `raw` into its content and checks the trailing CRC32C over it.
pub(crate) fn split_crc(raw: &[u8]) -> Result<&[u8], String> {
    let body_len = raw
        .len()
        .checked_sub(4)
        .ok_or_else(|| format!("{} bytes is too short for a checksum", raw.len()))?;
    let (body, tail) = raw
        .split_at_checked(body_len)
        .ok_or_else(|| "block too short".to_string())?;
    let stored = Reader::new(tail).u32().map_err(|e| e.0)?;
    let computed = crc(body);
    if stored != computed {
        return Err(format!(
            "crc mismatch (stored {stored:08x}, computed {computed:08x})"
        ));
    }
    Ok(body)
}

/// A data block whose CRC has been verified.
#[derive(Debug)]
pub(crate) struct Block {
    /// The block's entries followed by the 8-byte trailer.
    raw: Vec<u8>,
    /// Number of entries the trailer announces.
    pub(super) count: u32,
}

impl Block {
    /// Checks the trailer of a raw block.
    pub(crate) fn from_raw(raw: Vec<u8>) -> Result<Block, String> {
        let payload = split_crc(&raw)?;
        let entries_len = payload
            .len()
            .checked_sub(4)
            .ok_or_else(|| format!("block of {} bytes has no trailer", raw.len()))?;
        let count = Reader::new(payload.get(entries_len..).unwrap_or_default())
            .u32()
            .map_err(|e| e.0)?;
        if count == 0 {
            return Err("block announces 0 entries".into());
        }
        Ok(Block { raw, count })
    }

    /// Bytes of the block as stored (entries, trailer and CRC).
    pub(crate) fn raw_len(&self) -> usize {
        self.raw.len()
    }

    /// The encoded entries.
    pub(crate) fn entries(&self) -> &[u8] {
        let end = self.raw.len().saturating_sub(BLOCK_TRAILER_BYTES);
        self.raw.get(..end).unwrap_or_default()
    }
}
