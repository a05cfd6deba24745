//! Tictac trees: mergeable two-level hash trees for anti-entropy, after
//! leveled_tictac and kv_index_tictactree.
//!
//! A tree of width `W` has `W × 256` **segments** (level 2) of 32-bit
//! hashes, grouped in `W` **branches** of 256; **level 1** holds one 32-bit
//! hash per branch. Every level-1 entry is the XOR of its 256 segments, and
//! every segment is the XOR of the contributions of the keys that fall in it.
//! There is no hash of hashes anywhere, so:
//!
//! * a tree can be built in any order and updated incrementally: a PUT XORs
//!   out the key's old contribution and XORs in the new one, a DELETE XORs
//!   out the old one ([`TicTacTree::replace`]);
//! * trees over disjoint data combine by XOR into the tree of the union
//!   ([`TicTacTree::merge`]), e.g. across partitions or stores;
//! * comparing two trees level 1 first, then only the differing branches,
//!   finds the dirty segments ([`TicTacTree::dirty_segments`]).
//!
//! # Key hashing (documented, stable)
//!
//! Everything is derived from `h = xxh3_128(object_key)` where `object_key`
//! is the encoded ledger key `key::object(bucket, key)` (so bucket and key
//! cannot run into each other):
//!
//! ```text
//! segment_id  = h        & 0xFFFF            (16 bits)
//! extra       = (h >> 16) & 0xFFFF_FFFF      (32 bits)
//! alt_hash    = (h >> 48) & 0xFFFF_FFFF      (32 bits)
//! segment32   = ((extra & 0xFFFF) << 16) | segment_id
//! segment     = segment32 & (segments - 1)
//! contribution(key, object_hash) = alt_hash ^ (object_hash ^ object_hash >> 32) as u32
//! ```
//!
//! As in leveled, the low 16 bits of a segment are shared by every tree size,
//! so a segment of a smaller tree maps onto a set of segments of a larger one.
//! The store uses the ledger entry's `value_hash` (xxh3-64 of the value) as
//! the object hash.
//!
//! # Export format
//!
//! ```text
//! tree := magic "BSLTTIC1" | version:u32 (=1) | size:u8 | reserved:[u8;3]
//!         | segment:u32{width × 256} | crc:u32
//! ```
//!
//! Little-endian; the CRC32C covers every byte before it. Level 1 is not
//! stored: it is recomputed from the segments on import.

use crate::codec::{crc, Encode, Reader};
use crate::error::{Error, Result};
use crate::key;
use parking_lot::Mutex;
use std::fmt;

/// Segments per branch (leveled's `L2_CHUNKSIZE`).
pub const BRANCH_SEGMENTS: usize = 256;

/// Magic of an exported tree.
pub const EXPORT_MAGIC: [u8; 8] = *b"BSLTTIC1";

/// Export format version.
pub const EXPORT_VERSION: u32 = 1;

const EXPORT_HEADER_BYTES: usize = 8 + 4 + 1 + 3;

/// The size of a tree (its width): the backend crate's type, shared by
/// every backend's folds ([`basalt_backend::TreeSize`]).
pub use basalt_backend::TreeSize;

/// (segment32, alt_hash) of an encoded object key; see the module docs.
fn key_hashes(object_key: &[u8]) -> (u32, u32) {
    let h = xxhash_rust::xxh3::xxh3_128(object_key);
    let segment_id = (h & 0xFFFF) as u32;
    let extra = ((h >> 16) & 0xFFFF_FFFF) as u32;
    let alt = ((h >> 48) & 0xFFFF_FFFF) as u32;
    (((extra & 0xFFFF) << 16) | segment_id, alt)
}

/// The segment of an encoded object key (`key::object(bucket, key)`) in a
/// tree of `size`.
pub fn segment_of_ledger_key(object_key: &[u8], size: TreeSize) -> u32 {
    let (seg32, _) = key_hashes(object_key);
    seg32 & (size.segments() - 1)
}

/// The segment of (`bucket`, `key`) in a tree of `size`: the backend
/// crate's function, which hashes the same encoded object key as
/// [`segment_of_ledger_key`] (the tests check they agree).
pub use basalt_backend::segment_of;

