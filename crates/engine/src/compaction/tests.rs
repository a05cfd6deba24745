//! Tests of journal compaction: the policy, the garbage trigger and pace,
//! scheduling, and runs against a real journal.

use super::policy::reclaims_in_place;
use super::policy::window_hours;
use super::*;
use crate::config::Config;
use crate::diskspace::DiskGuard;
use crate::error::Result;
use crate::journal::Journal;
use crate::stats::Stats;
use parking_lot::Mutex;
use std::sync::Arc;
use std::time::{Duration, Instant};

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
fn auto_punches_while_the_remover_keeps_up_on_punches_anyway_off_never() {
    use crate::journal::punch::PUNCH_BACKLOG_MAX as MAX;
    use crate::Punch::{Auto, Off, On};
    let cases = [
        // (policy, supported, holes waiting) -> in place
        ((Off, true, 0), false),
        ((Off, false, 0), false),
        ((On, true, 0), true),
        ((On, true, MAX + 1), true),
        ((On, false, 0), false),
        ((Auto, true, 0), true),
        ((Auto, true, MAX), true),
        ((Auto, true, MAX + 1), false),
        ((Auto, false, 0), false),
    ];
    for ((p, supported, waiting), want) in cases {
        assert_eq!(
            reclaims_in_place(p, supported, waiting),
            want,
            "{p:?} {supported} {waiting}"
        );
    }
}

