//! Bucket-type tests over PB: each test starts an in-process node (ring of
//! 8, ephemeral port) with `ServerHandle::spawn` and drives it with a small
//! blocking PB client: the admin codes (create / activate / list / status,
//! on the cluster port),
//! typed buckets isolated from default-type buckets of the same name
//! (get/put, list keys/buckets, 2i), props inherited from the type and
//! overridden per bucket, RpbGetBucketTypeReq / RpbSetBucketTypeReq,
//! unknown or inactive types refused with the connection kept, preflists
//! (33/34) following Riak's `{{Type, Bucket}, Key}` hash, and types, props
//! and typed objects surviving a restart (bitcask backend). The client is
//! `riak_pb`'s blocking client (`common/mod.rs`).

mod common;

use basalt_server::api::pb::btypes::{code as bt, BasaltBucketTypeListResp, BasaltBucketTypeReq};
use basalt_server::bucket::types as btypes;
use basalt_server::pb::{
    self, code, RpbGetBucketKeyPreflistReq, RpbGetBucketKeyPreflistResp, RpbGetBucketTypeReq,
    RpbSetBucketTypeReq,
};
use basalt_server::ring::{key_hash, Ring};
use basalt_server::{Config, ServerHandle};
use common::Client;
use prost::Message;
use std::path::Path;

fn start_in(dir: &Path, backend: &str) -> ServerHandle {
    let c = Config {
        data_dir: dir.to_path_buf(),
        pb_listen: "127.0.0.1:0".into(),
        cluster_listen: "127.0.0.1:0".into(),
        http_listen: String::new(),
        ring_size: 8,
        backend: backend.into(),
        ..Config::default()
    };
    ServerHandle::spawn(c).expect("spawn")
}

fn start() -> (ServerHandle, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    (start_in(dir.path(), "memory"), dir)
}

