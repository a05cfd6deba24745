//! Write groups: how concurrent writers share one trip through the write lock.
//!
//! A writer prepares its record (encoded, compressed, checksummed) before it
//! joins the queue. If no writer is leading, it leads: it takes every queued
//! record (up to [`GROUP_RECORDS_MAX`] records and [`GROUP_BYTES_MAX`]
//! bytes, always at least one), writes them as one group (the store does
//! that: one journal write, the ledger inserts in SQN order), hands the lead
//! to the oldest writer still queued, and only then completes its group's
//! writers — after one fsync for the group if any of them asked for sync, so
//! the next group writes while this one's fsync runs (RocksDB's write group;
//! [`crate::journal::Journal::sync_to`] still coalesces overlapping fsyncs).
//! A writer that joins while another leads parks until it is either handed
//! the lead or given its result: at most one wake-up per write.
//!
//! Invariants: exactly one writer leads at a time (`leading`); a queued
//! writer is never left without a leader (the lead is handed over under the
//! queue's lock whenever the queue is not empty); a group is written in
//! queue order, so SQNs follow arrival order.

use crate::error::Result;
use crate::sync::Mutex;
use std::collections::VecDeque;
use std::sync::Arc;
use std::thread::Thread;

/// Most records written as one group.
pub const GROUP_RECORDS_MAX: usize = 256;

/// Most encoded bytes written as one group (a larger single record still
/// forms a group of its own).
pub const GROUP_BYTES_MAX: usize = 8 * 1024 * 1024;

/// What a queued writer is waiting for.
enum SlotState {
    Waiting,
    Lead,
    Done(Result<u64>),
}

/// One queued writer's mailbox: its state and the thread to wake.
pub struct Slot {
    state: Mutex<SlotState>,
    thread: Thread,
}

impl Slot {
    /// Gives the writer its result and wakes it.
    pub fn complete(&self, result: Result<u64>) {
        *self.state.lock() = SlotState::Done(result);
        self.thread.unpark();
    }

    fn lead(&self) {
        *self.state.lock() = SlotState::Lead;
        self.thread.unpark();
    }
}

/// One member of a group: the prepared write and the writer's slot.
pub struct Member<T> {
    /// The prepared write.
    pub item: T,
    /// Where its result goes (see [`Slot::complete`]).
    pub slot: Arc<Slot>,
    bytes: usize,
}

/// What [`WriteQueue::join`] gives a writer.
pub enum Joined<T> {
    /// Another writer wrote this one's record: its result.
    Done(Result<u64>),
    /// This writer leads: write the group (its own record is the member
    /// whose slot is `own`), call [`WriteQueue::pass_lead`], then complete
    /// every other member.
    Lead {
        /// The records to write, in queue order.
        group: Vec<Member<T>>,
        /// The leader's own slot (compare with `Arc::ptr_eq`).
        own: Arc<Slot>,
    },
}

struct QueueState<T> {
    pending: VecDeque<Member<T>>,
    leading: bool,
}

/// The queue of writers (see the module docs).
pub struct WriteQueue<T> {
    state: Mutex<QueueState<T>>,
}

impl<T> Default for WriteQueue<T> {
    fn default() -> Self {
        WriteQueue {
            state: Mutex::new(QueueState {
                pending: VecDeque::new(),
                leading: false,
            }),
        }
    }
}

impl<T> WriteQueue<T> {
    /// Queues `item` (`bytes` counts against [`GROUP_BYTES_MAX`]) and waits
    /// until this writer leads a group or another leader completed it.
    pub fn join(&self, item: T, bytes: usize) -> Joined<T> {
        let slot = Arc::new(Slot {
            state: Mutex::new(SlotState::Waiting),
            thread: std::thread::current(),
        });
        let mut st = self.state.lock();
        st.pending.push_back(Member {
            item,
            slot: Arc::clone(&slot),
            bytes,
        });
        if !st.leading {
            // No leader means nothing was queued before this writer.
            debug_assert_eq!(st.pending.len(), 1);
            st.leading = true;
            let group = take_group(&mut st.pending);
            return Joined::Lead { group, own: slot };
        }
        drop(st);
        loop {
            let state = std::mem::replace(&mut *slot.state.lock(), SlotState::Waiting);
            match state {
                SlotState::Waiting => std::thread::park(),
                SlotState::Done(result) => return Joined::Done(result),
                SlotState::Lead => {
                    let group = take_group(&mut self.state.lock().pending);
                    debug_assert!(group.first().is_some_and(|m| Arc::ptr_eq(&m.slot, &slot)));
                    return Joined::Lead { group, own: slot };
                }
            }
        }
    }

