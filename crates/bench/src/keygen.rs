//! Key generators with basho_bench's semantics (see
//! `shared/reference/basho_bench.md` §2).
//!
//! Integer generators produce `u64`; the wrappers `int_to_bin_bigendian`,
//! `int_to_bin_littleendian` (`Bits` default 32) and `int_to_str` turn them
//! into bytes. A bare integer generator used as the key is written as its
//! decimal text (as `int_to_str`). Each worker has its own generator and its
//! own seeded RNG, so runs are deterministic per worker.

use crate::term::Term;
use rand::Rng;

/// Names accepted in `key_generator`.
pub const VALID: &[&str] = &[
    "sequential_int",
    "partitioned_sequential_int",
    "uniform_int",
    "pareto_int",
    "truncated_pareto_int",
    "eightytwenty_int",
    "int_to_bin_bigendian",
    "int_to_bin_littleendian",
    "int_to_str",
];

/// A parsed `key_generator` value.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyGenSpec {
    /// `{sequential_int, Max}`: 0..Max−1 in every worker, then stop.
    SequentialInt(u64),
    /// `{partitioned_sequential_int, Start, N}`: worker Id covers its share of Start..Start+N.
    PartitionedSequentialInt {
        /// First key.
        start: u64,
        /// Number of keys over all workers.
        n: u64,
    },
    /// `{uniform_int, Start, N}` → `uniform(N) + Start − 1`; `{uniform_int, Max}` is Start 1.
    UniformInt {
        /// Lowest key.
        start: u64,
        /// Number of keys.
        n: u64,
    },
    /// `{pareto_int, Max}`: Lomax α=1.5, mean 0.2·Max, unbounded.
    ParetoInt(u64),
    /// `{truncated_pareto_int, Max}`: `min(Max, pareto_int)`.
    TruncatedParetoInt(u64),
    /// `{eightytwenty_int, Max}`: 80% of draws on keys 1..Max/5.
    EightyTwentyInt(u64),
    /// `{int_to_bin_bigendian, G}` or `{{int_to_bin_bigendian, Bits}, G}` (and little-endian).
    IntToBin {
        /// Big-endian when true.
        big: bool,
        /// Width in bits (a multiple of 8, 8..=64).
        bits: u32,
        /// The integer generator.
        inner: Box<KeyGenSpec>,
    },
    /// `{int_to_str, G}`: decimal text.
    IntToStr(Box<KeyGenSpec>),
}

/// A bad `key_generator`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("key_generator {spec}: {message}")]
pub struct KeyGenError {
    /// The spec as written.
    pub spec: String,
    /// What is wrong.
    pub message: String,
}

fn bad(spec: &Term, message: impl Into<String>) -> KeyGenError {
    KeyGenError {
        spec: spec.to_string(),
        message: message.into(),
    }
}

fn pos_int(spec: &Term, t: &Term, what: &str) -> Result<u64, KeyGenError> {
    match t.as_int() {
        Some(i) if i > 0 => Ok(i as u64),
        _ => Err(bad(
            spec,
            format!("{what} must be a positive integer, got {t}"),
        )),
    }
}

fn nonneg_int(spec: &Term, t: &Term, what: &str) -> Result<u64, KeyGenError> {
    match t.as_int() {
        Some(i) if i >= 0 => Ok(i as u64),
        _ => Err(bad(
            spec,
            format!("{what} must be a non-negative integer, got {t}"),
        )),
    }
}