/// Typed calls this file adds to the shared [`Client`].
impl Client {
    fn create(&mut self, name: &str, json: &str) {
        let props = btypes::props_from_json(json).expect("json");
        self.call(
            bt::ADMIN_TYPE_CREATE_REQ,
            &BasaltBucketTypeReq {
                r#type: name.into(),
                props: Some(props),
            },
            bt::ADMIN_TYPE_CREATE_RESP,
        );
    }
    fn activate(&mut self, name: &str) {
        self.call(
            bt::ADMIN_TYPE_ACTIVATE_REQ,
            &BasaltBucketTypeReq {
                r#type: name.into(),
                props: None,
            },
            bt::ADMIN_TYPE_ACTIVATE_RESP,
        );
    }
    fn list(&mut self) -> Vec<(String, bool)> {
        let b = self.call(
            bt::ADMIN_TYPE_LIST_REQ,
            &BasaltBucketTypeReq::default(),
            bt::ADMIN_TYPE_LIST_RESP,
        );
        BasaltBucketTypeListResp::decode(b.as_slice())
            .expect("list")
            .types
            .into_iter()
            .map(|t| (String::from_utf8_lossy(&t.r#type).into_owned(), t.active))
            .collect()
    }
    fn put(&mut self, t: Option<&str>, b: &str, k: &str, v: &str) {
        let req = pb::RpbPutReq {
            bucket: b.into(),
            key: Some(k.into()),
            content: pb::RpbContent {
                value: v.into(),
                ..Default::default()
            },
            r#type: t.map(Into::into),
            ..Default::default()
        };
        self.call(code::PUT_REQ, &req, code::PUT_RESP);
    }
    fn get_req(t: Option<&str>, b: &str, k: &str) -> pb::RpbGetReq {
        pb::RpbGetReq {
            bucket: b.into(),
            key: k.into(),
            r#type: t.map(Into::into),
            ..Default::default()
        }
    }
    fn get(&mut self, t: Option<&str>, b: &str, k: &str) -> Vec<Vec<u8>> {
        let body = self.call(code::GET_REQ, &Self::get_req(t, b, k), code::GET_RESP);
        pb::RpbGetResp::decode(body.as_slice())
            .expect("get")
            .content
            .into_iter()
            .map(|c| c.value)
            .collect()
    }
    fn bucket_props(&mut self, t: Option<&str>, b: &str) -> pb::RpbBucketProps {
        let body = self.call(
            code::GET_BUCKET_REQ,
            &pb::RpbGetBucketReq {
                bucket: b.into(),
                r#type: t.map(Into::into),
            },
            code::GET_BUCKET_RESP,
        );
        pb::RpbGetBucketResp::decode(body.as_slice())
            .expect("props")
            .props
    }
    fn set_bucket(&mut self, t: Option<&str>, b: &str, props: pb::RpbBucketProps) {
        self.call(
            code::SET_BUCKET_REQ,
            &pb::RpbSetBucketReq {
                bucket: b.into(),
                props,
                r#type: t.map(Into::into),
            },
            code::SET_BUCKET_RESP,
        );
    }
    fn list_keys(&mut self, t: Option<&str>, b: &str) -> Vec<Vec<u8>> {
        let req = pb::RpbListKeysReq {
            bucket: b.into(),
            r#type: t.map(Into::into),
            ..Default::default()
        };
        self.send(code::LIST_KEYS_REQ, &req.encode_to_vec());
        let mut keys = Vec::new();
        loop {
            let (rc, buf) = self.0.recv_frame().expect("frame");
            assert_eq!(rc, code::LIST_KEYS_RESP);
            let r = pb::RpbListKeysResp::decode(buf.as_slice()).expect("keys");
            keys.extend(r.keys);
            if r.done == Some(true) {
                break;
            }
        }
        keys.sort();
        keys
    }
    fn list_buckets(&mut self, t: Option<&str>) -> Vec<Vec<u8>> {
        let body = self.call(
            code::LIST_BUCKETS_REQ,
            &pb::RpbListBucketsReq {
                r#type: t.map(Into::into),
                ..Default::default()
            },
            code::LIST_BUCKETS_RESP,
        );
        pb::RpbListBucketsResp::decode(body.as_slice())
            .expect("buckets")
            .buckets
    }
}

#[test]
fn admin_create_activate_list_status() {
    let (h, _d) = start();
    let mut c = Client::connect(&h);
    let mut a = Client::admin(&h);
    assert_eq!(a.list(), vec![("default".to_string(), true)]);
    // The client port does not serve the admin codes: Riak's unknown-code
    // error, connection kept.
    let on_pb = c.try_call(bt::ADMIN_TYPE_LIST_REQ, &BasaltBucketTypeReq::default());
    assert_eq!(on_pb, Err("Unknown message code: 244".to_string()));
    c.ping();
    a.create("t1", r#"{"props":{"n_val":2,"allow_mult":false}}"#);
    assert_eq!(
        a.list(),
        vec![("default".to_string(), true), ("t1".to_string(), false)]
    );
    let status = |c: &mut Client, name: &str| {
        c.try_call(
            bt::ADMIN_TYPE_STATUS_REQ,
            &BasaltBucketTypeReq {
                r#type: name.into(),
                props: None,
            },
        )
        .map(|(rc, b)| {
            assert_eq!(rc, bt::ADMIN_TYPE_LIST_RESP);
            BasaltBucketTypeListResp::decode(b.as_slice()).expect("status")
        })
    };
    let s = status(&mut a, "t1").expect("status");
    assert_eq!(s.types.len(), 1);
    assert!(!s.types[0].active);
    assert_eq!(s.types[0].props.n_val, Some(2));
    assert_eq!(s.types[0].props.allow_mult, Some(false));
    a.activate("t1");
    assert!(status(&mut a, "t1").expect("status").types[0].active);
    assert!(status(&mut a, "nope").is_err_and(|e| e == "nope is not an existing bucket type"));
    // re-creating an active type is refused; activating twice is fine
    let again = a.try_call(
        bt::ADMIN_TYPE_CREATE_REQ,
        &BasaltBucketTypeReq {
            r#type: b"t1".to_vec(),
            props: None,
        },
    );
    assert!(again.is_err_and(|e| e.contains("already_active")));
    a.activate("t1");
    // a new type defaults to allow_mult = true (Riak 2.x custom types)
    a.create("t2", r#"{"props":{}}"#);
    let b = c.call(
        bt::GET_BUCKET_TYPE_REQ,
        &RpbGetBucketTypeReq {
            r#type: b"t2".to_vec(),
        },
        code::GET_BUCKET_RESP,
    );
    let p = pb::RpbGetBucketResp::decode(b.as_slice())
        .expect("props")
        .props;
    assert_eq!((p.allow_mult, p.n_val), (Some(true), Some(3)));
    c.ping();
}

#[test]
fn typed_bucket_is_isolated_from_default() {
    let (h, _d) = start();
    let mut c = Client::connect(&h);
    let mut a = Client::admin(&h);
    a.create("t", r#"{"props":{"allow_mult":false}}"#);
    a.activate("t");
    c.put(Some("t"), "b", "k", "typed");
    assert_eq!(c.get(Some("t"), "b", "k"), vec![b"typed".to_vec()]);
    assert!(c.get(None, "b", "k").is_empty());
    assert!(c.get(Some("default"), "b", "k").is_empty());
    c.put(None, "b", "k", "plain");
    c.put(None, "b", "only-default", "x");
    assert_eq!(c.get(Some("t"), "b", "k"), vec![b"typed".to_vec()]);
    assert_eq!(c.get(None, "b", "k"), vec![b"plain".to_vec()]);
    assert_eq!(c.list_keys(Some("t"), "b"), vec![b"k".to_vec()]);
    assert_eq!(
        c.list_keys(None, "b"),
        vec![b"k".to_vec(), b"only-default".to_vec()]
    );
    c.put(Some("t"), "tb", "k2", "v");
    assert_eq!(
        c.list_buckets(Some("t")),
        vec![b"b".to_vec(), b"tb".to_vec()]
    );
    assert_eq!(c.list_buckets(None), vec![b"b".to_vec()]);
    // delete in the type leaves the default-type object alone
    c.call(
        code::DEL_REQ,
        &pb::RpbDelReq {
            bucket: b"b".to_vec(),
            key: b"k".to_vec(),
            r#type: Some(b"t".to_vec()),
            ..Default::default()
        },
        code::DEL_RESP,
    );
    assert!(c.get(Some("t"), "b", "k").is_empty());
    assert_eq!(c.get(None, "b", "k"), vec![b"plain".to_vec()]);
    // 2i honours the type
    for (t, v) in [(Some("t"), "typed"), (None, "plain")] {
        let req = pb::RpbPutReq {
            bucket: b"ib".to_vec(),
            key: Some(v.into()),
            content: pb::RpbContent {
                value: v.into(),
                indexes: vec![pb::RpbPair {
                    key: b"f_bin".to_vec(),
                    value: Some(b"x".to_vec()),
                }],
                ..Default::default()
            },
            r#type: t.map(Into::into),
            ..Default::default()
        };
        c.call(code::PUT_REQ, &req, code::PUT_RESP);
    }
    for (t, want) in [(Some("t"), "typed"), (None, "plain")] {
        let req = pb::RpbIndexReq {
            bucket: b"ib".to_vec(),
            index: b"f_bin".to_vec(),
            qtype: pb::INDEX_EQ,
            key: Some(b"x".to_vec()),
            r#type: t.map(Into::into),
            ..Default::default()
        };
        let b = c.call(code::INDEX_REQ, &req, code::INDEX_RESP);
        let r = pb::RpbIndexResp::decode(b.as_slice()).expect("index");
        assert_eq!(r.keys, vec![want.as_bytes().to_vec()]);
    }
}

#[test]
fn props_inherit_type_then_bucket_overrides() {
    let (h, _d) = start();
    let mut c = Client::connect(&h);
    let mut a = Client::admin(&h);
    a.create(
        "two",
        r#"{"props":{"n_val":2,"allow_mult":false,"w":"one"}}"#,
    );
    a.activate("two");
    let p = c.bucket_props(Some("two"), "b");
    assert_eq!((p.n_val, p.allow_mult), (Some(2), Some(false)));
    assert_eq!(p.w, Some(pb::quorum::ONE));
    assert_eq!(c.bucket_props(None, "b").n_val, Some(3));
    c.set_bucket(
        Some("two"),
        "b",
        pb::RpbBucketProps {
            allow_mult: Some(true),
            ..Default::default()
        },
    );
    let p = c.bucket_props(Some("two"), "b");
    assert_eq!((p.n_val, p.allow_mult), (Some(2), Some(true)));
    // the default-type bucket of the same name is untouched
    assert_eq!(c.bucket_props(None, "b").allow_mult, Some(false));
    // allow_mult from the override: concurrent writes make siblings
    c.put(Some("two"), "b", "k", "1");
    c.put(Some("two"), "b", "k", "2");
    assert_eq!(c.get(Some("two"), "b", "k").len(), 2);
    // a type update reaches buckets that did not override the field
    c.call(
        bt::SET_BUCKET_TYPE_REQ,
        &RpbSetBucketTypeReq {
            r#type: b"two".to_vec(),
            props: pb::RpbBucketProps {
                notfound_ok: Some(false),
                ..Default::default()
            },
        },
        code::SET_BUCKET_RESP,
    );
    assert_eq!(c.bucket_props(Some("two"), "b").notfound_ok, Some(false));
    // reset: back to the type's props
    c.call(
        code::RESET_BUCKET_REQ,
        &pb::RpbResetBucketReq {
            bucket: b"b".to_vec(),
            r#type: Some(b"two".to_vec()),
        },
        code::RESET_BUCKET_RESP,
    );
    let p = c.bucket_props(Some("two"), "b");
    assert_eq!((p.allow_mult, p.notfound_ok), (Some(false), Some(false)));
}

#[test]
fn unknown_or_inactive_type_is_refused_connection_kept() {
    let (h, _d) = start();
    let mut c = Client::connect(&h);
    let mut a = Client::admin(&h);
    a.create("later", r#"{"props":{}}"#);
    let get =
        |c: &mut Client, t: &str| c.try_call(code::GET_REQ, &Client::get_req(Some(t), "b", "k"));
    assert!(get(&mut c, "nope").is_err_and(|e| e == "No bucket-type named 'nope' (no_type)"));
    c.ping();
    assert!(get(&mut c, "later").is_err_and(|e| e == "Bucket-type 'later' is not active"));
    c.ping();
    assert!(get(&mut c, "").is_err_and(|e| e.contains("zero-length")));
    let put = pb::RpbPutReq {
        bucket: b"b".to_vec(),
        key: Some(b"k".to_vec()),
        r#type: Some(b"later".to_vec()),
        ..Default::default()
    };
    assert!(c
        .try_call(code::PUT_REQ, &put)
        .is_err_and(|e| e.contains("not active")));
    let lb = pb::RpbListBucketsReq {
        r#type: Some(b"nope".to_vec()),
        ..Default::default()
    };
    assert!(c
        .try_call(code::LIST_BUCKETS_REQ, &lb)
        .is_err_and(|e| e.contains("No bucket-type named")));
    let gt = RpbGetBucketTypeReq {
        r#type: b"nope".to_vec(),
    };
    assert!(c
        .try_call(bt::GET_BUCKET_TYPE_REQ, &gt)
        .is_err_and(|e| e.contains("No bucket-type named")));
    // reserved storage prefix in a default-type bucket name
    assert!(c
        .try_call(code::GET_REQ, &Client::get_req(None, "\0bt\0x", "k"))
        .is_err_and(|e| e.contains("reserved")));
    c.ping();
    a.activate("later");
    c.put(Some("later"), "b", "k", "v");
    assert_eq!(c.get(Some("later"), "b", "k"), vec![b"v".to_vec()]);
}

#[test]
fn preflist_returns_n_val_primaries_with_distinct_partitions() {
    let (h, _d) = start();
    let mut c = Client::connect(&h);
    let mut a = Client::admin(&h);
    a.create("p2", r#"{"props":{"n_val":2}}"#);
    a.activate("p2");
    let ring = Ring::new(8).expect("ring");
    for (t, n) in [(None, 3usize), (Some("p2"), 2)] {
        for k in ["a", "b", "c", "key-42"] {
            let pl = c.preflist(t, b"bk", k.as_bytes());
            assert_eq!(pl.len(), n);
            let mut parts: Vec<i64> = pl.iter().map(|i| i.partition).collect();
            assert!(pl.iter().all(|i| i.primary && !i.node.is_empty()));
            let hash = key_hash(t.map(str::as_bytes), b"bk", k.as_bytes());
            let want: Vec<i64> = ring
                .preflist(&hash, n as u32)
                .into_iter()
                .map(i64::from)
                .collect();
            assert_eq!(parts, want, "type {t:?} key {k}");
            parts.sort_unstable();
            parts.dedup();
            assert_eq!(parts.len(), n);
        }
    }
    assert!(c
        .try_call(
            bt::GET_BUCKET_KEY_PREFLIST_REQ,
            &RpbGetBucketKeyPreflistReq {
                bucket: b"bk".to_vec(),
                key: b"k".to_vec(),
                r#type: Some(b"nope".to_vec()),
            },
        )
        .is_err_and(|e| e.contains("No bucket-type named")));
}

// Regression: Riak lets RpbSetBucketTypeReq change a type's n_val (only
// strongly consistent types refuse it); the Go client's own integration
// test TestSetAndResetBucketTypeProperties sets `plain`'s n_val to 4 and
// back to 3. Basalt used to refuse every n_val change.
#[test]
fn type_n_val_update_is_allowed_like_riak() {
    let (h, _d) = start();
    let mut c = Client::connect(&h);
    let mut a = Client::admin(&h);
    a.create("plain", r#"{"props":{}}"#);
    a.activate("plain");
    c.put(Some("plain"), "b", "k", "v");
    let type_props = |c: &mut Client| {
        let body = c.call(
            bt::GET_BUCKET_TYPE_REQ,
            &RpbGetBucketTypeReq {
                r#type: b"plain".to_vec(),
            },
            code::GET_BUCKET_RESP,
        );
        pb::RpbGetBucketResp::decode(body.as_slice())
            .expect("type props")
            .props
    };
    let preflist_len = |c: &mut Client| {
        let b = c.call(
            bt::GET_BUCKET_KEY_PREFLIST_REQ,
            &RpbGetBucketKeyPreflistReq {
                bucket: b"b".to_vec(),
                key: b"k".to_vec(),
                r#type: Some(b"plain".to_vec()),
            },
            bt::GET_BUCKET_KEY_PREFLIST_RESP,
        );
        RpbGetBucketKeyPreflistResp::decode(b.as_slice())
            .expect("preflist")
            .preflist
            .len()
    };
    for n in [4u32, 2, 3] {
        c.call(
            bt::SET_BUCKET_TYPE_REQ,
            &RpbSetBucketTypeReq {
                r#type: b"plain".to_vec(),
                props: pb::RpbBucketProps {
                    n_val: Some(n),
                    ..Default::default()
                },
            },
            code::SET_BUCKET_RESP,
        );
        assert_eq!(type_props(&mut c).n_val, Some(n));
        assert_eq!(c.bucket_props(Some("plain"), "b").n_val, Some(n));
        assert_eq!(preflist_len(&mut c), n as usize);
        assert_eq!(c.get(Some("plain"), "b", "k"), vec![b"v".to_vec()]);
    }
    // Still validated: an n_val out of range is refused.
    let bad = c.try_call(
        bt::SET_BUCKET_TYPE_REQ,
        &RpbSetBucketTypeReq {
            r#type: b"plain".to_vec(),
            props: pb::RpbBucketProps {
                n_val: Some(0),
                ..Default::default()
            },
        },
    );
    assert!(bad.is_err_and(|e| e.contains("n_val")));
    assert_eq!(type_props(&mut c).n_val, Some(3));
}

/// The Python client's `test_btype_set_props` over PB: a type's props as
/// `RpbGetBucketTypeReq` answers them, changed, then sent back unchanged
/// by `RpbSetBucketTypeReq` (the whole message, `chash_keyfun` and
/// `linkfun` included) restore the type. A type created but not active
/// refuses an update as Riak's claimant does (`not_active`).
#[test]
fn type_props_sent_back_unchanged_restore_the_type() {
    let (h, _d) = start();
    let mut c = Client::connect(&h);
    let mut a = Client::admin(&h);
    a.create("no_siblings", r#"{"props":{"allow_mult":false}}"#);
    a.activate("no_siblings");
    let get = |c: &mut Client| {
        let body = c.call(
            bt::GET_BUCKET_TYPE_REQ,
            &RpbGetBucketTypeReq {
                r#type: b"no_siblings".to_vec(),
            },
            code::GET_BUCKET_RESP,
        );
        pb::RpbGetBucketResp::decode(body.as_slice())
            .expect("type props")
            .props
    };
    let set = |c: &mut Client, t: &str, props: pb::RpbBucketProps| {
        c.try_call(
            bt::SET_BUCKET_TYPE_REQ,
            &RpbSetBucketTypeReq {
                r#type: t.as_bytes().to_vec(),
                props,
            },
        )
    };
    let old = get(&mut c);
    assert_eq!(old.allow_mult, Some(false));
    let one = pb::RpbBucketProps {
        allow_mult: Some(true),
        ..Default::default()
    };
    assert!(set(&mut c, "no_siblings", one.clone()).is_ok());
    assert_eq!(get(&mut c).allow_mult, Some(true));
    assert!(set(&mut c, "no_siblings", old.clone()).is_ok());
    assert_eq!(get(&mut c), old);
    a.create("idle", r#"{"props":{}}"#);
    let e = set(&mut c, "idle", one).expect_err("not active");
    assert!(e.contains("not_active"), "{e}");
}

#[test]
fn types_survive_a_restart() {
    let dir = tempfile::tempdir().expect("tempdir");
    {
        let h = start_in(dir.path(), "bitcask");
        let mut c = Client::connect(&h);
        let mut a = Client::admin(&h);
        a.create("kept", r#"{"props":{"n_val":2}}"#);
        a.activate("kept");
        a.create("pending", r#"{"props":{}}"#);
        c.set_bucket(
            Some("kept"),
            "b",
            pb::RpbBucketProps {
                allow_mult: Some(false),
                ..Default::default()
            },
        );
        c.put(Some("kept"), "b", "k", "v");
        drop(c);
        h.shutdown().expect("shutdown");
    }
    assert!(dir.path().join("bucket_types.json").exists());
    let h = start_in(dir.path(), "bitcask");
    let mut c = Client::connect(&h);
    let mut a = Client::admin(&h);
    assert_eq!(
        a.list(),
        vec![
            ("default".to_string(), true),
            ("kept".to_string(), true),
            ("pending".to_string(), false)
        ]
    );
    let p = c.bucket_props(Some("kept"), "b");
    assert_eq!((p.n_val, p.allow_mult), (Some(2), Some(false)));
    assert_eq!(c.get(Some("kept"), "b", "k"), vec![b"v".to_vec()]);
    assert!(c.get(None, "b", "k").is_empty());
}
