//! Commit hooks on an in-process node (memory backend, ring of 8), with a
//! `js_source_dir` of test hooks: pre-commit hooks set over PB, HTTP and a
//! bucket type refuse writes (PB error / HTTP 403 with the hook's reason)
//! or change them (the stored value is the hook's); the built-in JSON and
//! size checks; a hook that fails or runs past its time refuses the write;
//! post-commit hooks run after the write and their failures are counted in
//! `/stats`, never failing the write; deletes run both kinds (a pre-commit
//! hook sees `X-Riak-Deleted` and may refuse the delete); bad hook props are refused; writes
//! that arrive by replication (`Msg::ReplPush`) or handoff (`Msg::Handoff`)
//! on the cluster port skip the hooks.

mod common;

use basalt_server::api::pb::btypes::{code as bt, BasaltBucketTypeReq};
use basalt_server::bucket::types as btypes;
use basalt_server::cluster::{transport, Msg, ReplItem, Reply};
use basalt_server::kv::{GetOpts, GetOutcome};
use basalt_server::pb::{self, code};
use basalt_server::ring::{key_hash, Ring};
use basalt_server::vnode::request::WireObject;
use basalt_server::{Config, ServerHandle};
use common::{http, Client, HttpResp};
use prost::Message;
use serde_json::{json, Value};
use std::time::{Duration, Instant};

const HOOKS_JS: &str = r#"
function refuse_unless_json(o) {
  try { JSON.parse(o.values[0].data); return o; }
  catch (e) { return {"fail": "not JSON: " + o.key}; }
}
function stamp(o) {
  var d = JSON.parse(o.values[0].data);
  d.stamped = o.bucket;
  o.values[0].data = JSON.stringify(d);
  return o;
}
function no_deletes(o) {
  if (o.values[0].metadata["X-Riak-Deleted"] === "true") {
    return {"fail": "deletes are not allowed: " + o.key};
  }
  return o;
}
function boom(o) { throw new Error("post-commit exploded"); }
function spin(o) { while (true) {} }
"#;

fn start() -> (ServerHandle, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let js = dir.path().join("js");
    std::fs::create_dir_all(&js).expect("js dir");
    std::fs::write(js.join("hooks.js"), HOOKS_JS).expect("hooks.js");
    let mut c = Config {
        data_dir: dir.path().join("data"),
        pb_listen: "127.0.0.1:0".into(),
        cluster_listen: "127.0.0.1:0".into(),
        http_listen: "127.0.0.1:0".into(),
        ring_size: 8,
        backend: "memory".into(),
        ..Config::default()
    };
    c.mapred.js_source_dir = js.display().to_string();
    c.mapred.hook_js_vm_count = 2;
    c.mapred.hook_timeout_ms = 500;
    c.mapred.hook_max_object_bytes = 1000;
    (ServerHandle::spawn(c).expect("spawn"), dir)
}

fn hook(module: &str, function: &str) -> pb::RpbCommitHook {
    pb::RpbCommitHook {
        modfun: Some(pb::RpbModFun {
            module: module.into(),
            function: function.into(),
        }),
        name: None,
    }
}

fn named(name: &str) -> pb::RpbCommitHook {
    pb::RpbCommitHook {
        modfun: None,
        name: Some(name.into()),
    }
}

impl Client {
    fn set_hooks(
        &mut self,
        btype: Option<&str>,
        bucket: &str,
        pre: Vec<pb::RpbCommitHook>,
        post: Vec<pb::RpbCommitHook>,
    ) -> Result<(), String> {
        let req = pb::RpbSetBucketReq {
            bucket: bucket.into(),
            r#type: btype.map(Into::into),
            props: pb::RpbBucketProps {
                has_precommit: Some(!pre.is_empty()),
                precommit: pre,
                has_postcommit: Some(!post.is_empty()),
                postcommit: post,
                ..Default::default()
            },
        };
        self.try_call(code::SET_BUCKET_REQ, &req).map(|_| ())
    }

