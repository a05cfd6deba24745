//! The pacing rules a write slowdown is made of, pure and shared: the
//! pressure of garbage over its limit, the rate at a pressure between a
//! reclaim rate and a tenth of it, and the clock that turns a rate into
//! each write group's wait.
//!
//! Both a store's own slowdown (`crate::slowdown`, the journal's garbage)
//! and the pace the stores of one node share (`crate::diskpace`, their
//! garbage summed and a low disk) pace with these, so a write waits the same way for
//! either, with the same floor and the same longest wait.

use std::time::{Duration, Instant};

/// The least write rate allowed (bytes a second), so writes always make
/// progress, also before a compaction run has measured a reclaim rate.
pub const SLOWDOWN_MIN_RATE: u64 = 1 << 20;

/// The longest a write group waits for the pace.
pub const SLOWDOWN_MAX_WAIT: Duration = Duration::from_secs(1);

/// Points over the limit at which the allowed rate has fallen to a tenth
/// of the reclaim rate.
pub const SLOWDOWN_SPAN_PCT: f64 = 10.0;

/// How far into the slowdown `garbage_pct` is (0 at `limit_pct`, 1 from
/// [`SLOWDOWN_SPAN_PCT`] points above); `None` at or below the limit, or
/// with a limit of 100 or more (off).
pub fn garbage_pressure(garbage_pct: f64, limit_pct: f64) -> Option<f64> {
    if limit_pct >= 100.0 || garbage_pct.is_nan() || garbage_pct <= limit_pct {
        return None;
    }
    Some(((garbage_pct - limit_pct) / SLOWDOWN_SPAN_PCT).min(1.0))
}

/// The write rate at `pressure` (0..=1): `reclaim_bps` at 0, falling
/// linearly to a tenth of it at 1, never below [`SLOWDOWN_MIN_RATE`].
pub fn rate_at(pressure: f64, reclaim_bps: u64) -> u64 {
    debug_assert!((0.0..=1.0).contains(&pressure), "pressure {pressure}");
    let base = reclaim_bps.max(SLOWDOWN_MIN_RATE) as f64;
    let rate = (base * (1.0 - 0.9 * pressure.clamp(0.0, 1.0))) as u64;
    rate.max(SLOWDOWN_MIN_RATE)
}

/// The wait for a group of `bytes` written at `rate` bytes a second, given
/// the pacing clock `next_free` (when the previous groups' bytes are paid
/// for) and `now`; and the clock after it. A clock more than
/// [`SLOWDOWN_MAX_WAIT`] ahead is pulled back to it.
pub fn pace(next_free: Instant, now: Instant, bytes: u64, rate: u64) -> (Duration, Instant) {
    debug_assert!(rate > 0, "pace at rate 0");
    let start = next_free.max(now).min(now + SLOWDOWN_MAX_WAIT);
    let cost = Duration::from_secs_f64(bytes as f64 / rate.max(1) as f64);
    (start - now, start + cost)
}
