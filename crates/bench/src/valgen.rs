//! Value generators with basho_bench's semantics (reference §2).
//!
//! Random-byte values are slices at a random offset of a per-run pool
//! (`value_generator_source_size`, 96 MiB by default, capped at the size
//! the spec can need), so generating a value costs no randomness beyond the
//! offset. `semi_compressible` uses a pool of 8 KiB blocks, each 4 KiB of
//! random bytes followed by 4 KiB of text picked from 16 random 128-character
//! printable strings, so values compress to roughly 2/3.

use crate::term::Term;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use std::sync::Arc;

/// Names accepted in `value_generator`.
pub const VALID: &[&str] = &[
    "fixed_bin",
    "fixed_char",
    "exponential_bin",
    "uniform_bin",
    "semi_compressible",
];

/// A parsed `value_generator` value.
#[derive(Debug, Clone, PartialEq)]
pub enum ValGenSpec {
    /// `{fixed_bin, N}`: N random bytes.
    FixedBin(usize),
    /// `{fixed_bin, N, Byte}`: N copies of Byte.
    FixedBinByte(usize, u8),
    /// `{fixed_char, N}`: N random printable characters (32..126).
    FixedChar(usize),
    /// `{exponential_bin, Min, Mean}`: size `Min + trunc(Exp(Mean))`.
    ExponentialBin {
        /// Minimum size.
        min: usize,
        /// Mean of the exponential part.
        mean: f64,
    },
    /// `{uniform_bin, Min, Max}`: size `Min + uniform(Max − Min)`.
    UniformBin {
        /// Lower bound (exclusive, as basho_bench).
        min: usize,
        /// Upper bound (inclusive).
        max: usize,
    },
    /// `{semi_compressible, Min, Mean, XLMult, XLProb}`.
    SemiCompressible {
        /// Minimum size of a normal value.
        min: usize,
        /// Mean of the exponential part of a normal value.
        mean: f64,
        /// Multiplier of both for an extra-large value.
        xl_mult: f64,
        /// Probability of an extra-large value.
        xl_prob: f64,
    },
}

/// A bad `value_generator`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("value_generator {spec}: {message}")]
pub struct ValGenError {
    /// The spec as written.
    pub spec: String,
    /// What is wrong.
    pub message: String,
}

fn bad(spec: &Term, message: impl Into<String>) -> ValGenError {
    ValGenError {
        spec: spec.to_string(),
        message: message.into(),
    }
}

fn size(spec: &Term, t: &Term, what: &str) -> Result<usize, ValGenError> {
    match t.as_int() {
        Some(i) if i >= 0 => Ok(i as usize),
        _ => Err(bad(
            spec,
            format!("{what} must be a non-negative integer, got {t}"),
        )),
    }
}

fn number(spec: &Term, t: &Term, what: &str) -> Result<f64, ValGenError> {
    match t.as_number() {
        Some(x) if x >= 0.0 && x.is_finite() => Ok(x),
        _ => Err(bad(
            spec,
            format!("{what} must be a non-negative number, got {t}"),
        )),
    }
}

impl ValGenSpec {
    /// Parses a `value_generator` term.
    pub fn from_term(t: &Term) -> Result<ValGenSpec, ValGenError> {
        let Term::Tuple(items) = t else {
            return Err(bad(
                t,
                format!(
                    "expected a tuple like {{fixed_bin, 100}}; valid: {}",
                    VALID.join(", ")
                ),
            ));
        };
        let Some(name) = items.first().and_then(Term::as_atom) else {
            return Err(bad(t, "the generator name must be an atom"));
        };
        let args = &items[1..];
        Ok(match (name, args) {
            ("fixed_bin", [n]) => ValGenSpec::FixedBin(size(t, n, "Size")?),
            ("fixed_bin", [n, b]) => {
                let b = b
                    .as_int()
                    .filter(|b| (0..=255).contains(b))
                    .ok_or_else(|| bad(t, "Byte must be 0..255"))?;
                ValGenSpec::FixedBinByte(size(t, n, "Size")?, b as u8)
            }
            ("fixed_char", [n]) => ValGenSpec::FixedChar(size(t, n, "Size")?),
            ("exponential_bin", [min, mean]) => ValGenSpec::ExponentialBin {
                min: size(t, min, "MinSize")?,
                mean: number(t, mean, "Mean")?,
            },
            ("uniform_bin", [min, max]) => {
                let (min, max) = (size(t, min, "MinSize")?, size(t, max, "MaxSize")?);
                if max <= min {
                    return Err(bad(t, "MaxSize must be greater than MinSize"));
                }
                ValGenSpec::UniformBin { min, max }
            }
            ("semi_compressible", [min, mean, mult, prob]) => {
                let xl_prob = number(t, prob, "XLProb")?;
                if xl_prob > 1.0 {
                    return Err(bad(t, "XLProb must be between 0 and 1"));
                }
                ValGenSpec::SemiCompressible {
                    min: size(t, min, "MinSize")?,
                    mean: number(t, mean, "Mean")?,
                    xl_mult: number(t, mult, "XLMult")?,
                    xl_prob,
                }
            }
            (n, _) if VALID.contains(&n) => {
                return Err(bad(t, format!("wrong number of arguments for `{n}`")))
            }
            (n, _) => {
                return Err(bad(
                    t,
                    format!("unknown value generator `{n}`; valid: {}", VALID.join(", ")),
                ))
            }
        })
    }

