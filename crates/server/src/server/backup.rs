//! The node's side of a cluster backup and restore (`basalt admin backup
//! DIR`, `basalt admin restore DIR`), on the cluster port's admin codes
//! 249 → 250 (`code::basalt::BACKUP_REQ` / `BACKUP_RESP`, postcard
//! [`BackupReq`] / [`BackupResp`]):
//!
//! * [`BackupReq::Info`]: the cluster state (ring size, owners, members
//!   and their cluster addresses) and the bucket metadata (types, props,
//!   security, as gossip carries them);
//! * [`BackupReq::Fold`]: the objects of one partition this node owns,
//!   read from **one snapshot** of its vnode's backend (a point-in-time
//!   view: writes after it are not in the backup, nothing is half in it),
//!   streamed as [`BackupResp::Batch`] frames and ended by
//!   [`BackupResp::Done`]. The fold runs on a blocking thread over the
//!   shared backend (the vnode's worker keeps serving), paced to the
//!   request's bytes per second, and waits when the client reads slowly;
//! * [`BackupReq::Occupied`]: the local partitions holding any object (a
//!   restore refuses a cluster that holds data unless forced);
//! * [`BackupReq::Meta`]: merges backed-up bucket metadata as gossip
//!   would (newer entries win) and spreads it;
//! * [`BackupReq::Restore`]: merges objects into a partition's owner
//!   (here, or forwarded as a handoff batch), through handoff's receive:
//!   each object is reconciled like a replica write, so siblings, vector
//!   clocks, tombstones and 2i terms survive and a batch applied twice
//!   changes nothing.

use crate::api::pb::FrameTx;
use crate::cluster::{ClusterState, Meta, Msg, Reply};
use crate::error::RequestError;
use crate::limits::{BACKUP_BATCH, BACKUP_QUEUE_BATCHES, FOLD_BATCH_BYTES, RESTORE_BATCH_MAX};
use crate::node::Node;
use crate::pb::frame;
use crate::vnode::request::WireObject;
use riak_pb::code::basalt::BACKUP_RESP;
use serde::{Deserialize, Serialize};
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// One object as a backup carries it: storage bucket, key, stored object.
pub type BackupObject = (Vec<u8>, Vec<u8>, WireObject);

/// A backup or restore step (body of code 249).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum BackupReq {
    /// The cluster state and bucket metadata → [`BackupResp::Info`].
    Info,
    /// Stream the objects of `partition` (owned here) from one snapshot,
    /// at most `bytes_per_sec` (0: unpaced) → batches, then `Done`.
    Fold {
        /// The partition.
        partition: u32,
        /// Pace (keys, metadata and values per second; 0: none).
        bytes_per_sec: u64,
    },
    /// The local partitions holding any object → [`BackupResp::Occupied`].
    Occupied,
    /// Merge this bucket metadata (types, props, security) → `Ok`.
    Meta(Meta),
    /// Merge these objects into `partition`'s owner → `Restored`.
    Restore {
        /// The backup's ring size (refused when it is not this cluster's).
        ring_size: u32,
        /// The partition.
        partition: u32,
        /// At most [`RESTORE_BATCH_MAX`] objects.
        objects: Vec<BackupObject>,
    },
}

/// A reply frame (code 250).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum BackupResp {
    /// The cluster state, the bucket metadata and the answering node's name.
    Info {
        /// The node that answered.
        node: String,
        /// Its view of the cluster.
        state: Box<ClusterState>,
        /// Types, props and security, as gossip carries them.
        meta: Meta,
    },
    /// Objects of the partition being folded, in (bucket, key) order.
    Batch(Vec<BackupObject>),
    /// The fold ended: objects and bytes sent.
    Done {
        /// Objects.
        objects: u64,
        /// Bytes of buckets, keys, metadata and values.
        bytes: u64,
    },
    /// Local partitions holding data.
    Occupied(Vec<u32>),
    /// Objects merged.
    Restored(u64),
    /// Done.
    Ok,
}

fn resp_frame(r: &BackupResp) -> Result<Vec<u8>, RequestError> {
    let body = crate::cluster::encode_body(r).map_err(RequestError::Storage)?;
    Ok(frame(BACKUP_RESP, &body))
}

/// Serves one 249 request; streamed frames go through `out`.
pub(crate) async fn handle(
    node: &Arc<Node>,
    body: &[u8],
    out: &FrameTx,
) -> Result<Vec<Vec<u8>>, RequestError> {
    let req: BackupReq = crate::cluster::decode_body(body).map_err(RequestError::Invalid)?;
    let reply = match req {
        BackupReq::Info => BackupResp::Info {
            node: node.router.cluster.me().to_string(),
            state: Box::new(node.router.cluster.state()),
            meta: node.gossip.meta(),
        },
        BackupReq::Fold {
            partition,
            bytes_per_sec,
        } => fold(node, partition, bytes_per_sec, out).await?,
        BackupReq::Occupied => BackupResp::Occupied(occupied(node).await?),
        BackupReq::Meta(meta) => {
            node.gossip.merge_meta(&meta);
            node.gossip.gossip_now.notify_one();
            BackupResp::Ok
        }
        BackupReq::Restore {
            ring_size,
            partition,
            objects,
        } => restore(node, ring_size, partition, objects).await?,
    };
    Ok(vec![resp_frame(&reply)?])
}

