//! Locks that park a waiting thread, for the paths requests wait on.
//!
//! `parking_lot`'s locks spin before they park, and their spin yields the
//! core (`sched_yield`) several times. With more runnable threads than cores
//! (16 bench workers on 2 vCPUs) each yield puts the waiter at the back of
//! the run queue, for milliseconds: the memtable's lock cost GETs up to
//! 9.4 ms that way, and the write queue's lock UPDATEs up to 9.7 ms
//! (docs/benchmarks/2026-11-29-0253-lock-behind-get-time.md and
//! docs/benchmarks/2026-11-29-0558-where-bench-workers-wait.md). `std`'s locks spin
//! briefly without yielding, then wait on a futex.
//!
//! These wrappers ignore poisoning: the data they guard stays consistent
//! when a holder panics (a panic under them is a bug, and the engine's
//! callers do not panic on user data), and a lock that fails every later
//! caller would turn one bug into a dead store.

use std::sync::{MutexGuard, PoisonError, RwLockReadGuard, RwLockWriteGuard};

/// `std::sync::Mutex` without poisoning.
#[derive(Debug, Default)]
pub struct Mutex<T>(std::sync::Mutex<T>);

impl<T> Mutex<T> {
    /// A new unlocked mutex holding `t`.
    pub const fn new(t: T) -> Self {
        Mutex(std::sync::Mutex::new(t))
    }

    /// Locks, waiting (parked) while another thread holds it.
    pub fn lock(&self) -> MutexGuard<'_, T> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// `std::sync::RwLock` without poisoning.
#[derive(Debug, Default)]
pub struct RwLock<T>(std::sync::RwLock<T>);

impl<T> RwLock<T> {
    /// A new unlocked lock holding `t`.
    pub const fn new(t: T) -> Self {
        RwLock(std::sync::RwLock::new(t))
    }

    /// Shared access, waiting (parked) while a writer holds or waits for it.
    pub fn read(&self) -> RwLockReadGuard<'_, T> {
        self.0.read().unwrap_or_else(PoisonError::into_inner)
    }

    /// Exclusive access, waiting (parked) while anyone holds it.
    pub fn write(&self) -> RwLockWriteGuard<'_, T> {
        self.0.write().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A panic under the lock does not make it unusable (no poisoning).
    #[test]
    fn a_panic_under_the_lock_leaves_it_usable() {
        let m = std::sync::Arc::new(Mutex::new(1));
        let l = std::sync::Arc::new(RwLock::new(1));
        let (m2, l2) = (m.clone(), l.clone());
        let r = std::thread::spawn(move || {
            let _g = m2.lock();
            let _w = l2.write();
            panic!("under both locks");
        })
        .join();
        assert!(r.is_err());
        *m.lock() += 1;
        *l.write() += 1;
        assert_eq!((*m.lock(), *l.read()), (2, 2));
    }
}
