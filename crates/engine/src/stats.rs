//! Counters shared by the store's parts, read by `Store::stats`.
//!
//! Two kinds: plain monotonic counters, and [`WaitTimer`]s — one per place
//! a GET or PUT can wait (a lock, an fsync, a roll, back-pressure, a block
//! or value read) — each kept as four relaxed atomics: how many waits, their
//! total nanoseconds, how many took at least [`SLOW_WAIT_NS`] (for reads: a
//! proxy for page-cache misses) and the longest one since the store opened.
//! A snapshot lists a timer `t` as `t_count`, `t_ns`, `t_slow`, `t_max_ns`.
//! No locks: a reader may see the four fields from slightly different
//! moments, which is harmless for per-interval deltas.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

thread_local! {
    /// Nanoseconds this thread spent in waits recorded by any
    /// [`WaitTimer`], so that a whole call can tell its recorded waits from
    /// the rest of its time ([`waited_here_ns`]).
    static WAITED_NS: Cell<u64> = const { Cell::new(0) };
}

/// Nanoseconds the calling thread has spent in recorded waits so far (a
/// running total: subtract two readings).
pub fn waited_here_ns() -> u64 {
    WAITED_NS.with(Cell::get)
}

/// A wait at least this long counts as slow (1 ms).
pub const SLOW_WAIT_NS: u64 = 1_000_000;

/// Count, total, slow count and maximum of one kind of wait (see the module doc).
#[derive(Debug, Default)]
pub struct WaitTimer {
    /// Waits recorded.
    pub count: AtomicU64,
    /// Their total, in nanoseconds.
    pub total_ns: AtomicU64,
    /// Waits of at least [`SLOW_WAIT_NS`].
    pub slow: AtomicU64,
    /// The longest wait since the store opened, in nanoseconds.
    pub max_ns: AtomicU64,
    /// The longest wait since [`Stats::take_window_maxima`] last read it.
    pub window_max_ns: AtomicU64,
}

impl WaitTimer {
    /// Records one wait of `d`.
    pub fn record(&self, d: Duration) {
        let ns = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        WAITED_NS.with(|w| w.set(w.get().wrapping_add(ns)));
        self.count.fetch_add(1, Ordering::Relaxed);
        self.total_ns.fetch_add(ns, Ordering::Relaxed);
        if ns >= SLOW_WAIT_NS {
            self.slow.fetch_add(1, Ordering::Relaxed);
        }
        if ns > self.max_ns.load(Ordering::Relaxed) {
            self.max_ns.fetch_max(ns, Ordering::Relaxed);
        }
        if ns > self.window_max_ns.load(Ordering::Relaxed) {
            self.window_max_ns.fetch_max(ns, Ordering::Relaxed);
        }
    }

    /// Records the time since `start`.
    pub fn since(&self, start: Instant) {
        self.record(start.elapsed());
    }

    /// Its four fields named as a snapshot lists them, under `name`:
    /// `name_count`, `name_ns`, `name_slow`, `name_max_ns` (for timers kept
    /// outside [`Stats`], e.g. a server's).
    pub fn named(&self, name: &str) -> [(String, u64); 4] {
        let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
        [
            (format!("{name}_count"), ld(&self.count)),
            (format!("{name}_ns"), ld(&self.total_ns)),
            (format!("{name}_slow"), ld(&self.slow)),
            (format!("{name}_max_ns"), ld(&self.max_ns)),
        ]
    }
}