/// Folds a 64-bit object hash to 32 bits.
fn fold_hash(object_hash: u64) -> u32 {
    (object_hash ^ (object_hash >> 32)) as u32
}

/// A two-level tictac tree. See the module docs.
#[derive(Clone, PartialEq, Eq)]
pub struct TicTacTree {
    size: TreeSize,
    level1: Vec<u32>,
    level2: Vec<u32>,
}

impl fmt::Debug for TicTacTree {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TicTacTree")
            .field("size", &self.size)
            .field("root", &format_args!("{:016x}", self.root()))
            .finish()
    }
}

impl TicTacTree {
    /// An empty tree (every hash 0).
    pub fn new(size: TreeSize) -> TicTacTree {
        TicTacTree {
            size,
            level1: vec![0; size.width() as usize],
            level2: vec![0; size.segments() as usize],
        }
    }

    /// The tree's size.
    pub fn size(&self) -> TreeSize {
        self.size
    }

    /// XORs `contribution` into segment `segment` and its branch.
    fn xor(&mut self, segment: u32, contribution: u32) {
        let s = segment as usize;
        debug_assert!(s < self.level2.len());
        if let Some(x) = self.level2.get_mut(s) {
            *x ^= contribution;
        }
        if let Some(x) = self.level1.get_mut(s / BRANCH_SEGMENTS) {
            *x ^= contribution;
        }
    }

    /// XORs the contribution of (encoded object key, object hash) in: adds
    /// it if absent, removes it if present.
    pub fn toggle_ledger_key(&mut self, object_key: &[u8], object_hash: u64) {
        let (seg32, alt) = key_hashes(object_key);
        let seg = seg32 & (self.size.segments() - 1);
        self.xor(seg, alt ^ fold_hash(object_hash));
    }

    /// Adds (`bucket`, `key`) with the hash of its object.
    pub fn add(&mut self, bucket: &[u8], key: &[u8], object_hash: u64) {
        self.toggle_ledger_key(&key::object(bucket, key), object_hash);
    }

    /// Removes (`bucket`, `key`) with the hash it was added with (XOR is its
    /// own inverse, so this is the same operation as [`TicTacTree::add`]).
    pub fn remove(&mut self, bucket: &[u8], key: &[u8], object_hash: u64) {
        self.add(bucket, key, object_hash);
    }

    /// Records an update: the old object (if any) out, the new one (if any) in.
    pub fn replace(&mut self, bucket: &[u8], key: &[u8], old: Option<u64>, new: Option<u64>) {
        self.replace_ledger_key(&key::object(bucket, key), old, new);
    }

    /// [`TicTacTree::replace`] by encoded object key.
    pub fn replace_ledger_key(&mut self, object_key: &[u8], old: Option<u64>, new: Option<u64>) {
        if old == new {
            return;
        }
        let (seg32, alt) = key_hashes(object_key);
        let seg = seg32 & (self.size.segments() - 1);
        let mut c = 0;
        if let Some(h) = old {
            c ^= alt ^ fold_hash(h);
        }
        if let Some(h) = new {
            c ^= alt ^ fold_hash(h);
        }
        self.xor(seg, c);
    }

    /// A 64-bit digest of level 1 (xxh3-64 of its little-endian bytes).
    /// Equal trees have equal roots; compare roots first, then
    /// [`TicTacTree::level1`].
    pub fn root(&self) -> u64 {
        let mut bytes = Vec::with_capacity(self.level1.len() * 4);
        for h in &self.level1 {
            bytes.put_u32(*h);
        }
        xxhash_rust::xxh3::xxh3_64(&bytes)
    }

    /// Level 1: one hash per branch.
    pub fn level1(&self) -> &[u32] {
        &self.level1
    }

    /// The 256 segment hashes of each requested branch, in request order
    /// (ids out of range are skipped).
    pub fn branches(&self, ids: &[u32]) -> Vec<(u32, &[u32])> {
        ids.iter()
            .filter_map(|&id| {
                let start = id as usize * BRANCH_SEGMENTS;
                self.level2
                    .get(start..start + BRANCH_SEGMENTS)
                    .map(|b| (id, b))
            })
            .collect()
    }

