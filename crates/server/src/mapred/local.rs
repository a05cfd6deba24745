//! Map phases where the data is: a job whose input is a whole bucket and
//! whose first phase is a map runs that phase on the node of each covering
//! vnode. The coordinator ([`Node::map_fold`]) walks the coverage plan;
//! for each covering vnode it asks that vnode's node ([`Msg::MapFold`], or
//! a direct call when the vnode is local) for rounds: the node folds the
//! next [`CS_FOLD_BATCH`] keys of the bucket on its vnode, keeps the keys
//! whose first primary this vnode answers for in the plan (so each key is
//! mapped once), runs the map function on them there and sends back only
//! the map's output and a cursor ([`MAPRED_FOLD_PARALLEL`] covering vnodes
//! at a time). Values never cross the cluster to be
//! mapped. As in Riak, each key is read from one replica (the covering
//! vnode's copy, siblings merged there), not a quorum.

use super::job::{parse_map_spec, BucketName, PhaseFun};
use super::run::map_batch;
use super::{core::Fetched, MapRedError};
use crate::bucket::keying::split_storage_bucket;
use crate::cluster::{Msg, Reply};
use crate::error::RequestError;
use crate::limits::{CS_FOLD_BATCH, MAPRED_FOLD_PARALLEL};
use crate::node::Node;
use crate::ring::key_hash;
use crate::router::Target;
use crate::vnode::request::{VnodeReply, VnodeReq};
use futures_util::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// One round of a map phase on the local vnode of `partition`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MapFoldReq {
    /// The covering vnode's partition.
    pub partition: u32,
    /// The first-primary partitions whose keys it maps (coverage plan).
    pub firsts: Vec<u32>,
    /// The storage bucket.
    pub bucket: Vec<u8>,
    /// Continue after this key (`None`: from the start).
    pub after: Option<Vec<u8>>,
    /// The map phase's spec (`job::map_spec_json`), as JSON text
    /// (postcard cannot carry `serde_json::Value`).
    pub spec: String,
    /// Time left of the job, ms.
    pub timeout_ms: u64,
}

/// A round's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MapFoldBatch {
    /// The map outputs, a JSON list.
    pub outputs: String,
    /// Objects mapped this round.
    pub read: u64,
    /// The last key folded (the next round's `after`).
    pub last: Option<Vec<u8>>,
    /// The vnode has more keys of the bucket.
    pub more: bool,
}

/// A remote job error (its JSON, [`MapRedError::to_json`]) back to a
/// [`MapRedError`].
fn remote_error(text: &str) -> MapRedError {
    let v: Value = serde_json::from_str(text).unwrap_or(Value::Null);
    match (v.get("phase").and_then(Value::as_u64), v.get("error")) {
        (Some(phase), Some(e)) => MapRedError::Phase {
            phase: phase as usize,
            error: e.as_str().map_or_else(|| e.to_string(), str::to_string),
            input: v.get("input").cloned().filter(|i| !i.is_null()),
            stack: v.get("stack").and_then(Value::as_str).map(str::to_string),
        },
        (None, Some(Value::String(e))) if e == "timeout" => MapRedError::Timeout,
        (None, Some(Value::String(e))) => MapRedError::Request(RequestError::Storage(e.clone())),
        _ => MapRedError::Request(RequestError::Storage(text.to_string())),
    }
}

impl Node {
    /// One round of a map phase on this node's vnode (see the module docs).
    pub async fn map_fold_local(&self, req: &MapFoldReq) -> Result<MapFoldBatch, MapRedError> {
        let deadline = Instant::now() + Duration::from_millis(req.timeout_ms);
        self.stats
            .mapred_local_rounds
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let spec: Value = serde_json::from_str(&req.spec)
            .map_err(|e| MapRedError::Request(RequestError::Invalid(format!("map spec: {e}"))))?;
        let (fun, arg) = parse_map_spec(&spec)?;
        let target = Target {
            partition: req.partition,
            node: self.router.cluster.me().to_string(),
            primary: true,
        };
        let vreq = VnodeReq::CsFold {
            bucket: req.bucket.clone(),
            from: req.after.clone().unwrap_or_default(),
            from_incl: req.after.is_none(),
            end: None,
            end_incl: false,
            limit: CS_FOLD_BATCH as u32,
        };
        let reply = self
            .router
            .vcall(&target, vreq)
            .await
            .map_err(|e| MapRedError::Request(e.into()))?;
        let VnodeReply::CsBatch(wire, last, more) = reply else {
            return Err(MapRedError::Request(RequestError::Storage(
                "unexpected CS fold reply".into(),
            )));
        };
        let (btype, bname) = split_storage_bucket(&req.bucket);
        let bucket = BucketName {
            btype: btype.map(<[u8]>::to_vec),
            bucket: bname.to_vec(),
        };
        let mut inputs = Vec::new();
        for (key, w) in wire {
            let first = self
                .router
                .ring
                .first_primary(&key_hash(btype, bname, &key));
            if !req.firsts.contains(&first) {
                continue;
            }
            let o = w.object().map_err(|e| MapRedError::Request(e.into()))?;
            if o.is_deleted() {
                continue;
            }
            inputs.push(Fetched {
                bucket: bucket.clone(),
                key,
                keydata: Value::Null,
                object: Some(o),
            });
        }
        let read = inputs.len() as u64;
        let outputs = map_batch(self, 0, &fun, inputs, &arg, deadline).await?;
        Ok(MapFoldBatch {
            outputs: Value::Array(outputs).to_string(),
            read,
            last,
            more,
        })
    }

