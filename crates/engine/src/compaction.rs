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

use crate::config::Config;
use crate::diskspace::{DiskGuard, DiskState};
use crate::error::{IoContext, Result};
use crate::journal::file::ClosedFile;
use crate::journal::Journal;
use crate::slowdown::Slowdown;
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
    /// Reclaim in place ([`crate::journal::punch`]) instead of copying.
    pub punch: crate::Punch,
    /// With `punch`: files holding under this percentage of `file_bytes`
    /// on disk are merged by copying.
    pub merge_below_pct: f64,
    /// The journal's file size.
    pub file_bytes: u64,
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
            punch: c.compaction_punch,
            merge_below_pct: c.compaction_merge_below_pct,
            file_bytes: c.journal_file_bytes,
        }
    }

    /// With `punch`, the first longest run of at least two adjacent files
    /// each holding under `merge_below_pct` of `file_bytes` on disk, their
    /// sum at most `file_bytes`: `(start, len)`, to merge by copying.
    pub fn sparse_run(&self, disk_bytes: &[u64]) -> Option<(usize, usize)> {
        let limit = (self.file_bytes as f64 * self.merge_below_pct / 100.0) as u64;
        let mut best: Option<(usize, usize)> = None;
        let mut start = 0;
        while start < disk_bytes.len() {
            let mut len = 0;
            let mut sum = 0u64;
            while let Some(&b) = disk_bytes.get(start + len) {
                if b >= limit || sum + b > self.file_bytes {
                    break;
                }
                sum += b;
                len += 1;
            }
            if len >= 2 && best.is_none_or(|b| len > b.1) {
                best = Some((start, len));
            }
            start += len.max(1);
        }
        best
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
    /// The files were reclaimed in place ([`crate::journal::punch`]):
    /// `files_out` are `files_in` with new indexes, and the bytes are
    /// their bytes on disk before and after.
    pub punched: bool,
}

/// The garbage trigger's view of the journal (see [`Compactor::garbage`]).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct GarbageEstimate {
    /// Closed journal files.
    pub files: usize,
    /// Their bytes.
    pub closed_bytes: u64,
    /// Of which estimated garbage (from the sampled live percentages).
    pub garbage_bytes: u64,
}

impl GarbageEstimate {
    /// Garbage as a percentage of the closed files' bytes (0 when empty).
    pub fn pct(&self) -> f64 {
        if self.closed_bytes == 0 {
            return 0.0;
        }
        100.0 * self.garbage_bytes as f64 / self.closed_bytes as f64
    }

    /// Counts one more closed file of `bytes`, `live_pct` % of it live.
    pub fn add_file(&mut self, bytes: u64, live_pct: f64) {
        debug_assert!((0.0..=100.0).contains(&live_pct), "score {live_pct}");
        self.files += 1;
        self.closed_bytes += bytes;
        self.garbage_bytes += (bytes as f64 * (100.0 - live_pct) / 100.0) as u64;
    }

    /// The estimate made of these files' scores.
    pub fn from_scores(scores: &[FileScore]) -> Self {
        let mut est = GarbageEstimate::default();
        for f in scores {
            est.add_file(f.bytes, f.live_pct);
        }
        est
    }

    /// The estimate after a run that replaced `files_in` files by
    /// `files_out` and reclaimed `reclaimed` bytes: what a run removes is
    /// garbage, what it writes stays (files closed since are not in it).
    pub fn after_run(self, files_in: usize, files_out: usize, reclaimed: u64) -> Self {
        let closed_bytes = self.closed_bytes.saturating_sub(reclaimed);
        GarbageEstimate {
            files: (self.files + files_out).saturating_sub(files_in),
            closed_bytes,
            garbage_bytes: self
                .garbage_bytes
                .saturating_sub(reclaimed)
                .min(closed_bytes),
        }
    }

    /// True when the trigger should run compactions: over `max_pct` and
    /// at least `min_files` closed files (fewer cannot make a full run).
    pub fn over(&self, max_pct: f64, min_files: usize) -> bool {
        self.files >= min_files && self.pct() > max_pct
    }
}

/// One closed journal file's score (see [`Compactor::rescore`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FileScore {
    /// The file's number.
    pub file_no: u64,
    /// Its size.
    pub bytes: u64,
    /// The percentage of its sampled bytes that is live.
    pub live_pct: f64,
}

/// A file's cached live percentage.
#[derive(Debug, Clone, Copy)]
struct CachedScore {
    score: f64,
    /// Compaction runs that used it.
    runs: u32,
    scored: Instant,
    /// The journal's last SQN when it was taken.
    at_sqn: u64,
}

/// Why files are being scored (see [`Compactor::scores`]).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Scoring {
    Run,
    Estimate {
        stale_after: Duration,
        rescore_max: usize,
    },
}