    /// True when values are slices of a source (basho_bench's
    /// `data_block`): `fixed_bin`, `exponential_bin`, `uniform_bin`; these
    /// are cut from `value_generator_blob_file` when one is given.
    pub fn slices_source(&self) -> bool {
        matches!(
            self,
            ValGenSpec::FixedBin(_)
                | ValGenSpec::ExponentialBin { .. }
                | ValGenSpec::UniformBin { .. }
        )
    }

    /// The mean value size in bytes (for the data-size estimate).
    pub fn mean_size(&self) -> f64 {
        match self {
            ValGenSpec::FixedBin(n) | ValGenSpec::FixedBinByte(n, _) | ValGenSpec::FixedChar(n) => {
                *n as f64
            }
            ValGenSpec::ExponentialBin { min, mean } => *min as f64 + mean,
            ValGenSpec::UniformBin { min, max } => (*min + *max + 1) as f64 / 2.0,
            ValGenSpec::SemiCompressible {
                min,
                mean,
                xl_mult,
                xl_prob,
            } => {
                let normal = *min as f64 + mean;
                (1.0 - xl_prob) * normal + xl_prob * xl_mult * normal
            }
        }
    }
}

/// The shared byte pool of a run (read-only, shared by all workers).
#[derive(Debug, Clone)]
pub struct ValuePool {
    bytes: Arc<Vec<u8>>,
}

impl ValuePool {
    /// Builds the pool for `spec`: at most `source_size` bytes, seeded.
    pub fn new(spec: &ValGenSpec, source_size: usize, seed: u64) -> ValuePool {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x5eed_9001);
        let want = match spec {
            ValGenSpec::FixedBinByte(n, b) => {
                return ValuePool {
                    bytes: Arc::new(vec![*b; *n]),
                }
            }
            // Enough for many distinct offsets of the largest likely value.
            ValGenSpec::FixedBin(n) | ValGenSpec::FixedChar(n) => n.saturating_mul(64),
            ValGenSpec::UniformBin { max, .. } => max.saturating_mul(64),
            ValGenSpec::ExponentialBin { min, mean } => (*min as f64 + mean * 10.0) as usize * 64,
            ValGenSpec::SemiCompressible {
                min, mean, xl_mult, ..
            } => ((*min as f64 + mean * 10.0) * xl_mult.max(1.0)) as usize * 16,
        };
        let len = want.clamp(1 << 20, source_size.max(1 << 20));
        let mut bytes = vec![0u8; len];
        match spec {
            ValGenSpec::FixedChar(_) => {
                for b in bytes.iter_mut() {
                    *b = rng.gen_range(32u8..=126);
                }
            }
            ValGenSpec::SemiCompressible { .. } => {
                let strings: Vec<Vec<u8>> = (0..16)
                    .map(|_| (0..128).map(|_| rng.gen_range(32u8..=126)).collect())
                    .collect();
                for block in bytes.chunks_mut(8192) {
                    let half = block.len().min(4096);
                    rng.fill_bytes(&mut block[..half]);
                    let mut text = Vec::with_capacity(4096);
                    for k in 1..=32usize {
                        let pick = rng.gen_range(1..=k.min(16)) - 1;
                        text.extend_from_slice(&strings[pick]);
                    }
                    let rest = &mut block[half..];
                    let n = rest.len();
                    rest.copy_from_slice(&text[..n]);
                }
            }
            _ => rng.fill_bytes(&mut bytes),
        }
        ValuePool {
            bytes: Arc::new(bytes),
        }
    }

    /// The pool of `spec` for a run: the bytes of `blob_file` when given
    /// and `spec` slices a source, else [`ValuePool::new`].
    pub fn for_run(
        spec: &ValGenSpec,
        blob_file: Option<&std::path::Path>,
        source_size: usize,
        seed: u64,
    ) -> std::io::Result<ValuePool> {
        match blob_file {
            Some(p) if spec.slices_source() => {
                let bytes = std::fs::read(p)?;
                if bytes.is_empty() {
                    return Err(std::io::Error::other(format!("{} is empty", p.display())));
                }
                Ok(ValuePool {
                    bytes: Arc::new(bytes),
                })
            }
            _ => Ok(ValuePool::new(spec, source_size, seed)),
        }
    }

    /// Pool size in bytes.
    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    /// True for an empty pool (never, once built).
    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }
}

