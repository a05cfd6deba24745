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

use crate::config::Config;
use crate::error::{IoContext, Result};
use crate::journal::file::ClosedFile;
use crate::journal::Journal;
use crate::stats::Stats;
use parking_lot::{Condvar, Mutex};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::journal::{Keep, Liveness};

/// Builds a [`Liveness`] for one compaction run (capturing, e.g., the
/// ledger's persisted SQN at the start of the run).
pub type LivenessFactory = Box<dyn Fn() -> Box<dyn Liveness + Send> + Send + Sync>;

/// The thresholds of the compaction policy (from [`Config`]).
#[derive(Debug, Clone, PartialEq)]
pub struct CompactionPolicy {
    /// Records sampled per file.
    pub sample_records: usize,
    /// Longest run of adjacent files.
    pub max_run_length: usize,
    /// Live percentage under which a single file is worth compacting.
    pub singlefile_pct: f64,
    /// Live percentage under which a run of `max_run_length` files is worth compacting.
    pub maxrun_pct: f64,
    /// Runs between rescoring a file.
    pub score_cache_runs: u32,
}

impl CompactionPolicy {
    /// The policy of a configuration.
    pub fn from_config(c: &Config) -> Self {
        CompactionPolicy {
            sample_records: c.compaction_sample_records,
            max_run_length: c.compaction_max_run_length,
            singlefile_pct: c.compaction_singlefile_pct,
            maxrun_pct: c.compaction_maxrun_pct,
            score_cache_runs: c.compaction_score_cache_runs,
        }
    }

    /// The live percentage a run of `len` files must be under.
    pub fn target(&self, len: usize) -> f64 {
        if self.max_run_length <= 1 || len <= 1 {
            return self.singlefile_pct;
        }
        let step = (self.maxrun_pct - self.singlefile_pct) / (self.max_run_length - 1) as f64;
        self.singlefile_pct + step * (len - 1) as f64
    }

    /// The best run over per-file live percentages (oldest file first):
    /// `(start, len, score)`, only if its score is above 0.
    pub fn best_run(&self, scores: &[f64]) -> Option<(usize, usize, f64)> {
        let mut best: Option<(usize, usize, f64)> = None;
        for start in 0..scores.len() {
            for len in 1..=self.max_run_length.min(scores.len() - start) {
                let run = scores.get(start..start + len)?;
                let mean = run.iter().sum::<f64>() / len as f64;
                let score = self.target(len) - mean;
                if score > 0.0 && best.is_none_or(|b| score > b.2) {
                    best = Some((start, len, score));
                }
            }
        }
        best
    }
}

/// What one journal compaction run did.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompactionReport {
    /// False if no run scored above 0 (nothing was rewritten).
    pub compacted: bool,
    /// Score of the run compacted (target minus mean live percentage).
    pub run_score: f64,
    /// Numbers of the journal files replaced.
    pub files_in: Vec<u64>,
    /// Numbers of the journal files written.
    pub files_out: Vec<u64>,
    /// Bytes of the files replaced.
    pub bytes_in: u64,
    /// Bytes of the files written.
    pub bytes_out: u64,
    /// Records copied.
    pub records_kept: u64,
    /// Records dropped.
    pub records_dropped: u64,
    /// Records reduced to key deltas (index changes only).
    pub key_deltas: u64,
    /// Expired puts rewritten as tombstones.
    pub tombstoned: u64,
    /// Wall time of the run (scoring included).
    pub duration: Duration,
}

/// Runs compaction for one store: scores files, picks the run, calls the
/// journal's mechanics, keeps the score cache. Runs are serialised.
pub struct Compactor {
    journal: Arc<Journal>,
    stats: Arc<Stats>,
    policy: CompactionPolicy,
    liveness: LivenessFactory,
    /// file number -> (live percentage, runs since scored).
    cache: Mutex<HashMap<u64, (f64, u32)>>,
}

impl std::fmt::Debug for Compactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Compactor")
            .field("policy", &self.policy)
            .finish_non_exhaustive()
    }
}

impl Compactor {
    /// A compactor over `journal` deciding liveness with `liveness()`.
    pub fn new(
        journal: Arc<Journal>,
        stats: Arc<Stats>,
        policy: CompactionPolicy,
        liveness: LivenessFactory,
    ) -> Self {
        Compactor {
            journal,
            stats,
            policy,
            liveness,
            cache: Mutex::new(HashMap::new()),
        }
    }