/// Runs compaction for one store: scores files, picks the run, calls the
/// journal's mechanics, keeps the score cache. Runs are serialised.
pub struct Compactor {
    journal: Arc<Journal>,
    stats: Arc<Stats>,
    policy: CompactionPolicy,
    liveness: LivenessFactory,
    /// file number -> its score.
    cache: Mutex<HashMap<u64, CachedScore>>,
    /// Told every garbage estimate and every run's reclaim rate.
    slowdown: Arc<Slowdown>,
    /// How full the disk is: a low disk makes the garbage trigger eager.
    disk: Arc<DiskGuard>,
    /// When the last run that rewrote files ended.
    last_run_end: Mutex<Option<Instant>>,
    /// The journal's recent append rate, for the garbage trigger's pace.
    append: Mutex<AppendRate>,
    /// The latest garbage estimate (see [`Compactor::last_estimate`]).
    last_estimate: Mutex<Option<GarbageEstimate>>,
    /// Held through a run, scoring included: a run's files are listed
    /// before the journal's own compaction lock is taken, so a run that
    /// swapped files meanwhile would leave the next one's list stale.
    run_lock: Mutex<()>,
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
            slowdown: Arc::new(Slowdown::new(100.0)),
            disk: Arc::new(DiskGuard::off()),
            last_run_end: Mutex::new(None),
            append: Mutex::new(AppendRate::default()),
            last_estimate: Mutex::new(None),
            run_lock: Mutex::new(()),
        }
    }

    /// The compactor, feeding `slowdown` (default: one that is off).
    pub fn with_slowdown(mut self, slowdown: Arc<Slowdown>) -> Self {
        self.slowdown = slowdown;
        self
    }

    /// The compactor, watching the disk through `disk` (default: a guard
    /// that is off).
    pub fn with_disk_guard(mut self, disk: Arc<DiskGuard>) -> Self {
        self.disk = disk;
        self
    }

    /// The disk guard this compactor watches (the store's).
    pub fn disk(&self) -> &DiskGuard {
        &self.disk
    }

    /// The time a run that took `took` stands for when reclaim rates are
    /// measured: since the previous run ended, so the estimates and scoring
    /// between runs count (back to back, runs reclaimed ~120 MB/s of their
    /// own time but ~50 MB/s of the clock's), with at most
    /// [`RECLAIM_GAP_MAX`] of idle time counted.
    fn sustained_span(&self, took: Duration) -> Duration {
        let now = Instant::now();
        let prev = self.last_run_end.lock().replace(now);
        prev.map_or(took, |end| {
            now.saturating_duration_since(end)
                .clamp(took, took + RECLAIM_GAP_MAX)
        })
    }

    /// The journal's recent append rate in bytes a second (see
    /// [`AppendRate`]), sampled now.
    pub fn append_rate(&self) -> u64 {
        let written = self
            .stats
            .journal_bytes_written
            .load(std::sync::atomic::Ordering::Relaxed);
        self.append.lock().observe(Instant::now(), written)
    }

    /// The write slowdown this compactor feeds.
    pub fn slowdown(&self) -> &Slowdown {
        &self.slowdown
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
        let _serial = self.run_lock.lock();
        let t0 = Instant::now();
        let res = self.run_inner(t0);
        match &res {
            Ok(r) if r.compacted => {
                let span = self.sustained_span(r.duration);
                self.slowdown
                    .observe_run(r.bytes_in.saturating_sub(r.bytes_out), span);
                Stats::incr(&self.stats.compaction_runs);
                Stats::add(&self.stats.compaction_run_ms, r.duration.as_millis() as u64);
                if !r.punched {
                    Stats::add(&self.stats.compaction_files_in, r.files_in.len() as u64);
                    Stats::add(&self.stats.compaction_files_out, r.files_out.len() as u64);
                }
                Stats::add(
                    &self.stats.compaction_bytes_reclaimed,
                    r.bytes_in.saturating_sub(r.bytes_out),
                );
                Stats::add(&self.stats.compaction_records_dropped, r.records_dropped);
                Stats::add(&self.stats.compaction_records_kept, r.records_kept);
                Stats::add(&self.stats.compaction_key_deltas, r.key_deltas);
                let how = if r.punched {
                    "reclaimed in place"
                } else {
                    "compacted"
                };
                tracing::info!(target: "basalt::compaction", "C0001 {how} journal files {:?} into {:?}: {} -> {} bytes, {} kept, {} dropped, {} key deltas in {:?}", r.files_in, r.files_out, r.bytes_in, r.bytes_out, r.records_kept, r.records_dropped, r.key_deltas, r.duration);
            }
            Ok(_) => Stats::incr(&self.stats.compaction_runs_idle),
            Err(e) => {
                Stats::incr(&self.stats.compaction_failures);
                tracing::error!(target: "basalt::compaction", "C0002 journal compaction run abandoned: {e}");
            }
        }
        res
    }

    /// The live percentage of each closed file (oldest first), from the
    /// cache where fresh enough. A run ages every cached score by one run
    /// and rescores those `score_cache_runs` old; an estimate ages nothing
    /// and rescores up to `rescore_max` scores, the stalest by
    /// [`score_staleness`] first, of those at least [`RESCORE_STALENESS`]
    /// stale or older than `stale_after` (a score only overstates what is
    /// live: later writes replace its file's keys). Files never scored are
    /// always scored.
    fn scores(
        &self,
        files: &[Arc<ClosedFile>],
        live: &dyn Liveness,
        mode: Scoring,
    ) -> Result<Vec<f64>> {
        let mut scores = Vec::with_capacity(files.len());
        let now_sqn = self.journal.last_sqn();
        let mut cache = self.cache.lock();
        cache.retain(|no, _| files.iter().any(|f| f.file_no == *no));
        let renew: std::collections::HashSet<u64> = match mode {
            Scoring::Run => std::collections::HashSet::new(),
            Scoring::Estimate {
                stale_after,
                rescore_max,
            } => {
                let mut stale: Vec<(f64, Instant, u64)> = files
                    .iter()
                    .filter_map(|f| {
                        let c = cache.get(&f.file_no)?;
                        let hi = f.index.last().map_or(0, |e| e.0);
                        let st = score_staleness(now_sqn, c.at_sqn, hi, f.index.len() as u64);
                        let old = stale_after.is_zero() || c.scored.elapsed() > stale_after;
                        (old || st >= RESCORE_STALENESS).then_some((st, c.scored, f.file_no))
                    })
                    .collect();
                // The stalest first; among equals, the longest unrenewed.
                stale.sort_unstable_by(|a, b| b.0.total_cmp(&a.0).then(a.1.cmp(&b.1)));
                stale
                    .into_iter()
                    .take(rescore_max)
                    .map(|(_, _, no)| no)
                    .collect()
            }
        };
        for f in files {
            let fresh = cache.get(&f.file_no).copied().filter(|c| match mode {
                Scoring::Run => c.runs < self.policy.score_cache_runs,
                Scoring::Estimate { .. } => !renew.contains(&f.file_no),
            });
            let s = match fresh {
                Some(c) => c.score,
                None => {
                    let score = self.score(f, live)?;
                    Stats::incr(&self.stats.compaction_files_scored);
                    let c = CachedScore {
                        score,
                        runs: 0,
                        scored: Instant::now(),
                        at_sqn: now_sqn,
                    };
                    cache.insert(f.file_no, c);
                    score
                }
            };
            if mode == Scoring::Run {
                if let Some(c) = cache.get_mut(&f.file_no) {
                    c.runs += 1;
                }
            }
            scores.push(s);
        }
        Ok(scores)
    }

    /// How much of the closed journal files is garbage, estimated from
    /// their scores: files not scored yet are scored now, and stale scores
    /// are renewed, at most `max(rescore_min, files / renewals)` of them,
    /// the stalest by [`score_staleness`] first, among those at least
    /// [`RESCORE_STALENESS`] stale or older than `stale_after` (the young
    /// files, whose scores fall fastest, come first; with an estimate every
    /// `stale_after / renewals` and no score stale by appends, none is much
    /// older than `2 × stale_after`; a cached score only overstates what is
    /// live: later writes replace its file's keys).
    pub fn garbage(
        &self,
        stale_after: Duration,
        renewals: usize,
        rescore_min: usize,
    ) -> Result<GarbageEstimate> {
        let t0 = Instant::now();
        let live = (self.liveness)();
        let files = self.journal.closed_files();
        let mode = Scoring::Estimate {
            stale_after,
            rescore_max: rescore_min.max(files.len().div_ceil(renewals.max(1))),
        };
        let scores = self.scores(&files, &*live, mode)?;
        let mut est = GarbageEstimate::default();
        for (f, s) in files.iter().zip(&scores) {
            est.add_file(f.disk_bytes(), *s);
        }
        debug_assert_eq!(est.files, files.len());
        Stats::incr(&self.stats.compaction_estimates);
        Stats::add(
            &self.stats.compaction_estimate_ms,
            t0.elapsed().as_millis() as u64,
        );
        self.note_estimate(est);
        Ok(est)
    }

    /// Makes `est` the latest estimate (the write slowdown's too).
    fn note_estimate(&self, est: GarbageEstimate) {
        self.slowdown.observe_garbage(est.pct());
        *self.last_estimate.lock() = Some(est);
    }

    /// The garbage trigger's latest estimate (`None` before the first):
    /// what the trigger and the write slowdown act on. It can lag what is
    /// really garbage (see [`Compactor::garbage`]); [`Compactor::rescore`]
    /// measures now.
    pub fn last_estimate(&self) -> Option<GarbageEstimate> {
        *self.last_estimate.lock()
    }

    /// Scores every closed journal file now, renewing every cached score
    /// (the next estimate starts from them): one [`FileScore`] per file,
    /// oldest first. Reads `compaction_sample_records` records of each
    /// file, so it costs about `files × sample_records` small reads.
    pub fn rescore(&self) -> Result<Vec<FileScore>> {
        let live = (self.liveness)();
        let files = self.journal.closed_files();
        let mode = Scoring::Estimate {
            stale_after: Duration::ZERO,
            rescore_max: files.len(),
        };
        let scores = self.scores(&files, &*live, mode)?;
        Ok(files
            .iter()
            .zip(scores)
            .map(|(f, live_pct)| FileScore {
                file_no: f.file_no,
                bytes: f.disk_bytes(),
                live_pct,
            })
            .collect())
    }

    /// True if runs reclaim in place ([`crate::Punch`]): the policy asks
    /// for it, the file system punches holes, and, in `Auto`, punching has
    /// not proved slow there.
    fn punch_allowed(&self) -> bool {
        // `Off` is tested first although `reclaims_in_place` handles it too:
        // so that `Off` never probes the file system with a scratch punch.
        self.policy.punch != crate::Punch::Off
            && reclaims_in_place(
                self.policy.punch,
                self.journal.punch_supported(),
                self.journal.punch_slow(),
            )
    }

    fn run_inner(&self, t0: Instant) -> Result<CompactionReport> {
        let live = (self.liveness)();
        let files = self.journal.closed_files();
        let punch = self.punch_allowed();
        let disk: Vec<u64> = files.iter().map(|f| f.disk_bytes()).collect();
        let merge = punch.then(|| self.policy.sparse_run(&disk)).flatten();
        let scores = self.scores(&files, &*live, Scoring::Run)?;
        let (start, len, score, in_place) = match (merge, self.policy.best_run(&scores)) {
            (Some((start, len)), _) => (start, len, 0.0, false),
            (None, Some((start, len, score))) => (start, len, score, punch),
            (None, None) => {
                return Ok(CompactionReport {
                    duration: t0.elapsed(),
                    ..CompactionReport::default()
                })
            }
        };
        let run = files.get(start..start + len).unwrap_or(&[]);
        let r = match in_place {
            false => self.journal.compact_run(run, &*live)?,
            true => {
                let mut r = self.journal.punch_run(run, &*live)?;
                if r.files_in.is_empty() && r.punch_skipped > 0 {
                    // Files it cannot punch (a backup's links, damage):
                    // copied as without `punch`.
                    r = self.journal.compact_run(run, &*live)?;
                    return Ok(Self::report(r, score, false, t0));
                }
                // Same numbers, new indexes: their scores are stale (and
                // a file the pass left alone was chosen on a stale one).
                let mut cache = self.cache.lock();
                for f in run {
                    cache.remove(&f.file_no);
                }
                drop(cache);
                r
            }
        };
        // The old indexes' holes go to the remover once nothing else
        // holds them.
        drop(files);
        self.journal.reap_retired();
        Ok(Self::report(r, score, in_place, t0))
    }

    /// The report of a run the journal did.
    fn report(
        r: crate::journal::CompactedRun,
        score: f64,
        punched: bool,
        t0: Instant,
    ) -> CompactionReport {
        CompactionReport {
            compacted: !r.files_in.is_empty(),
            punched,
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
        }
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

/// The current hour of the day, UTC.
fn utc_hour() -> u8 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| (d.as_secs() / 3600 % 24) as u8)
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

