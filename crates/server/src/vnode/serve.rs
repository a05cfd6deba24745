//! A vnode serving its requests: [`VnodeState::execute`] runs one
//! [`VnodeReq`] on the vnode's worker thread against its backend (reads,
//! the PUT's coordinate and reconcile steps, listings, 2i, folds for
//! handoff, anti-entropy and CS folds).

use super::aae_tree::{key_state_hash, AaeTrees};
use super::merge::{coordinate, coordinate_crdt, coordinate_needs_values, reconcile};
use super::request::{Obj, VnodeReply, VnodeReq, WireObject};
use super::{Pace, VnodeAae, VnodeError, VnodeState};
use crate::object::vclock::VClock;
use crate::object::{Content, RiakObject};
use basalt_backend::{Cached, Capability, KeyRange};
use std::collections::BTreeSet;
use std::ops::ControlFlow;
use std::sync::Arc;

/// The answer of a write run on the worker, where every step may wait (so
/// none gives up).
fn on_worker(ran: Option<VnodeReply>) -> Result<VnodeReply, VnodeError> {
    debug_assert!(ran.is_some(), "a write on the worker never gives up");
    ran.ok_or_else(|| VnodeError::Remote("a vnode write on its worker gave up waiting".into()))
}

/// A read from memory, decoded (a miss stays a miss).
fn decoded<T>(
    read: Cached<T>,
    decode: impl FnOnce(T) -> Result<RiakObject, crate::object::DecodeError>,
) -> Result<Cached<RiakObject>, VnodeError> {
    Ok(match read {
        Cached::Hit(found) => Cached::Hit(found.map(decode).transpose()?),
        Cached::Miss => Cached::Miss,
    })
}

/// Callback of a cached-tree fold: (first, n_val, bucket, key, key-state hash).
type TreeFoldFn<'a> = dyn FnMut(u32, u32, &[u8], &[u8], u64) + 'a;

/// Callback of an anti-entropy fold: (bucket, key, segment, hash).
type AaeFn<'a> = dyn FnMut(&[u8], &[u8], u32, u64) + 'a;

/// The anti-entropy tree size: 4096 segments (32 KiB of hashes per tree).
pub const AAE_TREE: basalt_backend::TreeSize = basalt_backend::TreeSize::XXSmall;

pub use crate::limits::FOLD_BATCH_BYTES;

/// Largest key + 1: the inclusive end of "every key" ranges.
fn key_range_from(start: &[u8]) -> KeyRange {
    KeyRange::new(start, &[0xFF; 65_537])
}

/// A backend HEAD's answer as a reply's object (no values).
fn head_wire(h: basalt_backend::Head) -> WireObject {
    WireObject {
        meta: h.metadata,
        value: Vec::new(),
    }
}

/// A backend GET's answer as a reply's object (the value moved, uncopied).
fn object_wire(o: basalt_backend::Object) -> WireObject {
    WireObject {
        meta: o.head.metadata,
        value: o.value,
    }
}

impl VnodeState {
    /// Serves a HEAD or GET from memory ([`super::Vnode::read_here`]):
    /// `None` if the backend would have to wait for it, or for any other
    /// request.
    pub fn execute_cached(
        &self,
        req: &VnodeReq,
        queue_len: u32,
    ) -> Result<Option<VnodeReply>, VnodeError> {
        let found = match req {
            VnodeReq::Head { bucket, key } => match self.backend.head_cached(bucket, key)? {
                Cached::Hit(h) => Some(h.map(head_wire)),
                Cached::Miss => None,
            },
            VnodeReq::Get { bucket, key } => match self.backend.get_cached(bucket, key)? {
                Cached::Hit(o) => Some(o.map(object_wire)),
                Cached::Miss => None,
            },
            _ => None,
        };
        Ok(found.map(|o| VnodeReply::Object(o, queue_len)))
    }