    fn put_value(
        &mut self,
        btype: Option<&str>,
        bucket: &str,
        key: &str,
        value: &[u8],
    ) -> Result<(), String> {
        let req = pb::RpbPutReq {
            bucket: bucket.into(),
            r#type: btype.map(Into::into),
            key: Some(key.into()),
            content: pb::RpbContent {
                value: value.to_vec(),
                content_type: Some(b"application/json".to_vec()),
                ..Default::default()
            },
            ..Default::default()
        };
        self.try_call(code::PUT_REQ, &req).map(|_| ())
    }

    fn get_value(&mut self, bucket: &str, key: &str) -> Option<Vec<u8>> {
        let req = pb::RpbGetReq {
            bucket: bucket.into(),
            key: key.into(),
            ..Default::default()
        };
        let b = self.call(code::GET_REQ, &req, code::GET_RESP);
        let r = pb::RpbGetResp::decode(b.as_slice()).expect("get resp");
        r.content.first().map(|c| c.value.clone())
    }
}

fn http_put(h: &ServerHandle, path: &str, body: &[u8]) -> HttpResp {
    http(
        h.http_addr().expect("http"),
        "PUT",
        path,
        &[("Content-Type", "application/json")],
        body,
    )
}

#[test]
fn precommit_hooks_over_pb_refuse_and_change_writes() {
    let (h, _d) = start();
    let mut c = Client::connect(&h);
    c.set_hooks(
        None,
        "pbb",
        vec![hook("basalt_hooks", "validate_json")],
        vec![],
    )
    .expect("set");
    let e = c
        .put_value(None, "pbb", "k", b"{not json")
        .expect_err("refused");
    assert!(e.starts_with("Invalid JSON"), "{e}");
    assert_eq!(c.get_value("pbb", "k"), None, "nothing written");
    c.put_value(None, "pbb", "k", b"{\"a\":1}")
        .expect("valid JSON");

    // The props show the hook (PB).
    let b = c.call(
        code::GET_BUCKET_REQ,
        &pb::RpbGetBucketReq {
            bucket: b"pbb".to_vec(),
            r#type: None,
        },
        code::GET_BUCKET_RESP,
    );
    let props = pb::RpbGetBucketResp::decode(b.as_slice())
        .expect("props")
        .props;
    assert_eq!(props.has_precommit, Some(true));
    assert_eq!(props.precommit, vec![hook("basalt_hooks", "validate_json")]);

    // The size limit (1000 bytes here), then a changing JavaScript hook.
    c.set_hooks(
        None,
        "size",
        vec![hook("basalt_hooks", "max_object_size"), named("stamp")],
        vec![],
    )
    .expect("set");
    let big = format!("{{\"pad\":\"{}\"}}", "x".repeat(1000));
    let e = c
        .put_value(None, "size", "big", big.as_bytes())
        .expect_err("too big");
    assert!(
        e.contains("Object too large") && e.contains("mapred.hook_max_object_bytes"),
        "{e}"
    );
    c.put_value(None, "size", "small", b"{\"a\":2}")
        .expect("small");
    let stored: Value =
        serde_json::from_slice(&c.get_value("size", "small").expect("stored")).expect("json");
    assert_eq!(stored, json!({"a": 2, "stamped": "size"}));

    // A hook that throws (stamp on a non-JSON value), one that loops past
    // the hook timeout, one that does not exist: each refuses the write.
    let e = c
        .put_value(None, "size", "bad", b"plain")
        .expect_err("throws");
    assert!(e.contains("pre-commit hook stamp failed"), "{e}");
    c.set_hooks(None, "slow", vec![named("spin")], vec![])
        .expect("set");
    let t = Instant::now();
    let e = c.put_value(None, "slow", "k", b"{}").expect_err("loops");
    assert!(e.contains("timeout"), "{e}");
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "only guards against a hang"
    );
    c.set_hooks(None, "ghost", vec![named("no_such_fn")], vec![])
        .expect("set");
    let e = c.put_value(None, "ghost", "k", b"{}").expect_err("unknown");
    assert!(e.contains("no JavaScript function named no_such_fn"), "{e}");
    for (b, k) in [
        ("size", "big"),
        ("size", "bad"),
        ("slow", "k"),
        ("ghost", "k"),
    ] {
        assert_eq!(c.get_value(b, k), None, "{b}/{k} not written");
    }

    // Bad hook props are refused, naming the hook.
    let e = c
        .set_hooks(
            None,
            "x",
            vec![hook("riak_search_kv_hook", "precommit")],
            vec![],
        )
        .expect_err("unknown built-in");
    assert!(
        e.contains("precommit: unknown built-in hook riak_search_kv_hook:precommit"),
        "{e}"
    );
    let e = c
        .set_hooks(
            None,
            "x",
            vec![],
            vec![hook("basalt_hooks", "validate_json")],
        )
        .expect_err("a pre hook as post");
    assert!(e.contains("postcommit"), "{e}");

    // Clearing: has_precommit = true with no hooks.
    c.set_hooks(None, "pbb", vec![], vec![]).expect("set");
    let req = pb::RpbSetBucketReq {
        bucket: b"pbb".to_vec(),
        r#type: None,
        props: pb::RpbBucketProps {
            has_precommit: Some(true),
            ..Default::default()
        },
    };
    c.try_call(code::SET_BUCKET_REQ, &req).expect("clear");
    c.put_value(None, "pbb", "k2", b"{not json")
        .expect("no hook now");
    // Deletes run the hooks too (Riak: a delete writes a tombstone), which
    // see X-Riak-Deleted and may refuse them; the built-ins pass them.
    let del = pb::RpbDelReq {
        bucket: b"pbb".to_vec(),
        key: b"k2".to_vec(),
        ..Default::default()
    };
    c.set_hooks(None, "pbb", vec![named("no_deletes")], vec![])
        .expect("set");
    c.put_value(None, "pbb", "k3", b"{}")
        .expect("no_deletes passes writes");
    let e = c.try_call(code::DEL_REQ, &del).expect_err("refused delete");
    assert!(e.contains("deletes are not allowed: k2"), "{e}");
    assert_eq!(c.get_value("pbb", "k2"), Some(b"{not json".to_vec()));
    c.set_hooks(None, "pbb", vec![named("spin")], vec![])
        .expect("set");
    let e = c
        .try_call(code::DEL_REQ, &del)
        .expect_err("a spinning hook");
    assert!(e.contains("spin"), "{e}");
    assert_eq!(c.get_value("pbb", "k2"), Some(b"{not json".to_vec()));
    c.set_hooks(
        None,
        "pbb",
        vec![
            hook("basalt_hooks", "validate_json"),
            hook("basalt_hooks", "max_object_size"),
        ],
        vec![],
    )
    .expect("set");
    c.call(code::DEL_REQ, &del, code::DEL_RESP);
    assert_eq!(c.get_value("pbb", "k2"), None);
}

