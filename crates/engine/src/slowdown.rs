//! Write slowdown: once the journal's garbage passes a limit, writes are
//! paced to the rate journal compaction reclaims space.
//!
//! The journal never rewrites in place: an overwrite leaves the old record
//! as garbage until compaction copies its file's live records out and
//! deletes the file. The garbage trigger (`compaction::drain_garbage`) runs
//! compactions back to back above `Config::compaction_max_garbage_pct`,
//! but a write load can outrun them. A long run of seed 003's NHS mix here
//! (28 KB semi-compressible values, 35 % writes, 16 workers) appended
//! ~157 MB/s to the journal while back-to-back runs reclaimed ~66 MB/s; the
//! journal grew to 63 GB over ~17 GB of live data in ten minutes, until the
//! disk was nearly full. Nothing bounded it.
//!
//! Above `Config::journal_slowdown_garbage_pct` (default 75, where the
//! trigger also stops pacing its reads) each write group waits before it
//! is written, long enough that the journal is written no faster than
//! compaction reclaims ([`allowed_rate`]): at the limit, the measured
//! reclaim rate (bytes reclaimed per run over the time since the previous
//! run ended, so the estimates between runs count); falling linearly to a tenth of it [`SLOWDOWN_SPAN_PCT`]
//! points above; never below [`SLOWDOWN_MIN_RATE`]. So garbage stops
//! growing at the limit and any excess is worked off, and writers slow
//! down smoothly, by bytes ÷ rate per group ([`pace`], at most
//! [`SLOWDOWN_MAX_WAIT`] each), instead of stopping. Reads are never paced.
//!
//! While the disk is low (`crate::diskspace`) writes are paced whatever
//! the garbage: at the reclaim rate at the low mark (the journal stops
//! growing while compaction keeps reclaiming), falling to a tenth of it at
//! the minimum, so the disk fills slowly if at all.
//!
//! The inputs come from the compaction thread (the garbage estimate each
//! time the trigger makes one, and each run's reclaimed bytes and
//! duration) and from the write path (the disk guard's latest depth, at
//! every write group). Neither pressure paces before some compaction run
//! of the store (trigger, schedule or by hand) has measured a reclaim rate:
//! with the trigger off there may never be one, and before the first run
//! there is nothing to pace to. Pacing a store that had not yet run at the
//! floor held each vnode of a node at 1 MiB/s while it waited for its first
//! run (a slot: `compaction::slots`) or made it, below its share of the
//! load: on three nodes at 1,200 ops/s of 25 KB inserts (2026-12-06) a
//! third of the vnodes were paced for a few seconds of their first run,
//! their writes queued behind the pace and the cluster's PUT p99.9 went
//! from ~2 ms to 36–285 ms for a minute. Unpaced, the garbage grows for one run's wait and
//! duration at most (the store most over its limit gets the next slot),
//! and the disk guard stands behind it. A store that shares
//! its disk with others (a node's vnodes, `Config::disk_pace`) leaves both
//! its garbage and the low disk to the shared pace ([`crate::diskpace`]):
//! the garbage of all of them against the same limit, one clock for all
//! of them at what all of them reclaim (the floor: the node's one while
//! the disk is low, one store's for each member that has run for the
//! garbage) — so one store over the limit among others under it waits for
//! nothing, and a node over it slows every write a little rather than one
//! store's writes a lot.
//! [`allowed_rate`] and the pacing clock ([`crate::pace`]) are pure; [`Slowdown`] keeps their inputs
//! in atomics and the pacing clock under a mutex that only the holder of
//! the store's write lock takes.

use crate::diskpace::{DiskPace, LowDisk, Member};
pub use crate::pace::{
    garbage_pressure, pace, rate_at, SLOWDOWN_MAX_WAIT, SLOWDOWN_MIN_RATE, SLOWDOWN_SPAN_PCT,
};
use parking_lot::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The journal write rate allowed (bytes a second) when the estimated
/// garbage is `garbage_pct` and compaction reclaims `reclaim_bps` bytes a
/// second; `None`: not paced (at or below `limit_pct`, or `limit_pct` of
/// 100 or more: off).
pub fn allowed_rate(garbage_pct: f64, limit_pct: f64, reclaim_bps: u64) -> Option<u64> {
    garbage_pressure(garbage_pct, limit_pct).map(|p| rate_at(p, reclaim_bps))
}

