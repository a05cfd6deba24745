//! How many journal compaction runs the stores of one node make at once
//! ([`CompactionSlots`], `Config::compaction_slots`).
//!
//! Each store's garbage trigger ([`super::drain_garbage`]) judges its own
//! journal alone. A node keeps one store per vnode, 20–64 of them on one
//! disk, and under a uniform load their garbage crosses the limit together:
//! Phase 4's 2i load on three nodes (2026-12-04, 21 vnodes a node) had
//! 13–15 runs of one node copying at once, its journal threads reading
//! ~110 MB/s against ~7 MB/s by its requests, the page cache thrashed and
//! the node's rate fell to a third in 30 minutes
//! (`docs/benchmarks/2026-12-04-1642-cluster-8kb-2i-30-minutes.md`).
//! Runs at once do not reclaim faster than the disk reads; they only queue
//! the requests' reads behind theirs.
//!
//! A [`CompactionSlots`] is shared by the stores of one node (cheap to
//! clone: the clones are one). A background run takes a slot first and
//! gives it back when it ends; while every slot is taken, a store waits,
//! and a freed slot goes to the waiter most over its garbage limit (ties:
//! the one waiting longest). Waiting also lets a store's garbage grow, so
//! the run it makes then reads less per byte it frees. A waiting store
//! renews its estimate every check interval
//! ([`CompactionSlots::acquire_renewing`]): its priority and its write
//! slowdown (`crate::slowdown`, pacing its writes to its own reclaim)
//! follow its garbage while it waits.
//! A run asked for directly (`Store::compact_journal`) takes no slot.

use parking_lot::{Condvar, Mutex};
use std::sync::Arc;
use std::time::Duration;

/// The most slots a node may have (a typo of a few digits would otherwise
/// let every vnode run at once, as with no slots at all).
pub const COMPACTION_SLOTS_MAX: usize = 64;

/// How often a waiter checks whether its store is stopping.
pub const SLOT_WAIT_POLL: Duration = Duration::from_millis(50);

/// Compaction slots shared by the stores of one node.
#[derive(Debug, Clone)]
pub struct CompactionSlots {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    max: usize,
    state: Mutex<State>,
    freed: Condvar,
}

#[derive(Debug, Default)]
struct State {
    busy: usize,
    /// Waiters: (ticket, priority).
    waiting: Vec<(u64, f64)>,
    next_ticket: u64,
}

impl State {
    /// The waiter a free slot goes to: highest priority, then oldest.
    fn first(&self) -> Option<u64> {
        self.waiting
            .iter()
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
            .map(|w| w.0)
    }
}

/// A taken slot, given back when dropped.
#[derive(Debug)]
pub struct Slot {
    inner: Arc<Inner>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut s = self.inner.state.lock();
        debug_assert!(s.busy > 0, "a slot given back twice");
        s.busy = s.busy.saturating_sub(1);
        drop(s);
        self.inner.freed.notify_all();
    }
}

impl CompactionSlots {
    /// `max` slots, clamped to 1..=[`COMPACTION_SLOTS_MAX`].
    pub fn new(max: usize) -> CompactionSlots {
        CompactionSlots {
            inner: Arc::new(Inner {
                max: max.clamp(1, COMPACTION_SLOTS_MAX),
                state: Mutex::new(State::default()),
                freed: Condvar::new(),
            }),
        }
    }

    /// How many slots there are.
    pub fn max(&self) -> usize {
        self.inner.max
    }

    /// Slots taken now.
    pub fn busy(&self) -> usize {
        self.inner.state.lock().busy
    }

    /// Stores waiting for a slot now.
    pub fn waiting(&self) -> usize {
        self.inner.state.lock().waiting.len()
    }

    /// Takes a slot, waiting while all are taken or a waiter with a higher
    /// `priority` (or as high, waiting longer) is there. `None` once
    /// `stopped()` says so (checked every [`SLOT_WAIT_POLL`]).
    pub fn acquire(&self, priority: f64, stopped: &dyn Fn() -> bool) -> Option<Slot> {
        self.acquire_renewing(priority, stopped, Duration::MAX, &mut || Some(priority))
    }

