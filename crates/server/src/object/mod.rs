//! Riak objects: a vector clock and one or more contents (siblings), and how
//! they are stored in a backend.
//!
//! # Dotted siblings
//!
//! Every sibling written since storage version 2 carries its **dot**: the
//! (actor, counter) event of the vnode that coordinated its write (Riak's
//! dotted version vectors, `dvv_enabled`). The object's clock covers the
//! dots of all its siblings. A merge keeps a sibling of one side unless the
//! other side's clock covers its dot and the other side does not hold it
//! (it saw that write and superseded it), so a merge is a join: replicas
//! that exchange their versions in any order, any number of times, end with
//! the same siblings under the same clock ([`RiakObject::merge`]), and a
//! write that a client read and overwrote never comes back as a sibling.
//! Siblings stored by version 1 have no dot; they keep version 1's rule
//! (dropped only when the other side's clock dominates theirs).
//!
//! **Invariant**: two versions with the same clock hold the same siblings.
//! A merge that meets two versions breaking it keeps the union of their
//! siblings (nothing is lost) and counts it in [`DIVERGENT_MERGES`].
//!
//! # Storage encoding (version 2; version 1 is still read)
//!
//! An object is split in two so that a backend HEAD answers without reading
//! any value:
//!
//! * backend **metadata** = `02 | vclock_len:u32 | vclock (see [`crate::vclock`]) |
//!   n:u32 | n × sibling-metadata`, where sibling-metadata is
//!   `value_len:u32 | flags:u8 (bit 0 = deleted) | last_mod:u32 | last_mod_usecs:u32 |
//!   content_type | charset | content_encoding | vtag` (each `len:u32 | bytes`, length
//!   `u32::MAX` = absent) `| usermeta_n:u32 | pairs | indexes_n:u32 | pairs | links_n:u32 | links
//!   | dot_actor | dot_counter:u64` (version 2 only; `dot_actor` absent = no dot, and then
//!   no counter follows); a pair is `key | value` (bytes as above), a link `bucket | key | tag`;
//! * backend **value** = the sibling values concatenated in order (lengths in
//!   the metadata).
//!
//! All integers are big-endian. Siblings are kept in a canonical order (by
//! dot, then vtag), so equal versions encode to equal bytes.

pub mod datatype;
pub mod vclock;

use crate::object::vclock::VClock;
use crate::pb::{RpbContent, RpbLink, RpbPair};
use std::sync::atomic::{AtomicU64, Ordering};

/// Merges that met two versions with the same clock but different siblings
/// (the invariant in the module docs broken, e.g. by data written before
/// dotted siblings); exported in `/stats` as `divergent_merges_total`.
pub static DIVERGENT_MERGES: AtomicU64 = AtomicU64::new(0);

/// The event that wrote a sibling: the coordinating vnode's actor and its
/// counter after the write.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Dot {
    /// Actor id (see [`crate::ring::actor`]).
    pub actor: Vec<u8>,
    /// The actor's counter for this event.
    pub counter: u64,
}

impl Dot {
    /// True if `clock` has seen this event.
    pub fn covered_by(&self, clock: &VClock) -> bool {
        clock.counter(&self.actor) >= self.counter
    }
}