    /// Serves `req`; `queue_len` is reported back by reads.
    pub fn execute(&self, req: VnodeReq, queue_len: u32) -> Result<VnodeReply, VnodeError> {
        match req {
            VnodeReq::Head { bucket, key } => {
                let h = self.backend.head(&bucket, &key)?.map(head_wire);
                Ok(VnodeReply::Object(h, queue_len))
            }
            VnodeReq::Get { bucket, key } => {
                let o = self.backend.get(&bucket, &key)?.map(object_wire);
                Ok(VnodeReply::Object(o, queue_len))
            }
            VnodeReq::Coordinate { .. } | VnodeReq::Reconcile { .. } => {
                on_worker(self.write_step(&req, Pace::Worker)?)
            }
            VnodeReq::CoordinateCrdt {
                bucket,
                key,
                update,
                props,
                now_us,
            } => {
                let local = self.read(&bucket, &key)?;
                match coordinate_crdt(local.as_ref(), &update, &props, &self.actor, now_us) {
                    Ok(new) => {
                        self.write(&bucket, &key, local.as_ref(), &new)?;
                        Ok(VnodeReply::Written(Some(Obj::local(new))))
                    }
                    Err(e) => Ok(VnodeReply::Refused(e.to_string())),
                }
            }
            VnodeReq::ListKeys {
                bucket,
                after,
                limit,
                ring_size,
                firsts,
            } => self.list_keys_batch(&bucket, after, limit, ring_size, &firsts),
            VnodeReq::ListBuckets => Ok(VnodeReply::Buckets(self.backend.list_buckets()?)),
            VnodeReq::Index(q) => Ok(VnodeReply::Index(self.backend.index_query(&q)?)),
            VnodeReq::Fold { after, limit } => self.fold_batch(after, limit),
            VnodeReq::AaeFold(q) => self.aae_fold_query(q).map(VnodeReply::AaeFold),
            VnodeReq::AaeTree { ring_size, firsts } => self.aae_tree(ring_size, firsts),
            VnodeReq::AaeRoot { first, n_val } => {
                self.with_trees(|trees| VnodeReply::AaeRoot(trees.root(first, n_val)))
            }
            VnodeReq::AaeBranches {
                first,
                n_val,
                branches,
            } => {
                let branches: Vec<u32> = branches
                    .into_iter()
                    .take(crate::limits::AAE_MAX_BRANCHES)
                    .collect();
                self.with_trees(|trees| {
                    VnodeReply::AaeBranches(trees.branches(first, n_val, &branches))
                })
            }
            VnodeReq::AaeSegmentKeys {
                first,
                n_val,
                segments,
            } => self.aae_segment_keys(first, n_val, segments),
            VnodeReq::AaeKeys {
                ring_size,
                firsts,
                segments,
            } => self.aae_keys(ring_size, firsts, segments),
            VnodeReq::CsFold {
                bucket,
                from,
                from_incl,
                end,
                end_incl,
                limit,
            } => {
                let (objs, last, more) = cs_fold_batch(
                    self,
                    &bucket,
                    &from,
                    from_incl,
                    end.as_deref(),
                    end_incl,
                    limit as usize,
                )?;
                let wire = objs
                    .iter()
                    .map(|(k, o)| (k.clone(), WireObject::full(o)))
                    .collect();
                Ok(VnodeReply::CsBatch(wire, last, more))
            }
            VnodeReq::AaeRangeKeys {
                first,
                n_val,
                bucket,
                modified_range,
                segments,
            } => self.aae_range_keys(first, n_val, bucket.as_deref(), modified_range, segments),
            VnodeReq::ReapTombstone {
                bucket,
                key,
                vclock,
            } => {
                let vc = VClock::decode(&vclock)
                    .map_err(|e| VnodeError::Decode(crate::object::DecodeError(e.0)))?;
                Ok(VnodeReply::Reaped(self.reap_tombstone(&bucket, &key, &vc)?))
            }
        }
    }

