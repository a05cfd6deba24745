//! The disk pace the stores of one node share while their disk is low.
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
//! machine's 270 GB disk the low zone is 10.8 GB: 3 MB/s at the mark). A
//! member's garbage slowdown stays its own.

use crate::pace::{pace, rate_at};
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
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
/// the clones are one pace).
#[derive(Debug, Clone, Default)]
pub struct DiskPace {
    inner: Arc<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Bytes reclaimed by the members' runs, with when, oldest first.
    reclaimed: Mutex<VecDeque<(Instant, u64)>>,
    /// When the bytes of the groups paced so far are paid for; `None` while
    /// the disk is not low.
    next_free: Mutex<Option<Instant>>,
    /// Whether `next_free` is set: while the disk is not low a write group
    /// reads this flag only, and never takes the node-wide lock.
    pacing: AtomicBool,
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

    /// How long a member's group of `bytes` waits on a `low` disk (`None`:
    /// not low, no wait, the clock stops). Call it once per group, under
    /// the member's write lock.
    pub fn wait_for(&self, low: Option<LowDisk>, bytes: u64) -> Duration {
        self.wait_for_at(Instant::now(), low, bytes)
    }

    fn wait_for_at(&self, now: Instant, low: Option<LowDisk>, bytes: u64) -> Duration {
        let Some(low) = low else {
            if self.inner.pacing.load(Ordering::Relaxed) {
                *self.inner.next_free.lock() = None;
                self.inner.pacing.store(false, Ordering::Relaxed);
            }
            return Duration::ZERO;
        };
        let rate = low_disk_rate(low, self.reclaim_bps_at(now));
        let mut next_free = self.inner.next_free.lock();
        let (wait, next) = pace(next_free.unwrap_or(now), now, bytes, rate);
        *next_free = Some(next);
        self.inner.pacing.store(true, Ordering::Relaxed);
        wait
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
            a.wait_for_at(t0, low(0.0), SLOWDOWN_MIN_RATE / 2),
            Duration::ZERO
        );
        let w = b.wait_for_at(t0, low(0.0), SLOWDOWN_MIN_RATE / 2);
        assert_eq!(w, Duration::from_millis(500), "b waits for a's bytes");
        let w = a.wait_for_at(t0, low(0.0), 1);
        assert!(w >= Duration::from_millis(999), "{w:?}");
        // A disk no longer low stops the clock.
        assert_eq!(a.wait_for_at(t0, None, 1 << 30), Duration::ZERO);
        assert_eq!(b.wait_for_at(t0, low(0.0), 1), Duration::ZERO);
    }

    #[test]
    fn the_rate_follows_what_was_reclaimed_and_the_depth() {
        let p = DiskPace::new();
        let t0 = Instant::now();
        p.observe_reclaim_at(t0, 600 * MIB);
        let at = t0 + Duration::from_secs(1);
        // 10 MiB/s reclaimed: 10 MiB/s allowed at the low mark...
        assert_eq!(p.wait_for_at(at, low(0.0), 10 * MIB), Duration::ZERO);
        let w = p.wait_for_at(at, low(0.0), 0);
        assert_eq!(w, Duration::from_secs(1));
        // ...a tenth at the minimum (the clock is capped at the longest wait).
        p.wait_for_at(at, None, 0);
        assert_eq!(p.wait_for_at(at, low(1.0), MIB), Duration::ZERO);
        let w = p.wait_for_at(at, low(1.0), 0);
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
        assert_eq!(p.wait_for_at(t0, Some(big), 5 * MIB), Duration::ZERO);
        let w = p.wait_for_at(t0, Some(big), 0);
        assert!(
            w > Duration::from_millis(480) && w < Duration::from_millis(495),
            "5 MiB at 10.24 MiB/s: {w:?}"
        );
    }
}
