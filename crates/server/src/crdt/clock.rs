//! The causal clock of a data type (riak_dt_vclock): actor → the number of
//! events it issued, and the dot (actor, counter) naming one event. Sets,
//! maps, flags and embedded counters tag what they hold with dots; a state
//! whose clock covers a dot it does not hold has seen that event removed.
//! The clock is also the opaque **context** handed to clients for removes.

use super::codec::{Reader, Writer};
use super::CrdtError;
use std::collections::BTreeMap;

/// An actor id (a vnode's actor bytes, see [`crate::ring::actor`]).
pub type Actor = Vec<u8>;

/// One event: (actor, its counter after the event).
pub type Dot = (Actor, u64);

/// Actor → events seen.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Clock(pub BTreeMap<Actor, u64>);

impl Clock {
    /// Counter of `actor` (0 = none seen).
    pub fn get(&self, actor: &[u8]) -> u64 {
        self.0.get(actor).copied().unwrap_or(0)
    }

    /// A new event of `actor`: its dot.
    pub fn increment(&mut self, actor: &[u8]) -> Dot {
        let c = self.0.entry(actor.to_vec()).or_insert(0);
        *c = c.saturating_add(1);
        (actor.to_vec(), *c)
    }

    /// True if this clock has seen event (`actor`, `counter`).
    pub fn covers(&self, actor: &[u8], counter: u64) -> bool {
        self.get(actor) >= counter
    }

    /// True if this clock has seen every event of `other`.
    pub fn descends(&self, other: &Clock) -> bool {
        other.0.iter().all(|(a, c)| self.get(a) >= *c)
    }

    /// The least clock descending both.
    pub fn merge(&self, other: &Clock) -> Clock {
        let mut out = self.0.clone();
        for (a, c) in &other.0 {
            let e = out.entry(a.clone()).or_insert(0);
            *e = (*e).max(*c);
        }
        Clock(out)
    }

    /// The greatest clock both descend (events seen by both).
    pub fn glb(&self, other: &Clock) -> Clock {
        Clock(
            self.0
                .iter()
                .filter_map(|(a, c)| {
                    let m = (*c).min(other.get(a));
                    (m > 0).then(|| (a.clone(), m))
                })
                .collect(),
        )
    }

    /// Encodes as `n:u32 | n × (actor | counter:u64)`.
    pub fn encode(&self, w: &mut Writer) {
        w.len(self.0.len());
        for (a, c) in &self.0 {
            w.bytes(a);
            w.u64(*c);
        }
    }

    /// Decodes [`Clock::encode`]; actors in strictly increasing order, no
    /// zero counters (so equal clocks have equal bytes).
    pub fn decode(r: &mut Reader<'_>) -> Result<Clock, CrdtError> {
        let n = r.count(12)?;
        let mut out = BTreeMap::new();
        let mut last: Option<Actor> = None;
        for _ in 0..n {
            let a = r.bytes()?;
            let c = r.u64()?;
            if c == 0 {
                return Err(CrdtError::Corrupt("zero clock entry"));
            }
            if last.as_ref().is_some_and(|l| *l >= a) {
                return Err(CrdtError::Corrupt("clock actors out of order"));
            }
            last = Some(a.clone());
            out.insert(a, c);
        }
        Ok(Clock(out))
    }

    /// The opaque context handed to clients: `ver:u8 = 1 | clock | crc32c:u32`.
    pub fn to_context(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.u8(CONTEXT_VERSION);
        self.encode(&mut w);
        let crc = crc32c::crc32c(&w.buf);
        w.u32(crc);
        w.buf
    }

    /// Reads a client's context ([`Clock::to_context`]).
    pub fn from_context(bytes: &[u8]) -> Result<Clock, CrdtError> {
        let bad = CrdtError::BadContext;
        let (body, crc) = bytes
            .split_at_checked(bytes.len().wrapping_sub(4))
            .ok_or(bad)?;
        let crc = u32::from_le_bytes(crc.try_into().map_err(|_| CrdtError::BadContext)?);
        if crc32c::crc32c(body) != crc {
            return Err(CrdtError::BadContext);
        }
        let mut r = Reader::new(body);
        if r.u8().map_err(|_| CrdtError::BadContext)? != CONTEXT_VERSION {
            return Err(CrdtError::BadContext);
        }
        let c = Clock::decode(&mut r).map_err(|_| CrdtError::BadContext)?;
        r.finish().map_err(|_| CrdtError::BadContext)?;
        Ok(c)
    }
}

const CONTEXT_VERSION: u8 = 1;

/// The dots of one element (riak_dt_orswot's per-element clock): actor →
/// counter of the latest event of that actor that added it.
pub type Dots = BTreeMap<Actor, u64>;

/// Dots of an element held on two sides, after a merge: those both hold,
/// and those one holds that the other's clock has not seen (riak_dt's
/// ORSWOT rule). A dot one side holds and the other has seen but dropped
/// was removed there.
pub fn merge_dots(a: &Dots, ca: &Clock, b: &Dots, cb: &Clock) -> Dots {
    let mut out = Dots::new();
    for (x, y, cy) in [(a, b, cb), (b, a, ca)] {
        for (actor, c) in x {
            if y.get(actor) == Some(c) || !cy.covers(actor, *c) {
                out.entry(actor.clone())
                    .and_modify(|v| *v = (*v).max(*c))
                    .or_insert(*c);
            }
        }
    }
    out
}

/// `dots` without those `ctx` has seen.
pub fn subtract(dots: &Dots, ctx: &Clock) -> Dots {
    dots.iter()
        .filter(|(a, c)| !ctx.covers(a, **c))
        .map(|(a, c)| (a.clone(), *c))
        .collect()
}

/// Encodes dots as a clock.
pub fn encode_dots(d: &Dots, w: &mut Writer) {
    w.len(d.len());
    for (a, c) in d {
        w.bytes(a);
        w.u64(*c);
    }
}

/// Decodes [`encode_dots`].
pub fn decode_dots(r: &mut Reader<'_>) -> Result<Dots, CrdtError> {
    Ok(Clock::decode(r)?.0)
}
