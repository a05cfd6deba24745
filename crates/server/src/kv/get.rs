//! The GET FSM: ask the key's `n` vnodes — one (a local one if any) for
//! the whole object, the others for its metadata (a HEAD) — let
//! [`GetCore`] count the replies against r / pr / notfound_ok /
//! basic_quorum, take the winning version's value from the reply that
//! carried it or else fetch it from a replica holding it, merge, and
//! read-repair stale replicas in the background.

use super::get_core::{reap_on_read, stale_replicas, winning_versions, Failure, GetCore, Verdict};
use super::Kv;
use super::{GetOpts, GetOutcome};
use crate::error::RequestError;
use crate::object::RiakObject;
use crate::router::Target;
use crate::vnode::request::{Obj, VnodeReply, VnodeReq, WireObject};
use crate::vnode::VnodeError;
use futures_util::stream::{FuturesOrdered, FuturesUnordered, StreamExt};
use futures_util::FutureExt;
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;
use std::time::Duration;

/// One replica's answer to the HEAD round: the replica, its version (none
/// if not found), its queue length.
type HeadReply = (Target, Option<RiakObject>, u32);

/// A reply of the first round: the replica, its answer, and whether it
/// is the whole object (the replica asked for the value) or its metadata.
type RoundReply = (Target, Result<VnodeReply, VnodeError>, bool);

type Replies<'a> = std::pin::Pin<Box<dyn futures_util::Stream<Item = RoundReply> + Send + 'a>>;

type RoundCall<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = RoundReply> + Send + 'a>>;

impl Kv {
    /// GET: the `n` vnodes (one asked for the value, the others for the
    /// metadata), wait for `r` (and `pr` primaries); the value of each
    /// winning version comes from the reply that carried it or else from
    /// the least-queued replica holding it; merge, read-repair stale
    /// replicas in the background.
    /// Uses `opts.basic_quorum`, else the bucket's prop (see
    /// [`Node::get_with_basic_quorum`]).
    pub async fn get(
        &self,
        bucket: &[u8],
        key: &[u8],
        opts: &GetOpts,
    ) -> Result<GetOutcome, RequestError> {
        self.get_with_basic_quorum(bucket, key, opts, opts.basic_quorum)
            .await
    }

    /// [`Node::get`] with Riak's `basic_quorum` (`None` = the bucket's prop).
    /// With it, as `riak_kv_get_core`'s fail threshold, the GET gives up
    /// once `min(n / 2 + 1, n - max(r, pr) + 1)` replicas answered not
    /// found (counted only when `notfound_ok` is off) or failed, replies
    /// taken as they arrive; giving up answers not found when no replica
    /// failed and none answered a live object, else the quorum error (or
    /// `overload`), and does no read repair.
    pub async fn get_with_basic_quorum(
        &self,
        bucket: &[u8],
        key: &[u8],
        opts: &GetOpts,
        basic_quorum: Option<bool>,
    ) -> Result<GetOutcome, RequestError> {
        let r = self.get_counted(bucket, key, opts, basic_quorum).await;
        self.stats.count_outcome(&r);
        r
    }

