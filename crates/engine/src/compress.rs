//! Compression of journal values and of SST data blocks.
//!
//! A journal record's `compression` byte (see [`crate::journal::record`])
//! and an SST data block's codec byte (format version 2, see
//! [`crate::ledger::sst`]) name the method; the stored bytes are:
//!
//! ```text
//! none := value
//! lz4  := uncompressed_len:u32 (little-endian) lz4_block      (tag 1)
//! zstd := one zstd frame with its content size in the header   (tag 2)
//! ```
//!
//! [`compress`] returns the compressed form only when it is strictly smaller
//! than the input; otherwise the input is stored as is with tag `none`.
//! [`decompress`] is bounded: it refuses (before allocating) any declared
//! uncompressed size above the caller's maximum, and reports damaged
//! compressed data as a [`DecodeError`] (the journal and the SST reader turn
//! it into `Error::Corrupt`), never a panic.

use crate::codec::DecodeError;
use std::borrow::Cow;

/// How the value bytes are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// Stored as given.
    None,
    /// lz4 block format with the uncompressed size prepended (tag 1). Fast
    /// enough (GB/s) that incompressible values cost little; leveled's default.
    #[default]
    Lz4,
    /// One zstd frame (tag 2); the level is `Config::zstd_level`.
    Zstd,
}

impl Compression {
    /// The on-disk tag.
    pub fn to_byte(self) -> u8 {
        match self {
            Compression::None => 0,
            Compression::Lz4 => 1,
            Compression::Zstd => 2,
        }
    }

    /// Parses the on-disk tag.
    pub fn from_byte(b: u8) -> Option<Compression> {
        match b {
            0 => Some(Compression::None),
            1 => Some(Compression::Lz4),
            2 => Some(Compression::Zstd),
            _ => None,
        }
    }
}

/// When the journal compresses values.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CompressionPoint {
    /// At append: every put pays the compression CPU, the journal is small
    /// from the start (leveled's `on_receipt`, its default).
    #[default]
    OnReceipt,
    /// Only when journal compaction rewrites a value: puts stay as cheap as
    /// possible, space is saved later (leveled's `on_compact`).
    OnCompact,
}

/// Compresses `value` with `method` (`zstd_level` for zstd). Returns the
/// method actually used and the bytes to store: `(Compression::None, value)`
/// when compression would not make it smaller (or failed).
pub fn compress(
    method: Compression,
    zstd_level: i32,
    value: &[u8],
) -> (Compression, Cow<'_, [u8]>) {
    let packed = match method {
        Compression::None => None,
        // The size prefix is a u32: values are at most 1 GiB (limits).
        Compression::Lz4 => u32::try_from(value.len())
            .ok()
            .map(|_| lz4_flex::block::compress_prepend_size(value)),
        Compression::Zstd => zstd::bulk::compress(value, zstd_level).ok(),
    };
    match packed {
        Some(p) if p.len() < value.len() => (method, Cow::Owned(p)),
        _ => (Compression::None, Cow::Borrowed(value)),
    }
}

/// Decompresses a stored value, refusing to produce more than `max` bytes.
pub fn decompress(method: Compression, stored: &[u8], max: u64) -> Result<Vec<u8>, DecodeError> {
    match method {
        Compression::None => Ok(stored.to_vec()),
        Compression::Lz4 => {
            let (head, block) = stored
                .split_first_chunk::<4>()
                .ok_or_else(|| DecodeError("lz4 value shorter than its size prefix".into()))?;
            let size = u64::from(u32::from_le_bytes(*head));
            if size > max {
                return Err(DecodeError(format!(
                    "lz4 value claims {size} bytes uncompressed, above the limit of {max}"
                )));
            }
            let out = lz4_flex::block::decompress(block, size as usize)
                .map_err(|e| DecodeError(format!("lz4 value does not decompress: {e}")))?;
            if out.len() as u64 != size {
                return Err(DecodeError(format!(
                    "lz4 value decompressed to {} bytes, expected {size}",
                    out.len()
                )));
            }
            Ok(out)
        }
        Compression::Zstd => {
            let size = match zstd::zstd_safe::get_frame_content_size(stored) {
                Ok(Some(n)) => n,
                Ok(None) => {
                    return Err(DecodeError(
                        "zstd value does not declare its uncompressed size".into(),
                    ))
                }
                Err(_) => return Err(DecodeError("zstd value has a damaged frame header".into())),
            };
            if size > max {
                return Err(DecodeError(format!(
                    "zstd value claims {size} bytes uncompressed, above the limit of {max}"
                )));
            }
            let out = zstd::bulk::decompress(stored, size as usize)
                .map_err(|e| DecodeError(format!("zstd value does not decompress: {e}")))?;
            if out.len() as u64 != size {
                return Err(DecodeError(format!(
                    "zstd value decompressed to {} bytes, expected {size}",
                    out.len()
                )));
            }
            Ok(out)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MAX: u64 = crate::limits::VALUE_SIZE_BYTES_CEILING;

    #[test]
    fn round_trips_and_falls_back_when_not_smaller() {
        let compressible = b"abcabcabcabcabcabcabcabcabcabcabcabcabcabcabc".repeat(20);
        for m in [Compression::None, Compression::Lz4, Compression::Zstd] {
            let (used, stored) = compress(m, 1, &compressible);
            assert_eq!(used, m);
            if m != Compression::None {
                assert!(stored.len() < compressible.len());
            }
            assert_eq!(decompress(used, &stored, MAX).unwrap(), compressible);
            // Tiny values never shrink: stored as is.
            let (used, stored) = compress(m, 1, b"xy");
            assert_eq!(used, Compression::None);
            assert_eq!(&*stored, b"xy");
        }
    }

    #[test]
    fn oversize_claims_are_refused_before_allocating() {
        let mut lz = lz4_flex::block::compress_prepend_size(&[7u8; 1000]);
        lz[..4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(decompress(Compression::Lz4, &lz, MAX).is_err());
        let zs = zstd::bulk::compress(&[7u8; 1000], 1).unwrap();
        assert!(decompress(Compression::Zstd, &zs, 999).is_err());
        assert_eq!(
            decompress(Compression::Zstd, &zs, 1000).unwrap(),
            vec![7u8; 1000]
        );
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(256))]
        #[test]
        fn damaged_compressed_values_never_panic(
            data in proptest::collection::vec(any::<u8>(), 0..300),
            flips in proptest::collection::vec((any::<prop::sample::Index>(), 1u8..=255), 1..4),
        ) {
            let value: Vec<u8> = data.iter().map(|b| b % 4).collect();
            for m in [Compression::Lz4, Compression::Zstd] {
                let (used, stored) = compress(m, 1, &value);
                let mut bad = stored.into_owned();
                if bad.is_empty() { continue; }
                for (at, x) in &flips {
                    let i = at.index(bad.len());
                    bad[i] ^= x;
                }
                // Either an error or some bytes within the limit, never a panic.
                if let Ok(out) = decompress(used, &bad, 1 << 20) {
                    prop_assert!(out.len() <= 1 << 20);
                }
                let _ = decompress(m, &data, 1 << 20);
            }
        }
    }
}
