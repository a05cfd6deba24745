//! Background flushing of the active journal file.
//!
//! Without it, a store running with `sync = none` leaves every byte of the
//! active journal file dirty in the page cache until the file is rolled; the
//! roll's fsync then writes hundreds of megabytes at once, and every put and
//! every GET from the disk waits behind it (a periodic latency spike of a
//! few hundred milliseconds). The flusher keeps the dirty part of the file
//! small instead: once `journal_sync_bytes` were appended since it last
//! flushed (the append that crosses that line wakes it: [`Wake`]), it
//! either starts the
//! kernel's write-back of them ([`JournalFlush::Writeback`], the default,
//! as RocksDB's `bytes_per_sync`) or runs a group-commit fsync
//! ([`JournalFlush::Fsync`]). In write-back mode it also fsyncs the file
//! every `journal_fsync_bytes` (off the writers' path): a disk with a
//! volatile write cache holds what write-back sent it until a cache flush,
//! and on a virtual disk a flush can stall every read for as long as that
//! backlog takes to write — a 256 MiB file's worth at the roll held GETs
//! ~300–500 ms on the 2026-11-29 VM, 4 MiB steps ~40 ms at most
//! (`docs/benchmarks/2026-11-29-0718-new-vm-cache-flush-stalls.md`). It also creates
//! the next journal file once
//! the active one is half full ([`Journal::prepare_next_file`]), so that
//! the roll, which writers wait for, does not, unlinks the closed files
//! compaction replaced once nothing holds them ([`Journal::reap_retired`]),
//! and drops rolled files' pages from the page cache
//! ([`Journal::release_rolled`], with `journal_release_written`).
//!
//! Those chores it looks at every [`POLL`] while appends go on, and ever
//! less often while the journal is idle (doubling up to [`IDLE_POLL`]):
//! a node has one flusher per vnode, and 64 of them waking every 20 ms cost
//! an idle node 8.7 % of a vCPU in system time (3,200 wake-ups a second).

use super::Journal;
use crate::config::JournalFlush;
use crate::error::{IoContext, Result};
use parking_lot::{Condvar, Mutex};
use std::path::Path;
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// How often the flusher does its chores while appends go on.
const POLL: Duration = Duration::from_millis(20);

/// The longest the flusher sleeps while the journal is idle.
const IDLE_POLL: Duration = Duration::from_secs(1);

/// How appends wake the flusher: the append that takes the unsynced byte
/// count across the step notifies the flusher's condition variable under
/// its lock, and the flusher looks at the count under that lock before it
/// sleeps, so no step is missed whatever the flusher was doing.
#[derive(Debug)]
pub(crate) struct Wake {
    step_bytes: u64,
    signal: Arc<(Mutex<bool>, Condvar)>,
}

impl Wake {
    /// An append took the unsynced byte count from `before` to `after`.
    pub(crate) fn appended(&self, before: u64, after: u64) {
        if before < self.step_bytes && after >= self.step_bytes {
            let (lock, cv) = &*self.signal;
            let _held = lock.lock();
            cv.notify_one();
        }
    }
}

/// The flusher thread of one store; stopped on drop.
#[derive(Debug)]
pub struct Flusher {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<JoinHandle<()>>,
}

/// When the flusher acts: what it does every `step_bytes` appended
/// (`Config::journal_sync_bytes`, `journal_flush`) and, in write-back mode,
/// how often it fsyncs as well (`Config::journal_fsync_bytes`; 0: never,
/// only rolls do).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlushPlan {
    /// Flush (as `mode` says) once this many bytes were appended since the
    /// last flush; 0 means no flusher thread.
    pub step_bytes: u64,
    /// Write-back steps or fsyncs.
    pub mode: JournalFlush,
    /// In write-back mode, fsync once this many bytes were appended since
    /// the last fsync (0: only at rolls).
    pub fsync_bytes: u64,
}

impl FlushPlan {
    /// What to do now, given the bytes appended since the last step and
    /// since the last fsync: `None`, or the flush to run.
    fn due(&self, since_step: u64, since_fsync: u64) -> Option<JournalFlush> {
        if self.mode == JournalFlush::Writeback
            && self.fsync_bytes > 0
            && since_fsync >= self.fsync_bytes
        {
            return Some(JournalFlush::Fsync);
        }
        (since_step >= self.step_bytes).then_some(self.mode)
    }
}

