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

/// The vclock actor of a vnode incarnation:
/// `<node name>/<partition>/<incarnation id, 16 hex digits>` (see
/// [`crate::vnode_id`] for when the id changes).
pub fn actor(node: &str, partition: u32, incarnation: u64) -> Vec<u8> {
    format!("{node}/{partition}/{incarnation:016x}").into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

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