/// Why stored bytes could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("corrupt object encoding: {0}")]
pub struct DecodeError(pub &'static str);

/// What identifies a sibling: (dot, vtag, last-modified µs, tombstone).
type SiblingId<'a> = (Option<&'a Dot>, Option<&'a [u8]>, u64, bool);

/// One sibling.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Content {
    /// The value (empty for tombstones and for heads).
    pub value: Vec<u8>,
    /// Length of the value as stored (kept when the value is left out).
    pub value_len: u32,
    /// Content type.
    pub content_type: Option<Vec<u8>>,
    /// Charset.
    pub charset: Option<Vec<u8>>,
    /// Content encoding.
    pub content_encoding: Option<Vec<u8>>,
    /// Version tag (unique per write).
    pub vtag: Option<Vec<u8>>,
    /// Last modified, seconds.
    pub last_mod: u32,
    /// Last modified, microseconds part.
    pub last_mod_usecs: u32,
    /// User metadata.
    pub usermeta: Vec<(Vec<u8>, Vec<u8>)>,
    /// 2i entries (field, term).
    pub indexes: Vec<(Vec<u8>, Vec<u8>)>,
    /// Links (bucket, key, tag).
    pub links: Vec<(Vec<u8>, Vec<u8>, Vec<u8>)>,
    /// Tombstone.
    pub deleted: bool,
    /// The event that wrote this sibling (`None`: stored before dots).
    pub dot: Option<Dot>,
}

impl Content {
    /// Last-modified as microseconds since the epoch.
    pub fn last_mod_us(&self) -> u64 {
        u64::from(self.last_mod) * 1_000_000 + u64::from(self.last_mod_usecs)
    }

    /// From a PB content (`value_len` taken from the value).
    pub fn from_pb(c: RpbContent) -> Content {
        Content {
            value_len: c.value.len() as u32,
            value: c.value,
            content_type: c.content_type,
            charset: c.charset,
            content_encoding: c.content_encoding,
            vtag: c.vtag,
            last_mod: c.last_mod.unwrap_or(0),
            last_mod_usecs: c.last_mod_usecs.unwrap_or(0),
            usermeta: c
                .usermeta
                .into_iter()
                .map(|p| (p.key, p.value.unwrap_or_default()))
                .collect(),
            indexes: c
                .indexes
                .into_iter()
                .map(|p| (p.key, p.value.unwrap_or_default()))
                .collect(),
            links: c
                .links
                .into_iter()
                .map(|l| {
                    (
                        l.bucket.unwrap_or_default(),
                        l.key.unwrap_or_default(),
                        l.tag.unwrap_or_default(),
                    )
                })
                .collect(),
            deleted: c.deleted.unwrap_or(false),
            dot: None,
        }
    }

    /// What identifies a sibling across replicas: its dot, vtag,
    /// last-modified time and tombstone flag (not its value bytes, which a
    /// head leaves out).
    fn identity(&self) -> SiblingId<'_> {
        (
            self.dot.as_ref(),
            self.vtag.as_deref(),
            self.last_mod_us(),
            self.deleted,
        )
    }

    /// [`Content::to_pb`] taking the content: its value and fields move
    /// into the PB content, uncopied.
    pub fn into_pb(self, with_value: bool) -> RpbContent {
        RpbContent {
            value: if with_value { self.value } else { Vec::new() },
            content_type: self.content_type,
            charset: self.charset,
            content_encoding: self.content_encoding,
            vtag: self.vtag,
            links: self
                .links
                .into_iter()
                .map(|(b, k, t)| RpbLink {
                    bucket: Some(b),
                    key: Some(k),
                    tag: Some(t),
                })
                .collect(),
            last_mod: Some(self.last_mod),
            last_mod_usecs: Some(self.last_mod_usecs),
            usermeta: into_pairs(self.usermeta),
            indexes: into_pairs(self.indexes),
            deleted: if self.deleted { Some(true) } else { None },
        }
    }

    /// To a PB content; `with_value = false` sends `<<>>` (head).
    pub fn to_pb(&self, with_value: bool) -> RpbContent {
        RpbContent {
            value: if with_value {
                self.value.clone()
            } else {
                Vec::new()
            },
            content_type: self.content_type.clone(),
            charset: self.charset.clone(),
            content_encoding: self.content_encoding.clone(),
            vtag: self.vtag.clone(),
            links: self
                .links
                .iter()
                .map(|(b, k, t)| RpbLink {
                    bucket: Some(b.clone()),
                    key: Some(k.clone()),
                    tag: Some(t.clone()),
                })
                .collect(),
            last_mod: Some(self.last_mod),
            last_mod_usecs: Some(self.last_mod_usecs),
            usermeta: pairs(&self.usermeta),
            indexes: pairs(&self.indexes),
            deleted: if self.deleted { Some(true) } else { None },
        }
    }
}

