//! The flag inside a map (riak_dt_od_flag): enabled while it holds a dot
//! of an enable that no disable has seen. An enable concurrent with a
//! disable wins; a disable with a context only drops the dots it has seen.

use super::clock::{decode_dots, encode_dots, merge_dots, subtract, Clock, Dot, Dots};
use super::codec::{Reader, Writer};
use super::CrdtError;

/// An observed-disable flag.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Flag {
    /// The parent map's clock when last updated.
    pub clock: Clock,
    /// Dots of the enables not yet disabled.
    pub dots: Dots,
}

impl Flag {
    /// Enabled?
    pub fn value(&self) -> bool {
        !self.dots.is_empty()
    }

    /// Enables as the event `dot`.
    pub fn enable(&mut self, dot: &Dot) {
        self.clock = self.clock.merge(&Clock([dot.clone()].into()));
        self.dots = [dot.clone()].into();
    }

    /// Disables: every enable seen here, or only those `ctx` has seen.
    pub fn disable(&mut self, ctx: Option<&Clock>) {
        self.dots = match ctx {
            None => Dots::new(),
            Some(c) => subtract(&self.dots, c),
        };
    }

    /// The join.
    pub fn merge(&self, other: &Flag) -> Flag {
        Flag {
            clock: self.clock.merge(&other.clock),
            dots: merge_dots(&self.dots, &self.clock, &other.dots, &other.clock),
        }
    }

    /// `clock | dots`.
    pub fn encode(&self, w: &mut Writer) {
        self.clock.encode(w);
        encode_dots(&self.dots, w);
    }

    /// Decodes [`Flag::encode`].
    pub fn decode(r: &mut Reader<'_>) -> Result<Flag, CrdtError> {
        Ok(Flag {
            clock: Clock::decode(r)?,
            dots: decode_dots(r)?,
        })
    }
}
