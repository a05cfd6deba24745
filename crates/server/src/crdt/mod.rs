//! Riak data types as state-based CRDTs (after basho/riak_dt): a
//! [`Crdt`] is a `counter` ([`counter::PnCounter`]), `set`
//! ([`orswot::Orswot`]), `map` ([`map::Map`] of counters, sets,
//! registers, flags and maps), `hll` ([`hll::Hll`]) or `gset`
//! ([`gset::GSet`]). This module is pure: no I/O, no clock reads (the
//! caller passes the actor and the time).
//!
//! * **Merge** ([`Crdt::merge`]) is a join: commutative, associative and
//!   idempotent, so replicas that exchange states in any order converge
//!   (property-tested in `tests.rs`). Two states of different types do not
//!   merge ([`CrdtError::TypeMismatch`]).
//! * **Update** ([`Crdt::update`]) applies one client operation as one new
//!   event of the coordinating vnode's actor. Removes take an optional
//!   **context** ([`clock::Clock::to_context`]: the clock of the state the
//!   client read, as opaque bytes): with it only what the client saw is
//!   removed; without it the element or field must be present here.
//! * **Encoding** ([`Crdt::encode`], `docs/formats.md` "Data types"):
//!   `"BDT" | version:u8 = 1 | type:u8 | body | crc32c:u32`, little-endian,
//!   canonical (equal states encode to equal bytes). [`Crdt::decode`]
//!   checks the checksum, every count against the bytes left, key order,
//!   nesting depth and trailing bytes; corrupt bytes are an error, never a
//!   panic.
//! * **Limits** (`crate::limits`, `CRDT_*`): elements per set, fields per
//!   map, nesting, element size and encoded size are checked after each
//!   update ([`Crdt::check_limits`]); an update past one fails and nothing
//!   is written. Merges are never refused.

pub mod clock;
pub mod codec;
pub mod counter;
pub mod flag;
pub mod gset;
pub mod hll;
pub mod map;
pub mod orswot;
pub mod register;

#[cfg(test)]
mod tests;

use crate::limits::{
    CRDT_MAX_DEPTH, CRDT_MAX_ELEMENT_BYTES, CRDT_MAX_ENCODED_BYTES, CRDT_MAX_MAP_FIELDS,
    CRDT_MAX_SET_ELEMENTS,
};
use clock::Clock;
use codec::{Reader, Writer};
use std::collections::BTreeMap;

/// Why a data-type operation or decode failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CrdtError {
    /// Stored or received bytes are not a valid encoding.
    #[error("corrupt data type encoding: {0}")]
    Corrupt(&'static str),
    /// A remove without context of something absent (Riak's text).
    #[error("{{precondition,{{not_present,<<\"{}\">>}}}}", String::from_utf8_lossy(.0))]
    NotPresent(Vec<u8>),
    /// The context is not one this server handed out.
    #[error("Malformed context")]
    BadContext,
    /// An operation of another type than the value's.
    #[error("Operation type is `{op}` but  bucket type is `{have}`.")]
    TypeMismatch {
        /// The operation's type.
        op: &'static str,
        /// The stored value's type.
        have: &'static str,
    },
    /// An HLL precision outside 4..16.
    #[error("hll_precision {0} is not in 4..16")]
    BadPrecision(u32),
    /// An update would pass a limit of `crate::limits`.
    #[error("data type limit exceeded: {0}")]
    TooLarge(&'static str),
}

/// The five data types of a bucket type's `datatype` prop.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum DataType {
    /// `counter`.
    Counter,
    /// `set`.
    Set,
    /// `map`.
    Map,
    /// `hll`.
    Hll,
    /// `gset`.
    GSet,
}

impl DataType {
    /// From the prop's value.
    pub fn from_name(s: &str) -> Option<DataType> {
        Some(match s {
            "counter" => DataType::Counter,
            "set" => DataType::Set,
            "map" => DataType::Map,
            "hll" => DataType::Hll,
            "gset" => DataType::GSet,
            _ => return None,
        })
    }

    /// The prop's value.
    pub fn name(self) -> &'static str {
        match self {
            DataType::Counter => "counter",
            DataType::Set => "set",
            DataType::Map => "map",
            DataType::Hll => "hll",
            DataType::GSet => "gset",
        }
    }

    /// The content type of a stored value (riak_kv_types.hrl).
    pub fn content_type(self) -> &'static str {
        match self {
            DataType::Counter => "application/riak_counter",
            DataType::Set => "application/riak_set",
            DataType::Map => "application/riak_map",
            DataType::Hll => "application/riak_hll",
            DataType::GSet => "application/riak_gset",
        }
    }

    /// The type whose content type is `ct`.
    pub fn from_content_type(ct: &[u8]) -> Option<DataType> {
        [
            DataType::Counter,
            DataType::Set,
            DataType::Map,
            DataType::Hll,
            DataType::GSet,
        ]
        .into_iter()
        .find(|d| d.content_type().as_bytes() == ct)
    }

    fn tag(self) -> u8 {
        match self {
            DataType::Counter => 1,
            DataType::Set => 2,
            DataType::Map => 3,
            DataType::Hll => 4,
            DataType::GSet => 5,
        }
    }

    /// The PB `DtFetchResp.DataType` number (same as the tag).
    pub fn pb_number(self) -> i32 {
        i32::from(self.tag())
    }
}

