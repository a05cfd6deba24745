//! A vnode's cached tictac trees for anti-entropy: one tree per (preference
//! list, n_val) the vnode serves — the preference list named by its first
//! partition — updated on every write and reap from the key's previous and
//! new state hash, never by a rescan. An exchange of two replicas in sync
//! compares the trees' roots (one hash per branch) and stops there.
//!
//! A tree has `width × 256` segments (`aae_tree_size`, default `xsmall`:
//! 64 × 256); a key sits in `segment_of(bucket, key)`; a segment is the XOR
//! of its keys' hashes, a branch the XOR of its 256 segments. A key's hash
//! mixes the key with its state ([`key_state_hash`]), so replicas agree on
//! a segment only if they hold the same versions of the same keys.
//!
//! Trees are built, and rebuilt on a schedule, by a sweep of the vnode in
//! small steps (`vnode::aae_rebuild`, driven by `aae::rebuild`),
//! then kept up to date. They are written to
//! `<data_dir>/vnodes/<partition>.aae` when the vnode shuts down cleanly and
//! read back (then the file is deleted) when it starts; a missing or
//! damaged file, a crash, or a backend directory that is not the one the
//! trees were saved beside (restored from a backup, recreated) means a
//! rebuild. File layout: `docs/formats.md` "AAE tree file".
//!
//! Known gap: a bucket whose `n_val` changes keeps its keys in the trees of
//! the old `n_val` until the trees are rebuilt (as Riak's hashtrees).

use basalt_backend::{segment_of, TreeSize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

const MAGIC: &[u8; 8] = b"BSLTAAE2";

/// Bytes before the trees: magic, width, count, built_at, store_id.
const HEADER: usize = 8 + 4 + 4 + 8 + 8;

/// Segments per branch.
const BRANCH: usize = 256;

/// The hash a key contributes to its segment: `xxh3(len|bucket, len|key,
/// len|state_hash)`.
pub fn key_state_hash(bucket: &[u8], key: &[u8], state_hash: u64) -> u64 {
    let state = state_hash.to_be_bytes();
    let mut buf = Vec::with_capacity(bucket.len() + key.len() + 24);
    for part in [bucket, key, &state[..]] {
        buf.extend_from_slice(&(part.len() as u32).to_be_bytes());
        buf.extend_from_slice(part);
    }
    xxhash_rust::xxh3::xxh3_64(&buf)
}

/// One tree: segment hashes and, per branch, the XOR of its segments.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Tree {
    segments: Vec<u64>,
    branches: Vec<u64>,
}

impl Tree {
    fn new(size: TreeSize) -> Tree {
        Tree {
            segments: vec![0; size.segments() as usize],
            branches: vec![0; size.width() as usize],
        }
    }

    fn xor(&mut self, segment: u32, h: u64) {
        let s = segment as usize;
        debug_assert!(s < self.segments.len());
        if let Some(slot) = self.segments.get_mut(s) {
            *slot ^= h;
        }
        if let Some(b) = self.branches.get_mut(s / BRANCH) {
            *b ^= h;
        }
    }

    /// The root: one hash per branch.
    pub fn root(&self) -> &[u64] {
        &self.branches
    }

    /// The 256 segment hashes of `branch` (empty if out of range).
    pub fn branch(&self, branch: u32) -> &[u64] {
        let start = branch as usize * BRANCH;
        self.segments.get(start..start + BRANCH).unwrap_or(&[])
    }
}

/// Every tree of one vnode; see the module docs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AaeTrees {
    size: TreeSize,
    trees: BTreeMap<(u32, u32), Tree>,
    /// When the sweep that built them finished (Unix seconds; 0 = unknown).
    built_at: u64,
}

impl AaeTrees {
    /// No keys yet, trees of `size`.
    pub fn new(size: TreeSize) -> AaeTrees {
        AaeTrees {
            size,
            trees: BTreeMap::new(),
            built_at: 0,
        }
    }

    /// When the sweep that built these trees finished (Unix seconds).
    pub fn built_at(&self) -> u64 {
        self.built_at
    }

    /// Records when the sweep that built these trees finished.
    pub fn set_built_at(&mut self, secs: u64) {
        self.built_at = secs;
    }

    /// The tree size.
    pub fn size(&self) -> TreeSize {
        self.size
    }

