//! The [`Compactor`]: scores closed journal files (sampling records and
//! asking the store's [`Liveness`]), caches the scores, estimates the
//! garbage, and runs one compaction (copying, or punching holes in
//! place) with the journal's mechanics ([`crate::journal::compact`]).

use super::policy::{
    punch_pays, reclaims_in_place, score_staleness, AppendRate, CompactionPolicy, CompactionReport,
    FileScore, GarbageEstimate, RECLAIM_GAP_MAX, RESCORE_STALENESS,
};
use super::slots::{CompactionSlots, Slot};
use super::LivenessFactory;
use crate::diskspace::DiskGuard;
use crate::error::Result;
use crate::journal::file::ClosedFile;
use crate::journal::{Journal, Keep, Liveness};
use crate::slowdown::Slowdown;
use crate::stats::Stats;
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A file's cached live percentage.
#[derive(Debug, Clone, Copy)]
pub(super) struct CachedScore {
    pub(super) score: f64,
    /// The live percentage as a punch pass keeps it ([`Compactor::score_both`]).
    punch: f64,
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
    pub(super) journal: Arc<Journal>,
    pub(super) stats: Arc<Stats>,
    policy: CompactionPolicy,
    liveness: LivenessFactory,
    /// file number -> its score.
    pub(super) cache: Mutex<HashMap<u64, CachedScore>>,
    /// Told every garbage estimate and every run's reclaim rate.
    slowdown: Arc<Slowdown>,
    /// How full the disk is: a low disk makes the garbage trigger eager.
    pub(super) disk: Arc<DiskGuard>,
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
    /// The node's compaction slots (`None`: this store runs alone).
    slots: Option<CompactionSlots>,
}

