//! The wall clock, in the units Basalt stores: seconds and microseconds
//! since the Unix epoch (last-modified times, expiry, tree build times,
//! security stamps). One place for every crate; a clock before 1970 reads
//! as 0.

use std::time::{SystemTime, UNIX_EPOCH};

/// Microseconds since the Unix epoch.
pub fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as u64)
}

/// Seconds since the Unix epoch.
pub fn now_secs() -> u64 {
    now_us() / 1_000_000
}

/// Seconds and the microseconds within the second, since the Unix epoch
/// (Riak's last-modified pair).
pub fn now_secs_us() -> (u64, u32) {
    let us = now_us();
    (us / 1_000_000, (us % 1_000_000) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_units_agree() {
        let (s, us) = now_secs_us();
        assert!(us < 1_000_000);
        let secs = now_secs();
        assert!(secs >= s && secs - s <= 1, "{secs} against {s}");
        assert!(now_us() / 1_000_000 >= s);
        // After 2020-01-01: the clock is read, not a constant.
        assert!(s > 1_577_836_800);
    }
}
