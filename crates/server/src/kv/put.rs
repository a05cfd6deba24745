//! The PUT FSM: conditional checks, the coordinating vnode (the local one
//! when the key has one here) builds and writes the new version, the other
//! replicas reconcile it; [`super::put_core`] counts the acknowledgements.
//! A client PUT runs the bucket's commit hooks ([`crate::hooks`]):
//! pre-commit ones before anything is written, post-commit ones after the
//! acknowledgement.

use super::put_core::PutCore;
use super::{GetOpts, GetOutcome, PutOpts};
use crate::bucket::keying::split_storage_bucket;
use crate::error::RequestError;
use crate::node::Node;
use crate::object::vclock::VClock;
use crate::object::{unique_id, Content, RiakObject};
use crate::ring::key_hash;
use crate::router::Target;
use crate::vnode::request::{Obj, VnodeReply, VnodeReq};
use crate::vnode::VnodeError;
use futures_util::stream::StreamExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// Seconds and microseconds since the epoch.
pub(crate) fn now() -> (u64, u32) {
    let d = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    (d.as_secs(), d.subsec_micros())
}

impl Node {
    /// PUT (and DELETE when `content.deleted`): conditional checks, then the
    /// coordinating vnode (first of the key's vnodes) builds and writes the
    /// new version, then the other replicas reconcile it; returns once
    /// `max(w, dw)` vnodes (of which `pw` primaries) acknowledged.
    /// Returns the new object (`None`: nothing written), shared with the
    /// replica writes still in flight (no copy).
    pub async fn put(
        &self,
        bucket: &[u8],
        key: &[u8],
        client: Option<VClock>,
        mut content: Content,
        opts: &PutOpts,
    ) -> Result<Option<Arc<RiakObject>>, RequestError> {
        let counter = if content.deleted {
            &self.stats.deletes
        } else {
            &self.stats.puts
        };
        counter.fetch_add(1, Ordering::Relaxed);
        let _timer = self.stats.latency.timer(if content.deleted {
            crate::latency::Op::Delete
        } else {
            crate::latency::Op::Put
        });
        let props = self.props.get(bucket);
        if let (Some(dt), false) = (&props.datatype, content.deleted) {
            // A data-type bucket holds only values its merge understands.
            return Err(RequestError::Invalid(format!(
                "Bucket datatype is `{dt}`: plain objects cannot be stored in it; use the data type API (DtUpdateReq, /types/T/buckets/B/datatypes/K)"
            )));
        }
        let w = props.resolve(opts.w, props.w, "w")?;
        let dw = props.resolve(opts.dw, props.dw, "dw")?;
        let pw = props.resolve(opts.pw, props.pw, "pw")?;
        if !props.precommit.is_empty() {
            content = self
                .precommit(&props.precommit, bucket, key, client.as_ref(), content)
                .await?;
        }
        let size = content.value.len();
        if size > self.config.limits.max_object_bytes {
            return Err(RequestError::Invalid(format!(
                "Object too large: {size} bytes (limit {})",
                self.config.limits.max_object_bytes
            )));
        }
        if size > self.config.limits.warn_object_bytes {
            tracing::warn!(size, bucket = %String::from_utf8_lossy(bucket), key = %String::from_utf8_lossy(key), "large object");
        }
        if opts.if_none_match || opts.if_not_modified {
            let cur = self.get(bucket, key, &GetOpts::default()).await?;
            match cur {
                GetOutcome::Found(_) if opts.if_none_match => return Err(RequestError::MatchFound),
                GetOutcome::Found(o)
                    if opts.if_not_modified
                        && !client.as_ref().is_some_and(|c| c.same_events(&o.vclock)) =>
                {
                    return Err(RequestError::Modified)
                }
                GetOutcome::NotFound | GetOutcome::Tombstone(_) if opts.if_not_modified => {
                    return Err(RequestError::NotFound)
                }
                _ => {}
            }
        }
        let (secs, usecs) = now();
        content.last_mod = secs as u32;
        content.last_mod_usecs = usecs;
        content.vtag = Some(unique_id());
        content.value_len = content.value.len() as u32;
        let req = VnodeReq::Coordinate {
            bucket: bucket.to_vec(),
            key: key.to_vec(),
            client: client.as_ref().map(VClock::encode),
            content: Obj::local(RiakObject {
                vclock: VClock::default(),
                contents: vec![content],
            }),
            props: props.clone(),
            now_secs: secs,
        };
        self.coordinate_and_replicate(bucket, key, &props, (w, dw, pw), req)
            .await
    }

