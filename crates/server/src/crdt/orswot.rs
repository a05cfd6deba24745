//! The set (riak_dt_orswot): an observed-remove set without tombstones.
//! Each element carries the dots of the adds that put it there; the set's
//! clock records every event it has seen. A remove drops an element's
//! dots; a merge keeps an element's dot if both sides hold it or the other
//! side has not seen it ([`merge_dots`]), so an add concurrent with a
//! remove survives (add wins) and a removed element leaves nothing behind.
//! A remove with a context only drops the dots the context has seen; if
//! the set has not seen the whole context yet, the remove is kept
//! (*deferred*) and applied by a later merge that brings those events.

use super::clock::{decode_dots, encode_dots, merge_dots, subtract, Clock, Dot, Dots};
use super::codec::{Reader, Writer};
use super::CrdtError;
use crate::limits::CRDT_MAX_DEFERRED;
use std::collections::{BTreeMap, BTreeSet};

/// An ORSWOT.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Orswot {
    /// Every event seen.
    pub clock: Clock,
    /// Element → the dots of the adds that hold it.
    pub entries: BTreeMap<Vec<u8>, Dots>,
    /// Removes whose context this set has not seen: context → elements.
    pub deferred: BTreeMap<Clock, BTreeSet<Vec<u8>>>,
}

impl Orswot {
    /// The elements, in byte order.
    pub fn value(&self) -> Vec<Vec<u8>> {
        self.entries.keys().cloned().collect()
    }

    /// Adds `elem` as the event `dot` (its older dots are superseded).
    pub fn add(&mut self, dot: &Dot, elem: Vec<u8>) {
        self.clock = self.clock.merge(&Clock([dot.clone()].into()));
        self.entries.insert(elem, [dot.clone()].into());
    }

    /// Removes `elem`: without a context it must be present (Riak's
    /// `{precondition,{not_present,E}}`); with one, only the dots the
    /// context has seen go, and a context this set has not seen is kept.
    pub fn remove(&mut self, elem: &[u8], ctx: Option<&Clock>) -> Result<(), CrdtError> {
        match ctx {
            None => match self.entries.remove(elem) {
                Some(_) => Ok(()),
                None => Err(CrdtError::NotPresent(elem.to_vec())),
            },
            Some(ctx) => {
                if !self.clock.descends(ctx) {
                    if self.deferred.len() >= CRDT_MAX_DEFERRED && !self.deferred.contains_key(ctx)
                    {
                        return Err(CrdtError::TooLarge("deferred removes"));
                    }
                    self.deferred
                        .entry(ctx.clone())
                        .or_default()
                        .insert(elem.to_vec());
                }
                if let Some(d) = self.entries.get(elem) {
                    let left = subtract(d, ctx);
                    if left.is_empty() {
                        self.entries.remove(elem);
                    } else {
                        self.entries.insert(elem.to_vec(), left);
                    }
                }
                Ok(())
            }
        }
    }

    /// The join.
    pub fn merge(&self, other: &Orswot) -> Orswot {
        if self == other {
            return self.clone();
        }
        let empty = Dots::new();
        let mut entries = BTreeMap::new();
        let keys: BTreeSet<&Vec<u8>> = self.entries.keys().chain(other.entries.keys()).collect();
        for k in keys {
            let a = self.entries.get(k).unwrap_or(&empty);
            let b = other.entries.get(k).unwrap_or(&empty);
            let d = merge_dots(a, &self.clock, b, &other.clock);
            if !d.is_empty() {
                entries.insert(k.clone(), d);
            }
        }
        let mut deferred = self.deferred.clone();
        for (c, es) in &other.deferred {
            deferred
                .entry(c.clone())
                .or_default()
                .extend(es.iter().cloned());
        }
        let mut out = Orswot {
            clock: self.clock.merge(&other.clock),
            entries,
            deferred: BTreeMap::new(),
        };
        for (ctx, elems) in deferred {
            for e in elems {
                // Cannot fail: with a context a remove never errs but on the
                // deferred limit, which the union of two valid sides can
                // pass; keep such a remove rather than lose it.
                if out.remove(&e, Some(&ctx)).is_err() {
                    out.deferred.entry(ctx.clone()).or_default().insert(e);
                }
            }
        }
        out
    }

    /// `clock | n | n × (elem | dots) | m | m × (ctx | k | k × elem)`.
    pub fn encode(&self, w: &mut Writer) {
        self.clock.encode(w);
        w.len(self.entries.len());
        for (e, d) in &self.entries {
            w.bytes(e);
            encode_dots(d, w);
        }
        w.len(self.deferred.len());
        for (c, es) in &self.deferred {
            c.encode(w);
            w.len(es.len());
            for e in es {
                w.bytes(e);
            }
        }
    }

    /// Decodes [`Orswot::encode`] (keys strictly increasing, no element
    /// without dots).
    pub fn decode(r: &mut Reader<'_>) -> Result<Orswot, CrdtError> {
        let clock = Clock::decode(r)?;
        let n = r.count(8)?;
        let mut entries = BTreeMap::new();
        for _ in 0..n {
            let e = r.bytes()?;
            let d = decode_dots(r)?;
            if d.is_empty() {
                return Err(CrdtError::Corrupt("set element without dots"));
            }
            if entries.last_key_value().is_some_and(|(l, _)| *l >= e) {
                return Err(CrdtError::Corrupt("set elements out of order"));
            }
            entries.insert(e, d);
        }
        let m = r.count(8)?;
        let mut deferred = BTreeMap::new();
        for _ in 0..m {
            let c = Clock::decode(r)?;
            let k = r.count(4)?;
            let mut es = BTreeSet::new();
            for _ in 0..k {
                es.insert(r.bytes()?);
            }
            deferred.insert(c, es);
        }
        Ok(Orswot {
            clock,
            entries,
            deferred,
        })
    }
}