/// The garbage the write slowdown paces writes by: the estimate's, or none
/// while there are fewer closed files than a full run. The garbage trigger
/// does not compact then ([`GarbageEstimate::over`]), so no run would ever
/// measure the reclaim rate the slowdown paces to, and writes would stay
/// at its floor rate for good (a 10 KB insert load on three nodes ran at
/// half its rate from 250 s on: each vnode had one closed file, nearly all
/// garbage). The garbage is bounded meanwhile: fewer than a run's files.
/// Returns (garbage, closed) bytes; (0, 0) counts for nothing, also in a
/// node's sums (`crate::diskpace`).
fn slowdown_garbage(est: &GarbageEstimate, min_files: usize) -> (u64, u64) {
    if est.files >= min_files {
        (est.garbage_bytes.min(est.closed_bytes), est.closed_bytes)
    } else {
        (0, 0)
    }
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
            slots: None,
        }
    }

    /// The compactor, its background runs taking one of `slots` first
    /// (default: none, the store runs alone; see [`super::slots`]).
    pub fn with_slots(mut self, slots: Option<CompactionSlots>) -> Self {
        self.slots = slots;
        self
    }

    /// A slot for one background run: `Some(None)` without slots, `None`
    /// once `stopped()` while waiting for one.
    pub(super) fn slot(&self, priority: f64, stopped: &dyn Fn() -> bool) -> Option<Option<Slot>> {
        self.slot_renewing(priority, stopped, Duration::MAX, &mut || Some(priority))
    }

    /// [`Self::slot`], renewing the priority with `renew()` every `every`
    /// while waiting ([`CompactionSlots::acquire_renewing`]).
    pub(super) fn slot_renewing(
        &self,
        priority: f64,
        stopped: &dyn Fn() -> bool,
        every: Duration,
        renew: &mut dyn FnMut() -> Option<f64>,
    ) -> Option<Option<Slot>> {
        match &self.slots {
            None => Some(None),
            Some(s) => {
                let t0 = Instant::now();
                let slot = s.acquire_renewing(priority, stopped, every, renew)?;
                Stats::add(
                    &self.stats.compaction_slot_wait_ms,
                    t0.elapsed().as_millis() as u64,
                );
                Some(Some(slot))
            }
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
    pub(super) fn sustained_span(&self, took: Duration) -> Duration {
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
        Ok(self.score_both(file, live)?.0)
    }

    /// The live percentage of `file`'s sampled bytes as copying keeps them
    /// (a key delta or tombstone rewrite counts its small rewritten size)
    /// and as a punch pass keeps them (those records whole: it frees only
    /// what is dropped outright).
    fn score_both(&self, file: &ClosedFile, live: &dyn Liveness) -> Result<(f64, f64)> {
        let sample = self.journal.sample(file, self.policy.sample_records)?;
        let mut total = 0u64;
        let mut kept = 0u64;
        let mut punch_kept = 0u64;
        for (rec, len) in &sample {
            total += len;
            // Frame, fixed body part and key of a rewritten record.
            let small = (crate::journal::record::RECORD_HEADER_LEN
                + crate::journal::record::BODY_FIXED_LEN
                + rec.key.len()) as u64;
            let (copy, punch) = match live.keep(rec)? {
                Keep::Record => (*len, *len),
                Keep::KeyDelta(ix) => ((small + ix.len() as u64).min(*len), *len),
                Keep::Tombstone => (small.min(*len), *len),
                Keep::Drop => (0, 0),
            };
            kept += copy;
            punch_kept += punch;
        }
        if total == 0 {
            return Ok((100.0, 100.0));
        }
        let pct = |k: u64| 100.0 * k as f64 / total as f64;
        Ok((pct(kept), pct(punch_kept)))
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
                    let (score, punch) = self.score_both(f, live)?;
                    Stats::incr(&self.stats.compaction_files_scored);
                    let c = CachedScore {
                        score,
                        punch,
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
        self.estimate(|files| Scoring::Estimate {
            stale_after,
            rescore_max: rescore_min.max(files.div_ceil(renewals.max(1))),
        })
    }

    /// How much of the closed journal files is garbage, from the cached
    /// scores, scoring only the files never scored (closed, or written by
    /// a run, since the last estimate) and renewing none: a few sampled
    /// reads of files just written. What the garbage trigger judges by
    /// after each run, so that the files closed while it ran count.
    pub fn garbage_cached(&self) -> Result<GarbageEstimate> {
        self.estimate(|_| Scoring::Estimate {
            stale_after: Duration::MAX,
            rescore_max: 0,
        })
    }

    /// The estimate over every closed file, scored as `mode(files)` says.
    fn estimate(&self, mode: impl FnOnce(usize) -> Scoring) -> Result<GarbageEstimate> {
        let t0 = Instant::now();
        let live = (self.liveness)();
        let files = self.journal.closed_files();
        let mode = mode(files.len());
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

    /// Makes `est` the latest estimate (the write slowdown's too, where
    /// the garbage trigger can act on it).
    pub(super) fn note_estimate(&self, est: GarbageEstimate) {
        let (garbage, closed) = slowdown_garbage(&est, self.policy.max_run_length);
        self.slowdown.observe_garbage(garbage, closed);
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

    /// Whether this run reclaims in place ([`crate::Punch`]): the policy
    /// asks for it, the file system punches holes, and, in `Auto`, the
    /// remover keeps up with the holes already queued. The second flag:
    /// it would have, but the remover is behind.
    fn punch_allowed(&self) -> (bool, bool) {
        // `Off` is tested first although `reclaims_in_place` handles it too:
        // so that `Off` never probes the file system with a scratch punch.
        if self.policy.punch == crate::Punch::Off {
            return (false, false);
        }
        let supported = self.journal.punch_supported();
        let waiting = crate::journal::punch::holes_waiting();
        let punch = reclaims_in_place(self.policy.punch, supported, waiting);
        (punch, supported && !punch)
    }

    fn run_inner(&self, t0: Instant) -> Result<CompactionReport> {
        let live = (self.liveness)();
        let files = self.journal.closed_files();
        let (punch, behind) = self.punch_allowed();
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
        if behind {
            Stats::incr(&self.stats.compaction_punch_behind_runs);
        }
        let run = files.get(start..start + len).unwrap_or(&[]);
        // Punching frees only records dropped outright: a run whose
        // garbage is mostly key deltas (replaced objects with index
        // changes) or expired puts would be read for next to nothing, and
        // chosen again at once (its copy score stays low).
        let in_place = in_place && {
            let cache = self.cache.lock();
            let mean = |f: fn(&CachedScore) -> f64| {
                let known: Vec<f64> = run
                    .iter()
                    .filter_map(|c| cache.get(&c.file_no).map(f))
                    .collect();
                known.iter().sum::<f64>() / known.len().max(1) as f64
            };
            let pays = punch_pays(mean(|c| c.score), mean(|c| c.punch));
            if !pays {
                Stats::incr(&self.stats.compaction_punch_short_runs);
            }
            pays
        };
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

#[cfg(test)]
mod slowdown_tests {
    use super::*;

    fn est(files: usize, closed_bytes: u64, garbage_bytes: u64) -> GarbageEstimate {
        GarbageEstimate {
            files,
            closed_bytes,
            garbage_bytes,
        }
    }

    #[test]
    fn writes_are_paced_only_where_the_garbage_trigger_can_compact() {
        // One closed file, nearly all garbage: the trigger needs 4, so no
        // pressure (it would never be relieved).
        assert_eq!(slowdown_garbage(&est(1, 100, 95), 4), (0, 0));
        assert_eq!(slowdown_garbage(&est(3, 300, 290), 4), (0, 0));
        assert_eq!(slowdown_garbage(&est(4, 400, 380), 4), (380, 400));
        assert_eq!(slowdown_garbage(&est(9, 900, 90), 4), (90, 900));
    }
}
