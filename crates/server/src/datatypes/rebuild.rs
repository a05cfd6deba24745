//! A data-type value rebuilt from what a `DtFetchResp` shows, for
//! `basalt migrate` (moving data in from a Riak cluster): Riak stores data
//! types in its own binary encoding (`riak_kv_crdt`), which Basalt does
//! not read, so the migration fetches each value with `DtFetchReq` and
//! builds a Basalt state holding that value, as one event of one fixed
//! actor ([`MIGRATE_ACTOR`]).
//!
//! The state is a pure function of the fetched value (and of `ts_us`,
//! the registers' timestamp, which the caller takes from the source
//! object): fetching the same value twice builds equal bytes, so a
//! migration that copies a key again (after a crash, on a later sync
//! pass) merges into what it wrote before without a change.
//!
//! What is lost: the source's per-actor history inside the value (a
//! counter's per-actor increments, the add-dots of set elements, map
//! fields' clocks). The value reads the same; an update the source took
//! concurrently with the copy is carried by the next sync pass, whose
//! newer object clock replaces the copied state (`docs/operations.md`
//! "Migrating from Riak"). HyperLogLogs cannot be rebuilt: the PB API
//! hands out only their estimate.

use super::pb::op_from_pb;
use crate::crdt::{Crdt, DataType};
use crate::pb;

/// The actor of every rebuilt value's single event.
pub const MIGRATE_ACTOR: &[u8] = b"basalt-migrate";

/// Why a fetched value could not be rebuilt.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RebuildError {
    /// The fetch answered another type than the bucket's.
    #[error("the source answered a {got} for a {want} bucket")]
    WrongType {
        /// The bucket type's `datatype`.
        want: &'static str,
        /// What the fetch answered.
        got: i32,
    },
    /// An HLL: only its estimate crosses the PB API.
    #[error("hll values cannot be copied: Riak's DtFetchResp holds only the estimate")]
    Hll,
    /// The value passes a data-type limit or is otherwise refused.
    #[error("data type value refused: {0}")]
    Refused(String),
}

/// A Basalt state of type `t` whose value is `resp`'s (no value: the
/// type's empty value).
pub fn rebuild(t: DataType, resp: &pb::DtFetchResp, ts_us: u64) -> Result<Crdt, RebuildError> {
    if resp.r#type != t.pb_number() {
        return Err(RebuildError::WrongType {
            want: t.name(),
            got: resp.r#type,
        });
    }
    let empty = Crdt::new(t, 14).map_err(|e| RebuildError::Refused(e.to_string()))?;
    let Some(v) = &resp.value else {
        return Ok(empty);
    };
    let op = match t {
        DataType::Counter => pb::DtOp {
            counter_op: Some(pb::CounterOp {
                increment: Some(v.counter_value.unwrap_or(0)),
            }),
            ..Default::default()
        },
        DataType::Set => pb::DtOp {
            set_op: Some(pb::SetOp {
                adds: v.set_value.clone(),
                removes: Vec::new(),
            }),
            ..Default::default()
        },
        DataType::GSet => pb::DtOp {
            gset_op: Some(pb::GSetOp {
                adds: v.gset_value.clone(),
            }),
            ..Default::default()
        },
        DataType::Map => pb::DtOp {
            map_op: Some(map_op(&v.map_value)),
            ..Default::default()
        },
        DataType::Hll => return Err(RebuildError::Hll),
    };
    let op = op_from_pb(&op).map_err(|e| RebuildError::Refused(e.to_string()))?;
    empty
        .update(&op, MIGRATE_ACTOR, None, ts_us)
        .map_err(|e| RebuildError::Refused(e.to_string()))
}

