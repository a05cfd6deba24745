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
    write_atomic_with(path, &path.with_extension("tmp"), |w| w.write_all(bytes))
}

/// Replaces `path` atomically with what `write` writes through a buffered
/// writer: into `tmp` (created or truncated), fsync, rename over `path`,
/// fsync of the directory. The one atomic replace of every Basalt file
/// written whole (engine manifests, the node's metadata files, replication
/// queue head files); the error names the step and the file.
pub fn write_atomic_with(
    path: &Path,
    tmp: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let f = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .open(tmp)
        .ctx("create", tmp)?;
    let mut out = std::io::BufWriter::with_capacity(64 << 10, f);
    write(&mut out).ctx("write", tmp)?;
    let f = out
        .into_inner()
        .map_err(|e| e.into_error())
        .ctx("write", tmp)?;
    f.sync_all().ctx("fsync", tmp)?;
    drop(f);
    fs::rename(tmp, path).ctx("rename into place", path)?;
    match path.parent() {
        Some(dir) if dir.as_os_str().is_empty() => sync_dir(Path::new(".")),
        Some(dir) => sync_dir(dir),
        None => Ok(()),
    }
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

/// Reserves `file`'s blocks for its first `len` bytes without changing its
/// size (`fallocate(FALLOC_FL_KEEP_SIZE)`): the file system allocates them
/// now, as unwritten extents, so later appends find their blocks mapped.
/// On ext4, an append into a file without them allocates each block as it
/// goes (delayed allocation), under the inode's block-map lock, which the
/// write-back of the same file takes too; the append then waits for that
/// write-back. Blocks past the end stay reserved until the file is
/// truncated or removed. Advice only: a file system that cannot do it
/// (EOPNOTSUPP) is logged, never an error.
pub fn preallocate(file: &File, path: &Path, len: u64) {
    if let Err(e) = rustix::fs::fallocate(file, rustix::fs::FallocateFlags::KEEP_SIZE, 0, len) {
        tracing::debug!(path = %path.display(), error = %e, "fallocate(KEEP_SIZE) failed; appends allocate blocks as they go");
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

/// Whether the file system holding `path` is mounted with online discard
/// (`discard` among its options in `/proc/self/mountinfo`): every extent
/// it frees, a punched hole's too, then waits for the device to discard
/// it. `None` where that cannot be told (no mountinfo, no matching mount).
pub fn online_discard(path: &Path) -> Option<bool> {
    use std::os::unix::fs::MetadataExt;
    let dev = fs::metadata(path).ok()?.dev();
    let info = fs::read_to_string("/proc/self/mountinfo").ok()?;
    mount_discard(&info, rustix::fs::major(dev), rustix::fs::minor(dev))
}

/// [`online_discard`] on a `mountinfo` text, for the device `major:minor`
/// (its last mount, which is the one that shows).
pub fn mount_discard(mountinfo: &str, major: u32, minor: u32) -> Option<bool> {
    let dev = format!("{major}:{minor}");
    mountinfo.lines().rev().find_map(|l| {
        let (mount, fs) = l.split_once(" - ")?;
        let mut f = mount.split_whitespace();
        (f.nth(2)? == dev).then_some(())?;
        let mount_opts = f.nth(2)?;
        let super_opts = fs.split_whitespace().nth(2).unwrap_or("");
        let discard = |opts: &str| opts.split(',').any(|o| o == "discard");
        Some(discard(mount_opts) || discard(super_opts))
    })
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
    fn online_discard_is_read_from_the_devices_mount_options() {
        let info = "\
27 1 254:0 / / rw,relatime - ext4 /dev/vda rw,discard,resv_strict
43 27 7:0 / /mnt/nodiscard rw,relatime - ext4 /dev/loop0 rw
44 27 7:1 / /mnt/a rw,relatime,discard - xfs /dev/loop1 rw
45 27 7:2 / /mnt/b rw - ext4 /dev/loop2 rw,nodiscard
";
        assert_eq!(mount_discard(info, 254, 0), Some(true));
        assert_eq!(mount_discard(info, 7, 0), Some(false));
        assert_eq!(mount_discard(info, 7, 1), Some(true));
        assert_eq!(mount_discard(info, 7, 2), Some(false));
        assert_eq!(mount_discard(info, 8, 0), None);
        assert_eq!(mount_discard("garbage\n", 254, 0), None);
        // Every directory is on some mount this process can see.
        let d = tempfile::tempdir().unwrap();
        assert!(online_discard(d.path()).is_some());
    }
}