    /// Runs a write the backend can make without waiting ([`Pace::InPlace`]:
    /// the PUT's coordinate step or a replica's reconcile, with the local
    /// version in memory and a put that would not wait); `None`, with
    /// nothing written, for any other request or when a step would wait
    /// — the request then goes to the worker. Any error is the request's
    /// answer, as it would be on the worker.
    pub fn execute_in_place(&self, req: &VnodeReq) -> Option<Result<VnodeReply, VnodeError>> {
        // At once for a synced vnode or a backend that always waits (the
        // put's own check comes again with its size, before it is made).
        if self.sync || self.backend.put_would_wait(0) {
            return None;
        }
        if !matches!(
            req,
            VnodeReq::Coordinate { .. } | VnodeReq::Reconcile { .. }
        ) {
            return None;
        }
        self.write_step(req, Pace::InPlace).transpose()
    }

    /// A PUT's coordinate step or a replica's reconcile at `pace`; `None`
    /// when a step would wait (nothing written), or for any other request.
    fn write_step(&self, req: &VnodeReq, pace: Pace) -> Result<Option<VnodeReply>, VnodeError> {
        match req {
            VnodeReq::Coordinate {
                bucket,
                key,
                client,
                content,
                props,
                now_secs,
            } => self.coordinate_put(
                bucket,
                key,
                client.as_deref(),
                content,
                props,
                *now_secs,
                pace,
            ),
            VnodeReq::Reconcile {
                bucket,
                key,
                object,
                props,
            } => self.reconcile_put(bucket, key, object, props, pace),
            _ => Ok(None),
        }
    }

    /// The stored object at `pace` (a miss: it would wait), with its
    /// values or (`values` false) only its metadata.
    fn stored_at(
        &self,
        bucket: &[u8],
        key: &[u8],
        values: bool,
        pace: Pace,
    ) -> Result<Cached<RiakObject>, VnodeError> {
        Ok(match (pace, values) {
            (Pace::Worker, false) => Cached::Hit(self.read_head(bucket, key)?),
            (Pace::Worker, true) => Cached::Hit(self.read(bucket, key)?),
            (Pace::InPlace, false) => decoded(self.backend.head_cached(bucket, key)?, |h| {
                RiakObject::decode_metadata(&h.metadata)
            })?,
            (Pace::InPlace, true) => decoded(self.backend.get_cached(bucket, key)?, |o| {
                RiakObject::decode_owned(&o.head.metadata, o.value)
            })?,
        })
    }

    /// A replica's step: merges the incoming version into the local one
    /// and writes the result if it changes anything. `None`: a step would
    /// wait at `pace`, nothing written.
    fn reconcile_put(
        &self,
        bucket: &[u8],
        key: &[u8],
        object: &Obj,
        props: &crate::bucket::props::BucketProps,
        pace: Pace,
    ) -> Result<Option<VnodeReply>, VnodeError> {
        let incoming = object.object()?;
        // The local values only when the merge keeps a local sibling (not
        // when a newer version replaces this one).
        let local = match self.stored_at(bucket, key, false, pace)? {
            Cached::Hit(Some(h)) if !incoming.supersedes(&h) => {
                match self.stored_at(bucket, key, true, pace)? {
                    Cached::Hit(o) => o,
                    Cached::Miss => return Ok(None),
                }
            }
            Cached::Hit(head) => head,
            Cached::Miss => return Ok(None),
        };
        let new = reconcile(local.as_ref(), &incoming, props);
        if let Some(n) = &new {
            if !self.write_paced(bucket, key, local.as_ref(), n, pace)? {
                return Ok(None);
            }
        }
        Ok(Some(VnodeReply::Written(new.map(Obj::local))))
    }

