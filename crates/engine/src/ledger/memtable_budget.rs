//! A memory budget for the memtables of many stores (a node's vnodes).
//!
//! Each store freezes its active memtable at `Config::memtable_bytes`, so
//! the memory of N stores' memtables is N × that, plus the frozen ones
//! waiting for their flush: a node's memory grew with the number of vnodes
//! it held (22 vnodes of 4 MiB, twice over while flushing, on a 3-node
//! cluster of a 64 ring; 64 of them on a node whose peers are down), and a
//! node in a 512 MiB cgroup was killed by the kernel in the seeds' Test
//! Pilot run (`docs/benchmarks/2026-12-02-1745-testpilot-1k-50k-and-sync-wa-floor.md`).
//!
//! A [`MemtableBudget`] is shared by the stores (`Config::memtable_budget`)
//! and counts every byte their memtables hold, from the insert that adds it
//! until the memtable is dropped (after its flush, and after the last
//! snapshot reading it is gone), and apart the bytes of the *active*
//! memtables. While the active ones hold 7/8 of the budget, a store that
//! inserts freezes its active memtable if that holds at least
//! [`MemtableBudget::freeze_floor`] bytes, so the stores that write are the
//! ones that flush (as RocksDB's write-buffer manager does for the
//! databases sharing it). Counting only the active bytes matters: a frozen
//! memtable holds its memory until its flush ends, and counting it made
//! every writing store freeze at once (all 22 vnodes of a node in one
//! step). So the active memtables stay within 7/8 of the budget (plus up
//! to one floor per store, memtables too small to freeze), and the frozen
//! ones add what the flushes in progress still hold.
//!
//! The counts are the memtable's own estimate (key and value bytes plus a
//! fixed overhead per entry); `examples/memtable_heap.rs` measures the heap
//! they really take against it.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

/// The smallest budget accepted (below it every insert would freeze).
pub const MEMTABLE_BUDGET_MIN: usize = 1 << 20;

/// A memtable below `memtable_bytes / FREEZE_FLOOR_DIVISOR` is not frozen
/// for the budget's sake: a store that writes rarely would otherwise turn
/// out L0 files of a few entries.
const FREEZE_FLOOR_DIVISOR: usize = 8;

/// A byte budget shared by the memtables of many stores. Cloning shares it.
#[derive(Debug, Clone)]
pub struct MemtableBudget {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    limit: usize,
    used: AtomicUsize,
    /// The part of `used` in active (not frozen) memtables.
    active: AtomicUsize,
    /// Memtables frozen because the budget was full (not their own size).
    freezes: AtomicU64,
}

impl MemtableBudget {
    /// A budget of `limit` bytes; `None` below [`MEMTABLE_BUDGET_MIN`].
    pub fn new(limit: usize) -> Option<Self> {
        (limit >= MEMTABLE_BUDGET_MIN).then(|| MemtableBudget {
            inner: Arc::new(Inner {
                limit,
                used: AtomicUsize::new(0),
                active: AtomicUsize::new(0),
                freezes: AtomicU64::new(0),
            }),
        })
    }

    /// The budget in bytes.
    pub fn limit(&self) -> usize {
        self.inner.limit
    }

    /// Bytes the memtables sharing it hold now.
    pub fn used(&self) -> usize {
        self.inner.used.load(Ordering::Relaxed)
    }

    /// Bytes in active memtables (the part of [`MemtableBudget::used`] not
    /// yet frozen).
    pub fn active(&self) -> usize {
        self.inner.active.load(Ordering::Relaxed)
    }

    /// Active bytes at which stores start freezing: 7/8 of the budget.
    pub fn freeze_mark(&self) -> usize {
        self.inner.limit - self.inner.limit / 8
    }

    /// Memtables frozen so far because the budget was full.
    pub fn freezes(&self) -> u64 {
        self.inner.freezes.load(Ordering::Relaxed)
    }

    /// The smallest memtable frozen for the budget's sake, for stores whose
    /// own limit is `memtable_bytes`.
    pub fn freeze_floor(memtable_bytes: usize) -> usize {
        (memtable_bytes / FREEZE_FLOOR_DIVISOR).max(1)
    }

    /// Whether a store whose active memtable holds `bytes` (of its own
    /// limit `memtable_bytes`) should freeze it now because the budget is
    /// spent. Counts the freeze when it says yes.
    pub(crate) fn should_freeze(&self, bytes: usize, memtable_bytes: usize) -> bool {
        let yes =
            self.active() >= self.freeze_mark() && bytes >= Self::freeze_floor(memtable_bytes);
        if yes {
            self.inner.freezes.fetch_add(1, Ordering::Relaxed);
        }
        yes
    }

    /// An active memtable grew by `bytes`.
    pub(crate) fn add(&self, bytes: usize) {
        self.inner.used.fetch_add(bytes, Ordering::Relaxed);
        self.inner.active.fetch_add(bytes, Ordering::Relaxed);
    }

    /// A memtable of `bytes` was frozen: they stay used, no longer active.
    pub(crate) fn frozen(&self, bytes: usize) {
        let before = self.inner.active.fetch_sub(bytes, Ordering::Relaxed);
        debug_assert!(
            before >= bytes,
            "memtable budget froze more than was active"
        );
    }

    /// A memtable of `bytes` was dropped (`was_active`: never frozen).
    pub(crate) fn release(&self, bytes: usize, was_active: bool) {
        if was_active {
            self.frozen(bytes);
        }
        let before = self.inner.used.fetch_sub(bytes, Ordering::Relaxed);
        debug_assert!(
            before >= bytes,
            "memtable budget released more than it held"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn too_small_a_budget_is_none() {
        assert!(MemtableBudget::new(MEMTABLE_BUDGET_MIN - 1).is_none());
        assert!(MemtableBudget::new(MEMTABLE_BUDGET_MIN).is_some());
    }

    #[test]
    fn freezes_only_at_the_mark_and_above_the_floor() {
        let b = MemtableBudget::new(MEMTABLE_BUDGET_MIN).unwrap();
        let per_store = 4 << 20;
        let floor = MemtableBudget::freeze_floor(per_store);
        assert_eq!(floor, 512 << 10);
        let mark = b.freeze_mark();
        assert_eq!(mark, MEMTABLE_BUDGET_MIN / 8 * 7);
        b.add(mark - 1);
        assert!(!b.should_freeze(floor, per_store), "under the mark");
        b.add(1);
        assert!(!b.should_freeze(floor - 1, per_store), "below the floor");
        assert!(b.should_freeze(floor, per_store));
        assert_eq!(b.freezes(), 1);
        // Once frozen, the bytes are still used but no longer active.
        b.frozen(floor);
        assert_eq!((b.used(), b.active()), (mark, mark - floor));
        assert!(
            !b.should_freeze(floor, per_store),
            "a freeze in flight is not counted twice"
        );
        b.release(floor, false);
        b.release(mark - floor, true);
        assert_eq!((b.used(), b.active()), (0, 0));
    }
}
