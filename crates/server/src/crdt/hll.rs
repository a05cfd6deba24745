//! HyperLogLog (Riak's `hll`, after the `hyper` library): 2^p one-byte
//! registers; an element's 64-bit hash (xxh3) picks a register with its
//! top `p` bits and offers the rank (leading zeros + 1) of the rest; a
//! register keeps its largest rank. Merge is the register-wise maximum
//! (of two precisions, the finer one is folded to the coarser first), so
//! adds commute and repeat freely. The estimate is the standard one with
//! linear counting for small cardinalities (Flajolet et al. 2007).

use super::codec::{Reader, Writer};
use super::CrdtError;
use crate::limits::{HLL_PRECISION_MAX, HLL_PRECISION_MIN};

/// A HyperLogLog sketch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hll {
    /// `p`: 2^p registers.
    pub precision: u8,
    /// The registers (`len == 2^precision`).
    pub registers: Vec<u8>,
}

impl Hll {
    /// An empty sketch of `precision` (must be within the limits).
    pub fn new(precision: u32) -> Result<Hll, CrdtError> {
        if !(HLL_PRECISION_MIN..=HLL_PRECISION_MAX).contains(&precision) {
            return Err(CrdtError::BadPrecision(precision));
        }
        Ok(Hll {
            precision: precision as u8,
            registers: vec![0; 1 << precision],
        })
    }

    /// Adds an element.
    pub fn add(&mut self, elem: &[u8]) {
        let h = xxhash_rust::xxh3::xxh3_64(elem);
        let p = u32::from(self.precision);
        let idx = (h >> (64 - p)) as usize;
        let rest = (h << p) | (1u64 << (p - 1));
        let rank = (rest.leading_zeros() + 1) as u8;
        if let Some(r) = self.registers.get_mut(idx) {
            *r = (*r).max(rank);
        }
    }

    /// The estimated number of distinct elements added.
    pub fn value(&self) -> u64 {
        let m = self.registers.len() as f64;
        let alpha = match self.registers.len() {
            16 => 0.673,
            32 => 0.697,
            64 => 0.709,
            _ => 0.7213 / (1.0 + 1.079 / m),
        };
        let sum: f64 = self
            .registers
            .iter()
            .map(|r| 2f64.powi(-i32::from(*r)))
            .sum();
        let raw = alpha * m * m / sum;
        let zeros = self.registers.iter().filter(|r| **r == 0).count();
        let est = if raw <= 2.5 * m && zeros > 0 {
            m * (m / zeros as f64).ln()
        } else {
            raw
        };
        est.round() as u64
    }

    /// This sketch at a coarser precision `p` (≤ its own): each coarse
    /// register keeps the rank its fine registers imply.
    fn fold_to(&self, p: u8) -> Hll {
        if p >= self.precision {
            return self.clone();
        }
        let shift = self.precision - p;
        let mut out = vec![0u8; 1 << p];
        for (i, r) in self.registers.iter().enumerate() {
            if *r == 0 {
                continue;
            }
            let coarse = i >> shift;
            // The dropped index bits become the top bits of the rest.
            let low = (i & ((1 << shift) - 1)) as u32;
            let rank = if low == 0 {
                r.saturating_add(shift)
            } else {
                (low.leading_zeros() - (32 - u32::from(shift)) + 1) as u8
            };
            if let Some(o) = out.get_mut(coarse) {
                *o = (*o).max(rank);
            }
        }
        Hll {
            precision: p,
            registers: out,
        }
    }

    /// The join: register-wise maximum at the coarser precision.
    pub fn merge(&self, other: &Hll) -> Hll {
        let p = self.precision.min(other.precision);
        let (a, b) = (self.fold_to(p), other.fold_to(p));
        Hll {
            precision: p,
            registers: a
                .registers
                .iter()
                .zip(&b.registers)
                .map(|(x, y)| *x.max(y))
                .collect(),
        }
    }

    /// `p:u8 | form:u8 | registers`: form 0 = dense (2^p bytes), 1 =
    /// sparse (`n:u32 | n × (index:u32 | rank:u8)`), whichever is smaller.
    pub fn encode(&self, w: &mut Writer) {
        w.u8(self.precision);
        let set: Vec<(usize, u8)> = self
            .registers
            .iter()
            .enumerate()
            .filter(|(_, r)| **r > 0)
            .map(|(i, r)| (i, *r))
            .collect();
        if 4 + set.len() * 5 < self.registers.len() {
            w.u8(1);
            w.len(set.len());
            for (i, r) in set {
                w.len(i);
                w.u8(r);
            }
        } else {
            w.u8(0);
            w.buf.extend_from_slice(&self.registers);
        }
    }

    /// Decodes [`Hll::encode`].
    pub fn decode(r: &mut Reader<'_>) -> Result<Hll, CrdtError> {
        let p = r.u8()?;
        let mut h = Hll::new(u32::from(p)).map_err(|_| CrdtError::Corrupt("hll precision"))?;
        let m = h.registers.len();
        match r.u8()? {
            0 => {
                for reg in h.registers.iter_mut() {
                    *reg = r.u8()?;
                }
            }
            1 => {
                let n = r.count(5)?;
                for _ in 0..n {
                    let i = r.u32()? as usize;
                    let v = r.u8()?;
                    *h.registers
                        .get_mut(i)
                        .ok_or(CrdtError::Corrupt("hll register index"))? = v;
                }
            }
            _ => return Err(CrdtError::Corrupt("hll form")),
        }
        if h.registers
            .iter()
            .any(|v| u32::from(*v) > 65 - u32::from(p))
        {
            return Err(CrdtError::Corrupt("hll rank"));
        }
        debug_assert_eq!(h.registers.len(), m);
        Ok(h)
    }
}
