//! Riak data types over PB against an in-process node (memory backend,
//! ring of 8): bucket types with a `datatype` (validated as Riak does),
//! `DtFetchReq`/`DtUpdateReq` for counters, sets (with contexts), maps
//! (nested fields, field removal), HLLs and GSets, `return_body` and
//! `include_context`, generated keys, the 1.4 counters (50–53 and the
//! `default`-type adapter), and bad input with Riak's error texts, the
//! node serving on after each.

mod common;

use basalt_server::api::pb::btypes::{code as bt, BasaltBucketTypeReq};
use basalt_server::bucket::types as btypes;
use basalt_server::pb::{self, code};
use basalt_server::ServerHandle;
use common::Client;
use prost::Message;

fn start() -> (ServerHandle, tempfile::TempDir) {
    common::spawn_node(false, |_| {})
}

fn try_create(h: &ServerHandle, name: &str, json: &str) -> Result<(), String> {
    let props = btypes::props_from_json(json).expect("json");
    let mut a = Client::admin(h);
    a.try_call(
        bt::ADMIN_TYPE_CREATE_REQ,
        &BasaltBucketTypeReq {
            r#type: name.into(),
            props: Some(props),
        },
    )?;
    a.try_call(
        bt::ADMIN_TYPE_ACTIVATE_REQ,
        &BasaltBucketTypeReq {
            r#type: name.into(),
            props: None,
        },
    )
    .map(|_| ())
}

