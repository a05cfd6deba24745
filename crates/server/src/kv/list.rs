//! Listings over a coverage plan: list keys (each covering vnode in bounded
//! batches, streamed as they come) and list buckets.

use super::Kv;
use crate::error::RequestError;
use crate::vnode::request::{VnodeReply, VnodeReq};
use futures_util::stream::StreamExt;
use std::collections::BTreeSet;
use std::future::Future;

pub use crate::limits::LIST_KEYS_BATCH;

impl Kv {
    /// Keys of `bucket` that are not tombstones, over a coverage plan: each
    /// covering vnode lists only the keys whose first primary it answers
    /// for (so no key twice, and nothing to remember across vnodes), in
    /// batches of at most [`LIST_KEYS_BATCH`] scanned keys (one vnode job
    /// each, on ordered backends), handed to `batch` as they come; `batch`
    /// resolving to `false` (the client went away) stops the listing.
    pub async fn list_keys<F, Fut>(&self, bucket: &[u8], mut batch: F) -> Result<(), RequestError>
    where
        F: FnMut(Vec<Vec<u8>>) -> Fut,
        Fut: Future<Output = bool>,
    {
        let props = self.props.get(bucket);
        let plan = self
            .router
            .coverage_plan(props.n_val)
            .ok_or_else(|| RequestError::Invalid("insufficient_vnodes_available".into()))?;
        for (t, firsts) in plan {
            let mut after: Option<Vec<u8>> = None;
            loop {
                let req = VnodeReq::ListKeys {
                    bucket: bucket.to_vec(),
                    after: after.clone(),
                    limit: LIST_KEYS_BATCH,
                    ring_size: self.router.ring.size(),
                    firsts: firsts.clone(),
                };
                let VnodeReply::Keys(keys, last, more) = self.router.vcall(&t, req).await? else {
                    return Err(RequestError::Storage("unexpected list keys reply".into()));
                };
                if !keys.is_empty() && !batch(keys).await {
                    return Ok(());
                }
                if !more || last.is_none() {
                    break;
                }
                after = last;
            }
        }
        Ok(())
    }

    /// Every bucket holding an object on any vnode, sorted.
    pub async fn list_buckets(&self) -> Result<Vec<Vec<u8>>, RequestError> {
        let mut all = BTreeSet::new();
        let targets = self.router.coverage_or_err(1)?;
        let mut replies = self.router.fan_out(&targets, || VnodeReq::ListBuckets);
        while let Some((_, res)) = replies.next().await {
            match res? {
                VnodeReply::Buckets(b) => all.extend(b),
                _ => {
                    return Err(RequestError::Storage(
                        "unexpected list buckets reply".into(),
                    ))
                }
            }
        }
        Ok(all.into_iter().collect())
    }
}
