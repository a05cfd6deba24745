//! The write pace the stores of one node share: while their disk is low,
//! and while their journals together hold more garbage than the slowdown's
//! limit.
//!
//! A store's write slowdown (`crate::slowdown`) paces its own writes to its
//! own compaction's reclaim rate, never below
//! [`crate::pace::SLOWDOWN_MIN_RATE`]. That bounds a store that has a
//! disk to itself. A node keeps one store per vnode, 20–64 of them on one
//! disk, and each paced alone: a one-hour run of Cluster Test 1 on three
//! nodes (22 vnodes each, 8 KB values, 2026-12-03) wrote ~0.35 MB/s a vnode
//! — a third of each store's floor — and went from the low mark (5 % free)
//! to the refusal at the minimum (1 %, 11 GB later) in under eight minutes
//! at full speed: no store ever waited. A store's reclaim rate alone says
//! nothing of the disk either: what the disk gains is what all its stores'
//! compactions reclaim.
//!
//! A [`DiskPace`] is shared by the stores of one node
//! (`Config::disk_pace`; the node makes one for its data directory). While
//! the disk is low, every write group of every member is paced on one
//! clock, at the bytes all members' compaction runs reclaimed over the last
//! [`RECLAIM_WINDOW`] at the low mark, falling to a tenth of it at the
//! minimum ([`crate::pace::rate_at`]), and never below one
//! [`crate::pace::SLOWDOWN_MIN_RATE`] for the whole node — not one per
//! store — nor below the space left above the minimum spread over
//! [`LOW_ZONE_LIFE`] (an hour). So the node's journals stop growing at the
//! low mark unless compaction frees space, and a disk filled by live data
//! (nothing to reclaim) loses what is left above the minimum no faster than
//! by a share of an hour: that space falls by about 63 % an hour, until
//! what is left lasts an hour at the 1 MiB/s floor. The operator gets at
//! least an hour between the low-disk warning and the refusal, on a large
//! disk without dropping the node to 1 MiB/s at the mark (on this
//! machine's 270 GB disk the low zone is 10.8 GB: 3 MB/s at the mark).
//!
//! The garbage slowdown is the node's too. Paced alone, each store held
//! its own garbage under the limit (`journal_slowdown_garbage_pct`): at
//! the maximum rate on three nodes (25 KB inserts, 22 vnodes a node,
//! 2026-12-06) the node's journals held 57–69 % garbage in all, under the
//! limit of 75, while now one vnode now another stood at 80–93 % waiting
//! 12–53 s for a compaction slot. That vnode was paced near a tenth of its
//! own reclaim rate, its writes (on its worker) queued 24–323 deep, and
//! the PUTs that reached it waited up to 4.2 s while the others waited for
//! nothing: PUT mean(max) 1.2–1.4 s. The space that garbage takes is the
//! disk's, and one store over the limit says nothing of it while the
//! others are under; the next slot goes to the store most over its limit
//! anyway (`compaction::slots`). So each member reports its latest garbage
//! estimate and reclaim rate here ([`Member`]), and over the limit every
//! write group of every member is paced on the node's clock at the
//! members' reclaim rates summed ([`DiskPace::garbage_rate`]): the same
//! slowdown, spread over every write of the node. The clock is the low
//! disk's: a group waits for the stronger pressure.

use crate::pace::{garbage_pressure, pace, rate_at};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The reclaim rate is what the members' runs reclaimed over this long.
pub const RECLAIM_WINDOW: Duration = Duration::from_secs(60);

/// The least time the low zone (from the low mark to the minimum) lasts
/// at the floor rate: the node may write at most the space left above the
/// minimum divided by this (or the reclaim rate, if higher).
pub const LOW_ZONE_LIFE: Duration = Duration::from_secs(3600);

/// Where a low disk stands, as the pace of its writes needs it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LowDisk {
    /// How deep into the low zone (0 at the low mark, 1 at the minimum).
    pub depth: f64,
    /// Bytes free above the minimum (`disk_min_free_pct`).
    pub headroom: u64,
}

