//! Journal compaction policy (leveled's "iclerk"): scoring, choosing a run,
//! scheduling. The mechanics (rewriting files, swapping the manifest,
//! deferred deletion) are in [`crate::journal::compact`].
//!
//! **Scoring.** For each closed journal file, up to
//! `Config::compaction_sample_records` records at evenly spaced positions of
//! its in-memory index are read (without values) and judged by the store's
//! [`Liveness`]; the file's score is the percentage of sampled *bytes* that
//! are live (a record kept whole counts its full size, a key delta or a
//! tombstone rewrite counts what it would be rewritten as, a dropped record
//! counts nothing). Scores are cached per file number (file numbers are never
//! reused, so a changed file is a new number) and recomputed after
//! `Config::compaction_score_cache_runs` runs.
//!
//! **Choosing a run.** Every run of 1..=`max_run_length` adjacent closed
//! files scores `target(len) - mean(file scores)` with
//! `target(len) = single + (maxrun - single) × (len - 1) / (max_run_length - 1)`
//! (`single` = `compaction_singlefile_pct`, `maxrun` =
//! `compaction_maxrun_pct`). The best run is compacted only if its score is
//! above 0. The active file is never part of a run.
//!
//! **Scheduling.** A background thread spreads `compaction_runs_per_day` runs
//! over the daily window (UTC hours), each wait being the window length
//! divided by the number of runs, times a random factor in [0.5, 1.5).
//! `Store::compact_journal` runs one compaction now, on the caller's thread.
//! A failed run is abandoned (partial output deleted), counted in
//! `compaction_failures` and logged; the store stays readable and writable.
//!
//! **Garbage trigger and pace.** When `compaction_check_interval` is set, the
//! thread also estimates the closed files' garbage and runs compactions back
//! to back while it is over `compaction_max_garbage_pct`
//! ([`drain_garbage`]). Those runs read at [`garbage_pace`]: the configured
//! `compaction_read_bytes_per_sec` up to 5 points over the limit, then
//! raised to twice the journal's recent append rate ([`AppendRate`]) so
//! reclaim catches up with the writes, and unpaced more than 15 points
//! over the limit. The write slowdown
//! ([`crate::slowdown`]) is the backstop behind it.
//!
//! **Slots.** The stores of one node share [`CompactionSlots`]
//! (`Config::compaction_slots`): a background run takes a slot first, the
//! store most over its garbage limit first ([`slots`]).
//!
//! Files: `policy` (the decisions, no threads or I/O), `compactor` (scoring
//! and running one compaction), `scheduler` (the background thread),
//! `slots` (the node's runs at once), `tests`.

pub use crate::journal::{Keep, Liveness};

mod compactor;
mod policy;
mod scheduler;
pub mod slots;
#[cfg(test)]
mod tests;

pub use compactor::Compactor;
pub use policy::{
    garbage_limit, garbage_pace, in_window, next_delay, score_staleness, AppendRate,
    CompactionPolicy, CompactionReport, FileScore, GarbageEstimate, Schedule, APPEND_RATE_MIN_SPAN,
    APPEND_RATE_WINDOW, GARBAGE_FOLLOW_OVER_PCT, GARBAGE_RESCORE_AFTER_CHECKS, GARBAGE_RESCORE_MIN,
    GARBAGE_RUNS_PER_CHECK_MAX, GARBAGE_UNPACED_OVER_PCT, PACE_APPEND_FACTOR, PUNCH_MIN_SHARE,
    RECLAIM_GAP_MAX, RESCORE_STALENESS,
};
pub use scheduler::{drain_garbage, Scheduler};
pub use slots::{CompactionSlots, COMPACTION_SLOTS_MAX};

/// Builds a [`Liveness`] for one compaction run (capturing, e.g., the
/// ledger's persisted SQN at the start of the run).
pub type LivenessFactory = Box<dyn Fn() -> Box<dyn Liveness + Send> + Send + Sync>;
