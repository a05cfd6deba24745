//! The map (riak_dt_map): fields named (name, kind) holding an embedded
//! counter, set, register, flag or map. Each update of a field is an event
//! of the map's clock, and the field keeps its value under that dot; a
//! merge keeps a field's dots as a set keeps an element's (both hold it,
//! or the other side has not seen it), so an update concurrent with a
//! remove keeps the field (update wins).
//!
//! **Reset-remove**: removing a field with a context also records a
//! *tombstone*, an empty value of the field's kind whose clock is what
//! both the context and the map have seen; the field's value is the join
//! of its dots' values and its tombstone, and joining with a clock drops
//! every dot that clock has seen. So after a remove and a concurrent
//! update, the field holds only what the update added: counted increments,
//! set elements and flag enables the remove saw are gone. (A register has
//! no dots; its value is the latest assign.)

use super::clock::{merge_dots, Clock, Dot, Dots};
use super::codec::{Reader, Writer};
use super::counter::EmCounter;
use super::flag::Flag;
use super::orswot::Orswot;
use super::register::Register;
use super::{CrdtError, SetOp, SetStep};
use crate::limits::{CRDT_MAX_DEFERRED, CRDT_MAX_DEPTH};
use std::collections::{BTreeMap, BTreeSet};

/// The kind of a field (Riak's `MapField.MapFieldType`, same numbers).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize,
)]
pub enum FieldKind {
    /// An embedded counter.
    Counter = 1,
    /// An embedded set.
    Set = 2,
    /// A last-write-wins register.
    Register = 3,
    /// An enable/disable flag.
    Flag = 4,
    /// A nested map.
    Map = 5,
}

impl FieldKind {
    /// From the PB / encoding number.
    pub fn from_u8(v: u8) -> Option<FieldKind> {
        Some(match v {
            1 => FieldKind::Counter,
            2 => FieldKind::Set,
            3 => FieldKind::Register,
            4 => FieldKind::Flag,
            5 => FieldKind::Map,
            _ => return None,
        })
    }
}

/// A field's name and kind.
pub type Field = (Vec<u8>, FieldKind);

/// An operation on one field. (Variants are only ever added at the end:
/// the cluster wire encodes them by position.)
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum FieldOp {
    /// Add to a counter (negative: subtract).
    Counter(i64),
    /// Adds and removes on a set.
    Set(SetOp),
    /// Assign a register.
    Register(Vec<u8>),
    /// Enable (`true`) or disable a flag.
    Flag(bool),
    /// Operations on a nested map.
    Map(MapOp),
    /// Adds and removes on a set applied in the given order (HTTP's JSON,
    /// as `riak_kv_crdt_json` gives them: document order).
    SetSteps(Vec<SetStep>),
}

impl FieldOp {
    fn kind(&self) -> FieldKind {
        match self {
            FieldOp::Counter(_) => FieldKind::Counter,
            FieldOp::Set(_) | FieldOp::SetSteps(_) => FieldKind::Set,
            FieldOp::Register(_) => FieldKind::Register,
            FieldOp::Flag(_) => FieldKind::Flag,
            FieldOp::Map(_) => FieldKind::Map,
        }
    }
}

/// An operation on a map: field removes first, then field updates (the
/// order riak_pb_dt_codec gives them).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct MapOp {
    /// Fields to remove.
    pub removes: Vec<Field>,
    /// Field updates.
    pub updates: Vec<(Field, FieldOp)>,
}

impl MapOp {
    /// Nesting depth of the operation (1 = no nested map update).
    pub fn depth(&self) -> usize {
        1 + self
            .updates
            .iter()
            .map(|(_, op)| match op {
                FieldOp::Map(m) => m.depth(),
                _ => 0,
            })
            .max()
            .unwrap_or(0)
    }
}

/// An embedded value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Embedded {
    /// Counter.
    Counter(EmCounter),
    /// Set.
    Set(Orswot),
    /// Register.
    Register(Register),
    /// Flag.
    Flag(Flag),
    /// Map.
    Map(Map),
}

/// The value of a field as clients see it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FieldValue {
    /// Counter.
    Counter(i64),
    /// Set elements.
    Set(Vec<Vec<u8>>),
    /// Register.
    Register(Vec<u8>),
    /// Flag.
    Flag(bool),
    /// Nested map.
    Map(BTreeMap<Field, FieldValue>),
}

impl Embedded {
    /// An empty value of `kind`.
    pub fn new(kind: FieldKind) -> Embedded {
        match kind {
            FieldKind::Counter => Embedded::Counter(EmCounter::default()),
            FieldKind::Set => Embedded::Set(Orswot::default()),
            FieldKind::Register => Embedded::Register(Register::default()),
            FieldKind::Flag => Embedded::Flag(Flag::default()),
            FieldKind::Map => Embedded::Map(Map::default()),
        }
    }

