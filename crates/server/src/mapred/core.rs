//! The pure core of a MapReduce job, beside the runner ([`super::run`])
//! that does the I/O: what flows between phases ([`Item`]), a fetched
//! input and its JSON forms ([`Fetched`]), a reduce phase's batching and
//! re-reduce ([`ReduceState`], Riak's `riak_kv_w_reduce`), links, and the
//! kept results with their size limit ([`Kept`]). No I/O, no clock.

use super::input::{BucketName, KeyInput};
use crate::limits::{MAPRED_MAX_REDUCE_BATCH, MAPRED_REDUCE_BATCH};
use crate::object::RiakObject;
use serde_json::{json, Map, Value};

/// What flows into a phase.
#[derive(Debug, Clone)]
pub enum Item {
    /// A key to fetch (the job's listed inputs, 2i and listed bucket keys).
    Key(KeyInput),
    /// An object already read (a bucket fold).
    Obj(Box<Fetched>),
    /// A value output by the previous phase.
    Val(Value),
}

impl Item {
    /// The form a reduce phase (or the client, with no phases) sees:
    /// `[bucket, key]`, or `[bucket, key, keydata]` when key data was given;
    /// a typed bucket is `["type", "bucket"]`.
    pub fn into_value(self) -> Value {
        match self {
            Item::Key(k) => bkey_value(&k.bucket, &k.key, k.keydata),
            Item::Obj(f) => bkey_value(&f.bucket, &f.key, None),
            Item::Val(v) => v,
        }
    }

    /// The key a map or link phase must fetch, unless it was read already.
    pub fn into_input(self) -> Result<Result<KeyInput, Box<Fetched>>, String> {
        match self {
            Item::Key(k) => Ok(Ok(k)),
            Item::Obj(f) => Ok(Err(f)),
            Item::Val(v) => key_of(&v).map(Ok),
        }
    }
}

fn bucket_value(b: &BucketName) -> Value {
    let name = Value::String(String::from_utf8_lossy(&b.bucket).into_owned());
    match &b.btype {
        None => name,
        Some(t) => json!([String::from_utf8_lossy(t), name]),
    }
}

fn bkey_value(b: &BucketName, key: &[u8], keydata: Option<Value>) -> Value {
    let mut v = vec![
        bucket_value(b),
        Value::String(String::from_utf8_lossy(key).into_owned()),
    ];
    if let Some(kd) = keydata {
        v.push(kd);
    }
    Value::Array(v)
}

/// A previous phase's output as a key to fetch: `[bucket, key]`,
/// `[bucket, key, keydata]`, `[bucket, key, keydata, type]`, the bucket
/// may be `["type", "bucket"]`.
pub fn key_of(v: &Value) -> Result<KeyInput, String> {
    let bad = || format!("not a [bucket, key] input: {v}");
    let a = v
        .as_array()
        .filter(|a| (2..=4).contains(&a.len()))
        .ok_or_else(bad)?;
    let text = |x: &Value| {
        x.as_str()
            .filter(|s| !s.is_empty())
            .map(|s| s.as_bytes().to_vec())
    };
    let bucket = match &a[0] {
        Value::Array(tb) if tb.len() == 2 => BucketName {
            btype: text(&tb[0]).filter(|t| t != b"default"),
            bucket: text(&tb[1]).ok_or_else(bad)?,
        },
        b => BucketName {
            btype: a.get(3).and_then(text).filter(|t| t != b"default"),
            bucket: text(b).ok_or_else(bad)?,
        },
    };
    Ok(KeyInput {
        bucket,
        key: text(&a[1]).ok_or_else(bad)?,
        keydata: a.get(2).cloned(),
    })
}

/// The key of the one-key object that carries an Erlang term JSON cannot
/// hold through a job sent as Erlang terms: `{TERM_MARKER: base64 of
/// term_to_binary(T)}` (made and read by [`super::etf`]; its NUL keeps it
/// apart from any key a JSON job or a JavaScript function would use).
pub const TERM_MARKER: &str = "\u{0}erlang_term";

