//! Bloom filters over 64-bit key hashes.
//!
//! Each SST file carries one filter built from the hashes
//! ([`crate::key::hash`]) of its object keys, so a lookup of a key the file
//! does not hold usually costs no disk read.
//!
//! The filter is a plain bit array of `m` bits (a multiple of 64, at least 64)
//! probed `k` times per key with double hashing: `h1` is the low 32 bits of the
//! key hash, `h2` the high 32 bits, and probe `i` (0-based) tests bit
//! `(h1 + i * h2) mod m`. `k` is `round(0.69 * bits_per_key)` clamped to
//! `1..=16`; at the default 8 bits per key (`k = 6`) about 2% of absent keys
//! pass the filter.
//!
//! Encoding (little-endian):
//!
//! ```text
//! bloom := k:u32 bit_count:u64 word*      (bit_count / 64 words)
//! word  := u64; bit b of the filter is bit (b mod 64) of word (b / 64)
//! ```

use crate::codec::{DecodeError, Encode, Reader};

/// Default bits per key: about one byte per key, about 2% false positives.
pub const BITS_PER_KEY_DEFAULT: usize = 8;

/// Largest bits per key [`Bloom::build`] uses; larger requests are clamped.
pub const BITS_PER_KEY_MAX: usize = 64;

/// Largest number of probes per key.
pub const K_MAX: u32 = 16;

/// Smallest filter, in bits.
const MIN_BITS: u64 = 64;

/// Fixed header of the encoding: k and the bit count.
const HEADER_BYTES: usize = 4 + 8;

/// An immutable bloom filter over 64-bit hashes.
#[derive(Clone, PartialEq, Eq)]
pub struct Bloom {
    k: u32,
    words: Vec<u64>,
}

impl std::fmt::Debug for Bloom {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bloom")
            .field("k", &self.k)
            .field("bits", &self.bit_count())
            .finish()
    }
}

impl Bloom {
    /// Number of probes used for `bits_per_key` (≈ 0.69 × bits, in `1..=16`).
    pub fn k_for(bits_per_key: usize) -> u32 {
        let bits = bits_per_key.clamp(1, BITS_PER_KEY_MAX) as u32;
        ((bits * 69 + 50) / 100).clamp(1, K_MAX)
    }

    /// Builds a filter holding every hash in `hashes` with `bits_per_key`
    /// bits per hash (clamped to `1..=64`). An empty `hashes` gives a
    /// 64-bit filter that contains nothing.
    pub fn build(hashes: &[u64], bits_per_key: usize) -> Bloom {
        let bits_per_key = bits_per_key.clamp(1, BITS_PER_KEY_MAX);
        let k = Self::k_for(bits_per_key);
        let bits = (hashes.len() as u64)
            .saturating_mul(bits_per_key as u64)
            .max(MIN_BITS);
        let word_count = usize::try_from(bits.div_ceil(64)).unwrap_or(usize::MAX);
        let mut bloom = Bloom {
            k,
            words: vec![0; word_count],
        };
        let m = bloom.bit_count();
        for &h in hashes {
            for bit in probes(h, k, m) {
                // `bit < m = 64 * words.len()`, so the word exists.
                if let Some(w) = bloom.words.get_mut((bit / 64) as usize) {
                    *w |= 1 << (bit % 64);
                }
            }
        }
        debug_assert!(hashes.iter().all(|&h| bloom.may_contain(h)));
        bloom
    }

    /// False if `hash` was certainly not added; true if it may have been.
    pub fn may_contain(&self, hash: u64) -> bool {
        let m = self.bit_count();
        probes(hash, self.k, m).all(|bit| {
            self.words
                .get((bit / 64) as usize)
                .is_some_and(|w| w & (1 << (bit % 64)) != 0)
        })
    }

    /// Number of probes per key.
    pub fn k(&self) -> u32 {
        self.k
    }

    /// Size of the filter in bits (a multiple of 64).
    pub fn bit_count(&self) -> u64 {
        self.words.len() as u64 * 64
    }

    /// Length of [`Bloom::to_bytes`] in bytes.
    pub fn encoded_len(&self) -> usize {
        HEADER_BYTES + self.words.len() * 8
    }

    /// Encodes the filter (see the module documentation for the layout).
    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.encoded_len());
        out.put_u32(self.k);
        out.put_u64(self.bit_count());
        for &w in &self.words {
            out.put_u64(w);
        }
        debug_assert_eq!(out.len(), self.encoded_len());
        out
    }

    /// Decodes a filter written by [`Bloom::to_bytes`]. The buffer must hold
    /// exactly one filter. Never panics and never allocates more than the
    /// input's size on bad input.
    pub fn from_bytes(bytes: &[u8]) -> Result<Bloom, DecodeError> {
        let mut r = Reader::new(bytes);
        let k = r.u32()?;
        if !(1..=K_MAX).contains(&k) {
            return Err(DecodeError(format!(
                "bloom: k = {k} is outside 1..={K_MAX}"
            )));
        }
        let bits = r.u64()?;
        if bits < MIN_BITS || bits % 64 != 0 {
            return Err(DecodeError(format!(
                "bloom: bit count {bits} is not a positive multiple of 64"
            )));
        }
        let word_count = bits / 64;
        if Some(r.remaining() as u64) != word_count.checked_mul(8) {
            return Err(DecodeError(format!(
                "bloom: {bits} bits need {} bytes, have {}",
                word_count.saturating_mul(8),
                r.remaining()
            )));
        }
        let mut words = Vec::with_capacity(r.remaining() / 8);
        while !r.is_empty() {
            words.push(r.u64()?);
        }
        Ok(Bloom { k, words })
    }
}