    /// Runs a first map phase over the whole of bucket `sb` where the data
    /// is, [`MAPRED_FOLD_PARALLEL`] covering vnodes at a time, sending every
    /// round's outputs and count of objects read to `out` (a closed `out`
    /// stops the fold).
    pub(crate) async fn map_fold(
        &self,
        sb: &[u8],
        fun: &PhaseFun,
        arg: &Value,
        deadline: Instant,
        out: mpsc::Sender<(Vec<Value>, u64)>,
    ) -> Result<(), MapRedError> {
        let props = self.props.get(sb);
        let plan = self
            .router
            .coverage_plan(props.n_val)
            .ok_or_else(|| RequestError::Invalid("insufficient_vnodes_available".into()))?;
        let spec = super::job::map_spec_json(fun, arg).to_string();
        let spec = spec.as_str();
        let out = &out;
        let mut vnodes = stream::iter(plan)
            .map(|(t, firsts)| self.map_fold_vnode(sb, t, firsts, spec, deadline, out))
            .buffer_unordered(MAPRED_FOLD_PARALLEL);
        while let Some(r) = vnodes.next().await {
            r?;
        }
        Ok(())
    }

    /// Every round of one covering vnode.
    async fn map_fold_vnode(
        &self,
        sb: &[u8],
        t: Target,
        firsts: Vec<u32>,
        spec: &str,
        deadline: Instant,
        out: &mpsc::Sender<(Vec<Value>, u64)>,
    ) -> Result<(), MapRedError> {
        let me = self.router.cluster.me().to_string();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(MapRedError::Timeout);
            }
            let req = MapFoldReq {
                partition: t.partition,
                firsts: firsts.clone(),
                bucket: sb.to_vec(),
                after: after.clone(),
                spec: spec.to_string(),
                timeout_ms: left.as_millis().try_into().unwrap_or(u64::MAX),
            };
            let batch = if t.node == me {
                self.map_fold_local(&req).await?
            } else {
                let storage = |m: String| MapRedError::Request(RequestError::Storage(m));
                match self
                    .router
                    .cluster
                    .call(&t.node, &Msg::MapFold(req), left)
                    .await
                {
                    Ok(Reply::MapFold(Ok(b))) => b,
                    Ok(Reply::MapFold(Err(e))) => return Err(remote_error(&e)),
                    Ok(Reply::Refused(e)) => return Err(storage(e)),
                    Ok(other) => {
                        return Err(storage(format!("unexpected map fold reply {other:?}")))
                    }
                    Err(e) => return Err(storage(format!("map fold on {}: {e}", t.node))),
                }
            };
            let outputs: Vec<Value> = serde_json::from_str(&batch.outputs).map_err(|e| {
                MapRedError::Request(RequestError::Storage(format!("map fold outputs: {e}")))
            })?;
            if out.send((outputs, batch.read)).await.is_err() {
                return Err(MapRedError::Limit("the job stopped".into()));
            }
            if !batch.more || batch.last.is_none() {
                return Ok(());
            }
            after = batch.last;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_errors_come_back_as_they_left() {
        let e = MapRedError::Phase {
            phase: 0,
            error: "boom".into(),
            input: None,
            stack: Some("at f".into()),
        };
        assert!(matches!(
            remote_error(&e.to_json().to_string()),
            MapRedError::Phase { phase: 0, error, stack: Some(s), .. } if error == "boom" && s == "at f"
        ));
        assert!(matches!(
            remote_error(&MapRedError::Timeout.to_json().to_string()),
            MapRedError::Timeout
        ));
        assert!(matches!(remote_error("garbage"), MapRedError::Request(_)));
    }
}