/// The marker of an Erlang binary (`term_to_binary(<<Bytes>>)`): an
/// object value that is not UTF-8, keeping its bytes for an Erlang-term
/// client.
pub fn binary_marker(bytes: &[u8]) -> Value {
    let mut etf = Vec::with_capacity(bytes.len() + 6);
    etf.push(131);
    etf.push(109);
    etf.extend_from_slice(&u32::try_from(bytes.len()).unwrap_or(u32::MAX).to_be_bytes());
    etf.extend_from_slice(bytes);
    let mut o = Map::new();
    o.insert(
        TERM_MARKER.to_string(),
        Value::String(base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            etf,
        )),
    );
    Value::Object(o)
}

/// An input of a map or link phase after its read.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// Bucket (and type).
    pub bucket: BucketName,
    /// Key.
    pub key: Vec<u8>,
    /// Key data (`null` when none was given).
    pub keydata: Value,
    /// The object; `None` = not found (or deleted).
    pub object: Option<RiakObject>,
}

impl Fetched {
    /// `b/k` for error messages.
    pub fn describe(&self) -> String {
        format!(
            "{}/{}",
            String::from_utf8_lossy(&self.bucket.bucket),
            String::from_utf8_lossy(&self.key)
        )
    }

    /// `[bucket, key]`.
    pub fn bkey_json(&self) -> Value {
        bkey_value(&self.bucket, &self.key, None)
    }

    /// Riak's not-found input: `{"not_found": {"bucket", "key", "keydata"}}`.
    pub fn not_found_json(&self) -> Value {
        json!({"not_found": {
            "bucket": bucket_value(&self.bucket),
            "key": String::from_utf8_lossy(&self.key),
            "keydata": self.keydata,
        }})
    }

    /// The value of the first live sibling, as text (lossy UTF-8).
    pub fn value_text(&self) -> String {
        self.object
            .as_ref()
            .and_then(|o| o.contents.iter().find(|c| !c.deleted))
            .map(|c| String::from_utf8_lossy(&c.value).into_owned())
            .unwrap_or_default()
    }

    /// The value of the first live sibling for an Erlang-term job: a
    /// string when it is UTF-8, else its bytes as a [`binary_marker`].
    pub fn value_exact(&self) -> Value {
        let bytes = self
            .object
            .as_ref()
            .and_then(|o| o.contents.iter().find(|c| !c.deleted))
            .map_or(&[][..], |c| &c.value[..]);
        match std::str::from_utf8(bytes) {
            Ok(s) => Value::String(s.to_string()),
            Err(_) => binary_marker(bytes),
        }
    }

    /// Links of the live siblings: `(bucket, key, tag)`.
    pub fn links(&self) -> Vec<(Vec<u8>, Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        for c in self.object.iter().flat_map(|o| &o.contents) {
            if !c.deleted {
                out.extend(c.links.iter().cloned());
            }
        }
        out
    }