/// Idle time between two compaction runs counted in the reclaim rate the
/// write slowdown paces writes to (see [`Compactor::run`]).
pub const RECLAIM_GAP_MAX: Duration = Duration::from_secs(60);

/// Most garbage-triggered runs back to back before the thread looks at
/// its schedule and its stop flag's condition variable again.
pub const GARBAGE_RUNS_PER_CHECK_MAX: usize = 64;

/// A garbage estimate renews scores older than this many check intervals
/// (one minute at the default 10 s)...
pub const GARBAGE_RESCORE_AFTER_CHECKS: u32 = 6;
/// ...the stalest of them, at least this many per estimate and at least a
/// sixth of the closed files, so every score is renewed about once in
/// 6–12 checks whatever the number of files (an estimate then samples
/// `(max(16, files / 6) + new files) × compaction_sample_records` records).
pub const GARBAGE_RESCORE_MIN: usize = 16;

/// A cached score is renewed by an estimate once [`score_staleness`]
/// reaches this (or it is older than the estimate's `stale_after`): a
/// file's score is then renewed each time the journal grows by half the
/// file's age when it was scored, often while it is young and losing live
/// records fast, rarely once it is old and cold. Renewing the oldest
/// scores by the clock alone left the youngest files scored as they were
/// when closed (70–97 % live) for a minute or two while they fell to
/// 30–40 %; with 16 KB values appended at ~80 MB/s the estimate stayed
/// under the slowdown's 65 % while the journal reached 71 % garbage and
/// filled the disk (docs/benchmarks/2026-11-27-1412-bitcask-compare-journal-outgrew-disk.md).
pub const RESCORE_STALENESS: f64 = 0.5;

