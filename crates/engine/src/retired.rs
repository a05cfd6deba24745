//! Replaced files whose last reference is dropped on a background thread.
//!
//! A ledger merge or a journal compaction replaces files that readers may
//! still hold (a version snapshot, a fetch in flight, a view). Each file is
//! unlinked when its last `Arc` is dropped (deferred deletion), and an
//! unlink can wait for the filesystem's journal for tens of milliseconds
//! while fsyncs run. Whoever drops last pays it, so the owner keeps one
//! reference of its own in a [`Retired`] list and drops it from its own
//! background thread ([`Retired::reap`]) once that reference is the last:
//! no reader ever pays for an unlink.
//!
//! Invariant: only the owner's live list (a version, the closed-file list)
//! hands out new references, and it no longer holds a retired entry, so an
//! entry whose count is one can never be shared again.

use parking_lot::Mutex;
use std::sync::Arc;

/// Replaced entries held until nothing else holds them. Bounded by what
/// readers hold: snapshots and views expire.
#[derive(Debug)]
pub struct Retired<T> {
    held: Mutex<Vec<Arc<T>>>,
    /// Held for a whole [`Retired::reap`], drops included: a reap that
    /// returns has seen every entry an earlier one took dropped (a
    /// store's settle after a background reaper's).
    reaping: Mutex<()>,
}

impl<T> Default for Retired<T> {
    fn default() -> Self {
        Retired {
            held: Mutex::new(Vec::new()),
            reaping: Mutex::new(()),
        }
    }
}

impl<T> Retired<T> {
    /// Takes `entries`, which the owner's live list no longer holds.
    pub fn extend(&self, entries: impl IntoIterator<Item = Arc<T>>) {
        self.held.lock().extend(entries);
    }

    /// Drops, on the caller's thread and outside the lock, the entries
    /// nothing else holds any more; returns how many.
    pub fn reap(&self) -> usize {
        let _one_at_a_time = self.reaping.lock();
        let free: Vec<Arc<T>> = {
            let mut held = self.held.lock();
            let (free, kept): (Vec<_>, Vec<_>) =
                held.drain(..).partition(|t| Arc::strong_count(t) == 1);
            *held = kept;
            free
        };
        let n = free.len();
        drop(free);
        n
    }

    /// Entries still held by readers.
    pub fn len(&self) -> usize {
        self.held.lock().len()
    }

    /// True when nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.held.lock().is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Counted(Arc<AtomicUsize>);
    impl Drop for Counted {
        fn drop(&mut self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn an_entry_is_dropped_by_reap_only_once_no_reader_holds_it() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let r = Retired::default();
        let a = Arc::new(Counted(Arc::clone(&dropped)));
        let reader = Arc::clone(&a);
        r.extend([a, Arc::new(Counted(Arc::clone(&dropped)))]);
        assert_eq!(r.reap(), 1, "the unshared one goes");
        assert_eq!(dropped.load(Ordering::SeqCst), 1);
        drop(reader);
        assert_eq!(
            dropped.load(Ordering::SeqCst),
            1,
            "the reader's drop frees nothing"
        );
        assert_eq!(r.len(), 1);
        assert_eq!(r.reap(), 1);
        assert_eq!(dropped.load(Ordering::SeqCst), 2);
        assert!(r.is_empty());
    }
}
