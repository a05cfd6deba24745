//! The MapReduce job Riak clients send, as JSON (`riak_kv_mapred_json`):
//! `{"inputs": ..., "query": [...], "timeout": ms}`, parsed into a [`Job`]
//! with an error naming the field for anything we do not run.
//!
//! Inputs: a bucket (`"b"`, `["type", "b"]`, `{"bucket": ...}`), a bucket
//! with `key_filters`, a list of `[b, k]` / `[b, k, keydata]` /
//! `[b, k, keydata, type]`, or a 2i query (`{"bucket", "index", "key"}` or
//! `start` / `end`). Phases: `{"map": spec}`, `{"reduce": spec}`,
//! `{"link": {"bucket", "tag"}}`; each with `keep` (default: only the last
//! phase) and `arg`. Functions: `{"language": "erlang", "module",
//! "function"}` (the built-ins of [`super::builtins`]) or `{"language":
//! "javascript", "source" | "name"}`.

use super::builtins::Builtin;
pub use super::input::{BucketName, KeyInput};
use super::keyfilter::KeyFilter;
use crate::limits::{
    MAPRED_DEFAULT_TIMEOUT, MAPRED_MAX_LISTED_INPUTS, MAPRED_MAX_PHASES, MAPRED_MAX_TIMEOUT,
};
use crate::mapred::js::JsFun;
use serde_json::{Map, Value};
use std::time::Duration;

/// Riak's answer to an Erlang source function (`{"language": "erlang",
/// "source": ...}` or `"bucket"` / `"key"`; `{strfun, ...}` in an
/// Erlang-term job): Riak accepts the job, then its worker fails to start
/// because `allow_strfun` is off, and the PB client reads this (HTTP:
/// `{"error":"worker_startup_failed"}`). Basalt never compiles Erlang.
/// Clients look for `worker_startup_failed` (the Python client then says
/// "May have tried erlang strfun when not allowed").
pub const STRFUN_REFUSED: &str = "Error sending inputs: {error,worker_startup_failed}";

/// A bad job: the message names the field.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct JobError(pub String);

fn bad<T>(msg: impl Into<String>) -> Result<T, JobError> {
    Err(JobError(msg.into()))
}

/// A parsed job.
#[derive(Debug, Clone, PartialEq)]
pub struct Job {
    /// Where the objects come from.
    pub inputs: Inputs,
    /// The phases, in order (may be empty: the inputs are the result).
    pub query: Vec<Phase>,
    /// The job's deadline, from its start.
    pub timeout: Duration,
}

/// Where the objects come from.
#[derive(Debug, Clone, PartialEq)]
pub enum Inputs {
    /// Every key of a bucket, optionally filtered by key filters.
    Bucket {
        /// The bucket.
        bucket: BucketName,
        /// Key filters (empty: every key).
        filters: Vec<KeyFilter>,
    },
    /// Listed keys.
    Keys(Vec<KeyInput>),
    /// The keys of a 2i query.
    Index {
        /// The bucket.
        bucket: BucketName,
        /// The index field (`foo_bin`, `foo_int`, `$key`, `$bucket`).
        index: Vec<u8>,
        /// Equal term, or range start.
        start: Vec<u8>,
        /// Range end (`None`: an equality query).
        end: Option<Vec<u8>>,
    },
}

/// A phase's function.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PhaseFun {
    /// A built-in of `riak_kv_mapreduce`.
    Erlang(Builtin),
    /// A built-in of `riak_kv_mapreduce` in a job sent as Erlang terms: as
    /// `Erlang`, but an object value that is not UTF-8 keeps its bytes
    /// (`core::binary_marker`) instead of becoming lossy text.
    ErlangTerms(Builtin),
    /// JavaScript.
    Js(JsFun),
}

/// What a phase does.
#[derive(Debug, Clone, PartialEq)]
pub enum PhaseKind {
    /// Called once per input object.
    Map(PhaseFun),
    /// Called with batches of values and its own previous output.
    Reduce(PhaseFun),
    /// Follows the links of each input object.
    Link {
        /// Only links to this bucket (`None`: any).
        bucket: Option<Vec<u8>>,
        /// Only links with this tag (`None`: any).
        tag: Option<Vec<u8>>,
    },
}

