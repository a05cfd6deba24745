//! The requests a vnode serves, as data: the coordinator sends the same
//! [`VnodeReq`] to a local vnode (run on its worker) or, over the cluster
//! transport, to a vnode on another node. An object a PUT hands over is an
//! [`Obj`]: shared by `Arc` while it stays in this process (no encoding,
//! no copy), in its storage encoding ([`WireObject`]: metadata + value
//! bytes) between nodes; the two serialize alike, so the wire format does
//! not depend on which one a node held.

use crate::bucket::props::BucketProps;
use crate::object::RiakObject;
use crate::vnode::VnodeError;
use basalt_backend::{IndexPage, IndexQuery};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// An object in its storage encoding. Its byte fields serialize as bytes
/// (`serde_bytes`: one copy), not as a sequence of `u8` element by element;
/// postcard writes both as a varint length and the raw bytes, so the wire
/// is the same as before (test `wire_object_bytes_encode_as_a_u8_sequence_did`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireObject {
    /// [`RiakObject::encode_metadata`].
    #[serde(with = "serde_bytes")]
    pub meta: Vec<u8>,
    /// [`RiakObject::encode_value`] (empty for a head).
    #[serde(with = "serde_bytes")]
    pub value: Vec<u8>,
}

impl WireObject {
    /// Encodes `o` (with values).
    pub fn full(o: &RiakObject) -> WireObject {
        WireObject {
            meta: o.encode_metadata(),
            value: o.encode_value(),
        }
    }

    /// Decodes (with values).
    pub fn object(&self) -> Result<RiakObject, VnodeError> {
        Ok(RiakObject::decode(&self.meta, &self.value)?)
    }

    /// Decodes (with values), taking the value bytes (one sibling's value
    /// moves into the object, uncopied).
    pub fn into_object(self) -> Result<RiakObject, VnodeError> {
        Ok(RiakObject::decode_owned(&self.meta, self.value)?)
    }

    /// Decodes the metadata only.
    pub fn head(&self) -> Result<RiakObject, VnodeError> {
        Ok(RiakObject::decode_metadata(&self.meta)?)
    }
}

/// An object handed to or from a vnode; see the module docs. Serializes as
/// its [`WireObject`] (a `Local` one is encoded then, once per remote
/// send); deserializes as `Wire`.
#[derive(Debug, Clone)]
pub enum Obj {
    /// In this process.
    Local(Arc<RiakObject>),
    /// From another node, or read from a backend.
    Wire(WireObject),
}

impl Obj {
    /// Shares `o` in this process.
    pub fn local(o: RiakObject) -> Obj {
        Obj::Local(Arc::new(o))
    }

    /// The object (decoded when it came from another node).
    pub fn object(&self) -> Result<Arc<RiakObject>, VnodeError> {
        match self {
            Obj::Local(o) => Ok(o.clone()),
            Obj::Wire(w) => Ok(Arc::new(w.object()?)),
        }
    }

    /// The bytes of its values (and, from another node, its metadata):
    /// what a copy of it in flight holds, near enough to bound memory.
    pub fn payload_bytes(&self) -> u64 {
        match self {
            Obj::Local(o) => o.contents.iter().map(|c| c.value.len() as u64).sum(),
            Obj::Wire(w) => (w.meta.len() + w.value.len()) as u64,
        }
    }

    /// Its storage encoding (encodes a `Local` one).
    pub fn wire(&self) -> WireObject {
        match self {
            Obj::Local(o) => WireObject::full(o),
            Obj::Wire(w) => w.clone(),
        }
    }
}

