//! Commit hooks (Riak's `precommit` / `postcommit` bucket props, see
//! [`crate::bucket::props::CommitHook`]), run by the PUT FSM
//! ([`crate::kv::put`]) for client writes only: replicated writes
//! (`repl::sink`, which merges into the vnodes directly), handoff
//! (vnode to vnode) and anti-entropy repairs never pass through
//! [`Node::put`], so they never run hooks.
//!
//! * **Pre-commit** hooks run in order before anything is written. Each
//!   may pass the object on (possibly changed: a JavaScript hook returns
//!   the object with new `data` / `content-type` / `X-Riak-Meta`) or
//!   refuse it with a reason the client receives (PB `RpbErrorResp`, HTTP
//!   403). A hook that throws, times out (`mapred.hook_timeout_ms`) or
//!   returns something else refuses the write too: never a half-applied
//!   write. Deletes run the hooks too, as in Riak (a delete is a write of
//!   a tombstone): the object a hook sees has `"X-Riak-Deleted": "true"`
//!   in its metadata and empty data; a hook may refuse a delete, but what
//!   it returns otherwise does not change it (a delete stays a delete).
//!   The built-ins pass deletes.
//! * **Post-commit** hooks run after the write (or delete, with the same
//!   marker) was acknowledged, in a
//!   background task (at most [`POSTCOMMIT_IN_FLIGHT`] at once; beyond
//!   that they are dropped and counted); a failure is logged and counted
//!   (`postcommit_errors_total` in `/stats`), never reported to the client.
//!
//! Built-ins (`{"mod": "basalt_hooks", "fun": ...}`): `validate_json` and
//! `max_object_size` (pre), `log_commit` (post). JavaScript hooks
//! (`{"name": ...}`) run on the hook VM pool (`mapred.hook_js_vm_count`).

use crate::bucket::keying::split_storage_bucket;
use crate::bucket::props::{BucketProps, CommitHook};
use crate::config::MapRedConfig;
use crate::error::RequestError;
use crate::kv::{HookFuture, PreCommit, WriteObserver};
use crate::limits::POSTCOMMIT_IN_FLIGHT;
use crate::mapred::core::Fetched;
use crate::mapred::job::BucketName;
use crate::mapred::js::{JsCall, JsError, JsFun, JsPools, PoolKind};
use crate::object::vclock::VClock;
use crate::object::{Content, RiakObject};
use crate::vnode::request::Obj;
use serde_json::Value;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Post-commit runs of a node: places in flight and counters.
#[derive(Debug)]
pub struct PostCommit {
    slots: Arc<tokio::sync::Semaphore>,
    /// Runs that failed.
    pub errors: AtomicU64,
    /// Runs dropped (too many in flight).
    pub dropped: AtomicU64,
    /// Writes a pre-commit hook refused (or that failed in a hook).
    pub precommit_refused: AtomicU64,
}

impl Default for PostCommit {
    fn default() -> Self {
        PostCommit {
            slots: Arc::new(tokio::sync::Semaphore::new(POSTCOMMIT_IN_FLIGHT)),
            errors: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
            precommit_refused: AtomicU64::new(0),
        }
    }
}

/// What a pre-commit hook decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Write this content (the same or changed).
    Accept(Box<Content>),
    /// Refuse the write with this reason.
    Refuse(String),
}

/// The name of a hook for messages: `mod:fun` or the JavaScript name.
pub fn hook_name(h: &CommitHook) -> String {
    match h {
        CommitHook::ModFun { module, function } => format!("{module}:{function}"),
        CommitHook::Name { name } => name.clone(),
    }
}

/// A built-in pre-commit hook over `content` (pure).
pub fn builtin_precommit(function: &str, content: Content, max_bytes: usize) -> Verdict {
    match function {
        // A tombstone has no value to check.
        "validate_json" | "max_object_size" if content.deleted => {
            Verdict::Accept(Box::new(content))
        }
        "validate_json" => match serde_json::from_slice::<serde::de::IgnoredAny>(&content.value) {
            Ok(_) => Verdict::Accept(Box::new(content)),
            Err(e) => Verdict::Refuse(format!("Invalid JSON: {e}")),
        },
        "max_object_size" if content.value.len() > max_bytes => Verdict::Refuse(format!(
            "Object too large: {} bytes (limit {max_bytes}, mapred.hook_max_object_bytes)",
            content.value.len()
        )),
        "max_object_size" => Verdict::Accept(Box::new(content)),
        other => Verdict::Refuse(format!("unknown pre-commit hook basalt_hooks:{other}")),
    }
}