/// The most runs remembered in the window (older ones are merged into the
/// newest kept, so the sum stays right and the queue bounded).
pub const RECLAIM_RUNS_MAX: usize = 1024;

/// A pace shared by the stores of one node on one disk (cheap to clone:
/// the clones are one pace). Stores take part through a [`Member`].
#[derive(Debug, Clone, Default)]
pub struct DiskPace {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Bytes reclaimed by the members' runs, with when, oldest first.
    reclaimed: Mutex<VecDeque<(Instant, u64)>>,
    /// When the bytes of the groups paced so far are paid for; `None` while
    /// neither the disk is low nor the garbage over the limit.
    next_free: Mutex<Option<Instant>>,
    /// Whether `next_free` is set: while not paced a write group reads
    /// this flag and the sums below only, and never takes the node-wide
    /// lock.
    pacing: AtomicBool,
    /// The members' latest garbage estimates: closed journal bytes and the
    /// garbage in them, summed (each member adds the change of its own).
    closed_bytes: AtomicU64,
    garbage_bytes: AtomicU64,
    /// The members' reclaim rates (bytes a second), summed, and how many
    /// members have measured one.
    reclaim_bps_sum: AtomicU64,
    rated: AtomicU64,
}

impl DiskPace {
    /// A new pace with nothing reclaimed yet.
    pub fn new() -> Self {
        DiskPace::default()
    }

    /// A member's compaction run reclaimed `bytes` (now).
    pub fn observe_reclaim(&self, bytes: u64) {
        self.observe_reclaim_at(Instant::now(), bytes);
    }

    fn observe_reclaim_at(&self, now: Instant, bytes: u64) {
        if bytes == 0 {
            return;
        }
        let mut q = self.inner.reclaimed.lock();
        prune(&mut q, now);
        if q.len() >= RECLAIM_RUNS_MAX {
            // Fold the oldest into the next: the window's sum is kept.
            if let (Some((_, b)), Some(next)) = (q.pop_front(), q.front_mut()) {
                next.1 = next.1.saturating_add(b);
            }
        }
        q.push_back((now, bytes));
        debug_assert!(q.len() <= RECLAIM_RUNS_MAX);
    }

    /// The bytes a second all members reclaimed over the last
    /// [`RECLAIM_WINDOW`].
    pub fn reclaim_bps(&self) -> u64 {
        self.reclaim_bps_at(Instant::now())
    }

    fn reclaim_bps_at(&self, now: Instant) -> u64 {
        let mut q = self.inner.reclaimed.lock();
        prune(&mut q, now);
        let sum: u64 = q.iter().map(|(_, b)| *b).fold(0, u64::saturating_add);
        (sum as f64 / RECLAIM_WINDOW.as_secs_f64()) as u64
    }

    /// A new member: a store that reports its garbage and reclaim rate
    /// here and is paced on the node's clock.
    pub fn member(&self) -> Member {
        Member {
            pace: self.clone(),
            closed: AtomicU64::new(0),
            garbage: AtomicU64::new(0),
            reclaim: AtomicU64::new(u64::MAX),
        }
    }

    /// The members' garbage, percent of their closed journal bytes (0 with
    /// none).
    pub fn garbage_pct(&self) -> f64 {
        let garbage = self.inner.garbage_bytes.load(Ordering::Acquire);
        let closed = self.inner.closed_bytes.load(Ordering::Acquire);
        if closed == 0 {
            return 0.0;
        }
        (100.0 * garbage as f64 / closed as f64).min(100.0)
    }