impl Serialize for Obj {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Obj::Local(o) => WireObject::full(o).serialize(s),
            Obj::Wire(w) => w.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Obj {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Obj, D::Error> {
        WireObject::deserialize(d).map(Obj::Wire)
    }
}

/// A request to one vnode.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum VnodeReq {
    /// The object's metadata.
    Head {
        /// Storage bucket.
        bucket: Vec<u8>,
        /// Key.
        key: Vec<u8>,
    },
    /// The whole object.
    Get {
        /// Storage bucket.
        bucket: Vec<u8>,
        /// Key.
        key: Vec<u8>,
    },
    /// The coordinating step of a PUT ([`coordinate`]): read, build, write.
    Coordinate {
        /// Storage bucket.
        bucket: Vec<u8>,
        /// Key.
        key: Vec<u8>,
        /// The client's clock, encoded.
        client: Option<Vec<u8>>,
        /// The new content, as a one-sibling object.
        content: Obj,
        /// The bucket's props.
        props: BucketProps,
        /// The coordinator's clock (seconds).
        now_secs: u64,
    },
    /// A replica's step ([`reconcile`]): merge the incoming version.
    Reconcile {
        /// Storage bucket.
        bucket: Vec<u8>,
        /// Key.
        key: Vec<u8>,
        /// The version to merge.
        object: Obj,
        /// The bucket's props.
        props: BucketProps,
    },
    /// A batch of a bucket's keys that are not tombstones, for a listing
    /// over a coverage plan: the keys after `after`, in key order, at most
    /// `limit` of them scanned (an unordered backend answers every key in
    /// one batch), keeping those whose first primary (in a ring of
    /// `ring_size`) is in `firsts`, so each key is listed by one vnode.
    ListKeys {
        /// Storage bucket.
        bucket: Vec<u8>,
        /// Resume after this key.
        after: Option<Vec<u8>>,
        /// Keys scanned per batch.
        limit: u32,
        /// Ring size (to place keys).
        ring_size: u32,
        /// First primaries this vnode answers for.
        firsts: Vec<u32>,
    },
    /// Buckets holding anything.
    ListBuckets,
    /// A whole (unpaged) 2i query.
    Index(IndexQuery),
    /// One round of a CS bucket fold: the `limit` smallest keys of the
    /// range with their objects ([`super::serve::cs_fold_batch`]).
    CsFold {
        /// Storage bucket.
        bucket: Vec<u8>,
        /// Start key.
        from: Vec<u8>,
        /// `from` itself included.
        from_incl: bool,
        /// End key (`None` = to the end).
        end: Option<Vec<u8>>,
        /// `end` itself included.
        end_incl: bool,
        /// Keys per round.
        limit: u32,
    },
    /// Removes the tombstone of a key if it still has this clock.
    ReapTombstone {
        /// Storage bucket.
        bucket: Vec<u8>,
        /// Key.
        key: Vec<u8>,
        /// The tombstone's clock, encoded.
        vclock: Vec<u8>,
    },
    /// Anti-entropy: the tictac tree (xxsmall: 4096 segment hashes) of the
    /// keys whose first primary is `first` (one preference list), each key
    /// hashed with its state (clock and siblings).
    AaeTree {
        /// Ring size (to place keys).
        ring_size: u32,
        /// First partitions of the preference lists to include.
        firsts: Vec<u32>,
    },
    /// Anti-entropy: (bucket, key, state hash) of the keys of preference
    /// list `first` in these segments.
    AaeKeys {
        /// Ring size.
        ring_size: u32,
        /// First partitions of the preference lists to include.
        firsts: Vec<u32>,
        /// Segments of the xxsmall tree.
        segments: Vec<u32>,
    },
    /// Anti-entropy from the cached trees: the root (one hash per branch)
    /// of the tree of preference list `first` with `n_val` replicas (the
    /// trees are built by one fold if this vnode has none yet).
    AaeRoot {
        /// First partition of the preference list.
        first: u32,
        /// Its replicas.
        n_val: u32,
    },
    /// The segment hashes of these branches of that tree.
    AaeBranches {
        /// First partition of the preference list.
        first: u32,
        /// Its replicas.
        n_val: u32,
        /// Branch numbers (at most [`crate::limits::AAE_MAX_BRANCHES`]).
        branches: Vec<u32>,
    },
    /// (bucket, key, key-state hash) of the keys of that tree in these
    /// segments (a fold filtered by segment).
    AaeSegmentKeys {
        /// First partition of the preference list.
        first: u32,
        /// Its replicas.
        n_val: u32,
        /// Segments of the cached trees' size (at most
        /// [`crate::limits::MAX_DIRTY_SEGMENTS`]).
        segments: Vec<u32>,
    },
    /// The next `limit` objects in (bucket, key) order after `after`, for
    /// handoff.
    Fold {
        /// Resume after this (bucket, key).
        after: Option<(Vec<u8>, Vec<u8>)>,
        /// Batch size.
        limit: u32,
    },
    /// One covering vnode's part of an anti-entropy fold query
    /// ([`super::aae_fold`]).
    AaeFold(super::aae_fold::AaeFoldReq),
    /// [`VnodeReq::AaeSegmentKeys`] scoped for an exchange's follow-up
    /// loop: only keys of `bucket` (every bucket with `None`) whose
    /// object was last modified within `modified_range` (microseconds,
    /// inclusive; the greatest last-modified time of its siblings), served
    /// by a head fold filtered by segment where the backend has one
    /// (`super::aae_range`). Answered as [`VnodeReply::AaeKeys`].
    AaeRangeKeys {
        /// First partition of the preference list.
        first: u32,
        /// Its replicas.
        n_val: u32,
        /// Storage bucket to list (`None`: every bucket).
        bucket: Option<Vec<u8>>,
        /// Last-modified range, microseconds since the epoch (`None`: any).
        modified_range: Option<(u64, u64)>,
        /// Segments of the cached trees' size (at most
        /// [`crate::limits::MAX_DIRTY_SEGMENTS`] ×
        /// [`crate::limits::AAE_RANGE_BOOST`]).
        segments: Vec<u32>,
    },
    /// The coordinating step of a data-type update
    /// ([`super::merge::coordinate_crdt`]): read, apply the operation to
    /// the merged local value as a new event of this vnode, write.
    /// Answered as [`VnodeReply::Written`], or [`VnodeReply::Refused`]
    /// when the operation does not apply.
    CoordinateCrdt {
        /// Storage bucket.
        bucket: Vec<u8>,
        /// Key.
        key: Vec<u8>,
        /// The update.
        update: super::merge::CrdtUpdate,
        /// The bucket's props.
        props: BucketProps,
        /// The coordinator's clock (microseconds since the epoch).
        now_us: u64,
    },
}

