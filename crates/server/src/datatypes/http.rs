//! Data types over HTTP (`riak_kv_wm_crdt`, `riak_kv_wm_counter`):
//!
//! * `GET /types/T/buckets/B/datatypes/K` → `{"type":..,"value":..,
//!   "context":"base64"}` (context for sets and maps, unless
//!   `include_context=false`); 404 `{"type":..,"error":"notfound"}`.
//! * `POST /types/T/buckets/B/datatypes/K` with Riak's JSON operation
//!   (`riak_kv_crdt_json`): a counter `{"increment":N}` / `{"decrement":N}`
//!   / `N`; a set or GSet `{"add":E, "add_all":[..], "remove":E,
//!   "remove_all":[..]}`; an HLL `{"add":E,"add_all":[..]}`; a map
//!   `{"remove":["f_counter",..], "update":{"name_register":"v",
//!   "n_counter":1, "s_set":{..}, "f_flag":"enable", "m_map":{..}}}`; any of
//!   them with `"context"`. 204, or 200 with the value when `returnbody=
//!   true`. `POST .../datatypes` (no key) generates one: 201 + `Location`.
//! * `GET|POST /buckets/B/counters/K`: the 1.4 counter as text (an
//!   integer body to add; `returnvalue=true` answers the new value).
//!
//! A set operation's verbs apply in the order the JSON object lists them,
//! as `riak_kv_crdt_json` reads them (`{update, [Op, ...]}`, applied in
//! turn by riak_dt): `{"remove":"a","add":"a"}` keeps `a`. The same holds
//! inside a nested `"update"` object (or list) and for the set fields of
//! maps at any depth. A map operation applies its field removes first,
//! then its field updates in document order, as `riak_kv_crdt_json` builds
//! it. (PB's `SetOp` applies adds, then removes, as riak_pb_dt_codec.)

// Handlers return ready-made error `Response`s on the (rare) failure path.
#![allow(clippy::result_large_err)]

