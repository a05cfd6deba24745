//! The compaction policy's decisions, free of threads and I/O: which run
//! to compact ([`CompactionPolicy`]), how much garbage there is
//! ([`GarbageEstimate`], [`FileScore`]), when to run (the daily window
//! and its jitter, [`Schedule`]), how fast to read ([`garbage_pace`],
//! [`AppendRate`]) and whether to punch holes instead of copying; and
//! the [`CompactionReport`] a run returns.

use crate::config::Config;
use std::time::{Duration, Instant};

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

/// The garbage trigger's view of the journal (see [`Compactor::garbage`](super::Compactor::garbage)).
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

    /// True when the trigger should run compactions: over `max_pct` and
    /// at least `min_files` closed files (fewer cannot make a full run).
    pub fn over(&self, max_pct: f64, min_files: usize) -> bool {
        self.files >= min_files && self.pct() > max_pct
    }
}

/// One closed journal file's score (see [`Compactor::rescore`](super::Compactor::rescore)).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FileScore {
    /// The file's number.
    pub file_no: u64,
    /// Its size.
    pub bytes: u64,
    /// The percentage of its sampled bytes that is live.
    pub live_pct: f64,
}

/// Length of the window in hours (inclusive bounds, wrapping midnight).
pub(super) fn window_hours((lo, hi): (u8, u8)) -> u64 {
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
pub(super) fn utc_hour() -> u8 {
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
/// write slowdown paces writes to (see [`Compactor::run`](super::Compactor::run)).
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

/// Whether a run under `punch` reclaims in place on a journal whose file
/// system punches holes (`supported`), with `holes_waiting` bytes of
/// holes not yet punched by the process's remover
/// ([`crate::journal::punch::holes_waiting`]). `Auto` punches while the remover
/// keeps up (at most [`crate::journal::punch::PUNCH_BACKLOG_MAX`] waiting) and
/// copies the runs it cannot take: where punches are slow, punching still
/// frees what the remover's thread manages, copying the rest.
pub(super) fn reclaims_in_place(punch: crate::Punch, supported: bool, holes_waiting: u64) -> bool {
    match punch {
        crate::Punch::Off => false,
        crate::Punch::On => supported,
        crate::Punch::Auto => {
            supported && holes_waiting <= crate::journal::punch::PUNCH_BACKLOG_MAX
        }
    }
}

/// Punching must free at least this share of what copying the same run
/// would free, else the run is copied ([`punch_pays`]).
pub const PUNCH_MIN_SHARE: f64 = 0.5;

/// Whether a run whose files' mean live percentage is `copy_live` as
/// copying keeps them and `punch_live` as a punch pass keeps them (key
/// deltas and tombstone rewrites whole) frees enough in place: at least
/// [`PUNCH_MIN_SHARE`] of what copying would. Under a 2i load every
/// replaced object leaves a key delta; punch passes over such files freed
/// 34 k records of 2.4 M read in ten minutes (2026-12-04), choosing the
/// same files again and again.
pub(super) fn punch_pays(copy_live: f64, punch_live: f64) -> bool {
    debug_assert!(punch_live + 1e-9 >= copy_live, "punching keeps a superset");
    100.0 - punch_live >= PUNCH_MIN_SHARE * (100.0 - copy_live)
}