    /// The hash of each requested segment (ids out of range are skipped).
    pub fn segments(&self, ids: &[u32]) -> Vec<(u32, u32)> {
        ids.iter()
            .filter_map(|&id| self.level2.get(id as usize).map(|h| (id, *h)))
            .collect()
    }

    /// XORs `other` into this tree: over disjoint data the result is the
    /// tree of the union. Trees of different sizes are refused.
    pub fn merge(&mut self, other: &TicTacTree) -> Result<()> {
        self.check_size(other)?;
        for (a, b) in self.level1.iter_mut().zip(&other.level1) {
            *a ^= b;
        }
        for (a, b) in self.level2.iter_mut().zip(&other.level2) {
            *a ^= b;
        }
        Ok(())
    }

    /// The segments whose hashes differ, ascending: level 1 is compared
    /// first, and only branches that differ there are compared segment by
    /// segment.
    pub fn dirty_segments(&self, other: &TicTacTree) -> Result<Vec<u32>> {
        self.check_size(other)?;
        let mut out = Vec::new();
        for (b, (x, y)) in self.level1.iter().zip(&other.level1).enumerate() {
            if x == y {
                continue;
            }
            let start = b * BRANCH_SEGMENTS;
            let mine = self.level2.get(start..start + BRANCH_SEGMENTS);
            let theirs = other.level2.get(start..start + BRANCH_SEGMENTS);
            if let (Some(m), Some(t)) = (mine, theirs) {
                for (i, (p, q)) in m.iter().zip(t).enumerate() {
                    if p != q {
                        out.push((start + i) as u32);
                    }
                }
            }
        }
        Ok(out)
    }

    fn check_size(&self, other: &TicTacTree) -> Result<()> {
        if self.size != other.size {
            return Err(Error::InvalidInput(format!(
                "tictac trees of different sizes ({} and {}) cannot be combined",
                self.size.name(),
                other.size.name()
            )));
        }
        Ok(())
    }

    /// The tree in the export format (see the module docs).
    pub fn export(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(EXPORT_HEADER_BYTES + self.level2.len() * 4 + 4);
        out.extend_from_slice(&EXPORT_MAGIC);
        out.put_u32(EXPORT_VERSION);
        out.put_u8(self.size.to_byte());
        out.extend_from_slice(&[0; 3]);
        for h in &self.level2 {
            out.put_u32(*h);
        }
        let c = crc(&out);
        out.put_u32(c);
        out
    }

    /// Reads a tree written by [`TicTacTree::export`]. Any damage is
    /// [`Error::InvalidInput`] (the bytes come from the caller, not a file).
    pub fn import(bytes: &[u8]) -> Result<TicTacTree> {
        let bad = |m: String| Error::InvalidInput(format!("tictac tree import: {m}"));
        let body_len = bytes
            .len()
            .checked_sub(4)
            .filter(|&n| n >= EXPORT_HEADER_BYTES)
            .ok_or_else(|| bad(format!("{} bytes is too short", bytes.len())))?;
        let (body, tail) = bytes.split_at(body_len);
        let stored = Reader::new(tail).u32().map_err(|e| bad(e.0))?;
        if crc(body) != stored {
            return Err(bad("checksum mismatch".into()));
        }
        let mut r = Reader::new(body);
        let magic = r.take(8).map_err(|e| bad(e.0))?;
        if magic != EXPORT_MAGIC {
            return Err(bad("bad magic".into()));
        }
        let version = r.u32().map_err(|e| bad(e.0))?;
        if version != EXPORT_VERSION {
            return Err(bad(format!(
                "unknown version {version} (this build reads {EXPORT_VERSION})"
            )));
        }
        let size_byte = r.u8().map_err(|e| bad(e.0))?;
        let size =
            TreeSize::from_byte(size_byte).ok_or_else(|| bad(format!("bad size {size_byte}")))?;
        let reserved = r.take(3).map_err(|e| bad(e.0))?;
        if reserved != [0; 3] {
            return Err(bad(format!("reserved bytes {reserved:?} are not zero")));
        }
        if r.remaining() != size.segments() as usize * 4 {
            return Err(bad(format!(
                "{} segment bytes for a {} tree (expected {})",
                r.remaining(),
                size.name(),
                size.segments() as usize * 4
            )));
        }
        let mut tree = TicTacTree::new(size);
        for s in 0..size.segments() {
            let h = r.u32().map_err(|e| bad(e.0))?;
            tree.xor(s, h);
        }
        Ok(tree)
    }
}