    /// The object as a JavaScript map function sees it (Riak's
    /// `riak_object` JSON): `{"bucket", "key", "vclock", "values":
    /// [{"metadata", "data"}]}` (+ `"bucket_type"`); a not-found input is
    /// [`Self::not_found_json`].
    pub fn to_json(&self) -> Value {
        let Some(o) = &self.object else {
            return self.not_found_json();
        };
        let values: Vec<Value> = o
            .contents
            .iter()
            .filter(|c| !c.deleted)
            .map(|c| {
                let text = |b: &[u8]| Value::String(String::from_utf8_lossy(b).into_owned());
                let mut md = Map::new();
                if let Some(ct) = &c.content_type {
                    md.insert("content-type".into(), text(ct));
                }
                if let Some(cs) = &c.charset {
                    md.insert("charset".into(), text(cs));
                }
                if let Some(ce) = &c.content_encoding {
                    md.insert("content-encoding".into(), text(ce));
                }
                if let Some(vt) = &c.vtag {
                    md.insert("X-Riak-VTag".into(), text(vt));
                }
                let when =
                    std::time::UNIX_EPOCH + std::time::Duration::from_secs(u64::from(c.last_mod));
                md.insert(
                    "X-Riak-Last-Modified".into(),
                    Value::String(httpdate::fmt_http_date(when)),
                );
                let mut meta = Map::new();
                for (k, v) in &c.usermeta {
                    meta.insert(String::from_utf8_lossy(k).into_owned(), text(v));
                }
                md.insert("X-Riak-Meta".into(), Value::Object(meta));
                let mut index = Map::new();
                for (f, t) in &c.indexes {
                    index.insert(String::from_utf8_lossy(f).into_owned(), text(t));
                }
                md.insert("index".into(), Value::Object(index));
                let links: Vec<Value> = c
                    .links
                    .iter()
                    .map(|(b, k, t)| Value::Array(vec![text(b), text(k), text(t)]))
                    .collect();
                md.insert("Links".into(), Value::Array(links));
                json!({"metadata": md, "data": text(&c.value)})
            })
            .collect();
        let mut out = Map::new();
        if let Some(t) = &self.bucket.btype {
            out.insert(
                "bucket_type".into(),
                Value::String(String::from_utf8_lossy(t).into_owned()),
            );
        }
        out.insert(
            "bucket".into(),
            Value::String(String::from_utf8_lossy(&self.bucket.bucket).into_owned()),
        );
        out.insert(
            "key".into(),
            Value::String(String::from_utf8_lossy(&self.key).into_owned()),
        );
        out.insert(
            "vclock".into(),
            Value::String(base64::Engine::encode(
                &base64::engine::general_purpose::STANDARD,
                o.vclock.encode(),
            )),
        );
        out.insert("values".into(), Value::Array(values));
        Value::Object(out)
    }
}

/// A link phase over one input: `[bucket, key, tag]` for each link whose
/// bucket and tag match (`None` = any); a not-found input has none.
pub fn follow_links(input: &Fetched, bucket: Option<&[u8]>, tag: Option<&[u8]>) -> Vec<Value> {
    input
        .links()
        .into_iter()
        .filter(|(b, _, t)| bucket.is_none_or(|x| x == b) && tag.is_none_or(|x| x == t))
        .map(|(b, k, t)| {
            let text = |x: &[u8]| Value::String(String::from_utf8_lossy(x).into_owned());
            let b = match &input.bucket.btype {
                // A link stays within the bucket type of its object.
                Some(ty) => Value::Array(vec![text(ty), text(&b)]),
                None => text(&b),
            };
            Value::Array(vec![b, text(&k), text(&t)])
        })
        .collect()
}

/// A reduce phase's state (Riak's `riak_kv_w_reduce`): inputs gather in a
/// buffer; once it holds `batch` values the function is called on its own
/// previous output followed by the buffer (re-reduce), and that output
/// replaces the previous one. At the end, one last call covers what is
/// left (and is made even with no input at all, so `reduce_sum` of nothing
/// is `[0]`). `{"reduce_phase_only_1": true}` in `arg` gathers everything
/// for a single call; `{"reduce_phase_batch_size": N}` sets the batch.
#[derive(Debug, Clone)]
pub struct ReduceState {
    batch: usize,
    buffer: Vec<Value>,
    previous: Vec<Value>,
    calls: u64,
}

impl ReduceState {
    /// The state for a phase with this `arg`.
    pub fn new(arg: &Value) -> Result<ReduceState, String> {
        let mut batch = MAPRED_REDUCE_BATCH;
        if let Some(o) = arg.as_object() {
            if o.get("reduce_phase_only_1") == Some(&Value::Bool(true)) {
                batch = usize::MAX;
            } else if let Some(b) = o.get("reduce_phase_batch_size") {
                batch = b
                    .as_u64()
                    .map(|n| n as usize)
                    .filter(|n| (1..=MAPRED_MAX_REDUCE_BATCH).contains(n))
                    .ok_or_else(|| {
                        format!("reduce_phase_batch_size must be in 1..={MAPRED_MAX_REDUCE_BATCH}")
                    })?;
            }
        }
        Ok(ReduceState {
            batch,
            buffer: Vec::new(),
            previous: Vec::new(),
            calls: 0,
        })
    }