#[test]
fn a_run_is_punched_only_where_punching_frees_half_of_what_copying_would() {
    use super::policy::punch_pays;
    // Garbage dropped outright: punching frees what copying frees.
    assert!(punch_pays(40.0, 40.0));
    // Half of the garbage kept whole as key deltas: still worth it.
    assert!(punch_pays(40.0, 70.0));
    // Nearly all of it: a pass would read the files for next to nothing.
    assert!(!punch_pays(40.0, 71.0));
    assert!(!punch_pays(20.0, 98.0));
    // Nothing to free either way (never chosen, but consistent).
    assert!(punch_pays(100.0, 100.0));
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

/// A garbage trigger every 10 s over `max_garbage_pct`, no schedule.
fn trigger_schedule(max_garbage_pct: f64) -> Schedule {
    Schedule {
        runs_per_day: 0,
        window: (0, 23),
        max_garbage_pct,
        check_interval: Duration::from_secs(10),
        min_files: 4,
        nice: 0,
    }
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
    let schedule = trigger_schedule(max_garbage_pct);
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

/// With the disk low the garbage trigger tries fewer closed files than a
/// full run (`min_files`): a node's vnode (then with 256 MiB journal files)
/// filled its share of the disk before it held four closed files, and then
/// nothing ever compacted (2026-12-03, Cluster Test 1 for an hour on three
/// nodes).
#[test]
fn a_low_disk_compacts_fewer_closed_files_than_a_full_run() {
    for low in [false, true] {
        let d = tempfile::tempdir().expect("test setup");
        let opts = crate::journal::JournalOptions::for_tests(64 * 1024);
        let dead = Arc::new(std::sync::atomic::AtomicBool::new(true));
        let (journal, mut c) = compactor_over(d.path(), opts, (150, 1000), switch(&dead));
        let closed = journal.closed_files().len();
        assert!((1..4).contains(&closed), "{closed} closed files");
        if low {
            // A low mark above any real free share, no minimum.
            c = c.with_disk_guard(Arc::new(DiskGuard::new(d.path(), 100.0, 0.0)));
        }
        let schedule = trigger_schedule(60.0);
        let runs = drain_garbage(&c, &schedule, &|| false);
        if low {
            assert!(runs > 0, "a low disk compacts {closed} dead files");
        } else {
            assert_eq!(runs, 0, "fewer files than a full run: left alone");
            assert_eq!(journal.closed_files().len(), closed);
        }
    }
}

/// A store sharing a node's compaction slots runs only once it holds
/// one: while another holds the only slot it waits (nothing compacted),
/// it runs when the slot is given back, and a store stopped while waiting
/// gives up without a run.
#[test]
fn the_garbage_trigger_waits_for_a_node_slot() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let schedule = trigger_schedule(50.0);
    let slots = CompactionSlots::new(1);
    let dead = Arc::new(AtomicBool::new(true));
    let waited = |slots: &CompactionSlots| {
        let t0 = Instant::now();
        while slots.waiting() == 0 {
            assert!(t0.elapsed() < Duration::from_secs(10), "never waited");
            std::thread::sleep(Duration::from_millis(1));
        }
    };
    for stop_while_waiting in [false, true] {
        let d = tempfile::tempdir().expect("test setup");
        let opts = crate::journal::JournalOptions::for_tests(64 * 1024);
        let (_journal, c) = compactor_over(d.path(), opts, (600, 1000), switch(&dead));
        let c = Arc::new(c.with_slots(Some(slots.clone())));
        let held = slots.acquire(0.0, &|| false).expect("free slot");
        let stop = Arc::new(AtomicBool::new(false));
        let (c2, stop2) = (Arc::clone(&c), Arc::clone(&stop));
        let drain = std::thread::spawn(move || {
            drain_garbage(&c2, &schedule, &|| stop2.load(Ordering::SeqCst))
        });
        waited(&slots);
        std::thread::sleep(Duration::from_millis(200));
        let runs = || c.stats.compaction_runs.load(Ordering::Relaxed);
        assert_eq!(runs(), 0, "a run without the slot");
        if stop_while_waiting {
            stop.store(true, Ordering::SeqCst);
            assert_eq!(drain.join().expect("drain"), 0);
            assert_eq!(runs(), 0);
            assert_eq!(slots.waiting(), 0);
            drop(held);
        } else {
            drop(held);
            assert!(drain.join().expect("drain") > 0);
            assert!(runs() > 0, "no run once the slot was free");
            assert!(c.stats.compaction_slot_wait_ms.load(Ordering::Relaxed) >= 200);
        }
        assert_eq!(slots.busy(), 0);
    }
}

/// A store waiting for a node slot renews its estimate every check
/// interval: files closed while it waits are in its estimate (and its
/// slowdown's) before it gets the slot. Its estimate stood still while it
/// waited until 2026-12-06.
#[test]
fn a_store_waiting_for_a_slot_renews_its_estimate() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let mut schedule = trigger_schedule(50.0);
    schedule.check_interval = Duration::from_millis(50);
    let slots = CompactionSlots::new(1);
    let dead = Arc::new(AtomicBool::new(true));
    let d = tempfile::tempdir().expect("test setup");
    let opts = crate::journal::JournalOptions::for_tests(64 * 1024);
    let (journal, c) = compactor_over(d.path(), opts, (600, 1000), switch(&dead));
    let c = Arc::new(c.with_slots(Some(slots.clone())));
    let held = slots.acquire(0.0, &|| false).expect("free slot");
    let c2 = Arc::clone(&c);
    let drain = std::thread::spawn(move || drain_garbage(&c2, &schedule, &|| false));
    let t0 = Instant::now();
    while slots.waiting() == 0 {
        assert!(t0.elapsed() < Duration::from_secs(10), "never waited");
        std::thread::sleep(Duration::from_millis(1));
    }
    let first = c.last_estimate().expect("estimated before waiting");
    fill_range(&journal, 601..=1200, 1000);
    journal.roll_and_list().expect("roll");
    let closed = journal.closed_files().len();
    assert!(closed > first.files, "{closed} files closed, {first:?}");
    let t0 = Instant::now();
    while c.last_estimate().is_none_or(|e| e.files < closed) {
        assert!(
            t0.elapsed() < Duration::from_secs(10),
            "the waiting store's estimate stood at {:?} with {closed} files closed",
            c.last_estimate()
        );
        std::thread::sleep(Duration::from_millis(5));
    }
    let renewed = c.last_estimate().expect("estimate");
    assert!(renewed.garbage_bytes > first.garbage_bytes, "{renewed:?}");
    assert_eq!(
        c.stats.compaction_runs.load(Ordering::Relaxed),
        0,
        "a run without the slot"
    );
    drop(held);
    assert!(drain.join().expect("drain") > 0);
    assert_eq!(slots.busy(), 0);
}