use crate::api::http::{bad, error_response, json, query, read_body, text, Shared};
use crate::crdt::map::{Field, FieldKind, FieldOp, FieldValue, MapOp};
use crate::crdt::{Crdt, DataType, Op, SetStep, Value};
use crate::error::RequestError;
use crate::kv::Kv;
use crate::kv::{GetOpts, PutOpts};
use crate::object::unique_id;
use crate::vnode::merge::CrdtUpdate;
use axum::extract::{Path, Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use serde_json::{json, Map as JsonMap, Value as Json};
use std::collections::BTreeMap;
use std::sync::Arc;

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::STANDARD;

/// Largest JSON operation body.
const MAX_OP_BODY_BYTES: usize = crate::limits::CRDT_MAX_ENCODED_BYTES;

/// Query parameters of a data-type request, as `riak_kv_wm_crdt` and
/// `riak_kv_wm_counter` take them: the quorums `r`, `pr`, `w`, `dw`, `pw`,
/// `node_confirms`, the booleans `notfound_ok` and `basic_quorum` (`true|
/// false|default`), `include_context`, `returnbody` (`returnvalue` for the
/// 1.4 counters), `timeout`; a bad value is a 400 naming it.
#[derive(Default)]
struct Params {
    get: GetOpts,
    put: PutOpts,
    returnbody: bool,
    include_context: bool,
    timeout: Option<u32>,
}

fn params(req: &Request, body_key: &str) -> Result<Params, Response> {
    let mut p = Params {
        include_context: true,
        ..Params::default()
    };
    let boolean = |k: &str, v: &str| match v.to_ascii_lowercase().as_str() {
        "true" => Ok(true),
        "false" => Ok(false),
        _ => Err(bad(format!("{k} query parameter must be true or false"))),
    };
    let quorum = |k: &str, v: &str| crate::api::http::parse_quorum(k, v).map(Some).map_err(bad);
    let option_boolean =
        |k: &str, v: &str| crate::api::http::objects::option_boolean(k, v).map_err(bad);
    for (k, v) in query(req) {
        match k.as_str() {
            "r" => p.get.r = quorum(&k, &v)?,
            "pr" => p.get.pr = quorum(&k, &v)?,
            "w" => p.put.w = quorum(&k, &v)?,
            "dw" => p.put.dw = quorum(&k, &v)?,
            "pw" => p.put.pw = quorum(&k, &v)?,
            "node_confirms" => p.put.node_confirms = quorum(&k, &v)?,
            "notfound_ok" => p.get.notfound_ok = option_boolean(&k, &v)?,
            "basic_quorum" => p.get.basic_quorum = option_boolean(&k, &v)?,
            "include_context" => p.include_context = boolean(&k, &v)?,
            "timeout" => {
                p.timeout = Some(v.parse().map_err(|_| {
                    bad(format!(
                        "timeout query parameter must be an integer greater than 0, {v} is invalid"
                    ))
                })?)
            }
            k if k == body_key => p.returnbody = boolean(k, &v)?,
            _ => {}
        }
    }
    Ok(p)
}

/// The storage bucket and data type of `/types/T/buckets/B`, with
/// riak_kv_wm_crdt's answers (404 unknown type, 403 not a data-type
/// bucket, 301 to the counters URL for the default type).
fn target(kv: &Kv, t: &str, b: &str, k: Option<&str>) -> Result<(Vec<u8>, DataType), Response> {
    if t == "default" {
        let loc = format!(
            "/buckets/{}/counters/{}",
            crate::api::http::pct_encode(b.as_bytes()),
            crate::api::http::pct_encode(k.unwrap_or_default().as_bytes())
        );
        let mut r = text(
            StatusCode::MOVED_PERMANENTLY,
            "Counters in the default bucket-type should use the legacy URL",
        );
        if let Ok(v) = HeaderValue::from_str(&loc) {
            r.headers_mut().insert(header::LOCATION, v);
        }
        return Err(r);
    }
    if kv.types().get(t).is_none() {
        return Err(text(
            StatusCode::NOT_FOUND,
            format!("Unknown bucket type: {t}"),
        ));
    }
    let sb = kv
        .types()
        .storage_bucket(Some(t.as_bytes()), b.as_bytes())
        .map_err(error_response)?;
    let dt = crate::datatypes::check_datatype(&kv.props().get(&sb))
        .map_err(|e| text(StatusCode::FORBIDDEN, e.to_string()))?;
    Ok((sb, dt))
}

fn value_json(v: &Value) -> Json {
    match v {
        Value::Counter(c) => json!(c),
        Value::Set(s) | Value::GSet(s) => Json::from(
            s.iter()
                .map(|e| crate::api::http::js(e))
                .collect::<Vec<_>>(),
        ),
        Value::Map(m) => map_json(m),
        Value::Hll(h) => json!(h),
    }
}

fn kind_name(k: FieldKind) -> &'static str {
    match k {
        FieldKind::Counter => "counter",
        FieldKind::Set => "set",
        FieldKind::Register => "register",
        FieldKind::Flag => "flag",
        FieldKind::Map => "map",
    }
}

fn map_json(m: &BTreeMap<Field, FieldValue>) -> Json {
    let mut out = JsonMap::new();
    for ((name, kind), v) in m {
        let key = format!("{}_{}", String::from_utf8_lossy(name), kind_name(*kind));
        let val = match v {
            FieldValue::Counter(c) => json!(c),
            FieldValue::Set(s) => Json::from(
                s.iter()
                    .map(|e| crate::api::http::js(e))
                    .collect::<Vec<_>>(),
            ),
            FieldValue::Register(r) => crate::api::http::js(r),
            FieldValue::Flag(f) => json!(f),
            FieldValue::Map(inner) => map_json(inner),
        };
        out.insert(key, val);
    }
    Json::Object(out)
}