    /// [`Self::get_with_basic_quorum`] before its outcome is counted.
    async fn get_counted(
        &self,
        bucket: &[u8],
        key: &[u8],
        opts: &GetOpts,
        basic_quorum: Option<bool>,
    ) -> Result<GetOutcome, RequestError> {
        self.stats.gets.fetch_add(1, Ordering::Relaxed);
        let _timer = self.stats.latency.timer(crate::latency::Op::Get);
        let props = self.props.get(bucket);
        // A request `n_val` reads the first n replicas only.
        let quorums = props.with_request_n(opts.n_val)?;
        let n = quorums.n_val;
        let r = quorums.resolve(opts.r, props.r, "r")?;
        let pr = quorums.resolve(opts.pr, props.pr, "pr")?;
        let notfound_ok = opts.notfound_ok.unwrap_or(props.notfound_ok);
        let mut targets = self.router.key_targets(bucket, key, n);
        if opts.sloppy_quorum == Some(false) {
            targets.retain(|t| t.primary);
        }
        // The value comes with the first round from one replica — the first
        // local one (no value crosses the network), else the first — and
        // the metadata only from the others. When that replica's version
        // wins, as it does unless the replicas differ, no second round
        // reads the value again (a second vnode call and ledger lookup).
        let me = self.router.cluster.me();
        let value_from = targets.iter().position(|t| t.node == me).unwrap_or(0);
        let req = |i: usize| {
            let (bucket, key) = (bucket.to_vec(), key.to_vec());
            if i == value_from {
                VnodeReq::Get { bucket, key }
            } else {
                VnodeReq::Head { bucket, key }
            }
        };
        // Replies are taken as they come; when every vnode is local (one
        // node) they are taken in preference-list order, which costs
        // nothing and makes single-node results repeatable.
        let calls = self
            .router
            .fan_out_each(&targets, req, None)
            .into_iter()
            .enumerate()
            .map(|(i, call)| -> RoundCall<'_> {
                if i != value_from {
                    return Box::pin(call.map(|(t, res)| (t, res, false)));
                }
                Box::pin(async move {
                    match call.await {
                        // The replica could not read the value (a damaged
                        // journal record, say): it answers a HEAD as the
                        // others do, so it still counts for the quorum and
                        // another holder gives the value. Not after an
                        // overload or a timeout: asking again would wait
                        // as long again.
                        (t, Err(e)) if !matches!(e, VnodeError::Overload | VnodeError::Timeout) => {
                            tracing::warn!(partition = t.partition, node = %t.node, error = %e, "get value; asking for the metadata");
                            let head = VnodeReq::Head {
                                bucket: bucket.to_vec(),
                                key: key.to_vec(),
                            };
                            let res = self.router.vcall(&t, head).await;
                            (t, res, false)
                        }
                        (t, res) => (t, res, true),
                    }
                })
            });
        let replies: Replies<'_> = if targets.iter().all(|t| t.node == me) {
            Box::pin(calls.into_iter().collect::<FuturesOrdered<_>>())
        } else {
            Box::pin(calls.into_iter().collect::<FuturesUnordered<_>>())
        };
        let basic_quorum = basic_quorum.unwrap_or(props.basic_quorum);
        let mut core = GetCore::new(targets.len() as u32, r, pr, notfound_ok, basic_quorum);
        // A quorum of "not found" waits this long for the other replicas
        // (see `Limits::notfound_wait_ms`); `basic_quorum` asked not to.
        let notfound_wait = (!basic_quorum)
            .then(|| Duration::from_millis(self.config.limits.notfound_wait_ms))
            .filter(|d| !d.is_zero());
        let (mut heads, full) = match self.head_round(replies, &mut core, notfound_wait).await {
            ControlFlow::Continue(round) => round,
            ControlFlow::Break(answer) => return answer.map_err(RequestError::from),
        };
        if !core.enough() {
            return core.exhausted().map_err(RequestError::from);
        }
        let found: Vec<(usize, &RiakObject, u32)> = heads
            .iter()
            .enumerate()
            .filter_map(|(i, (_, h, q))| h.as_ref().map(|h| (i, h, *q)))
            .collect();
        if found.is_empty() {
            return Ok(GetOutcome::NotFound);
        }
        let winners = winning_versions(&found);
        // One winning version, and its value came with the first round.
        let single = match (winners.as_slice(), full) {
            ([holders], Some(f)) if holders.contains(&f) => Some(f),
            _ => None,
        };
        let (merged, stale): (RiakObject, Vec<Target>) = match single {
            Some(f) => {
                let stale = match &heads[f].1 {
                    Some(o) => stale_replicas(&heads, o).cloned().collect(),
                    None => Vec::new(),
                };
                let Some(merged) = heads[f].1.take() else {
                    return Ok(GetOutcome::NotFound);
                };
                (merged, stale)
            }
            None => {
                let mut merged: Option<RiakObject> = None;
                for holders in &winners {
                    let have = full
                        .filter(|f| holders.contains(f))
                        .and_then(|f| heads[f].1.clone());
                    let o = match have {
                        Some(o) => Some(o),
                        None => {
                            let ts: Vec<&Target> = holders.iter().map(|&i| &heads[i].0).collect();
                            self.fetch_version(&ts, bucket, key).await?
                        }
                    };
                    if let Some(o) = o {
                        merged = Some(match merged {
                            None => o,
                            Some(m) => RiakObject::merge(&m, &o, props.allow_mult),
                        });
                    }
                }
                let Some(merged) = merged else {
                    return Ok(GetOutcome::NotFound);
                };
                let stale = stale_replicas(&heads, &merged).cloned().collect();
                (merged, stale)
            }
        };
        // Every replica holds the same tombstone: reap it after the delete
        // mode's delay, as Riak's GET does (a reap the DELETE started and
        // then dropped, or a tombstone kept from before, goes this way).
        if n == props.n_val
            && heads.iter().all(|(t, _, _)| t.primary)
            && reap_on_read(&merged, heads.len(), stale.len(), n)
        {
            if let Some(delay) = self.config.delete_mode.delay() {
                self.schedule_reap(bucket, key, merged.vclock.clone(), delay);
            }
        }
        // Read repair: stale or missing replicas get the merged object,
        // shared (encoded only for a replica on another node).
        let mut shared: Option<Obj> = None;
        for t in stale {
            let object = shared
                .get_or_insert_with(|| Obj::local(merged.clone()))
                .clone();
            tracing::debug!(partition = t.partition, node = %t.node, "read repair");
            self.stats.read_repairs.fetch_add(1, Ordering::Relaxed);
            self.background(
                t,
                VnodeReq::Reconcile {
                    bucket: bucket.to_vec(),
                    key: key.to_vec(),
                    object,
                    props: props.clone(),
                },
            );
        }
        if merged.is_deleted() {
            Ok(GetOutcome::Tombstone(merged.vclock))
        } else {
            Ok(GetOutcome::Found(merged))
        }
    }

    /// The HEAD round: takes replies until `core` has an answer (returned
    /// as `Break`) or has enough, or no more come. A quorum of "not found"
    /// waits up to `notfound_wait` for the rest, as a replica yet to answer
    /// may hold an acknowledged write. Returns every reply in hand (replies
    /// that came with the last one count for read repair too) and which of
    /// them, if any, holds the whole object (the replica asked for the
    /// value answered it).
    async fn head_round(
        &self,
        mut replies: Replies<'_>,
        core: &mut GetCore,
        notfound_wait: Option<Duration>,
    ) -> ControlFlow<Result<GetOutcome, Failure>, (Vec<HeadReply>, Option<usize>)> {
        let mut heads: Vec<HeadReply> = Vec::new();
        let mut full: Option<usize> = None;
        let mut deadline: Option<tokio::time::Instant> = None;
        loop {
            let next = match deadline {
                None => replies.next().await,
                Some(d) => match tokio::time::timeout_at(d, replies.next()).await {
                    Ok(next) => next,
                    Err(_) => break,
                },
            };
            let Some((t, res, whole)) = next else { break };
            match head_of(&t, res, whole) {
                Ok((h, q, whole)) => {
                    core.reply(t.primary, h.as_ref().map(RiakObject::is_deleted));
                    if whole {
                        full = Some(heads.len());
                    }
                    heads.push((t, h, q));
                }
                Err(overload) => core.failed(overload),
            }
            match core.verdict() {
                Verdict::Wait => continue,
                Verdict::Done(out) => return ControlFlow::Break(out),
                Verdict::Enough => {}
            }
            if !core.found_any() && !core.all_in() {
                if let Some(wait) = notfound_wait {
                    // Only "not found" so far: a replica yet to answer may
                    // hold an acknowledged write (e.g. the others restarted
                    // or were not written yet).
                    if deadline.is_none() {
                        self.stats.notfound_waits.fetch_add(1, Ordering::Relaxed);
                        deadline = Some(tokio::time::Instant::now() + wait);
                    }
                    continue;
                }
            }
            if core.found_any() && deadline.is_some() {
                self.stats.notfound_rescues.fetch_add(1, Ordering::Relaxed);
            }
            // Replies already in hand also count for read repair.
            while let Some(Some((t, res, whole))) = replies.next().now_or_never() {
                if let Ok((h, q, whole)) = head_of(&t, res, whole) {
                    if whole {
                        full = Some(heads.len());
                    }
                    heads.push((t, h, q));
                }
            }
            break;
        }
        ControlFlow::Continue((heads, full))
    }

    /// The value of one version from the first of `holders` (replicas that
    /// answered it in the HEAD round, best first) that returns it; a
    /// holder that fails is logged and the next asked. `None` when every
    /// holder answered without the object; the last error when none
    /// answered it and one failed.
    async fn fetch_version(
        &self,
        holders: &[&Target],
        bucket: &[u8],
        key: &[u8],
    ) -> Result<Option<RiakObject>, RequestError> {
        debug_assert!(!holders.is_empty(), "a version without a holder");
        let mut failure: Option<RequestError> = None;
        for t in holders {
            let req = VnodeReq::Get {
                bucket: bucket.to_vec(),
                key: key.to_vec(),
            };
            match self.router.vcall(t, req).await {
                Ok(VnodeReply::Object(Some(w), _)) => return Ok(Some(w.into_object()?)),
                Ok(_) => {}
                Err(e) => {
                    tracing::warn!(partition = t.partition, node = %t.node, error = %e, "get value");
                    failure = Some(e.into());
                }
            }
        }
        failure.map_or(Ok(None), Err)
    }
}