/// Streams partition `p`'s objects from one snapshot of its local vnode.
async fn fold(
    node: &Arc<Node>,
    p: u32,
    bytes_per_sec: u64,
    out: &FrameTx,
) -> Result<BackupResp, RequestError> {
    let state = node.router.cluster.state();
    let me = node.router.cluster.me();
    if p >= state.ring_size {
        return Err(RequestError::Invalid(format!(
            "no partition {p} in a ring of {}",
            state.ring_size
        )));
    }
    if state.owner(p) != me {
        return Err(RequestError::Invalid(format!(
            "{me} does not own partition {p} ({} does)",
            state.owner(p)
        )));
    }
    let vnode = node
        .router
        .local_vnode(p)
        .map_err(|e| RequestError::Storage(format!("vnode {p}: {e}")))?;
    let backend = vnode
        .submit(|st| Ok(st.backend.clone()))
        .map_err(|e| RequestError::Storage(format!("vnode {p}: {e}")))?
        .wait(node.router.timeout())
        .await
        .map_err(|e| RequestError::Storage(format!("vnode {p}: {e}")))?;
    drop(vnode);
    let (tx, mut rx) = tokio::sync::mpsc::channel::<Vec<BackupObject>>(BACKUP_QUEUE_BATCHES);
    let folder = tokio::task::spawn_blocking(move || -> Result<(u64, u64), String> {
        let snap = backend
            .snapshot()
            .map_err(|e| format!("snapshot of vnode {p}: {e}"))?;
        let (mut objects, mut bytes) = (0u64, 0u64);
        let mut batch: Vec<BackupObject> = Vec::new();
        let mut batch_bytes = 0usize;
        let started = Instant::now();
        let mut gone = false;
        let send = |batch: Vec<BackupObject>, bytes: u64| -> bool {
            if bytes_per_sec > 0 {
                // Sleep until `bytes` fit the pace since the start.
                let due = Duration::from_secs_f64(bytes as f64 / bytes_per_sec as f64);
                if let Some(wait) = due.checked_sub(started.elapsed()) {
                    std::thread::sleep(wait);
                }
            }
            tx.blocking_send(batch).is_ok()
        };
        for bucket in snap.list_buckets().map_err(|e| format!("vnode {p}: {e}"))? {
            snap.fold_objects(&bucket, None, &mut |b, key, o| {
                let n = b.len() + key.len() + o.head.metadata.len() + o.value.len();
                batch.push((
                    b.to_vec(),
                    key.to_vec(),
                    WireObject {
                        meta: o.head.metadata,
                        value: o.value,
                    },
                ));
                batch_bytes += n;
                objects += 1;
                bytes += n as u64;
                if batch.len() >= BACKUP_BATCH || batch_bytes >= FOLD_BATCH_BYTES {
                    batch_bytes = 0;
                    if !send(std::mem::take(&mut batch), bytes) {
                        gone = true;
                        return ControlFlow::Break(());
                    }
                }
                ControlFlow::Continue(())
            })
            .map_err(|e| format!("folding vnode {p}: {e}"))?;
            if gone {
                return Err("the client went away".into());
            }
        }
        if !batch.is_empty() && !send(batch, bytes) {
            return Err("the client went away".into());
        }
        Ok((objects, bytes))
    });
    while let Some(batch) = rx.recv().await {
        let f = resp_frame(&BackupResp::Batch(batch))?;
        if out.send(f).await.is_err() {
            break; // the client went away: dropping `rx` stops the fold
        }
    }
    drop(rx);
    let (objects, bytes) = folder
        .await
        .map_err(|e| RequestError::Storage(format!("backup fold of vnode {p}: {e}")))?
        .map_err(RequestError::Storage)?;
    Ok(BackupResp::Done { objects, bytes })
}

/// The local partitions whose vnode holds at least one object.
async fn occupied(node: &Arc<Node>) -> Result<Vec<u32>, RequestError> {
    let mut held = Vec::new();
    for (p, _) in node.router.local_vnodes() {
        let req = crate::vnode::request::VnodeReq::Fold {
            after: None,
            limit: 1,
        };
        match node.router.local_call(p, req).await {
            Ok(crate::vnode::request::VnodeReply::Batch(b)) if b.is_empty() => {}
            Ok(_) => held.push(p),
            Err(e) => return Err(RequestError::Storage(format!("vnode {p}: {e}"))),
        }
    }
    Ok(held)
}

/// Merges `objects` into partition `p`'s owner.
async fn restore(
    node: &Arc<Node>,
    ring_size: u32,
    p: u32,
    objects: Vec<BackupObject>,
) -> Result<BackupResp, RequestError> {
    let state = node.router.cluster.state();
    if ring_size != state.ring_size {
        return Err(RequestError::Invalid(format!(
            "the backup's ring size is {ring_size}, this cluster's {}: refused",
            state.ring_size
        )));
    }
    if p >= state.ring_size {
        return Err(RequestError::Invalid(format!("no partition {p}")));
    }
    if objects.len() > RESTORE_BATCH_MAX {
        return Err(RequestError::Invalid(format!(
            "{} objects in one restore request; at most {RESTORE_BATCH_MAX}",
            objects.len()
        )));
    }
    let n = objects.len() as u64;
    let owner = state.owner(p).to_string();
    let reply = if owner == node.router.cluster.me() {
        node.handoff.receive(p, objects).await
    } else {
        let msg = Msg::Handoff {
            partition: p,
            objects,
        };
        node.router
            .cluster
            .call(&owner, &msg, node.router.timeout())
            .await
            .map_err(|e| RequestError::Storage(format!("partition {p} on {owner}: {e}")))?
    };
    match reply {
        Reply::Ok => Ok(BackupResp::Restored(n)),
        Reply::Refused(e) => Err(RequestError::Storage(e)),
        other => Err(RequestError::Storage(format!(
            "partition {p} on {owner}: unexpected reply {other:?}"
        ))),
    }
}
