//! The PUT FSM: conditional checks, the coordinating vnode (the local one
//! when the key has one here) builds and writes the new version, the other
//! replicas reconcile it; [`super::put_core`] counts the acknowledgements.
//! A client PUT runs the bucket's commit hooks ([`crate::mapred::hooks`]):
//! pre-commit ones before anything is written, post-commit ones after the
//! acknowledgement.

use super::put_core::PutCore;
use super::Kv;
use super::{GetOpts, GetOutcome, PutOpts};
use crate::bucket::keying::split_storage_bucket;
use crate::error::RequestError;
use crate::object::vclock::VClock;
use crate::object::{unique_id, Content, RiakObject};
use crate::pb::quorum;
use crate::ring::key_hash;
use crate::router::Target;
use crate::vnode::request::{Obj, VnodeReply, VnodeReq};
use crate::vnode::VnodeError;
use futures_util::stream::StreamExt;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// A write's resolved quorums: the replicas written (`n`, the request's
/// `n_val` or the bucket's), `w` / `dw` / `pw` counted against `n`,
/// `node_confirms` (distinct nodes among the acknowledgements) and whether
/// fallbacks may stand in (`sloppy`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WriteQuorum {
    pub n: u32,
    pub w: u32,
    pub dw: u32,
    pub pw: u32,
    pub node_confirms: u32,
    pub sloppy: bool,
}

impl WriteQuorum {
    /// Resolves `opts` against `props`, with Riak's errors:
    /// `{n_val_violation,N}` above the bucket's n_val, `{w_val_violation,..}`
    /// and the like above n, `{node_confirms_val_violation,N}` above n.
    pub(crate) fn of(
        props: &crate::bucket::props::BucketProps,
        opts: &PutOpts,
    ) -> Result<WriteQuorum, RequestError> {
        let against = props.with_request_n(opts.n_val)?;
        let n = against.n_val;
        // As riak_kv_put_fsm's expand of `node_confirms`: the words count
        // against n; `default` is the bucket's (no such prop here: 0).
        let node_confirms = match opts.node_confirms {
            None | Some(quorum::DEFAULT) => 0,
            Some(quorum::ONE) => 1,
            Some(quorum::QUORUM) => n / 2 + 1,
            Some(quorum::ALL) => n,
            Some(v) => v,
        };
        if node_confirms > n {
            return Err(RequestError::Invalid(format!(
                "{{node_confirms_val_violation,{node_confirms}}} (n_val is {n})"
            )));
        }
        Ok(WriteQuorum {
            n,
            w: against.resolve(opts.w, props.w, "w")?,
            dw: against.resolve(opts.dw, props.dw, "dw")?,
            pw: against.resolve(opts.pw, props.pw, "pw")?,
            node_confirms,
            sloppy: opts.sloppy_quorum != Some(false),
        })
    }
}

/// Seconds and microseconds since the epoch.
pub(crate) use basalt_engine::clock::now_secs_us as now;