#[test]
fn precommit_hooks_over_http_and_on_a_bucket_type() {
    let (h, _d) = start();
    let addr = h.http_addr().expect("http");
    let r = http_put(
        &h,
        "/buckets/hb/props",
        br#"{"props":{"precommit":[{"name":"refuse_unless_json"}],"postcommit":[{"mod":"basalt_hooks","fun":"log_commit"}]}}"#,
    );
    assert_eq!(r.status, 204, "{}", r.text());
    let r = http(addr, "GET", "/buckets/hb/props", &[], b"");
    let v: Value = serde_json::from_slice(&r.body).expect("props");
    assert_eq!(
        v["props"]["precommit"],
        json!([{"name": "refuse_unless_json"}])
    );
    assert_eq!(
        v["props"]["postcommit"],
        json!([{"mod": "basalt_hooks", "fun": "log_commit"}])
    );
    assert_eq!(v["props"]["has_precommit"], json!(true));

    let r = http_put(&h, "/buckets/hb/keys/k1", b"nope");
    assert_eq!(r.status, 403, "{}", r.text());
    assert!(r.text().contains("not JSON: k1"), "{}", r.text());
    let r = http_put(&h, "/buckets/hb/keys/k1", b"{\"ok\":true}");
    assert!(r.status == 204 || r.status == 200, "{}", r.text());
    // A hook returning the object unchanged: the value is written as sent.
    let r = http(addr, "GET", "/buckets/hb/keys/k1", &[], b"");
    assert_eq!(r.body, b"{\"ok\":true}");

    // A changing hook over HTTP: the stored value is the hook's.
    let r = http_put(
        &h,
        "/buckets/st/props",
        br#"{"props":{"precommit":[{"name":"stamp"}]}}"#,
    );
    assert_eq!(r.status, 204, "{}", r.text());
    let r = http_put(&h, "/buckets/st/keys/k", b"{\"v\":1}");
    assert!(r.status == 204 || r.status == 200, "{}", r.text());
    let r = http(addr, "GET", "/buckets/st/keys/k", &[], b"");
    let v: Value = serde_json::from_slice(&r.body).expect("json");
    assert_eq!(v, json!({"v": 1, "stamped": "st"}));

    // Bad hooks over HTTP: 400 naming them.
    let r = http_put(
        &h,
        "/buckets/hb/props",
        br#"{"props":{"precommit":[{"mod":"m"}]}}"#,
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("precommit"), "{}", r.text());

    // A bucket type whose props carry the hook: every bucket of it.
    let mut admin = Client::admin(&h);
    let props = btypes::props_from_json(
        r#"{"props":{"precommit":[{"mod":"basalt_hooks","fun":"validate_json"}]}}"#,
    )
    .expect("json");
    admin.call(
        bt::ADMIN_TYPE_CREATE_REQ,
        &BasaltBucketTypeReq {
            r#type: b"hooked".to_vec(),
            props: Some(props),
        },
        bt::ADMIN_TYPE_CREATE_RESP,
    );
    admin.call(
        bt::ADMIN_TYPE_ACTIVATE_REQ,
        &BasaltBucketTypeReq {
            r#type: b"hooked".to_vec(),
            props: None,
        },
        bt::ADMIN_TYPE_ACTIVATE_RESP,
    );
    let mut c = Client::connect(&h);
    let e = c
        .put_value(Some("hooked"), "any", "k", b"{oops")
        .expect_err("typed refused");
    assert!(e.starts_with("Invalid JSON"), "{e}");
    c.put_value(Some("hooked"), "any", "k", b"[1,2]")
        .expect("typed ok");
    let r = http_put(&h, "/types/hooked/buckets/other/keys/k", b"{oops");
    assert_eq!(r.status, 403, "{}", r.text());
    // The same bucket name in the default type has no hook.
    c.put_value(None, "any", "k", b"{oops")
        .expect("default type: no hook");
    // A typed bucket may replace its type's hooks.
    c.set_hooks(Some("hooked"), "free", vec![], vec![])
        .expect("set");
    let req = pb::RpbSetBucketReq {
        bucket: b"free".to_vec(),
        r#type: Some(b"hooked".to_vec()),
        props: pb::RpbBucketProps {
            has_precommit: Some(true),
            ..Default::default()
        },
    };
    c.try_call(code::SET_BUCKET_REQ, &req).expect("clear");
    c.put_value(Some("hooked"), "free", "k", b"{oops")
        .expect("overridden");
}