    /// A key's state changed from `old` to `new` (key-state hashes, see
    /// [`key_state_hash`]; `None` = absent) in the preference list `first`
    /// with `n_val` replicas.
    pub fn apply(
        &mut self,
        first: u32,
        n_val: u32,
        bucket: &[u8],
        key: &[u8],
        old: Option<u64>,
        new: Option<u64>,
    ) {
        if old == new {
            return;
        }
        let size = self.size;
        let seg = segment_of(bucket, key, size);
        let tree = self
            .trees
            .entry((first, n_val))
            .or_insert_with(|| Tree::new(size));
        for h in [old, new].into_iter().flatten() {
            tree.xor(seg, h);
        }
    }

    /// The tree of (`first`, `n_val`), if any key was ever in it.
    pub fn tree(&self, first: u32, n_val: u32) -> Option<&Tree> {
        self.trees.get(&(first, n_val))
    }

    /// The (first, n_val) pairs that have a tree.
    pub fn keys(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.trees.keys().copied()
    }

    /// The root of (`first`, `n_val`) (all zeros for an empty tree).
    pub fn root(&self, first: u32, n_val: u32) -> Vec<u64> {
        self.tree(first, n_val).map_or_else(
            || vec![0; self.size.width() as usize],
            |t| t.root().to_vec(),
        )
    }

    /// The segments of each of `branches` of (`first`, `n_val`).
    pub fn branches(&self, first: u32, n_val: u32, branches: &[u32]) -> Vec<(u32, Vec<u64>)> {
        branches
            .iter()
            .filter(|b| **b < self.size.width())
            .map(|&b| {
                let segs = self
                    .tree(first, n_val)
                    .map_or_else(|| vec![0; BRANCH], |t| t.branch(b).to_vec());
                (b, segs)
            })
            .collect()
    }

    /// Bytes the trees take in memory.
    pub fn memory_bytes(&self) -> usize {
        let per = (self.size.segments() + self.size.width()) as usize * 8;
        self.trees.len() * per
    }

    /// The file form, bound to the backend directory `store_id` (see
    /// [`store_id`]): `docs/formats.md` "AAE tree file".
    pub fn encode(&self, store_id: u64) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER + 4 + self.memory_bytes());
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&self.size.width().to_be_bytes());
        out.extend_from_slice(&(self.trees.len() as u32).to_be_bytes());
        out.extend_from_slice(&self.built_at.to_be_bytes());
        out.extend_from_slice(&store_id.to_be_bytes());
        for ((first, n), t) in &self.trees {
            out.extend_from_slice(&first.to_be_bytes());
            out.extend_from_slice(&n.to_be_bytes());
            for s in &t.segments {
                out.extend_from_slice(&s.to_be_bytes());
            }
        }
        let crc = crc32c::crc32c(&out);
        out.extend_from_slice(&crc.to_be_bytes());
        out
    }

    /// Parses [`Self::encode`]'s bytes; `None` if damaged (CRC, magic,
    /// lengths), of another tree size than `size` or saved beside another
    /// backend directory than `store_id`.
    pub fn decode(bytes: &[u8], size: TreeSize, store_id: u64) -> Option<AaeTrees> {
        let (body, crc) = bytes.split_at_checked(bytes.len().checked_sub(4)?)?;
        if crc32c::crc32c(body).to_be_bytes() != crc {
            return None;
        }
        let rest = body.strip_prefix(MAGIC)?;
        let u32_at = |b: &[u8], i: usize| -> Option<u32> {
            Some(u32::from_be_bytes(b.get(i..i + 4)?.try_into().ok()?))
        };
        if u32_at(rest, 0)? != size.width() {
            return None;
        }
        let count = u32_at(rest, 4)? as usize;
        let u64_at = |b: &[u8], i: usize| -> Option<u64> {
            Some(u64::from_be_bytes(b.get(i..i + 8)?.try_into().ok()?))
        };
        let built_at = u64_at(rest, 8)?;
        if u64_at(rest, 16)? != store_id {
            return None;
        }
        let segs = size.segments() as usize;
        let per = 8 + segs * 8;
        let entries = rest.get(HEADER - MAGIC.len()..)?;
        if entries.len() != count.checked_mul(per)? {
            return None;
        }
        let mut trees = BTreeMap::new();
        for e in entries.chunks_exact(per) {
            let first = u32_at(e, 0)?;
            let n = u32_at(e, 4)?;
            let mut t = Tree::new(size);
            for (i, c) in e[8..].chunks_exact(8).enumerate() {
                let h = u64::from_be_bytes(c.try_into().ok()?);
                t.segments[i] = h;
                t.branches[i / BRANCH] ^= h;
            }
            trees.insert((first, n), t);
        }
        Some(AaeTrees {
            size,
            trees,
            built_at,
        })
    }
}