/// A store's write slowdown: the inputs of [`allowed_rate`] and the pacing
/// clock.
#[derive(Debug)]
pub struct Slowdown {
    limit_pct: f64,
    /// While the disk is low (`crate::diskspace`), how deep into the low
    /// zone it is (0..=1), in millionths; `u64::MAX` otherwise.
    disk_depth_micro: AtomicU64,
    /// While the disk is low, the bytes free above its minimum.
    disk_headroom: AtomicU64,
    /// The latest garbage estimate, in thousandths of a percent.
    garbage_milli_pct: AtomicU64,
    /// Compaction's reclaim rate, bytes a second (mean of the last run and
    /// the previous value); `u64::MAX` before the first run, which paces
    /// nothing (runs that freed nothing measure 0: the floor).
    reclaim_bps: AtomicU64,
    /// When the bytes of the groups paced so far are paid for; `None` while
    /// not paced.
    next_free: Mutex<Option<Instant>>,
    /// This store's part in the pace of the stores sharing its disk, which
    /// then paces the garbage and a low disk instead of this slowdown.
    shared: Option<Member>,
}

impl Slowdown {
    /// A slowdown above `limit_pct` garbage (100 or more: never).
    pub fn new(limit_pct: f64) -> Self {
        Slowdown {
            limit_pct,
            disk_depth_micro: AtomicU64::new(u64::MAX),
            disk_headroom: AtomicU64::new(0),
            garbage_milli_pct: AtomicU64::new(0),
            reclaim_bps: AtomicU64::new(u64::MAX),
            next_free: Mutex::new(None),
            shared: None,
        }
    }

    /// The slowdown, leaving the garbage and a low disk to `shared` (the
    /// pace of the stores on the same disk, [`crate::diskpace`]) as one of
    /// its members: it tells the shared pace its garbage and what its runs
    /// reclaim.
    pub fn with_disk_pace(mut self, shared: Option<DiskPace>) -> Self {
        self.shared = shared.map(|p| p.member());
        self
    }

    /// Takes a new garbage estimate: `garbage_bytes` of the closed journal
    /// files' `closed_bytes` (both 0: nothing compaction could act on).
    pub fn observe_garbage(&self, garbage_bytes: u64, closed_bytes: u64) {
        debug_assert!(
            garbage_bytes <= closed_bytes,
            "{garbage_bytes} > {closed_bytes}"
        );
        let pct = if closed_bytes == 0 {
            0.0
        } else {
            100.0 * garbage_bytes as f64 / closed_bytes as f64
        };
        let milli = (pct.clamp(0.0, 100.0) * 1000.0) as u64;
        self.garbage_milli_pct.store(milli, Ordering::Relaxed);
        if let Some(shared) = &self.shared {
            shared.observe_garbage(garbage_bytes.min(closed_bytes), closed_bytes);
        }
    }

    /// Takes the disk guard's depth: `Some(d)` while the disk is low, `d`
    /// from 0 at the low mark to 1 at the minimum
    /// ([`crate::diskspace::DiskGuard::depth`]); `None` otherwise.
    pub fn observe_disk(&self, depth: Option<f64>) {
        debug_assert!(depth.is_none_or(|d| (0.0..=1.0).contains(&d)), "{depth:?}");
        let micro = depth.map_or(u64::MAX, |d| (d.clamp(0.0, 1.0) * 1e6) as u64);
        self.disk_depth_micro.store(micro, Ordering::Relaxed);
    }

    /// Takes the bytes free above the disk's minimum (read by the shared
    /// pace while the disk is low).
    pub fn observe_disk_headroom(&self, bytes: u64) {
        self.disk_headroom.store(bytes, Ordering::Relaxed);
    }

    /// The low disk last observed, as the shared pace takes it.
    fn low_disk(&self) -> Option<LowDisk> {
        self.disk_depth().map(|depth| LowDisk {
            depth,
            headroom: self.disk_headroom.load(Ordering::Relaxed),
        })
    }

    /// The disk depth last observed (`None`: the disk is not low).
    pub fn disk_depth(&self) -> Option<f64> {
        match self.disk_depth_micro.load(Ordering::Relaxed) {
            u64::MAX => None,
            m => Some(m as f64 / 1e6),
        }
    }

