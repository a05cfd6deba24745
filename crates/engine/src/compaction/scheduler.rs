//! The background compaction thread ([`Scheduler`]): scheduled runs over
//! the daily window, and with a garbage check interval, runs back to back
//! while the garbage is over its limit ([`drain_garbage`]).

use super::compactor::Compactor;
use super::policy::{
    garbage_limit, garbage_pace, in_window, next_delay, utc_hour, GarbageEstimate, Schedule,
    GARBAGE_RESCORE_AFTER_CHECKS, GARBAGE_RESCORE_MIN, GARBAGE_RUNS_PER_CHECK_MAX,
};
use crate::diskspace::DiskState;
use crate::error::{IoContext, Result};
use crate::stats::Stats;
use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The background thread running scheduled compactions.
#[derive(Debug)]
pub struct Scheduler {
    stop: Arc<(Mutex<bool>, Condvar)>,
    handle: Option<std::thread::JoinHandle<()>>,
}

/// Runs compactions back to back while the garbage estimate is over the
/// schedule's limit (at most [`GARBAGE_RUNS_PER_CHECK_MAX`]), stopping at
/// once when `stopped()` says so, when a run finds nothing worth doing, or
/// on an error (counted and logged by `run`). Returns the runs done.
///
/// A full estimate (sampled reads of the stalest files' records,
/// [`Compactor::garbage`]) is made at most once per check interval; after
/// each run the trigger judges by the cached scores, the files written
/// since (new closed files, the run's output) scored now
/// ([`Compactor::garbage_cached`]). With the disk busy a full estimate
/// took about half as long as a 1 GB run (4.4 s against 8.8 s). While it
/// waits for one of its node's slots, a store renews its estimate (from
/// the cached scores) every check interval, so its priority and its write
/// slowdown follow its garbage (they stood still for minutes while a
/// waiting vnode's journal grew tenfold: Test Pilot 25 KB on three nodes,
/// 2026-12-06).
pub fn drain_garbage(
    compactor: &Compactor,
    schedule: &Schedule,
    stopped: &dyn Fn() -> bool,
) -> usize {
    let mut runs = 0;
    let mut latest: Option<(Instant, GarbageEstimate)> = None;
    // From the cached scores, the files written since scored now; the
    // full estimate's time is kept, so its renewals fall due.
    let cached = |latest: &mut Option<(Instant, GarbageEstimate)>| {
        let at = latest.map_or_else(Instant::now, |l| l.0);
        kept(latest, at, compactor.garbage_cached())
    };
    while runs < GARBAGE_RUNS_PER_CHECK_MAX && !stopped() {
        // Sampled at every check, also below the limit, so the rate is
        // recent when the estimate first goes over.
        let appending = compactor.append_rate();
        let est = match latest.filter(|(at, _)| at.elapsed() < schedule.check_interval) {
            Some((_, e)) => e,
            None => {
                let e = compactor.garbage(
                    schedule.check_interval * GARBAGE_RESCORE_AFTER_CHECKS,
                    GARBAGE_RESCORE_AFTER_CHECKS as usize,
                    GARBAGE_RESCORE_MIN,
                );
                match kept(&mut latest, Instant::now(), e) {
                    Some(e) => e,
                    None => break,
                }
            }
        };
        let Some(priority) = judge(compactor, schedule, &est, appending) else {
            break;
        };
        // The node's slot (`super::slots`), held through the run. While
        // waiting, the estimate is renewed every check interval from the
        // cached scores and the files closed since (a full estimate's
        // sampled reads for every waiting store of a node every check
        // would be the most reading of all; one is made after the run if
        // it has fallen due).
        let mut renew = || {
            let e = cached(&mut latest)?;
            judge(compactor, schedule, &e, compactor.append_rate())
        };
        let Some(_slot) =
            compactor.slot_renewing(priority, stopped, schedule.check_interval, &mut renew)
        else {
            break;
        };
        Stats::incr(&compactor.stats.compaction_garbage_runs);
        runs += 1;
        match compactor.run() {
            Ok(r) if r.compacted => {
                // Judged on the cached scores, the files closed during the
                // run and the run's output scored now.
                if cached(&mut latest).is_none() {
                    break;
                }
            }
            _ => break,
        }
    }
    compactor.journal.set_compaction_pace(None);
    runs
}

/// `est`, made at `at`, as the latest estimate; a failed one is logged
/// and `None`.
fn kept(
    latest: &mut Option<(Instant, GarbageEstimate)>,
    at: Instant,
    est: Result<GarbageEstimate>,
) -> Option<GarbageEstimate> {
    match est {
        Ok(e) => {
            *latest = Some((at, e));
            Some(e)
        }
        Err(e) => {
            tracing::error!(target: "basalt::compaction", "C0004 journal garbage estimate failed: {e}");
            None
        }
    }
}

/// The slot priority of a store whose garbage is `est` (how far over its
/// limit, a low disk first), setting its runs' read pace; `None` when it
/// is not over its limit.
fn judge(
    compactor: &Compactor,
    schedule: &Schedule,
    est: &GarbageEstimate,
    appending: u64,
) -> Option<f64> {
    // A filling disk lowers the limit, a low one lifts the pace too
    // (`crate::diskspace`).
    let disk_low = compactor.disk.state() != DiskState::Ample;
    let limit = garbage_limit(schedule.max_garbage_pct, compactor.disk.fullness());
    // A low disk wants space more than full runs: one closed file with
    // garbage is enough to try (the policy still picks only a run that
    // scores). A node's vnode could fill its share of the disk before
    // it held a full run's closed files (4 x `max_file_size`: 1 GiB at
    // the 256 MiB nodes once had, 256 MiB at today's 64 MiB).
    let min_files = if disk_low { 1 } else { schedule.min_files };
    if !est.over(limit, min_files) {
        return None;
    }
    let over = est.pct() - limit;
    let pace = match disk_low {
        true => 0,
        false => garbage_pace(compactor.journal.opts.compaction_pace, appending, over),
    };
    compactor.journal.set_compaction_pace(Some(pace));
    tracing::debug!(target: "basalt::compaction", "journal garbage {:.1}% of {} bytes in {} files, appending {} B/s: compacting at {} B/s (0: unpaced)", est.pct(), est.closed_bytes, est.files, appending, pace);
    // A low disk first, then the store most over its limit.
    Some(over + if disk_low { 100.0 } else { 0.0 })
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
                            if let Some(_slot) = compactor.slot(0.0, &stopped) {
                                // Errors are counted and logged by `run`.
                                let _ = compactor.run();
                            }
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