fn into_pairs(v: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<RpbPair> {
    v.into_iter()
        .map(|(key, v)| RpbPair {
            key,
            value: Some(v),
        })
        .collect()
}

fn pairs(v: &[(Vec<u8>, Vec<u8>)]) -> Vec<RpbPair> {
    v.iter()
        .map(|(k, v)| RpbPair {
            key: k.clone(),
            value: Some(v.clone()),
        })
        .collect()
}

/// A Riak object.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RiakObject {
    /// The causal history.
    pub vclock: VClock,
    /// The siblings (at least one in a stored object).
    pub contents: Vec<Content>,
}

impl RiakObject {
    /// True if every sibling is a tombstone.
    pub fn is_deleted(&self) -> bool {
        self.contents.iter().all(|c| c.deleted)
    }

    /// The 2i entries of the live siblings, sorted and deduplicated.
    pub fn index_entries(&self) -> Vec<(Vec<u8>, Vec<u8>)> {
        let mut v: Vec<(Vec<u8>, Vec<u8>)> = self
            .contents
            .iter()
            .filter(|c| !c.deleted)
            .flat_map(|c| c.indexes.iter().cloned())
            .collect();
        v.sort();
        v.dedup();
        v
    }

    /// [`RiakObject::newest_first`] taking the object: the siblings,
    /// moved out, in the order Riak lists them.
    pub fn into_newest_first(self) -> Vec<Content> {
        let mut v = self.contents;
        v.sort_by(|x, y| (y.last_mod_us(), &y.vtag).cmp(&(x.last_mod_us(), &x.vtag)));
        v
    }

    /// The siblings in the order Riak lists them to clients: the newest
    /// first (by last-modified time, ties by vtag, both descending), so a
    /// client that takes the first sibling takes the latest write. Storage
    /// keeps the canonical order ([`RiakObject::canonicalize`]).
    pub fn newest_first(&self) -> Vec<&Content> {
        let mut v: Vec<&Content> = self.contents.iter().collect();
        v.sort_by(|x, y| (y.last_mod_us(), &y.vtag).cmp(&(x.last_mod_us(), &x.vtag)));
        v
    }

    /// Total size of the sibling values.
    pub fn value_bytes(&self) -> usize {
        self.contents.iter().map(|c| c.value.len()).sum()
    }

    /// The backend metadata encoding (module docs).
    pub fn encode_metadata(&self) -> Vec<u8> {
        debug_assert!(
            self.contents
                .iter()
                .all(|c| c.dot.as_ref().is_none_or(|d| d.covered_by(&self.vclock))),
            "a sibling's dot must be covered by its object's clock"
        );
        let mut out = Vec::with_capacity(64);
        out.push(2u8);
        let vc = self.vclock.encode();
        put_bytes(&mut out, Some(&vc));
        out.extend_from_slice(&(self.contents.len() as u32).to_be_bytes());
        for c in &self.contents {
            out.extend_from_slice(&(c.value.len() as u32).to_be_bytes());
            out.push(u8::from(c.deleted));
            out.extend_from_slice(&c.last_mod.to_be_bytes());
            out.extend_from_slice(&c.last_mod_usecs.to_be_bytes());
            for f in [&c.content_type, &c.charset, &c.content_encoding, &c.vtag] {
                put_bytes(&mut out, f.as_deref());
            }
            for list in [&c.usermeta, &c.indexes] {
                out.extend_from_slice(&(list.len() as u32).to_be_bytes());
                for (k, v) in list {
                    put_bytes(&mut out, Some(k));
                    put_bytes(&mut out, Some(v));
                }
            }
            out.extend_from_slice(&(c.links.len() as u32).to_be_bytes());
            for (b, k, t) in &c.links {
                put_bytes(&mut out, Some(b));
                put_bytes(&mut out, Some(k));
                put_bytes(&mut out, Some(t));
            }
            match &c.dot {
                Some(d) => {
                    put_bytes(&mut out, Some(&d.actor));
                    out.extend_from_slice(&d.counter.to_be_bytes());
                }
                None => put_bytes(&mut out, None),
            }
        }
        out
    }