/// A running value generator of one worker.
#[derive(Debug)]
pub struct ValGen {
    spec: ValGenSpec,
    pool: ValuePool,
    /// True once a warning about values larger than the pool was given.
    pub oversize_warned: bool,
}

/// `Exp(mean)` = `−ln(U)·mean`.
fn exp<R: Rng>(rng: &mut R, mean: f64) -> f64 {
    let u: f64 = rng.gen();
    -(1.0 - u).ln() * mean
}

impl ValGen {
    /// A generator over a shared pool.
    pub fn new(spec: &ValGenSpec, pool: ValuePool) -> ValGen {
        ValGen {
            spec: spec.clone(),
            pool,
            oversize_warned: false,
        }
    }

    /// The size of the next value.
    pub fn next_size<R: Rng>(&self, rng: &mut R) -> usize {
        match &self.spec {
            ValGenSpec::FixedBin(n) | ValGenSpec::FixedBinByte(n, _) | ValGenSpec::FixedChar(n) => {
                *n
            }
            ValGenSpec::ExponentialBin { min, mean } => min + exp(rng, *mean) as usize,
            ValGenSpec::UniformBin { min, max } => min + rng.gen_range(1..=(max - min)),
            ValGenSpec::SemiCompressible {
                min,
                mean,
                xl_mult,
                xl_prob,
            } => {
                if rng.gen::<f64>() < *xl_prob {
                    (xl_mult * *min as f64) as usize + exp(rng, xl_mult * mean) as usize
                } else {
                    min + exp(rng, *mean) as usize
                }
            }
        }
    }

    /// The next value: a slice of the pool (the whole pool if it is smaller).
    pub fn next_value<R: Rng>(&mut self, rng: &mut R) -> &[u8] {
        let size = self.next_size(rng);
        let pool = &self.pool.bytes;
        if size >= pool.len() {
            self.oversize_warned = true;
            return pool;
        }
        let off = match &self.spec {
            // Block-aligned so every value starts with its random half.
            ValGenSpec::SemiCompressible { .. } => {
                let blocks = (pool.len() - size) / 8192;
                rng.gen_range(0..=blocks) * 8192
            }
            ValGenSpec::FixedBinByte(..) => 0,
            _ => rng.gen_range(0..=(pool.len() - size)),
        };
        &pool[off..off + size]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::term::parse_terms;

    fn spec(s: &str) -> Result<ValGenSpec, ValGenError> {
        let t = parse_terms(&format!("{s}.")).expect("term").remove(0).0;
        ValGenSpec::from_term(&t)
    }

    #[test]
    fn sizes_follow_the_spec() {
        let mut rng = StdRng::seed_from_u64(7);
        let s = spec("{fixed_bin, 8000}").expect("ok");
        let mut g = ValGen::new(&s, ValuePool::new(&s, 1 << 20, 1));
        assert_eq!(g.next_value(&mut rng).len(), 8000);
        let s = spec("{fixed_char, 100}").expect("ok");
        let mut g = ValGen::new(&s, ValuePool::new(&s, 1 << 20, 1));
        assert!(g
            .next_value(&mut rng)
            .iter()
            .all(|b| (32..=126).contains(b)));
        let s = spec("{uniform_bin, 10, 20}").expect("ok");
        let g = ValGen::new(&s, ValuePool::new(&s, 1 << 20, 1));
        for _ in 0..1000 {
            let n = g.next_size(&mut rng);
            assert!((11..=20).contains(&n), "{n}");
        }
        let s = spec("{exponential_bin, 100, 1000}").expect("ok");
        let g = ValGen::new(&s, ValuePool::new(&s, 1 << 20, 1));
        let mean = (0..20000)
            .map(|_| g.next_size(&mut rng) as f64)
            .sum::<f64>()
            / 20000.0;
        assert!((mean - 1100.0).abs() < 60.0, "{mean}");
        let s = spec("{semi_compressible, 8000, 2000, 10, 0.2}").expect("ok");
        let g = ValGen::new(&s, ValuePool::new(&s, 4 << 20, 1));
        let mean = (0..20000)
            .map(|_| g.next_size(&mut rng) as f64)
            .sum::<f64>()
            / 20000.0;
        assert!((mean - 28000.0).abs() < 2500.0, "{mean}");
        assert!((s.mean_size() - 28000.0).abs() < 1.0);
        let s = spec("{fixed_bin, 3, 7}").expect("ok");
        let mut g = ValGen::new(&s, ValuePool::new(&s, 1 << 20, 1));
        assert_eq!(g.next_value(&mut rng), &[7, 7, 7]);
    }

    #[test]
    fn unknown_lists_valid() {
        let e = spec("{random_bin, 10}").expect_err("unknown");
        assert!(
            e.to_string().contains("valid: fixed_bin, fixed_char"),
            "{e}"
        );
        assert!(spec("{uniform_bin, 10, 10}").is_err());
    }
}