/// A replica's reply to the first round: (object metadata, or the whole
/// object when `whole`, or not found; its queue length; whether the
/// object is whole), or `Err(overload)` for a failed replica (logged). A
/// whole object whose values do not decode still counts by its metadata
/// (another holder gives the value), as a HEAD's reply would.
fn head_of(
    t: &Target,
    res: Result<VnodeReply, VnodeError>,
    whole: bool,
) -> Result<(Option<RiakObject>, u32, bool), bool> {
    match res {
        Ok(VnodeReply::Object(None, q)) => Ok((None, q, whole)),
        Ok(VnodeReply::Object(Some(w), q)) if whole => {
            let WireObject { meta, value } = w;
            match RiakObject::decode_owned(&meta, value) {
                Ok(o) => Ok((Some(o), q, true)),
                Err(e) => {
                    tracing::warn!(partition = t.partition, error = %e, "get value");
                    match RiakObject::decode_metadata(&meta) {
                        Ok(h) => Ok((Some(h), q, false)),
                        Err(_) => Err(false),
                    }
                }
            }
        }
        Ok(VnodeReply::Object(Some(w), q)) => match w.head() {
            Ok(h) => Ok((Some(h), q, false)),
            Err(e) => {
                tracing::warn!(partition = t.partition, error = %e, "get head");
                Err(false)
            }
        },
        Ok(other) => {
            tracing::warn!(?other, "unexpected head reply");
            Err(false)
        }
        Err(VnodeError::Overload) => Err(true),
        Err(e) => {
            tracing::warn!(partition = t.partition, node = %t.node, error = %e, "get head");
            Err(false)
        }
    }
}
