//! Disk space guard: what the store does as the journal's filesystem fills.
//!
//! The journal never rewrites in place, so its size depends on compaction
//! keeping up; the garbage trigger and the write slowdown bound it relative
//! to the live data, but nothing relates it to the disk. A 30-minute run of
//! seed 004's 16 KB test here (1.26 M live keys, 20 GB live) held garbage at
//! 65 % and still outgrew a 62 GB disk. When an append meets a full disk
//! the store is poisoned (closed until reopened), and compaction, which
//! writes its output before it deletes its input, cannot free anything.
//!
//! Two thresholds on the share of the filesystem that is free, and a soft
//! zone above the first, sampled with `statvfs` at most every
//! [`SAMPLE_EVERY`] (by writers and by the compaction thread):
//! - between twice `Config::disk_low_free_pct` and it (the *soft zone*,
//!   5–10 % free by default) the garbage trigger's limit falls linearly
//!   with the free share, to half of it at the low mark
//!   ([`soft_zone_depth`], `compaction::garbage_limit`): a filling disk
//!   holds the journal tighter, at some write amplification, so compaction
//!   settles it above the low mark instead of meeting the mark at full
//!   limit (a run of seed 004's 16 KB test there switched between low and
//!   not every 30–40 s, each run freeing more than the hysteresis);
//! - below `Config::disk_low_free_pct` (default 5) the disk is **low**:
//!   the garbage trigger compacts at half its limit and unpaced (space
//!   matters more than the write amplification of reclaiming less per
//!   run), writes are paced whatever the garbage, at compaction's reclaim
//!   rate at the low mark falling to a tenth of it at the minimum
//!   ([`low_zone_depth`], `crate::slowdown`; the stores of a node on one
//!   shared clock, `crate::diskpace`), and a warning is logged when the
//!   state changes;
//! - below `Config::disk_min_free_pct` (default 1) it is **full**: write
//!   groups that store values are refused with an I/O error of kind
//!   `StorageFull` (the node answers 507) before anything is written, so
//!   the store stays open, reads and deletes go on, and compaction has the
//!   room it needs; writes pass again once space is freed.
//!
//! A state is left towards more free space only [`HYSTERESIS_PCT`] points
//! above its mark. [`classify`], [`next_state`] and [`low_zone_depth`] are
//! pure; [`DiskGuard`] keeps the latest sample.

use crate::error::{Error, Result};
use parking_lot::Mutex;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::time::{Duration, Instant};

/// The start of a refusal's message, so a node that forwards it by text
/// still recognises a full disk.
pub const DISK_FULL_MARK: &str = "disk nearly full";

/// The longest a sample is used before the filesystem is asked again.
pub const SAMPLE_EVERY: Duration = Duration::from_millis(250);

/// How full the journal's filesystem is, against the thresholds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DiskState {
    /// At or above the low threshold (or the guard is off).
    Ample,
    /// Below the low threshold: compaction becomes eager.
    Low,
    /// Below the minimum: writes that store values are refused.
    Full,
}

impl DiskState {
    fn code(self) -> u8 {
        match self {
            DiskState::Ample => 0,
            DiskState::Low => 1,
            DiskState::Full => 2,
        }
    }
}

/// The state for `free_pct` % free, given the thresholds (0: off).
pub fn classify(free_pct: f64, low_pct: f64, min_pct: f64) -> DiskState {
    debug_assert!(
        min_pct <= low_pct || low_pct == 0.0,
        "{min_pct} > {low_pct}"
    );
    if free_pct < min_pct {
        DiskState::Full
    } else if free_pct < low_pct {
        DiskState::Low
    } else {
        DiskState::Ample
    }
}

/// Points of free share above a threshold needed to leave the state below
/// it, so a disk hovering at a mark does not flap (a 30-minute 16 KB run
/// held at the 5 % mark logged 27 changes in 9 minutes without it).
pub const HYSTERESIS_PCT: f64 = 0.5;

/// The state after `was` for `free_pct` % free: [`classify`], except that
/// a move towards more free space needs [`HYSTERESIS_PCT`] points above
/// the threshold it crosses.
pub fn next_state(was: DiskState, free_pct: f64, low_pct: f64, min_pct: f64) -> DiskState {
    let now = classify(free_pct, low_pct, min_pct);
    if now.code() < was.code() {
        classify(free_pct - HYSTERESIS_PCT, low_pct, min_pct)
    } else {
        now
    }
}