    fn kind(&self) -> FieldKind {
        match self {
            Embedded::Counter(_) => FieldKind::Counter,
            Embedded::Set(_) => FieldKind::Set,
            Embedded::Register(_) => FieldKind::Register,
            Embedded::Flag(_) => FieldKind::Flag,
            Embedded::Map(_) => FieldKind::Map,
        }
    }

    /// Sets the clock to the parent map's (riak_dt's `parent_clock`).
    fn parent_clock(&mut self, clock: &Clock) {
        match self {
            Embedded::Counter(c) => c.clock = clock.clone(),
            Embedded::Set(s) => s.clock = clock.clone(),
            Embedded::Flag(f) => f.clock = clock.clone(),
            Embedded::Map(m) => m.clock = clock.clone(),
            Embedded::Register(_) => {}
        }
    }

    /// The join (values of one field always share a kind; if corrupt
    /// bytes broke that, the left side is kept).
    pub fn merge(&self, other: &Embedded) -> Embedded {
        match (self, other) {
            (Embedded::Counter(a), Embedded::Counter(b)) => Embedded::Counter(a.merge(b)),
            (Embedded::Set(a), Embedded::Set(b)) => Embedded::Set(a.merge(b)),
            (Embedded::Register(a), Embedded::Register(b)) => Embedded::Register(a.merge(b)),
            (Embedded::Flag(a), Embedded::Flag(b)) => Embedded::Flag(a.merge(b)),
            (Embedded::Map(a), Embedded::Map(b)) => Embedded::Map(a.merge(b)),
            (a, _) => {
                debug_assert!(false, "merge of two kinds");
                a.clone()
            }
        }
    }

    fn update(
        &mut self,
        op: &FieldOp,
        dot: &Dot,
        ctx: Option<&Clock>,
        ts: u64,
    ) -> Result<(), CrdtError> {
        match (self, op) {
            (Embedded::Counter(c), FieldOp::Counter(n)) => c.increment(dot, *n),
            (Embedded::Set(s), FieldOp::Set(o)) => {
                for e in &o.adds {
                    s.add(dot, e.clone());
                }
                for e in &o.removes {
                    s.remove(e, ctx)?;
                }
            }
            (Embedded::Set(s), FieldOp::SetSteps(steps)) => {
                for step in steps {
                    match step {
                        SetStep::Add(e) => s.add(dot, e.clone()),
                        SetStep::Remove(e) => s.remove(e, ctx)?,
                    }
                }
            }
            (Embedded::Register(r), FieldOp::Register(v)) => r.assign(v.clone(), ts),
            (Embedded::Flag(f), FieldOp::Flag(true)) => f.enable(dot),
            (Embedded::Flag(f), FieldOp::Flag(false)) => f.disable(ctx),
            (Embedded::Map(m), FieldOp::Map(o)) => m.apply(o, dot, ctx, ts)?,
            _ => return Err(CrdtError::Corrupt("field operation of another kind")),
        }
        Ok(())
    }

    /// The client's view.
    pub fn value(&self) -> FieldValue {
        match self {
            Embedded::Counter(c) => FieldValue::Counter(c.value()),
            Embedded::Set(s) => FieldValue::Set(s.value()),
            Embedded::Register(r) => FieldValue::Register(r.value.clone()),
            Embedded::Flag(f) => FieldValue::Flag(f.value()),
            Embedded::Map(m) => FieldValue::Map(m.value()),
        }
    }

    fn encode(&self, w: &mut Writer) {
        w.u8(self.kind() as u8);
        match self {
            Embedded::Counter(c) => c.encode(w),
            Embedded::Set(s) => s.encode(w),
            Embedded::Register(r) => r.encode(w),
            Embedded::Flag(f) => f.encode(w),
            Embedded::Map(m) => m.encode(w),
        }
    }

    fn decode(r: &mut Reader<'_>, depth: usize) -> Result<Embedded, CrdtError> {
        let kind = FieldKind::from_u8(r.u8()?).ok_or(CrdtError::Corrupt("field kind"))?;
        Ok(match kind {
            FieldKind::Counter => Embedded::Counter(EmCounter::decode(r)?),
            FieldKind::Set => Embedded::Set(Orswot::decode(r)?),
            FieldKind::Register => Embedded::Register(Register::decode(r)?),
            FieldKind::Flag => Embedded::Flag(Flag::decode(r)?),
            FieldKind::Map => Embedded::Map(Map::decode_at(r, depth + 1)?),
        })
    }

