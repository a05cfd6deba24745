//! File-system helpers: atomic replace and directory fsync.

use crate::error::{IoContext, Result};
use std::fs::{self, File, OpenOptions};
use std::io::Write;
use std::path::Path;

/// Makes the directory entry changes (create, rename, unlink) in `dir` durable.
pub fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .ctx("fsync directory", dir)
}

/// Replaces `path` with `bytes` atomically: write `path.tmp`, fsync it,
/// rename over `path`, fsync the directory. A crash leaves either the old or
/// the new content, never a mix.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .open(&tmp)
            .ctx("create", &tmp)?;
        f.write_all(bytes).ctx("write", &tmp)?;
        f.sync_all().ctx("fsync", &tmp)?;
    }
    fs::rename(&tmp, path).ctx("rename into place", path)?;
    if let Some(dir) = path.parent() {
        sync_dir(dir)?;
    }
    Ok(())
}

/// Writes `bytes` to `path` through a temporary file and a rename, without
/// any fsync: for files that are checked when read and can be rebuilt (a
/// journal file's `.jix`). A crash may leave no file or a torn one under
/// the name; the reader's checksum must catch it.
pub fn write_unsynced(path: &Path, bytes: &[u8]) -> Result<()> {
    let tmp = path.with_extension("tmp");
    fs::write(&tmp, bytes).ctx("write", &tmp)?;
    fs::rename(&tmp, path).ctx("rename into place", path)
}

/// Creates `dir` (and parents) if needed.
pub fn ensure_dir(dir: &Path) -> Result<()> {
    fs::create_dir_all(dir).ctx("create directory", dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn atomic_write_replaces() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("MANIFEST");
        write_atomic(&p, b"one").unwrap();
        write_atomic(&p, b"two").unwrap();
        assert_eq!(fs::read(&p).unwrap(), b"two");
        assert!(!d.path().join("MANIFEST.tmp").exists());
    }
}