/// How deep `free_pct` is between the low mark (0) and the minimum (1),
/// clamped to 0..=1.
pub fn low_zone_depth(free_pct: f64, low_pct: f64, min_pct: f64) -> f64 {
    depth_between(free_pct, low_pct, min_pct)
}

/// How far `free_pct` has fallen from `top` (0) towards `bottom` (1),
/// clamped to 0..=1 (0 when `bottom` is not below `top`: a low mark that
/// is off).
fn depth_between(free_pct: f64, top: f64, bottom: f64) -> f64 {
    ((top - free_pct) / (top - bottom).max(1e-9)).clamp(0.0, 1.0)
}

/// The soft zone reaches up to this many times the low mark.
pub const SOFT_ZONE_FACTOR: f64 = 2.0;

/// How deep `free_pct` is in the soft zone, from [`SOFT_ZONE_FACTOR`] ×
/// `low_pct` (0) down to `low_pct` (1), clamped to 0..=1; 0 when the low
/// mark is off.
pub fn soft_zone_depth(free_pct: f64, low_pct: f64) -> f64 {
    if low_pct <= 0.0 {
        return 0.0;
    }
    depth_between(free_pct, low_pct * SOFT_ZONE_FACTOR, low_pct)
}

/// Free and total bytes of a filesystem (free: what an unprivileged
/// writer may still use).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct DiskSpace {
    /// Bytes available.
    pub free_bytes: u64,
    /// The filesystem's size.
    pub total_bytes: u64,
}

impl DiskSpace {
    /// The free share, percent (100 for a filesystem of size 0).
    pub fn free_pct(&self) -> f64 {
        if self.total_bytes == 0 {
            return 100.0;
        }
        100.0 * self.free_bytes as f64 / self.total_bytes as f64
    }

    /// The filesystem holding `dir`, now.
    pub fn of(dir: &Path) -> Result<DiskSpace> {
        let s = rustix::fs::statvfs(dir)
            .map_err(|e| Error::io("statvfs", dir, std::io::Error::from(e)))?;
        Ok(DiskSpace {
            free_bytes: s.f_bavail.saturating_mul(s.f_frsize),
            total_bytes: s.f_blocks.saturating_mul(s.f_frsize),
        })
    }
}

/// A store's disk guard: the thresholds and the latest sample.
#[derive(Debug)]
pub struct DiskGuard {
    dir: PathBuf,
    low_pct: f64,
    min_pct: f64,
    sampled_at: Mutex<Option<Instant>>,
    free_bytes: AtomicU64,
    total_bytes: AtomicU64,
    /// The state of the latest sample ([`DiskState::code`]).
    state: AtomicU8,
    /// Write groups refused so far.
    refused: AtomicU64,
}

impl DiskGuard {
    /// A guard of the filesystem holding `dir` (0 turns a threshold off).
    pub fn new(dir: &Path, low_pct: f64, min_pct: f64) -> Self {
        DiskGuard {
            dir: dir.to_path_buf(),
            low_pct,
            min_pct,
            sampled_at: Mutex::new(None),
            free_bytes: AtomicU64::new(0),
            total_bytes: AtomicU64::new(0),
            state: AtomicU8::new(DiskState::Ample.code()),
            refused: AtomicU64::new(0),
        }
    }

    /// A guard that never samples and is always ample.
    pub fn off() -> Self {
        DiskGuard::new(Path::new("."), 0.0, 0.0)
    }

    fn is_off(&self) -> bool {
        self.low_pct <= 0.0 && self.min_pct <= 0.0
    }

    /// The state now, sampling the filesystem if the last sample is older
    /// than [`SAMPLE_EVERY`]. A failed sample is logged and the last state
    /// kept (a guard that cannot see the disk does not stop writes).
    pub fn state(&self) -> DiskState {
        if self.is_off() {
            return DiskState::Ample;
        }
        let due = {
            let mut at = self.sampled_at.lock();
            let due = at.is_none_or(|t| t.elapsed() >= SAMPLE_EVERY);
            if due {
                *at = Some(Instant::now());
            }
            due
        };
        if due {
            match DiskSpace::of(&self.dir) {
                Ok(space) => self.observe(space),
                Err(e) => {
                    tracing::warn!(target: "basalt::disk", "D0001 cannot read free disk space: {e}")
                }
            }
        }
        self.last_state()
    }