    /// Takes a compaction run that reclaimed `bytes` in `took`.
    pub fn observe_run(&self, bytes: u64, took: Duration) {
        let secs = took.as_secs_f64().max(1e-3);
        let sample = (bytes as f64 / secs) as u64;
        let old = self.reclaim_bps.load(Ordering::Relaxed);
        let new = if old == u64::MAX {
            sample
        } else {
            old / 2 + sample / 2
        };
        let new = new.min(u64::MAX - 1);
        self.reclaim_bps.store(new, Ordering::Relaxed);
        if let Some(shared) = &self.shared {
            shared.observe_run(new, bytes);
        }
    }

    /// The latest garbage estimate, percent.
    pub fn garbage_pct(&self) -> f64 {
        self.garbage_milli_pct.load(Ordering::Relaxed) as f64 / 1000.0
    }

    /// The write rate allowed now (bytes a second), `None` if not paced.
    ///
    /// The stronger of two pressures, once a compaction run has measured a
    /// reclaim rate: the garbage over the limit, and (while the disk is
    /// low) the disk's depth into the low zone. Without a reclaim rate
    /// there is nothing to pace to (see the module doc): a store's first
    /// run is left to bound its garbage, and with the trigger off a low
    /// disk is left to the guard's refusal at its minimum, rather than
    /// slowing every write to [`SLOWDOWN_MIN_RATE`]. With a shared disk
    /// pace neither pressure is this rate's: always `None` (see
    /// [`Self::wait_for`] and [`Self::paced`]).
    pub fn rate(&self) -> Option<u64> {
        if self.shared.is_some() {
            return None;
        }
        let reclaim = match self.reclaim_bps.load(Ordering::Relaxed) {
            u64::MAX => return None,
            r => r,
        };
        let garbage = garbage_pressure(self.garbage_pct(), self.limit_pct);
        let disk = self.disk_depth();
        let pressure = match (garbage, disk) {
            (Some(g), Some(d)) => g.max(d),
            (g, d) => g.or(d)?,
        };
        Some(rate_at(pressure, reclaim))
    }

    /// Whether a write group would wait now for the garbage over the
    /// limit, this store's or (with a shared disk pace) the node's. A low
    /// disk is the disk guard's to tell (`DiskGuard::last_state`).
    pub fn paced(&self) -> bool {
        match &self.shared {
            Some(shared) => shared.pace().garbage_paced(self.limit_pct),
            None => self.rate().is_some(),
        }
    }

    /// How long a group of `bytes` waits before it is written (zero when
    /// not paced): this store's own pace or, with a shared disk pace, the
    /// node's (for the node's garbage and a low disk). Call it under the
    /// store's write lock, once per group.
    pub fn wait_for(&self, bytes: u64) -> Duration {
        match &self.shared {
            Some(shared) => shared
                .pace()
                .wait_for(self.limit_pct, self.low_disk(), bytes),
            None => self.own_wait_for(bytes),
        }
    }