fn body_json(t: DataType, c: &Crdt, with_ctx: bool) -> Json {
    let mut o = json!({ "type": t.name(), "value": value_json(&c.value()) });
    if let (Some(ctx), true, Some(m)) = (c.context(), with_ctx, o.as_object_mut()) {
        m.insert("context".into(), Json::from(B64.encode(ctx)));
    }
    o
}

/// `GET /types/T/buckets/B/datatypes/K`.
pub async fn fetch(
    State(kv): Shared,
    Path((t, b, k)): Path<(String, String, String)>,
    req: Request,
) -> Response {
    let (sb, dt) = match target(&kv, &t, &b, Some(&k)) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let p = match params(&req, "returnbody") {
        Ok(p) => p,
        Err(r) => return r,
    };
    let found =
        crate::kv::within(p.timeout, super::fetch(&kv, &sb, k.as_bytes(), dt, &p.get)).await;
    match found {
        Ok(Some(c)) => json(StatusCode::OK, &body_json(dt, &c, p.include_context)),
        Ok(None) => json(
            StatusCode::NOT_FOUND,
            &json!({ "type": dt.name(), "error": "notfound" }),
        ),
        Err(e) => error_response(e),
    }
}

/// `POST /types/T/buckets/B/datatypes/K`.
pub async fn update(
    State(kv): Shared,
    Path((t, b, k)): Path<(String, String, String)>,
    req: Request,
) -> Response {
    post(kv, t, b, Some(k), req).await
}

/// `POST /types/T/buckets/B/datatypes` (a generated key).
pub async fn update_new(
    State(kv): Shared,
    Path((t, b)): Path<(String, String)>,
    req: Request,
) -> Response {
    post(kv, t, b, None, req).await
}

async fn post(kv: Arc<Kv>, t: String, b: String, k: Option<String>, req: Request) -> Response {
    let (sb, dt) = match target(&kv, &t, &b, k.as_deref()) {
        Ok(x) => x,
        Err(r) => return r,
    };
    let p = match params(&req, "returnbody") {
        Ok(p) => p,
        Err(r) => return r,
    };
    let (_, body) = match read_body(req, MAX_OP_BODY_BYTES).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let (op, context) = match update_from_body(dt, &body) {
        Ok(x) => x,
        Err(m) => return bad(m),
    };
    let generated = k.is_none();
    let key = k.map_or_else(unique_id, String::into_bytes);
    let update = CrdtUpdate {
        datatype: dt,
        op,
        context,
    };
    let written = crate::kv::within(p.timeout, super::update(&kv, &sb, &key, update, &p.put)).await;
    let written = match written {
        Ok(w) => w,
        Err(e) => return error_response(e),
    };
    let mut resp = if p.returnbody {
        match crate::object::datatype::value_of(&written, dt) {
            Ok(Some(c)) => json(StatusCode::OK, &body_json(dt, &c, p.include_context)),
            Ok(None) => StatusCode::NO_CONTENT.into_response(),
            Err(e) => error_response(RequestError::Storage(e.to_string())),
        }
    } else {
        StatusCode::NO_CONTENT.into_response()
    };
    if generated {
        *resp.status_mut() = StatusCode::CREATED;
        let loc = format!(
            "/types/{}/buckets/{}/datatypes/{}",
            crate::api::http::pct_encode(t.as_bytes()),
            crate::api::http::pct_encode(b.as_bytes()),
            crate::api::http::pct_encode(&key)
        );
        if let Ok(v) = HeaderValue::from_str(&loc) {
            resp.headers_mut().insert(header::LOCATION, v);
        }
    }
    resp
}

/// A JSON value whose objects keep their members in document order
/// (`serde_json::Value` sorts them, and `riak_kv_crdt_json` applies a
/// set's verbs and a map's updates in the order the JSON gives them).
enum Doc {
    Object(Vec<(String, Doc)>),
    Array(Vec<Doc>),
    Leaf(Json),
}