    /// Takes a sample (logs a change of state).
    pub fn observe(&self, space: DiskSpace) {
        self.free_bytes.store(space.free_bytes, Ordering::Relaxed);
        self.total_bytes.store(space.total_bytes, Ordering::Relaxed);
        let was = self.last_state();
        let now = next_state(was, space.free_pct(), self.low_pct, self.min_pct);
        self.state.store(now.code(), Ordering::Relaxed);
        if now != DiskState::Ample {
            // Replaced files waiting for removal hold space back.
            crate::remover::disk_is_low();
        }
        if was == now {
            return;
        }
        let (free, pct) = (space.free_bytes, space.free_pct());
        match now {
            DiskState::Full => {
                tracing::error!(target: "basalt::disk", "D0002 disk of {} nearly full: {free} bytes free ({pct:.2} %), below disk_min_free_pct {}: writes are refused until space is freed", self.dir.display(), self.min_pct)
            }
            DiskState::Low => {
                tracing::warn!(target: "basalt::disk", "D0003 disk of {} low: {free} bytes free ({pct:.2} %), below disk_low_free_pct {}: journal compaction runs eagerly and writes are paced to what it reclaims", self.dir.display(), self.low_pct)
            }
            DiskState::Ample => {
                tracing::info!(target: "basalt::disk", "D0004 disk of {}: {free} bytes free ({pct:.2} %) again", self.dir.display())
            }
        }
    }

    /// How deep into the low zone the latest sample is: 0 at the low
    /// mark, 1 at the minimum (or at nothing free when the minimum is
    /// off); `None` when the disk is not low or the guard is off.
    pub fn depth(&self) -> Option<f64> {
        if self.last_state() == DiskState::Ample {
            return None;
        }
        let free = self.space()?.free_pct();
        Some(low_zone_depth(free, self.low_pct, self.min_pct))
    }

    /// Bytes free above the minimum (`disk_min_free_pct`) in the latest
    /// sample; 0 before the first, or when the guard is off.
    pub fn headroom(&self) -> u64 {
        match self.space() {
            Some(space) if !self.is_off() => {
                let min = (space.total_bytes as f64 * self.min_pct / 100.0) as u64;
                space.free_bytes.saturating_sub(min)
            }
            _ => 0,
        }
    }

    /// How deep the latest sample is in the soft zone ([`soft_zone_depth`]:
    /// 0 at twice the low mark or more, 1 at the low mark or below); 0 when
    /// the guard is off or before the first sample.
    pub fn fullness(&self) -> f64 {
        match self.space() {
            Some(space) if !self.is_off() => soft_zone_depth(space.free_pct(), self.low_pct),
            _ => 0.0,
        }
    }

    /// The state of the latest sample, without sampling.
    pub fn last_state(&self) -> DiskState {
        match self.state.load(Ordering::Relaxed) {
            2 => DiskState::Full,
            1 => DiskState::Low,
            _ => DiskState::Ample,
        }
    }

    /// The latest sample (`None` before the first, or when off).
    pub fn space(&self) -> Option<DiskSpace> {
        let total_bytes = self.total_bytes.load(Ordering::Relaxed);
        (total_bytes > 0).then(|| DiskSpace {
            free_bytes: self.free_bytes.load(Ordering::Relaxed),
            total_bytes,
        })
    }

    /// Write groups refused so far.
    pub fn refused(&self) -> u64 {
        self.refused.load(Ordering::Relaxed)
    }

