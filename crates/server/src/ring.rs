//! The consistent-hashing ring: `ring_size` equal partitions of the 2^160
//! SHA-1 space, as `riak_core`'s `chash`.
//!
//! The key hash is Riak's `chash_std_keyfun`: SHA-1 of
//! `term_to_binary({Bucket, Key})` for the default bucket type (and of
//! `term_to_binary({{Type, Bucket}, Key})` for other types), built here byte
//! for byte (`131, 104, 2, 109, len:u32, bucket, 109, len:u32, key`). The
//! first primary is the partition after the one the hash falls in
//! (`chash:successors`), the preference list the `n_val` consecutive
//! partitions from there, wrapping.

use sha1::{Digest, Sha1};

/// Erlang external-term encoding of a binary.
fn ext_binary(out: &mut Vec<u8>, b: &[u8]) {
    out.push(109);
    out.extend_from_slice(&(b.len() as u32).to_be_bytes());
    out.extend_from_slice(b);
}

/// SHA-1 of `term_to_binary` of the bucket/key tuple.
pub fn key_hash(bucket_type: Option<&[u8]>, bucket: &[u8], key: &[u8]) -> [u8; 20] {
    let mut t = vec![131u8, 104, 2];
    match bucket_type {
        None => ext_binary(&mut t, bucket),
        Some(ty) => {
            t.extend_from_slice(&[104, 2]);
            ext_binary(&mut t, ty);
            ext_binary(&mut t, bucket);
        }
    }
    ext_binary(&mut t, key);
    Sha1::digest(&t).into()
}

/// A ring of `size` partitions (a power of two, 1..=1024).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ring {
    size: u32,
}

impl Ring {
    /// A ring; `None` if `size` is not a power of two in 1..=1024.
    pub fn new(size: u32) -> Option<Ring> {
        (size.is_power_of_two() && size <= 1024).then_some(Ring { size })
    }

    /// Number of partitions.
    pub fn size(&self) -> u32 {
        self.size
    }

    /// The position (0-based) of the first primary partition of a hash.
    pub fn first_primary(&self, hash: &[u8; 20]) -> u32 {
        let top = u32::from_be_bytes([hash[0], hash[1], hash[2], hash[3]]);
        let bits = self.size.trailing_zeros();
        let pos = if bits == 0 { 0 } else { top >> (32 - bits) };
        (pos + 1) % self.size
    }

    /// The `n` partitions holding a key (fewer if `n` > ring size).
    pub fn preflist(&self, hash: &[u8; 20], n: u32) -> Vec<u32> {
        let first = self.first_primary(hash);
        (0..n.min(self.size))
            .map(|i| (first + i) % self.size)
            .collect()
    }

    /// Partitions that together hold a copy of every key stored with `n`
    /// replicas: every `n`-th partition.
    pub fn covering_set(&self, n: u32) -> Vec<u32> {
        let step = n.clamp(1, self.size);
        (0..self.size).step_by(step as usize).collect()
    }
}

/// How a vnode incarnation's vclock actor is formed (recorded in the
/// vnode's status file, [`crate::vnode_id`], so an incarnation keeps its
/// actor across clean restarts).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ActorForm {
    /// `<node name>/<partition>/<incarnation id, 16 hex digits>` as text
    /// (30–45 bytes): incarnations started by builds before 2026-12-07.
    Named,
    /// 8 bytes: the xxh3-64 (big-endian) of the named form, as Riak's
    /// 8-byte vnode ids. An object's clock holds one entry per actor that
    /// coordinated a write and each sibling's dot names one, so the actor
    /// is written 2–4 times into every stored object: 8 bytes instead of
    /// the named form's 37 saved 65–68 bytes a replica of a 1 KB insert,
    /// node-level WA 1.34 against 1.42 (docs/benchmarks, 2026-12-07 05:09). The
    /// node name and partition stay in the hash, so two vnodes' actors
    /// differ even if their random ids met (a copied data directory);
    /// two actors in one clock collide with probability ~2^-64.
    Short,
}

/// A vnode incarnation: its random id and how its actor is formed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Incarnation {
    /// The random id (new whenever the vnode may have forgotten an event).
    pub id: u64,
    /// The actor's form.
    pub form: ActorForm,
}

/// The vclock actor of incarnation `inc` of `node`'s vnode of `partition`
/// (see [`ActorForm`]; [`crate::vnode_id`] for when the id changes).
/// Nothing reads into an actor: clocks, dots and CRDTs compare its bytes.
pub fn actor(node: &str, partition: u32, inc: Incarnation) -> Vec<u8> {
    let named = format!("{node}/{partition}/{:016x}", inc.id).into_bytes();
    match inc.form {
        ActorForm::Named => named,
        ActorForm::Short => xxhash_rust::xxh3::xxh3_64(&named).to_be_bytes().to_vec(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn actors_are_stable_and_short_ones_name_node_and_partition() {
        let inc = |id, form| Incarnation { id, form };
        let named = actor("n@h", 7, inc(0xab, ActorForm::Named));
        assert_eq!(named, b"n@h/7/00000000000000ab".to_vec());
        let short = actor("n@h", 7, inc(0xab, ActorForm::Short));
        assert_eq!(short.len(), 8);
        // The same incarnation always gives the same actor (a clean
        // restart keeps counting on it) ...
        assert_eq!(short, actor("n@h", 7, inc(0xab, ActorForm::Short)));
        // ... and another node, partition or id another one.
        for other in [
            actor("m@h", 7, inc(0xab, ActorForm::Short)),
            actor("n@h", 8, inc(0xab, ActorForm::Short)),
            actor("n@h", 7, inc(0xac, ActorForm::Short)),
        ] {
            assert_ne!(short, other);
        }
    }

    #[test]
    fn preflist_wraps_and_covers() {
        let ring = Ring::new(8).unwrap_or(Ring { size: 8 });
        let mut h = [0xFFu8; 20];
        assert_eq!(ring.first_primary(&h), 0);
        h[0] = 0;
        assert_eq!(ring.preflist(&h, 3), vec![1, 2, 3]);
        h[0] = 0xC0; // partition 6
        assert_eq!(ring.preflist(&h, 3), vec![7, 0, 1]);
        for first in 0..8 {
            let cover = ring.covering_set(3);
            assert!((0..3).any(|i| cover.contains(&((first + i) % 8))));
        }
        assert!(Ring::new(6).is_none());
        // term_to_binary({<<"b">>,<<"k">>}) is hashed
        let t = [131u8, 104, 2, 109, 0, 0, 0, 1, b'b', 109, 0, 0, 0, 1, b'k'];
        let want: [u8; 20] = Sha1::digest(t).into();
        assert_eq!(key_hash(None, b"b", b"k"), want);
    }
}