    /// Adds inputs; returns the values to reduce now (previous output then
    /// the buffer), if the buffer is full. The caller reduces them and
    /// hands the output to [`Self::reduced`].
    pub fn push(&mut self, values: Vec<Value>) -> Option<Vec<Value>> {
        self.buffer.extend(values);
        if self.buffer.len() >= self.batch {
            Some(self.take())
        } else {
            None
        }
    }

    /// The last call's input at the end of the phase's input, if one is
    /// due (values left in the buffer, or no call made yet).
    pub fn finish(&mut self) -> Option<Vec<Value>> {
        if self.buffer.is_empty() && self.calls > 0 {
            None
        } else {
            Some(self.take())
        }
    }

    fn take(&mut self) -> Vec<Value> {
        let mut all = std::mem::take(&mut self.previous);
        all.append(&mut self.buffer);
        all
    }

    /// The output of the call made on [`Self::push`]'s or
    /// [`Self::finish`]'s values.
    pub fn reduced(&mut self, output: Vec<Value>) {
        self.calls += 1;
        self.previous = output;
    }

    /// The phase's output, once finished.
    pub fn output(&mut self) -> Vec<Value> {
        std::mem::take(&mut self.previous)
    }

    /// Calls made so far.
    pub fn calls(&self) -> u64 {
        self.calls
    }
}

/// The kept results of a job, phase by phase, within a byte limit (the
/// JSON size of the values).
#[derive(Debug)]
pub struct Kept {
    bytes: usize,
    max_bytes: usize,
}

impl Kept {
    /// Up to `max_bytes` of JSON.
    pub fn new(max_bytes: usize) -> Kept {
        Kept {
            bytes: 0,
            max_bytes,
        }
    }

    /// Counts `values` kept; an error once the job's results pass the limit.
    pub fn add(&mut self, values: &[Value]) -> Result<(), String> {
        for v in values {
            self.bytes += serde_json::to_vec(v).map_or(0, |b| b.len()) + 1;
        }
        if self.bytes > self.max_bytes {
            return Err(format!(
                "the job's results passed {} bytes (mapred.max_result_bytes)",
                self.max_bytes
            ));
        }
        Ok(())
    }
}