fn typed(h: &ServerHandle) {
    for (t, dt) in [
        ("counters", "counter"),
        ("sets", "set"),
        ("maps", "map"),
        ("hlls", "hll"),
        ("gsets", "gset"),
    ] {
        try_create(h, t, &format!(r#"{{"props":{{"datatype":"{dt}"}}}}"#)).expect("create");
    }
}

fn update(
    c: &mut Client,
    t: &str,
    k: Option<&str>,
    op: pb::DtOp,
    ctx: Option<Vec<u8>>,
) -> Result<pb::DtUpdateResp, String> {
    let req = pb::DtUpdateReq {
        bucket: b"b".to_vec(),
        key: k.map(Into::into),
        r#type: t.into(),
        context: ctx,
        op,
        return_body: Some(true),
        ..Default::default()
    };
    let (rc, body) = c.try_call(code::DT_UPDATE_REQ, &req)?;
    assert_eq!(rc, code::DT_UPDATE_RESP);
    Ok(pb::DtUpdateResp::decode(body.as_slice()).expect("update resp"))
}

fn fetch(c: &mut Client, t: &str, k: &str) -> Result<pb::DtFetchResp, String> {
    let req = pb::DtFetchReq {
        bucket: b"b".to_vec(),
        key: k.into(),
        r#type: t.into(),
        ..Default::default()
    };
    let (rc, body) = c.try_call(code::DT_FETCH_REQ, &req)?;
    assert_eq!(rc, code::DT_FETCH_RESP);
    Ok(pb::DtFetchResp::decode(body.as_slice()).expect("fetch resp"))
}

fn counter(n: i64) -> pb::DtOp {
    pb::DtOp {
        counter_op: Some(pb::CounterOp { increment: Some(n) }),
        ..Default::default()
    }
}

fn set(adds: &[&str], removes: &[&str]) -> pb::SetOp {
    pb::SetOp {
        adds: adds.iter().map(|s| s.as_bytes().to_vec()).collect(),
        removes: removes.iter().map(|s| s.as_bytes().to_vec()).collect(),
    }
}

fn set_op(adds: &[&str], removes: &[&str]) -> pb::DtOp {
    pb::DtOp {
        set_op: Some(set(adds, removes)),
        ..Default::default()
    }
}

fn field(name: &str, t: i32) -> pb::MapField {
    pb::MapField {
        name: name.into(),
        r#type: t,
    }
}

#[test]
fn datatype_bucket_types_are_validated() {
    let (h, _d) = start();
    let e = try_create(
        &h,
        "x",
        r#"{"props":{"datatype":"counter","allow_mult":false}}"#,
    );
    assert!(e.is_err_and(|e| e.contains("allow_mult=true")));
    let e = try_create(&h, "y", r#"{"props":{"datatype":"bogus"}}"#);
    assert!(e.is_err_and(|e| e.contains("not a supported data type")));
    let e = try_create(&h, "z", r#"{"props":{"datatype":"hll","hll_precision":3}}"#);
    assert!(e.is_err_and(|e| e.contains("hll_precision")));
    typed(&h);
    // The datatype of a type cannot change, nor can its buckets stop
    // allowing siblings.
    let mut c = Client::connect(&h);
    let set_type = |c: &mut Client, json: &str| {
        c.try_call(
            code::SET_BUCKET_TYPE_REQ,
            &pb::RpbSetBucketTypeReq {
                r#type: b"sets".to_vec(),
                props: btypes::props_from_json(json).expect("json"),
            },
        )
    };
    let e = set_type(&mut c, r#"{"props":{"datatype":"map"}}"#);
    assert!(e.is_err_and(|e| e.contains("cannot_modify_datatype")));
    let e = set_type(&mut c, r#"{"props":{"allow_mult":false}}"#);
    assert!(e.is_err_and(|e| e.contains("allow_mult=true")));
    assert!(set_type(&mut c, r#"{"props":{"n_val":2}}"#).is_ok());
    // hll_precision: any in range at creation; afterwards it may only
    // decrease (as Riak), with a clear error on an increase.
    try_create(
        &h,
        "hll16",
        r#"{"props":{"datatype":"hll","hll_precision":16}}"#,
    )
    .expect("create at 16");
    let set_hll = |c: &mut Client, t: &str, json: &str| {
        c.try_call(
            code::SET_BUCKET_TYPE_REQ,
            &pb::RpbSetBucketTypeReq {
                r#type: t.into(),
                props: btypes::props_from_json(json).expect("json"),
            },
        )
    };
    assert!(set_hll(&mut c, "hlls", r#"{"props":{"hll_precision":12}}"#).is_ok());
    let e = set_hll(&mut c, "hlls", r#"{"props":{"hll_precision":13}}"#);
    assert!(
        e.as_ref()
            .is_err_and(|e| e.contains("hll_precision") && e.contains("only decrease")),
        "{e:?}"
    );
    assert!(set_hll(&mut c, "hll16", r#"{"props":{"hll_precision":16}}"#).is_ok());
    let b = c.call(
        code::GET_BUCKET_TYPE_REQ,
        &pb::RpbGetBucketTypeReq {
            r#type: b"hlls".to_vec(),
        },
        code::GET_BUCKET_RESP,
    );
    let p = pb::RpbGetBucketResp::decode(b.as_slice())
        .expect("props")
        .props;
    assert_eq!(p.hll_precision, Some(12));
    // Props answer the datatype.
    let b = c.call(
        code::GET_BUCKET_TYPE_REQ,
        &pb::RpbGetBucketTypeReq {
            r#type: b"sets".to_vec(),
        },
        code::GET_BUCKET_RESP,
    );
    let p = pb::RpbGetBucketResp::decode(b.as_slice())
        .expect("props")
        .props;
    assert_eq!(p.datatype.as_deref(), Some(b"set".as_slice()));
    // A plain object is refused in a typed bucket; the node serves on.
    let put = pb::RpbPutReq {
        bucket: b"b".to_vec(),
        key: Some(b"k".to_vec()),
        r#type: Some(b"sets".to_vec()),
        content: pb::RpbContent {
            value: b"v".to_vec(),
            ..Default::default()
        },
        ..Default::default()
    };
    let e = c.try_call(code::PUT_REQ, &put);
    assert!(e.is_err_and(|e| e.contains("datatype")));
    c.ping();
}

#[test]
fn counters_sets_hlls_and_gsets() {
    let (h, _d) = start();
    typed(&h);
    let mut c = Client::connect(&h);
    assert_eq!(fetch(&mut c, "counters", "k").expect("fetch").value, None);
    update(&mut c, "counters", Some("k"), counter(5), None).expect("inc");
    let r = update(&mut c, "counters", Some("k"), counter(-2), None).expect("dec");
    assert_eq!(r.counter_value, Some(3));
    let f = fetch(&mut c, "counters", "k").expect("fetch");
    assert_eq!(f.r#type, 1);
    assert_eq!(f.value.and_then(|v| v.counter_value), Some(3));
    assert_eq!(f.context, None);

    let r = update(
        &mut c,
        "sets",
        Some("s"),
        set_op(&["a", "b", "c"], &[]),
        None,
    )
    .expect("add");
    assert_eq!(r.set_value, [b"a".to_vec(), b"b".to_vec(), b"c".to_vec()]);
    let f = fetch(&mut c, "sets", "s").expect("fetch");
    let ctx = f.context.clone().expect("a set has a context");
    let r = update(&mut c, "sets", Some("s"), set_op(&["d"], &["a"]), Some(ctx)).expect("rm");
    assert_eq!(r.set_value, [b"b".to_vec(), b"c".to_vec(), b"d".to_vec()]);
    // Without a context, removing an absent element is Riak's precondition error.
    let e = update(&mut c, "sets", Some("s"), set_op(&[], &["zz"]), None);
    assert_eq!(
        e.err().as_deref(),
        Some("{precondition,{not_present,<<\"zz\">>}}")
    );
    let e = update(
        &mut c,
        "sets",
        Some("s"),
        set_op(&[], &["b"]),
        Some(b"junk".to_vec()),
    );
    assert_eq!(e.err().as_deref(), Some("Malformed context"));
    assert_eq!(
        fetch(&mut c, "sets", "s")
            .expect("fetch")
            .value
            .map(|v| v.set_value.len()),
        Some(3),
        "nothing written by the failed updates"
    );

    let hll = pb::DtOp {
        hll_op: Some(pb::HllOp {
            adds: (0..100u32).map(|i| i.to_string().into_bytes()).collect(),
        }),
        ..Default::default()
    };
    let r = update(&mut c, "hlls", Some("h"), hll, None).expect("hll");
    let est = r.hll_value.expect("hll value");
    assert!((95..=105).contains(&est), "{est}");
    let g = pb::DtOp {
        gset_op: Some(pb::GSetOp {
            adds: vec![b"x".to_vec(), b"y".to_vec()],
        }),
        ..Default::default()
    };
    // A generated key comes back.
    let r = update(&mut c, "gsets", None, g, None).expect("gset");
    let key = r.key.expect("generated key");
    let f = fetch(&mut c, "gsets", std::str::from_utf8(&key).expect("utf8")).expect("fetch");
    assert_eq!(f.value.map(|v| v.gset_value.len()), Some(2));
}

#[test]
fn maps_with_nested_fields_and_removes() {
    let (h, _d) = start();
    typed(&h);
    let mut c = Client::connect(&h);
    let op = pb::DtOp {
        map_op: Some(pb::MapOp {
            removes: vec![],
            updates: vec![
                pb::MapUpdate {
                    field: field("visits", 1),
                    counter_op: Some(pb::CounterOp { increment: Some(2) }),
                    ..Default::default()
                },
                pb::MapUpdate {
                    field: field("tags", 2),
                    set_op: Some(set(&["x", "y"], &[])),
                    ..Default::default()
                },
                pb::MapUpdate {
                    field: field("name", 3),
                    register_op: Some(b"ann".to_vec()),
                    ..Default::default()
                },
                pb::MapUpdate {
                    field: field("vip", 4),
                    flag_op: Some(1),
                    ..Default::default()
                },
                pb::MapUpdate {
                    field: field("addr", 5),
                    map_op: Some(pb::MapOp {
                        removes: vec![],
                        updates: vec![pb::MapUpdate {
                            field: field("city", 3),
                            register_op: Some(b"oslo".to_vec()),
                            ..Default::default()
                        }],
                    }),
                    ..Default::default()
                },
            ],
        }),
        ..Default::default()
    };
    let r = update(&mut c, "maps", Some("m"), op, None).expect("map");
    assert_eq!(r.map_value.len(), 5, "{:?}", r.map_value);
    let f = fetch(&mut c, "maps", "m").expect("fetch");
    let entries = f.value.expect("value").map_value;
    let by = |n: &str| {
        entries
            .iter()
            .find(|e| e.field.name == n.as_bytes())
            .cloned()
    };
    assert_eq!(by("visits").and_then(|e| e.counter_value), Some(2));
    assert_eq!(
        by("name").and_then(|e| e.register_value),
        Some(b"ann".to_vec())
    );
    assert_eq!(by("vip").and_then(|e| e.flag_value), Some(true));
    assert_eq!(by("tags").map(|e| e.set_value.len()), Some(2));
    let addr = by("addr").expect("nested");
    assert_eq!(addr.map_value[0].register_value, Some(b"oslo".to_vec()));
    // Remove a field with the context: it is gone, the others stay.
    let rm = pb::DtOp {
        map_op: Some(pb::MapOp {
            removes: vec![field("tags", 2)],
            updates: vec![],
        }),
        ..Default::default()
    };
    let r = update(&mut c, "maps", Some("m"), rm.clone(), f.context).expect("rm");
    assert_eq!(r.map_value.len(), 4);
    // Without a context an absent field is a precondition error.
    let e = update(&mut c, "maps", Some("m"), rm, None);
    assert_eq!(
        e.err().as_deref(),
        Some("{precondition,{not_present,<<\"tags\">>}}")
    );
    // A field update with the wrong operation for its type.
    let bad = pb::DtOp {
        map_op: Some(pb::MapOp {
            removes: vec![],
            updates: vec![pb::MapUpdate {
                field: field("visits", 1),
                set_op: Some(set(&["q"], &[])),
                ..Default::default()
            }],
        }),
        ..Default::default()
    };
    assert!(update(&mut c, "maps", Some("m"), bad, None).is_err());
}

#[test]
fn wrong_types_and_bad_requests_get_riak_errors() {
    let (h, _d) = start();
    typed(&h);
    try_create(&h, "plain", r#"{"props":{}}"#).expect("plain type");
    let mut c = Client::connect(&h);
    let e = update(&mut c, "sets", Some("k"), counter(1), None);
    assert_eq!(
        e.err().as_deref(),
        Some("Operation type is `counter` but  bucket type is `set`.")
    );
    let e = update(&mut c, "plain", Some("k"), counter(1), None);
    assert_eq!(
        e.err().as_deref(),
        Some("Bucket datatype `undefined` is not a supported type")
    );
    let e = fetch(&mut c, "nope", "k");
    assert!(e.is_err_and(|e| e.contains("no_type")));
    let e = update(&mut c, "counters", Some("k"), pb::DtOp::default(), None);
    assert!(e.is_err_and(|e| e.contains("Unknown operation")));
    let e = update(&mut c, "default", Some("k"), set_op(&["a"], &[]), None);
    assert_eq!(
        e.err().as_deref(),
        Some("non-counter operation on default bucket")
    );
    c.ping();
}

#[test]
fn legacy_counters() {
    let (h, _d) = start();
    let mut c = Client::connect(&h);
    let inc = |c: &mut Client, b: &str, n: i64| {
        c.try_call(
            code::COUNTER_UPDATE_REQ,
            &pb::RpbCounterUpdateReq {
                bucket: b.into(),
                key: b"k".to_vec(),
                amount: n,
                returnvalue: Some(true),
                ..Default::default()
            },
        )
        .map(|(_, b)| {
            pb::RpbCounterUpdateResp::decode(b.as_slice())
                .expect("resp")
                .value
        })
    };
    let e = inc(&mut c, "nomult", 1);
    assert_eq!(
        e.err().as_deref(),
        Some("Counters require bucket property 'allow_mult=true'")
    );
    c.call(
        code::SET_BUCKET_REQ,
        &pb::RpbSetBucketReq {
            bucket: b"cnt".to_vec(),
            props: pb::RpbBucketProps {
                allow_mult: Some(true),
                ..Default::default()
            },
            r#type: None,
        },
        code::SET_BUCKET_RESP,
    );
    assert_eq!(inc(&mut c, "cnt", 10), Ok(Some(10)));
    assert_eq!(inc(&mut c, "cnt", -3), Ok(Some(7)));
    let b = c.call(
        code::COUNTER_GET_REQ,
        &pb::RpbCounterGetReq {
            bucket: b"cnt".to_vec(),
            key: b"k".to_vec(),
            ..Default::default()
        },
        code::COUNTER_GET_RESP,
    );
    assert_eq!(
        pb::RpbCounterGetResp::decode(b.as_slice())
            .expect("get")
            .value,
        Some(7)
    );
    // The data-type API on the default type reaches the same counter.
    let f = pb::DtFetchReq {
        bucket: b"cnt".to_vec(),
        key: b"k".to_vec(),
        r#type: b"default".to_vec(),
        ..Default::default()
    };
    let b = c.call(code::DT_FETCH_REQ, &f, code::DT_FETCH_RESP);
    let f = pb::DtFetchResp::decode(b.as_slice()).expect("fetch");
    assert_eq!(f.value.and_then(|v| v.counter_value), Some(7));
    let b = c.call(
        code::COUNTER_GET_REQ,
        &pb::RpbCounterGetReq {
            bucket: b"cnt".to_vec(),
            key: b"none".to_vec(),
            ..Default::default()
        },
        code::COUNTER_GET_RESP,
    );
    assert_eq!(
        pb::RpbCounterGetResp::decode(b.as_slice())
            .expect("get")
            .value,
        None
    );
}

/// `DtFetchReq.basic_quorum`, `n_val` and `sloppy_quorum` are honoured
/// as on a plain GET: with two of
/// three replicas missing the value (their vnode directories removed) and
/// `notfound_ok = false`, `r = 1`, a basic-quorum fetch gives up on the
/// majority of not-founds; without it the third replica's value counts.
#[test]
fn fetch_honours_basic_quorum() {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = common::test_config(dir.path(), false);
    config.backend = "leveled".into();
    let h = ServerHandle::spawn(config.clone()).expect("spawn");
    try_create(&h, "counters", r#"{"props":{"datatype":"counter"}}"#).expect("type");
    let mut c = Client::connect(&h);
    // w = dw = 3: every replica holds the value before the shutdown (with
    // the default quorum the third write may still be in flight, and the
    // two replicas removed below may be the only ones that had it).
    let all = pb::DtUpdateReq {
        bucket: b"b".to_vec(),
        key: Some(b"k".to_vec()),
        r#type: b"counters".to_vec(),
        op: counter(5),
        w: Some(3),
        dw: Some(3),
        ..Default::default()
    };
    c.call(code::DT_UPDATE_REQ, &all, code::DT_UPDATE_RESP);
    let sb = h
        .node()
        .types()
        .storage_bucket(Some(b"counters"), b"b")
        .expect("storage bucket");
    let pl = h.node().preflist_of(&sb, b"k");
    assert_eq!(pl.len(), 3);
    drop(c);
    h.shutdown().expect("shutdown");
    for p in &pl[..2] {
        std::fs::remove_dir_all(dir.path().join("vnodes").join(p.partition.to_string()))
            .expect("rm");
    }
    let h = ServerHandle::spawn(config).expect("respawn");
    let mut c = Client::connect(&h);
    let req = |basic_quorum: bool| pb::DtFetchReq {
        bucket: b"b".to_vec(),
        key: b"k".to_vec(),
        r#type: b"counters".to_vec(),
        r: Some(1),
        notfound_ok: Some(false),
        basic_quorum: Some(basic_quorum),
        ..Default::default()
    };
    let got = |c: &mut Client, bq: bool| {
        let b = c.call(code::DT_FETCH_REQ, &req(bq), code::DT_FETCH_RESP);
        pb::DtFetchResp::decode(b.as_slice())
            .expect("fetch resp")
            .value
            .and_then(|v| v.counter_value)
    };
    assert_eq!(got(&mut c, true), None, "basic quorum gives up");
    assert_eq!(got(&mut c, false), Some(5), "the third replica answers");
    // A request n_val reads only the first n replicas (the first lost the
    // value; read repair may have restored it meanwhile, so both answers
    // are possible for n_val = 1, but never an error); one above the
    // bucket's is Riak's n_val_violation. sloppy_quorum = false: primaries
    // only (all are up here).
    let with = |n_val: Option<u32>, sloppy: Option<bool>| pb::DtFetchReq {
        n_val,
        sloppy_quorum: sloppy,
        basic_quorum: Some(false),
        ..req(false)
    };
    let b = c.call(
        code::DT_FETCH_REQ,
        &with(Some(1), None),
        code::DT_FETCH_RESP,
    );
    let v = pb::DtFetchResp::decode(b.as_slice()).expect("d").value;
    assert!(
        v.as_ref().is_none_or(|v| v.counter_value == Some(5)),
        "{v:?}"
    );
    let e = c
        .try_call(code::DT_FETCH_REQ, &with(Some(4), None))
        .expect_err("n_val above the bucket's");
    assert!(e.contains("n_val_violation"), "{e}");
    let b = c.call(
        code::DT_FETCH_REQ,
        &with(None, Some(false)),
        code::DT_FETCH_RESP,
    );
    let v = pb::DtFetchResp::decode(b.as_slice()).expect("d").value;
    assert_eq!(v.and_then(|v| v.counter_value), Some(5));
    h.shutdown().expect("shutdown");
}

/// `DtUpdateReq.n_val`, `sloppy_quorum` and `node_confirms` as a PUT's:
/// on one node every replica is on the same node, so `node_confirms = 2`
/// is refused before anything is written; an `n_val` or `node_confirms`
/// above the bucket's n_val is Riak's violation error; `n_val = 1` and
/// `sloppy_quorum = false` write.
#[test]
fn update_honours_n_val_sloppy_quorum_and_node_confirms() {
    let (h, _d) = start();
    typed(&h);
    let mut c = Client::connect(&h);
    let req = |n_val: Option<u32>, sloppy: Option<bool>, nc: Option<u32>| pb::DtUpdateReq {
        bucket: b"b".to_vec(),
        key: Some(b"q".to_vec()),
        r#type: b"counters".to_vec(),
        op: counter(1),
        n_val,
        sloppy_quorum: sloppy,
        node_confirms: nc,
        ..Default::default()
    };
    let e = c
        .try_call(code::DT_UPDATE_REQ, &req(None, None, Some(2)))
        .expect_err("one node");
    assert_eq!(e, "{node_confirms_val_unsatisfied,2,1}");
    let e = c
        .try_call(code::DT_UPDATE_REQ, &req(None, None, Some(4)))
        .expect_err("above n_val");
    assert!(e.contains("node_confirms_val_violation"), "{e}");
    let e = c
        .try_call(code::DT_UPDATE_REQ, &req(Some(4), None, None))
        .expect_err("above the bucket's n_val");
    assert!(e.contains("n_val_violation"), "{e}");
    assert!(fetch(&mut c, "counters", "q")
        .expect("fetch")
        .value
        .is_none());
    c.call(
        code::DT_UPDATE_REQ,
        &req(Some(1), Some(false), Some(1)),
        code::DT_UPDATE_RESP,
    );
    c.call(
        code::DT_UPDATE_REQ,
        &req(None, Some(false), None),
        code::DT_UPDATE_RESP,
    );
    let v = fetch(&mut c, "counters", "q")
        .expect("fetch")
        .value
        .and_then(|v| v.counter_value);
    assert_eq!(v, Some(2));
}