/// The object a hook sees (Riak's JSON form, as a map phase's input),
/// its first value's data apart: `(object JSON with "data": null, data)`.
fn object_json(sb: &[u8], key: &[u8], vclock: VClock, content: &Content) -> (String, String) {
    let (btype, bucket) = split_storage_bucket(sb);
    let data = String::from_utf8_lossy(&content.value).into_owned();
    let bare = Content {
        value: Vec::new(),
        content_type: content.content_type.clone(),
        charset: content.charset.clone(),
        content_encoding: content.content_encoding.clone(),
        vtag: content.vtag.clone(),
        last_mod: content.last_mod,
        last_mod_usecs: content.last_mod_usecs,
        usermeta: content.usermeta.clone(),
        indexes: content.indexes.clone(),
        links: content.links.clone(),
        ..Content::default()
    };
    let mut v = Fetched {
        bucket: BucketName {
            btype: btype.map(<[u8]>::to_vec),
            bucket: bucket.to_vec(),
        },
        key: key.to_vec(),
        keydata: Value::Null,
        object: Some(RiakObject {
            vclock,
            contents: vec![bare],
        }),
    }
    .to_json();
    if let Some(first) = v.pointer_mut("/values/0/data") {
        *first = Value::Null;
    }
    if content.deleted {
        if let Some(Value::Object(md)) = v.pointer_mut("/values/0/metadata") {
            md.insert("X-Riak-Deleted".into(), Value::String("true".into()));
        }
    }
    (v.to_string(), data)
}

/// A JavaScript pre-commit hook's answer applied to `content`: the object
/// (its first value's `data`, `content-type`, `X-Riak-Meta` replace ours)
/// or `{"fail": reason}`.
pub fn js_verdict(name: &str, answer: &str, mut content: Content) -> Verdict {
    let bad = || {
        Verdict::Refuse(format!(
            "pre-commit hook {name} returned neither the object nor {{\"fail\": reason}}"
        ))
    };
    let Ok(v) = serde_json::from_str::<Value>(answer) else {
        return bad();
    };
    if let Some(reason) = v.get("fail") {
        return Verdict::Refuse(match reason {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        });
    }
    let Some(first) = v.get("values").and_then(|vs| vs.get(0)) else {
        return bad();
    };
    // The value went out as (lossy) text: an unchanged text keeps the
    // original bytes, so a hook that passes a binary value on leaves it be
    // (the VM says so with `__basalt_same_data` instead of sending it back).
    let same = v.get("__basalt_same_data") == Some(&Value::Bool(true));
    let sent = String::from_utf8_lossy(&content.value).into_owned();
    match first.get("data") {
        _ if same => {}
        Some(Value::String(s)) if *s == sent => {}
        Some(Value::String(s)) => content.value = s.clone().into_bytes(),
        Some(other) => content.value = other.to_string().into_bytes(),
        None => return bad(),
    }
    content.value_len = content.value.len() as u32;
    if let Some(md) = first.get("metadata") {
        if let Some(ct) = md.get("content-type").and_then(Value::as_str) {
            content.content_type = Some(ct.as_bytes().to_vec());
        }
        if let Some(meta) = md.get("X-Riak-Meta").and_then(Value::as_object) {
            let changed: Vec<(Vec<u8>, Vec<u8>)> = meta
                .iter()
                .map(|(k, v)| {
                    let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                    (k.as_bytes().to_vec(), v.into_bytes())
                })
                .collect();
            let lossy = |b: &[u8]| String::from_utf8_lossy(b).into_owned().into_bytes();
            let sent: Vec<(Vec<u8>, Vec<u8>)> = content
                .usermeta
                .iter()
                .map(|(k, v)| (lossy(k), lossy(v)))
                .collect();
            let mut a = changed.clone();
            let mut b = sent;
            a.sort();
            b.sort();
            if a != b {
                content.usermeta = changed;
            }
        }
    }
    Verdict::Accept(Box::new(content))
}

/// The buckets' commit hooks as the KV layer calls them: [`PreCommit`]
/// before a client write, [`WriteObserver`] after one; built-ins in Rust,
/// JavaScript on the node's VM pools. The node registers it with the KV
/// layer at start-up.
pub struct CommitHooks {
    config: MapRedConfig,
    js: Arc<JsPools>,
    /// Post-commit places in flight, and the hooks' counters.
    pub postcommit: Arc<PostCommit>,
}