impl KeyGenSpec {
    /// Parses a `key_generator` term.
    pub fn from_term(t: &Term) -> Result<KeyGenSpec, KeyGenError> {
        let items = match t {
            Term::Tuple(items) if !items.is_empty() => items,
            Term::Atom(a) => {
                return Err(bad(
                    t,
                    format!("unknown key generator `{a}`; valid: {}", VALID.join(", ")),
                ))
            }
            _ => {
                return Err(bad(
                    t,
                    format!(
                        "expected a tuple like {{uniform_int, 100000}}; valid generators: {}",
                        VALID.join(", ")
                    ),
                ))
            }
        };
        // {{int_to_bin_bigendian, Bits}, G}
        if let Term::Tuple(head) = &items[0] {
            if let [Term::Atom(name), bits] = head.as_slice() {
                let big = match name.as_str() {
                    "int_to_bin_bigendian" => true,
                    "int_to_bin_littleendian" => false,
                    _ => return Err(bad(t, format!("unknown wrapper `{name}`"))),
                };
                let bits = pos_int(t, bits, "Bits")? as u32;
                if !bits.is_multiple_of(8) || bits > 64 {
                    return Err(bad(t, "Bits must be a multiple of 8 between 8 and 64"));
                }
                let [_, inner] = items.as_slice() else {
                    return Err(bad(t, "expected {{Wrapper, Bits}, Generator}"));
                };
                return Ok(KeyGenSpec::IntToBin {
                    big,
                    bits,
                    inner: Box::new(Self::int_gen(inner)?),
                });
            }
        }
        let Some(name) = items[0].as_atom() else {
            return Err(bad(t, "the generator name must be an atom"));
        };
        let args = &items[1..];
        let spec = match (name, args) {
            ("sequential_int", [m]) => KeyGenSpec::SequentialInt(pos_int(t, m, "Max")?),
            ("partitioned_sequential_int", [m]) => KeyGenSpec::PartitionedSequentialInt {
                start: 0,
                n: pos_int(t, m, "Max")?,
            },
            ("partitioned_sequential_int", [s, n]) => KeyGenSpec::PartitionedSequentialInt {
                start: nonneg_int(t, s, "Start")?,
                n: pos_int(t, n, "NumKeys")?,
            },
            ("uniform_int", [m]) => KeyGenSpec::UniformInt {
                start: 1,
                n: pos_int(t, m, "Max")?,
            },
            ("uniform_int", [s, n]) => KeyGenSpec::UniformInt {
                start: nonneg_int(t, s, "Start")?,
                n: pos_int(t, n, "NumKeys")?,
            },
            ("pareto_int", [m]) => KeyGenSpec::ParetoInt(pos_int(t, m, "Max")?),
            ("truncated_pareto_int", [m]) => KeyGenSpec::TruncatedParetoInt(pos_int(t, m, "Max")?),
            ("eightytwenty_int", [m]) => {
                let m = pos_int(t, m, "Max")?;
                if m < 5 {
                    return Err(bad(t, "Max must be at least 5"));
                }
                KeyGenSpec::EightyTwentyInt(m)
            }
            ("int_to_bin_bigendian", [g]) => KeyGenSpec::IntToBin {
                big: true,
                bits: 32,
                inner: Box::new(Self::int_gen(g)?),
            },
            ("int_to_bin_littleendian", [g]) => KeyGenSpec::IntToBin {
                big: false,
                bits: 32,
                inner: Box::new(Self::int_gen(g)?),
            },
            ("int_to_str", [g]) => KeyGenSpec::IntToStr(Box::new(Self::int_gen(g)?)),
            ("int_to_bin", _) => {
                return Err(bad(
                    t,
                    "int_to_bin is deprecated in basho_bench; use int_to_bin_bigendian or int_to_bin_littleendian",
                ))
            }
            (n, _) if VALID.contains(&n) => {
                return Err(bad(t, format!("wrong number of arguments for `{n}`")))
            }
            (n, _) => {
                return Err(bad(
                    t,
                    format!("unknown key generator `{n}`; valid: {}", VALID.join(", ")),
                ))
            }
        };
        Ok(spec)
    }

    fn int_gen(t: &Term) -> Result<KeyGenSpec, KeyGenError> {
        let g = Self::from_term(t)?;
        if g.is_int() {
            Ok(g)
        } else {
            Err(bad(t, "the wrapped generator must produce integers"))
        }
    }

    fn is_int(&self) -> bool {
        !matches!(self, KeyGenSpec::IntToBin { .. } | KeyGenSpec::IntToStr(_))
    }

