//! Full-sync (interim): both clusters compute a tree of all their keys
//! over a covering set that counts each key once (4096 segments, each key
//! hashed with its clock); segments that differ are dirty; both list their
//! keys in up to [`crate::limits::MAX_DIRTY_SEGMENTS`] dirty segments; every
//! key the source holds with another clock than the sink (or that the sink
//! lacks) is read here and pushed. Keys only the sink holds are left alone
//! (one way). Each full-sync first sends the source's bucket types and
//! props, which the sink merges by change stamp (as gossip).

use super::sender;
use crate::cluster::{Msg, ReplItem, Reply, CONTROL_TIMEOUT};
use crate::node::Node;
use crate::vnode::request::{VnodeReply, VnodeReq};
use crate::vnode::serve::AAE_TREE;
use std::collections::BTreeMap;
use std::sync::atomic::Ordering;

/// What a full-sync did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FullSync {
    /// Dirty segments found.
    pub dirty_segments: usize,
    /// Objects pushed to the sink.
    pub pushed: usize,
}

impl Node {
    /// Sink side: this cluster's full-sync tree.
    pub(crate) async fn repl_tree(&self) -> Result<Vec<u64>, String> {
        let n = self.props().get(b"").n_val;
        let plan = self
            .router
            .coverage_plan(n)
            .ok_or("insufficient_vnodes_available")?;
        let mut tree = vec![0u64; AAE_TREE.segments() as usize];
        for (t, firsts) in plan {
            let req = VnodeReq::AaeTree {
                ring_size: self.router.ring.size(),
                firsts,
            };
            match self
                .router
                .vcall(&t, req)
                .await
                .map_err(|e| e.to_string())?
            {
                VnodeReply::AaeTree(part) => {
                    for (slot, h) in tree.iter_mut().zip(part) {
                        *slot ^= h;
                    }
                }
                _ => return Err("unexpected tree reply".into()),
            }
        }
        Ok(tree)
    }

    /// Sink side: (bucket, key, clock hash) of this cluster's keys in
    /// `segments`.
    pub(crate) async fn repl_keys(
        &self,
        segments: Vec<u32>,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>, u64)>, String> {
        let n = self.props().get(b"").n_val;
        let plan = self
            .router
            .coverage_plan(n)
            .ok_or("insufficient_vnodes_available")?;
        let mut out = Vec::new();
        for (t, firsts) in plan {
            let req = VnodeReq::AaeKeys {
                ring_size: self.router.ring.size(),
                firsts,
                segments: segments.clone(),
            };
            match self
                .router
                .vcall(&t, req)
                .await
                .map_err(|e| e.to_string())?
            {
                VnodeReply::AaeKeys(keys) => out.extend(keys),
                _ => return Err("unexpected keys reply".into()),
            }
        }
        Ok(out)
    }

    /// One full-sync with the first reachable node of the first sink.
    pub async fn fullsync(&self) -> Result<FullSync, String> {
        let Some(sink) = self.repl.sinks().into_iter().next() else {
            return Err("no repl sinks configured (config [repl] sinks)".into());
        };
        let addrs: Vec<String> = sink
            .peers
            .lock()
            .peers()
            .iter()
            .map(|p| p.addr.clone())
            .collect();
        let mut last = String::new();
        for addr in &addrs {
            match self.fullsync_with(addr).await {
                Ok(r) => {
                    self.repl_sink.fullsyncs.fetch_add(1, Ordering::Relaxed);
                    tracing::info!(sink = %addr, dirty = r.dirty_segments, pushed = r.pushed, "full-sync done");
                    return Ok(r);
                }
                Err(e) => last = format!("{addr}: {e}"),
            }
        }
        Err(last)
    }

    async fn fullsync_with(&self, addr: &str) -> Result<FullSync, String> {
        let call = |m: Msg| async move {
            self.router
                .cluster
                .peers
                .call(addr, &m, CONTROL_TIMEOUT.max(self.timeout()))
                .await
                .map_err(|e| e.to_string())
        };
        // Bucket types and props first (merged by change stamp, as gossip).
        match call(Msg::ReplMeta(self.meta())).await? {
            Reply::Ok => {}
            Reply::Refused(e) => return Err(e),
            other => return Err(format!("unexpected reply {other:?}")),
        }
        let mine = self.repl_tree().await?;
        let theirs = match call(Msg::ReplTree).await? {
            Reply::Tree(t) => t,
            Reply::Refused(e) => return Err(e),
            other => return Err(format!("unexpected reply {other:?}")),
        };
        let dirty: Vec<u32> = (0..mine.len())
            .filter(|&i| mine.get(i) != theirs.get(i))
            .map(|i| i as u32)
            .collect();
        let mut result = FullSync {
            dirty_segments: dirty.len(),
            pushed: 0,
        };
        if dirty.is_empty() {
            return Ok(result);
        }
        let segments: Vec<u32> = dirty
            .into_iter()
            .take(crate::limits::MAX_DIRTY_SEGMENTS)
            .collect();
        let theirs: BTreeMap<(Vec<u8>, Vec<u8>), u64> =
            match call(Msg::ReplKeys(segments.clone())).await? {
                Reply::Keys(k) => k.into_iter().map(|(b, k, h)| ((b, k), h)).collect(),
                Reply::Refused(e) => return Err(e),
                other => return Err(format!("unexpected reply {other:?}")),
            };
        let mut batch = Vec::new();
        for (bucket, key, h) in self.repl_keys(segments).await? {
            if theirs.get(&(bucket.clone(), key.clone())) == Some(&h) {
                continue;
            }
            let Some(obj) = sender::read_current(self, &bucket, &key)
                .await
                .map_err(|e| format!("reading a key to push: {e}"))?
            else {
                continue;
            };
            batch.push(ReplItem::Object((bucket, key, obj)));
            if batch.len() >= crate::limits::REPL_BATCH {
                result.pushed += batch.len();
                sender::push(self, addr, std::mem::take(&mut batch)).await?;
            }
        }
        if !batch.is_empty() {
            result.pushed += batch.len();
            sender::push(self, addr, batch).await?;
        }
        self.repl_sink
            .fullsync_pushed
            .fetch_add(result.pushed as u64, Ordering::Relaxed);
        Ok(result)
    }
}