    /// The write steps every PUT shares: `req` (a coordinating step) on
    /// one of the key's vnodes, then the new version to the others, until
    /// `(w, dw, pw)` is met. A coordinator's [`VnodeReply::Refused`] is the
    /// client's error.
    pub(crate) async fn coordinate_and_replicate(
        &self,
        bucket: &[u8],
        key: &[u8],
        props: &crate::bucket::props::BucketProps,
        (w, dw, pw): (u32, u32, u32),
        req: VnodeReq,
    ) -> Result<Option<Arc<RiakObject>>, RequestError> {
        debug_assert!(req.is_write());
        let targets = self.router.key_targets(bucket, key, props.n_val);
        let primaries_up = targets.iter().filter(|t| t.primary).count() as u32;
        let mut core = PutCore::new(targets.len() as u32, primaries_up, w, dw, pw)?;
        // A local vnode coordinates if the key has one here (no extra hop,
        // no wait on a slow peer), else the first; an unreachable one is
        // skipped (it counts as a failed replica).
        let me = self.router.cluster.me();
        let local = targets.iter().position(|t| t.node == me);
        let order: Vec<usize> = local
            .into_iter()
            .chain((0..targets.len()).filter(|&i| Some(i) != local))
            .collect();
        let mut coordinated = None;
        let mut last_err = None;
        let mut tried = Vec::new();
        for i in order {
            let t = &targets[i];
            tried.push(i);
            match self.router.vcall(t, req.clone()).await {
                Ok(reply) => {
                    coordinated = Some((i, reply));
                    break;
                }
                Err(e @ (VnodeError::Remote(_) | VnodeError::Closed)) => {
                    tracing::warn!(partition = t.partition, node = %t.node, error = %e, "coordinating vnode unavailable; trying the next");
                    last_err = Some(e);
                }
                Err(e) => return Err(e.into()),
            }
        }
        let Some((ci, reply)) = coordinated else {
            return Err(last_err.map_or(RequestError::Timeout, RequestError::from));
        };
        let coord = &targets[ci];
        let rest: Vec<Target> = (0..targets.len())
            .filter(|i| !tried.contains(i))
            .map(|i| targets[i].clone())
            .collect();
        let new = match reply {
            VnodeReply::Written(None) => return Ok(None),
            VnodeReply::Written(Some(w)) => w,
            VnodeReply::Refused(why) => return Err(RequestError::Invalid(why)),
            other => {
                return Err(RequestError::Storage(format!(
                    "unexpected coordinator reply {other:?}"
                )))
            }
        };
        // The coordinator's own write, and the coordinators that could not
        // be reached before it.
        core.ack(coord.primary);
        for _ in 1..tried.len() {
            core.fail();
        }
        let replica_req = || VnodeReq::Reconcile {
            bucket: bucket.to_vec(),
            key: key.to_vec(),
            object: new.clone(),
            props: props.clone(),
        };
        let (btype, bname) = split_storage_bucket(bucket);
        let sloppy = Some((key_hash(btype, bname, key), props.n_val));
        let mut replies = self.router.fan_out_with(&rest, replica_req, sloppy);
        while !core.enough() && !core.hopeless() {
            let Some((t, res)) = replies.next().await else {
                break;
            };
            match res {
                Ok(_) => core.ack(t.primary),
                Err(e) => {
                    tracing::warn!(partition = t.partition, node = %t.node, error = %e, "replica write");
                    core.fail();
                }
            }
        }
        drop(replies);
        if let Err(e) = core.result() {
            let (acks, failed) = core.counts();
            tracing::warn!(acks, failed, "write quorum not met");
            return Err(e);
        }
        self.replicate(bucket, key, &new);
        let written = new.object()?;
        if !props.postcommit.is_empty() {
            self.postcommit(&props.postcommit, bucket, key, &written);
        }
        Ok(Some(written))
    }
}