    /// The node's write rate for its garbage over `limit_pct` (bytes a
    /// second): [`rate_at`] the pressure over the limit, of the members'
    /// reclaim rates summed, and never below one
    /// [`crate::pace::SLOWDOWN_MIN_RATE`] for each member that has measured
    /// a rate (the floors they had paced alone: runs that free little
    /// must not hold a node of 64 vnodes to one store's floor); `None` at
    /// or under the limit, or before any member has measured a reclaim
    /// rate (as a store alone: `crate::slowdown`).
    pub fn garbage_rate(&self, limit_pct: f64) -> Option<u64> {
        let rated = self.inner.rated.load(Ordering::Acquire);
        if rated == 0 {
            return None;
        }
        let pressure = garbage_pressure(self.garbage_pct(), limit_pct)?;
        let floor = rated.saturating_mul(crate::pace::SLOWDOWN_MIN_RATE);
        let sum = self.inner.reclaim_bps_sum.load(Ordering::Acquire);
        Some(rate_at(pressure, sum).max(floor))
    }

    /// Whether a member's write would be paced now (with the garbage limit
    /// `limit_pct`; a low disk is the member's store's to tell).
    pub fn garbage_paced(&self, limit_pct: f64) -> bool {
        self.garbage_rate(limit_pct).is_some()
    }

    /// How long a member's group of `bytes` waits, with the members'
    /// garbage limit `limit_pct` and the disk `low` (`None`: not low): at
    /// the slower of the garbage's and the low disk's rates, on one clock;
    /// neither: no wait, the clock stops. Call it once per group, under the
    /// member's write lock.
    pub fn wait_for(&self, limit_pct: f64, low: Option<LowDisk>, bytes: u64) -> Duration {
        self.wait_for_at(Instant::now(), limit_pct, low, bytes)
    }

    fn wait_for_at(
        &self,
        now: Instant,
        limit_pct: f64,
        low: Option<LowDisk>,
        bytes: u64,
    ) -> Duration {
        let garbage = self.garbage_rate(limit_pct);
        let disk = low.map(|low| low_disk_rate(low, self.reclaim_bps_at(now)));
        let rate = match (garbage, disk) {
            (Some(g), Some(d)) => Some(g.min(d)),
            (g, d) => g.or(d),
        };
        let Some(rate) = rate else {
            if self.inner.pacing.load(Ordering::Relaxed) {
                *self.inner.next_free.lock() = None;
                self.inner.pacing.store(false, Ordering::Relaxed);
            }
            return Duration::ZERO;
        };
        let mut next_free = self.inner.next_free.lock();
        let (wait, next) = pace(next_free.unwrap_or(now), now, bytes, rate);
        *next_free = Some(next);
        self.inner.pacing.store(true, Ordering::Relaxed);
        wait
    }
}

/// One store's part in a [`DiskPace`]: what it last reported, taken back
/// out of the node's sums when it is dropped (a vnode handed off or
/// closed).
#[derive(Debug)]
pub struct Member {
    pace: DiskPace,
    closed: AtomicU64,
    garbage: AtomicU64,
    /// `u64::MAX` before the store's first run.
    reclaim: AtomicU64,
}

impl Member {
    /// The pace this member is part of.
    pub fn pace(&self) -> &DiskPace {
        &self.pace
    }

    /// Takes the store's latest garbage estimate: `garbage_bytes` of its
    /// `closed_bytes` of closed journal files.
    pub fn observe_garbage(&self, garbage_bytes: u64, closed_bytes: u64) {
        debug_assert!(
            garbage_bytes <= closed_bytes,
            "{garbage_bytes} > {closed_bytes}"
        );
        let inner = &self.pace.inner;
        let closed = closed_bytes.wrapping_sub(self.closed.swap(closed_bytes, Ordering::Relaxed));
        let garbage =
            garbage_bytes.wrapping_sub(self.garbage.swap(garbage_bytes, Ordering::Relaxed));
        // The sums are two atomics: the change that lowers the node's
        // share goes in first, so a reader between them never sees more
        // garbage than before or after (a spurious pace).
        let (closed_grows, garbage_falls) = (closed as i64 > 0, (garbage as i64) < 0);
        if closed_grows {
            inner.closed_bytes.fetch_add(closed, Ordering::AcqRel);
        }
        if garbage_falls {
            inner.garbage_bytes.fetch_add(garbage, Ordering::AcqRel);
        }
        if !closed_grows {
            inner.closed_bytes.fetch_add(closed, Ordering::AcqRel);
        }
        if !garbage_falls {
            inner.garbage_bytes.fetch_add(garbage, Ordering::AcqRel);
        }
    }