    /// The backend value: sibling values concatenated.
    pub fn encode_value(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.value_bytes());
        for c in &self.contents {
            out.extend_from_slice(&c.value);
        }
        out
    }

    /// Decodes the metadata; values are left empty (a head).
    pub fn decode_metadata(meta: &[u8]) -> Result<RiakObject, DecodeError> {
        let mut r = Reader { buf: meta, pos: 0 };
        let version = r.u8()?;
        if version != 1 && version != 2 {
            return Err(DecodeError("unknown metadata version"));
        }
        let vc = r.bytes()?.ok_or(DecodeError("missing vclock"))?;
        let vclock = VClock::decode(&vc).map_err(|e| DecodeError(e.0))?;
        let n = r.u32()?;
        let mut contents = Vec::new();
        for _ in 0..n {
            let value_len = r.u32()?;
            let deleted = r.u8()? & 1 == 1;
            let last_mod = r.u32()?;
            let last_mod_usecs = r.u32()?;
            let content_type = r.bytes()?;
            let charset = r.bytes()?;
            let content_encoding = r.bytes()?;
            let vtag = r.bytes()?;
            let mut lists = [Vec::new(), Vec::new()];
            for list in &mut lists {
                let m = r.u32()?;
                for _ in 0..m {
                    let k = r.bytes()?.unwrap_or_default();
                    let v = r.bytes()?.unwrap_or_default();
                    list.push((k, v));
                }
            }
            let [usermeta, indexes] = lists;
            let m = r.u32()?;
            let mut links = Vec::new();
            for _ in 0..m {
                let b = r.bytes()?.unwrap_or_default();
                let k = r.bytes()?.unwrap_or_default();
                let t = r.bytes()?.unwrap_or_default();
                links.push((b, k, t));
            }
            let dot = match version {
                2 => match r.bytes()? {
                    Some(actor) => Some(Dot {
                        actor,
                        counter: r.u64()?,
                    }),
                    None => None,
                },
                _ => None,
            };
            contents.push(Content {
                value: Vec::new(),
                value_len,
                content_type,
                charset,
                content_encoding,
                vtag,
                last_mod,
                last_mod_usecs,
                usermeta,
                indexes,
                links,
                deleted,
                dot,
            });
        }
        if r.pos != meta.len() {
            return Err(DecodeError("trailing metadata bytes"));
        }
        Ok(RiakObject { vclock, contents })
    }

    /// [`RiakObject::decode`] taking the value bytes: one sibling's value
    /// is moved in, not copied.
    pub fn decode_owned(meta: &[u8], value: Vec<u8>) -> Result<RiakObject, DecodeError> {
        let mut obj = RiakObject::decode_metadata(meta)?;
        match obj.contents.as_mut_slice() {
            [one] => {
                if one.value_len as usize != value.len() {
                    return Err(if (one.value_len as usize) < value.len() {
                        DecodeError("value longer than the metadata says")
                    } else {
                        DecodeError("value shorter than the metadata says")
                    });
                }
                one.value = value;
                Ok(obj)
            }
            _ => RiakObject::decode(meta, &value),
        }
    }

    /// Decodes metadata and value.
    pub fn decode(meta: &[u8], value: &[u8]) -> Result<RiakObject, DecodeError> {
        let mut obj = RiakObject::decode_metadata(meta)?;
        let mut pos = 0usize;
        for c in &mut obj.contents {
            let end = pos
                .checked_add(c.value_len as usize)
                .ok_or(DecodeError("value length overflow"))?;
            c.value = value
                .get(pos..end)
                .ok_or(DecodeError("value shorter than the metadata says"))?
                .to_vec();
            pos = end;
        }
        if pos != value.len() {
            return Err(DecodeError("value longer than the metadata says"));
        }
        Ok(obj)
    }

    /// Merges two versions (a replica's step, read repair, handoff,
    /// anti-entropy): the join of the module docs. From each side, a sibling
    /// is kept if the other side holds it too, or if the other side's clock
    /// has not seen it (its dot is not covered; a sibling without a dot:
    /// the other clock does not dominate its object's clock). The clock is
    /// the least clock descending both. Without `allow_mult` the latest
    /// sibling is kept ([`RiakObject::resolve_latest`]).
    ///
    /// Limit: without `allow_mult`, "latest" is by wall-clock last-modified
    /// time (ties by vtag), as in Riak. If the nodes' clocks are skewed so
    /// that a write that superseded another carries an older timestamp
    /// than a concurrent third write, replicas that merged in different
    /// orders can keep different single values; with `allow_mult` (and
    /// for typed buckets, whose default it is) the merge is exact.
    ///
    /// Live siblings holding one data type are merged into one sibling
    /// ([`datatype::collapse`]), whatever `allow_mult` says.
    pub fn merge(a: &RiakObject, b: &RiakObject, allow_mult: bool) -> RiakObject {
        let equal_clocks = a.vclock.same_events(&b.vclock);
        let mut contents: Vec<Content> = Vec::with_capacity(a.contents.len() + b.contents.len());
        for (this, other) in [(a, b), (b, a)] {
            for c in &this.contents {
                let held = other.contents.iter().any(|o| o.identity() == c.identity());
                let seen = match &c.dot {
                    Some(d) => d.covered_by(&other.vclock),
                    None => other.vclock.dominates(&this.vclock),
                };
                // With equal clocks the invariant says both sides hold the
                // same siblings; if not, keep the union (lose nothing).
                let keep = held || !seen || equal_clocks;
                if keep {
                    match contents.iter_mut().find(|x| x.identity() == c.identity()) {
                        None => contents.push(c.clone()),
                        // The same data-type sibling on both sides may
                        // differ in bytes (a map's tombstones): join them.
                        Some(x) => datatype::join_same(x, c),
                    }
                }
            }
        }
        if equal_clocks && !a.same_siblings(b) {
            DIVERGENT_MERGES.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                siblings_a = a.contents.len(),
                siblings_b = b.contents.len(),
                "two replicas hold different siblings under one clock; keeping the union"
            );
        }
        // Data types converge instead of keeping siblings.
        datatype::collapse(&mut contents);
        if contents.is_empty() {
            // Unreachable when every dot was issued once; keep both sides
            // rather than an object without contents.
            debug_assert!(false, "a merge dropped every sibling");
            contents = a.contents.iter().chain(&b.contents).cloned().collect();
        }
        let mut merged = RiakObject {
            vclock: a.vclock.merge(&b.vclock),
            contents,
        };
        merged.canonicalize();
        if !allow_mult {
            merged.resolve_latest();
        }
        merged
    }

    /// True if [`RiakObject::merge`] of `self` with `other` keeps none of
    /// `other`'s siblings: the clocks differ, and `self` has seen each of
    /// `other`'s siblings without holding it. Then `other`'s values are
    /// not needed for the merge (a replica merging a newer version reads
    /// its own metadata only). Data-type siblings collapse from what is
    /// kept, so the rule holds for them too.
    pub fn supersedes(&self, other: &RiakObject) -> bool {
        !self.vclock.same_events(&other.vclock)
            && other.contents.iter().all(|c| {
                let held = self.contents.iter().any(|o| o.identity() == c.identity());
                let seen = match &c.dot {
                    Some(d) => d.covered_by(&self.vclock),
                    None => self.vclock.dominates(&other.vclock),
                };
                !held && seen
            })
    }

    /// Puts the siblings in the canonical order (by dot, then vtag and
    /// last-modified time).
    pub fn canonicalize(&mut self) {
        self.contents
            .sort_by(|x, y| x.identity().cmp(&y.identity()));
    }

    /// True if both hold the same siblings (by identity: dot, vtag,
    /// last-modified, tombstone flag), in any order.
    pub fn same_siblings(&self, other: &RiakObject) -> bool {
        fn ids(o: &RiakObject) -> Vec<SiblingId<'_>> {
            let mut v: Vec<_> = o.contents.iter().map(Content::identity).collect();
            v.sort();
            v
        }
        self.contents.len() == other.contents.len() && ids(self) == ids(other)
    }

    /// True if both are the same version: the same events in their clocks
    /// and the same siblings. What read repair and anti-entropy compare.
    pub fn same_state(&self, other: &RiakObject) -> bool {
        self.vclock.same_events(&other.vclock) && self.same_siblings(other)
    }

    /// A hash of the version a replica holds (clock events and sibling
    /// identities, not timestamps of clock entries), for anti-entropy:
    /// two replicas hash alike only if they hold the same state.
    pub fn state_hash(&self) -> u64 {
        let mut buf = Vec::with_capacity(64);
        for e in self.vclock.entries() {
            put_bytes(&mut buf, Some(&e.actor));
            buf.extend_from_slice(&e.counter.to_be_bytes());
        }
        let mut ids: Vec<_> = self.contents.iter().map(Content::identity).collect();
        ids.sort();
        for (dot, vtag, lm, deleted) in ids {
            match dot {
                Some(d) => {
                    put_bytes(&mut buf, Some(&d.actor));
                    buf.extend_from_slice(&d.counter.to_be_bytes());
                }
                None => put_bytes(&mut buf, None),
            }
            put_bytes(&mut buf, vtag);
            buf.extend_from_slice(&lm.to_be_bytes());
            buf.push(u8::from(deleted));
        }
        xxhash_rust::xxh3::xxh3_64(&buf)
    }

    /// Keeps only the latest sibling: the greatest last-modified time, ties
    /// broken by vtag then dot, so every replica picks the same one.
    pub fn resolve_latest(&mut self) {
        if self.contents.len() > 1 {
            let mut best = 0;
            for (i, c) in self.contents.iter().enumerate() {
                let b = &self.contents[best];
                if (c.last_mod_us(), &c.vtag, &c.dot) > (b.last_mod_us(), &b.vtag, &b.dot) {
                    best = i;
                }
            }
            let keep = self.contents.swap_remove(best);
            self.contents = vec![keep];
        }
    }
}

