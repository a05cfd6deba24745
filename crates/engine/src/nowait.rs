//! Reads that never wait for the disk: the mode of
//! [`crate::Store::get_cached`] and [`crate::Store::head_cached`].
//!
//! A node answers most GETs from memory: the ledger's entry from a
//! memtable or the block cache, the value from the value cache or the page
//! cache. Such a read can run on the thread that received the request
//! instead of being handed to a vnode's worker thread and back (two thread
//! wake-ups, most of a small request's CPU), but only if it never blocks
//! there: a disk read on an async runtime's thread stalls every connection
//! it serves. This mode makes that promise checkable.
//!
//! * While a [`Scope`] is alive on a thread, the read path's file reads
//!   ([`read_exact_at`]) use `preadv2(RWF_NOWAIT)`: the kernel copies from
//!   the page cache or answers `EAGAIN` at once, never starting a disk
//!   read. Direct (`O_DIRECT`) reads always go to the disk and are refused;
//!   so is a lock a writer may hold for a write (the journal's active file).
//! * A refused step is an [`Error::Io`] whose source is
//!   [`std::io::ErrorKind::WouldBlock`] ([`is_blocked`]); the `_cached`
//!   reads turn it into "not in memory" and the caller reads the normal way.
//!   It never reaches anyone else: the flag is per thread and the scope
//!   restores it on drop, also on unwinding.
//! * Where the kernel or file system does not support `RWF_NOWAIT`
//!   (`EOPNOTSUPP`), every file read in this mode is refused from then on:
//!   the node then serves reads as before, on the vnode's thread.
//! * Nothing a refused read did is visible: caches are filled only by reads
//!   that completed and were verified.

use crate::error::Error;
use std::cell::Cell;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

thread_local! {
    static ON: Cell<bool> = const { Cell::new(false) };
}

/// Set once `RWF_NOWAIT` was refused by the kernel: no-wait reads of files
/// then always report "would block".
static UNSUPPORTED: AtomicBool = AtomicBool::new(false);

/// No-wait mode on this thread while alive.
pub struct Scope {
    before: bool,
}

/// Turns no-wait mode on for this thread until the scope drops.
pub fn enter() -> Scope {
    Scope {
        before: ON.with(|c| c.replace(true)),
    }
}

impl Drop for Scope {
    fn drop(&mut self) {
        ON.with(|c| c.set(self.before));
    }
}

/// True while this thread is in no-wait mode.
pub fn active() -> bool {
    ON.with(Cell::get)
}

/// The error a refused step returns: `op` on `path` would have waited.
pub fn blocked(op: &'static str, path: &Path) -> Error {
    Error::io(op, path, would_block())
}

fn would_block() -> std::io::Error {
    std::io::Error::new(
        std::io::ErrorKind::WouldBlock,
        "a no-wait read would have waited for the disk",
    )
}

/// True if `e` is a refused no-wait step (see the module docs).
pub fn is_blocked(e: &Error) -> bool {
    matches!(e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::WouldBlock)
}

/// `file.read_exact_at(buf, offset)`, or in no-wait mode the same from
/// the page cache only (`WouldBlock` if any of it is not there).
pub fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
    if !active() {
        return file.read_exact_at(buf, offset);
    }
    if UNSUPPORTED.load(Ordering::Relaxed) {
        return Err(would_block());
    }
    let mut got = 0usize;
    while let Some(rest) = buf.get_mut(got..).filter(|r| !r.is_empty()) {
        let mut slices = [std::io::IoSliceMut::new(rest)];
        match rustix::io::preadv2(
            file,
            &mut slices,
            offset + got as u64,
            rustix::io::ReadWriteFlags::NOWAIT,
        ) {
            Ok(0) => return Err(std::io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(rustix::io::Errno::INTR) => {}
            Err(rustix::io::Errno::AGAIN) => return Err(would_block()),
            Err(rustix::io::Errno::OPNOTSUPP) => {
                if !UNSUPPORTED.swap(true, Ordering::Relaxed) {
                    tracing::info!("this kernel or file system refuses RWF_NOWAIT reads: every read waits on a vnode's thread");
                }
                return Err(would_block());
            }
            Err(e) => return Err(e.into()),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn the_mode_is_scoped_and_nested() {
        assert!(!active());
        {
            let _a = enter();
            assert!(active());
            {
                let _b = enter();
                assert!(active());
            }
            assert!(active(), "an inner scope restores the outer one's mode");
        }
        assert!(!active());
    }

    #[test]
    fn a_cached_read_succeeds_in_no_wait_mode_and_says_so_when_it_cannot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("f");
        let mut f = File::create(&path).expect("create");
        f.write_all(&[7u8; 8192]).expect("write");
        drop(f);
        let f = File::open(&path).expect("open");
        let mut buf = [0u8; 100];
        {
            let _s = enter();
            // Just written: in the page cache, unless this kernel refuses
            // RWF_NOWAIT, in which case the read is refused as a miss.
            match read_exact_at(&f, &mut buf, 4000) {
                Ok(()) => assert_eq!(buf, [7u8; 100]),
                Err(e) => {
                    assert_eq!(e.kind(), std::io::ErrorKind::WouldBlock);
                    assert!(UNSUPPORTED.load(Ordering::Relaxed));
                    eprintln!("RWF_NOWAIT unsupported here: only the refusal was checked");
                }
            }
            let mut past = [0u8; 10];
            let e = read_exact_at(&f, &mut past, 8190).expect_err("past the end");
            assert!(matches!(
                e.kind(),
                std::io::ErrorKind::UnexpectedEof | std::io::ErrorKind::WouldBlock
            ));
        }
        let e = blocked("read", &path);
        assert!(is_blocked(&e));
        assert!(!is_blocked(&Error::io(
            "read",
            &path,
            std::io::ErrorKind::NotFound.into()
        )));
    }
}