/// Adds and removes on a set (adds first, as riak_pb_dt_codec orders them).
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct SetOp {
    /// Elements to add.
    pub adds: Vec<Vec<u8>>,
    /// Elements to remove.
    pub removes: Vec<Vec<u8>>,
}

/// One step of a set operation given in order (HTTP's JSON, applied in
/// document order as `riak_kv_crdt_json` does).
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum SetStep {
    /// Add the element.
    Add(Vec<u8>),
    /// Remove the element (with the update's context, if any).
    Remove(Vec<u8>),
}

impl SetStep {
    /// The element added or removed.
    pub fn element(&self) -> &Vec<u8> {
        match self {
            SetStep::Add(e) | SetStep::Remove(e) => e,
        }
    }
}

/// One client operation on a top-level value. (Variants are only ever
/// added at the end: the cluster wire encodes them by position.)
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum Op {
    /// Add to the counter (negative: subtract).
    Counter(i64),
    /// Set adds and removes.
    Set(SetOp),
    /// Map field removes and updates.
    Map(map::MapOp),
    /// Add elements to an HLL.
    Hll(Vec<Vec<u8>>),
    /// Add elements to a GSet.
    GSet(Vec<Vec<u8>>),
    /// Set adds and removes applied in the given order (HTTP).
    SetSteps(Vec<SetStep>),
}

impl Op {
    /// The type this operation applies to.
    pub fn data_type(&self) -> DataType {
        match self {
            Op::Counter(_) => DataType::Counter,
            Op::Set(_) | Op::SetSteps(_) => DataType::Set,
            Op::Map(_) => DataType::Map,
            Op::Hll(_) => DataType::Hll,
            Op::GSet(_) => DataType::GSet,
        }
    }
}

/// A top-level data-type value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Crdt {
    /// `counter` (also the 1.4 counters).
    Counter(counter::PnCounter),
    /// `set`.
    Set(orswot::Orswot),
    /// `map`.
    Map(map::Map),
    /// `hll`.
    Hll(hll::Hll),
    /// `gset`.
    GSet(gset::GSet),
}

/// What a client reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    /// Counter.
    Counter(i64),
    /// Set elements (byte order).
    Set(Vec<Vec<u8>>),
    /// Map fields.
    Map(BTreeMap<map::Field, map::FieldValue>),
    /// HLL estimate.
    Hll(u64),
    /// GSet elements.
    GSet(Vec<Vec<u8>>),
}

/// Sizes checked against the limits.
#[derive(Debug, Default)]
pub(crate) struct Sizes {
    pub set_elements: usize,
    pub map_fields: usize,
    pub depth: usize,
}

const MAGIC: &[u8; 3] = b"BDT";
const VERSION: u8 = 1;

impl Crdt {
    /// An empty value (`hll_precision` for an HLL).
    pub fn new(t: DataType, hll_precision: u32) -> Result<Crdt, CrdtError> {
        Ok(match t {
            DataType::Counter => Crdt::Counter(counter::PnCounter::default()),
            DataType::Set => Crdt::Set(orswot::Orswot::default()),
            DataType::Map => Crdt::Map(map::Map::default()),
            DataType::Hll => Crdt::Hll(hll::Hll::new(hll_precision)?),
            DataType::GSet => Crdt::GSet(gset::GSet::default()),
        })
    }

    /// Its type.
    pub fn data_type(&self) -> DataType {
        match self {
            Crdt::Counter(_) => DataType::Counter,
            Crdt::Set(_) => DataType::Set,
            Crdt::Map(_) => DataType::Map,
            Crdt::Hll(_) => DataType::Hll,
            Crdt::GSet(_) => DataType::GSet,
        }
    }

    /// The client's view.
    pub fn value(&self) -> Value {
        match self {
            Crdt::Counter(c) => Value::Counter(c.value()),
            Crdt::Set(s) => Value::Set(s.value()),
            Crdt::Map(m) => Value::Map(m.value()),
            Crdt::Hll(h) => Value::Hll(h.value()),
            Crdt::GSet(g) => Value::GSet(g.0.iter().cloned().collect()),
        }
    }