    /// The PUT's coordinating step: the new version from the local one, the
    /// client's clock (`client`, encoded) and the new content; written if
    /// it changes anything. `None`: a step would wait at `pace`, nothing
    /// written.
    #[allow(clippy::too_many_arguments)]
    fn coordinate_put(
        &self,
        bucket: &[u8],
        key: &[u8],
        client: Option<&[u8]>,
        content: &Obj,
        props: &crate::bucket::props::BucketProps,
        now_secs: u64,
        pace: Pace,
    ) -> Result<Option<VnodeReply>, VnodeError> {
        let client = client
            .map(VClock::decode)
            .transpose()
            .map_err(|e| VnodeError::Decode(crate::object::DecodeError(e.0)))?;
        let incoming = content.object()?;
        let deleted = incoming.contents.first().is_some_and(|c| c.deleted);
        // The local values only when a local sibling stays beside the new
        // one (allow_mult, a sibling the client has not seen).
        let local = match self.stored_at(bucket, key, false, pace)? {
            Cached::Hit(Some(h))
                if coordinate_needs_values(&h, client.as_ref(), deleted, props) =>
            {
                match self.stored_at(bucket, key, true, pace)? {
                    Cached::Hit(o) => o,
                    Cached::Miss => return Ok(None),
                }
            }
            Cached::Hit(head) => head,
            Cached::Miss => return Ok(None),
        };
        // The request's own copy when it is the only holder (a remote
        // request, decoded here), else one clone of the content.
        let content: Content = match Arc::try_unwrap(incoming) {
            Ok(o) => o.contents.into_iter().next(),
            Err(shared) => shared.contents.first().cloned(),
        }
        .unwrap_or_default();
        let new = coordinate(
            local.as_ref(),
            client.as_ref(),
            content,
            props,
            &self.actor,
            now_secs,
        );
        if let Some(n) = &new {
            if !self.write_paced(bucket, key, local.as_ref(), n, pace)? {
                return Ok(None);
            }
        }
        Ok(Some(VnodeReply::Written(new.map(Obj::local))))
    }

    /// Anti-entropy by folding the store: the tree (one hash per segment)
    /// of the keys whose preference lists start at `firsts`.
    fn aae_tree(&self, ring_size: u32, firsts: Vec<u32>) -> Result<VnodeReply, VnodeError> {
        let firsts: BTreeSet<u32> = firsts.into_iter().collect();
        let mut tree = vec![0u64; AAE_TREE.segments() as usize];
        self.aae_fold(ring_size, &firsts, None, &mut |_, _, seg, h| {
            if let Some(slot) = tree.get_mut(seg as usize) {
                *slot ^= h;
            }
        })?;
        Ok(VnodeReply::AaeTree(tree))
    }

    /// Anti-entropy by folding the store: (bucket, key, hash) of the keys
    /// of `firsts`' preference lists in `segments`.
    fn aae_keys(
        &self,
        ring_size: u32,
        firsts: Vec<u32>,
        segments: Vec<u32>,
    ) -> Result<VnodeReply, VnodeError> {
        let firsts: BTreeSet<u32> = firsts.into_iter().collect();
        let want: BTreeSet<u32> = segments.into_iter().collect();
        let mut out = Vec::new();
        self.aae_fold(ring_size, &firsts, Some(&want), &mut |b, k, _, h| {
            out.push((b.to_vec(), k.to_vec(), h));
        })?;
        Ok(VnodeReply::AaeKeys(out))
    }

    /// Anti-entropy from the cached trees: (bucket, key, hash) of preference
    /// list (`first`, `n_val`)'s keys in `segments` (at most
    /// [`crate::limits::MAX_DIRTY_SEGMENTS`] of them).
    fn aae_segment_keys(
        &self,
        first: u32,
        n_val: u32,
        segments: Vec<u32>,
    ) -> Result<VnodeReply, VnodeError> {
        let aae = self.cached_trees()?;
        let want: BTreeSet<u32> = segments
            .into_iter()
            .take(crate::limits::MAX_DIRTY_SEGMENTS)
            .collect();
        let mut out = Vec::new();
        aae.folds.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.tree_fold(aae, Some(&want), &mut |f, n, b, k, h| {
            if f == first && n == n_val {
                out.push((b.to_vec(), k.to_vec(), h));
            }
        })?;
        Ok(VnodeReply::AaeKeys(out))
    }