#[test]
fn postcommit_failures_are_counted_and_never_fail_the_write() {
    let (h, _d) = start();
    let mut c = Client::connect(&h);
    c.set_hooks(
        None,
        "pc",
        vec![],
        vec![named("boom"), hook("basalt_hooks", "log_commit")],
    )
    .expect("set");
    c.put_value(None, "pc", "k", b"{}")
        .expect("the write stands");
    assert_eq!(c.get_value("pc", "k"), Some(b"{}".to_vec()));
    // A delete runs them too (and stands).
    let del = pb::RpbDelReq {
        bucket: b"pc".to_vec(),
        key: b"k".to_vec(),
        ..Default::default()
    };
    c.call(code::DEL_REQ, &del, code::DEL_RESP);
    assert_eq!(c.get_value("pc", "k"), None);
    let addr = h.http_addr().expect("http");
    let t = Instant::now();
    loop {
        let r = http(addr, "GET", "/stats", &[], b"");
        let v: Value = serde_json::from_slice(&r.body).expect("stats");
        if v["postcommit_errors_total"].as_u64() == Some(2) {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "no post-commit error counted: {v}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends one node-to-node message to `h`'s cluster port (the transport's
/// framing: code 252, id, postcard) and returns the reply.
fn cluster_call(h: &ServerHandle, msg: &Msg) -> Reply {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(h.cluster_addr()).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let frame = transport::encode(code::basalt::CLUSTER_REQ, 1, msg).expect("encode");
    s.write_all(&frame).expect("write");
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("reply length");
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).expect("reply");
    assert_eq!(body[0], code::basalt::CLUSTER_RESP);
    let (id, reply): (u64, Reply) = transport::decode(&body[1..]).expect("decode");
    assert_eq!(id, 1);
    reply
}

#[test]
fn replicated_and_handed_off_writes_skip_hooks() {
    let (a, _da) = start();
    let mut ca = Client::connect(&a);
    ca.set_hooks(
        None,
        "rb",
        vec![hook("basalt_hooks", "validate_json")],
        vec![],
    )
    .expect("set");
    assert!(
        ca.put_value(None, "rb", "k0", b"{not json").is_err(),
        "a client write is refused"
    );

    // The objects come from another node without hooks.
    let (b, _db) = start();
    let mut cb = Client::connect(&b);
    cb.put_value(None, "rb", "k1", b"{not json 1").expect("b");
    cb.put_value(None, "rb", "k2", b"{not json 2").expect("b");
    let rt = common::runtime();
    let object = |key: &[u8]| match rt
        .block_on(b.node().get(b"rb", key, &GetOpts::default()))
        .expect("get")
    {
        GetOutcome::Found(o) => WireObject::full(&o),
        other => panic!("{other:?}"),
    };

    // Replication (a sink applying a source cluster's push).
    let push = Msg::ReplPush {
        source: "another-cluster".into(),
        items: vec![ReplItem::Object((
            b"rb".to_vec(),
            b"k1".to_vec(),
            object(b"k1"),
        ))],
    };
    assert!(matches!(cluster_call(&a, &push), Reply::Ok));
    assert_eq!(ca.get_value("rb", "k1"), Some(b"{not json 1".to_vec()));

    // Handoff (a batch for each vnode of the key's preference list).
    let ring = Ring::new(8).expect("ring");
    for p in ring.preflist(&key_hash(None, b"rb", b"k2"), 3) {
        let batch = Msg::Handoff {
            partition: p,
            objects: vec![(b"rb".to_vec(), b"k2".to_vec(), object(b"k2"))],
        };
        assert!(
            matches!(cluster_call(&a, &batch), Reply::Ok),
            "partition {p}"
        );
    }
    assert_eq!(ca.get_value("rb", "k2"), Some(b"{not json 2".to_vec()));
    let stats = http(a.http_addr().expect("http"), "GET", "/stats", &[], b"");
    let v: Value = serde_json::from_slice(&stats.body).expect("stats");
    assert_eq!(
        v["precommit_refused_total"],
        json!(1),
        "only the client write"
    );
}

#[test]
fn an_unreadable_js_source_dir_stops_the_node_at_start() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = Config::ephemeral(&dir.path().join("data"));
    c.mapred.js_source_dir = dir.path().join("missing").display().to_string();
    match ServerHandle::spawn(c) {
        Ok(_) => panic!("started with a missing js_source_dir"),
        Err(e) => assert!(e.to_string().contains("js_source_dir"), "{e}"),
    }
}