/// One phase.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    /// What it does.
    pub kind: PhaseKind,
    /// Its `arg` (`null` when absent).
    pub arg: Value,
    /// Its output goes to the client.
    pub keep: bool,
}

/// Parses a job's JSON text.
pub fn parse(text: &[u8]) -> Result<Job, JobError> {
    let v: Value = match serde_json::from_slice(text) {
        Ok(v) => v,
        Err(e) => return bad(format!("invalid_json: {e}")),
    };
    let Value::Object(top) = v else {
        return bad("not_json: a job is a JSON object {\"inputs\": ..., \"query\": [...]}");
    };
    let (Some(inputs), Some(query)) = (top.get("inputs"), top.get("query")) else {
        return bad("missing_field: a job needs \"inputs\" and \"query\"");
    };
    let timeout = match top.get("timeout") {
        None | Some(Value::Null) => MAPRED_DEFAULT_TIMEOUT,
        Some(t) => match t.as_f64() {
            Some(ms) if ms > 0.0 => Duration::from_millis(ms as u64).min(MAPRED_MAX_TIMEOUT),
            // As Riak: a timeout that is not a positive number is ignored.
            _ => MAPRED_DEFAULT_TIMEOUT,
        },
    };
    Ok(Job {
        inputs: parse_inputs(inputs).map_err(|e| JobError(format!("inputs: {}", e.0)))?,
        query: parse_query(query).map_err(|e| within(e, "query", ""))?,
        timeout,
    })
}

const INPUT_FORMATS: &str = "valid formats: \"bucket\", [\"type\", \"bucket\"], \
{\"bucket\": B, \"key_filters\": [...]}, [[\"bucket\", \"key\"], [\"bucket\", \"key\", keydata], ...], \
{\"bucket\": B, \"index\": I, \"key\": K} or {\"bucket\": B, \"index\": I, \"start\": S, \"end\": E}";

fn text_bytes(v: &Value, what: &str) -> Result<Vec<u8>, JobError> {
    match v {
        Value::String(s) if !s.is_empty() => Ok(s.clone().into_bytes()),
        _ => bad(format!("{what} must be a non-empty string, got {v}")),
    }
}

/// A bucket: `"b"` or `["type", "b"]`.
fn bucket_name(v: &Value) -> Result<BucketName, JobError> {
    match v {
        Value::String(_) => Ok(BucketName {
            btype: None,
            bucket: text_bytes(v, "bucket")?,
        }),
        Value::Array(a) if a.len() == 2 => Ok(BucketName {
            btype: Some(text_bytes(&a[0], "bucket type")?).filter(|t| t != b"default"),
            bucket: text_bytes(&a[1], "bucket")?,
        }),
        _ => bad(format!(
            "a bucket is \"bucket\" or [\"type\", \"bucket\"], got {v}"
        )),
    }
}