    /// Takes the store's reclaim rate (bytes a second, as its slowdown
    /// measures it) after a run that reclaimed `reclaimed` bytes now.
    pub fn observe_run(&self, reclaim_bps: u64, reclaimed: u64) {
        debug_assert!(reclaim_bps != u64::MAX);
        self.pace.observe_reclaim(reclaimed);
        let inner = &self.pace.inner;
        let old = self.reclaim.swap(reclaim_bps, Ordering::Relaxed);
        // The rate goes into the sum before the member counts as rated, so
        // a reader never paces to a sum without it.
        let delta = reclaim_bps.wrapping_sub(if old == u64::MAX { 0 } else { old });
        inner.reclaim_bps_sum.fetch_add(delta, Ordering::AcqRel);
        if old == u64::MAX {
            inner.rated.fetch_add(1, Ordering::AcqRel);
        }
    }
}

impl Drop for Member {
    fn drop(&mut self) {
        // Garbage out before the bytes it is part of, the member uncounted
        // before its rate leaves the sum (see `observe_garbage`).
        let inner = &self.pace.inner;
        let garbage = *self.garbage.get_mut();
        inner.garbage_bytes.fetch_sub(garbage, Ordering::AcqRel);
        let closed = *self.closed.get_mut();
        inner.closed_bytes.fetch_sub(closed, Ordering::AcqRel);
        match *self.reclaim.get_mut() {
            u64::MAX => {}
            r => {
                inner.rated.fetch_sub(1, Ordering::AcqRel);
                inner.reclaim_bps_sum.fetch_sub(r, Ordering::AcqRel);
            }
        }
    }
}

/// The node's write rate on a `low` disk when its stores reclaim
/// `reclaim_bps`: [`rate_at`] its depth, or the headroom spread over
/// [`LOW_ZONE_LIFE`] if that is more.
pub fn low_disk_rate(low: LowDisk, reclaim_bps: u64) -> u64 {
    let by_reclaim = rate_at(low.depth.clamp(0.0, 1.0), reclaim_bps);
    by_reclaim.max(low.headroom / LOW_ZONE_LIFE.as_secs())
}

