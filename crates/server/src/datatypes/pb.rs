//! The data-type service (`riak_kv_pb_crdt`).
//!
//! Codes: `DtFetchReq` 80 → `DtFetchResp` 81, `DtUpdateReq` 82 →
//! `DtUpdateResp` 83.
//!
//! The bucket type must be active, allow siblings and carry a `datatype`
//! (Riak's error texts otherwise); an operation of another type is refused
//! (`Operation type is ... but  bucket type is ...`, Riak's spacing). The
//! `default` type means a 1.4 counter, as riak_kv_pb_crdt's adapter does:
//! a counter operation goes to [`super::counter_pb`]'s path, anything else is
//! `non-counter operation on default bucket`. `include_context` (default
//! true) adds the opaque context of sets and maps; `return_body` answers
//! the new value; an update without a key gets a generated one, returned.

use crate::api::pb::{check_bk, decode};
use crate::crdt::map::{Field, FieldKind, FieldOp, FieldValue, MapOp};
use crate::crdt::{Crdt, DataType, Op, SetOp, Value};
use crate::datatypes::check_datatype;
use crate::error::RequestError;
use crate::kv::Kv;
use crate::kv::PutOpts;
use crate::object::unique_id;
use crate::pb::{self, code, frame_msg};
use crate::vnode::merge::CrdtUpdate;
use std::collections::BTreeMap;
use std::sync::Arc;

fn bad(m: impl Into<String>) -> RequestError {
    RequestError::Invalid(m.into())
}

/// The storage bucket and datatype of a typed data-type request.
fn target(kv: &Kv, btype: &[u8], bucket: &[u8]) -> Result<(Vec<u8>, DataType), RequestError> {
    let sb = kv
        .types()
        .storage_bucket(Some(btype), bucket)
        .map_err(|e| match e {
            RequestError::Invalid(m) if m.contains("no_type") => bad(format!(
                "Error no bucket type `<<\"{}\">>` (no_type)",
                String::from_utf8_lossy(btype)
            )),
            other => other,
        })?;
    let t = check_datatype(&kv.props().get(&sb))?;
    Ok((sb, t))
}

/// `DtFetchReq`.
pub(crate) async fn fetch(kv: &Arc<Kv>, body: &[u8]) -> Result<Vec<Vec<u8>>, RequestError> {
    let r: pb::DtFetchReq = decode(body)?;
    check_bk(&r.bucket, Some(&r.key))?;
    let opts = crate::api::pb::read_opts!(r);
    if r.r#type == b"default" {
        let v = super::counter_pb::get_value(kv, &r.bucket, &r.key, &opts).await?;
        return Ok(vec![frame_msg(
            code::DT_FETCH_RESP,
            &pb::DtFetchResp {
                context: None,
                r#type: DataType::Counter.pb_number(),
                value: v.map(|c| pb::DtValue {
                    counter_value: Some(c),
                    ..Default::default()
                }),
            },
        )]);
    }
    let (sb, t) = target(kv, &r.r#type, &r.bucket)?;
    let found = crate::kv::within(r.timeout, super::fetch(kv, &sb, &r.key, t, &opts)).await?;
    let with_ctx = r.include_context.unwrap_or(true);
    Ok(vec![frame_msg(
        code::DT_FETCH_RESP,
        &pb::DtFetchResp {
            context: found.as_ref().filter(|_| with_ctx).and_then(Crdt::context),
            r#type: t.pb_number(),
            value: found.map(|c| dt_value(&c.value())),
        },
    )])
}

/// `DtUpdateReq`.
pub(crate) async fn update(kv: &Arc<Kv>, body: &[u8]) -> Result<Vec<Vec<u8>>, RequestError> {
    let r: pb::DtUpdateReq = decode(body)?;
    check_bk(&r.bucket, r.key.as_deref())?;
    let op = op_from_pb(&r.op)?;
    if r.r#type == b"default" {
        let Op::Counter(n) = op else {
            return Err(bad("non-counter operation on default bucket"));
        };
        let key = r
            .key
            .clone()
            .ok_or_else(|| bad("Key cannot be zero-length"))?;
        let opts = PutOpts {
            w: r.w,
            dw: r.dw,
            pw: r.pw,
            ..PutOpts::default()
        };
        let v = super::counter_pb::update_value(kv, &r.bucket, &key, n, &opts).await?;
        return Ok(vec![frame_msg(
            code::DT_UPDATE_RESP,
            &pb::DtUpdateResp {
                counter_value: r.return_body.unwrap_or(false).then_some(v),
                ..Default::default()
            },
        )]);
    }
    let (sb, t) = target(kv, &r.r#type, &r.bucket)?;
    if op.data_type() != t {
        return Err(bad(format!(
            "Operation type is `{}` but  bucket type is `{}`.",
            op.data_type().name(),
            t.name()
        )));
    }
    let (key, generated) = match r.key {
        Some(k) => (k, false),
        None => (unique_id(), true),
    };
    let update = CrdtUpdate {
        datatype: t,
        op,
        context: r.context.filter(|c| !c.is_empty()),
    };
    let opts = PutOpts {
        w: r.w,
        dw: r.dw,
        pw: r.pw,
        n_val: r.n_val,
        sloppy_quorum: r.sloppy_quorum,
        node_confirms: r.node_confirms,
        ..PutOpts::default()
    };
    let written = crate::kv::within(r.timeout, super::update(kv, &sb, &key, update, &opts)).await?;
    let mut resp = pb::DtUpdateResp {
        key: generated.then_some(key),
        ..Default::default()
    };
    if r.return_body.unwrap_or(false) {
        let value = crate::object::datatype::value_of(&written, t)
            .map_err(|e| RequestError::Storage(e.to_string()))?
            .ok_or_else(|| RequestError::Storage("the update wrote no value".into()))?;
        if r.include_context.unwrap_or(true) {
            resp.context = value.context();
        }
        match value.value() {
            Value::Counter(c) => resp.counter_value = Some(c),
            Value::Set(s) => resp.set_value = s,
            Value::Map(m) => resp.map_value = map_entries(&m),
            Value::Hll(h) => resp.hll_value = Some(h),
            Value::GSet(g) => resp.gset_value = g,
        }
    }
    Ok(vec![frame_msg(code::DT_UPDATE_RESP, &resp)])
}

