//! The real-time replication queue: coordinated writes waiting to be sent
//! to the sink cluster, bounded (the oldest are dropped beyond the limit,
//! and counted). The node owns it (a PUT pushes to it); the replication
//! service ([`super::repl`]) drains it.

use crate::cluster::ReplObject;
use parking_lot::Mutex;
use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of replication (source side and sink side).
#[derive(Debug, Default)]
pub struct ReplStats {
    /// Objects sent and acknowledged by the sink.
    pub sent: AtomicU64,
    /// Objects dropped because the queue was full.
    pub dropped: AtomicU64,
    /// Failed batch sends.
    pub errors: AtomicU64,
    /// Objects received from a source cluster and applied.
    pub received: AtomicU64,
    /// Full-syncs completed.
    pub fullsyncs: AtomicU64,
    /// Objects pushed by full-syncs.
    pub fullsync_pushed: AtomicU64,
}

/// The real-time queue of a node.
#[derive(Debug, Default)]
pub struct ReplQueue {
    pub(crate) queue: Mutex<VecDeque<ReplObject>>,
    pub(crate) notify: tokio::sync::Notify,
    /// Counters.
    pub stats: ReplStats,
}

impl ReplQueue {
    /// Queues an object; drops the oldest when `limit` is reached.
    pub fn push(&self, item: ReplObject, limit: usize) {
        {
            let mut q = self.queue.lock();
            while q.len() >= limit.max(1) {
                q.pop_front();
                self.stats.dropped.fetch_add(1, Ordering::Relaxed);
            }
            q.push_back(item);
        }
        self.notify.notify_one();
    }

    /// Objects waiting.
    pub fn len(&self) -> usize {
        self.queue.lock().len()
    }

    /// True when nothing waits.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}