    /// Elements, fields and nesting of the value, for the limits.
    pub(crate) fn sizes(&self, depth: usize, out: &mut super::Sizes) {
        match self {
            Embedded::Set(s) => out.set_elements = out.set_elements.max(s.entries.len()),
            Embedded::Map(m) => m.sizes(depth + 1, out),
            _ => {}
        }
    }
}

/// One field: its value under each surviving update's dot, and the
/// tombstone of its removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Dot of an update → the field's value that update wrote.
    pub dots: BTreeMap<Dot, Embedded>,
    /// Reset by removes (see the module docs).
    pub tombstone: Embedded,
}

/// A map.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Map {
    /// Every event seen.
    pub clock: Clock,
    /// The fields.
    pub entries: BTreeMap<Field, Entry>,
    /// Field removes whose context this map has not seen.
    pub deferred: BTreeMap<Clock, BTreeSet<Field>>,
}

impl Map {
    /// The current value of `field` (`None`: absent).
    fn field(&self, f: &Field) -> Option<Embedded> {
        let e = self.entries.get(f)?;
        let mut v = e.tombstone.clone();
        for d in e.dots.values() {
            v = v.merge(d);
        }
        Some(v)
    }

    /// The client's view: field → value.
    pub fn value(&self) -> BTreeMap<Field, FieldValue> {
        self.entries
            .keys()
            .filter_map(|f| Some((f.clone(), self.field(f)?.value())))
            .collect()
    }

    /// Applies `op` as the event `dot` (already in the clock at the top
    /// level; merged into it here for nested maps).
    pub fn apply(
        &mut self,
        op: &MapOp,
        dot: &Dot,
        ctx: Option<&Clock>,
        ts: u64,
    ) -> Result<(), CrdtError> {
        self.clock = self.clock.merge(&Clock([dot.clone()].into()));
        for f in &op.removes {
            self.remove_field(f, ctx)?;
        }
        for (f, fop) in &op.updates {
            if f.1 != fop.kind() {
                return Err(CrdtError::Corrupt("field operation of another kind"));
            }
            let mut v = self.field(f).unwrap_or_else(|| Embedded::new(f.1));
            v.parent_clock(&self.clock);
            v.update(fop, dot, ctx, ts)?;
            self.entries.insert(
                f.clone(),
                Entry {
                    dots: [(dot.clone(), v)].into(),
                    tombstone: Embedded::new(f.1),
                },
            );
        }
        Ok(())
    }

    /// Removes a field: without a context it must be present; with one,
    /// only the updates the context has seen go (module docs).
    fn remove_field(&mut self, f: &Field, ctx: Option<&Clock>) -> Result<(), CrdtError> {
        let Some(ctx) = ctx else {
            return match self.entries.remove(f) {
                Some(_) => Ok(()),
                None => Err(CrdtError::NotPresent(f.0.clone())),
            };
        };
        if !self.clock.descends(ctx) {
            if self.deferred.len() >= CRDT_MAX_DEFERRED && !self.deferred.contains_key(ctx) {
                return Err(CrdtError::TooLarge("deferred removes"));
            }
            self.deferred
                .entry(ctx.clone())
                .or_default()
                .insert(f.clone());
        }
        let Some(e) = self.entries.get(f) else {
            return Ok(());
        };
        let mut ts = Embedded::new(f.1);
        ts.parent_clock(&ctx.glb(&self.clock));
        let dots: BTreeMap<Dot, Embedded> = e
            .dots
            .iter()
            .filter(|((a, c), _)| !ctx.covers(a, *c))
            .map(|(d, v)| (d.clone(), v.clone()))
            .collect();
        if dots.is_empty() {
            self.entries.remove(f);
        } else {
            let tombstone = ts.merge(&e.tombstone);
            self.entries.insert(f.clone(), Entry { dots, tombstone });
        }
        Ok(())
    }