    /// The number of distinct keys the generator can produce (pareto: its nominal Max).
    pub fn keyspace(&self) -> u64 {
        match self {
            KeyGenSpec::SequentialInt(m)
            | KeyGenSpec::ParetoInt(m)
            | KeyGenSpec::TruncatedParetoInt(m)
            | KeyGenSpec::EightyTwentyInt(m) => *m,
            KeyGenSpec::PartitionedSequentialInt { n, .. } | KeyGenSpec::UniformInt { n, .. } => *n,
            KeyGenSpec::IntToBin { inner, .. } | KeyGenSpec::IntToStr(inner) => inner.keyspace(),
        }
    }

    /// True for generators that run out (and then stop their worker).
    pub fn is_finite(&self) -> bool {
        match self {
            KeyGenSpec::SequentialInt(_) | KeyGenSpec::PartitionedSequentialInt { .. } => true,
            KeyGenSpec::IntToBin { inner, .. } | KeyGenSpec::IntToStr(inner) => inner.is_finite(),
            _ => false,
        }
    }
}

/// basho_bench's `uniform(N)`: 1..=N.
fn uniform<R: Rng>(rng: &mut R, n: u64) -> u64 {
    rng.gen_range(1..=n.max(1))
}

/// `pareto_int`: `trunc(((1−U)^(−1/1.5) − 1) · 0.5 · trunc(0.2·Max))`.
pub fn pareto<R: Rng>(rng: &mut R, max: u64) -> u64 {
    let u: f64 = rng.gen();
    let scale = 0.5 * (0.2 * max as f64).trunc();
    let x = ((1.0 - u).powf(-1.0 / 1.5) - 1.0) * scale;
    if x >= u64::MAX as f64 {
        u64::MAX
    } else {
        x as u64
    }
}

/// A running key generator of one worker.
#[derive(Debug)]
pub struct KeyGen {
    spec: KeyGenSpec,
    /// Next sequential value and the exclusive end (sequential generators).
    next: u64,
    end: u64,
}

impl KeyGen {
    /// The generator of worker `id` (1-based) among `concurrent` workers.
    pub fn new(spec: &KeyGenSpec, id: usize, concurrent: usize) -> KeyGen {
        let (next, end) = match innermost(spec) {
            KeyGenSpec::SequentialInt(max) => (0, *max),
            KeyGenSpec::PartitionedSequentialInt { start, n } => {
                let c = concurrent.max(1) as u64;
                let id = (id.max(1) as u64).min(c);
                let range = n / c;
                let lo = start + range * (id - 1);
                let hi = if id == c { start + n } else { lo + range };
                (lo, hi)
            }
            _ => (0, 0),
        };
        KeyGen {
            spec: spec.clone(),
            next,
            end,
        }
    }

    /// The next integer; `None` when a sequential generator is exhausted.
    pub fn next_int<R: Rng>(&mut self, rng: &mut R) -> Option<u64> {
        let spec = innermost(&self.spec).clone();
        Some(match spec {
            KeyGenSpec::SequentialInt(_) | KeyGenSpec::PartitionedSequentialInt { .. } => {
                if self.next >= self.end {
                    return None;
                }
                self.next += 1;
                self.next - 1
            }
            KeyGenSpec::UniformInt { start, n } => (uniform(rng, n) + start).saturating_sub(1),
            KeyGenSpec::ParetoInt(max) => pareto(rng, max),
            KeyGenSpec::TruncatedParetoInt(max) => pareto(rng, max).min(max),
            KeyGenSpec::EightyTwentyInt(max) => {
                let step = max / 5;
                if rng.gen::<f64>() < 0.8 {
                    uniform(rng, step)
                } else {
                    step + uniform(rng, 4 * step)
                }
            }
            KeyGenSpec::IntToBin { .. } | KeyGenSpec::IntToStr(_) => return None,
        })
    }