    /// `f` of this vnode's cached anti-entropy trees: an error if it keeps
    /// none, if they are not built yet, or if they were dropped meanwhile.
    fn with_trees<R>(&self, f: impl FnOnce(&AaeTrees) -> R) -> Result<R, VnodeError> {
        let aae = self.cached_trees()?;
        let guard = aae.trees.lock();
        let trees = guard.as_ref().ok_or(VnodeError::Remote(
            "anti-entropy trees were dropped while in use".into(),
        ))?;
        Ok(f(trees))
    }

    /// Calls `f(bucket, key, segment, hash)` for every key of this vnode
    /// whose first primary (in a ring of `ring_size`) is in `firsts` (and whose
    /// segment is in `segments`, if given); `hash` mixes the key with the
    /// state it holds (clock and siblings, [`RiakObject::state_hash`]), so
    /// two replicas agree on a segment only if they hold the same versions
    /// of the same keys — also when one clock covers different siblings.
    fn aae_fold(
        &self,
        ring_size: u32,
        firsts: &std::collections::BTreeSet<u32>,
        segments: Option<&std::collections::BTreeSet<u32>>,
        f: &mut AaeFn<'_>,
    ) -> Result<(), VnodeError> {
        let ring = crate::ring::Ring::new(ring_size)
            .ok_or_else(|| VnodeError::Remote(format!("bad ring size {ring_size}")))?;
        for bucket in self.backend.list_buckets()? {
            let (btype, name) = crate::bucket::keying::split_storage_bucket(&bucket);
            let mut keys = Vec::new();
            self.backend.fold_keys(&bucket, None, &mut |k| {
                let hash = crate::ring::key_hash(btype, name, k);
                if firsts.contains(&ring.first_primary(&hash)) {
                    let seg = basalt_backend::segment_of(&bucket, k, AAE_TREE);
                    if segments.is_none_or(|s| s.contains(&seg)) {
                        keys.push((k.to_vec(), seg));
                    }
                }
                ControlFlow::Continue(())
            })?;
            for (k, seg) in keys {
                let Some(head) = self.backend.head(&bucket, &k)? else {
                    continue;
                };
                let state = RiakObject::decode_metadata(&head.metadata)?.state_hash();
                f(&bucket, &k, seg, key_state_hash(&bucket, &k, state));
            }
        }
        Ok(())
    }

    /// The vnode's cached trees; an error while they are not built (the
    /// rebuild scheduler builds them; exchanges skip the vnode meanwhile).
    fn cached_trees(&self) -> Result<&VnodeAae, VnodeError> {
        let aae = self.aae.as_ref().ok_or(VnodeError::Remote(
            "this vnode keeps no anti-entropy trees".into(),
        ))?;
        if aae.trees.lock().is_none() {
            return Err(VnodeError::Remote(format!(
                "the anti-entropy trees of partition {} are not built yet",
                self.partition
            )));
        }
        Ok(aae)
    }

    /// Whether the cached trees equal the trees a fresh fold gives (an
    /// error if they are not built): a check for tests and operators, not
    /// run by exchanges.
    pub fn aae_verify(&self) -> Result<bool, VnodeError> {
        let aae = self.cached_trees()?;
        let mut fresh = AaeTrees::new(aae.size);
        self.tree_fold(aae, None, &mut |first, n, b, k, h| {
            fresh.apply(first, n, b, k, None, Some(h));
        })?;
        let cached = aae.trees.lock();
        let Some(cached) = cached.as_ref() else {
            return Ok(false);
        };
        // Equal as trees: an empty tree equals an absent one.
        let keys: std::collections::BTreeSet<(u32, u32)> =
            cached.keys().chain(fresh.keys()).collect();
        Ok(keys.into_iter().all(|(first, n)| {
            cached.root(first, n) == fresh.root(first, n)
                && (0..aae.size.width())
                    .all(|b| cached.branches(first, n, &[b]) == fresh.branches(first, n, &[b]))
        }))
    }