/// The flusher thread's loop, until `stop` is set or a flush fails.
fn run(journal: &Journal, stop: &(Mutex<bool>, Condvar), plan: FlushPlan) {
    let mut spares = true;
    let mut wait = POLL;
    let mut seen = journal.appended_bytes();
    loop {
        {
            let (lock, cv) = stop;
            let mut stopped = lock.lock();
            // A step that came due while this thread was busy (its wake
            // found nobody waiting) is not slept over.
            let due = plan.due(journal.unsynced_bytes(), journal.unfsynced_bytes());
            if !*stopped && due.is_none() {
                cv.wait_for(&mut stopped, wait);
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
        if let Some(flush) = plan.due(journal.unsynced_bytes(), journal.unfsynced_bytes()) {
            let flushed = match flush {
                JournalFlush::Fsync => journal.sync_to(journal.last_sqn()),
                JournalFlush::Writeback => journal.start_writeback(),
            };
            if let Err(e) = flushed {
                tracing::warn!(target: "basalt::journal", "I0010 background journal flush stopped: {e}");
                return;
            }
        }
        let now = journal.appended_bytes();
        wait = next_wait(wait, now != seen);
        seen = now;
    }
}

/// The flusher's next sleep: [`POLL`] after appends, else twice the last
/// one up to [`IDLE_POLL`].
fn next_wait(last: Duration, appended: bool) -> Duration {
    if appended {
        POLL
    } else {
        (last * 2).min(IDLE_POLL)
    }
}

impl Flusher {
    /// Starts flushing `journal` as `plan` says; `None` (no thread) when
    /// its `step_bytes` is 0.
    pub fn start(journal: Arc<Journal>, plan: FlushPlan, dir: &Path) -> Result<Option<Flusher>> {
        if plan.step_bytes == 0 {
            return Ok(None);
        }
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let wake = Wake {
            step_bytes: plan.step_bytes,
            signal: Arc::clone(&stop),
        };
        if journal.flush_wake.set(wake).is_err() {
            return Err(crate::error::Error::InvalidInput(
                "a journal has one flusher".into(),
            ));
        }
        let s = Arc::clone(&stop);
        let handle = std::thread::Builder::new()
            .name("basalt-journal-flush".into())
            .spawn(move || run(&journal, &s, plan))
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

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    fn plan(mode: JournalFlush, fsync_bytes: u64) -> FlushPlan {
        FlushPlan {
            step_bytes: MIB,
            mode,
            fsync_bytes,
        }
    }

    #[test]
    fn write_back_steps_until_the_fsync_cadence_is_due() {
        let p = plan(JournalFlush::Writeback, 16 * MIB);
        assert_eq!(p.due(MIB - 1, 15 * MIB), None);
        assert_eq!(p.due(MIB, 15 * MIB), Some(JournalFlush::Writeback));
        assert_eq!(p.due(0, 16 * MIB), Some(JournalFlush::Fsync));
        assert_eq!(p.due(MIB, 16 * MIB), Some(JournalFlush::Fsync));
    }

    #[test]
    fn the_flusher_sleeps_longer_while_idle_and_looks_often_while_appends_go_on() {
        let mut w = POLL;
        let mut slept = Vec::new();
        for _ in 0..8 {
            w = next_wait(w, false);
            slept.push(w.as_millis());
        }
        assert_eq!(slept, [40, 80, 160, 320, 640, 1000, 1000, 1000]);
        assert_eq!(next_wait(IDLE_POLL, true), POLL);
    }

    #[test]
    fn only_the_append_that_crosses_the_step_wakes_the_flusher() {
        let signal = Arc::new((Mutex::new(false), Condvar::new()));
        let wake = Wake {
            step_bytes: MIB,
            signal: Arc::clone(&signal),
        };
        let s2 = Arc::clone(&signal);
        let (ready_tx, ready_rx) = std::sync::mpsc::channel();
        let waiter = std::thread::spawn(move || {
            let (lock, cv) = &*s2;
            let mut g = lock.lock();
            ready_tx.send(()).expect("send");
            let first = cv.wait_for(&mut g, Duration::from_millis(300)).timed_out();
            ready_tx.send(()).expect("send");
            let second = cv.wait_for(&mut g, Duration::from_secs(30)).timed_out();
            (first, second)
        });
        // Taking the lock after the waiter's signal means it is waiting.
        ready_rx.recv().expect("ready");
        drop(signal.0.lock());
        // Below the step, and already past it: no wake.
        wake.appended(0, MIB - 1);
        wake.appended(MIB, 2 * MIB);
        ready_rx.recv().expect("ready");
        drop(signal.0.lock());
        wake.appended(MIB - 1, MIB);
        let (first, second) = waiter.join().expect("join");
        assert!(first, "appends that do not cross the step leave it asleep");
        assert!(!second, "the crossing append woke it");
    }

    #[test]
    fn no_fsync_cadence_when_off_or_already_fsyncing() {
        let off = plan(JournalFlush::Writeback, 0);
        assert_eq!(off.due(MIB, u64::MAX), Some(JournalFlush::Writeback));
        assert_eq!(off.due(0, u64::MAX), None);
        let fsync = plan(JournalFlush::Fsync, 16 * MIB);
        assert_eq!(fsync.due(0, 16 * MIB), None);
        assert_eq!(fsync.due(MIB, 0), Some(JournalFlush::Fsync));
    }
}