/// The map operation that creates every field of `entries` with its value.
fn map_op(entries: &[pb::MapEntry]) -> pb::MapOp {
    let updates = entries
        .iter()
        .map(|e| {
            let mut u = pb::MapUpdate {
                field: e.field.clone(),
                ..Default::default()
            };
            match pb::map_field::MapFieldType::try_from(e.field.r#type) {
                Ok(pb::map_field::MapFieldType::Counter) => {
                    u.counter_op = Some(pb::CounterOp {
                        increment: Some(e.counter_value.unwrap_or(0)),
                    })
                }
                Ok(pb::map_field::MapFieldType::Set) => {
                    u.set_op = Some(pb::SetOp {
                        adds: e.set_value.clone(),
                        removes: Vec::new(),
                    })
                }
                Ok(pb::map_field::MapFieldType::Register) => {
                    u.register_op = Some(e.register_value.clone().unwrap_or_default())
                }
                Ok(pb::map_field::MapFieldType::Flag) => {
                    u.flag_op = Some(if e.flag_value.unwrap_or(false) {
                        pb::map_update::FlagOp::Enable as i32
                    } else {
                        pb::map_update::FlagOp::Disable as i32
                    })
                }
                Ok(pb::map_field::MapFieldType::Map) => u.map_op = Some(map_op(&e.map_value)),
                // An unknown field type: op_from_pb names it.
                Err(_) => {}
            }
            u
        })
        .collect();
    pb::MapOp {
        removes: Vec::new(),
        updates,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::crdt::map::{FieldKind, FieldValue};
    use crate::crdt::Value;

    fn field(name: &[u8], t: pb::map_field::MapFieldType) -> pb::MapField {
        pb::MapField {
            name: name.to_vec(),
            r#type: t as i32,
        }
    }

    #[test]
    fn values_rebuild_to_the_same_value_and_the_same_bytes() {
        use pb::map_field::MapFieldType as F;
        let map = pb::DtFetchResp {
            context: None,
            r#type: DataType::Map.pb_number(),
            value: Some(pb::DtValue {
                map_value: vec![
                    pb::MapEntry {
                        field: field(b"n", F::Counter),
                        counter_value: Some(-4),
                        ..Default::default()
                    },
                    pb::MapEntry {
                        field: field(b"f", F::Flag),
                        flag_value: Some(false),
                        ..Default::default()
                    },
                    pb::MapEntry {
                        field: field(b"r", F::Register),
                        register_value: Some(b"x".to_vec()),
                        ..Default::default()
                    },
                    pb::MapEntry {
                        field: field(b"m", F::Map),
                        map_value: vec![pb::MapEntry {
                            field: field(b"s", F::Set),
                            set_value: vec![b"a".to_vec(), b"b".to_vec()],
                            ..Default::default()
                        }],
                        ..Default::default()
                    },
                ],
                ..Default::default()
            }),
        };
        let a = rebuild(DataType::Map, &map, 7).expect("rebuilds");
        let b = rebuild(DataType::Map, &map, 7).expect("rebuilds");
        assert_eq!(a.encode(), b.encode(), "a pure function of the value");
        let Value::Map(m) = a.value() else {
            panic!("not a map")
        };
        assert_eq!(m.len(), 4);
        assert_eq!(
            m.get(&(b"n".to_vec(), FieldKind::Counter)),
            Some(&FieldValue::Counter(-4))
        );
        assert_eq!(
            m.get(&(b"f".to_vec(), FieldKind::Flag)),
            Some(&FieldValue::Flag(false))
        );
        let counter = pb::DtFetchResp {
            context: None,
            r#type: DataType::Counter.pb_number(),
            value: Some(pb::DtValue {
                counter_value: Some(42),
                ..Default::default()
            }),
        };
        let c = rebuild(DataType::Counter, &counter, 0).expect("rebuilds");
        assert_eq!(c.value(), Value::Counter(42));
        assert!(matches!(
            rebuild(DataType::Set, &counter, 0),
            Err(RebuildError::WrongType { .. })
        ));
        let hll = pb::DtFetchResp {
            r#type: DataType::Hll.pb_number(),
            ..counter
        };
        assert_eq!(rebuild(DataType::Hll, &hll, 0), Err(RebuildError::Hll));
    }
}