/// The non-streamed answer (HTTP without `chunked`, Riak's
/// `riak_kv_wm_mapred`): one kept phase → its list; several → a list of
/// lists, in phase order.
pub fn collect_shape(per_phase: Vec<(usize, Vec<Value>)>) -> Value {
    if per_phase.len() == 1 {
        per_phase
            .into_iter()
            .next()
            .map_or(Value::Array(vec![]), |(_, v)| Value::Array(v))
    } else {
        Value::Array(
            per_phase
                .into_iter()
                .map(|(_, v)| Value::Array(v))
                .collect(),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mapred::builtins::Builtin;
    use crate::object::Content;

    fn reduce_all(state: &mut ReduceState, f: Builtin, inputs: Vec<Vec<Value>>) -> Vec<Value> {
        for chunk in inputs {
            if let Some(v) = state.push(chunk) {
                let out = f.reduce(v, &Value::Null).unwrap_or_else(|e| panic!("{e}"));
                state.reduced(out);
            }
        }
        if let Some(v) = state.finish() {
            let out = f.reduce(v, &Value::Null).unwrap_or_else(|e| panic!("{e}"));
            state.reduced(out);
        }
        state.output()
    }

    #[test]
    fn reduce_batches_and_rereduces_its_own_output() {
        let mut s = ReduceState::new(&json!({"reduce_phase_batch_size": 3}))
            .unwrap_or_else(|e| panic!("{e}"));
        let inputs: Vec<Vec<Value>> = (1..=10).map(|i| vec![json!(i)]).collect();
        let out = reduce_all(&mut s, Builtin::ReduceSum, inputs);
        assert_eq!(out, vec![json!(55)]);
        // 10 inputs in batches of 3: 3 full batches and the rest.
        assert_eq!(s.calls(), 4);

        // Counting re-reduces: earlier counts are integers.
        let mut s = ReduceState::new(&json!({"reduce_phase_batch_size": 2}))
            .unwrap_or_else(|e| panic!("{e}"));
        let inputs: Vec<Vec<Value>> = (0..7)
            .map(|i| vec![json!(["b", format!("k{i}")])])
            .collect();
        assert_eq!(
            reduce_all(&mut s, Builtin::ReduceCountInputs, inputs),
            vec![json!(7)]
        );
    }

    #[test]
    fn reduce_of_nothing_is_called_once_and_only_1_gathers_everything() {
        let mut s = ReduceState::new(&Value::Null).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(
            reduce_all(&mut s, Builtin::ReduceSum, vec![]),
            vec![json!(0)]
        );
        assert_eq!(s.calls(), 1);
        let mut s = ReduceState::new(&json!({"reduce_phase_only_1": true}))
            .unwrap_or_else(|e| panic!("{e}"));
        let inputs: Vec<Vec<Value>> = (0..100).map(|i| vec![json!(i)]).collect();
        assert_eq!(
            reduce_all(&mut s, Builtin::ReduceSum, inputs),
            vec![json!(4950)]
        );
        assert_eq!(s.calls(), 1);
        assert!(ReduceState::new(&json!({"reduce_phase_batch_size": 0})).is_err());
    }

    fn fetched(value: &str, links: Vec<(&str, &str, &str)>) -> Fetched {
        Fetched {
            bucket: BucketName {
                btype: None,
                bucket: b"b".to_vec(),
            },
            key: b"k".to_vec(),
            keydata: Value::Null,
            object: Some(RiakObject {
                vclock: Default::default(),
                contents: vec![Content {
                    value: value.as_bytes().to_vec(),
                    content_type: Some(b"application/json".to_vec()),
                    links: links
                        .into_iter()
                        .map(|(b, k, t)| (b.into(), k.into(), t.into()))
                        .collect(),
                    ..Default::default()
                }],
            }),
        }
    }

    #[test]
    fn objects_links_and_keys() {
        let f = fetched("{\"a\":1}", vec![("p", "x", "friend"), ("q", "y", "boss")]);
        let j = f.to_json();
        assert_eq!(j["bucket"], json!("b"));
        assert_eq!(j["values"][0]["data"], json!("{\"a\":1}"));
        assert_eq!(
            j["values"][0]["metadata"]["content-type"],
            json!("application/json")
        );
        assert_eq!(
            follow_links(&f, None, Some(b"boss")),
            vec![json!(["q", "y", "boss"])]
        );
        assert_eq!(
            follow_links(&f, Some(b"p"), None),
            vec![json!(["p", "x", "friend"])]
        );
        let missing = Fetched { object: None, ..f };
        assert_eq!(
            missing.to_json(),
            json!({"not_found": {"bucket": "b", "key": "k", "keydata": null}})
        );
        let k = key_of(&json!([["t", "b"], "k", 5])).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(k.bucket.btype.as_deref(), Some(&b"t"[..]));
        assert_eq!(k.keydata, Some(json!(5)));
        assert!(key_of(&json!(5)).is_err());
        assert_eq!(Item::Key(k).into_value(), json!([["t", "b"], "k", 5]));
    }

    #[test]
    fn kept_results_are_bounded_and_shaped() {
        let mut k = Kept::new(10);
        assert!(k.add(&[json!(1), json!(2)]).is_ok());
        assert!(k.add(&[json!("a long string")]).is_err());
        assert_eq!(collect_shape(vec![(1, vec![json!(1)])]), json!([1]));
        assert_eq!(
            collect_shape(vec![(0, vec![json!(1)]), (2, vec![])]),
            json!([[1], []])
        );
    }
}
