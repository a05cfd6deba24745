//! Counters shared by the store's parts, read by `Store::stats`.

use std::sync::atomic::{AtomicU64, Ordering};

macro_rules! counters {
    ($($(#[$doc:meta])* $name:ident),* $(,)?) => {
        /// Monotonic counters, updated with relaxed atomics.
        #[derive(Debug, Default)]
        pub struct Stats {
            $($(#[$doc])* pub $name: AtomicU64,)*
        }

        impl Stats {
            /// A named snapshot of every counter, in declaration order.
            pub fn snapshot(&self) -> Vec<(&'static str, u64)> {
                vec![$((stringify!($name), self.$name.load(Ordering::Relaxed)),)*]
            }
        }
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
    /// Memtables written as L0 files.
    ledger_flushes,
    /// Merge jobs completed.
    ledger_merges,
    /// Bytes written to SST files (flushes and merges).
    ledger_bytes_written,
    /// SST blocks or files found corrupt (at open, on reads and in merges).
    ledger_corrupt_blocks,
    /// Ledger flushes or merges that failed and will be retried (e.g. disk
    /// full, a damaged input file); the store stays readable meanwhile.
    ledger_job_errors,
    /// Times a writer waited for the ledger to catch up (back-pressure).
    write_stalls,
    /// Microseconds writers spent waiting in back-pressure.
    write_stall_us,
    /// Value bytes handed to the journal's compressor (before compression).
    compression_bytes_in,
    /// Value bytes stored for them (after compression; a value that does not
    /// shrink is stored as is and counted here at its full size).
    compression_bytes_out,
    /// Journal compaction runs that rewrote files.
    compaction_runs,
    /// Journal compaction runs that found nothing worth compacting.
    compaction_runs_idle,
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
    /// Hot backups taken.
    backups,
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
