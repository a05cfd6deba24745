//! DELETE as a tombstone PUT, then the tombstone reap (`delete_mode`):
//! removed from every replica only when all hold it with the same clock.

use super::PutOpts;
use crate::error::RequestError;
use crate::node::Node;
use crate::object::vclock::VClock;
use crate::object::Content;
use crate::vnode::request::{VnodeReply, VnodeReq};
use futures_util::stream::StreamExt;
use std::sync::Arc;

impl Node {
    /// DELETE: a tombstone PUT ([`Node::put`]), then, unless the config's
    /// `delete_mode` is `keep`, a task that waits the mode's delay and reaps
    /// the tombstone ([`Node::reap_tombstone`]). Reaps pending at shutdown
    /// are dropped (the tombstones stay, as in Riak after a vnode restart).
    /// Must run inside a tokio runtime.
    pub async fn delete(
        self: &Arc<Self>,
        bucket: &[u8],
        key: &[u8],
        client: Option<VClock>,
        opts: &PutOpts,
    ) -> Result<(), RequestError> {
        let tomb = Content {
            deleted: true,
            ..Content::default()
        };
        let written = self.put(bucket, key, client, tomb, opts).await?;
        let delay = self.config.delete_mode.delay();
        if let (Some(obj), Some(delay)) = (written, delay) {
            if obj.is_deleted() {
                let node = Arc::clone(self);
                let (b, k) = (bucket.to_vec(), key.to_vec());
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    match node.reap_and_replicate(&b, &k, &obj.vclock).await {
                        Ok(n) => tracing::debug!(replicas = n, "tombstone reap"),
                        Err(e) => tracing::debug!(error = %e, "tombstone reap"),
                    }
                });
            }
        }
        Ok(())
    }

    /// Removes a tombstone from the backends of its `n_val` replicas if all
    /// of them hold it with exactly this clock (Riak's reap: every replica
    /// must agree); each replica re-checks the clock in the same job as the
    /// removal, so a write that raced the reap survives. Returns the
    /// replicas reaped (0 when not all held the tombstone).
    pub async fn reap_tombstone(
        &self,
        bucket: &[u8],
        key: &[u8],
        vclock: &VClock,
    ) -> Result<usize, RequestError> {
        let props = self.props.get(bucket);
        let targets = self.router.key_targets(bucket, key, props.n_val);
        // Every replica must be a reachable primary holding this tombstone.
        if targets.len() < props.n_val as usize || targets.iter().any(|t| !t.primary) {
            return Ok(0);
        }
        let head = || VnodeReq::Head {
            bucket: bucket.to_vec(),
            key: key.to_vec(),
        };
        let mut replies = self.router.fan_out(&targets, head);
        while let Some((_, res)) = replies.next().await {
            let same = match res? {
                VnodeReply::Object(Some(w), _) => w
                    .head()
                    .is_ok_and(|o| o.is_deleted() && o.vclock.same_events(vclock)),
                _ => false,
            };
            if !same {
                return Ok(0);
            }
        }
        drop(replies);
        let reap = || VnodeReq::ReapTombstone {
            bucket: bucket.to_vec(),
            key: key.to_vec(),
            vclock: vclock.encode(),
        };
        let mut reaped = 0;
        let mut replies = self.router.fan_out(&targets, reap);
        while let Some((_, res)) = replies.next().await {
            if matches!(res?, VnodeReply::Reaped(true)) {
                reaped += 1;
            }
        }
        Ok(reaped)
    }
}
