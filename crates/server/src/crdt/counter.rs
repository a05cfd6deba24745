//! Counters. [`PnCounter`] is Riak's top-level `counter` (riak_dt_pncounter,
//! also the 1.4 counters): per actor, the sum of its increments and of its
//! decrements; merge takes each actor's larger sums, the value is all
//! increments minus all decrements. [`EmCounter`] is the counter inside a
//! map (riak_dt_emcntr): each actor's sums carry the dot of its latest
//! update, so removing the field (a context that has seen that dot) resets
//! what was counted.

use super::clock::{Clock, Dot};
use super::codec::{Reader, Writer};
use super::CrdtError;
use std::collections::BTreeMap;

/// Actor → (increments, decrements).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PnCounter(pub BTreeMap<Vec<u8>, (u64, u64)>);

/// Adds `amount` to a (p, n) pair (saturating: 2^64 increments is not a
/// count a client makes).
fn add(pn: (u64, u64), amount: i64) -> (u64, u64) {
    if amount >= 0 {
        (pn.0.saturating_add(amount.unsigned_abs()), pn.1)
    } else {
        (pn.0, pn.1.saturating_add(amount.unsigned_abs()))
    }
}

/// Σp − Σn, clamped to `i64` (Riak's `sint64` on the wire).
fn total<'a>(it: impl Iterator<Item = &'a (u64, u64)>) -> i64 {
    let v: i128 = it.map(|(p, n)| i128::from(*p) - i128::from(*n)).sum();
    v.clamp(i128::from(i64::MIN), i128::from(i64::MAX)) as i64
}

impl PnCounter {
    /// Adds `amount` (negative: a decrement) as `actor`.
    pub fn increment(&mut self, actor: &[u8], amount: i64) {
        let e = self.0.entry(actor.to_vec()).or_insert((0, 0));
        *e = add(*e, amount);
    }

    /// The count.
    pub fn value(&self) -> i64 {
        total(self.0.values())
    }

    /// The join: each actor's larger sums.
    pub fn merge(&self, other: &PnCounter) -> PnCounter {
        let mut out = self.0.clone();
        for (a, (p, n)) in &other.0 {
            let e = out.entry(a.clone()).or_insert((0, 0));
            *e = (e.0.max(*p), e.1.max(*n));
        }
        PnCounter(out)
    }

    /// `n | n × (actor | p:u64 | n:u64)`.
    pub fn encode(&self, w: &mut Writer) {
        w.len(self.0.len());
        for (a, (p, n)) in &self.0 {
            w.bytes(a);
            w.u64(*p);
            w.u64(*n);
        }
    }

    /// Decodes [`PnCounter::encode`] (actors strictly increasing).
    pub fn decode(r: &mut Reader<'_>) -> Result<PnCounter, CrdtError> {
        let n = r.count(20)?;
        let mut out = BTreeMap::new();
        for _ in 0..n {
            let a = r.bytes()?;
            let pn = (r.u64()?, r.u64()?);
            if out.last_key_value().is_some_and(|(l, _)| *l >= a) {
                return Err(CrdtError::Corrupt("counter actors out of order"));
            }
            out.insert(a, pn);
        }
        Ok(PnCounter(out))
    }
}

/// A counter in a map: the parent's clock, and per actor (dot counter of
/// its latest update, increments, decrements).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EmCounter {
    /// The map's clock when last updated (or the tombstone's clock).
    pub clock: Clock,
    /// Actor → (dot counter, p, n).
    pub entries: BTreeMap<Vec<u8>, (u64, u64, u64)>,
}

impl EmCounter {
    /// Adds `amount` as the event `dot`.
    pub fn increment(&mut self, dot: &Dot, amount: i64) {
        let (actor, c) = dot;
        let (_, p, n) = self.entries.get(actor).copied().unwrap_or((0, 0, 0));
        let (p, n) = add((p, n), amount);
        self.entries.insert(actor.clone(), (*c, p, n));
        self.clock = self.clock.merge(&Clock([(actor.clone(), *c)].into()));
    }

    /// The count.
    pub fn value(&self) -> i64 {
        let pairs: Vec<(u64, u64)> = self.entries.values().map(|(_, p, n)| (*p, *n)).collect();
        total(pairs.iter())
    }

    /// The join: an actor's entry survives if the other side holds it too
    /// or has not seen its dot; of two surviving, the later dot.
    pub fn merge(&self, other: &EmCounter) -> EmCounter {
        let mut entries: BTreeMap<Vec<u8>, (u64, u64, u64)> = BTreeMap::new();
        for (x, y, cy) in [(self, other, &other.clock), (other, self, &self.clock)] {
            for (a, e) in &x.entries {
                if y.entries.get(a) == Some(e) || !cy.covers(a, e.0) {
                    let slot = entries.entry(a.clone()).or_insert(*e);
                    if e.0 > slot.0 {
                        *slot = *e;
                    }
                }
            }
        }
        EmCounter {
            clock: self.clock.merge(&other.clock),
            entries,
        }
    }

    /// `clock | n | n × (actor | dot:u64 | p:u64 | n:u64)`.
    pub fn encode(&self, w: &mut Writer) {
        self.clock.encode(w);
        w.len(self.entries.len());
        for (a, (d, p, n)) in &self.entries {
            w.bytes(a);
            w.u64(*d);
            w.u64(*p);
            w.u64(*n);
        }
    }

    /// Decodes [`EmCounter::encode`].
    pub fn decode(r: &mut Reader<'_>) -> Result<EmCounter, CrdtError> {
        let clock = Clock::decode(r)?;
        let n = r.count(28)?;
        let mut entries = BTreeMap::new();
        for _ in 0..n {
            let a = r.bytes()?;
            let e = (r.u64()?, r.u64()?, r.u64()?);
            if entries.last_key_value().is_some_and(|(l, _)| *l >= a) {
                return Err(CrdtError::Corrupt("counter actors out of order"));
            }
            entries.insert(a, e);
        }
        Ok(EmCounter { clock, entries })
    }
}
