//! File-system helpers: atomic replace, directory fsync, and the page-cache
//! advice that keeps the kernel's read-ahead and caching out of the way of
//! foreground reads.

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

/// Turns the kernel's read-ahead off for this open file description
/// (`posix_fadvise(RANDOM)`; other handles of the same file keep theirs):
/// each read brings in exactly the pages it asks for. For random value and
/// block reads, which would otherwise pull in a window around each miss and
/// evict useful pages, and for scans that read in explicit chunks of their
/// own. The kernel's sequential read-ahead is sized by the device's
/// `read_ahead_kb` (8 MiB on some virtual disks, doubled for sequential
/// advice) and issues requests of up to `max_sectors_kb`: a foreground read
/// queued behind a few of those waits tens of milliseconds. Advice only: a
/// failure is logged, never an error.
pub fn no_readahead(file: &File, path: &Path) {
    if let Err(e) = rustix::fs::fadvise(file, 0, None, rustix::fs::Advice::Random) {
        tracing::debug!(path = %path.display(), error = %e, "posix_fadvise(RANDOM) failed; reading with the kernel's default read-ahead");
    }
}

/// Drops `len` bytes of `file` from `offset` out of the page cache
/// (`posix_fadvise(DONTNEED)`; the pages are the inode's, so every handle
/// loses them). For data read or written once, such as compaction's input
/// and output, that would otherwise evict the hot set. Advice only: a
/// failure is logged, never an error. Dirty pages are not dropped (sync
/// first).
pub fn drop_cached(file: &File, path: &Path, offset: u64, len: u64) {
    let Some(len) = std::num::NonZeroU64::new(len) else {
        return;
    };
    if let Err(e) = rustix::fs::fadvise(file, offset, Some(len), rustix::fs::Advice::DontNeed) {
        tracing::debug!(path = %path.display(), error = %e, "posix_fadvise(DONTNEED) failed; the pages stay cached");
    }
}

pub use crate::limits::REMOVE_STEP_BYTES;

/// Removes the data file `path`, first shrinking it in steps of
/// [`REMOVE_STEP_BYTES`] (to at most one step) when this is its only link
/// (a backup's hard link keeps its content: such a file is just unlinked).
///
/// On a file system mounted with online discard (`-o discard`, as this
/// project's VMs are), unlinking a 256 MiB journal file frees one large
/// extent and ext4 sends it to the device as one discard request, which
/// reads then queue behind. Measured with fio, 16 random 8 KiB readers
/// while 1 GiB of files was unlinked: per-second maxima of 23–41 ms
/// against 8–11 ms without; truncated 8 MiB at a time before the unlink:
/// 8–11 ms (and p99.99 3.9 ms against 19–22 ms). RocksDB's
/// `DeleteScheduler` truncates files in chunks for the same reason. Here
/// the steps run back to back, so the freed space still reaches the device
/// within one commit or two (docs/benchmarks.md 2026-11-28 12:51, part 5):
/// for leftovers and abandoned output. Replaced files go to
/// [`crate::remover`], which paces the steps.
/// A failed step only ends the stepping; the unlink's result is what is
/// returned (`NotFound` included, for callers to ignore).
pub fn remove_in_steps(path: &Path) -> std::io::Result<()> {
    if let Ok(f) = OpenOptions::new().write(true).open(path) {
        use std::os::unix::fs::MetadataExt;
        if let Ok(m) = f.metadata() {
            let mut len = m.len();
            while m.nlink() == 1 && len > REMOVE_STEP_BYTES {
                len -= REMOVE_STEP_BYTES;
                if let Err(e) = f.set_len(len) {
                    tracing::debug!(path = %path.display(), error = %e, "could not shrink a file before removing it; unlinking it whole");
                    break;
                }
            }
        }
    }
    fs::remove_file(path)
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

    #[test]
    fn remove_in_steps_removes_a_file_and_spares_its_other_links() {
        let d = tempfile::tempdir().unwrap();
        let big = vec![7u8; (2 * REMOVE_STEP_BYTES + 12345) as usize];
        let a = d.path().join("a.jnl");
        fs::write(&a, &big).unwrap();
        remove_in_steps(&a).unwrap();
        assert!(!a.exists());

        let b = d.path().join("b.jnl");
        let link = d.path().join("backup.jnl");
        fs::write(&b, &big).unwrap();
        fs::hard_link(&b, &link).unwrap();
        remove_in_steps(&b).unwrap();
        assert!(!b.exists());
        assert_eq!(fs::read(&link).unwrap(), big);

        let e = remove_in_steps(&b).unwrap_err();
        assert_eq!(e.kind(), std::io::ErrorKind::NotFound);
    }
}
