//! The ledger manifest: which SST files are live, at which level.
//!
//! It is the only record of the live file set. It is rewritten whole after
//! every flush and merge with write-new, fsync, rename, fsync-directory, so a
//! crash leaves the old or the new version, never a mix.
//!
//! ```text
//! manifest := magic "BSLTLMF1" | version:u32 (=1) | persisted_sqn:u64
//!             | next_file_no:u64 | count:u32 | file* | crc32c:u32
//! file     := level:u8 | file_no:u64 | size_bytes:u64 | entries:u64
//!             | tombstones:u64 | min_sqn:u64 | max_sqn:u64
//!             | max_last_modified_us:u64 | min_key_len:u32 | min_key
//!             | max_key_len:u32 | max_key
//! ```
//! The CRC covers every byte before it. `persisted_sqn` is the highest SQN
//! whose ledger change is in an SST file listed here: on open the journal is
//! replayed from the next SQN.

use super::sst::SstSummary;
use crate::codec::{crc, DecodeError, Encode, Reader};
use crate::error::{Error, IoContext, Result};
use crate::fsutil;
use crate::limits;
use std::path::Path;

/// Magic bytes at the start of a ledger manifest.
pub const MAGIC: &[u8; 8] = b"BSLTLMF1";
const VERSION: u32 = 1;

/// What to tell an operator whose ledger manifest is missing or damaged.
pub const ADVICE: &str =
    "The ledger can be rebuilt from the journal: run `basalt kv --data-dir DIR repair`";

/// One live SST file as recorded in the manifest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// Level, 0 ..= 6.
    pub level: u8,
    /// File number; the file is `<file_no:08>.sst`.
    pub file_no: u64,
    /// What the file holds.
    pub summary: SstSummary,
}

/// The decoded manifest.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Manifest {
    /// Highest SQN persisted in the listed files.
    pub persisted_sqn: u64,
    /// The next file number to allocate.
    pub next_file_no: u64,
    /// The live files.
    pub files: Vec<FileEntry>,
}

impl Manifest {
    /// Encodes the manifest with its trailing CRC.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(64 + self.files.len() * 128);
        out.extend_from_slice(MAGIC);
        out.put_u32(VERSION);
        out.put_u64(self.persisted_sqn);
        out.put_u64(self.next_file_no);
        debug_assert!(u32::try_from(self.files.len()).is_ok());
        out.put_u32(self.files.len() as u32);
        for f in &self.files {
            let s = &f.summary;
            out.put_u8(f.level);
            out.put_u64(f.file_no);
            out.put_u64(s.size_bytes);
            out.put_u64(s.entries);
            out.put_u64(s.tombstones);
            out.put_u64(s.min_sqn);
            out.put_u64(s.max_sqn);
            out.put_u64(s.max_last_modified_us);
            out.put_bytes32(&s.min_key);
            out.put_bytes32(&s.max_key);
        }
        let c = crc(&out);
        out.put_u32(c);
        out
    }

    /// Decodes and verifies a manifest.
    pub fn decode(bytes: &[u8]) -> Result<Manifest, DecodeError> {
        let body_len = bytes
            .len()
            .checked_sub(4)
            .ok_or_else(|| DecodeError("manifest shorter than its checksum".into()))?;
        let (body, tail) = bytes.split_at(body_len);
        let stored = Reader::new(tail).u32()?;
        if crc(body) != stored {
            return Err(DecodeError("manifest checksum mismatch".into()));
        }
        let mut r = Reader::new(body);
        if r.take(8)? != MAGIC {
            return Err(DecodeError("not a ledger manifest (bad magic)".into()));
        }
        let version = r.u32()?;
        if version != VERSION {
            return Err(DecodeError(format!(
                "unsupported manifest version {version} (this build reads {VERSION})"
            )));
        }
        let persisted_sqn = r.u64()?;
        let next_file_no = r.u64()?;
        let count = r.u32()?;
        let mut files = Vec::new();
        for _ in 0..count {
            let level = r.u8()?;
            if usize::from(level) >= limits::LEVELS {
                return Err(DecodeError(format!("bad level {level}")));
            }
            let file_no = r.u64()?;
            let size_bytes = r.u64()?;
            let entries = r.u64()?;
            let tombstones = r.u64()?;
            let min_sqn = r.u64()?;
            let max_sqn = r.u64()?;
            let max_last_modified_us = r.u64()?;
            let min_key = r.bytes32()?.to_vec();
            let max_key = r.bytes32()?.to_vec();
            files.push(FileEntry {
                level,
                file_no,
                summary: SstSummary {
                    size_bytes,
                    entries,
                    tombstones,
                    min_key,
                    max_key,
                    min_sqn,
                    max_sqn,
                    max_last_modified_us,
                },
            });
        }
        if !r.is_empty() {
            return Err(DecodeError("trailing bytes in manifest".into()));
        }
        Ok(Manifest {
            persisted_sqn,
            next_file_no,
            files,
        })
    }

    /// Reads the manifest at `path`; a missing or damaged file is a
    /// [`Error::Manifest`] that tells the operator what to do.
    pub fn load(path: &Path) -> Result<Manifest> {
        let meta = match std::fs::metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::Manifest {
                    what: "ledger",
                    path: path.to_path_buf(),
                    reason: "missing".into(),
                    advice: ADVICE,
                })
            }
            Err(e) => return Err(Error::io("stat", path, e)),
        };
        if meta.len() > limits::MANIFEST_BYTES_MAX {
            return Err(Error::Manifest {
                what: "ledger",
                path: path.to_path_buf(),
                reason: format!("implausible size {} bytes", meta.len()),
                advice: ADVICE,
            });
        }
        let bytes = std::fs::read(path).ctx("read", path)?;
        if let Some(found) = crate::codec::unread_version_intact(&bytes, MAGIC, &[VERSION]) {
            return Err(Error::unsupported_version(
                "ledger manifest",
                path,
                found,
                &[VERSION],
                true,
            ));
        }
        Manifest::decode(&bytes).map_err(|e| Error::Manifest {
            what: "ledger",
            path: path.to_path_buf(),
            reason: e.0,
            advice: ADVICE,
        })
    }

    /// Writes the manifest atomically.
    pub fn store(&self, path: &Path) -> Result<()> {
        fsutil::write_atomic(path, &self.encode())
    }
}

