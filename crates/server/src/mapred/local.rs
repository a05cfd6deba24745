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
//!
//! Listed keys (a job's `[bucket, key]` inputs, a 2i input's keys, or
//! `[bucket, key]` values from an earlier phase) go the same way
//! ([`Node::map_keys`]): grouped by a primary vnode of their preference
//! list (this node's when it holds one), [`MAPRED_KEYS_BATCH`] keys per
//! [`Msg::MapKeys`] to that vnode's node, which reads each key from its
//! vnode (`riak_kv_vnode:local_get`, as Riak's map fitting does) and maps
//! it there. A key the vnode does not have (a replica that missed a write,
//! a fallback's gap) is read with a quorum GET instead, so a listed key is
//! not reported missing while the cluster has it; a key with no primary up,
//! or a node that cannot be reached, is read and mapped by the coordinator.

use super::job::KeyInput;
use super::job::{parse_map_spec, BucketName, PhaseFun};
use super::run::map_batch;
use super::MapRed;
use super::{core::Fetched, MapRedError};
use crate::bucket::keying::split_storage_bucket;
use crate::cluster::{decode_body, encode_body, Msg, Reply};
use crate::error::RequestError;
use crate::kv::{GetOpts, GetOutcome};
use crate::limits::{CS_FOLD_BATCH, MAPRED_FOLD_PARALLEL, MAPRED_KEYS_BATCH};
use crate::ring::key_hash;
use crate::router::Target;
use crate::vnode::request::{VnodeReply, VnodeReq};
use futures_util::stream::{self, StreamExt};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// The cluster port's service ([`Msg::Service`]) for one round of a
/// whole-bucket map phase on a vnode of the receiving node ([`MapFoldReq`]
/// → `Result<MapFoldBatch, job error JSON>`).
pub const MAP_FOLD_SERVICE: &str = "mapred_fold";

/// The service for a map phase over listed keys on the receiving node
/// ([`MapKeysReq`] → `Result<MapFoldBatch, job error JSON>`, one round).
pub const MAP_KEYS_SERVICE: &str = "mapred_keys";

/// Asks `node` to run one map round (`service` with `req`): the batch, the
/// job's error as it left the other node (JSON), or why the call failed.
async fn call_map<T: Serialize>(
    cluster: &crate::cluster::Cluster,
    node: &str,
    service: &str,
    req: &T,
    left: Duration,
) -> Result<Result<MapFoldBatch, String>, String> {
    let msg = Msg::Service {
        service: service.into(),
        body: encode_body(req)?,
    };
    match cluster.call(node, &msg, left).await {
        Ok(Reply::Service(Ok(b))) => decode_body(&b),
        Ok(Reply::Service(Err(e))) | Ok(Reply::Refused(e)) => Err(e),
        Ok(other) => Err(format!("unexpected map fold reply {other:?}")),
        Err(e) => Err(format!("map fold on {node}: {e}")),
    }
}

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

/// A map phase over listed keys on the local vnode of `partition`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct MapKeysReq {
    /// The phase's index in the job (for its errors).
    pub phase: u32,
    /// The vnode to read the keys from (a primary of each key).
    pub partition: u32,
    /// `(storage bucket, key, keydata as JSON text or "")`.
    pub keys: Vec<(Vec<u8>, Vec<u8>, String)>,
    /// The map phase's spec (`job::map_spec_json`), as JSON text.
    pub spec: String,
    /// Time left of the job, ms.
    pub timeout_ms: u64,
}

/// A listed key with its storage bucket.
type Located = (Vec<u8>, KeyInput);

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

impl MapRed {
    /// A map spec sent by a coordinator and this node's vnode of `partition`.
    fn local_map(
        &self,
        spec: &str,
        partition: u32,
    ) -> Result<(PhaseFun, Value, Target), MapRedError> {
        let spec: Value = serde_json::from_str(spec)
            .map_err(|e| MapRedError::Request(RequestError::Invalid(format!("map spec: {e}"))))?;
        let (fun, arg) = parse_map_spec(&spec)?;
        let target = Target {
            partition,
            node: self.router.cluster.me().to_string(),
            primary: true,
        };
        Ok((fun, arg, target))
    }