/// A value as `DtValue`.
fn dt_value(v: &Value) -> pb::DtValue {
    let mut out = pb::DtValue::default();
    match v {
        Value::Counter(c) => out.counter_value = Some(*c),
        Value::Set(s) => out.set_value = s.clone(),
        Value::Map(m) => out.map_value = map_entries(m),
        Value::Hll(h) => out.hll_value = Some(*h),
        Value::GSet(g) => out.gset_value = g.clone(),
    }
    out
}

fn map_entries(m: &BTreeMap<Field, FieldValue>) -> Vec<pb::MapEntry> {
    m.iter()
        .map(|((name, kind), v)| {
            let mut e = pb::MapEntry {
                field: pb::MapField {
                    name: name.clone(),
                    r#type: *kind as i32,
                },
                ..Default::default()
            };
            match v {
                FieldValue::Counter(c) => e.counter_value = Some(*c),
                FieldValue::Set(s) => e.set_value = s.clone(),
                FieldValue::Register(r) => e.register_value = Some(r.clone()),
                FieldValue::Flag(f) => e.flag_value = Some(*f),
                FieldValue::Map(inner) => e.map_value = map_entries(inner),
            }
            e
        })
        .collect()
}

/// A `DtOp` as an operation (exactly one of its operations must be set).
pub(crate) fn op_from_pb(op: &pb::DtOp) -> Result<Op, RequestError> {
    let ops = [
        op.counter_op.is_some(),
        op.set_op.is_some(),
        op.map_op.is_some(),
        op.hll_op.is_some(),
        op.gset_op.is_some(),
    ];
    if ops.iter().filter(|x| **x).count() != 1 {
        return Err(bad(
            "Unknown operation: a DtOp must hold exactly one operation",
        ));
    }
    Ok(if let Some(c) = &op.counter_op {
        Op::Counter(c.increment.unwrap_or(1))
    } else if let Some(s) = &op.set_op {
        Op::Set(set_op(s))
    } else if let Some(m) = &op.map_op {
        Op::Map(map_op(m, 1)?)
    } else if let Some(h) = &op.hll_op {
        Op::Hll(h.adds.clone())
    } else if let Some(g) = &op.gset_op {
        Op::GSet(g.adds.clone())
    } else {
        return Err(bad("Unknown operation"));
    })
}

fn set_op(s: &pb::SetOp) -> SetOp {
    SetOp {
        adds: s.adds.clone(),
        removes: s.removes.clone(),
    }
}

fn field(f: &pb::MapField) -> Result<Field, RequestError> {
    let kind = u8::try_from(f.r#type)
        .ok()
        .and_then(FieldKind::from_u8)
        .ok_or_else(|| bad(format!("Unknown map field type {}", f.r#type)))?;
    Ok((f.name.clone(), kind))
}

fn map_op(m: &pb::MapOp, depth: usize) -> Result<MapOp, RequestError> {
    if depth > crate::limits::CRDT_MAX_DEPTH {
        return Err(bad("data type limit exceeded: maps nested too deep"));
    }
    let removes = m.removes.iter().map(field).collect::<Result<Vec<_>, _>>()?;
    let mut updates = Vec::with_capacity(m.updates.len());
    for u in &m.updates {
        let f = field(&u.field)?;
        let fop = match f.1 {
            FieldKind::Counter => u
                .counter_op
                .as_ref()
                .map(|c| FieldOp::Counter(c.increment.unwrap_or(1))),
            FieldKind::Set => u.set_op.as_ref().map(|s| FieldOp::Set(set_op(s))),
            FieldKind::Register => u.register_op.clone().map(FieldOp::Register),
            FieldKind::Flag => match u.flag_op {
                Some(1) => Some(FieldOp::Flag(true)),
                Some(2) => Some(FieldOp::Flag(false)),
                _ => None,
            },
            FieldKind::Map => match &u.map_op {
                Some(inner) => Some(FieldOp::Map(map_op(inner, depth + 1)?)),
                None => None,
            },
        };
        let fop = fop.ok_or_else(|| {
            bad(format!(
                "Map update of field {} has no operation of its type",
                String::from_utf8_lossy(&f.0)
            ))
        })?;
        updates.push((f, fop));
    }
    Ok(MapOp { removes, updates })
}