impl Doc {
    /// The plain JSON value (for the parsers of leaves and for messages).
    fn json(&self) -> Json {
        match self {
            Doc::Object(m) => Json::Object(m.iter().map(|(k, v)| (k.clone(), v.json())).collect()),
            Doc::Array(a) => Json::Array(a.iter().map(Doc::json).collect()),
            Doc::Leaf(j) => j.clone(),
        }
    }
}

impl<'de> serde::Deserialize<'de> for Doc {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Doc;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_bool<E>(self, v: bool) -> Result<Doc, E> {
                Ok(Doc::Leaf(Json::Bool(v)))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Doc, E> {
                Ok(Doc::Leaf(Json::from(v)))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Doc, E> {
                Ok(Doc::Leaf(Json::from(v)))
            }
            fn visit_f64<E>(self, v: f64) -> Result<Doc, E> {
                Ok(Doc::Leaf(Json::from(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Doc, E> {
                Ok(Doc::Leaf(Json::from(v)))
            }
            fn visit_string<E>(self, v: String) -> Result<Doc, E> {
                Ok(Doc::Leaf(Json::String(v)))
            }
            fn visit_unit<E>(self) -> Result<Doc, E> {
                Ok(Doc::Leaf(Json::Null))
            }
            fn visit_none<E>(self) -> Result<Doc, E> {
                Ok(Doc::Leaf(Json::Null))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Doc, A::Error> {
                let mut out = Vec::new();
                while let Some(v) = a.next_element::<Doc>()? {
                    out.push(v);
                }
                Ok(Doc::Array(out))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut m: A) -> Result<Doc, A::Error> {
                let mut out = Vec::new();
                while let Some(kv) = m.next_entry::<String, Doc>()? {
                    out.push(kv);
                }
                Ok(Doc::Object(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// A JSON update body (`riak_kv_crdt_json`): the operation and the context.
pub(crate) fn update_from_body(t: DataType, body: &[u8]) -> Result<(Op, Option<Vec<u8>>), String> {
    let mut doc: Doc =
        serde_json::from_slice(body).map_err(|e| format!("Couldn't decode JSON: {e}"))?;
    let context = match &mut doc {
        Doc::Object(m) => match m.iter().position(|(k, _)| k == "context") {
            None => None,
            Some(i) => match m.remove(i).1 {
                Doc::Leaf(Json::String(s)) => Some(
                    B64.decode(s.as_bytes())
                        .map_err(|_| "Malformed context".to_string())?,
                ),
                _ => return Err("Malformed context".into()),
            },
        },
        _ => None,
    };
    let op = match t {
        DataType::Counter => Op::Counter(counter_op(&doc.json())?),
        DataType::Set => Op::SetSteps(set_steps(&doc, &doc)?),
        DataType::GSet => Op::GSet(adds_op(&doc.json(), "gset")?),
        DataType::Hll => Op::Hll(adds_op(&doc.json(), "hll")?),
        DataType::Map => Op::Map(map_op(&doc, 1)?),
    };
    Ok((op, context))
}

fn invalid(t: &str, j: &Json) -> String {
    format!("Invalid operation on datatype '{t}': {j}")
}

fn counter_op(j: &Json) -> Result<i64, String> {
    if let Some(n) = j.as_i64() {
        return Ok(n);
    }
    match j {
        Json::String(s) if s == "increment" => return Ok(1),
        Json::String(s) if s == "decrement" => return Ok(-1),
        _ => {}
    }
    let o = j
        .as_object()
        .filter(|o| o.len() == 1)
        .ok_or_else(|| invalid("counter", j))?;
    match (
        o.get("increment").and_then(Json::as_i64),
        o.get("decrement").and_then(Json::as_i64),
    ) {
        (Some(n), None) => Ok(n),
        (None, Some(n)) => n.checked_neg().ok_or_else(|| invalid("counter", j)),
        _ => Err(invalid("counter", j)),
    }
}

/// An HLL's or GSet's operation: its adds (`add`, `add_all`, a nested
/// `update` object or list of them); any other verb is refused.
fn adds_op(j: &Json, t: &str) -> Result<Vec<Vec<u8>>, String> {
    fn walk(j: &Json, t: &str, whole: &Json, out: &mut Vec<Vec<u8>>) -> Result<(), String> {
        let bad = || invalid(t, whole);
        let elem = |v: &Json| v.as_str().map(|s| s.as_bytes().to_vec()).ok_or_else(bad);
        for (verb, v) in j.as_object().ok_or_else(bad)? {
            match (verb.as_str(), v) {
                ("add", v) => out.push(elem(v)?),
                ("add_all", Json::Array(a)) => {
                    for e in a {
                        out.push(elem(e)?);
                    }
                }
                ("update", Json::Array(ops)) => {
                    for op in ops {
                        walk(op, t, whole, out)?;
                    }
                }
                ("update", v) => walk(v, t, whole, out)?,
                _ => return Err(bad()),
            }
        }
        Ok(())
    }
    let mut out = Vec::new();
    walk(j, t, j, &mut out)?;
    Ok(out)
}

/// A set operation's steps in the order its JSON gives them, as
/// `riak_kv_crdt_json` reads them (`{update, [Op, ...]}` applied in turn):
/// `{"remove":"a","add":"a"}` keeps `a`, `{"add":"a","remove":"a"}` does
/// not. A nested `"update"` (an object, or a list of objects) contributes
/// its steps in its own order. `whole` is the operation the error names.
fn set_steps(doc: &Doc, whole: &Doc) -> Result<Vec<SetStep>, String> {
    let bad = || invalid("set", &whole.json());
    let Doc::Object(members) = doc else {
        return Err(bad());
    };
    let elem = |v: &Doc| match v {
        Doc::Leaf(Json::String(s)) => Ok(s.as_bytes().to_vec()),
        _ => Err(bad()),
    };
    let elems = |v: &Doc| match v {
        Doc::Array(a) => a.iter().map(elem).collect::<Result<Vec<_>, _>>(),
        _ => Err(bad()),
    };
    let mut steps = Vec::new();
    for (verb, v) in members {
        match verb.as_str() {
            "add" => steps.push(SetStep::Add(elem(v)?)),
            "remove" => steps.push(SetStep::Remove(elem(v)?)),
            "add_all" => steps.extend(elems(v)?.into_iter().map(SetStep::Add)),
            "remove_all" => steps.extend(elems(v)?.into_iter().map(SetStep::Remove)),
            "update" => match v {
                Doc::Array(ops) => {
                    for op in ops {
                        steps.extend(set_steps(op, whole)?);
                    }
                }
                _ => steps.extend(set_steps(v, whole)?),
            },
            _ => return Err(bad()),
        }
    }
    Ok(steps)
}

/// `name_type` → a field (`riak_kv_crdt_json`'s `^(.*)_(counter|set|...)$`).
fn field_from_json(s: &str) -> Result<Field, String> {
    let (name, kind) = s
        .rsplit_once('_')
        .ok_or_else(|| format!("Invalid map field name '{s}'"))?;
    let kind = match kind {
        "counter" => FieldKind::Counter,
        "set" => FieldKind::Set,
        "register" => FieldKind::Register,
        "flag" => FieldKind::Flag,
        "map" => FieldKind::Map,
        _ => return Err(format!("Invalid map field name '{s}'")),
    };
    Ok((name.as_bytes().to_vec(), kind))
}

/// A map operation: `{"remove": F | [F, ...], "update": {F: op, ...}}`,
/// removes first, then the updates in document order (a set field's verbs
/// in theirs, a nested map's likewise).
fn map_op(doc: &Doc, depth: usize) -> Result<MapOp, String> {
    if depth > crate::limits::CRDT_MAX_DEPTH {
        return Err("data type limit exceeded: maps nested too deep".into());
    }
    let bad = || invalid("map", &doc.json());
    let Doc::Object(members) = doc else {
        return Err(bad());
    };
    let mut out = MapOp::default();
    for (verb, v) in members {
        match (verb.as_str(), v) {
            ("remove", Doc::Leaf(Json::String(s))) => out.removes.push(field_from_json(s)?),
            ("remove", Doc::Array(a)) => {
                for f in a {
                    let Doc::Leaf(Json::String(s)) = f else {
                        return Err(bad());
                    };
                    out.removes.push(field_from_json(s)?);
                }
            }
            ("update", Doc::Object(ups)) => {
                for (name, fop) in ups {
                    let f = field_from_json(name)?;
                    let op = match f.1 {
                        FieldKind::Counter => FieldOp::Counter(counter_op(&fop.json())?),
                        FieldKind::Set => FieldOp::SetSteps(set_steps(fop, fop)?),
                        FieldKind::Register => match fop.json() {
                            Json::String(s) => FieldOp::Register(s.into_bytes()),
                            Json::Object(a) if a.len() == 1 => match a.get("assign") {
                                Some(Json::String(s)) => FieldOp::Register(s.as_bytes().to_vec()),
                                _ => return Err(invalid("register", &fop.json())),
                            },
                            other => return Err(invalid("register", &other)),
                        },
                        FieldKind::Flag => match fop.json().as_str() {
                            Some("enable") => FieldOp::Flag(true),
                            Some("disable") => FieldOp::Flag(false),
                            _ => return Err(invalid("flag", &fop.json())),
                        },
                        FieldKind::Map => FieldOp::Map(map_op(fop, depth + 1)?),
                    };
                    out.updates.push((f, op));
                }
            }
            _ => return Err(bad()),
        }
    }
    Ok(out)
}

/// `GET /buckets/B/counters/K`: the value as text, 404 if none.
pub async fn counter_get(
    State(kv): Shared,
    Path((b, k)): Path<(String, String)>,
    req: Request,
) -> Response {
    let p = match params(&req, "returnvalue") {
        Ok(p) => p,
        Err(r) => return r,
    };
    let got = super::counter_pb::get_value(&kv, b.as_bytes(), k.as_bytes(), &p.get).await;
    match got {
        Ok(Some(v)) => plain(StatusCode::OK, v.to_string()),
        Ok(None) => text(StatusCode::NOT_FOUND, "not found"),
        Err(e) => error_response(e),
    }
}

/// `POST /buckets/B/counters/K` with an integer body.
pub async fn counter_post(
    State(kv): Shared,
    Path((b, k)): Path<(String, String)>,
    req: Request,
) -> Response {
    let p = match params(&req, "returnvalue") {
        Ok(p) => p,
        Err(r) => return r,
    };
    let (_, body) = match read_body(req, 64).await {
        Ok(x) => x,
        Err(r) => return r,
    };
    let amount: i64 = match std::str::from_utf8(&body)
        .ok()
        .and_then(|s| s.trim().parse().ok())
    {
        Some(n) => n,
        None => return bad("Counter increment must be an integer"),
    };
    let r = super::counter_pb::update_value(&kv, b.as_bytes(), k.as_bytes(), amount, &p.put).await;
    match r {
        Ok(v) if p.returnbody => plain(StatusCode::OK, v.to_string()),
        Ok(_) => StatusCode::NO_CONTENT.into_response(),
        Err(RequestError::Invalid(m)) if m.contains("allow_mult") => text(StatusCode::CONFLICT, m),
        Err(e) => error_response(e),
    }
}

/// A `text/plain` body exactly as given (a counter's value, no newline).
fn plain(status: StatusCode, body: String) -> Response {
    (status, [(header::CONTENT_TYPE, "text/plain")], body).into_response()
}