    /// [`Self::acquire`], renewing the priority while waiting: every
    /// `every`, `renew()` (called without the slots' lock, so it may read
    /// the disk) gives the waiter's new priority, keeping its place among
    /// equals; `None` from it leaves the queue (nothing to run any more)
    /// and returns `None`. A store waiting behind others keeps judging its
    /// own garbage meanwhile: with a priority fixed when it began to wait,
    /// a vnode that queued a little over its limit waited minutes behind
    /// vnodes queuing with more, while its journal grew from 115 MB judged
    /// to 1.25 GB held (Test Pilot 25 KB on three nodes, 2026-12-06).
    pub fn acquire_renewing(
        &self,
        priority: f64,
        stopped: &dyn Fn() -> bool,
        every: Duration,
        renew: &mut dyn FnMut() -> Option<f64>,
    ) -> Option<Slot> {
        let inner = &self.inner;
        let mut s = inner.state.lock();
        if s.busy < inner.max && s.waiting.is_empty() {
            s.busy += 1;
            return Some(Slot {
                inner: Arc::clone(inner),
            });
        }
        let ticket = s.next_ticket;
        s.next_ticket += 1;
        s.waiting.push((ticket, priority));
        let mut renewed = std::time::Instant::now();
        loop {
            if s.busy < inner.max && s.first() == Some(ticket) {
                s.waiting.retain(|w| w.0 != ticket);
                s.busy += 1;
                drop(s);
                // Another slot may be free for the next waiter.
                inner.freed.notify_all();
                return Some(Slot {
                    inner: Arc::clone(inner),
                });
            }
            if stopped() {
                s.waiting.retain(|w| w.0 != ticket);
                drop(s);
                inner.freed.notify_all();
                return None;
            }
            if renewed.elapsed() >= every {
                let now = parking_lot::MutexGuard::unlocked(&mut s, &mut *renew);
                renewed = std::time::Instant::now();
                match now {
                    Some(p) => {
                        if let Some(w) = s.waiting.iter_mut().find(|w| w.0 == ticket) {
                            w.1 = p;
                        }
                    }
                    None => {
                        s.waiting.retain(|w| w.0 != ticket);
                        drop(s);
                        inner.freed.notify_all();
                        return None;
                    }
                }
                // The order may have changed: a slot free for someone.
                inner.freed.notify_all();
                continue;
            }
            inner.freed.wait_for(&mut s, SLOT_WAIT_POLL);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

    #[test]
    fn no_more_runs_at_once_than_slots() {
        let slots = CompactionSlots::new(2);
        let running = Arc::new(AtomicUsize::new(0));
        let most = Arc::new(AtomicUsize::new(0));
        let threads: Vec<_> = (0..8)
            .map(|i| {
                let (slots, running, most) = (slots.clone(), running.clone(), most.clone());
                std::thread::spawn(move || {
                    for _ in 0..20 {
                        let _slot = slots.acquire(f64::from(i), &|| false).unwrap();
                        let now = running.fetch_add(1, Ordering::SeqCst) + 1;
                        most.fetch_max(now, Ordering::SeqCst);
                        std::thread::sleep(Duration::from_micros(200));
                        running.fetch_sub(1, Ordering::SeqCst);
                    }
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(most.load(Ordering::SeqCst), 2);
        assert_eq!(slots.busy(), 0);
        assert_eq!(slots.waiting(), 0);
    }

    /// Waits (up to 10 s) until `n` stores wait for a slot.
    fn until_waiting(slots: &CompactionSlots, n: usize) {
        let t0 = std::time::Instant::now();
        while slots.waiting() != n {
            assert!(t0.elapsed() < Duration::from_secs(10), "waiters never came");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn a_freed_slot_goes_to_the_store_most_over_its_limit_then_the_oldest() {
        let slots = CompactionSlots::new(1);
        let held = slots.acquire(0.0, &|| false).unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut threads = Vec::new();
        // Queued one at a time so that the tickets follow this order.
        for (name, prio) in [
            ("low", 1.0),
            ("high-old", 9.0),
            ("high-new", 9.0),
            ("mid", 5.0),
        ] {
            let (mine, order) = (slots.clone(), order.clone());
            threads.push(std::thread::spawn(move || {
                let _slot = mine.acquire(prio, &|| false).unwrap();
                order.lock().push(name);
            }));
            until_waiting(&slots, threads.len());
        }
        drop(held);
        for t in threads {
            t.join().unwrap();
        }
        assert_eq!(*order.lock(), ["high-old", "high-new", "mid", "low"]);
    }

    #[test]
    fn a_stopping_store_leaves_the_queue_and_frees_its_turn() {
        let slots = CompactionSlots::new(1);
        let held = slots.acquire(0.0, &|| false).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let (s2, stop2) = (slots.clone(), stop.clone());
        let stopping = std::thread::spawn(move || {
            s2.acquire(100.0, &|| stop2.load(Ordering::SeqCst))
                .is_none()
        });
        until_waiting(&slots, 1);
        let s3 = slots.clone();
        let other = std::thread::spawn(move || s3.acquire(1.0, &|| false).is_some());
        until_waiting(&slots, 2);
        stop.store(true, Ordering::SeqCst);
        assert!(stopping.join().unwrap(), "a stopping waiter gets no slot");
        until_waiting(&slots, 1);
        drop(held);
        assert!(other.join().unwrap(), "the next waiter gets the slot");
        assert_eq!(slots.busy(), 0);
    }

    /// A waiter renewing its priority passes one that queued with more;
    /// a waiter with nothing left to run leaves the queue.
    #[test]
    fn a_waiter_renews_its_priority_or_leaves() {
        let slots = CompactionSlots::new(1);
        let held = slots.acquire(0.0, &|| false).unwrap();
        let order = Arc::new(Mutex::new(Vec::new()));
        let (s1, o1) = (slots.clone(), order.clone());
        let rising = std::thread::spawn(move || {
            let every = Duration::from_millis(10);
            let _slot = s1.acquire_renewing(1.0, &|| false, every, &mut || Some(9.0));
            o1.lock().push("rising");
        });
        until_waiting(&slots, 1);
        let (s2, o2) = (slots.clone(), order.clone());
        let fixed = std::thread::spawn(move || {
            let _slot = s2.acquire(5.0, &|| false).unwrap();
            o2.lock().push("fixed");
        });
        until_waiting(&slots, 2);
        let s3 = slots.clone();
        let leaving = std::thread::spawn(move || {
            let every = Duration::from_millis(10);
            s3.acquire_renewing(100.0, &|| false, every, &mut || None)
                .is_none()
        });
        assert!(leaving.join().unwrap(), "renewed to nothing: no slot");
        // Let the rising waiter renew at least once.
        std::thread::sleep(Duration::from_millis(100));
        drop(held);
        rising.join().unwrap();
        fixed.join().unwrap();
        assert_eq!(*order.lock(), ["rising", "fixed"]);
        assert_eq!((slots.busy(), slots.waiting()), (0, 0));
    }

    #[test]
    fn slots_are_bounded() {
        assert_eq!(CompactionSlots::new(0).max(), 1);
        assert_eq!(CompactionSlots::new(10_000).max(), COMPACTION_SLOTS_MAX);
    }
}