/// Writes a human-readable listing of the manifest at `path` to `out`.
pub fn dump(path: &Path, out: &mut dyn std::io::Write) -> Result<()> {
    let m = Manifest::load(path)?;
    let w = |e: std::io::Error| Error::io("write", "<output>", e);
    writeln!(
        out,
        "ledger manifest {}: persisted_sqn={} next_file_no={} files={}",
        path.display(),
        m.persisted_sqn,
        m.next_file_no,
        m.files.len()
    )
    .map_err(w)?;
    for f in &m.files {
        let s = &f.summary;
        writeln!(
            out,
            "L{} {:08}.sst size={} entries={} tombstones={} sqn={}..{} keys={}..{}",
            f.level,
            f.file_no,
            s.size_bytes,
            s.entries,
            s.tombstones,
            s.min_sqn,
            s.max_sqn,
            crate::key::display_bytes(&s.min_key),
            crate::key::display_bytes(&s.max_key)
        )
        .map_err(w)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Manifest {
        Manifest {
            persisted_sqn: 99,
            next_file_no: 7,
            files: vec![FileEntry {
                level: 1,
                file_no: 3,
                summary: SstSummary {
                    size_bytes: 10,
                    entries: 2,
                    tombstones: 1,
                    min_key: b"a".to_vec(),
                    max_key: b"z".to_vec(),
                    min_sqn: 1,
                    max_sqn: 9,
                    max_last_modified_us: 5,
                },
            }],
        }
    }

    #[test]
    fn round_trip_and_damage() {
        let m = sample();
        let bytes = m.encode();
        assert_eq!(Manifest::decode(&bytes).unwrap(), m);
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert!(Manifest::decode(&bad).is_err(), "flip at {i} undetected");
        }
        assert!(Manifest::decode(&bytes[..bytes.len() - 1]).is_err());
    }

    #[test]
    fn missing_manifest_says_what_to_do() {
        let d = tempfile::tempdir().unwrap();
        let err = Manifest::load(&d.path().join("MANIFEST")).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("missing") && msg.contains("repair"), "{msg}");
    }
}