impl CommitHooks {
    /// Hooks on `js`'s hook pool, with `config`'s limits.
    pub fn new(config: &MapRedConfig, js: Arc<JsPools>) -> CommitHooks {
        CommitHooks {
            config: config.clone(),
            js,
            postcommit: Arc::default(),
        }
    }

    /// Runs `hooks` (the bucket's pre-commit list) over a client write:
    /// the content to write, or [`RequestError::Forbidden`] with the
    /// reason.
    pub(crate) async fn precommit(
        &self,
        hooks: &[CommitHook],
        sb: &[u8],
        key: &[u8],
        client: Option<&VClock>,
        mut content: Content,
    ) -> Result<Content, RequestError> {
        let cfg = &self.config;
        for h in hooks {
            let verdict = match h {
                CommitHook::ModFun { function, .. } => {
                    builtin_precommit(function, content, cfg.hook_max_object_bytes)
                }
                CommitHook::Name { name } => {
                    let deadline = Instant::now() + Duration::from_millis(cfg.hook_timeout_ms);
                    let (object, data) =
                        object_json(sb, key, client.cloned().unwrap_or_default(), &content);
                    let call = JsCall::Hook {
                        fun: JsFun::Name(name.clone()),
                        object,
                        data,
                    };
                    match self.js.call(PoolKind::Hook, call, deadline).await {
                        Ok(answer) if content.deleted => {
                            // A delete may be refused, not changed.
                            match js_verdict(name, &answer, content.clone()) {
                                Verdict::Refuse(r) => Verdict::Refuse(r),
                                Verdict::Accept(_) => Verdict::Accept(Box::new(content)),
                            }
                        }
                        Ok(answer) => js_verdict(name, &answer, content),
                        Err(e) => Verdict::Refuse(format!("pre-commit hook {name} failed: {e}")),
                    }
                }
            };
            content = match verdict {
                Verdict::Accept(c) => *c,
                Verdict::Refuse(reason) => {
                    self.postcommit
                        .precommit_refused
                        .fetch_add(1, Ordering::Relaxed);
                    tracing::debug!(hook = %hook_name(h), %reason, "pre-commit hook refused a write");
                    return Err(RequestError::Forbidden(reason));
                }
            };
        }
        Ok(content)
    }

    /// Starts the bucket's post-commit hooks over a written object, in the
    /// background (see the module docs).
    pub(crate) fn postcommit(&self, hooks: &[CommitHook], sb: &[u8], key: &[u8], obj: &RiakObject) {
        let Ok(slot) = self.postcommit.slots.clone().try_acquire_owned() else {
            self.postcommit.dropped.fetch_add(1, Ordering::Relaxed);
            tracing::warn!(
                limit = POSTCOMMIT_IN_FLIGHT,
                "post-commit hook run dropped: too many in flight"
            );
            return;
        };
        // A live value if there is one, else the tombstone (a delete).
        let Some(content) = obj
            .contents
            .iter()
            .find(|c| !c.deleted)
            .or_else(|| obj.contents.first())
        else {
            return;
        };
        let (object, data) = object_json(sb, key, obj.vclock.clone(), content);
        let hooks = hooks.to_vec();
        let js: Arc<JsPools> = self.js.clone();
        let counters = self.postcommit.clone();
        let timeout = Duration::from_millis(self.config.hook_timeout_ms);
        let bk = format!(
            "{}/{}",
            String::from_utf8_lossy(split_storage_bucket(sb).1),
            String::from_utf8_lossy(key)
        );
        tokio::spawn(async move {
            for h in &hooks {
                let res: Result<(), String> = match h {
                    CommitHook::ModFun { function, .. } if function == "log_commit" => {
                        tracing::info!(key = %bk, "post-commit: written");
                        Ok(())
                    }
                    CommitHook::ModFun { module, function } => {
                        Err(format!("unknown post-commit hook {module}:{function}"))
                    }
                    CommitHook::Name { name } => {
                        let call = JsCall::Hook {
                            fun: JsFun::Name(name.clone()),
                            object: object.clone(),
                            data: data.clone(),
                        };
                        js.call(PoolKind::Hook, call, Instant::now() + timeout)
                            .await
                            .map(|_| ())
                            .map_err(|e: JsError| e.to_string())
                    }
                };
                if let Err(e) = res {
                    counters.errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(hook = %hook_name(h), key = %bk, error = %e, "post-commit hook failed");
                }
            }
            drop(slot);
        });
    }
}

