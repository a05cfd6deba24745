#![allow(missing_docs, clippy::all, clippy::unwrap_used)]
//! TEMPORARY in-memory shim with the durable queue's API (not committed).
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::path::Path;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Priority {
    Requeue = 1,
    FullSync = 2,
    RealTime = 3,
}
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Payload {
    Object { meta: Vec<u8>, value: Vec<u8> },
    Ref { clock: Vec<u8> },
    Reap { clock: Vec<u8> },
}
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    pub bucket: Vec<u8>,
    pub key: Vec<u8>,
    pub payload: Payload,
}
impl Entry {
    pub fn size(&self) -> usize {
        self.bucket.len()
            + self.key.len()
            + match &self.payload {
                Payload::Object { meta, value } => meta.len() + value.len(),
                Payload::Ref { clock } | Payload::Reap { clock } => clock.len(),
            }
    }
}
#[derive(Debug, Clone)]
pub struct QueueLimits {
    pub memory_entries: usize,
    pub max_entries: u64,
    pub spill_file_bytes: u64,
}
impl Default for QueueLimits {
    fn default() -> Self {
        QueueLimits {
            memory_entries: 10_000,
            max_entries: 1_000_000,
            spill_file_bytes: 64 << 20,
        }
    }
}
#[derive(Debug, Default)]
pub struct OpenReport {
    pub recovered: [u64; 3],
    pub corrupt_skipped: u64,
    pub clean: bool,
}
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct QueueStats {
    pub pushed: u64,
    pub discarded: u64,
    pub spilled: u64,
    pub acked: u64,
    pub requeued: u64,
    pub corrupt_skipped: u64,
}
#[derive(Debug, thiserror::Error)]
pub enum QueueError {
    #[error("io {0}")]
    Io(String),
}
#[derive(Default)]
struct Inner {
    q: [VecDeque<Entry>; 3],
    fl: BTreeMap<u64, (Priority, Entry)>,
    next: u64,
    st: QueueStats,
}
pub struct DurableQueue {
    inner: Mutex<Inner>,
    limits: QueueLimits,
}
fn ix(p: Priority) -> usize {
    p as usize - 1
}
impl DurableQueue {
    pub fn open(
        _dir: &Path,
        limits: QueueLimits,
    ) -> Result<(DurableQueue, OpenReport), QueueError> {
        Ok((
            DurableQueue {
                inner: Mutex::new(Inner::default()),
                limits,
            },
            OpenReport {
                clean: true,
                ..Default::default()
            },
        ))
    }
    pub fn push(&self, p: Priority, e: Entry) -> Result<bool, QueueError> {
        let mut i = self.inner.lock();
        if i.q[ix(p)].len() as u64 >= self.limits.max_entries {
            i.st.discarded += 1;
            return Ok(false);
        }
        i.q[ix(p)].push_back(e);
        i.st.pushed += 1;
        Ok(true)
    }
    pub fn take(&self, max: usize, max_bytes: usize) -> Vec<(u64, Priority, Entry)> {
        let mut i = self.inner.lock();
        let mut out = Vec::new();
        let mut bytes = 0;
        for p in [Priority::RealTime, Priority::FullSync, Priority::Requeue] {
            while out.len() < max {
                let Some(e) = i.q[ix(p)].front() else { break };
                if !out.is_empty() && bytes + e.size() > max_bytes {
                    return out;
                }
                bytes += e.size();
                let e = i.q[ix(p)].pop_front().unwrap();
                i.next += 1;
                let t = i.next;
                i.fl.insert(t, (p, e.clone()));
                out.push((t, p, e));
            }
        }
        out
    }
    pub fn ack(&self, t: &[u64]) {
        let mut i = self.inner.lock();
        for t in t {
            if i.fl.remove(t).is_some() {
                i.st.acked += 1
            }
        }
    }
    pub fn nack(&self, t: &[u64]) {
        let mut i = self.inner.lock();
        for t in t.iter().rev() {
            if let Some((p, e)) = i.fl.remove(t) {
                i.q[ix(p)].push_front(e);
                i.st.requeued += 1
            }
        }
    }
    pub fn waiting(&self) -> [u64; 3] {
        let i = self.inner.lock();
        [
            i.q[0].len() as u64,
            i.q[1].len() as u64,
            i.q[2].len() as u64,
        ]
    }
    pub fn in_flight(&self) -> usize {
        self.inner.lock().fl.len()
    }
    pub fn stats(&self) -> QueueStats {
        self.inner.lock().st
    }
    pub fn clear(&self) -> Result<u64, QueueError> {
        let mut i = self.inner.lock();
        let n = i.q.iter().map(|q| q.len() as u64).sum();
        for q in i.q.iter_mut() {
            q.clear()
        }
        Ok(n)
    }
    pub fn close(&self) -> Result<(), QueueError> {
        Ok(())
    }
    pub fn flush(&self) -> Result<(), QueueError> {
        Ok(())
    }
}
