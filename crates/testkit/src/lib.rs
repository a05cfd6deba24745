//! Test-only helpers for what the product crates cannot do without unsafe
//! code (the workspace forbids it there).
//!
//! [`page_cached`] says whether a page of a file is in the page cache,
//! read with `mincore(2)` on a shared read-only mapping that is never
//! touched, so asking does not change the answer. A buffered read with
//! `RWF_NOWAIT`, the probe the journal's tests used before, does: on a
//! miss the kernel starts the read it refuses to wait for, and on a fast
//! disk that read may finish before the kernel looks again, so the probe
//! reported pages as cached that `fincore` showed were not (the
//! 2026-11-29 VM, about 1 run in 8).

use std::fs::File;
use std::os::fd::AsRawFd;
use std::path::Path;

/// Whether the page holding byte `offset` of the file at `path` is in the
/// page cache. `None` where that cannot be told: the file cannot be opened
/// or mapped, or `offset` lies past its end.
pub fn page_cached(path: &Path, offset: u64) -> Option<bool> {
    let file = File::open(path).ok()?;
    let len = file.metadata().ok()?.len();
    if offset >= len {
        return None;
    }
    // SAFETY: sysconf has no preconditions.
    let page = u64::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) }).ok()?;
    let at = offset - offset % page;
    let span = usize::try_from((len - at).min(page)).ok()?;
    let at = libc::off_t::try_from(at).ok()?;
    // SAFETY: a new shared, read-only mapping of an open regular file; its
    // memory is never read or written here (mincore only asks the kernel
    // about it) and it is unmapped before returning. `span` is at most one
    // page, so one status byte suffices.
    unsafe {
        let map = libc::mmap(
            std::ptr::null_mut(),
            span,
            libc::PROT_READ,
            libc::MAP_SHARED,
            file.as_raw_fd(),
            at,
        );
        if map == libc::MAP_FAILED {
            return None;
        }
        let mut status = 0u8;
        let asked = libc::mincore(map, span, &mut status);
        libc::munmap(map, span);
        (asked == 0).then_some(status & 1 == 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_page_just_written_is_cached_and_one_dropped_is_not() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let mut f = File::create(&path).expect("create");
        f.write_all(&[7u8; 3 * 4096]).expect("write");
        f.sync_all().expect("sync");
        assert_eq!(page_cached(&path, 4096), Some(true), "written, clean");
        // SAFETY: posix_fadvise has no memory preconditions.
        let r = unsafe { libc::posix_fadvise(f.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
        assert_eq!(r, 0);
        // Clean pages go, and asking twice does not bring them back.
        assert_eq!(page_cached(&path, 4096), Some(false), "dropped");
        assert_eq!(page_cached(&path, 4096), Some(false), "asked again");
        assert_eq!(page_cached(&path, 3 * 4096), None, "past the end");
    }
}
