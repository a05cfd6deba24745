//! The CPU priority of the store's background threads.
//!
//! Journal compaction and ledger merges are CPU work nobody waits for: they
//! decode, check and re-encode records for seconds at a time. On a machine
//! with few cores a GET whose disk read has completed then waits for a core
//! behind them, which shows in the slowest requests of the intervals where
//! they run. `Config::background_nice` lowers those threads' priority (a
//! Linux thread's nice value, `setpriority(PRIO_PROCESS, tid)`), so that a
//! foreground thread that wakes up runs first, while the background threads
//! still get every cycle the foreground leaves idle. Their back-pressure
//! (the L0 stall, the journal's write slowdown) stays what keeps them from
//! falling behind for good.

use std::sync::atomic::{AtomicBool, Ordering};

/// Nice values a background thread may be given (0: unchanged).
pub const NICE_MAX: i32 = 19;

/// Lowers the calling thread's priority by `nice` steps (its nice value
/// goes up by `nice`, to at most [`NICE_MAX`]; 0 leaves it alone; it is
/// never raised, which would need privilege). Advice only: a failure (a
/// platform or sandbox that refuses it) is logged, never an error.
pub fn lower_this_thread(nice: i32, what: &str) {
    debug_assert!((0..=NICE_MAX).contains(&nice), "nice {nice}");
    if nice <= 0 {
        return;
    }
    let tid = rustix::thread::gettid();
    let now = rustix::process::getpriority_process(Some(tid)).unwrap_or(0);
    let target = now.saturating_add(nice).min(NICE_MAX);
    if target <= now {
        return;
    }
    match rustix::process::setpriority_process(Some(tid), target) {
        Ok(()) => tracing::debug!(thread = what, nice, "background thread priority lowered"),
        // A node opens two such threads per vnode: say it once.
        Err(e) if !REFUSED.swap(true, Ordering::Relaxed) => {
            tracing::warn!(thread = what, nice, error = %e, "could not lower a background thread's priority; background threads run at the default (said once)")
        }
        Err(e) => {
            tracing::debug!(thread = what, nice, error = %e, "could not lower a background thread's priority")
        }
    }
}

/// Set once lowering a thread's priority failed (the warning is logged once).
static REFUSED: AtomicBool = AtomicBool::new(false);

#[cfg(test)]
mod tests {
    use super::*;

    fn own_nice() -> i32 {
        rustix::process::getpriority_process(Some(rustix::thread::gettid())).unwrap()
    }

    /// The nice value is the thread's own: a thread that lowers itself
    /// leaves the thread that spawned it as it was.
    #[test]
    fn a_thread_lowers_only_itself() {
        let before = own_nice();
        let child = std::thread::spawn(|| {
            lower_this_thread(7, "test");
            own_nice()
        })
        .join()
        .unwrap();
        assert_eq!(child, (before + 7).min(NICE_MAX));
        assert_eq!(own_nice(), before);
        let unchanged = std::thread::spawn(|| {
            lower_this_thread(0, "test");
            own_nice()
        })
        .join()
        .unwrap();
        assert_eq!(unchanged, before);
    }
}