    /// The live percentage of `file`'s sampled bytes (100 when nothing could
    /// be sampled: nothing to gain).
    pub fn score(&self, file: &ClosedFile, live: &dyn Liveness) -> Result<f64> {
        let sample = self.journal.sample(file, self.policy.sample_records)?;
        let mut total = 0u64;
        let mut kept = 0u64;
        for (rec, len) in &sample {
            total += len;
            // Frame, fixed body part and key of a rewritten record.
            let small = (crate::journal::record::RECORD_HEADER_LEN
                + crate::journal::record::BODY_FIXED_LEN
                + rec.key.len()) as u64;
            kept += match live.keep(rec)? {
                Keep::Record => *len,
                Keep::KeyDelta(ix) => (small + ix.len() as u64).min(*len),
                Keep::Tombstone => small.min(*len),
                Keep::Drop => 0,
            };
        }
        if total == 0 {
            return Ok(100.0);
        }
        Ok(100.0 * kept as f64 / total as f64)
    }

    /// One compaction run: score, choose, compact. An error abandons the run
    /// (see [`crate::journal::compact`]); it is counted and logged.
    pub fn run(&self) -> Result<CompactionReport> {
        let t0 = Instant::now();
        let res = self.run_inner(t0);
        match &res {
            Ok(r) if r.compacted => {
                Stats::incr(&self.stats.compaction_runs);
                Stats::add(&self.stats.compaction_files_in, r.files_in.len() as u64);
                Stats::add(&self.stats.compaction_files_out, r.files_out.len() as u64);
                Stats::add(
                    &self.stats.compaction_bytes_reclaimed,
                    r.bytes_in.saturating_sub(r.bytes_out),
                );
                Stats::add(&self.stats.compaction_records_dropped, r.records_dropped);
                Stats::add(&self.stats.compaction_records_kept, r.records_kept);
                Stats::add(&self.stats.compaction_key_deltas, r.key_deltas);
                tracing::info!(target: "basalt::compaction", "C0001 compacted journal files {:?} into {:?}: {} -> {} bytes, {} kept, {} dropped, {} key deltas in {:?}", r.files_in, r.files_out, r.bytes_in, r.bytes_out, r.records_kept, r.records_dropped, r.key_deltas, r.duration);
            }
            Ok(_) => Stats::incr(&self.stats.compaction_runs_idle),
            Err(e) => {
                Stats::incr(&self.stats.compaction_failures);
                tracing::error!(target: "basalt::compaction", "C0002 journal compaction run abandoned: {e}");
            }
        }
        res
    }

    fn run_inner(&self, t0: Instant) -> Result<CompactionReport> {
        let live = (self.liveness)();
        let files = self.journal.closed_files();
        let mut scores = Vec::with_capacity(files.len());
        {
            let mut cache = self.cache.lock();
            cache.retain(|no, _| files.iter().any(|f| f.file_no == *no));
            for f in &files {
                let cached = cache
                    .get_mut(&f.file_no)
                    .filter(|(_, age)| *age < self.policy.score_cache_runs);
                let s = match cached {
                    Some((s, age)) => {
                        *age += 1;
                        *s
                    }
                    None => {
                        let s = self.score(f, &*live)?;
                        cache.insert(f.file_no, (s, 1));
                        s
                    }
                };
                scores.push(s);
            }
        }
        let Some((start, len, score)) = self.policy.best_run(&scores) else {
            return Ok(CompactionReport {
                duration: t0.elapsed(),
                ..CompactionReport::default()
            });
        };
        let run = files.get(start..start + len).unwrap_or(&[]);
        let r = self.journal.compact_run(run, &*live)?;
        Ok(CompactionReport {
            compacted: true,
            run_score: score,
            files_in: r.files_in,
            files_out: r.files_out,
            bytes_in: r.bytes_in,
            bytes_out: r.bytes_out,
            records_kept: r.records_kept,
            records_dropped: r.records_dropped,
            key_deltas: r.key_deltas,
            tombstoned: r.tombstoned,
            duration: t0.elapsed(),
        })
    }
}

/// The background thread running scheduled compactions.
#[derive(Debug)]
pub struct Scheduler {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<std::thread::JoinHandle<()>>,
}

/// Length of the window in hours (inclusive bounds, wrapping midnight).
fn window_hours((lo, hi): (u8, u8)) -> u64 {
    if lo <= hi {
        u64::from(hi - lo) + 1
    } else {
        24 - u64::from(lo) + u64::from(hi) + 1
    }
}