impl VnodeReq {
    /// The bytes of the object a write carries ([`Obj::payload_bytes`];
    /// a data-type update's are small and count 0), 0 for a read.
    pub fn payload_bytes(&self) -> u64 {
        match self {
            VnodeReq::Coordinate { content, .. } => content.payload_bytes(),
            VnodeReq::Reconcile { object, .. } => object.payload_bytes(),
            _ => 0,
        }
    }

    /// Whether the request may change the vnode's data.
    pub fn is_write(&self) -> bool {
        matches!(
            self,
            VnodeReq::Coordinate { .. }
                | VnodeReq::Reconcile { .. }
                | VnodeReq::CoordinateCrdt { .. }
        )
    }

    /// Whether the request reads one key (a HEAD or GET): the kind that may
    /// run beside the vnode's worker and is timed as a queued read.
    pub fn is_point_read(&self) -> bool {
        matches!(self, VnodeReq::Head { .. } | VnodeReq::Get { .. })
    }
}

/// A vnode's answer.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum VnodeReply {
    /// A head or object (`None`: not found) and the vnode's queue length.
    Object(Option<WireObject>, u32),
    /// What a write stored (`None`: nothing changed).
    Written(Option<Obj>),
    /// A list-keys batch: the keys, the last key scanned (the cursor),
    /// more to come.
    Keys(Vec<Vec<u8>>, Option<Vec<u8>>, bool),
    /// Buckets.
    Buckets(Vec<Vec<u8>>),
    /// 2i results.
    Index(IndexPage),
    /// A CS fold round: (key, object), the last key chosen, more to come.
    CsBatch(Vec<(Vec<u8>, WireObject)>, Option<Vec<u8>>, bool),
    /// Whether a tombstone was reaped.
    Reaped(bool),
    /// An anti-entropy tree: one hash per segment.
    AaeTree(Vec<u64>),
    /// Anti-entropy keys: (bucket, key, vclock hash).
    AaeKeys(Vec<(Vec<u8>, Vec<u8>, u64)>),
    /// A cached tree's root.
    AaeRoot(Vec<u64>),
    /// Segment hashes of the branches asked for: (branch, 256 hashes).
    AaeBranches(Vec<(u32, Vec<u64>)>),
    /// Handoff batch: (bucket, key, object); empty = the end.
    Batch(Vec<(Vec<u8>, Vec<u8>, WireObject)>),
    /// A vnode's part of an anti-entropy fold query.
    AaeFold(super::aae_fold::AaeFoldReply),
    /// A data-type update the vnode refused (bad operation, context or
    /// limit: the client's error, nothing written).
    Refused(String),
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::Content;

    /// A node holding an object by `Arc` sends exactly the bytes of its
    /// storage encoding, and the receiver decodes the same object.
    #[test]
    fn a_local_object_serializes_as_its_wire_form() {
        let o = RiakObject {
            vclock: Default::default(),
            contents: vec![Content {
                value: b"value".to_vec(),
                value_len: 5,
                ..Content::default()
            }],
        };
        let local = postcard::to_allocvec(&Obj::local(o.clone())).unwrap_or_default();
        let wire = postcard::to_allocvec(&WireObject::full(&o)).unwrap_or_default();
        assert!(!wire.is_empty());
        assert_eq!(local, wire);
        let back: Obj = postcard::from_bytes(&local).unwrap_or_else(|e| panic!("{e}"));
        assert!(matches!(back, Obj::Wire(_)));
        let decoded = back.object().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(*decoded, o);
    }

    /// Nodes of a release before `serde_bytes` sent a `WireObject` as two
    /// `u8` sequences; the bytes on the wire are the same both ways, for
    /// empty, short and long (multi-byte varint length) fields, so old and
    /// new nodes read each other's frames in a rolling upgrade.
    #[test]
    fn wire_object_bytes_encode_as_a_u8_sequence_did() {
        #[derive(Serialize, Deserialize, PartialEq, Debug)]
        struct Before {
            meta: Vec<u8>,
            value: Vec<u8>,
        }
        for (m, v) in [(0, 0), (3, 127), (128, 8000), (300, 70_000)] {
            let meta: Vec<u8> = (0..m).map(|i| (i * 7) as u8).collect();
            let value: Vec<u8> = (0..v).map(|i| (i * 13) as u8).collect();
            let now = WireObject {
                meta: meta.clone(),
                value: value.clone(),
            };
            let before = Before { meta, value };
            let a = postcard::to_allocvec(&now).unwrap_or_else(|e| panic!("{e}"));
            let b = postcard::to_allocvec(&before).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(a, b, "meta {m} value {v}");
            let back: WireObject = postcard::from_bytes(&b).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(back, now);
            let old: Before = postcard::from_bytes(&a).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(old, before);
        }
    }
}
