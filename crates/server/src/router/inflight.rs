//! The bytes of the objects a node's fan-out write calls carry while they
//! are in flight (sent to a vnode here or on a peer, not yet answered):
//! what `limits.replica_writes_in_flight_mb` bounds. A PUT over the limit
//! waits here until the calls of all PUTs fall back under it
//! ([`WriteBytes::wait_under`]); each call that ends wakes the waiters,
//! and only when there are any, so the usual path costs one atomic add,
//! one subtract and one load a call.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::Notify;

/// Bytes in flight, and the tasks waiting for them to fall.
#[derive(Debug, Default)]
pub(crate) struct WriteBytes {
    bytes: AtomicU64,
    waiters: AtomicUsize,
    done: Notify,
}

/// One task counted in [`WriteBytes::waiters`] while it lives.
struct Waiter<'a>(&'a AtomicUsize);

impl Drop for Waiter<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl WriteBytes {
    /// A call carrying `n` bytes starts.
    pub(crate) fn add(&self, n: u64) {
        self.bytes.fetch_add(n, Ordering::SeqCst);
    }

    /// A call carrying `n` bytes ended: the waiters, if any, look again.
    pub(crate) fn sub(&self, n: u64) {
        let before = self.bytes.fetch_sub(n, Ordering::SeqCst);
        debug_assert!(before >= n, "write bytes in flight went below zero");
        // SeqCst with the waiter's count and its check of the bytes: one
        // of the two sees the other.
        if n > 0 && self.waiters.load(Ordering::SeqCst) > 0 {
            self.done.notify_waiters();
        }
    }

    /// Bytes in flight now.
    pub(crate) fn get(&self) -> u64 {
        self.bytes.load(Ordering::SeqCst)
    }

    /// Waits until at most `limit` bytes are in flight, or `timeout` has
    /// passed; whether they are.
    pub(crate) async fn wait_under(&self, limit: u64, timeout: Duration) -> bool {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let _waiter = Waiter(&self.waiters);
        let until = tokio::time::Instant::now() + timeout;
        loop {
            let done = self.done.notified();
            tokio::pin!(done);
            // Registered before the check: a call ending after it wakes us.
            done.as_mut().enable();
            if self.get() <= limit {
                return true;
            }
            if tokio::time::timeout_at(until, done).await.is_err() {
                return self.get() <= limit;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_waiter_goes_on_once_the_bytes_fall_under_the_limit() {
        let w = Arc::new(WriteBytes::default());
        w.add(100);
        w.add(50);
        assert!(
            w.wait_under(150, Duration::from_secs(5)).await,
            "at the limit"
        );
        let waiter = tokio::spawn({
            let w = Arc::clone(&w);
            async move { w.wait_under(60, Duration::from_secs(30)).await }
        });
        tokio::task::yield_now().await;
        w.sub(50); // 100 left: still over
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiter.is_finished(), "100 bytes are over 60");
        w.sub(100);
        assert!(waiter.await.expect("waiter"), "0 bytes are under 60");
        assert_eq!(w.waiters.load(Ordering::SeqCst), 0, "the waiter left");
    }

    #[tokio::test]
    async fn a_waiter_gives_up_at_its_timeout() {
        let w = WriteBytes::default();
        w.add(10);
        assert!(!w.wait_under(5, Duration::from_millis(30)).await);
        assert_eq!(w.waiters.load(Ordering::SeqCst), 0);
        w.sub(10);
        assert_eq!(w.get(), 0);
    }
}
