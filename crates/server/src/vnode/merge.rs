//! Merging on a vnode: the coordinating vnode's step of a PUT
//! ([`coordinate`]: a new event over the local version), of a data-type
//! update ([`coordinate_crdt`]: the operation applied to the merged local
//! value) and a replica's step ([`reconcile`]: a join with what it holds,
//! which merges data-type siblings, see [`crate::object::datatype`]). All
//! are pure.

use crate::bucket::props::BucketProps;
use crate::crdt::{Crdt, CrdtError, DataType, Op};
use crate::object::vclock::VClock;
use crate::object::{datatype, unique_id, Content, RiakObject};
use serde::{Deserialize, Serialize};

/// A data-type update as a vnode receives it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CrdtUpdate {
    /// The bucket's data type (what an absent value starts as).
    pub datatype: DataType,
    /// The operation.
    pub op: Op,
    /// The client's context (opaque; empty = none).
    pub context: Option<Vec<u8>>,
}

/// The coordinating vnode's step of a data-type update: the local value
/// (the join of its live siblings of the type; empty if none) with `op`
/// applied as a new event of `actor`, stored as the one sibling of the
/// type under the local clock plus that event. Plain siblings beside it
/// stay. Nothing is written on error (a bad operation or context, a
/// limit, a local value that does not decode).
pub fn coordinate_crdt(
    local: Option<&RiakObject>,
    update: &CrdtUpdate,
    props: &BucketProps,
    actor: &[u8],
    now_us: u64,
) -> Result<RiakObject, CrdtError> {
    let t = update.datatype;
    let current = match local {
        Some(l) => datatype::value_of(l, t)?,
        None => None,
    };
    let base = match current {
        Some(c) => c,
        None => Crdt::new(t, props.hll_precision)?,
    };
    let next = base.update(&update.op, actor, update.context.as_deref(), now_us)?;
    let mut vclock = local.map(|l| l.vclock.clone()).unwrap_or_default();
    let now_secs = now_us / 1_000_000;
    vclock.increment(actor, now_secs);
    let value = next.encode();
    debug_assert!(
        Crdt::decode(&value).is_ok(),
        "a data type must decode as encoded"
    );
    let content = Content {
        value_len: value.len() as u32,
        value,
        content_type: Some(t.content_type().as_bytes().to_vec()),
        vtag: Some(unique_id()),
        last_mod: now_secs as u32,
        last_mod_usecs: (now_us % 1_000_000) as u32,
        dot: Some(crate::object::Dot {
            actor: actor.to_vec(),
            counter: vclock.counter(actor),
        }),
        ..Content::default()
    };
    // The other live siblings the local version holds (plain values beside
    // a 1.4 counter); those of the type are merged into `content`.
    let mut contents: Vec<Content> = local
        .map(|l| {
            l.contents
                .iter()
                .filter(|c| !c.deleted && datatype::sibling_type(c) != Some(t))
                .cloned()
                .collect()
        })
        .unwrap_or_default();
    contents.push(content);
    let mut obj = RiakObject { vclock, contents };
    obj.vclock.prune(now_secs, &props.prune());
    for c in &mut obj.contents {
        if c.dot.as_ref().is_some_and(|d| !d.covered_by(&obj.vclock)) {
            c.dot = None;
        }
    }
    obj.canonicalize();
    Ok(obj)
}