    /// The next key as bytes; `None` when exhausted.
    pub fn next_key<R: Rng>(&mut self, rng: &mut R) -> Option<Vec<u8>> {
        let i = self.next_int(rng)?;
        Some(match &self.spec {
            KeyGenSpec::IntToBin { big, bits, .. } => {
                let n = (*bits / 8) as usize;
                if *big {
                    i.to_be_bytes()[8 - n..].to_vec()
                } else {
                    i.to_le_bytes()[..n].to_vec()
                }
            }
            _ => i.to_string().into_bytes(),
        })
    }
}

fn innermost(spec: &KeyGenSpec) -> &KeyGenSpec {
    match spec {
        KeyGenSpec::IntToBin { inner, .. } | KeyGenSpec::IntToStr(inner) => innermost(inner),
        s => s,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::term::parse_terms;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    fn spec(s: &str) -> Result<KeyGenSpec, KeyGenError> {
        let t = parse_terms(&format!("{s}.")).expect("term").remove(0).0;
        KeyGenSpec::from_term(&t)
    }

    #[test]
    fn parses_wrappers() {
        let s = spec("{int_to_bin_bigendian, {partitioned_sequential_int, 10000000}}").expect("ok");
        assert!(matches!(
            s,
            KeyGenSpec::IntToBin {
                big: true,
                bits: 32,
                ..
            }
        ));
        let s = spec("{{int_to_bin_littleendian, 64}, {uniform_int, 5}}").expect("ok");
        assert!(matches!(
            s,
            KeyGenSpec::IntToBin {
                big: false,
                bits: 64,
                ..
            }
        ));
        let e = spec("{zipf_int, 5}").expect_err("unknown");
        assert!(e.to_string().contains("valid: sequential_int"), "{e}");
        assert!(spec("{eightytwenty_int, 4}").is_err());
        assert!(spec("{int_to_str, {int_to_str, {uniform_int, 5}}}").is_err());
    }

    #[test]
    fn uniform_is_one_based() {
        let mut g = KeyGen::new(&spec("{uniform_int, 3}").expect("ok"), 1, 1);
        let mut rng = StdRng::seed_from_u64(1);
        let mut seen = [0u32; 5];
        for _ in 0..3000 {
            seen[g.next_int(&mut rng).expect("infinite") as usize] += 1;
        }
        assert_eq!(seen[0], 0);
        assert!(seen[1] > 0 && seen[2] > 0 && seen[3] > 0);
        assert_eq!(seen[4], 0);
    }

    #[test]
    fn partitioned_covers_everything_once() {
        let s = spec("{partitioned_sequential_int, 10, 103}").expect("ok");
        let mut rng = StdRng::seed_from_u64(1);
        let mut all = Vec::new();
        for id in 1..=4 {
            let mut g = KeyGen::new(&s, id, 4);
            while let Some(k) = g.next_int(&mut rng) {
                all.push(k);
            }
        }
        all.sort_unstable();
        assert_eq!(all, (10..113).collect::<Vec<_>>());
    }

    #[test]
    fn bin_encodings() {
        let s = spec("{int_to_bin_bigendian, {sequential_int, 300}}").expect("ok");
        let mut g = KeyGen::new(&s, 1, 1);
        let mut rng = StdRng::seed_from_u64(1);
        for _ in 0..258 {
            g.next_key(&mut rng);
        }
        assert_eq!(g.next_key(&mut rng), Some(vec![0, 0, 1, 2]));
        let s = spec("{int_to_bin_littleendian, {sequential_int, 300}}").expect("ok");
        let mut g = KeyGen::new(&s, 1, 1);
        g.next_key(&mut rng);
        assert_eq!(g.next_key(&mut rng), Some(vec![1, 0, 0, 0]));
        let s = spec("{int_to_str, {sequential_int, 2}}").expect("ok");
        let mut g = KeyGen::new(&s, 1, 1);
        assert_eq!(g.next_key(&mut rng), Some(b"0".to_vec()));
        assert_eq!(g.next_key(&mut rng), Some(b"1".to_vec()));
        assert_eq!(g.next_key(&mut rng), None);
    }
}
