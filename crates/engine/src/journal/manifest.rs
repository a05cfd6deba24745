//! Journal manifest: the list of journal files and which one is active.
//!
//! The file is called `MANIFEST` inside the journal directory:
//!
//! ```text
//! manifest := magic:"BSLTJMF1" version:u32 next_file_no:u64 count:u32
//!             entry{count} crc:u32
//! entry    := file_no:u64 first_sqn:u64 last_sqn:u64 active:u8
//! crc      := crc32c of every byte before it
//! ```
//!
//! All integers little-endian, version 1. Entries are in SQN order (the files
//! hold non-overlapping, ascending SQN ranges); file numbers are unique and
//! below `next_file_no` but not necessarily ascending, because journal
//! compaction gives the files replacing a run new numbers. Exactly one entry,
//! the last, is active. The active entry's SQN range may be
//! stale (it is found by scanning the file at open). The manifest is always
//! replaced atomically ([`crate::fsutil::write_atomic`]): at creation and at
//! every roll.

use crate::codec::{crc, DecodeError, Encode, Reader};

/// Magic bytes at the start of the journal manifest.
pub const MANIFEST_MAGIC: &[u8; 8] = b"BSLTJMF1";
/// Current manifest format version.
pub const MANIFEST_VERSION: u32 = 1;
/// Name of the manifest file in the journal directory.
pub const MANIFEST_NAME: &str = "MANIFEST";

const ENTRY_LEN: usize = 8 + 8 + 8 + 1;

/// One file listed in the manifest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ManifestEntry {
    /// File number.
    pub file_no: u64,
    /// Lowest SQN in the file (0 if empty or unknown).
    pub first_sqn: u64,
    /// Highest SQN in the file (0 if empty or unknown).
    pub last_sqn: u64,
    /// True for the file being appended to.
    pub active: bool,
}

/// The decoded journal manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// Number the next new file gets.
    pub next_file_no: u64,
    /// Files, in file-number order.
    pub files: Vec<ManifestEntry>,
}

impl Manifest {
    /// Serialises the manifest, CRC trailer included.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(8 + 4 + 8 + 4 + self.files.len() * ENTRY_LEN + 4);
        out.extend_from_slice(MANIFEST_MAGIC);
        out.put_u32(MANIFEST_VERSION);
        out.put_u64(self.next_file_no);
        debug_assert!(u32::try_from(self.files.len()).is_ok());
        out.put_u32(self.files.len() as u32);
        for e in &self.files {
            out.put_u64(e.file_no);
            out.put_u64(e.first_sqn);
            out.put_u64(e.last_sqn);
            out.put_u8(u8::from(e.active));
        }
        let sum = crc(&out);
        out.put_u32(sum);
        out
    }

    /// Parses and validates a manifest. Never panics on bad input.
    pub fn decode(buf: &[u8]) -> Result<Manifest, DecodeError> {
        let body_len = buf
            .len()
            .checked_sub(4)
            .ok_or_else(|| DecodeError(format!("file of {} bytes is too short", buf.len())))?;
        let (body, trailer) = buf.split_at(body_len);
        let stored = Reader::new(trailer).u32()?;
        let sum = crc(body);
        if stored != sum {
            return Err(DecodeError(format!(
                "checksum mismatch (stored 0x{stored:08x}, computed 0x{sum:08x})"
            )));
        }
        let mut r = Reader::new(body);
        if r.take(8)? != MANIFEST_MAGIC {
            return Err(DecodeError("bad magic (not a journal manifest)".into()));
        }
        let version = r.u32()?;
        if version != MANIFEST_VERSION {
            return Err(DecodeError(format!(
                "unsupported version {version} (this build reads {MANIFEST_VERSION})"
            )));
        }
        let next_file_no = r.u64()?;
        let count = r.u32()? as usize;
        if count.checked_mul(ENTRY_LEN) != Some(r.remaining()) {
            return Err(DecodeError(format!(
                "{count} entries do not match the {} bytes left",
                r.remaining()
            )));
        }
        let mut files = Vec::with_capacity(count);
        for _ in 0..count {
            let file_no = r.u64()?;
            let first_sqn = r.u64()?;
            let last_sqn = r.u64()?;
            let active = match r.u8()? {
                0 => false,
                1 => true,
                b => return Err(DecodeError(format!("bad active flag {b}"))),
            };
            files.push(ManifestEntry {
                file_no,
                first_sqn,
                last_sqn,
                active,
            });
        }
        let m = Manifest {
            next_file_no,
            files,
        };
        m.validate()?;
        Ok(m)
    }

    /// Checks the invariants: unique file numbers below `next_file_no`,
    /// exactly one active file and it is the last.
    pub fn validate(&self) -> Result<(), DecodeError> {
        let last = self
            .files
            .last()
            .ok_or_else(|| DecodeError("lists no files".into()))?;
        if !last.active || self.files.iter().filter(|e| e.active).count() != 1 {
            return Err(DecodeError(
                "must list exactly one active file, the newest".into(),
            ));
        }
        let mut nos: Vec<u64> = self.files.iter().map(|e| e.file_no).collect();
        nos.sort_unstable();
        if nos.windows(2).any(|w| w.first() == w.get(1)) {
            return Err(DecodeError("file numbers are not unique".into()));
        }
        if let Some(&max) = nos.last() {
            if max >= self.next_file_no {
                return Err(DecodeError(format!(
                    "next file number {} is not above file {max}",
                    self.next_file_no
                )));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample() -> Manifest {
        Manifest {
            next_file_no: 4,
            files: vec![
                ManifestEntry {
                    file_no: 1,
                    first_sqn: 1,
                    last_sqn: 10,
                    active: false,
                },
                ManifestEntry {
                    file_no: 3,
                    first_sqn: 11,
                    last_sqn: 0,
                    active: true,
                },
            ],
        }
    }

    #[test]
    fn manifest_round_trip() {
        let m = sample();
        assert_eq!(Manifest::decode(&m.encode()).unwrap(), m);
    }

    #[test]
    fn manifest_damage_is_detected() {
        let bytes = sample().encode();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 1;
            assert!(Manifest::decode(&bad).is_err(), "flip at {i}");
        }
        for n in 0..bytes.len() {
            assert!(Manifest::decode(&bytes[..n]).is_err());
        }
        let mut two_active = sample();
        two_active.files[0].active = true;
        assert!(Manifest::decode(&two_active.encode()).is_err());
    }

    proptest! {
        #[test]
        fn manifest_decode_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..120)) {
            let _ = Manifest::decode(&bytes);
        }
    }
}
