//! A verified SST data block, as reads and the block cache hold it.
//!
//! [`Block::from_stored`] checks a data block's CRC32C, undoes its
//! compression (format version 2) and checks its trailer (see the format
//! in [`super::sst`]); a [`Block`] exists only for a block that passed, and
//! holds its entries uncompressed. It lives below both [`super::sst`]
//! (which reads and writes blocks) and [`super::block_cache`] (which keeps
//! them), so each imports it one way.

use crate::codec::{crc, Encode, Reader};
use crate::compress::{self, Compression};
use crate::limits::SST_BLOCK_BYTES_MAX;

/// `entry_count:u32` after a data block's entries.
pub(crate) const BLOCK_COUNT_BYTES: usize = 4;

/// Stored bytes of a block besides its content: the CRC (both versions)
/// and, in format version 2, the codec byte before the content.
pub(crate) const fn stored_overhead(version: u32) -> usize {
    if version >= 2 {
        1 + 4
    } else {
        4
    }
}

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

/// The stored form of a data block whose content is `plain` (its entries
/// and `entry_count:u32`) in format version 2: `codec:u8 content crc:u32`,
/// the content compressed with `method` when that makes it smaller. The
/// CRC covers the codec byte and the stored content.
pub(crate) fn encode_v2(plain: &[u8], method: Compression, zstd_level: i32) -> Vec<u8> {
    let (used, content) = compress::compress(method, zstd_level, plain);
    let mut out = Vec::with_capacity(1 + content.len() + 4);
    out.push(used.to_byte());
    out.extend_from_slice(&content);
    let c = crc(&out);
    out.put_u32(c);
    out
}

/// A data block whose CRC has been verified, its content uncompressed.
#[derive(Debug)]
pub(crate) struct Block {
    /// The block's entries followed by `entry_count:u32`.
    plain: Vec<u8>,
    /// Number of entries the trailer announces.
    pub(super) count: u32,
}

impl Block {
    /// Checks the stored bytes of a block of an SST file of format
    /// `version` (1: `entries count crc`; 2: `codec content crc`, the
    /// content being `entries count` as the codec stored it).
    pub(crate) fn from_stored(raw: Vec<u8>, version: u32) -> Result<Block, String> {
        let plain = if version >= 2 {
            let body = split_crc(&raw)?;
            let (&codec, content) = body
                .split_first()
                .ok_or_else(|| "block has no codec byte".to_string())?;
            let method = Compression::from_byte(codec)
                .ok_or_else(|| format!("unknown block codec {codec}"))?;
            match method {
                // Stored as is: the read buffer becomes the block, less its
                // codec byte and CRC (no second allocation).
                Compression::None => {
                    let end = 1 + content.len();
                    let mut raw = raw;
                    raw.truncate(end);
                    raw.remove(0);
                    raw
                }
                _ => compress::decompress(method, content, SST_BLOCK_BYTES_MAX)
                    .map_err(|e| format!("block content: {}", e.0))?,
            }
        } else {
            let len = split_crc(&raw)?.len();
            let mut raw = raw;
            raw.truncate(len);
            raw
        };
        Self::from_plain(plain)
    }

    /// A format version 1 block (`entries count crc`), as tests build them.
    #[cfg(test)]
    pub(crate) fn from_raw(raw: Vec<u8>) -> Result<Block, String> {
        Self::from_stored(raw, 1)
    }

    /// Checks the trailer of a block's uncompressed content.
    fn from_plain(plain: Vec<u8>) -> Result<Block, String> {
        let entries_len = plain
            .len()
            .checked_sub(BLOCK_COUNT_BYTES)
            .ok_or_else(|| format!("block of {} bytes has no trailer", plain.len()))?;
        let count = Reader::new(plain.get(entries_len..).unwrap_or_default())
            .u32()
            .map_err(|e| e.0)?;
        if count == 0 {
            return Err("block announces 0 entries".into());
        }
        Ok(Block { plain, count })
    }

    /// Bytes the block holds in memory (its uncompressed content).
    pub(crate) fn mem_len(&self) -> usize {
        self.plain.len()
    }

    /// The encoded entries.
    pub(crate) fn entries(&self) -> &[u8] {
        let end = self.plain.len().saturating_sub(BLOCK_COUNT_BYTES);
        self.plain.get(..end).unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `n` entries' worth of bytes and their count, as a writer closes a block.
    fn plain(n: u32) -> Vec<u8> {
        let mut p = b"entry-bytes-that-repeat ".repeat(n as usize * 4);
        p.put_u32(n);
        p
    }

    #[test]
    fn version_2_blocks_round_trip_with_every_codec() {
        let p = plain(7);
        for m in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let stored = encode_v2(&p, m, 1);
            assert_eq!(stored.first(), Some(&m.to_byte()));
            if m != Compression::None {
                assert!(stored.len() < p.len(), "{m:?} did not shrink the block");
            }
            let b = Block::from_stored(stored, 2).unwrap_or_else(|e| panic!("{m:?}: {e}"));
            assert_eq!(b.count, 7);
            assert_eq!(b.entries(), &p[..p.len() - 4]);
            assert_eq!(b.mem_len(), p.len());
        }
    }

    #[test]
    fn incompressible_content_is_stored_as_is() {
        let mut p: Vec<u8> = (0..200u32).map(|i| (i * 7919 % 251) as u8).collect();
        p.put_u32(1);
        let stored = encode_v2(&p, Compression::Lz4, 1);
        assert_eq!(stored.first(), Some(&Compression::None.to_byte()));
        assert_eq!(stored.len(), 1 + p.len() + 4);
    }

    #[test]
    fn damage_and_unknown_codecs_are_refused() {
        let p = plain(3);
        let stored = encode_v2(&p, Compression::Lz4, 1);
        // A flipped content byte: the CRC catches it.
        let mut bad = stored.clone();
        bad[3] ^= 0x40;
        assert!(Block::from_stored(bad, 2)
            .unwrap_err()
            .contains("crc mismatch"));
        // An unknown codec with a CRC that holds.
        let mut odd = stored[..stored.len() - 4].to_vec();
        odd[0] = 9;
        let c = crc(&odd);
        odd.put_u32(c);
        assert!(Block::from_stored(odd, 2)
            .unwrap_err()
            .contains("unknown block codec 9"));
        // Compressed content that lies about its size, CRC fixed up.
        let mut lie = stored[..stored.len() - 4].to_vec();
        lie[1..5].copy_from_slice(&u32::MAX.to_le_bytes());
        let c = crc(&lie);
        lie.put_u32(c);
        assert!(Block::from_stored(lie, 2)
            .unwrap_err()
            .contains("above the limit"));
        // A version 1 block (no codec byte) still reads.
        let v1 = {
            let mut b = p.clone();
            let c = crc(&b);
            b.put_u32(c);
            b
        };
        let b = Block::from_raw(v1).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(b.entries(), &p[..p.len() - 4]);
    }
}