/// How stale a file's cached score may be: the SQNs appended since it was
/// taken (`now_sqn - scored_at_sqn`) over the file's age then, in SQNs
/// from its newest record (`file_hi_sqn`), plus its `file_records` (so a
/// file scored as it closed has the age of its own records). A file's
/// records die fastest while it is young (hot keys are overwritten soon,
/// cold ones rarely), so this is a scale-free measure of how much its score
/// may have fallen behind. Compaction output holds old SQNs, so it counts
/// as old.
pub fn score_staleness(
    now_sqn: u64,
    scored_at_sqn: u64,
    file_hi_sqn: u64,
    file_records: u64,
) -> f64 {
    let since = now_sqn.saturating_sub(scored_at_sqn);
    let age = scored_at_sqn.saturating_sub(file_hi_sqn) + file_records.max(1);
    since as f64 / age as f64
}

/// Garbage-triggered runs are unpaced while the estimate is more than this
/// many points over `compaction_max_garbage_pct` (a backlog: the pace
/// would not keep up with the writes), paced again below it.
pub const GARBAGE_UNPACED_OVER_PCT: f64 = 15.0;

/// Garbage-triggered runs read at least this many times the journal's
/// recent append rate while the estimate is more than
/// [`GARBAGE_FOLLOW_OVER_PCT`] points over the limit. A run reclaims only
/// the garbage share of what it reads, about half at the limit, and
/// nothing between runs; read at the configured pace only, a journal
/// appended faster than that pace grows until the write slowdown holds the
/// writes back (the NHS mix appended ~150 MB/s against ~48 MB/s reclaimed
/// at 64 MiB/s, and its throughput dipped to 0.20 of the median each time;
/// docs/benchmarks/2026-11-27-1140-compaction-pace-append-rate.md).
pub const PACE_APPEND_FACTOR: f64 = 2.0;

/// Up to this many points over the limit the configured pace is kept: a
/// compaction that keeps up at it holds the estimate near the limit, and
/// reading faster there only rewrites more live data per byte reclaimed
/// (the 8 KB scenario's WA rose from 1.09 to 1.11 with twice the append
/// rate from the limit on, and from 1.15 to 1.17–1.18 with the append rate;
/// docs/benchmarks/2026-11-27-1219-append-rate-pace.md and
/// docs/benchmarks/2026-11-27-1612-8kb-after-estimate-fix.md).
pub const GARBAGE_FOLLOW_OVER_PCT: f64 = 5.0;

/// The append rate is a moving average over about this long (it follows
/// a rise at once, a fall over this time)...
pub const APPEND_RATE_WINDOW: Duration = Duration::from_secs(30);
/// ...of samples at least this far apart (closer ones keep the rate).
pub const APPEND_RATE_MIN_SPAN: Duration = Duration::from_secs(1);

/// The journal's recent append rate, from samples of its bytes written:
/// each sample's rate since the previous one enters an exponential moving
/// average over [`APPEND_RATE_WINDOW`], and a sample faster than the
/// average replaces it (the pace must follow a burst of writes at once).
#[derive(Debug, Default, Clone)]
pub struct AppendRate {
    last: Option<(Instant, u64)>,
    bytes_per_sec: f64,
}

impl AppendRate {
    /// Takes a sample, `written` bytes appended in all at `now`; returns
    /// the rate in bytes a second (0 until two samples are a second apart).
    pub fn observe(&mut self, now: Instant, written: u64) -> u64 {
        match self.last {
            None => self.last = Some((now, written)),
            Some((at, before)) => {
                let span = now.saturating_duration_since(at);
                if span >= APPEND_RATE_MIN_SPAN {
                    let rate = written.saturating_sub(before) as f64 / span.as_secs_f64();
                    let weight = (span.as_secs_f64() / APPEND_RATE_WINDOW.as_secs_f64()).min(1.0);
                    let avg = self.bytes_per_sec + (rate - self.bytes_per_sec) * weight;
                    self.bytes_per_sec = avg.max(rate);
                    self.last = Some((now, written));
                }
            }
        }
        debug_assert!(self.bytes_per_sec >= 0.0);
        self.bytes_per_sec as u64
    }
}

/// The read pace of a garbage-triggered run, its estimate `over_pct`
/// points over the limit: the `configured` pace up to
/// [`GARBAGE_FOLLOW_OVER_PCT`], then that or [`PACE_APPEND_FACTOR`] times
/// the append rate, whichever is faster, and unpaced (0) beyond
/// [`GARBAGE_UNPACED_OVER_PCT`] (a backlog) or if `configured` is 0.
pub fn garbage_pace(configured: u64, append_bytes_per_sec: u64, over_pct: f64) -> u64 {
    if configured == 0 || over_pct > GARBAGE_UNPACED_OVER_PCT {
        return 0;
    }
    if over_pct <= GARBAGE_FOLLOW_OVER_PCT {
        return configured;
    }
    let following = (append_bytes_per_sec as f64 * PACE_APPEND_FACTOR) as u64;
    configured.max(following)
}