    /// Ends the caller's lead: the oldest queued writer leads next, or no
    /// one if the queue is empty. Call once the group is written and before
    /// waiting for its fsync.
    pub fn pass_lead(&self) {
        let mut st = self.state.lock();
        debug_assert!(st.leading);
        match st.pending.front() {
            Some(next) => next.slot.lead(),
            None => st.leading = false,
        }
    }
}

/// Takes the next group off the front of the queue (at least one member).
fn take_group<T>(pending: &mut VecDeque<Member<T>>) -> Vec<Member<T>> {
    let mut group = Vec::new();
    let mut bytes = 0usize;
    while let Some(next) = pending.front() {
        let fits = group.len() < GROUP_RECORDS_MAX && bytes + next.bytes <= GROUP_BYTES_MAX;
        if !group.is_empty() && !fits {
            break;
        }
        bytes += next.bytes;
        if let Some(m) = pending.pop_front() {
            group.push(m);
        }
    }
    debug_assert!(!group.is_empty());
    group
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU64, Ordering};

    /// Many writers through one queue: every write gets its own result, the
    /// "SQNs" follow the order groups were written, and no group breaks the limits.
    #[test]
    fn every_writer_is_completed_once_in_order() {
        let q = Arc::new(WriteQueue::<u64>::default());
        let next = Arc::new(AtomicU64::new(1));
        let largest = Arc::new(AtomicU64::new(0));
        let threads: Vec<_> = (0..16u64)
            .map(|t| {
                let (q, next, largest) = (Arc::clone(&q), Arc::clone(&next), Arc::clone(&largest));
                std::thread::spawn(move || {
                    let mut mine = Vec::new();
                    for i in 0..500u64 {
                        let r = match q.join(t * 1000 + i, 100) {
                            Joined::Done(r) => r,
                            Joined::Lead { group, own } => {
                                largest.fetch_max(group.len() as u64, Ordering::Relaxed);
                                assert!(group.len() <= GROUP_RECORDS_MAX);
                                let first = next.fetch_add(group.len() as u64, Ordering::Relaxed);
                                q.pass_lead();
                                let mut own_result = None;
                                for (k, m) in group.into_iter().enumerate() {
                                    let sqn = first + k as u64;
                                    if Arc::ptr_eq(&m.slot, &own) {
                                        own_result = Some(Ok(sqn));
                                    } else {
                                        m.slot.complete(Ok(sqn));
                                    }
                                }
                                own_result.expect("the leader's own record is in its group")
                            }
                        };
                        mine.push(r.expect("no error"));
                    }
                    mine
                })
            })
            .collect();
        let mut all = Vec::new();
        for t in threads {
            let mine = t.join().expect("writer thread");
            // One writer's writes are sequential, so its SQNs increase.
            assert!(mine.windows(2).all(|w| w[0] < w[1]));
            all.extend(mine);
        }
        all.sort_unstable();
        let expect: Vec<u64> = (1..=16 * 500).collect();
        assert_eq!(all, expect, "every write got exactly one distinct sqn");
        assert!(largest.load(Ordering::Relaxed) >= 1);
    }

    #[test]
    fn groups_respect_the_byte_limit_but_take_one_oversized_record() {
        let mut pending = VecDeque::new();
        for bytes in [GROUP_BYTES_MAX + 1, 10, GROUP_BYTES_MAX - 5, 5] {
            pending.push_back(Member {
                item: (),
                slot: Arc::new(Slot {
                    state: Mutex::new(SlotState::Waiting),
                    thread: std::thread::current(),
                }),
                bytes,
            });
        }
        assert_eq!(
            take_group(&mut pending).len(),
            1,
            "an oversized record goes alone"
        );
        assert_eq!(
            take_group(&mut pending).len(),
            1,
            "10 + (max - 5) does not fit"
        );
        assert_eq!(
            take_group(&mut pending).len(),
            2,
            "(max - 5) + 5 fits exactly"
        );
        assert!(pending.is_empty());
    }
}