/// The coordinating vnode's step of a PUT: the new object from the local
/// version, the client's clock and the new content (`None` = nothing to
/// write: a delete of an absent or already deleted object).
///
/// The write is a new event of `actor` (one past the highest counter of
/// `actor` the local version or the client has seen); the new sibling
/// carries it as its dot. With `allow_mult` (and not `last_write_wins`),
/// the local live siblings the client has **not** seen stay beside it
/// (their dots are not covered by the client's clock); those it has seen
/// are superseded. A write without a clock has seen nothing, so it adds a
/// sibling, as in Riak.
pub fn coordinate(
    local: Option<&RiakObject>,
    client: Option<&VClock>,
    content: Content,
    props: &BucketProps,
    actor: &[u8],
    now_secs: u64,
) -> Option<RiakObject> {
    let is_delete = content.deleted;
    if is_delete && local.is_none_or(|l| l.is_deleted()) {
        return None;
    }
    let empty = VClock::new();
    let (mut vclock, kept) = match local {
        None => (client.cloned().unwrap_or_default(), Vec::new()),
        Some(l) => {
            // A delete without a clock deletes what it sees.
            let client = if is_delete && client.is_none() {
                &l.vclock
            } else {
                client.unwrap_or(&empty)
            };
            let kept: Vec<Content> = kept_siblings(l, client, props).cloned().collect();
            (client.merge(&l.vclock), kept)
        }
    };
    vclock.increment(actor, now_secs);
    let dot = crate::object::Dot {
        actor: actor.to_vec(),
        counter: vclock.counter(actor),
    };
    let mut content = content;
    content.dot = Some(dot);
    let mut contents = kept;
    contents.push(content);
    let mut obj = RiakObject { vclock, contents };
    obj.vclock.prune(now_secs, &props.prune());
    // A sibling whose actor was pruned from the clock can no longer be
    // told apart by its dot: it falls back to the clock-only rule.
    for c in &mut obj.contents {
        if c.dot.as_ref().is_some_and(|d| !d.covered_by(&obj.vclock)) {
            c.dot = None;
        }
    }
    obj.canonicalize();
    Some(obj)
}

/// The local live siblings a PUT with the client's clock `client` keeps
/// beside its new sibling: with `allow_mult` (and not `last_write_wins`),
/// those the client has not seen.
fn kept_siblings<'a>(
    l: &'a RiakObject,
    client: &'a VClock,
    props: &BucketProps,
) -> impl Iterator<Item = &'a Content> {
    let keep = props.allow_mult && !props.last_write_wins;
    l.contents
        .iter()
        .filter(move |_| keep)
        .filter(|c| !c.deleted)
        .filter(move |c| match &c.dot {
            Some(d) => !d.covered_by(client),
            None => !client.descends(&l.vclock),
        })
}

/// Whether [`coordinate`] over the local version `head` (its metadata)
/// keeps a local sibling, and so needs the local values; when not, the
/// coordinating vnode reads the metadata only.
pub fn coordinate_needs_values(
    head: &RiakObject,
    client: Option<&VClock>,
    is_delete: bool,
    props: &BucketProps,
) -> bool {
    match client {
        Some(c) => kept_siblings(head, c, props).next().is_some(),
        None if is_delete => kept_siblings(head, &head.vclock, props).next().is_some(),
        None => kept_siblings(head, &VClock::new(), props).next().is_some(),
    }
}