    /// Calls `f(first, n_val, bucket, key, key-state hash)` for every key of
    /// this vnode (in `segments` of the trees' size, if given). With head
    /// folds (leveled): one fold filtered by segment in the engine, leaving
    /// out keys whose value is not in the journal when the trees are built
    /// with the journal check — so a segment listing agrees with trees
    /// that left such a key out, and the exchange repairs it.
    fn tree_fold(
        &self,
        aae: &VnodeAae,
        segments: Option<&std::collections::BTreeSet<u32>>,
        f: &mut TreeFoldFn<'_>,
    ) -> Result<(), VnodeError> {
        if self.backend.capabilities().has(Capability::FoldHeads) {
            let opts = basalt_backend::FoldOptions {
                journal_check: aae.journal_check,
                segments: segments.map(|s| (aae.size, s.iter().copied().collect())),
                ..basalt_backend::FoldOptions::default()
            };
            let mut failed = None;
            self.backend.fold_heads(None, None, &opts, &mut |b, k, h| {
                match RiakObject::decode_metadata(&h.metadata) {
                    Ok(o) => {
                        let (first, n_val) = aae.list_of(b, k);
                        f(first, n_val, b, k, key_state_hash(b, k, o.state_hash()));
                        ControlFlow::Continue(())
                    }
                    Err(e) => {
                        failed = Some(e);
                        ControlFlow::Break(())
                    }
                }
            })?;
            return failed.map_or(Ok(()), |e| Err(e.into()));
        }
        for bucket in self.backend.list_buckets()? {
            let (btype, name) = crate::bucket::keying::split_storage_bucket(&bucket);
            let n_val = (aae.n_val_of)(&bucket);
            let mut keys = Vec::new();
            self.backend.fold_keys(&bucket, None, &mut |k| {
                let seg = basalt_backend::segment_of(&bucket, k, aae.size);
                if segments.is_none_or(|s| s.contains(&seg)) {
                    keys.push(k.to_vec());
                }
                ControlFlow::Continue(())
            })?;
            for k in keys {
                let Some(head) = self.backend.head(&bucket, &k)? else {
                    continue;
                };
                let state = RiakObject::decode_metadata(&head.metadata)?.state_hash();
                let first = aae
                    .ring
                    .first_primary(&crate::ring::key_hash(btype, name, &k));
                f(
                    first,
                    n_val,
                    &bucket,
                    &k,
                    key_state_hash(&bucket, &k, state),
                );
            }
        }
        Ok(())
    }

    /// Serves [`VnodeReq::ListKeys`].
    fn list_keys_batch(
        &self,
        bucket: &[u8],
        after: Option<Vec<u8>>,
        limit: u32,
        ring_size: u32,
        firsts: &[u32],
    ) -> Result<VnodeReply, VnodeError> {
        let ring = crate::ring::Ring::new(ring_size)
            .ok_or_else(|| VnodeError::Remote(format!("bad ring size {ring_size}")))?;
        let ordered = self
            .backend
            .capabilities()
            .has(basalt_backend::Capability::OrderedKeys);
        // An unordered backend cannot resume after a key without scanning
        // everything again: it answers the whole bucket at once (its keys
        // are in memory anyway, e.g. bitcask's keydir).
        let limit = if ordered {
            limit.max(1) as usize
        } else {
            usize::MAX
        };
        let range = after.as_deref().map(key_range_from);
        let mut scanned: Vec<Vec<u8>> = Vec::new();
        let mut more = false;
        self.backend.fold_keys(bucket, range.as_ref(), &mut |k| {
            if after.as_deref() == Some(k) {
                return ControlFlow::Continue(());
            }
            if scanned.len() >= limit {
                more = true;
                return ControlFlow::Break(());
            }
            scanned.push(k.to_vec());
            ControlFlow::Continue(())
        })?;
        debug_assert!(
            !ordered || scanned.windows(2).all(|w| w[0] < w[1]),
            "an ordered backend folds keys in order"
        );
        let last = scanned.last().cloned();
        let (btype, name) = crate::bucket::keying::split_storage_bucket(bucket);
        let mut keys = Vec::new();
        for k in scanned {
            let first = ring.first_primary(&crate::ring::key_hash(btype, name, &k));
            if firsts.contains(&first)
                && self.read_head(bucket, &k)?.is_some_and(|o| !o.is_deleted())
            {
                keys.push(k);
            }
        }
        Ok(VnodeReply::Keys(keys, last, more))
    }