/// Drops what left the window.
fn prune(q: &mut VecDeque<(Instant, u64)>, now: Instant) {
    while q
        .front()
        .is_some_and(|(at, _)| now.saturating_duration_since(*at) > RECLAIM_WINDOW)
    {
        q.pop_front();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pace::{SLOWDOWN_MAX_WAIT, SLOWDOWN_MIN_RATE};

    const MIB: u64 = 1 << 20;

    /// A disk `depth` into the low zone, with too little headroom to
    /// matter.
    fn low(depth: f64) -> Option<LowDisk> {
        Some(LowDisk { depth, headroom: 0 })
    }

    #[test]
    fn the_reclaim_rate_is_the_window_sum_of_all_members() {
        let p = DiskPace::new();
        let other = p.clone();
        let t0 = Instant::now();
        assert_eq!(p.reclaim_bps_at(t0), 0);
        p.observe_reclaim_at(t0, 30 * MIB);
        other.observe_reclaim_at(t0 + Duration::from_secs(10), 30 * MIB);
        assert_eq!(p.reclaim_bps_at(t0 + Duration::from_secs(20)), MIB);
        // The first run leaves the window, then the second.
        let r = p.reclaim_bps_at(t0 + Duration::from_secs(65));
        assert_eq!(r, MIB / 2);
        assert_eq!(p.reclaim_bps_at(t0 + Duration::from_secs(75)), 0);
    }

    #[test]
    fn the_window_stays_bounded_and_keeps_its_sum() {
        let p = DiskPace::new();
        let t0 = Instant::now();
        for i in 0..(RECLAIM_RUNS_MAX as u64 + 100) {
            p.observe_reclaim_at(t0 + Duration::from_millis(i), 60);
        }
        assert_eq!(p.inner.reclaimed.lock().len(), RECLAIM_RUNS_MAX);
        let bps = p.reclaim_bps_at(t0 + Duration::from_secs(2));
        assert_eq!(bps, (RECLAIM_RUNS_MAX as u64 + 100), "60 B each / 60 s");
    }

    #[test]
    fn members_are_paced_on_one_clock() {
        let a = DiskPace::new();
        let b = a.clone();
        let t0 = Instant::now();
        // Nothing reclaimed: the node's floor, once for all members.
        assert_eq!(
            a.wait_for_at(t0, 75.0, low(0.0), SLOWDOWN_MIN_RATE / 2),
            Duration::ZERO
        );
        let w = b.wait_for_at(t0, 75.0, low(0.0), SLOWDOWN_MIN_RATE / 2);
        assert_eq!(w, Duration::from_millis(500), "b waits for a's bytes");
        let w = a.wait_for_at(t0, 75.0, low(0.0), 1);
        assert!(w >= Duration::from_millis(999), "{w:?}");
        // A disk no longer low stops the clock.
        assert_eq!(a.wait_for_at(t0, 75.0, None, 1 << 30), Duration::ZERO);
        assert_eq!(b.wait_for_at(t0, 75.0, low(0.0), 1), Duration::ZERO);
    }

    #[test]
    fn the_rate_follows_what_was_reclaimed_and_the_depth() {
        let p = DiskPace::new();
        let t0 = Instant::now();
        p.observe_reclaim_at(t0, 600 * MIB);
        let at = t0 + Duration::from_secs(1);
        // 10 MiB/s reclaimed: 10 MiB/s allowed at the low mark...
        assert_eq!(p.wait_for_at(at, 75.0, low(0.0), 10 * MIB), Duration::ZERO);
        let w = p.wait_for_at(at, 75.0, low(0.0), 0);
        assert_eq!(w, Duration::from_secs(1));
        // ...a tenth at the minimum (the clock is capped at the longest wait).
        p.wait_for_at(at, 75.0, None, 0);
        assert_eq!(p.wait_for_at(at, 75.0, low(1.0), MIB), Duration::ZERO);
        let w = p.wait_for_at(at, 75.0, low(1.0), 0);
        assert_eq!(w, SLOWDOWN_MAX_WAIT, "1 MiB at 1 MiB/s");
    }

    /// A large headroom keeps a share of it an hour: 36 GiB left above
    /// the minimum allows 10.24 MiB/s with nothing reclaimed; what is
    /// reclaimed wins when it is more; a small headroom leaves the floor.
    #[test]
    fn the_headroom_spread_over_an_hour_is_a_floor() {
        let big = LowDisk {
            depth: 0.2,
            headroom: 36 * 1024 * MIB,
        };
        let secs = LOW_ZONE_LIFE.as_secs();
        assert_eq!(low_disk_rate(big, 0), 36 * 1024 * MIB / secs);
        assert_eq!(low_disk_rate(big, 100 * MIB), rate_at(0.2, 100 * MIB));
        let small = LowDisk {
            depth: 1.0,
            headroom: 100 * MIB,
        };
        assert_eq!(low_disk_rate(small, 0), SLOWDOWN_MIN_RATE);
        let p = DiskPace::new();
        let t0 = Instant::now();
        assert_eq!(p.wait_for_at(t0, 75.0, Some(big), 5 * MIB), Duration::ZERO);
        let w = p.wait_for_at(t0, 75.0, Some(big), 0);
        assert!(
            w > Duration::from_millis(480) && w < Duration::from_millis(495),
            "5 MiB at 10.24 MiB/s: {w:?}"
        );
    }

    /// The members' garbage is paced as the node's: one store over the
    /// limit with the node under it waits for nothing; the node over it
    /// paces every member on one clock at their reclaim rates summed.
    #[test]
    fn the_nodes_garbage_paces_every_member_on_one_clock() {
        let p = DiskPace::new();
        let (a, b) = (p.member(), p.member());
        let t0 = Instant::now();
        a.observe_garbage(900, 1000);
        b.observe_garbage(900, 1000);
        assert_eq!(p.garbage_rate(75.0), None, "no member has run");
        a.observe_run(30 * MIB, 0);
        b.observe_run(10 * MIB, 0);
        b.observe_garbage(400, 1000);
        assert!((p.garbage_pct() - 65.0).abs() < 1e-9);
        assert_eq!(p.garbage_rate(75.0), None, "a is over, the node is not");
        assert_eq!(p.wait_for_at(t0, 75.0, None, 1 << 30), Duration::ZERO);
        // 80 %: half way into the span, 55 % of the 40 MiB/s reclaimed.
        b.observe_garbage(700, 1000);
        let r = p.garbage_rate(75.0).unwrap_or(0);
        assert!(r.abs_diff(22 * MIB) <= 1, "{r}");
        assert!(p.garbage_paced(75.0));
        assert_eq!(p.wait_for_at(t0, 75.0, None, 11 * MIB), Duration::ZERO);
        let w = p.wait_for_at(t0, 75.0, None, 0);
        let ms = |w: Duration| w.as_secs_f64() * 1e3;
        assert!((ms(w) - 500.0).abs() < 0.01, "b waits for a's bytes: {w:?}");
        // A low disk deeper than the garbage wins: the slower rate (the
        // floor, 1 MiB/s: a MiB is a second, not 45 ms).
        p.observe_reclaim_at(t0, 60 * MIB);
        let w = p.wait_for_at(t0, 75.0, low(1.0), MIB);
        assert!((ms(w) - 500.0).abs() < 0.01, "{w:?}");
        let w = p.wait_for_at(t0, 75.0, low(1.0), 0);
        assert_eq!(w, SLOWDOWN_MAX_WAIT);
        // Under the limit again: the clock stops.
        a.observe_garbage(100, 1000);
        assert_eq!(p.wait_for_at(t0, 75.0, None, 1 << 30), Duration::ZERO);
        assert_eq!(p.wait_for_at(t0, 75.0, None, 1), Duration::ZERO);
    }

    /// A member that goes (a vnode handed off) takes its garbage and rate
    /// out of the node's sums.
    #[test]
    fn a_dropped_member_leaves_the_sums() {
        let p = DiskPace::new();
        let a = p.member();
        a.observe_garbage(950, 1000);
        a.observe_run(10 * MIB, MIB);
        {
            let b = p.member();
            b.observe_garbage(100, 3000);
            b.observe_garbage(200, 3000);
            b.observe_run(5 * MIB, MIB);
            b.observe_run(30 * MIB, MIB);
            assert!((p.garbage_pct() - 28.75).abs() < 1e-9);
            assert_eq!(p.inner.reclaim_bps_sum.load(Ordering::Relaxed), 40 * MIB);
            assert_eq!(p.garbage_rate(75.0), None);
        }
        assert!((p.garbage_pct() - 95.0).abs() < 1e-9);
        assert_eq!(p.inner.rated.load(Ordering::Relaxed), 1);
        assert_eq!(p.garbage_rate(75.0), Some(MIB), "a tenth of a's 10 MiB/s");
        // The floor is one store's for each member with a rate: three
        // whose runs freed nothing are held to 3 MiB/s, not 1.
        let (c, d) = (p.member(), p.member());
        c.observe_run(0, 0);
        d.observe_run(0, 0);
        c.observe_garbage(950, 1000);
        d.observe_garbage(950, 1000);
        assert_eq!(p.garbage_rate(75.0), Some(3 * MIB));
        drop((c, d));
        drop(a);
        assert_eq!(p.garbage_pct(), 0.0);
        assert_eq!(p.garbage_rate(75.0), None);
        assert_eq!(p.inner.reclaim_bps_sum.load(Ordering::Relaxed), 0);
    }
}