/// The garbage percentage the trigger compacts above: the configured
/// limit, lowered linearly as the disk fills through the soft zone above
/// its low mark (`fullness` 0..=1, `crate::diskspace::soft_zone_depth`) to
/// half of it at the low mark and below. A limit of 100 or more (off)
/// stays off.
pub fn garbage_limit(max_garbage_pct: f64, fullness: f64) -> f64 {
    debug_assert!((0.0..=1.0).contains(&fullness), "fullness {fullness}");
    if max_garbage_pct >= 100.0 {
        return max_garbage_pct;
    }
    max_garbage_pct * (1.0 - 0.5 * fullness.clamp(0.0, 1.0))
}

/// When the compaction thread runs compactions (from [`Config`]).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Schedule {
    /// Scheduled runs per day (0: none).
    pub runs_per_day: u32,
    /// UTC hours of scheduled runs (inclusive, may wrap midnight).
    pub window: (u8, u8),
    /// Garbage percentage of the closed files above which runs go back to back.
    pub max_garbage_pct: f64,
    /// How often the garbage trigger checks (zero: never).
    pub check_interval: Duration,
    /// Closed files needed before the trigger acts (a full run's length).
    pub min_files: usize,
    /// Nice steps below the process for the compaction thread.
    pub nice: i32,
}

impl Schedule {
    /// The schedule of a configuration.
    pub fn from_config(c: &Config) -> Self {
        Schedule {
            runs_per_day: c.compaction_runs_per_day,
            window: c.compaction_window_hours,
            max_garbage_pct: c.compaction_max_garbage_pct,
            check_interval: c.compaction_check_interval,
            min_files: c.compaction_max_run_length,
            nice: c.background_nice,
        }
    }

    /// True if the garbage trigger is on.
    pub fn trigger_on(&self) -> bool {
        !self.check_interval.is_zero() && self.max_garbage_pct < 100.0
    }
}

/// Runs compactions back to back while the garbage estimate is over the
/// schedule's limit (at most [`GARBAGE_RUNS_PER_CHECK_MAX`]), stopping at
/// once when `stopped()` says so, when a run finds nothing worth doing, or
/// on an error (counted and logged by `run`). Returns the runs done.
///
/// A full estimate (sampled reads of every stale file's records) is made
/// at most once per check interval; between two, each run's own figures
/// update it ([`GarbageEstimate::after_run`]). With the disk busy an
/// estimate took about half as long as a 1 GB run (4.4 s against 8.8 s).
pub fn drain_garbage(
    compactor: &Compactor,
    schedule: &Schedule,
    stopped: &dyn Fn() -> bool,
) -> usize {
    let mut runs = 0;
    let mut latest: Option<(Instant, GarbageEstimate)> = None;
    while runs < GARBAGE_RUNS_PER_CHECK_MAX && !stopped() {
        // Sampled at every check, also below the limit, so the rate is
        // recent when the estimate first goes over.
        let appending = compactor.append_rate();
        let est = match latest.filter(|(at, _)| at.elapsed() < schedule.check_interval) {
            Some((_, e)) => Ok(e),
            None => compactor
                .garbage(
                    schedule.check_interval * GARBAGE_RESCORE_AFTER_CHECKS,
                    GARBAGE_RESCORE_AFTER_CHECKS as usize,
                    GARBAGE_RESCORE_MIN,
                )
                .inspect(|e| latest = Some((Instant::now(), *e))),
        };
        // A filling disk lowers the limit, a low one lifts the pace too
        // (`crate::diskspace`).
        let disk_low = compactor.disk.state() != DiskState::Ample;
        let limit = garbage_limit(schedule.max_garbage_pct, compactor.disk.fullness());
        match est {
            Ok(e) if e.over(limit, schedule.min_files) => {
                let over = e.pct() - limit;
                let pace = match disk_low {
                    true => 0,
                    false => garbage_pace(compactor.journal.opts.compaction_pace, appending, over),
                };
                compactor.journal.set_compaction_pace(Some(pace));
                tracing::debug!(target: "basalt::compaction", "journal garbage {:.1}% of {} bytes in {} files, appending {} B/s: compacting at {} B/s (0: unpaced)", e.pct(), e.closed_bytes, e.files, appending, pace);
            }
            Ok(_) => break,
            Err(e) => {
                tracing::error!(target: "basalt::compaction", "C0004 journal garbage estimate failed: {e}");
                break;
            }
        }
        Stats::incr(&compactor.stats.compaction_garbage_runs);
        runs += 1;
        match compactor.run() {
            Ok(r) if r.compacted => {
                if let Some((at, e)) = latest {
                    let reclaimed = r.bytes_in.saturating_sub(r.bytes_out);
                    let e = e.after_run(r.files_in.len(), r.files_out.len(), reclaimed);
                    compactor.note_estimate(e);
                    latest = Some((at, e));
                }
            }
            _ => break,
        }
    }
    compactor.journal.set_compaction_pace(None);
    runs
}