    /// The join.
    pub fn merge(&self, other: &Map) -> Map {
        if self == other {
            return self.clone();
        }
        let clock = self.clock.merge(&other.clock);
        let mut entries = BTreeMap::new();
        let keys: BTreeSet<&Field> = self.entries.keys().chain(other.entries.keys()).collect();
        for f in keys {
            let (a, b) = (self.entries.get(f), other.entries.get(f));
            // Which update dots survive: the set rule on the dot keys.
            let ids = |e: Option<&Entry>| -> Dots {
                e.map(|e| e.dots.keys().cloned().collect())
                    .unwrap_or_default()
            };
            let keep = merge_dots(&ids(a), &self.clock, &ids(b), &other.clock);
            let mut dots = BTreeMap::new();
            for e in [a, b].into_iter().flatten() {
                for (d, v) in &e.dots {
                    if keep.get(&d.0) == Some(&d.1) {
                        dots.entry(d.clone()).or_insert_with(|| v.clone());
                    }
                }
            }
            if dots.is_empty() {
                continue;
            }
            // A side without the field removed it or never had it: its
            // clock joins the tombstone, resetting what it saw.
            let tomb_of = |e: Option<&Entry>, other_clock: &Clock| match e {
                Some(e) => e.tombstone.clone(),
                None => {
                    let mut t = Embedded::new(f.1);
                    t.parent_clock(other_clock);
                    t
                }
            };
            let tombstone = tomb_of(a, &self.clock).merge(&tomb_of(b, &other.clock));
            entries.insert(f.clone(), Entry { dots, tombstone });
        }
        let mut deferred = self.deferred.clone();
        for (c, fs) in &other.deferred {
            deferred
                .entry(c.clone())
                .or_default()
                .extend(fs.iter().cloned());
        }
        let mut out = Map {
            clock,
            entries,
            deferred: BTreeMap::new(),
        };
        for (ctx, fields) in deferred {
            for f in fields {
                if out.remove_field(&f, Some(&ctx)).is_err() {
                    out.deferred.entry(ctx.clone()).or_default().insert(f);
                }
            }
        }
        out
    }

    /// `clock | n | n × (name | kind:u8 | k | k × (dot | value) | tombstone)
    /// | m | m × (ctx | j | j × (name | kind:u8))`.
    pub fn encode(&self, w: &mut Writer) {
        self.clock.encode(w);
        w.len(self.entries.len());
        for ((name, kind), e) in &self.entries {
            w.bytes(name);
            w.u8(*kind as u8);
            w.len(e.dots.len());
            for ((a, c), v) in &e.dots {
                w.bytes(a);
                w.u64(*c);
                v.encode(w);
            }
            e.tombstone.encode(w);
        }
        w.len(self.deferred.len());
        for (c, fs) in &self.deferred {
            c.encode(w);
            w.len(fs.len());
            for (name, kind) in fs {
                w.bytes(name);
                w.u8(*kind as u8);
            }
        }
    }

    /// Decodes a top-level map ([`Map::encode`]).
    pub fn decode(r: &mut Reader<'_>) -> Result<Map, CrdtError> {
        Map::decode_at(r, 1)
    }

    fn decode_at(r: &mut Reader<'_>, depth: usize) -> Result<Map, CrdtError> {
        if depth > CRDT_MAX_DEPTH {
            return Err(CrdtError::Corrupt("maps nested too deep"));
        }
        let clock = Clock::decode(r)?;
        let n = r.count(14)?;
        let mut entries = BTreeMap::new();
        for _ in 0..n {
            let name = r.bytes()?;
            let kind = FieldKind::from_u8(r.u8()?).ok_or(CrdtError::Corrupt("field kind"))?;
            let k = r.count(13)?;
            let mut dots = BTreeMap::new();
            for _ in 0..k {
                let a = r.bytes()?;
                let c = r.u64()?;
                let v = Embedded::decode(r, depth)?;
                if v.kind() != kind {
                    return Err(CrdtError::Corrupt("field value of another kind"));
                }
                dots.insert((a, c), v);
            }
            let tombstone = Embedded::decode(r, depth)?;
            if tombstone.kind() != kind || dots.is_empty() {
                return Err(CrdtError::Corrupt("field without a value"));
            }
            let f = (name, kind);
            if entries.last_key_value().is_some_and(|(l, _)| *l >= f) {
                return Err(CrdtError::Corrupt("map fields out of order"));
            }
            entries.insert(f, Entry { dots, tombstone });
        }
        let m = r.count(8)?;
        let mut deferred = BTreeMap::new();
        for _ in 0..m {
            let c = Clock::decode(r)?;
            let j = r.count(5)?;
            let mut fs = BTreeSet::new();
            for _ in 0..j {
                let name = r.bytes()?;
                let kind = FieldKind::from_u8(r.u8()?).ok_or(CrdtError::Corrupt("field kind"))?;
                fs.insert((name, kind));
            }
            deferred.insert(c, fs);
        }
        Ok(Map {
            clock,
            entries,
            deferred,
        })
    }

    /// Elements, fields and nesting, for the limits.
    pub(crate) fn sizes(&self, depth: usize, out: &mut super::Sizes) {
        out.depth = out.depth.max(depth);
        out.map_fields = out.map_fields.max(self.entries.len());
        for f in self.entries.keys() {
            if let Some(v) = self.field(f) {
                v.sizes(depth, out);
            }
        }
    }
}