    /// The context handed to clients (sets and maps; `None` for the
    /// others, which have no removes).
    pub fn context(&self) -> Option<Vec<u8>> {
        match self {
            Crdt::Set(s) => Some(s.clock.to_context()),
            Crdt::Map(m) => Some(m.clock.to_context()),
            _ => None,
        }
    }

    /// Canonical bytes of what a client can observe: the value and the
    /// context. Two replicas that saw the same events have equal
    /// observations, though a map's bytes may differ (its fields'
    /// tombstones, as riak_dt_map's, depend on the order merges happened
    /// in); the object layer names a merged value by this.
    pub fn observed(&self) -> Vec<u8> {
        fn value(v: &Value, w: &mut Writer) {
            match v {
                Value::Counter(c) => w.u64(*c as u64),
                Value::Hll(h) => w.u64(*h),
                Value::Set(s) | Value::GSet(s) => elems(s, w),
                Value::Map(m) => fields(m, w),
            }
        }
        fn elems(s: &[Vec<u8>], w: &mut Writer) {
            w.len(s.len());
            s.iter().for_each(|e| w.bytes(e));
        }
        fn fields(m: &BTreeMap<map::Field, map::FieldValue>, w: &mut Writer) {
            w.len(m.len());
            for ((name, kind), v) in m {
                w.bytes(name);
                w.u8(*kind as u8);
                match v {
                    map::FieldValue::Counter(c) => w.u64(*c as u64),
                    map::FieldValue::Set(s) => elems(s, w),
                    map::FieldValue::Register(r) => w.bytes(r),
                    map::FieldValue::Flag(f) => w.u8(u8::from(*f)),
                    map::FieldValue::Map(inner) => fields(inner, w),
                }
            }
        }
        let mut w = Writer::default();
        w.u8(self.data_type().tag());
        value(&self.value(), &mut w);
        w.bytes(&self.context().unwrap_or_default());
        w.buf
    }

    /// The join of two values of one type.
    pub fn merge(&self, other: &Crdt) -> Result<Crdt, CrdtError> {
        Ok(match (self, other) {
            (Crdt::Counter(a), Crdt::Counter(b)) => Crdt::Counter(a.merge(b)),
            (Crdt::Set(a), Crdt::Set(b)) => Crdt::Set(a.merge(b)),
            (Crdt::Map(a), Crdt::Map(b)) => Crdt::Map(a.merge(b)),
            (Crdt::Hll(a), Crdt::Hll(b)) => Crdt::Hll(a.merge(b)),
            (Crdt::GSet(a), Crdt::GSet(b)) => Crdt::GSet(a.merge(b)),
            (a, b) => {
                return Err(CrdtError::TypeMismatch {
                    op: b.data_type().name(),
                    have: a.data_type().name(),
                })
            }
        })
    }

    /// Applies `op` as one new event of `actor` at `now_us` (register
    /// timestamps), with the client's `context` if it sent one. On error
    /// the value is unchanged (the update works on a copy).
    pub fn update(
        &self,
        op: &Op,
        actor: &[u8],
        context: Option<&[u8]>,
        now_us: u64,
    ) -> Result<Crdt, CrdtError> {
        let ctx = context
            .filter(|c| !c.is_empty())
            .map(Clock::from_context)
            .transpose()?;
        check_op_sizes(op)?;
        let mut next = self.clone();
        match (&mut next, op) {
            (Crdt::Counter(c), Op::Counter(n)) => c.increment(actor, *n),
            (Crdt::Set(s), Op::Set(o)) => {
                let dot = s.clock.increment(actor);
                for e in &o.adds {
                    s.add(&dot, e.clone());
                }
                for e in &o.removes {
                    s.remove(e, ctx.as_ref())?;
                }
            }
            (Crdt::Set(s), Op::SetSteps(steps)) => {
                let dot = s.clock.increment(actor);
                for step in steps {
                    match step {
                        SetStep::Add(e) => s.add(&dot, e.clone()),
                        SetStep::Remove(e) => s.remove(e, ctx.as_ref())?,
                    }
                }
            }
            (Crdt::Map(m), Op::Map(o)) => {
                if o.depth() > CRDT_MAX_DEPTH {
                    return Err(CrdtError::TooLarge("maps nested too deep"));
                }
                let dot = m.clock.increment(actor);
                m.apply(o, &dot, ctx.as_ref(), now_us)?;
            }
            (Crdt::Hll(h), Op::Hll(es)) => es.iter().for_each(|e| h.add(e)),
            (Crdt::GSet(g), Op::GSet(es)) => g.0.extend(es.iter().cloned()),
            (have, op) => {
                return Err(CrdtError::TypeMismatch {
                    op: op.data_type().name(),
                    have: have.data_type().name(),
                })
            }
        }
        next.check_limits()?;
        Ok(next)
    }