/// A replica's step: merges an incoming version into the local one; returns
/// the version to write, if it changes anything.
pub fn reconcile(
    local: Option<&RiakObject>,
    incoming: &RiakObject,
    props: &BucketProps,
) -> Option<RiakObject> {
    match local {
        None => Some(incoming.clone()),
        // Last write wins: the later sibling by last-modified (ties by
        // vtag), so every replica keeps the same one whatever the order.
        Some(l) if props.last_write_wins => {
            let merged = RiakObject::merge(l, incoming, false);
            (merged != *l).then_some(merged)
        }
        Some(l) => {
            let merged = RiakObject::merge(l, incoming, props.allow_mult);
            (merged != *l).then_some(merged)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn c(v: &[u8]) -> Content {
        Content {
            value: v.to_vec(),
            value_len: v.len() as u32,
            ..Content::default()
        }
    }

    /// The stored metadata of `o` decoded alone: what a vnode's HEAD reads.
    fn head(o: &RiakObject) -> RiakObject {
        RiakObject::decode_metadata(&o.encode_metadata()).unwrap_or_default()
    }

    #[test]
    fn a_coordinator_reads_values_only_for_siblings_it_keeps() {
        let mult = BucketProps {
            allow_mult: true,
            ..BucketProps::default()
        };
        let single = BucketProps::default();
        for props in [&mult, &single] {
            let o1 = coordinate(None, None, c(b"a"), props, b"n/1", 10).unwrap_or_default();
            let blind = coordinate_needs_values(&head(&o1), None, false, props);
            let seen = coordinate_needs_values(&head(&o1), Some(&o1.vclock), false, props);
            let delete = coordinate_needs_values(&head(&o1), None, true, props);
            // Only a blind write to an allow_mult bucket keeps the old value.
            assert_eq!(blind, props.allow_mult);
            assert!(!seen && !delete);
            // Where the values are not needed, the head gives the same object.
            for (client, content) in [(Some(&o1.vclock), c(b"b")), (None, c(b"b"))] {
                if !coordinate_needs_values(&head(&o1), client, false, props) {
                    let full = coordinate(Some(&o1), client, content.clone(), props, b"n/1", 11);
                    let from_head =
                        coordinate(Some(&head(&o1)), client, content, props, b"n/1", 11);
                    assert_eq!(full, from_head);
                }
            }
        }
    }

    #[test]
    fn a_replica_reads_values_only_when_the_merge_keeps_its_own() {
        let props = BucketProps {
            allow_mult: true,
            ..BucketProps::default()
        };
        let o1 = coordinate(None, None, c(b"a"), &props, b"n/1", 10).unwrap_or_default();
        let newer = coordinate(Some(&o1), Some(&o1.vclock), c(b"b"), &props, b"n/1", 11)
            .unwrap_or_default();
        let concurrent = coordinate(Some(&o1), Some(&o1.vclock), c(b"c"), &props, b"n/2", 11)
            .unwrap_or_default();
        assert!(newer.supersedes(&head(&o1)));
        assert_eq!(
            reconcile(Some(&o1), &newer, &props),
            reconcile(Some(&head(&o1)), &newer, &props)
        );
        // The same version, an older one, a concurrent one: the local
        // siblings stay, so their values are read.
        assert!(!newer.supersedes(&head(&newer)));
        assert!(!o1.supersedes(&head(&newer)));
        assert!(!concurrent.supersedes(&head(&newer)));
        // A sibling the incoming version holds too is kept from the local side.
        let both = RiakObject::merge(&newer, &concurrent, true);
        assert!(!both.supersedes(&head(&newer)));
    }

    #[test]
    fn coordinate_siblings_and_resolution() {
        let props = BucketProps {
            allow_mult: true,
            ..BucketProps::default()
        };
        let o1 = coordinate(None, None, c(b"a"), &props, b"n/1", 10).unwrap_or_default();
        let o2 = coordinate(Some(&o1), None, c(b"b"), &props, b"n/1", 11).unwrap_or_default();
        assert_eq!(o2.contents.len(), 2);
        assert_eq!(o2.vclock.counter(b"n/1"), 2);
        let o3 = coordinate(Some(&o2), Some(&o2.vclock), c(b"c"), &props, b"n/1", 12)
            .unwrap_or_default();
        assert_eq!(o3.contents.len(), 1);
        let single = coordinate(
            Some(&o1),
            None,
            c(b"b"),
            &BucketProps::default(),
            b"n/1",
            11,
        )
        .unwrap_or_default();
        assert_eq!(single.contents.len(), 1);
        let mut tomb = c(b"");
        tomb.deleted = true;
        assert!(coordinate(None, None, tomb.clone(), &props, b"n/1", 1).is_none());
        assert!(
            coordinate(Some(&o3), None, tomb, &props, b"n/1", 13).is_some_and(|o| o.is_deleted())
        );
    }
}