/// The estimate after a run: cached scores stand (none renewed), files
/// never scored are scored, so files closed since the last estimate count.
#[test]
fn a_cached_estimate_scores_only_new_files() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let dead = Arc::new(AtomicBool::new(false));
    let d = tempfile::tempdir().expect("test setup");
    let opts = crate::journal::JournalOptions::for_tests(64 * 1024);
    let (journal, c) = compactor_over(d.path(), opts, (600, 1000), switch(&dead));
    journal.roll_and_list().expect("roll");
    let full = c.garbage(Duration::ZERO, 6, 1).expect("estimate");
    assert_eq!(full.garbage_bytes, 0, "every record live");
    dead.store(true, Ordering::SeqCst);
    let cached = c.garbage_cached().expect("estimate");
    assert_eq!(cached, full, "no cached score renewed");
    fill_range(&journal, 601..=1200, 1000);
    journal.roll_and_list().expect("roll");
    let scored = c.stats.compaction_files_scored.load(Ordering::Relaxed);
    let with_new = c.garbage_cached().expect("estimate");
    let new_files = with_new.files - full.files;
    assert!(new_files > 0, "{with_new:?}");
    assert_eq!(
        c.stats.compaction_files_scored.load(Ordering::Relaxed) - scored,
        new_files as u64,
        "only the new files scored"
    );
    assert_eq!(
        with_new.garbage_bytes,
        with_new.closed_bytes - full.closed_bytes,
        "the new files, all dead, are its garbage"
    );
    assert_eq!(c.last_estimate(), Some(with_new));
}

/// Liveness that keeps every record as a key delta (a replaced object
/// with index changes), or drops it.
struct Deltas {
    drop: bool,
}

impl Liveness for Deltas {
    fn keep(&self, _rec: &crate::journal::record::JournalRecord) -> Result<Keep> {
        Ok(match self.drop {
            true => Keep::Drop,
            false => Keep::KeyDelta(b"ix".to_vec()),
        })
    }
}

/// Where reclaiming in place is on and holes can be punched, a run whose
/// garbage would be kept whole as key deltas is copied (copying writes
/// them small), and a run of records dropped outright is punched.
#[test]
fn garbage_kept_as_key_deltas_is_copied_not_punched() {
    for drop in [false, true] {
        let d = tempfile::tempdir().expect("test setup");
        if !crate::journal::punch::probe_punch(d.path()) {
            println!("skipped: this file system cannot punch holes");
            return;
        }
        let stats = Arc::new(Stats::default());
        let opts = crate::journal::JournalOptions::for_tests(64 * 1024);
        let journal = Arc::new(Journal::open(d.path(), opts, Arc::clone(&stats)).expect("open"));
        fill(&journal, 600, 1000);
        let policy = CompactionPolicy {
            punch: crate::Punch::On,
            ..policy()
        };
        let live: LivenessFactory = Box::new(move || Box::new(Deltas { drop }));
        let c = Compactor::new(Arc::clone(&journal), Arc::clone(&stats), policy, live);
        let r = c.run().expect("run");
        assert!(r.compacted, "all garbage: a run is made");
        let short = stats
            .compaction_punch_short_runs
            .load(std::sync::atomic::Ordering::Relaxed);
        if drop {
            assert!(r.punched, "dropped records are punched");
            assert_eq!(short, 0);
        } else {
            assert!(!r.punched, "key deltas are copied");
            assert!(r.key_deltas > 0, "{r:?}");
            assert!(r.bytes_out < r.bytes_in / 2, "{r:?}");
            assert_eq!(short, 1);
        }
    }
}