macro_rules! counters {
    (
        $($(#[$doc:meta])* $name:ident),* $(,)?;
        timers: $($(#[$tdoc:meta])* $timer:ident),* $(,)?
    ) => {
        /// Monotonic counters and wait timers, updated with relaxed atomics.
        #[derive(Debug, Default)]
        pub struct Stats {
            $($(#[$doc])* pub $name: AtomicU64,)*
            $($(#[$tdoc])* pub $timer: WaitTimer,)*
        }

        impl Stats {
            /// A named snapshot of every counter, in declaration order, then
            /// every timer as `_count`, `_ns`, `_slow`, `_max_ns`.
            pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
                let mut v = vec![$((stringify!($name), self.$name.load(Ordering::Relaxed)),)*];
                $(
                    v.push((concat!(stringify!($timer), "_count"), self.$timer.count.load(Ordering::Relaxed)));
                    v.push((concat!(stringify!($timer), "_ns"), self.$timer.total_ns.load(Ordering::Relaxed)));
                    v.push((concat!(stringify!($timer), "_slow"), self.$timer.slow.load(Ordering::Relaxed)));
                    v.push((concat!(stringify!($timer), "_max_ns"), self.$timer.max_ns.load(Ordering::Relaxed)));
                )*
                v
            }
        }

        impl Stats {
            /// Every timer's longest wait since the previous call, as
            /// `<t>_window_max_ns`, and resets them: for a sampler that
            /// wants per-interval maxima (one sampler per store; a second
            /// caller would steal the first one's windows).
            pub fn take_window_maxima(&self) -> Vec<(&'static str, u64)> {
                vec![$((
                    concat!(stringify!($timer), "_window_max_ns"),
                    self.$timer.window_max_ns.swap(0, Ordering::Relaxed),
                ),)*]
            }
        }

        /// The wait timers' names, in snapshot order.
        pub const WAIT_TIMERS: &[&str] = &[$(stringify!($timer)),*];
    };
}

counters! {
    /// Puts acknowledged.
    puts,
    /// Deletes acknowledged.
    deletes,
    /// Gets served (found or not).
    gets,
    /// Heads served (found or not).
    heads,
    /// No-wait reads (`Store::get_cached`, `head_cached`) that would have
    /// waited for the disk or a writer, and were left to an ordinary read.
    get_nowait_misses,
    /// User bytes (key + metadata + value) accepted by puts.
    user_bytes_written,
    /// Journal records appended.
    journal_records_written,
    /// Bytes appended to journal files.
    journal_bytes_written,
    /// Journal files closed (rolled).
    journal_rolls,
    /// fsyncs of the active journal file.
    journal_syncs,
    /// Puts whose fsync was performed by another writer (group commit).
    journal_syncs_shared,
    /// Journal records found corrupt (bad CRC or structure) and skipped.
    journal_corrupt_records,
    /// Bytes cut from the end of the active journal file at open (torn tail).
    journal_truncated_bytes,
    /// Bytes of the active journal file read at open to rebuild its index
    /// (0 after a clean close: the close's checkpoint is used instead).
    journal_open_scan_bytes,
    /// Journal records replayed into the ledger at open.
    journal_replayed_records,
    /// Puts given the index blob that says "recalculate" instead of their
    /// 2i changes (`index::recalc::RECALC_BLOB`); counted as the record is
    /// encoded, so a write refused after that (the disk guard) counts too.
    index_changes_recalculated,
    /// Records replayed at open whose 2i entries could be neither
    /// recalculated nor read from their blob, and were skipped (logged as
    /// I0025; zero unless a term source changed or damage got past the
    /// checksums).
    index_recalc_skipped,
    /// Memtables written as L0 files.
    ledger_flushes,
    /// Memtables frozen because the journal grew `memtable_journal_bytes`
    /// since the last freeze (not because they were full).
    ledger_journal_freezes,
    /// Merge jobs completed.
    ledger_merges,
    /// Bytes written to SST files (flushes and merges).
    ledger_bytes_written,
    /// SST blocks or files found corrupt (at open, on reads and in merges).
    ledger_corrupt_blocks,
    /// Point lookups whose SST data block was in the block cache.
    ledger_block_cache_hits,
    /// Point lookups that read their SST data block from the file (with a
    /// block cache: not in it; without one: not counted).
    ledger_block_cache_misses,
    /// GETs whose value was in the value cache (`Config::value_cache_bytes`).
    journal_value_cache_hits,
    /// GETs that read their value from a journal file (with a value cache:
    /// not in it; without one: not counted).
    journal_value_cache_misses,
    /// Cached records replaced by a newer version of their key as it was
    /// written, so the key's next GET is a hit.
    journal_value_cache_refreshes,
    /// Ledger flushes or merges that failed and will be retried (e.g. disk
    /// full, a damaged input file); the store stays readable meanwhile.
    ledger_job_errors,
    /// Times a writer waited for the ledger to catch up (back-pressure).
    write_stalls,
    /// Microseconds writers spent waiting in back-pressure.
    write_stall_us,
    /// Write groups paced because journal compaction fell behind
    /// (`Config::journal_slowdown_garbage_pct`).
    journal_slowdowns,
    /// Microseconds they waited.
    journal_slowdown_us,
    /// Value bytes handed to the journal's compressor (before compression).
    compression_bytes_in,
    /// Value bytes stored for them (after compression; a value that does not
    /// shrink is stored as is and counted here at its full size).
    compression_bytes_out,
    /// Journal compaction runs that rewrote files.
    compaction_runs,
    /// Journal compaction runs that found nothing worth compacting.
    compaction_runs_idle,
    /// Runs started by the garbage trigger (counted in the two above too).
    compaction_garbage_runs,
    /// Milliseconds background runs waited for one of the node's
    /// compaction slots (`Config::compaction_slots`).
    compaction_slot_wait_ms,
    /// Runs that copied where `Punch::Auto` would have punched, because
    /// the remover was behind with holes (`PUNCH_BACKLOG_MAX`).
    compaction_punch_behind_runs,
    /// Runs that copied where they could have punched, because punching
    /// would free under half of what copying frees (garbage kept whole as
    /// key deltas or tombstones: `compaction::PUNCH_MIN_SHARE`).
    compaction_punch_short_runs,
    /// Journal compaction runs abandoned after an error (partial output deleted).
    compaction_failures,
    /// Journal files replaced by compaction.
    compaction_files_in,
    /// Journal files written by compaction.
    compaction_files_out,
    /// Bytes of journal files replaced minus bytes written (space reclaimed).
    compaction_bytes_reclaimed,
    /// Journal records dropped by compaction.
    compaction_records_dropped,
    /// Journal records copied unchanged (or recompressed) by compaction.
    compaction_records_kept,
    /// Replaced records kept only as key deltas (their index changes).
    compaction_key_deltas,
    /// Chunks of compaction output fsynced and dropped from the page cache
    /// while a run writes (`Config::compaction_stream_bytes`).
    compaction_stream_syncs,
    /// Milliseconds journal compaction slept to keep to its read pace
    /// (`Config::compaction_read_bytes_per_sec`).
    compaction_paced_ms,
    /// Milliseconds in compaction runs that rewrote files (scoring,
    /// reading, writing and pacing included).
    compaction_run_ms,
    /// Garbage estimates made by the trigger (see `Compactor::garbage`).
    compaction_estimates,
    /// Milliseconds they took (scoring files by sampled reads).
    compaction_estimate_ms,
    /// Journal files reclaimed in place: garbage runs marked in a new index,
    /// their blocks to be punched (`Config::journal_reclaim = punch`).
    compaction_files_punched,
    /// Bytes of holes punched in journal files (once their readers were gone).
    compaction_bytes_punched,
    /// Files a punch pass left as they were: linked elsewhere (a backup) or
    /// damaged (copying compaction handles them).
    compaction_punch_skipped,
    /// Journal files scored (sampled) by estimates, runs and `rescore`.
    compaction_files_scored,
    /// Write-backs of the active journal file started by the flusher
    /// (`JournalFlush::Writeback`).
    journal_writebacks,
    /// Hot backups taken.
    backups,
    /// Write groups written (one write-lock trip and one journal write each;
    /// see `write_group`).
    write_groups,
    /// Records written in them (divide by `write_groups` for the mean size).
    write_group_records;
    timers:
    /// PUT/DELETE of a writer whose record another writer's group wrote:
    /// its whole wait (queue, the group's write and, with sync, its fsync).
    wait_write_group,
    /// PUT/DELETE: waiting for the store's write lock (other writers, and
    /// whatever they do under it: journal append, a roll, back-pressure).
    wait_write_lock,
    /// PUT/DELETE: back-pressure, the ledger being behind (frozen memtables
    /// or L0 files over their limits); recorded only when a writer waited.
    wait_write_stall,
    /// PUT/DELETE: paced while journal compaction is behind (the journal's
    /// garbage over `Config::journal_slowdown_garbage_pct`); recorded only
    /// when a group waited.
    wait_journal_slowdown,
    /// PUT/DELETE: the journal append under the write lock (encode, one
    /// positional write; a roll is timed separately and included here too).
    journal_append,
    /// Journal file rolls (fsync, `.jix` index, manifest), under the active
    /// file's lock: writers and GETs of the active file wait meanwhile.
    journal_roll,
    /// `fdatasync` of the active journal file (sync writes' group-commit
    /// leader and the background flusher).
    journal_fsync,
    /// Sync PUTs: the whole wait for their record to be durable (leading or
    /// joining a group commit).
    journal_sync_wait,
    /// GET: waiting for the journal's active-file lock (held by appends and
    /// rolls) to find a recent value.
    wait_journal_lock,
    /// GET: reading one value record from a journal file (page cache or disk).
    journal_value_read,
    /// GET/HEAD: reading one ledger SST data block for a point lookup
    /// (page cache or disk; merges and folds are not counted).
    sst_block_read,
    /// GET: the whole call inside the store (checks, ledger lookup, journal
    /// read, hash check). Its interval maximum beside the caller's slowest
    /// GET says whether that GET's time was spent in the store or outside
    /// it (waiting for a CPU, in the caller); beside the timers above,
    /// whether the store's part is covered by them.
    op_get,
    /// GET: the part of `op_get` outside the timers above (ledger and
    /// journal reads, the active-file lock): CPU work, waiting for a core,
    /// and locks no timer covers (caches, memtables). Its interval maximum
    /// beside `op_get`'s says whether the slowest GET waited on I/O or not.
    op_get_unwaited,
    /// PUT/DELETE: the whole call inside the store (preparing the record,
    /// the write group, and the fsync when synced), as `op_get` for writes.
    op_write,
}

impl Stats {
    /// Adds `n` to a counter.
    pub fn add(counter: &AtomicU64, n: u64) {
        counter.fetch_add(n, Ordering::Relaxed);
    }

    /// Adds one to a counter.
    pub fn incr(counter: &AtomicU64) {
        counter.fetch_add(1, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_thread_counts_its_own_recorded_waits_only() {
        let s = Stats::default();
        let before = waited_here_ns();
        s.journal_fsync.record(Duration::from_micros(10));
        s.sst_block_read.record(Duration::from_micros(5));
        assert_eq!(waited_here_ns().wrapping_sub(before), 15_000);
        let other = std::thread::scope(|t| {
            t.spawn(|| {
                let b = waited_here_ns();
                s.journal_fsync.record(Duration::from_millis(1));
                waited_here_ns().wrapping_sub(b)
            })
            .join()
            .unwrap()
        });
        assert_eq!(other, 1_000_000);
        assert_eq!(
            waited_here_ns().wrapping_sub(before),
            15_000,
            "not the other thread's"
        );
    }

    #[test]
    fn timers_count_total_slow_and_max() {
        let s = Stats::default();
        s.journal_fsync.record(Duration::from_micros(10));
        s.journal_fsync.record(Duration::from_millis(3));
        let snap: std::collections::HashMap<_, _> = s.snapshot().into_iter().collect();
        assert_eq!(snap["journal_fsync_count"], 2);
        assert_eq!(snap["journal_fsync_ns"], 3_010_000);
        assert_eq!(snap["journal_fsync_slow"], 1);
        assert_eq!(snap["journal_fsync_max_ns"], 3_000_000);
        assert_eq!(snap["sst_block_read_count"], 0);
        assert_eq!(
            s.journal_fsync.named("x"),
            [
                ("x_count".to_string(), 2),
                ("x_ns".to_string(), 3_010_000),
                ("x_slow".to_string(), 1),
                ("x_max_ns".to_string(), 3_000_000),
            ]
        );
        let window: std::collections::HashMap<_, _> = s.take_window_maxima().into_iter().collect();
        assert_eq!(window["journal_fsync_window_max_ns"], 3_000_000);
        s.journal_fsync.record(Duration::from_micros(20));
        let window: std::collections::HashMap<_, _> = s.take_window_maxima().into_iter().collect();
        assert_eq!(
            window["journal_fsync_window_max_ns"], 20_000,
            "reset by the previous take"
        );
        assert_eq!(
            s.snapshot()
                .iter()
                .find(|c| c.0 == "journal_fsync_max_ns")
                .map(|c| c.1),
            Some(3_000_000)
        );
        for t in WAIT_TIMERS {
            assert!(snap.contains_key(format!("{t}_max_ns").as_str()), "{t}");
        }
    }
}