    /// Serves a map service's request from another node
    /// ([`MAP_FOLD_SERVICE`], [`MAP_KEYS_SERVICE`]): the encoded
    /// `Result<MapFoldBatch, job error JSON>`.
    pub async fn serve_map(&self, service: &str, body: &[u8]) -> Result<Vec<u8>, String> {
        let r = if service == MAP_FOLD_SERVICE {
            self.map_fold_local(&decode_body(body)?).await
        } else {
            self.map_keys_local(&decode_body(body)?).await
        };
        encode_body(&r.map_err(|e| e.to_json().to_string()))
    }

    /// One round of a map phase on this node's vnode (see the module docs).
    pub async fn map_fold_local(&self, req: &MapFoldReq) -> Result<MapFoldBatch, MapRedError> {
        let deadline = Instant::now() + Duration::from_millis(req.timeout_ms);
        self.stats
            .mapred_local_rounds
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let (fun, arg, target) = self.local_map(&req.spec, req.partition)?;
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

    /// A map phase over listed keys on this node's vnode (see the module
    /// docs): one [`MapFoldBatch`] with every output.
    pub async fn map_keys_local(&self, req: &MapKeysReq) -> Result<MapFoldBatch, MapRedError> {
        let deadline = Instant::now() + Duration::from_millis(req.timeout_ms);
        self.stats
            .mapred_local_keys
            .fetch_add(req.keys.len() as u64, std::sync::atomic::Ordering::Relaxed);
        let (fun, arg, target) = self.local_map(&req.spec, req.partition)?;
        let mut inputs = Vec::with_capacity(req.keys.len());
        for (sb, key, keydata) in &req.keys {
            let keydata = if keydata.is_empty() {
                Value::Null
            } else {
                serde_json::from_str(keydata).unwrap_or(Value::Null)
            };
            let object = self.read_for_map(&target, sb, key).await?;
            let (btype, bname) = split_storage_bucket(sb);
            inputs.push(Fetched {
                bucket: BucketName {
                    btype: btype.map(<[u8]>::to_vec),
                    bucket: bname.to_vec(),
                },
                key: key.clone(),
                keydata,
                object,
            });
        }
        let read = inputs.len() as u64;
        let phase = usize::try_from(req.phase).unwrap_or(usize::MAX);
        let outputs = map_batch(self, phase, &fun, inputs, &arg, deadline).await?;
        Ok(MapFoldBatch {
            outputs: Value::Array(outputs).to_string(),
            read,
            last: None,
            more: false,
        })
    }

    /// One key for a map phase: the vnode's copy, or (if it has none or
    /// cannot answer) a quorum GET.
    async fn read_for_map(
        &self,
        target: &Target,
        sb: &[u8],
        key: &[u8],
    ) -> Result<Option<crate::object::RiakObject>, MapRedError> {
        let req = VnodeReq::Get {
            bucket: sb.to_vec(),
            key: key.to_vec(),
        };
        if let Ok(VnodeReply::Object(Some(w), _)) = self.router.vcall(target, req).await {
            let o = w.object().map_err(|e| MapRedError::Request(e.into()))?;
            if !o.is_deleted() {
                return Ok(Some(o));
            }
        }
        match self.get(sb, key, &GetOpts::default()).await {
            Ok(GetOutcome::Found(o)) => Ok(Some(o)),
            Ok(GetOutcome::NotFound | GetOutcome::Tombstone(_)) => Ok(None),
            Err(e) => Err(MapRedError::Request(e)),
        }
    }

    /// Map phase `phase` over listed keys where they are (see the module
    /// docs); the outputs in no particular order.
    pub(crate) async fn map_keys(
        &self,
        phase: usize,
        fun: &PhaseFun,
        arg: &Value,
        keys: Vec<KeyInput>,
        deadline: Instant,
    ) -> Result<Vec<Value>, MapRedError> {
        let me = self.router.cluster.me().to_string();
        let mut groups: BTreeMap<(String, u32), Vec<Located>> = BTreeMap::new();
        let mut orphans = Vec::new();
        for k in keys {
            let sb = self
                .types
                .storage_bucket(k.bucket.btype.as_deref(), &k.bucket.bucket)?;
            let n = self.props.get(&sb).n_val;
            let (btype, bname) = split_storage_bucket(&sb);
            let targets = self.router.targets(&key_hash(btype, bname, &k.key), n);
            let mut primaries = targets.iter().filter(|t| t.primary);
            let pick = primaries
                .clone()
                .find(|t| t.node == me)
                .or_else(|| primaries.next());
            match pick {
                Some(t) => groups
                    .entry((t.node.clone(), t.partition))
                    .or_default()
                    .push((sb, k)),
                None => orphans.push(k),
            }
        }
        let spec = super::job::map_spec_json(fun, arg).to_string();
        let spec = spec.as_str();
        let batches: Vec<((String, u32), Vec<Located>)> = groups
            .into_iter()
            .flat_map(|(at, ks)| {
                let mut ks = ks;
                let mut out = Vec::new();
                while !ks.is_empty() {
                    let rest = ks.split_off(ks.len().min(MAPRED_KEYS_BATCH));
                    out.push((at.clone(), std::mem::replace(&mut ks, rest)));
                }
                out
            })
            .collect();
        let mut out = Vec::new();
        let mut rounds = stream::iter(batches)
            .map(|((node, partition), ks)| {
                self.map_keys_on(phase, fun, arg, node, partition, ks, spec, deadline)
            })
            .buffer_unordered(MAPRED_FOLD_PARALLEL);
        while let Some(r) = rounds.next().await {
            out.extend(r?);
        }
        drop(rounds);
        if !orphans.is_empty() {
            out.extend(self.map_here(phase, fun, arg, orphans, deadline).await?);
        }
        Ok(out)
    }

    /// One batch of [`Node::map_keys`] on `node`'s vnode of `partition`;
    /// mapped here if `node` cannot be reached.
    #[allow(clippy::too_many_arguments)]
    async fn map_keys_on(
        &self,
        phase: usize,
        fun: &PhaseFun,
        arg: &Value,
        node: String,
        partition: u32,
        ks: Vec<Located>,
        spec: &str,
        deadline: Instant,
    ) -> Result<Vec<Value>, MapRedError> {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(MapRedError::Timeout);
        }
        let req = MapKeysReq {
            phase: u32::try_from(phase).unwrap_or(u32::MAX),
            partition,
            keys: ks
                .iter()
                .map(|(sb, k)| {
                    let kd = k
                        .keydata
                        .as_ref()
                        .map_or_else(String::new, Value::to_string);
                    (sb.clone(), k.key.clone(), kd)
                })
                .collect(),
            spec: spec.to_string(),
            timeout_ms: left.as_millis().try_into().unwrap_or(u64::MAX),
        };
        let batch = if node == self.router.cluster.me() {
            self.map_keys_local(&req).await?
        } else {
            match call_map(&self.router.cluster, &node, MAP_KEYS_SERVICE, &req, left).await {
                Ok(Ok(b)) => b,
                Ok(Err(e)) => return Err(remote_error(&e)),
                Err(why) => {
                    tracing::debug!(%node, reply = %why, "map over listed keys: mapping them here instead");
                    let keys = ks.into_iter().map(|(_, k)| k).collect();
                    return self.map_here(phase, fun, arg, keys, deadline).await;
                }
            }
        };
        serde_json::from_str(&batch.outputs)
            .map_err(|e| MapRedError::Request(RequestError::Storage(format!("map outputs: {e}"))))
    }

    /// Listed keys read with quorum GETs and mapped on this node (keys
    /// with no primary up, nodes that cannot be reached).
    async fn map_here(
        &self,
        phase: usize,
        fun: &PhaseFun,
        arg: &Value,
        keys: Vec<KeyInput>,
        deadline: Instant,
    ) -> Result<Vec<Value>, MapRedError> {
        let fetched = stream::iter(keys)
            .map(|k| super::run::fetch_one(self, k))
            .buffered(crate::limits::MAPRED_FETCH_PARALLEL)
            .collect::<Vec<_>>()
            .await
            .into_iter()
            .collect::<Result<Vec<_>, _>>()
            .map_err(MapRedError::Request)?;
        map_batch(self, phase, fun, fetched, arg, deadline).await
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
                match call_map(&self.router.cluster, &t.node, MAP_FOLD_SERVICE, &req, left).await {
                    Ok(Ok(b)) => b,
                    Ok(Err(e)) => return Err(remote_error(&e)),
                    Err(e) => return Err(storage(e)),
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