impl Kv {
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
        content: Content,
        opts: &PutOpts,
    ) -> Result<Option<Arc<RiakObject>>, RequestError> {
        let r = self.put_counted(bucket, key, client, content, opts).await;
        self.stats.count_outcome(&r);
        r
    }

    /// [`Self::put`] before its outcome is counted.
    async fn put_counted(
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
        let quorum = WriteQuorum::of(&props, opts)?;
        if !props.precommit.is_empty() {
            content = self
                .run_precommit(&props.precommit, bucket, key, client.as_ref(), content)
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
            // As riak_kv_pb_object: the check reads with the request's
            // n_val and sloppy_quorum.
            let check = GetOpts {
                n_val: opts.n_val,
                sloppy_quorum: opts.sloppy_quorum,
                ..GetOpts::default()
            };
            let cur = self.get(bucket, key, &check).await?;
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
        self.coordinate_and_replicate(bucket, key, &props, quorum, req)
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
        q: WriteQuorum,
        req: VnodeReq,
    ) -> Result<Option<Arc<RiakObject>>, RequestError> {
        debug_assert!(req.is_write());
        let mut targets = self.router.key_targets(bucket, key, q.n);
        if !q.sloppy {
            targets.retain(|t| t.primary);
        }
        let primaries_up = targets.iter().filter(|t| t.primary).count() as u32;
        let mut core = PutCore::new(targets.len() as u32, primaries_up, q.w, q.dw, q.pw)?;
        // node_confirms: refused before any write when the targets lie on
        // fewer distinct nodes (as pw is).
        let target_nodes: std::collections::BTreeSet<&str> =
            targets.iter().map(|t| t.node.as_str()).collect();
        if (target_nodes.len() as u32) < q.node_confirms {
            return Err(RequestError::Unsatisfied {
                kind: "node_confirms",
                need: q.node_confirms,
                got: target_nodes.len() as u32,
            });
        }
        let mut acked_nodes: std::collections::BTreeSet<String> = std::collections::BTreeSet::new();
        let started = std::time::Instant::now();
        let (ci, reply, tried) = self.coordinate(&targets, &req).await?;
        self.stats.put_coordinate.since(started);
        let coordinated = std::time::Instant::now();
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
        acked_nodes.insert(coord.node.clone());
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
        let sloppy = q.sloppy.then(|| (key_hash(btype, bname, key), q.n));
        let mut replies = self.router.fan_out_with(&rest, replica_req, sloppy);
        let nodes_met =
            |acked: &std::collections::BTreeSet<String>| acked.len() as u32 >= q.node_confirms;
        // Wait until the quorum (and node_confirms) is met, or cannot be.
        let settled = |core: &PutCore, acked: &std::collections::BTreeSet<String>| {
            (core.enough() && nodes_met(acked)) || core.hopeless()
        };
        while !settled(&core, &acked_nodes) {
            let Some((t, res)) = replies.next().await else {
                break;
            };
            match res {
                Ok(_) => {
                    core.ack(t.primary);
                    acked_nodes.insert(t.node.clone());
                }
                Err(e) => {
                    tracing::warn!(partition = t.partition, node = %t.node, error = %e, "replica write");
                    core.fail();
                }
            }
        }
        if core.result().is_ok() && !replies.is_empty() {
            self.wait_if_writes_backlogged(&mut replies).await;
        }
        drop(replies);
        self.stats.put_replicas.since(coordinated);
        if let Err(e) = core.result() {
            let (acks, failed) = core.counts();
            tracing::warn!(acks, failed, "write quorum not met");
            return Err(e);
        }
        if !nodes_met(&acked_nodes) {
            tracing::warn!(
                nodes = acked_nodes.len(),
                need = q.node_confirms,
                "node_confirms not met"
            );
            return Err(RequestError::Unsatisfied {
                kind: "node_confirms",
                need: q.node_confirms,
                got: acked_nodes.len() as u32,
            });
        }
        self.tell_written(bucket, key, &new, props);
        Ok(Some(new.object()?))
    }

    /// Back-pressure on the replica writes a PUT leaves behind at its
    /// quorum. They go on as tasks of their own (as Riak's put FSM leaves
    /// its last vnode messages), so a client's next PUT can start before
    /// they end, and towards a replica slower than the others nothing but
    /// memory bounded them: three nodes under 50 KB inserts held ~8,000
    /// such writes (~390 MB of encoded frames and ~270 MB of objects) on
    /// the busiest node and one was OOM-killed in its 768 MiB
    /// (2026-12-05). While the node's write calls in flight carry more than
    /// `limits.replica_writes_in_flight_mb`, the PUT waits until they fall
    /// back under it or its own replicas have answered, whichever comes
    /// first (each call ends at its reply or at the request timeout), so
    /// the writers slow to the slowest replica's pace and the writes in
    /// flight stay near the limit plus one round of the PUTs being
    /// coordinated. (Until 2026-12-06 it waited for its own replicas only:
    /// the last in the slow replica's queue, they made the longest PUTs.)
    async fn wait_if_writes_backlogged(&self, replies: &mut crate::router::FanOut<'_>) {
        let limit = self.config.limits.replica_writes_in_flight_mb * 1024 * 1024;
        if self.router.write_bytes_in_flight() <= limit {
            return;
        }
        self.stats
            .replica_write_waits
            .fetch_add(1, Ordering::Relaxed);
        let own = async {
            while let Some((t, res)) = replies.next().await {
                if let Err(e) = res {
                    tracing::warn!(partition = t.partition, node = %t.node, error = %e, "replica write");
                }
            }
        };
        tokio::select! {
            _ = self.router.wait_for_write_bytes_under(limit, self.router.timeout()) => {}
            _ = own => {}
        }
    }

    /// Runs `req` on a coordinating vnode: a local one if the key has one
    /// here (no extra hop, no wait on a slow peer), else the first of
    /// `targets`; an unreachable one is skipped for the next. Returns the
    /// coordinator's index in `targets`, its reply, and the indexes tried
    /// (the coordinator last; those before it count as failed replicas).
    async fn coordinate(
        &self,
        targets: &[Target],
        req: &VnodeReq,
    ) -> Result<(usize, VnodeReply, Vec<usize>), RequestError> {
        let me = self.router.cluster.me();
        let local = targets.iter().position(|t| t.node == me);
        let order = local
            .into_iter()
            .chain((0..targets.len()).filter(|&i| Some(i) != local));
        let mut last_err = None;
        let mut tried = Vec::new();
        for i in order {
            let t = &targets[i];
            tried.push(i);
            match self.router.vcall(t, req.clone()).await {
                Ok(reply) => return Ok((i, reply, tried)),
                Err(e @ (VnodeError::Remote(_) | VnodeError::Closed)) => {
                    tracing::warn!(partition = t.partition, node = %t.node, error = %e, "coordinating vnode unavailable; trying the next");
                    last_err = Some(e);
                }
                Err(e) => return Err(e.into()),
            }
        }
        Err(last_err.map_or(RequestError::Timeout, RequestError::from))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bucket::props::BucketProps;

    fn confirms(nc: Option<u32>) -> Result<u32, RequestError> {
        let props = BucketProps {
            n_val: 3,
            ..BucketProps::default()
        };
        let opts = PutOpts {
            node_confirms: nc,
            ..PutOpts::default()
        };
        WriteQuorum::of(&props, &opts).map(|q| q.node_confirms)
    }

    /// `node_confirms` takes the quorum words as riak_kv_put_fsm expands
    /// them (HTTP's `node_confirms=quorum`, PB's encoded values).
    #[test]
    fn node_confirms_words_count_against_n() {
        assert_eq!(confirms(None).ok(), Some(0));
        assert_eq!(confirms(Some(quorum::DEFAULT)).ok(), Some(0));
        assert_eq!(confirms(Some(quorum::ONE)).ok(), Some(1));
        assert_eq!(confirms(Some(quorum::QUORUM)).ok(), Some(2));
        assert_eq!(confirms(Some(quorum::ALL)).ok(), Some(3));
        assert_eq!(confirms(Some(2)).ok(), Some(2));
        let e = confirms(Some(4)).err().map(|e| e.to_string());
        assert!(
            e.as_deref()
                .is_some_and(|e| e.contains("node_confirms_val_violation")),
            "{e:?}"
        );
    }
}