impl PreCommit for CommitHooks {
    fn precommit<'a>(
        &'a self,
        hooks: &'a [CommitHook],
        bucket: &'a [u8],
        key: &'a [u8],
        client: Option<&'a VClock>,
        content: Content,
    ) -> HookFuture<'a, Result<Content, RequestError>> {
        Box::pin(CommitHooks::precommit(
            self, hooks, bucket, key, client, content,
        ))
    }
}

impl WriteObserver for CommitHooks {
    fn written(&self, bucket: &[u8], key: &[u8], object: &Obj, props: &BucketProps) {
        if props.postcommit.is_empty() {
            return;
        }
        if let Ok(o) = object.object() {
            self.postcommit(&props.postcommit, bucket, key, &o);
        }
    }

    fn reaped(&self, _bucket: &[u8], _key: &[u8], _clock: &VClock) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn content(v: &str) -> Content {
        Content {
            value: v.as_bytes().to_vec(),
            value_len: v.len() as u32,
            ..Default::default()
        }
    }

    #[test]
    fn builtins_accept_and_refuse() {
        assert!(matches!(
            builtin_precommit("validate_json", content("{\"a\":1}"), 10),
            Verdict::Accept(_)
        ));
        assert!(
            matches!(builtin_precommit("validate_json", content("{nope"), 10), Verdict::Refuse(r) if r.starts_with("Invalid JSON"))
        );
        assert!(matches!(
            builtin_precommit("max_object_size", content("12345"), 5),
            Verdict::Accept(_)
        ));
        assert!(
            matches!(builtin_precommit("max_object_size", content("123456"), 5), Verdict::Refuse(r) if r.contains("6 bytes (limit 5"))
        );
    }

    #[test]
    fn deletes_pass_the_builtins_and_carry_the_marker() {
        let tomb = Content {
            deleted: true,
            ..Default::default()
        };
        for f in ["validate_json", "max_object_size"] {
            assert!(
                matches!(builtin_precommit(f, tomb.clone(), 0), Verdict::Accept(c) if c.deleted),
                "{f}"
            );
        }
        let (object, data) = object_json(b"b", b"k", VClock::default(), &tomb);
        let v: Value = serde_json::from_str(&object).expect("json");
        assert_eq!(
            v.pointer("/values/0/metadata/X-Riak-Deleted"),
            Some(&json!("true"))
        );
        assert_eq!(data, "");
        let (object, _) = object_json(b"b", b"k", VClock::default(), &content("{}"));
        let v: Value = serde_json::from_str(&object).expect("json");
        assert_eq!(v.pointer("/values/0/metadata/X-Riak-Deleted"), None);
    }

    #[test]
    fn javascript_answers() {
        let c = content("x");
        assert_eq!(
            js_verdict("h", r#"{"fail":"no way"}"#, c.clone()),
            Verdict::Refuse("no way".into())
        );
        let Verdict::Accept(changed) = js_verdict(
            "h",
            r#"{"values":[{"data":"y","metadata":{"content-type":"text/plain","X-Riak-Meta":{"X-Riak-Meta-a":"1"}}}]}"#,
            c.clone(),
        ) else {
            panic!("refused")
        };
        assert_eq!(changed.value, b"y");
        assert_eq!(changed.content_type.as_deref(), Some(&b"text/plain"[..]));
        assert_eq!(
            changed.usermeta,
            vec![(b"X-Riak-Meta-a".to_vec(), b"1".to_vec())]
        );
        assert!(
            matches!(js_verdict("h", "5", c.clone()), Verdict::Refuse(r) if r.contains("neither"))
        );
        assert!(matches!(
            js_verdict("h", r#"{"values":[]}"#, c),
            Verdict::Refuse(_)
        ));
        // A binary value passed on unchanged keeps its bytes.
        let bin = Content {
            value: vec![0xff, 0xfe, b'a'],
            value_len: 3,
            ..Default::default()
        };
        let sent = String::from_utf8_lossy(&bin.value).into_owned();
        let answer = json!({"values": [{"data": sent, "metadata": {}}]}).to_string();
        assert_eq!(
            js_verdict("h", &answer, bin.clone()),
            Verdict::Accept(Box::new(bin.clone()))
        );
        // The VM's "unchanged" mark: no data came back, the bytes stay.
        let answer = r#"{"values":[{"data":null,"metadata":{}}],"__basalt_same_data":true}"#;
        assert_eq!(
            js_verdict("h", answer, bin.clone()),
            Verdict::Accept(Box::new(bin))
        );
    }
}