/// The `k` bit positions probed for `hash` in a filter of `m` bits.
fn probes(hash: u64, k: u32, m: u64) -> impl Iterator<Item = u64> {
    debug_assert!(m >= MIN_BITS);
    let h1 = hash & 0xFFFF_FFFF;
    let h2 = hash >> 32;
    // h1 + 15 * h2 < 2^36: no overflow.
    (0..u64::from(k)).map(move |i| (h1 + i * h2) % m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use rand::{Rng, SeedableRng};

    fn random_hashes(seed: u64, n: usize) -> Vec<u64> {
        let mut rng = rand::rngs::StdRng::seed_from_u64(seed);
        (0..n).map(|_| rng.gen()).collect()
    }

    #[test]
    fn k_follows_bits_per_key() {
        assert_eq!(Bloom::k_for(0), 1);
        assert_eq!(Bloom::k_for(1), 1);
        assert_eq!(Bloom::k_for(8), 6);
        assert_eq!(Bloom::k_for(10), 7);
        assert_eq!(Bloom::k_for(64), K_MAX);
        assert_eq!(Bloom::k_for(1000), K_MAX);
    }

    #[test]
    fn no_false_negatives_and_low_fpr() {
        let keys = random_hashes(1, 100_000);
        let bloom = Bloom::build(&keys, BITS_PER_KEY_DEFAULT);
        assert!(keys.iter().all(|&h| bloom.may_contain(h)));
        let probes = random_hashes(2, 100_000);
        let fp = probes.iter().filter(|&&h| bloom.may_contain(h)).count();
        let fpr = fp as f64 / probes.len() as f64;
        assert!(fpr <= 0.03, "false-positive rate {fpr}");
        // About one byte per key.
        assert_eq!(bloom.bit_count(), 800_000);
    }

    #[test]
    fn real_key_hashes() {
        let keys: Vec<u64> = (0..10_000u32)
            .map(|i| crate::key::hash(&crate::key::object(b"bucket", &i.to_be_bytes())))
            .collect();
        let bloom = Bloom::build(&keys, 8);
        assert!(keys.iter().all(|&h| bloom.may_contain(h)));
        let fp = (10_000..110_000u32)
            .filter(|i| {
                bloom.may_contain(crate::key::hash(&crate::key::object(
                    b"bucket",
                    &i.to_be_bytes(),
                )))
            })
            .count();
        assert!(fp <= 3_000, "{fp} false positives in 100000");
    }

    #[test]
    fn empty_filter_contains_nothing() {
        let bloom = Bloom::build(&[], 8);
        assert_eq!(bloom.bit_count(), 64);
        assert!(random_hashes(3, 1000)
            .iter()
            .all(|&h| !bloom.may_contain(h)));
        let back = Bloom::from_bytes(&bloom.to_bytes()).unwrap();
        assert_eq!(back, bloom);
    }

    #[test]
    fn round_trip() {
        let keys = random_hashes(4, 1000);
        let bloom = Bloom::build(&keys, 10);
        let bytes = bloom.to_bytes();
        assert_eq!(bytes.len(), bloom.encoded_len());
        let back = Bloom::from_bytes(&bytes).unwrap();
        assert_eq!(back, bloom);
        assert!(keys.iter().all(|&h| back.may_contain(h)));
    }

    #[test]
    fn rejects_bad_encodings() {
        let good = Bloom::build(&random_hashes(5, 100), 8).to_bytes();
        assert!(Bloom::from_bytes(&good[..good.len() - 1]).is_err());
        let mut long = good.clone();
        long.push(0);
        assert!(Bloom::from_bytes(&long).is_err());
        let mut bad_k = good.clone();
        bad_k[0] = 0;
        assert!(Bloom::from_bytes(&bad_k).is_err());
        let mut bad_bits = good.clone();
        bad_bits[4] = 7;
        assert!(Bloom::from_bytes(&bad_bits).is_err());
        let mut huge = good;
        huge[4..12].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(Bloom::from_bytes(&huge).is_err());
        assert!(Bloom::from_bytes(&[]).is_err());
    }

    proptest! {
        #[test]
        fn from_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            if let Ok(b) = Bloom::from_bytes(&bytes) {
                let _ = b.may_contain(42);
            }
        }

        #[test]
        fn never_a_false_negative(hashes in proptest::collection::vec(any::<u64>(), 0..200),
                                  bits in 1usize..20) {
            let bloom = Bloom::build(&hashes, bits);
            for h in hashes {
                prop_assert!(bloom.may_contain(h));
            }
        }
    }
}