    fn fold_batch(
        &self,
        after: Option<(Vec<u8>, Vec<u8>)>,
        limit: u32,
    ) -> Result<VnodeReply, VnodeError> {
        let limit = limit.max(1) as usize;
        let mut out: Vec<(Vec<u8>, Vec<u8>, WireObject)> = Vec::new();
        let mut bytes = 0usize;
        for bucket in self.backend.list_buckets()? {
            if after.as_ref().is_some_and(|(b, _)| bucket < *b) {
                continue;
            }
            let start: &[u8] = match &after {
                Some((b, k)) if *b == bucket => k,
                _ => &[],
            };
            let skip = after
                .as_ref()
                .filter(|(b, _)| *b == bucket)
                .map(|(_, k)| k.clone());
            let range = key_range_from(start);
            self.backend
                .fold_objects(&bucket, Some(&range), &mut |_, key, o| {
                    if skip.as_deref() == Some(key) {
                        return ControlFlow::Continue(());
                    }
                    bytes += key.len() + o.head.metadata.len() + o.value.len();
                    out.push((
                        bucket.clone(),
                        key.to_vec(),
                        WireObject {
                            meta: o.head.metadata,
                            value: o.value,
                        },
                    ));
                    if out.len() >= limit || bytes >= FOLD_BATCH_BYTES {
                        ControlFlow::Break(())
                    } else {
                        ControlFlow::Continue(())
                    }
                })?;
            if out.len() >= limit || bytes >= FOLD_BATCH_BYTES {
                break;
            }
        }
        Ok(VnodeReply::Batch(out))
    }
}

/// Above every valid key (keys are at most 64 KiB): the open end of a range.
pub(crate) static KEY_ABOVE_ALL: [u8; 65_537] = [0xFF; 65_537];

/// One round of a CS bucket fold on a vnode: the (at most `limit`) smallest
/// keys of `bucket` in the range, with their stored objects (tombstones
/// included, so a newer tombstone on one replica hides an older live copy on
/// another), the last key chosen (a key may vanish between the key fold
/// and its read) and whether more keys remain.
#[allow(clippy::too_many_arguments)]
pub(crate) fn cs_fold_batch(
    st: &VnodeState,
    bucket: &[u8],
    from: &[u8],
    from_incl: bool,
    end: Option<&[u8]>,
    end_incl: bool,
    limit: usize,
) -> Result<CsBatch, VnodeError> {
    let range = KeyRange::new(from, end.unwrap_or(&KEY_ABOVE_ALL));
    let ordered = st.backend.capabilities().has(Capability::OrderedKeys);
    let mut keys: BTreeSet<Vec<u8>> = BTreeSet::new();
    let mut more = false;
    st.backend.fold_keys(bucket, Some(&range), &mut |k| {
        let above = if from_incl { k >= from } else { k > from };
        let below = end.is_none_or(|e| if end_incl { k <= e } else { k < e });
        if above && below {
            keys.insert(k.to_vec());
            if keys.len() > limit {
                more = true;
                keys.pop_last();
                if ordered {
                    return std::ops::ControlFlow::Break(());
                }
            }
        }
        std::ops::ControlFlow::Continue(())
    })?;
    let last = keys.last().cloned();
    let mut out = Vec::with_capacity(keys.len());
    for k in keys {
        if let Some(o) = st.read(bucket, &k)? {
            out.push((k, o));
        }
    }
    Ok((out, last, more))
}

/// A vnode's round of a CS bucket fold: objects, last key, more to come.
pub(crate) type CsBatch = (Vec<(Vec<u8>, RiakObject)>, Option<Vec<u8>>, bool);