/// True if `hour` (0..24) lies in the window.
pub fn in_window(hour: u8, (lo, hi): (u8, u8)) -> bool {
    if lo <= hi {
        (lo..=hi).contains(&hour)
    } else {
        hour >= lo || hour <= hi
    }
}

/// splitmix64: jitter only, no need for a crate.
fn next_rand(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// The wait before the next scheduled run: window / runs, times [0.5, 1.5).
pub fn next_delay(rng: &mut u64, runs_per_day: u32, window: (u8, u8)) -> Duration {
    let interval_ms = window_hours(window) * 3_600_000 / u64::from(runs_per_day.max(1));
    let factor_permille = 500 + next_rand(rng) % 1000;
    Duration::from_millis(interval_ms * factor_permille / 1000)
}

impl Scheduler {
    /// Starts the scheduler thread (none if `runs_per_day` is 0).
    pub fn start(
        compactor: Arc<Compactor>,
        runs_per_day: u32,
        window: (u8, u8),
        dir: &std::path::Path,
    ) -> Result<Option<Scheduler>> {
        if runs_per_day == 0 {
            return Ok(None);
        }
        let stop = Arc::new((Mutex::new(false), Condvar::new()));
        let stop2 = Arc::clone(&stop);
        let mut rng = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
            ^ u64::from(std::process::id());
        let handle = std::thread::Builder::new()
            .name("basalt-journal-compaction".into())
            .spawn(move || loop {
                let delay = next_delay(&mut rng, runs_per_day, window);
                {
                    let (m, cv) = &*stop2;
                    let mut stopped = m.lock();
                    if !*stopped {
                        cv.wait_for(&mut stopped, delay);
                    }
                    if *stopped {
                        return;
                    }
                }
                let hour = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0, |d| (d.as_secs() / 3600 % 24) as u8);
                if in_window(hour, window) {
                    // Errors are counted and logged by `run`.
                    let _ = compactor.run();
                }
            })
            .ctx("spawn journal compaction thread", dir)?;
        Ok(Some(Scheduler {
            stop,
            handle: Some(handle),
        }))
    }

    /// Stops the thread, waiting for a run in progress to finish.
    pub fn stop(&mut self) {
        {
            let (m, cv) = &*self.stop;
            *m.lock() = true;
            cv.notify_all();
        }
        if let Some(h) = self.handle.take() {
            if h.join().is_err() {
                tracing::error!(target: "basalt::compaction", "C0003 journal compaction thread panicked");
            }
        }
    }
}

impl Drop for Scheduler {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn policy() -> CompactionPolicy {
        CompactionPolicy {
            sample_records: 200,
            max_run_length: 4,
            singlefile_pct: 25.0,
            maxrun_pct: 75.0,
            score_cache_runs: 12,
        }
    }

    #[test]
    fn target_interpolates_between_thresholds() {
        let p = policy();
        assert_eq!(p.target(1), 25.0);
        assert!((p.target(2) - 41.666).abs() < 0.01);
        assert_eq!(p.target(4), 75.0);
    }

    #[test]
    fn best_run_needs_a_positive_score() {
        let p = policy();
        assert_eq!(p.best_run(&[]), None);
        assert_eq!(p.best_run(&[100.0, 90.0, 80.0]), None);
        // One mostly-dead file.
        assert_eq!(
            p.best_run(&[100.0, 10.0, 100.0]).map(|r| (r.0, r.1)),
            Some((1, 1))
        );
        // Four half-live files beat any shorter run: 75 - 50 = 25.
        let r = p.best_run(&[50.0, 50.0, 50.0, 50.0]).unwrap();
        assert_eq!((r.0, r.1), (0, 4));
        assert!((r.2 - 25.0).abs() < 1e-9);
    }

    #[test]
    fn window_and_delay() {
        assert!(in_window(0, (0, 23)) && in_window(23, (0, 23)));
        assert!(in_window(23, (22, 2)) && in_window(1, (22, 2)) && !in_window(12, (22, 2)));
        assert!(!in_window(5, (1, 4)));
        let mut rng = 42;
        for _ in 0..100 {
            let d = next_delay(&mut rng, 24, (0, 23));
            assert!(
                d >= Duration::from_secs(1800) && d < Duration::from_secs(5400),
                "{d:?}"
            );
        }
        assert_eq!(window_hours((22, 2)), 5);
    }
}