fn put_bytes(out: &mut Vec<u8>, b: Option<&[u8]>) {
    match b {
        Some(b) => {
            out.extend_from_slice(&(b.len() as u32).to_be_bytes());
            out.extend_from_slice(b);
        }
        None => out.extend_from_slice(&u32::MAX.to_be_bytes()),
    }
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl Reader<'_> {
    fn take(&mut self, n: usize) -> Result<&[u8], DecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or(DecodeError("length overflow"))?;
        let s = self
            .buf
            .get(self.pos..end)
            .ok_or(DecodeError("truncated metadata"))?;
        self.pos = end;
        Ok(s)
    }
    fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }
    fn u32(&mut self) -> Result<u32, DecodeError> {
        let s = self.take(4)?;
        Ok(u32::from_be_bytes([s[0], s[1], s[2], s[3]]))
    }
    fn u64(&mut self) -> Result<u64, DecodeError> {
        let s = self.take(8)?;
        let mut b = [0u8; 8];
        b.copy_from_slice(s);
        Ok(u64::from_be_bytes(b))
    }
    fn bytes(&mut self) -> Result<Option<Vec<u8>>, DecodeError> {
        let n = self.u32()?;
        if n == u32::MAX {
            return Ok(None);
        }
        Ok(Some(self.take(n as usize)?.to_vec()))
    }
}