/// The store's incrementally maintained tree, with support for a rebuild
/// that runs while writes continue: between [`LiveTree::begin_rebuild`]
/// (taken atomically with the snapshot the rebuild folds) and
/// [`LiveTree::finish_rebuild`], every change is also XORed into a `delta`
/// tree; the result is `rebuilt XOR delta`.
#[derive(Debug)]
pub(crate) struct LiveTree {
    inner: Mutex<LiveInner>,
    /// One rebuild at a time.
    pub(crate) rebuild_lock: Mutex<()>,
}

#[derive(Debug)]
struct LiveInner {
    tree: TicTacTree,
    delta: Option<TicTacTree>,
}

impl LiveTree {
    /// An empty tree of `size`.
    pub(crate) fn new(size: TreeSize) -> LiveTree {
        LiveTree {
            inner: Mutex::new(LiveInner {
                tree: TicTacTree::new(size),
                delta: None,
            }),
            rebuild_lock: Mutex::new(()),
        }
    }

    pub(crate) fn size(&self) -> TreeSize {
        self.inner.lock().tree.size()
    }

    /// Applies one change (old and new object hash, `None` = absent).
    pub(crate) fn apply(&self, object_key: &[u8], old: Option<u64>, new: Option<u64>) {
        let mut g = self.inner.lock();
        g.tree.replace_ledger_key(object_key, old, new);
        if let Some(d) = g.delta.as_mut() {
            d.replace_ledger_key(object_key, old, new);
        }
    }

    /// A copy of the current tree.
    pub(crate) fn copy(&self) -> TicTacTree {
        self.inner.lock().tree.clone()
    }

    /// Starts recording changes for a rebuild.
    pub(crate) fn begin_rebuild(&self) {
        let mut g = self.inner.lock();
        let size = g.tree.size();
        g.delta = Some(TicTacTree::new(size));
    }

    /// Installs `rebuilt` (the tree of the snapshot) plus the changes since.
    pub(crate) fn finish_rebuild(&self, mut rebuilt: TicTacTree) -> Result<()> {
        let mut g = self.inner.lock();
        if let Some(d) = g.delta.take() {
            rebuilt.merge(&d)?;
        }
        g.tree = rebuilt;
        Ok(())
    }

    /// Stops recording changes (a failed rebuild).
    pub(crate) fn abort_rebuild(&self) {
        self.inner.lock().delta = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};

    #[test]
    fn sizes_match_the_reference() {
        let segs: Vec<u32> = TreeSize::ALL.iter().map(|s| s.segments()).collect();
        assert_eq!(segs, [4096, 16384, 65536, 262_144, 1_048_576, 4_194_304]);
        for s in TreeSize::ALL {
            assert_eq!(TreeSize::from_byte(s.to_byte()), Some(s));
            assert_eq!(TreeSize::from_name(s.name()), Some(s));
            assert!(s.segments().is_power_of_two());
        }
        assert_eq!(TreeSize::from_byte(6), None);
    }

    #[test]
    fn low_16_bits_of_segments_are_shared_by_all_sizes() {
        for i in 0..200u32 {
            let k = format!("k{i}");
            let big = segment_of(b"b", k.as_bytes(), TreeSize::XLarge);
            for s in TreeSize::ALL {
                let seg = segment_of(b"b", k.as_bytes(), s);
                assert_eq!(seg, big & (s.segments() - 1));
                assert_eq!(
                    seg,
                    segment_of_ledger_key(&key::object(b"b", k.as_bytes()), s)
                );
            }
        }
    }