/// A 2i term: a string, or a number (`_int` fields).
fn term(v: &Value, what: &str) -> Result<Vec<u8>, JobError> {
    match v {
        Value::String(s) => Ok(s.clone().into_bytes()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Ok(n.to_string().into_bytes()),
        _ => bad(format!("{what} must be a string or an integer, got {v}")),
    }
}

fn parse_inputs(v: &Value) -> Result<Inputs, JobError> {
    match v {
        Value::String(_) => Ok(Inputs::Bucket {
            bucket: bucket_name(v)?,
            filters: Vec::new(),
        }),
        // ["type", "bucket"]: a typed bucket (a key list holds lists).
        Value::Array(a) if a.len() == 2 && a.iter().all(Value::is_string) => Ok(Inputs::Bucket {
            bucket: bucket_name(v)?,
            filters: Vec::new(),
        }),
        Value::Array(a) => {
            if a.is_empty() {
                return bad("no inputs were given");
            }
            if a.len() > MAPRED_MAX_LISTED_INPUTS {
                return bad(format!(
                    "{} listed inputs; at most {MAPRED_MAX_LISTED_INPUTS}",
                    a.len()
                ));
            }
            a.iter()
                .enumerate()
                .map(|(i, x)| key_input(x).map_err(|e| JobError(format!("[{i}]: {}", e.0))))
                .collect::<Result<Vec<_>, _>>()
                .map(Inputs::Keys)
        }
        Value::Object(o) => object_inputs(o),
        other => bad(format!("unrecognized format {other}; {INPUT_FORMATS}")),
    }
}

fn key_input(v: &Value) -> Result<KeyInput, JobError> {
    let Value::Array(a) = v else {
        return bad(format!(
            "a listed input is [bucket, key] or [bucket, key, keydata], got {v}"
        ));
    };
    if !(2..=4).contains(&a.len()) {
        return bad(format!(
            "a listed input is [bucket, key], [bucket, key, keydata] or [bucket, key, keydata, type], got {v}"
        ));
    }
    let btype = match a.get(3) {
        None | Some(Value::Null) => None,
        Some(t) => Some(text_bytes(t, "bucket type")?).filter(|t| t != b"default"),
    };
    let bucket = match &a[0] {
        Value::Array(_) => bucket_name(&a[0])?,
        b => BucketName {
            btype,
            bucket: text_bytes(b, "bucket")?,
        },
    };
    Ok(KeyInput {
        bucket,
        key: text_bytes(&a[1], "key")?,
        keydata: a.get(2).cloned(),
    })
}

fn object_inputs(o: &Map<String, Value>) -> Result<Inputs, JobError> {
    let Some(b) = o.get("bucket") else {
        if o.contains_key("module") {
            return bad("modfun inputs (an Erlang function generating inputs) are not supported");
        }
        return bad(format!("unrecognized format; {INPUT_FORMATS}"));
    };
    let bucket = bucket_name(b).map_err(|e| JobError(format!("bucket: {}", e.0)))?;
    if o.contains_key("query") {
        return bad("search inputs are not supported (Basalt has no Riak Search)");
    }
    if let Some(index) = o.get("index") {
        let index = text_bytes(index, "index")?;
        if let Some(k) = o.get("key") {
            return Ok(Inputs::Index {
                bucket,
                index,
                start: term(k, "key")?,
                end: None,
            });
        }
        return match (o.get("start"), o.get("end")) {
            (Some(s), Some(e)) => Ok(Inputs::Index {
                bucket,
                index,
                start: term(s, "start")?,
                end: Some(term(e, "end")?),
            }),
            _ => bad("an index input needs \"key\", or \"start\" and \"end\""),
        };
    }
    let filters = match o.get("key_filters") {
        None => Vec::new(),
        Some(f) => {
            let list = super::keyfilter::parse(f)
                .map_err(|e| JobError(format!("key_filters: {}", e.0)))?;
            if list.is_empty() {
                return bad("key_filters: at least one filter");
            }
            list
        }
    };
    Ok(Inputs::Bucket { bucket, filters })
}

/// `e` prefixed with where it happened (`{at}{sep}{e}`), except Riak's
/// [`STRFUN_REFUSED`], which stays as Riak words it.
fn within(e: JobError, at: &str, sep: &str) -> JobError {
    if e.0 == STRFUN_REFUSED {
        return e;
    }
    JobError(format!("{at}{sep}{}", e.0))
}

fn parse_query(v: &Value) -> Result<Vec<Phase>, JobError> {
    let Value::Array(phases) = v else {
        return bad(format!(": the value of \"query\" is not a list: {v}"));
    };
    if phases.len() > MAPRED_MAX_PHASES {
        return bad(format!(
            ": {} phases; at most {MAPRED_MAX_PHASES}",
            phases.len()
        ));
    }
    let last = phases.len().saturating_sub(1);
    phases
        .iter()
        .enumerate()
        .map(|(i, p)| parse_phase(p, i == last).map_err(|e| within(e, &format!("[{i}]"), ".")))
        .collect()
}

fn parse_phase(v: &Value, is_last: bool) -> Result<Phase, JobError> {
    let Some((ty, spec)) = v
        .as_object()
        .filter(|o| o.len() == 1)
        .and_then(|o| o.iter().next())
    else {
        return bad(format!(
            "phase: unrecognized format {v}; valid: {{\"map\": {{...}}}}, {{\"reduce\": {{...}}}}, {{\"link\": {{...}}}}"
        ));
    };
    let Value::Object(spec) = spec else {
        return bad(format!("{ty}: a phase spec is an object, got {spec}"));
    };
    let keep = match spec.get("keep") {
        None => is_last,
        Some(Value::Bool(b)) => *b,
        Some(other) => return bad(format!("{ty}.keep: not a boolean: {other}")),
    };
    let arg = spec.get("arg").cloned().unwrap_or(Value::Null);
    let kind = match ty.as_str() {
        "map" => PhaseKind::Map(phase_fun(spec).map_err(|e| within(e, "map", "."))?),
        "reduce" => PhaseKind::Reduce(phase_fun(spec).map_err(|e| within(e, "reduce", "."))?),
        "link" => {
            let field = |name: &str| match spec.get(name) {
                None => Ok(None),
                Some(Value::String(s)) if s == "_" => Ok(None),
                Some(Value::String(s)) => Ok(Some(s.clone().into_bytes())),
                Some(other) => bad(format!("link.{name}: must be a string, got {other}")),
            };
            PhaseKind::Link {
                bucket: field("bucket")?,
                tag: field("tag")?,
            }
        }
        other => return bad(format!("{other}: unknown phase type (map, reduce or link)")),
    };
    Ok(Phase { kind, arg, keep })
}

/// A map phase's function and `arg` as the job's JSON spec (what
/// [`parse_map_spec`] reads back), to send the phase to another node.
pub fn map_spec_json(fun: &PhaseFun, arg: &Value) -> Value {
    let mut spec = match fun {
        PhaseFun::Erlang(b) => serde_json::json!({
            "language": "erlang", "module": "riak_kv_mapreduce", "function": b.name()}),
        PhaseFun::ErlangTerms(b) => serde_json::json!({
            "language": "erlang", "module": "riak_kv_mapreduce", "function": b.name(),
            "terms": true}),
        PhaseFun::Js(JsFun::Source(s)) => {
            serde_json::json!({"language": "javascript", "source": s})
        }
        PhaseFun::Js(JsFun::Name(n)) => serde_json::json!({"language": "javascript", "name": n}),
    };
    if let Value::Object(o) = &mut spec {
        o.insert("arg".into(), arg.clone());
    }
    spec
}

/// The inverse of [`map_spec_json`].
pub fn parse_map_spec(v: &Value) -> Result<(PhaseFun, Value), JobError> {
    let Value::Object(spec) = v else {
        return bad(format!("a map spec is an object, got {v}"));
    };
    let fun = match phase_fun(spec)? {
        PhaseFun::Erlang(b) if spec.get("terms") == Some(&Value::Bool(true)) => {
            PhaseFun::ErlangTerms(b)
        }
        f => f,
    };
    Ok((fun, spec.get("arg").cloned().unwrap_or(Value::Null)))
}

fn phase_fun(spec: &Map<String, Value>) -> Result<PhaseFun, JobError> {
    let lang = spec.get("language").and_then(Value::as_str);
    match lang {
        Some("erlang") => {
            if spec.contains_key("source") || spec.contains_key("bucket") {
                // Riak: `{strfun, ...}`, refused when its worker starts.
                return bad(STRFUN_REFUSED);
            }
            let module = spec.get("module").and_then(Value::as_str);
            let function = spec.get("function").and_then(Value::as_str);
            match (module, function) {
                (Some(m), Some(f)) => Builtin::find(m, f).map(PhaseFun::Erlang).ok_or_else(|| {
                    JobError(format!(
                        "function: unknown Erlang function {m}:{f} (built-ins: {})",
                        Builtin::names().join(", ")
                    ))
                }),
                _ => bad("module: an Erlang phase needs \"module\" and \"function\""),
            }
        }
        Some("javascript") => {
            if let Some(src) = spec.get("source") {
                return match src {
                    Value::String(s) if !s.trim().is_empty() => {
                        Ok(PhaseFun::Js(JsFun::Source(s.clone())))
                    }
                    _ => bad("source: must be the source of a JavaScript function"),
                };
            }
            if let Some(name) = spec.get("name") {
                return match name {
                    Value::String(s) if !s.is_empty() => Ok(PhaseFun::Js(JsFun::Name(s.clone()))),
                    _ => bad("name: must be the name of a JavaScript function"),
                };
            }
            if spec.contains_key("bucket") || spec.contains_key("key") {
                return bad("bucket: JavaScript stored in a Riak object is not supported; use \"source\" or \"name\"");
            }
            bad("source: a JavaScript phase needs \"source\" or \"name\"")
        }
        Some(other) => bad(format!(
            "language: {other:?} is not a language Basalt runs (erlang built-ins, javascript)"
        )),
        None => bad("language: missing (\"erlang\" or \"javascript\")"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok(s: &str) -> Job {
        parse(s.as_bytes()).unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    fn err(s: &str) -> String {
        match parse(s.as_bytes()) {
            Ok(j) => panic!("{s} parsed: {j:?}"),
            Err(e) => e.0,
        }
    }

    #[test]
    fn inputs_in_every_form() {
        let j = ok(r#"{"inputs":"b","query":[]}"#);
        assert!(
            matches!(&j.inputs, Inputs::Bucket { bucket, filters } if bucket.bucket == b"b" && bucket.btype.is_none() && filters.is_empty())
        );
        assert_eq!(j.timeout, MAPRED_DEFAULT_TIMEOUT);
        let j = ok(r#"{"inputs":["t","b"],"query":[],"timeout":1500}"#);
        assert!(
            matches!(&j.inputs, Inputs::Bucket { bucket, .. } if bucket.btype.as_deref() == Some(&b"t"[..]))
        );
        assert_eq!(j.timeout, Duration::from_millis(1500));
        let j = ok(r#"{"inputs":{"bucket":["t","b"]},"query":[]}"#);
        assert!(
            matches!(&j.inputs, Inputs::Bucket { bucket, .. } if bucket.btype.as_deref() == Some(&b"t"[..]))
        );
        let j = ok(r#"{"inputs":[["b","k1"],["b","k2",{"x":1}],["b","k3",null,"t"]],"query":[]}"#);
        let Inputs::Keys(keys) = &j.inputs else {
            panic!("{j:?}")
        };
        assert_eq!(keys.len(), 3);
        assert_eq!(keys[0].keydata, None);
        assert_eq!(keys[1].keydata, Some(serde_json::json!({"x":1})));
        assert_eq!(keys[2].keydata, Some(Value::Null));
        assert_eq!(keys[2].bucket.btype.as_deref(), Some(&b"t"[..]));
        let j = ok(r#"{"inputs":{"bucket":"b","index":"f_int","start":1,"end":"9"},"query":[]}"#);
        assert_eq!(
            j.inputs,
            Inputs::Index {
                bucket: BucketName {
                    btype: None,
                    bucket: b"b".to_vec()
                },
                index: b"f_int".to_vec(),
                start: b"1".to_vec(),
                end: Some(b"9".to_vec())
            }
        );
        let j = ok(r#"{"inputs":{"bucket":"b","key_filters":[["starts_with","a"]]},"query":[]}"#);
        assert!(matches!(&j.inputs, Inputs::Bucket { filters, .. } if filters.len() == 1));
    }

    #[test]
    fn phases_keep_and_functions() {
        let j = ok(r#"{"inputs":"b","query":[
            {"map":{"language":"javascript","name":"Riak.mapValuesJson"}},
            {"link":{"bucket":"_","tag":"friend","keep":true}},
            {"map":{"language":"erlang","module":"riak_kv_mapreduce","function":"map_object_value","arg":"filter_notfound"}},
            {"reduce":{"language":"javascript","source":"function(v){return v;}"}}]}"#);
        assert_eq!(j.query.len(), 4);
        assert!(!j.query[0].keep);
        assert!(j.query[1].keep);
        assert!(!j.query[2].keep);
        assert!(j.query[3].keep, "the last phase keeps by default");
        assert_eq!(
            j.query[1].kind,
            PhaseKind::Link {
                bucket: None,
                tag: Some(b"friend".to_vec())
            }
        );
        assert_eq!(
            j.query[2].kind,
            PhaseKind::Map(PhaseFun::Erlang(Builtin::MapObjectValue))
        );
        assert_eq!(j.query[2].arg, Value::String("filter_notfound".into()));
        for p in &j.query {
            if let PhaseKind::Map(f) = &p.kind {
                let back =
                    parse_map_spec(&map_spec_json(f, &p.arg)).unwrap_or_else(|e| panic!("{e}"));
                assert_eq!(back, (f.clone(), p.arg.clone()));
            }
        }
    }

    #[test]
    fn bad_jobs_name_the_field() {
        assert!(err("{").starts_with("invalid_json"));
        assert!(err("[1]").starts_with("not_json"));
        assert!(err(r#"{"inputs":"b"}"#).starts_with("missing_field"));
        assert!(err(r#"{"inputs":[],"query":[]}"#).contains("no inputs"));
        assert!(err(r#"{"inputs":5,"query":[]}"#).starts_with("inputs: unrecognized"));
        assert!(err(r#"{"inputs":[["b"]],"query":[]}"#).starts_with("inputs: [0]"));
        assert!(err(r#"{"inputs":"b","query":{}}"#).starts_with("query: the value"));
        let e = err(
            r#"{"inputs":"b","query":[{"map":{"language":"erlang","module":"riak_kv_mapreduce","function":"nope"}}]}"#,
        );
        assert!(
            e.starts_with("query[0].map.function: unknown Erlang function riak_kv_mapreduce:nope"),
            "{e}"
        );
        let e = err(
            r#"{"inputs":"b","query":[{"map":{"language":"erlang","module":"riak_kv_mapreduce","function":"map_object_value"}},{"reduce":{"language":"python","source":"x"}}]}"#,
        );
        assert!(e.starts_with("query[1].reduce.language"), "{e}");
        let e = err(r#"{"inputs":"b","query":[{"map":{"language":"javascript"}}]}"#);
        assert!(e.starts_with("query[0].map.source"), "{e}");
        let e = err(
            r#"{"inputs":"b","query":[{"map":{"language":"javascript","name":"f","keep":1}}]}"#,
        );
        assert!(e.starts_with("query[0].map.keep"), "{e}");
        let e = err(r#"{"inputs":"b","query":[{"walk":{}}]}"#);
        assert!(e.starts_with("query[0].walk: unknown phase type"), "{e}");
        let e = err(r#"{"inputs":{"bucket":"b","key_filters":[["bogus"]]},"query":[]}"#);
        assert!(
            e.starts_with("inputs: key_filters: unknown key filter \"bogus\""),
            "{e}"
        );
        let e = err(r#"{"inputs":{"bucket":"b","index":"f_bin"},"query":[]}"#);
        assert!(e.contains("index input needs"), "{e}");
        let e = err(r#"{"inputs":{"bucket":"b","query":"x"},"query":[]}"#);
        assert!(e.contains("search inputs are not supported"), "{e}");
    }

    #[test]
    fn erlang_source_phases_fail_as_riaks_do() {
        // Riak's words, unprefixed: clients match on them.
        let src = r#"{"inputs":[["b","k"]],"query":[{"map":{"language":"erlang","source":"fun(O, _, _) -> [O] end."}}]}"#;
        assert_eq!(err(src), STRFUN_REFUSED);
        let stored = r#"{"inputs":"b","query":[{"map":{"language":"javascript","name":"Riak.mapValues"}},{"reduce":{"language":"erlang","bucket":"fns","key":"f"}}]}"#;
        assert_eq!(err(stored), STRFUN_REFUSED);
    }

    #[test]
    fn erlang_term_builtins_travel_in_map_specs() {
        let f = PhaseFun::ErlangTerms(Builtin::MapObjectValue);
        let spec = map_spec_json(&f, &Value::Null);
        assert_eq!(
            parse_map_spec(&spec).unwrap_or_else(|e| panic!("{e}")),
            (f, Value::Null)
        );
    }
}
