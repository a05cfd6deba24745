//! The register inside a map (riak_dt_lwwreg): the value with the latest
//! timestamp (microseconds of the coordinating vnode's clock) wins; equal
//! timestamps are broken by the greater value, so every replica picks the
//! same one. Limit: wall-clock skew between nodes decides between
//! concurrent assigns (as in Riak).

use super::codec::{Reader, Writer};
use super::CrdtError;

/// A last-write-wins register.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Register {
    /// The value (empty = never assigned).
    pub value: Vec<u8>,
    /// When it was assigned (µs since the epoch; 0 = never).
    pub ts: u64,
}

impl Register {
    /// Assigns `value` at `ts` (kept only if it wins over the current one).
    pub fn assign(&mut self, value: Vec<u8>, ts: u64) {
        let new = Register { value, ts };
        if (new.ts, &new.value) > (self.ts, &self.value) {
            *self = new;
        }
    }

    /// The join: the winner of the two.
    pub fn merge(&self, other: &Register) -> Register {
        if (other.ts, &other.value) > (self.ts, &self.value) {
            other.clone()
        } else {
            self.clone()
        }
    }

    /// `ts:u64 | value`.
    pub fn encode(&self, w: &mut Writer) {
        w.u64(self.ts);
        w.bytes(&self.value);
    }

    /// Decodes [`Register::encode`].
    pub fn decode(r: &mut Reader<'_>) -> Result<Register, CrdtError> {
        Ok(Register {
            ts: r.u64()?,
            value: r.bytes()?,
        })
    }
}