/// A random base62 id (vtags and generated keys).
pub fn unique_id() -> Vec<u8> {
    const ALPHABET: &[u8] = b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz";
    let mut n: u128 = rand::random();
    let mut out = Vec::with_capacity(22);
    while n > 0 {
        out.push(ALPHABET[(n % 62) as usize]);
        n /= 62;
    }
    if out.is_empty() {
        out.push(b'0');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn content(v: &[u8], t: u32) -> Content {
        Content {
            value: v.to_vec(),
            value_len: v.len() as u32,
            content_type: Some(b"text/plain".to_vec()),
            vtag: Some(format!("v{t}").into_bytes()),
            last_mod: t,
            usermeta: vec![(b"m".to_vec(), b"1".to_vec())],
            indexes: vec![(b"f_bin".to_vec(), b"x".to_vec())],
            links: vec![(b"b".to_vec(), b"k".to_vec(), b"t".to_vec())],
            ..Content::default()
        }
    }

    #[test]
    fn roundtrip_and_corruption() {
        let mut vc = VClock::new();
        vc.increment(b"a", 1);
        let o = RiakObject {
            vclock: vc,
            contents: vec![content(b"one", 1), content(b"two!", 2)],
        };
        let meta = o.encode_metadata();
        let val = o.encode_value();
        assert_eq!(RiakObject::decode(&meta, &val), Ok(o.clone()));
        let head = RiakObject::decode_metadata(&meta).unwrap_or_default();
        assert_eq!(head.contents[1].value_len, 4);
        for cut in 0..meta.len() {
            assert!(RiakObject::decode_metadata(&meta[..cut]).is_err());
        }
        assert!(RiakObject::decode(&meta, &val[1..]).is_err());
        // Taking the value bytes decodes alike, and refuses the same damage.
        assert_eq!(RiakObject::decode_owned(&meta, val.clone()), Ok(o.clone()));
        assert!(RiakObject::decode_owned(&meta, val[1..].to_vec()).is_err());
        let one = RiakObject {
            vclock: o.vclock.clone(),
            contents: vec![content(b"one", 1)],
        };
        let (meta1, val1) = (one.encode_metadata(), one.encode_value());
        assert_eq!(
            RiakObject::decode_owned(&meta1, val1.clone()),
            Ok(one.clone())
        );
        assert!(RiakObject::decode_owned(&meta1, val1[1..].to_vec()).is_err());
        assert!(RiakObject::decode_owned(&meta1, [&val1[..], b"x"].concat()).is_err());
        // The PB contents moved out equal the ones copied.
        let moved = o
            .clone()
            .into_newest_first()
            .into_iter()
            .map(|c| c.into_pb(true));
        let copied = o.newest_first().into_iter().map(|c| c.to_pb(true));
        assert!(moved.eq(copied));
    }

    #[test]
    fn merge_concurrent_and_descendant() {
        let mut a = VClock::new();
        a.increment(b"x", 1);
        let mut b = a.clone();
        b.increment(b"y", 2);
        let mut c = a.clone();
        c.increment(b"z", 3);
        let ob = RiakObject {
            vclock: b,
            contents: vec![content(b"b", 2)],
        };
        let oc = RiakObject {
            vclock: c,
            contents: vec![content(b"c", 3)],
        };
        let oa = RiakObject {
            vclock: a,
            contents: vec![content(b"a", 1)],
        };
        assert_eq!(RiakObject::merge(&oa, &ob, true), ob);
        let m = RiakObject::merge(&ob, &oc, true);
        assert_eq!(m.contents.len(), 2);
        let m1 = RiakObject::merge(&ob, &oc, false);
        assert_eq!(m1.contents.len(), 1);
        assert_eq!(m1.contents[0].value, b"c");
    }
}
