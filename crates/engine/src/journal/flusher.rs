//! Background flushing of the active journal file.
//!
//! Without it, a store running with `sync = none` leaves every byte of the
//! active journal file dirty in the page cache until the file is rolled; the
//! roll's fsync then writes hundreds of megabytes at once, and every put and
//! every GET from the disk waits behind it (a periodic latency spike of a
//! few hundred milliseconds). The flusher keeps the dirty part of the file
//! small instead: every 20 ms it checks how many bytes were appended since
//! it last flushed and, past `journal_sync_bytes`, either starts the
//! kernel's write-back of them ([`JournalFlush::Writeback`], the default,
//! as RocksDB's `bytes_per_sync`) or runs a group-commit fsync
//! ([`JournalFlush::Fsync`]). It also creates the next journal file once
//! the active one is half full ([`Journal::prepare_next_file`]), so that
//! the roll, which writers wait for, does not, unlinks the closed files
//! compaction replaced once nothing holds them ([`Journal::reap_retired`]),
//! and drops rolled files' pages from the page cache
//! ([`Journal::release_rolled`], with `journal_release_written`).

use super::Journal;
use crate::config::JournalFlush;
use crate::error::{IoContext, Result};
use parking_lot::{Condvar, Mutex};
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the flusher looks at the unsynced byte count.
const POLL: Duration = Duration::from_millis(20);

/// The flusher thread of one store; stopped on drop.
#[derive(Debug)]
pub struct Flusher {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<JoinHandle<()>>,
}

/// The flusher thread's loop, until `stop` is set or a flush fails.
fn run(journal: &Journal, stop: &(Mutex<bool>, Condvar), threshold_bytes: u64, mode: JournalFlush) {
    let mut spares = true;
    loop {
        {
            let (lock, cv) = stop;
            let mut stopped = lock.lock();
            if !*stopped {
                cv.wait_for(&mut stopped, POLL);
            }
            if *stopped {
                return;
            }
        }
        journal.reap_retired();
        journal.release_rolled();
        if spares {
            if let Err(e) = journal.prepare_next_file() {
                // Rolls then create their next file themselves, as without
                // a flusher; the error will meet them too.
                tracing::warn!(target: "basalt::journal", "I0014 the next journal file could not be made ahead of its roll (rolls will make it): {e}");
                spares = false;
            }
        }
        if journal.unsynced_bytes() >= threshold_bytes {
            let flushed = match mode {
                JournalFlush::Fsync => journal.sync_to(journal.last_sqn()),
                JournalFlush::Writeback => journal.start_writeback(),
            };
            if let Err(e) = flushed {
                tracing::warn!(target: "basalt::journal", "I0010 background journal flush stopped: {e}");
                return;
            }
        }
    }
}

impl Flusher {
    /// Starts flushing `journal` (as `mode` says) whenever `threshold_bytes`
    /// were appended since the last flush; `None` (no thread) when
    /// `threshold_bytes` is 0.
    pub fn start(
        journal: Arc<Journal>,
        threshold_bytes: u64,
        mode: JournalFlush,
        dir: &Path,
    ) -> Result<Option<Flusher>> {
        if threshold_bytes == 0 {
            return Ok(None);
        }
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let s = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("basalt-journal-flush".into())
            .spawn(move || run(&journal, &s, threshold_bytes, mode))
            .ctx("spawn journal flusher thread", dir)?;
        Ok(Some(Flusher {
            stop,
            handle: Some(handle),
        }))
    }

    /// Stops the thread and waits for it.
    pub fn stop(&mut self) {
        let (lock, cv) = &*self.stop;
        *lock.lock() = true;
        cv.notify_all();
        if let Some(h) = self.handle.take() {
            if h.join().is_err() {
                tracing::error!(target: "basalt::journal", "I0011 journal flusher thread panicked");
            }
        }
    }
}

impl Drop for Flusher {
    fn drop(&mut self) {
        self.stop();
    }
}