impl Scheduler {
    /// Starts the compaction thread: scheduled runs (if `runs_per_day` > 0)
    /// and the garbage trigger (if on). None if neither is configured.
    pub fn start(
        compactor: Arc<Compactor>,
        schedule: Schedule,
        dir: &std::path::Path,
    ) -> Result<Option<Scheduler>> {
        if schedule.runs_per_day == 0 && !schedule.trigger_on() {
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
            .spawn(move || {
                crate::background::lower_this_thread(schedule.nice, "journal compaction");
                let next = |rng: &mut u64| {
                    (schedule.runs_per_day > 0).then(|| {
                        Instant::now() + next_delay(rng, schedule.runs_per_day, schedule.window)
                    })
                };
                let mut next_run = next(&mut rng);
                let stopped = || *stop2.0.lock();
                loop {
                    let mut wait = next_run.map_or(Duration::from_secs(3600), |t| {
                        t.saturating_duration_since(Instant::now())
                    });
                    if schedule.trigger_on() {
                        wait = wait.min(schedule.check_interval);
                    }
                    {
                        let (m, cv) = &*stop2;
                        let mut stopped = m.lock();
                        if !*stopped {
                            cv.wait_for(&mut stopped, wait);
                        }
                        if *stopped {
                            return;
                        }
                    }
                    if next_run.is_some_and(|t| Instant::now() >= t) {
                        if in_window(utc_hour(), schedule.window) {
                            // Errors are counted and logged by `run`.
                            let _ = compactor.run();
                        }
                        next_run = next(&mut rng);
                    }
                    if schedule.trigger_on() {
                        drain_garbage(&compactor, &schedule, &stopped);
                    }
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

/// Whether a run under `punch` reclaims in place on a journal whose file
/// system punches holes (`supported`) and where punching has proved slow
/// (`slow`, [`Journal::punch_slow`]).
fn reclaims_in_place(punch: crate::Punch, supported: bool, slow: bool) -> bool {
    match punch {
        crate::Punch::Off => false,
        crate::Punch::On => supported,
        crate::Punch::Auto => supported && !slow,
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
            punch: crate::Punch::Off,
            merge_below_pct: 10.0,
            file_bytes: 1000,
        }
    }

    #[test]
    fn auto_stops_punching_once_slow_on_punches_anyway_off_never() {
        use crate::Punch::{Auto, Off, On};
        let cases = [
            // (policy, supported, slow) -> in place
            ((Off, true, false), false),
            ((Auto, true, false), true),
            ((Auto, true, true), false),
            ((Auto, false, false), false),
            ((On, true, true), true),
            ((On, false, false), false),
        ];
        for ((p, supported, slow), want) in cases {
            assert_eq!(
                reclaims_in_place(p, supported, slow),
                want,
                "{p:?} {supported} {slow}"
            );
        }
    }

    #[test]
    fn sparse_runs_are_adjacent_small_files_that_fit_in_one() {
        let p = policy();
        // Under 100 bytes each, at most 1000 together.
        assert_eq!(p.sparse_run(&[]), None);
        assert_eq!(p.sparse_run(&[50, 900, 50]), None);
        assert_eq!(p.sparse_run(&[50, 900, 50, 60, 99]), Some((2, 3)));
        assert_eq!(p.sparse_run(&[10, 20, 900, 1, 2, 3]), Some((3, 3)));
        let many = vec![90u64; 20];
        // Eleven would pass 1000.
        assert_eq!(p.sparse_run(&many), Some((0, 11)));
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
    fn append_rate_follows_rises_at_once_and_falls_over_its_window() {
        let t0 = Instant::now();
        let at = |s: u64| t0 + Duration::from_secs(s);
        let mut r = AppendRate::default();
        assert_eq!(r.observe(at(0), 0), 0, "one sample: no rate yet");
        // 100 MB/s for 10 s: the rate jumps to it.
        assert_eq!(r.observe(at(10), 1_000_000_000), 100_000_000);
        // A sample closer than a second apart keeps the rate.
        assert_eq!(
            r.observe(at(10) + Duration::from_millis(100), 1_000_000_000),
            100_000_000
        );
        // Writes stop: a third of the way down per 10 s (30 s window)...
        let after_10 = r.observe(at(20), 1_000_000_000);
        assert!((66_000_000..=67_000_000).contains(&after_10), "{after_10}");
        // ...and to nothing once a whole window has passed idle.
        assert_eq!(r.observe(at(60), 1_000_000_000), 0);
        // A counter that went backwards (a new store) counts as idle.
        assert_eq!(r.observe(at(70), 5), 0);
    }

    #[test]
    fn garbage_pace_follows_the_append_rate_when_falling_behind() {
        let mib = 1 << 20;
        // Near the limit: the configured pace, however fast the appends.
        assert_eq!(garbage_pace(64 * mib, 150 * mib, 0.5), 64 * mib);
        assert_eq!(garbage_pace(64 * mib, 150 * mib, 5.0), 64 * mib);
        // Falling behind: twice the append rate, never below the pace.
        assert_eq!(garbage_pace(64 * mib, 150 * mib, 5.5), 300 * mib);
        assert_eq!(garbage_pace(64 * mib, 10 * mib, 10.0), 64 * mib);
        assert_eq!(garbage_pace(64 * mib, 150 * mib, 15.0), 300 * mib);
        // A backlog, or no pace configured: unpaced.
        assert_eq!(garbage_pace(64 * mib, 150 * mib, 15.5), 0, "backlog");
        assert_eq!(garbage_pace(0, 150 * mib, 10.0), 0, "configured unpaced");
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

    #[test]
    fn garbage_estimate_thresholds() {
        let e = GarbageEstimate {
            files: 4,
            closed_bytes: 1000,
            garbage_bytes: 600,
        };
        assert!((e.pct() - 60.0).abs() < 1e-9);
        assert!(e.over(50.0, 4));
        assert!(!e.over(60.0, 4), "at the limit is not over");
        assert!(!e.over(50.0, 5), "too few files for a full run");
        assert_eq!(GarbageEstimate::default().pct(), 0.0);
        // A run of 2 files into 1 that reclaimed 500 bytes: all garbage.
        let after = e.after_run(2, 1, 500);
        assert_eq!(
            (after.files, after.closed_bytes, after.garbage_bytes),
            (3, 500, 100)
        );
        assert!((after.pct() - 20.0).abs() < 1e-9);
        // Never below zero, garbage never above the bytes.
        let gone = e.after_run(9, 0, 5000);
        assert_eq!(
            (gone.files, gone.closed_bytes, gone.garbage_bytes),
            (0, 0, 0)
        );
        // Made of scores: each file's bytes weighted by its dead share.
        let scored = GarbageEstimate::from_scores(&[
            FileScore {
                file_no: 1,
                bytes: 800,
                live_pct: 25.0,
            },
            FileScore {
                file_no: 2,
                bytes: 200,
                live_pct: 100.0,
            },
        ]);
        assert_eq!(
            (scored.files, scored.closed_bytes, scored.garbage_bytes),
            (2, 1000, 600)
        );
    }

    #[test]
    fn trigger_is_off_at_100_pct_or_zero_interval() {
        let c = Config::new("/nonexistent");
        assert!(Schedule::from_config(&c).trigger_on());
        let mut s = Schedule::from_config(&c);
        s.max_garbage_pct = 100.0;
        assert!(!s.trigger_on());
        assert!(!Schedule::from_config(&Config::test_min("/nonexistent")).trigger_on());
    }

    /// Appends puts of keys `key1..=key{n}` with `value_bytes` each.
    fn fill(journal: &Journal, n: u64, value_bytes: usize) {
        fill_range(journal, 1..=n, value_bytes);
    }

    /// Appends puts of keys `key{sqn}` for every SQN of `sqns`.
    fn fill_range(journal: &Journal, sqns: std::ops::RangeInclusive<u64>, value_bytes: usize) {
        use crate::journal::record::{NewRecord, RecordKind};
        let value = vec![7u8; value_bytes];
        for sqn in sqns {
            let key = format!("key{sqn}").into_bytes();
            let rec = NewRecord {
                sqn,
                kind: RecordKind::Put,
                key: &key,
                last_modified_us: 0,
                expires_at: 0,
                metadata: b"",
                value: &value,
                index: &[],
            };
            journal.append(&rec).expect("append");
        }
    }

    /// Liveness that keeps every record until `dead` is set.
    struct Switch(Arc<std::sync::atomic::AtomicBool>);

    impl Liveness for Switch {
        fn keep(&self, _rec: &crate::journal::record::JournalRecord) -> Result<Keep> {
            Ok(if self.0.load(std::sync::atomic::Ordering::Relaxed) {
                Keep::Drop
            } else {
                Keep::Record
            })
        }
    }

    /// A paced run in progress finishes unpaced once the journal is
    /// hurried (what `Store::close` does before it waits for the run): at
    /// 64 KiB/s its 2 MB would take ~30 s; hurried after 200 ms, it ends
    /// within seconds, with every record kept.
    #[test]
    fn a_hurried_run_drops_its_pace() {
        let d = tempfile::tempdir().expect("test setup");
        let opts = crate::journal::JournalOptions {
            stream_bytes: 4096,
            compaction_pace: 64 * 1024,
            ..crate::journal::JournalOptions::for_tests(256 * 1024)
        };
        let stats = Arc::new(Stats::default());
        let journal = Arc::new(Journal::open(d.path(), opts, stats).expect("open"));
        fill(&journal, 2000, 1000);
        let (run, _) = journal.roll_and_list().expect("roll");
        let bytes: u64 = run.iter().map(|c| c.size).sum();
        assert!(run.len() >= 4 && bytes > 1_900_000, "{} files", run.len());
        let j2 = Arc::clone(&journal);
        let t = std::time::Instant::now();
        let worker = std::thread::spawn(move || {
            let keep = Switch(Arc::new(std::sync::atomic::AtomicBool::new(false)));
            j2.compact_run(&run, &keep)
        });
        std::thread::sleep(Duration::from_millis(200));
        assert!(!worker.is_finished(), "paced, the run takes ~30 s");
        journal.hurry_compaction();
        let report = worker.join().expect("join").expect("compact");
        assert!(
            t.elapsed() < Duration::from_secs(10),
            "hurried, it ended after {:?}",
            t.elapsed()
        );
        assert_eq!(report.records_kept, 2000);
        assert_eq!(report.records_dropped, 0);
    }

    /// A journal in `dir` opened with `opts`, holding `n` puts of
    /// `value_bytes` each, and a compactor over it deciding with `live`.
    fn compactor_over(
        dir: &std::path::Path,
        opts: crate::journal::JournalOptions,
        (n, value_bytes): (u64, usize),
        live: LivenessFactory,
    ) -> (Arc<Journal>, Compactor) {
        let stats = Arc::new(Stats::default());
        let journal = Arc::new(Journal::open(dir, opts, Arc::clone(&stats)).expect("open"));
        fill(&journal, n, value_bytes);
        let c = Compactor::new(Arc::clone(&journal), stats, policy(), live);
        (journal, c)
    }

    /// A liveness factory of [`Switch`]es on `dead`.
    fn switch(dead: &Arc<std::sync::atomic::AtomicBool>) -> LivenessFactory {
        let dead = Arc::clone(dead);
        Box::new(move || Box::new(Switch(Arc::clone(&dead))))
    }

    #[test]
    fn reclaim_rates_count_the_time_between_runs() {
        let d = tempfile::tempdir().expect("test setup");
        let opts = crate::journal::JournalOptions::for_tests(1024);
        let dead = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (_, c) = compactor_over(d.path(), opts, (0, 0), switch(&dead));
        let ms = Duration::from_millis;
        // The first run stands for itself.
        assert_eq!(c.sustained_span(ms(5)), ms(5));
        // The next counts the time since the first ended, at least its own.
        std::thread::sleep(ms(40));
        let span = c.sustained_span(ms(5));
        assert!(
            span >= ms(40) && span < ms(40) + RECLAIM_GAP_MAX,
            "{span:?}"
        );
        assert_eq!(
            c.sustained_span(ms(500)),
            ms(500),
            "never less than the run"
        );
    }

    /// Estimates renew the stalest scores, at least a sixth of the files
    /// each: six estimates after every record died, every score says so,
    /// however many files there are (a fixed budget of 16 per estimate
    /// left the scores of a 100-file journal stale and the trigger idle).
    #[test]
    fn estimates_renew_every_stale_score_within_six_checks() {
        let d = tempfile::tempdir().expect("test setup");
        let opts = crate::journal::JournalOptions::for_tests(1024);
        let dead = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (_, c) = compactor_over(d.path(), opts, (2000, 100), switch(&dead));
        let first = c.garbage(Duration::ZERO, 6, 1).expect("estimate");
        assert!(first.files > 100, "{first:?}");
        assert_eq!(first.garbage_bytes, 0);
        dead.store(true, std::sync::atomic::Ordering::Relaxed);
        let mut pcts = Vec::new();
        for _ in 0..6 {
            std::thread::sleep(Duration::from_millis(2));
            pcts.push(c.garbage(Duration::ZERO, 6, 1).expect("estimate").pct());
        }
        assert!(
            pcts[0] > 10.0 && pcts[0] < 40.0,
            "one renewal round: {pcts:?}"
        );
        assert!(pcts.windows(2).all(|w| w[0] <= w[1]), "{pcts:?}");
        assert!(
            pcts[5] > 99.0,
            "after six estimates every score is renewed: {pcts:?}"
        );
    }

    /// Liveness that drops every record and notes the journal's compaction
    /// pace each time it is asked (while scoring and while compacting).
    struct PaceProbe {
        journal: Arc<Journal>,
        seen: Arc<Mutex<Vec<u64>>>,
    }

    impl Liveness for PaceProbe {
        fn keep(&self, _rec: &crate::journal::record::JournalRecord) -> Result<Keep> {
            self.seen.lock().push(self.journal.compaction_pace());
            Ok(Keep::Drop)
        }
    }

    /// The paces `drain_garbage` ran at over a journal whose every record
    /// is dead (an estimate of 100 % garbage), its limit `max_garbage_pct`,
    /// after appends of ~2 MB/s, and the pace left behind; with a disk
    /// guard that finds the disk low if `disk_low`.
    fn drain_paces(max_garbage_pct: f64, configured: u64, disk_low: bool) -> (Vec<u64>, u64) {
        let d = tempfile::tempdir().expect("test setup");
        let opts = crate::journal::JournalOptions {
            compaction_pace: configured,
            ..crate::journal::JournalOptions::for_tests(64 * 1024)
        };
        let seen = Arc::new(Mutex::new(Vec::new()));
        let slot: Arc<Mutex<Option<Arc<Journal>>>> = Arc::new(Mutex::new(None));
        let (s2, slot2) = (Arc::clone(&seen), Arc::clone(&slot));
        let live: LivenessFactory = Box::new(move || {
            let journal = slot2.lock().clone().expect("journal set");
            Box::new(PaceProbe {
                journal,
                seen: Arc::clone(&s2),
            })
        });
        let (journal, mut c) = compactor_over(d.path(), opts, (200, 1000), live);
        if disk_low {
            // A low mark above any real free share, no minimum.
            c = c.with_disk_guard(Arc::new(DiskGuard::new(d.path(), 100.0, 0.0)));
        }
        *slot.lock() = Some(Arc::clone(&journal));
        c.append_rate();
        std::thread::sleep(Duration::from_millis(1100));
        fill_range(&journal, 201..=2400, 1000);
        let schedule = Schedule {
            runs_per_day: 0,
            window: (0, 23),
            max_garbage_pct,
            check_interval: Duration::from_secs(10),
            min_files: 4,
            nice: 0,
        };
        let runs = drain_garbage(&c, &schedule, &|| false);
        assert!(runs > 0, "100 % garbage is over {max_garbage_pct}");
        let seen = seen.lock().clone();
        (seen, journal.compaction_pace())
    }

    /// `drain_garbage` sets the pace of its runs from the estimate and the
    /// append rate (`garbage_pace`'s tiers) and restores the configured
    /// pace when done. The appends (~2 MB/s) are far above the configured
    /// 256 KiB/s, so each tier shows.
    #[test]
    fn drain_garbage_paces_its_runs_by_how_far_over_it_is() {
        let configured = 256 * 1024;
        // 3 points over: the configured pace, however fast the appends.
        let (near, after) = drain_paces(97.0, configured, false);
        assert!(near.iter().all(|&p| p == configured), "{near:?}");
        assert_eq!(after, configured);
        // The same with the disk low: unpaced.
        let (low, after) = drain_paces(97.0, configured, true);
        assert!(low.contains(&0), "{low:?}");
        assert_eq!(after, configured);
        // 10 points over: twice the append rate.
        let (behind, after) = drain_paces(90.0, configured, false);
        assert!(behind.iter().any(|&p| p > 4 * configured), "{behind:?}");
        assert!(behind.iter().all(|&p| p >= configured), "{behind:?}");
        assert_eq!(after, configured);
        // 50 points over: unpaced.
        let (backlog, after) = drain_paces(50.0, configured, false);
        assert!(backlog.contains(&0), "{backlog:?}");
        assert_eq!(after, configured);
    }

    #[test]
    fn a_filling_disk_lowers_the_garbage_limit_to_half() {
        assert_eq!(garbage_limit(60.0, 0.0), 60.0);
        assert_eq!(garbage_limit(60.0, 0.5), 45.0);
        assert_eq!(garbage_limit(60.0, 1.0), 30.0);
        assert_eq!(
            garbage_limit(100.0, 1.0),
            100.0,
            "a trigger that is off stays off"
        );
    }

    #[test]
    fn staleness_is_appends_since_the_score_over_the_files_age_then() {
        // Scored as it closed (its newest record at the journal's end).
        assert_eq!(score_staleness(1100, 1000, 1000, 100), 1.0);
        // Scored when 900 records old: the same appends matter a tenth.
        assert_eq!(score_staleness(1100, 1000, 100, 100), 0.1);
        assert_eq!(score_staleness(1000, 1000, 500, 10), 0.0);
        // Never divides by zero, never negative.
        assert_eq!(score_staleness(5, 10, 20, 0), 0.0);
        assert!(score_staleness(10, 0, 0, 0).is_finite());
    }

    /// An estimate renews the scores of the files that were young when
    /// scored before the old files' (whose records die slowly), even when
    /// no score is old by the clock: after as many records again as the
    /// journal had, every record dead, the youngest files' scores fall to
    /// 0 % live while the oldest keep their 100 %.
    #[test]
    fn estimates_renew_the_young_files_scores_first() {
        let d = tempfile::tempdir().expect("test setup");
        let opts = crate::journal::JournalOptions::for_tests(1024);
        let dead = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let (journal, c) = compactor_over(d.path(), opts, (2000, 100), switch(&dead));
        let hour = Duration::from_secs(3600);
        let first = c.garbage(hour, 6, 1).expect("estimate");
        assert_eq!(first.garbage_bytes, 0);
        dead.store(true, std::sync::atomic::Ordering::Relaxed);
        fill_range(&journal, 2001..=2200, 100);
        c.garbage(hour, 6, 1).expect("estimate");
        let cache = c.cache.lock();
        let score_of = |hi_below: u64, hi_above: u64| -> Vec<f64> {
            journal
                .closed_files()
                .iter()
                .filter(|f| {
                    f.index
                        .last()
                        .is_some_and(|e| e.0 > hi_above && e.0 < hi_below)
                })
                .filter_map(|f| cache.get(&f.file_no).map(|s| s.score))
                .collect()
        };
        let young = score_of(2001, 1900);
        let old = score_of(1000, 0);
        assert!(
            young.len() > 5 && old.len() > 50,
            "{} {}",
            young.len(),
            old.len()
        );
        assert!(
            young.iter().all(|s| *s == 0.0),
            "young files renewed: {young:?}"
        );
        assert!(old.iter().all(|s| *s == 100.0), "old files kept: {old:?}");
    }
}