    #[test]
    fn order_independent_and_removable() {
        let mut rng = rand::rngs::StdRng::seed_from_u64(7);
        let items: Vec<(Vec<u8>, u64)> = (0..500)
            .map(|i| (format!("key{i}").into_bytes(), rng.gen()))
            .collect();
        let mut a = TicTacTree::new(TreeSize::XXSmall);
        let mut b = TicTacTree::new(TreeSize::XXSmall);
        for (k, h) in &items {
            a.add(b"bkt", k, *h);
        }
        for (k, h) in items.iter().rev() {
            b.add(b"bkt", k, *h);
        }
        assert_eq!(a, b);
        assert_eq!(a.root(), b.root());
        for (k, h) in &items {
            a.remove(b"bkt", k, *h);
        }
        assert_eq!(a, TicTacTree::new(TreeSize::XXSmall));
        // Level 1 is the XOR of its branch.
        for (id, branch) in b.branches(&[0, 3, 15]) {
            let x = branch.iter().fold(0u32, |acc, h| acc ^ h);
            assert_eq!(x, b.level1()[id as usize]);
        }
    }

    #[test]
    fn dirty_segment_of_a_changed_key() {
        let mut a = TicTacTree::new(TreeSize::Small);
        for i in 0..1000u64 {
            a.add(b"b", format!("k{i}").as_bytes(), i);
        }
        let mut b = a.clone();
        b.replace(b"b", b"k42", Some(42), Some(4242));
        let dirty = a.dirty_segments(&b).unwrap();
        assert_eq!(dirty, vec![segment_of(b"b", b"k42", TreeSize::Small)]);
        assert_ne!(a.root(), b.root());
        let segs = b.segments(&dirty);
        assert_eq!(segs.len(), 1);
        assert!(a
            .dirty_segments(&TicTacTree::new(TreeSize::Medium))
            .is_err());
    }

    #[test]
    fn export_import_round_trip_and_damage() {
        let mut t = TicTacTree::new(TreeSize::XXSmall);
        for i in 0..100u64 {
            t.add(b"b", format!("k{i}").as_bytes(), i * 31);
        }
        let bytes = t.export();
        assert_eq!(TicTacTree::import(&bytes).unwrap(), t);
        let mut rng = rand::rngs::StdRng::seed_from_u64(3);
        for _ in 0..200 {
            let mut bad = bytes.clone();
            let i = rng.gen_range(0..bad.len());
            bad[i] ^= 1 << rng.gen_range(0..8);
            assert!(TicTacTree::import(&bad).is_err());
        }
        for n in [0, 4, 10, bytes.len() - 1] {
            assert!(TicTacTree::import(&bytes[..n]).is_err());
        }
    }

    /// Found by the fuzzer: a tree whose reserved header bytes are not zero
    /// (with a checksum that matches) must be refused, or it would import
    /// and export to different bytes.
    #[test]
    fn import_refuses_nonzero_reserved_bytes() {
        let bytes = TicTacTree::new(TreeSize::XXSmall).export();
        let body_len = bytes.len() - 4;
        for i in EXPORT_HEADER_BYTES - 3..EXPORT_HEADER_BYTES {
            let mut bad = bytes[..body_len].to_vec();
            bad[i] = 1;
            let c = crc(&bad);
            bad.extend_from_slice(&c.to_le_bytes());
            let err = TicTacTree::import(&bad).unwrap_err().to_string();
            assert!(err.contains("reserved bytes"), "{err}");
        }
    }

    #[test]
    fn live_tree_rebuild_keeps_concurrent_changes() {
        let live = LiveTree::new(TreeSize::XXSmall);
        live.apply(b"oa", None, Some(1));
        live.begin_rebuild();
        live.apply(b"ob", None, Some(2));
        let mut rebuilt = TicTacTree::new(TreeSize::XXSmall);
        rebuilt.toggle_ledger_key(b"oa", 1);
        live.finish_rebuild(rebuilt).unwrap();
        let mut want = TicTacTree::new(TreeSize::XXSmall);
        want.toggle_ledger_key(b"oa", 1);
        want.toggle_ledger_key(b"ob", 2);
        assert_eq!(live.copy(), want);
    }
}