/// The tree file of the vnode whose backend lives in `dir`.
pub fn tree_path(dir: &Path) -> PathBuf {
    let mut name = dir.file_name().unwrap_or_default().to_os_string();
    name.push(".aae");
    dir.with_file_name(name)
}

/// What binds a tree file to the backend directory `dir` it was saved
/// beside: the directory's inode number, which changes when the directory
/// is deleted and created again or replaced by a copy (a restored backup);
/// 0 if it cannot be read.
pub fn store_id(dir: &Path) -> u64 {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir).map_or(0, |m| m.ino())
}

/// Writes the trees of a vnode that shut down cleanly.
pub fn save(dir: &Path, trees: &AaeTrees) -> std::io::Result<()> {
    crate::fsutil::atomic_write(&tree_path(dir), &trees.encode(store_id(dir)))
}

/// Reads and deletes the tree file of the vnode in `dir` (so a crash from
/// now on leaves no file to trust); `None` if it is missing or damaged
/// (logged).
pub fn take(dir: &Path, size: TreeSize) -> Option<AaeTrees> {
    let path = tree_path(dir);
    let bytes = match std::fs::read(&path) {
        Ok(b) => b,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return None,
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "reading anti-entropy trees; they will be rebuilt");
            return None;
        }
    };
    if let Err(e) = remove(dir) {
        tracing::warn!(path = %path.display(), error = %e, "removing the anti-entropy tree file");
    }
    let trees = AaeTrees::decode(&bytes, size, store_id(dir));
    if trees.is_none() {
        tracing::warn!(path = %path.display(), "anti-entropy tree file is damaged, of another size or saved beside another backend directory; the trees will be rebuilt");
    }
    trees
}

/// Deletes the tree file of the vnode in `dir` (absent is fine).
pub fn remove(dir: &Path) -> std::io::Result<()> {
    match std::fs::remove_file(tree_path(dir)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn apply_is_an_xor_and_branches_follow_segments() {
        let mut t = AaeTrees::new(TreeSize::XXSmall);
        t.apply(3, 3, b"b", b"k", None, Some(7));
        let root = t.root(3, 3);
        assert_eq!(root.iter().filter(|h| **h != 0).count(), 1);
        t.apply(3, 3, b"b", b"k", Some(7), Some(9));
        t.apply(3, 3, b"b", b"k", Some(9), None);
        assert!(t.root(3, 3).iter().all(|h| *h == 0));
        assert!(t.root(4, 3).iter().all(|h| *h == 0));
    }

    #[test]
    fn the_file_form_round_trips_and_damage_is_refused() {
        let mut t = AaeTrees::new(TreeSize::XXSmall);
        for i in 0..50u64 {
            t.apply(
                (i % 3) as u32,
                3,
                b"b",
                &i.to_be_bytes(),
                None,
                Some(i * 31 + 1),
            );
        }
        t.set_built_at(1_700_000_000);
        let bytes = t.encode(42);
        assert_eq!(
            AaeTrees::decode(&bytes, TreeSize::XXSmall, 42),
            Some(t.clone())
        );
        assert_eq!(AaeTrees::decode(&bytes, TreeSize::XSmall, 42), None);
        assert_eq!(
            AaeTrees::decode(&bytes, TreeSize::XXSmall, 43),
            None,
            "another backend directory"
        );
        for i in [0, 9, bytes.len() / 2, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[i] ^= 0x40;
            assert_eq!(
                AaeTrees::decode(&bad, TreeSize::XXSmall, 42),
                None,
                "flip at {i}"
            );
        }
        assert_eq!(
            AaeTrees::decode(&bytes[..bytes.len() - 3], TreeSize::XXSmall, 42),
            None
        );
        assert_eq!(AaeTrees::decode(&[], TreeSize::XXSmall, 42), None);
    }
}
