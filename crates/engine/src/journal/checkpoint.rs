//! Clean-shutdown checkpoint of the active journal file's index.
//!
//! Opening a store must know the (sqn, offset) of every record in the active
//! file; without help that means reading the whole file (up to
//! `journal_file_bytes`, 256 MiB by default). On a clean close the journal
//! writes this checkpoint beside the file, and the next open uses it instead
//! of scanning, provided the file still has exactly the size recorded in it.
//!
//! ```text
//! aix := magic "BSLTJAX1" | version:u32 (=1) | jnl_size:u64 | crc:u32 | jix
//! crc := crc32c of the 20 bytes before it
//! jix := the closed-file index format (see `file`), with its own CRC
//! ```
//!
//! The file is `<file_no:08>.aix`. Open reads and deletes it before anything
//! is appended, and a size mismatch (the file grew after the checkpoint, or a
//! crash left a stale one) means "scan as usual": the journal is append-only,
//! so a file of the recorded size holds exactly the checkpointed records.

use super::file;
use crate::codec::{crc, DecodeError, Encode, Reader};
use crate::error::{IoContext, Result};
use crate::fsutil;
use std::path::Path;

const MAGIC: &[u8; 8] = b"BSLTJAX1";
const VERSION: u32 = 1;
const HEADER_LEN: usize = 8 + 4 + 8 + 4;

/// Name of the checkpoint of active file `file_no`.
pub fn aix_name(file_no: u64) -> String {
    format!("{file_no:08}.aix")
}

/// Encodes a checkpoint of a file of `jnl_size` bytes holding `index`.
pub fn encode(jnl_size: u64, index: &[(u64, u64)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER_LEN + 24 + index.len() * 16);
    out.extend_from_slice(MAGIC);
    out.put_u32(VERSION);
    out.put_u64(jnl_size);
    let sum = crc(&out);
    out.put_u32(sum);
    out.extend_from_slice(&file::encode_index(index));
    out
}

/// Decodes a checkpoint; fails unless it is intact and was taken at exactly
/// `jnl_size` bytes.
pub fn decode(buf: &[u8], jnl_size: u64) -> Result<Vec<(u64, u64)>, DecodeError> {
    let mut r = Reader::new(buf);
    if r.take(8)? != MAGIC {
        return Err(DecodeError("not a journal checkpoint (bad magic)".into()));
    }
    let version = r.u32()?;
    if version != VERSION {
        return Err(DecodeError(format!(
            "unsupported checkpoint version {version} (this build reads {VERSION})"
        )));
    }
    let size = r.u64()?;
    let stored = r.u32()?;
    let sum = buf.get(..HEADER_LEN - 4).map(crc).unwrap_or_default();
    if stored != sum {
        return Err(DecodeError("checkpoint header checksum mismatch".into()));
    }
    if size != jnl_size {
        return Err(DecodeError(format!(
            "checkpoint taken at {size} bytes, the file has {jnl_size}"
        )));
    }
    let rest = buf.get(HEADER_LEN..).unwrap_or_default();
    file::decode_index(rest, jnl_size)
}

/// Writes the checkpoint of active file `file_no` (atomically).
pub fn write(dir: &Path, file_no: u64, jnl_size: u64, index: &[(u64, u64)]) -> Result<()> {
    fsutil::write_atomic(&dir.join(aix_name(file_no)), &encode(jnl_size, index))
}

/// Reads and removes the checkpoint of active file `file_no`; returns its
/// index if it is intact and matches `jnl_size`, else `None` (scan instead).
pub fn take(dir: &Path, file_no: u64, jnl_size: u64) -> Result<Option<Vec<(u64, u64)>>> {
    let path = dir.join(aix_name(file_no));
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(crate::Error::io("read", &path, e)),
    };
    std::fs::remove_file(&path).ctx("remove journal checkpoint", &path)?;
    fsutil::sync_dir(dir)?;
    match decode(&bytes, jnl_size) {
        Ok(index) => Ok(Some(index)),
        Err(e) => {
            tracing::info!(target: "basalt::journal", "I0012 journal checkpoint {} not used ({e}); scanning the file", path.display());
            Ok(None)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_size_check_and_damage() {
        let index = vec![(5, 16), (6, 100), (9, 300)];
        let buf = encode(400, &index);
        assert_eq!(decode(&buf, 400).unwrap(), index);
        assert!(decode(&buf, 401).is_err(), "a grown file must be scanned");
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x10;
            assert!(decode(&bad, 400).is_err(), "flip at {i} undetected");
        }
    }

    #[test]
    fn take_removes_the_file() {
        let d = tempfile::tempdir().unwrap();
        write(d.path(), 3, 400, &[(1, 16)]).unwrap();
        assert_eq!(take(d.path(), 3, 400).unwrap(), Some(vec![(1, 16)]));
        assert!(!d.path().join(aix_name(3)).exists());
        assert_eq!(take(d.path(), 3, 400).unwrap(), None);
    }
}