    /// Ok unless the disk is full and the group stores values
    /// (`stores_values`; a group of deletes only always passes).
    pub fn admit(&self, stores_values: bool) -> Result<()> {
        if !stores_values || self.state() != DiskState::Full {
            return Ok(());
        }
        self.refused.fetch_add(1, Ordering::Relaxed);
        let space = self.space().unwrap_or_default();
        let reason = format!(
            "{DISK_FULL_MARK}: {} bytes free ({:.2} % of {} bytes), below disk_min_free_pct {}; writes are refused until compaction or the operator frees space (reads and deletes go on)",
            space.free_bytes,
            space.free_pct(),
            space.total_bytes,
            self.min_pct
        );
        Err(Error::io(
            "admit write",
            &self.dir,
            std::io::Error::new(std::io::ErrorKind::StorageFull, reason),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GIB: u64 = 1 << 30;

    #[test]
    fn thresholds_split_the_states() {
        assert_eq!(classify(50.0, 5.0, 1.0), DiskState::Ample);
        assert_eq!(classify(5.0, 5.0, 1.0), DiskState::Ample, "at the limit");
        assert_eq!(classify(4.9, 5.0, 1.0), DiskState::Low);
        assert_eq!(classify(1.0, 5.0, 1.0), DiskState::Low);
        assert_eq!(classify(0.9, 5.0, 1.0), DiskState::Full);
        assert_eq!(classify(0.0, 0.0, 0.0), DiskState::Ample, "off");
        // Leaving a state towards more free space needs the hysteresis.
        use DiskState::{Ample, Full, Low};
        assert_eq!(next_state(Low, 5.3, 5.0, 1.0), Low);
        assert_eq!(next_state(Low, 5.6, 5.0, 1.0), Ample);
        assert_eq!(next_state(Full, 1.2, 5.0, 1.0), Full);
        assert_eq!(next_state(Full, 1.6, 5.0, 1.0), Low);
        assert_eq!(next_state(Full, 9.0, 5.0, 1.0), Ample);
        assert_eq!(
            next_state(Ample, 4.9, 5.0, 1.0),
            Low,
            "getting worse is at once"
        );
        assert_eq!(next_state(Low, 0.9, 5.0, 1.0), Full);
        assert_eq!(low_zone_depth(5.0, 5.0, 1.0), 0.0);
        assert_eq!(low_zone_depth(3.0, 5.0, 1.0), 0.5);
        assert_eq!(low_zone_depth(0.5, 5.0, 1.0), 1.0);
        assert_eq!(
            low_zone_depth(2.5, 5.0, 0.0),
            0.5,
            "no minimum: to nothing free"
        );
    }

    #[test]
    fn the_soft_zone_spans_twice_the_low_mark_down_to_it() {
        assert_eq!(soft_zone_depth(20.0, 5.0), 0.0);
        assert_eq!(soft_zone_depth(10.0, 5.0), 0.0);
        assert_eq!(soft_zone_depth(7.5, 5.0), 0.5);
        assert_eq!(soft_zone_depth(5.0, 5.0), 1.0);
        assert_eq!(soft_zone_depth(0.5, 5.0), 1.0);
        assert_eq!(soft_zone_depth(0.5, 0.0), 0.0, "low mark off");
        let g = DiskGuard::new(Path::new("."), 5.0, 1.0);
        assert_eq!(g.fullness(), 0.0, "no sample yet");
        let gib = 1u64 << 30;
        g.observe(DiskSpace {
            free_bytes: 15 * gib / 2,
            total_bytes: 100 * gib,
        });
        assert_eq!(g.fullness(), 0.5);
        assert_eq!(g.last_state(), DiskState::Ample, "the soft zone is not low");
        assert_eq!(DiskGuard::off().fullness(), 0.0);
    }

    #[test]
    fn a_full_disk_refuses_values_not_deletes() {
        let g = DiskGuard::new(Path::new("."), 5.0, 1.0);
        g.observe(DiskSpace {
            free_bytes: GIB / 2,
            total_bytes: 100 * GIB,
        });
        assert_eq!(g.last_state(), DiskState::Full);
        assert_eq!(g.depth(), Some(1.0));
        // `admit` samples the real filesystem only after SAMPLE_EVERY.
        *g.sampled_at.lock() = Some(Instant::now());
        let e = g.admit(true).expect_err("refused");
        let msg = e.to_string();
        assert!(msg.contains("disk nearly full"), "{msg}");
        assert!(
            matches!(&e, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull)
        );
        assert!(g.admit(false).is_ok(), "deletes pass");
        assert_eq!(g.refused(), 1);
        g.observe(DiskSpace {
            free_bytes: 3 * GIB,
            total_bytes: 100 * GIB,
        });
        assert_eq!(g.last_state(), DiskState::Low);
        assert_eq!(g.depth(), Some(0.5));
        assert_eq!(
            g.headroom(),
            2 * GIB,
            "3 GiB free, 1 % of 100 GiB the minimum"
        );
        assert!(
            g.admit(true).is_ok(),
            "writes pass again once space is freed"
        );
    }

    #[test]
    fn the_real_filesystem_is_sampled() {
        let dir = tempfile::tempdir().expect("tempdir");
        let space = DiskSpace::of(dir.path()).expect("statvfs");
        assert!(space.total_bytes > 0 && space.free_bytes <= space.total_bytes);
        // A threshold above any real free share: full at once.
        let g = DiskGuard::new(dir.path(), 100.0, 100.0);
        assert_eq!(g.state(), DiskState::Full);
        assert!(g.space().is_some());
        assert_eq!(DiskGuard::off().state(), DiskState::Ample);
    }
}