    fn own_wait_for(&self, bytes: u64) -> Duration {
        let mut next_free = self.next_free.lock();
        let Some(rate) = self.rate() else {
            *next_free = None;
            return Duration::ZERO;
        };
        let now = Instant::now();
        let (wait, next) = pace(next_free.unwrap_or(now), now, bytes, rate);
        *next_free = Some(next);
        wait
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIB: u64 = 1 << 20;

    #[test]
    fn no_pace_at_or_below_the_limit_or_when_off() {
        assert_eq!(allowed_rate(50.0, 70.0, 100 * MIB), None);
        assert_eq!(allowed_rate(70.0, 70.0, 100 * MIB), None);
        assert_eq!(allowed_rate(99.0, 100.0, 100 * MIB), None);
        assert_eq!(allowed_rate(f64::NAN, 70.0, 100 * MIB), None);
    }

    #[test]
    fn rate_falls_from_the_reclaim_rate_to_a_tenth() {
        let r = |pct| allowed_rate(pct, 70.0, 100 * MIB).unwrap_or(0);
        assert!(r(70.000_001).abs_diff(100 * MIB) < 100);
        assert!(r(75.0).abs_diff(55 * MIB) <= 1);
        assert!(r(80.0).abs_diff(10 * MIB) <= 1);
        assert!(r(99.0).abs_diff(10 * MIB) <= 1, "a tenth beyond the span");
        // Never below the floor (`Slowdown` paces nothing before a run
        // measured a rate: `garbage_needs_a_reclaim_rate_to_pace`).
        assert_eq!(allowed_rate(90.0, 70.0, 0), Some(SLOWDOWN_MIN_RATE));
        assert_eq!(allowed_rate(90.0, 70.0, 2 * MIB), Some(SLOWDOWN_MIN_RATE));
    }

    #[test]
    fn pace_charges_each_group_its_bytes() {
        let t0 = Instant::now();
        // First group: no wait, the clock moves by bytes / rate.
        let (w, next) = pace(t0, t0, 10 * MIB, 100 * MIB);
        assert_eq!(w, Duration::ZERO);
        assert_eq!(next - t0, Duration::from_millis(100));
        // A group arriving 40 ms later waits the remaining 60 ms.
        let (w, next) = pace(next, t0 + Duration::from_millis(40), MIB, 100 * MIB);
        assert_eq!(w, Duration::from_millis(60));
        assert_eq!(next - t0, Duration::from_millis(110));
        // A group after the clock: no wait, no credit saved up.
        let late = t0 + Duration::from_secs(5);
        let (w, next) = pace(next, late, MIB, 100 * MIB);
        assert_eq!(w, Duration::ZERO);
        assert_eq!(next - late, Duration::from_millis(10));
    }

    #[test]
    fn a_wait_is_at_most_the_cap() {
        let t0 = Instant::now();
        let (w, next) = pace(t0 + Duration::from_secs(30), t0, MIB, MIB);
        assert_eq!(w, SLOWDOWN_MAX_WAIT);
        assert_eq!(next - t0, SLOWDOWN_MAX_WAIT + Duration::from_secs(1));
    }

    #[test]
    fn slowdown_follows_its_inputs() {
        let s = Slowdown::new(70.0);
        assert_eq!(s.wait_for(MIB), Duration::ZERO, "no estimate yet");
        s.observe_run(400 * MIB, Duration::from_secs(4));
        s.observe_garbage(800, 1000);
        assert!(s.rate().is_some_and(|r| r.abs_diff(10 * MIB) <= 1));
        assert_eq!(
            s.wait_for(MIB),
            Duration::ZERO,
            "the first group opens the clock"
        );
        let w = s.wait_for(MIB);
        assert!(
            w > Duration::from_millis(50) && w <= Duration::from_millis(100),
            "{w:?}"
        );
        // A low disk paces whatever the garbage, by its depth; the
        // stronger pressure wins.
        s.observe_garbage(100, 1000);
        assert_eq!(s.rate(), None);
        s.observe_disk(Some(0.0));
        let r = s.rate().unwrap_or(0);
        assert!(
            r.abs_diff(100 * MIB) <= 1,
            "the reclaim rate at the low mark: {r}"
        );
        s.observe_disk(Some(0.5));
        assert!(s.rate().is_some_and(|r| r.abs_diff(55 * MIB) <= 1));
        s.observe_garbage(800, 1000);
        let r = s.rate().unwrap_or(0);
        assert!(
            r.abs_diff(10 * MIB) <= 1,
            "garbage pressure is stronger: {r}"
        );
        s.observe_disk(None);
        // The rate is the mean of the runs: (100 + 50) / 2 MiB/s.
        s.observe_run(100 * MIB, Duration::from_secs(2));
        s.observe_garbage(750, 1000);
        let r = s.rate().unwrap_or(0);
        assert!(r.abs_diff(75 * MIB * 55 / 100) <= 1, "{r}");
        s.observe_garbage(600, 1000);
        assert_eq!(
            s.wait_for(100 * MIB),
            Duration::ZERO,
            "below the limit: no pace"
        );
        assert_eq!(Slowdown::new(100.0).rate(), None);
    }

    /// Garbage over the limit paces nothing until a run of the store has
    /// measured a reclaim rate: before it, the floor held vnodes waiting
    /// for their first run below their share of the load.
    #[test]
    fn garbage_needs_a_reclaim_rate_to_pace() {
        let s = Slowdown::new(75.0);
        s.observe_garbage(950, 1000);
        assert_eq!(s.rate(), None, "no run yet");
        for _ in 0..3 {
            assert_eq!(s.wait_for(MIB), Duration::ZERO);
        }
        s.observe_run(20 * MIB, Duration::from_secs(2));
        assert!(
            s.rate().is_some_and(|r| r == SLOWDOWN_MIN_RATE),
            "a tenth of 10 MiB/s is under the floor: {:?}",
            s.rate()
        );
        s.wait_for(MIB);
        assert!(s.wait_for(MIB) > Duration::from_millis(900));
        // Runs that free nothing measure a rate of 0: paced at the floor.
        let t = Slowdown::new(75.0);
        t.observe_run(0, Duration::from_secs(2));
        t.observe_garbage(950, 1000);
        assert_eq!(t.rate(), Some(SLOWDOWN_MIN_RATE));
    }

    /// A low disk paces nothing until a run has measured a reclaim rate
    /// (with the trigger off there may never be one).
    #[test]
    fn a_low_disk_needs_a_reclaim_rate_to_pace() {
        let s = Slowdown::new(75.0);
        s.observe_disk(Some(0.8));
        assert_eq!(s.disk_depth(), Some(0.8));
        assert_eq!(s.rate(), None, "no run yet");
        assert_eq!(s.wait_for(MIB), Duration::ZERO);
        s.observe_run(200 * MIB, Duration::from_secs(2));
        let r = s.rate().unwrap_or(0);
        assert!(
            r.abs_diff(28 * MIB) <= 1,
            "100 MiB/s × (1 − 0.9 × 0.8): {r}"
        );
        s.observe_disk(None);
        assert_eq!(s.rate(), None);
    }

    /// Stores sharing a disk pace are paced together while the disk is low,
    /// from the first write (the node's floor), and their runs feed it.
    #[test]
    fn a_shared_disk_paces_all_its_stores_on_one_clock() {
        let shared = DiskPace::new();
        let a = Slowdown::new(75.0).with_disk_pace(Some(shared.clone()));
        let b = Slowdown::new(75.0).with_disk_pace(Some(shared.clone()));
        for s in [&a, &b] {
            s.observe_disk(Some(0.0));
        }
        assert_eq!(a.rate(), None, "the disk is the shared pace's");
        assert_eq!(a.wait_for(SLOWDOWN_MIN_RATE / 4), Duration::ZERO);
        let w = b.wait_for(1);
        assert!(
            w > Duration::from_millis(200) && w <= Duration::from_millis(250),
            "b waits for a's quarter second at the node's floor: {w:?}"
        );
        // Runs of either count for both; not low: no wait.
        a.observe_run(120 * MIB, Duration::from_secs(1));
        assert_eq!(shared.reclaim_bps(), 2 * MIB);
        for s in [&a, &b] {
            s.observe_disk(None);
        }
        assert_eq!(b.wait_for(MIB << 10), Duration::ZERO);
        assert_eq!(a.wait_for(1), Duration::ZERO);
    }

    /// With a shared pace a store's own garbage over the limit paces
    /// nothing while the node's is under it (the node's pace decides).
    #[test]
    fn a_shared_pace_decides_the_garbage() {
        let shared = DiskPace::new();
        let a = Slowdown::new(75.0).with_disk_pace(Some(shared.clone()));
        let b = Slowdown::new(75.0).with_disk_pace(Some(shared.clone()));
        a.observe_run(100 * MIB, Duration::from_secs(1));
        b.observe_run(100 * MIB, Duration::from_secs(1));
        a.observe_garbage(930, 1000);
        b.observe_garbage(300, 1000);
        assert_eq!(a.rate(), None);
        assert!(!a.paced(), "a is at 93 %, the node at 61.5 %");
        for _ in 0..3 {
            assert_eq!(a.wait_for(100 * MIB), Duration::ZERO);
        }
        b.observe_garbage(900, 1000);
        assert!(a.paced() && b.paced(), "the node at 91.5 %");
        let r = shared.garbage_rate(75.0).unwrap_or(0);
        assert!(r.abs_diff(20 * MIB) <= 1, "a tenth of 200 MiB/s: {r}");
        assert_eq!(b.wait_for(20 * MIB), Duration::ZERO);
        let w = a.wait_for(0);
        assert!(
            w > Duration::from_millis(900) && w <= Duration::from_secs(1),
            "a waits for b's second at 20 MiB/s: {w:?}"
        );
    }
}