    /// Checks the limits of `crate::limits` (after an update).
    pub fn check_limits(&self) -> Result<(), CrdtError> {
        let mut s = Sizes::default();
        match self {
            Crdt::Set(o) => s.set_elements = o.entries.len(),
            Crdt::GSet(g) => s.set_elements = g.0.len(),
            Crdt::Map(m) => m.sizes(1, &mut s),
            Crdt::Counter(_) | Crdt::Hll(_) => {}
        }
        if s.set_elements > CRDT_MAX_SET_ELEMENTS {
            return Err(CrdtError::TooLarge("set elements"));
        }
        if s.map_fields > CRDT_MAX_MAP_FIELDS {
            return Err(CrdtError::TooLarge("map fields"));
        }
        if s.depth > CRDT_MAX_DEPTH {
            return Err(CrdtError::TooLarge("maps nested too deep"));
        }
        if self.encode().len() > CRDT_MAX_ENCODED_BYTES {
            return Err(CrdtError::TooLarge("encoded size"));
        }
        Ok(())
    }

    /// The stored bytes (module docs).
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::default();
        w.buf.extend_from_slice(MAGIC);
        w.u8(VERSION);
        w.u8(self.data_type().tag());
        match self {
            Crdt::Counter(c) => c.encode(&mut w),
            Crdt::Set(s) => s.encode(&mut w),
            Crdt::Map(m) => m.encode(&mut w),
            Crdt::Hll(h) => h.encode(&mut w),
            Crdt::GSet(g) => g.encode(&mut w),
        }
        let crc = crc32c::crc32c(&w.buf);
        w.u32(crc);
        w.buf
    }

    /// Decodes [`Crdt::encode`].
    pub fn decode(bytes: &[u8]) -> Result<Crdt, CrdtError> {
        let split = bytes
            .len()
            .checked_sub(4)
            .ok_or(CrdtError::Corrupt("truncated"))?;
        let (body, crc) = bytes.split_at(split);
        let crc = u32::from_le_bytes([crc[0], crc[1], crc[2], crc[3]]);
        if crc32c::crc32c(body) != crc {
            return Err(CrdtError::Corrupt("checksum mismatch"));
        }
        let mut r = Reader::new(body);
        let magic = [r.u8()?, r.u8()?, r.u8()?];
        if &magic != MAGIC {
            return Err(CrdtError::Corrupt("not a data type"));
        }
        if r.u8()? != VERSION {
            return Err(CrdtError::Corrupt("unknown version"));
        }
        let out = match r.u8()? {
            1 => Crdt::Counter(counter::PnCounter::decode(&mut r)?),
            2 => Crdt::Set(orswot::Orswot::decode(&mut r)?),
            3 => Crdt::Map(map::Map::decode(&mut r)?),
            4 => Crdt::Hll(hll::Hll::decode(&mut r)?),
            5 => Crdt::GSet(gset::GSet::decode(&mut r)?),
            _ => return Err(CrdtError::Corrupt("unknown type")),
        };
        r.finish()?;
        Ok(out)
    }
}

/// Element and name sizes of an operation.
fn check_op_sizes(op: &Op) -> Result<(), CrdtError> {
    fn elems<'a>(it: impl IntoIterator<Item = &'a Vec<u8>>) -> Result<(), CrdtError> {
        if it.into_iter().any(|e| e.len() > CRDT_MAX_ELEMENT_BYTES) {
            return Err(CrdtError::TooLarge("element size"));
        }
        Ok(())
    }
    fn map_op(m: &map::MapOp) -> Result<(), CrdtError> {
        elems(m.removes.iter().map(|f| &f.0))?;
        for ((name, _), op) in &m.updates {
            elems([name])?;
            match op {
                map::FieldOp::Set(s) => elems(s.adds.iter().chain(&s.removes))?,
                map::FieldOp::SetSteps(steps) => elems(steps.iter().map(SetStep::element))?,
                map::FieldOp::Register(v) => elems([v])?,
                map::FieldOp::Map(inner) => map_op(inner)?,
                map::FieldOp::Counter(_) | map::FieldOp::Flag(_) => {}
            }
        }
        Ok(())
    }
    match op {
        Op::Counter(_) => Ok(()),
        Op::Set(s) => elems(s.adds.iter().chain(&s.removes)),
        Op::SetSteps(steps) => elems(steps.iter().map(SetStep::element)),
        Op::Map(m) => map_op(m),
        Op::Hll(es) | Op::GSet(es) => elems(es),
    }
}
