//! Riak data types over HTTP against an in-process node (memory backend,
//! ring of 8): `/types/T/buckets/B/datatypes[/K]` with Riak's JSON
//! operations (counters, sets with a context, maps with nested fields,
//! HLLs, generated keys), its answers for a missing value, a bucket
//! without a datatype and the default type, and the 1.4 counters at
//! `/buckets/B/counters/K`.

mod common;

use basalt_server::api::pb::btypes::{code as bt, BasaltBucketTypeReq};
use basalt_server::bucket::types as btypes;
use basalt_server::ServerHandle;
use common::{http, Client, HttpResp};
use serde_json::json;

fn start() -> (ServerHandle, tempfile::TempDir) {
    let (h, dir) = common::spawn_node(true, |_| {});
    let mut a = Client::admin(&h);
    for (t, json) in [
        ("counters", r#"{"props":{"datatype":"counter"}}"#),
        ("sets", r#"{"props":{"datatype":"set"}}"#),
        ("maps", r#"{"props":{"datatype":"map"}}"#),
        ("hlls", r#"{"props":{"datatype":"hll"}}"#),
        ("plain", r#"{"props":{}}"#),
    ] {
        let req = BasaltBucketTypeReq {
            r#type: t.into(),
            props: Some(btypes::props_from_json(json).expect("json")),
        };
        a.call(bt::ADMIN_TYPE_CREATE_REQ, &req, bt::ADMIN_TYPE_CREATE_RESP);
        let req = BasaltBucketTypeReq {
            r#type: t.into(),
            props: None,
        };
        a.call(
            bt::ADMIN_TYPE_ACTIVATE_REQ,
            &req,
            bt::ADMIN_TYPE_ACTIVATE_RESP,
        );
    }
    (h, dir)
}

fn post(h: &ServerHandle, path: &str, body: serde_json::Value) -> HttpResp {
    http(
        h,
        "POST",
        path,
        &[("Content-Type", "application/json")],
        body.to_string().as_bytes(),
    )
}

#[test]
fn counters_and_sets_with_contexts() {
    let (h, _d) = start();
    let r = http(&h, "GET", "/types/counters/buckets/b/datatypes/c", &[], b"");
    assert_eq!(r.status, 404);
    assert_eq!(r.json(), json!({"type": "counter", "error": "notfound"}));
    let r = post(
        &h,
        "/types/counters/buckets/b/datatypes/c",
        json!({"increment": 5}),
    );
    assert_eq!(r.status, 204, "{}", r.text());
    let r = post(
        &h,
        "/types/counters/buckets/b/datatypes/c?returnbody=true",
        json!({"decrement": 2}),
    );
    assert_eq!(r.json(), json!({"type": "counter", "value": 3}));
    let r = post(
        &h,
        "/types/counters/buckets/b/datatypes/c?returnbody=true",
        json!(-1),
    );
    assert_eq!(r.json()["value"], 2);

    let r = post(
        &h,
        "/types/sets/buckets/b/datatypes/s?returnbody=true",
        json!({"add_all": ["a", "b"], "add": "c"}),
    );
    assert_eq!(r.status, 200, "{}", r.text());
    let j = r.json();
    assert_eq!(j["value"], json!(["a", "b", "c"]));
    let ctx = j["context"].as_str().expect("context").to_string();
    let r = post(
        &h,
        "/types/sets/buckets/b/datatypes/s?returnbody=true&include_context=false",
        json!({"remove": "a", "context": ctx}),
    );
    assert_eq!(r.json(), json!({"type": "set", "value": ["b", "c"]}));
    let r = post(
        &h,
        "/types/sets/buckets/b/datatypes/s",
        json!({"remove": "zz"}),
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("not_present"));
    let r = post(
        &h,
        "/types/sets/buckets/b/datatypes/s",
        json!({"frobnicate": "a"}),
    );
    assert_eq!(r.status, 400);
    assert!(r.text().contains("Invalid operation on datatype 'set'"));
    let r = post(
        &h,
        "/types/sets/buckets/b/datatypes/s",
        json!({"remove": "b", "context": "%%%"}),
    );
    assert_eq!(r.status, 400);
    let j = http(&h, "GET", "/types/sets/buckets/b/datatypes/s", &[], b"").json();
    assert_eq!(
        j["value"],
        json!(["b", "c"]),
        "nothing written by the bad updates"
    );
}

#[test]
fn maps_hlls_and_generated_keys() {
    let (h, _d) = start();
    let op = json!({"update": {
        "visits_counter": 2,
        "tags_set": {"add_all": ["x", "y"]},
        "name_register": "ann",
        "vip_flag": "enable",
        "addr_map": {"update": {"city_register": "oslo"}}
    }});
    let r = post(&h, "/types/maps/buckets/b/datatypes/m?returnbody=true", op);
    assert_eq!(r.status, 200, "{}", r.text());
    let j = r.json();
    assert_eq!(
        j["value"],
        json!({
            "addr_map": {"city_register": "oslo"},
            "name_register": "ann",
            "tags_set": ["x", "y"],
            "vip_flag": true,
            "visits_counter": 2
        })
    );
    let ctx = j["context"].as_str().expect("ctx").to_string();
    let r = post(
        &h,
        "/types/maps/buckets/b/datatypes/m?returnbody=true",
        json!({"remove": ["tags_set"], "update": {"visits_counter": {"increment": 3}}, "context": ctx}),
    );
    let v = &r.json()["value"];
    assert!(v.get("tags_set").is_none(), "{v}");
    assert_eq!(v["visits_counter"], 5);
    let r = post(
        &h,
        "/types/maps/buckets/b/datatypes/m",
        json!({"update": {"bad": 1}}),
    );
    assert_eq!(r.status, 400);
    assert!(r.text().contains("Invalid map field name 'bad'"));

    let r = post(
        &h,
        "/types/hlls/buckets/b/datatypes",
        json!({"add_all": ["1", "2", "3", "2"]}),
    );
    assert_eq!(r.status, 201, "{}", r.text());
    let loc = r.header("location").expect("location").to_string();
    assert!(loc.starts_with("/types/hlls/buckets/b/datatypes/"), "{loc}");
    let j = http(&h, "GET", &loc, &[], b"").json();
    assert_eq!(j, json!({"type": "hll", "value": 3}));
}

#[test]
fn buckets_without_a_datatype_and_legacy_counters() {
    let (h, _d) = start();
    let r = post(&h, "/types/plain/buckets/b/datatypes/k", json!(1));
    assert_eq!(r.status, 403, "{}", r.text());
    let r = post(&h, "/types/nope/buckets/b/datatypes/k", json!(1));
    assert_eq!(r.status, 404);
    let r = http(&h, "GET", "/types/default/buckets/b/datatypes/k", &[], b"");
    assert_eq!(r.status, 301);
    assert_eq!(r.header("location"), Some("/buckets/b/counters/k"));

    let r = http(&h, "POST", "/buckets/c/counters/k", &[], b"1");
    assert_eq!(r.status, 409, "allow_mult is off: {}", r.text());
    common::http_allow_mult(&h, "c");
    assert_eq!(
        http(&h, "GET", "/buckets/c/counters/k", &[], b"").status,
        404
    );
    assert_eq!(
        http(&h, "POST", "/buckets/c/counters/k", &[], b"5").status,
        204
    );
    let r = http(
        &h,
        "POST",
        "/buckets/c/counters/k?returnvalue=true",
        &[],
        b"-2",
    );
    assert_eq!((r.status, r.text().as_str()), (200, "3"));
    assert_eq!(
        http(&h, "GET", "/buckets/c/counters/k", &[], b"").text(),
        "3"
    );
    assert_eq!(
        http(&h, "POST", "/buckets/c/counters/k", &[], b"x").status,
        400
    );
    let map = http(&h, "GET", "/", &[("Accept", "application/json")], b"").json();
    assert_eq!(map["riak_kv_wm_counter"], "/buckets");
    assert_eq!(map["riak_kv_wm_crdt"], "/types");
}

/// A set operation's verbs apply in the JSON object's order, as Riak's
/// `riak_kv_crdt_json` (`{update, [Op, ...]}` applied in turn).
#[test]
fn set_verbs_apply_in_document_order() {
    let (h, _d) = start();
    let raw = |body: &str| {
        http(
            &h,
            "POST",
            "/types/sets/buckets/b/datatypes/ord?returnbody=true",
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        )
    };
    let r = raw(r#"{"add_all":["a","b","c"]}"#);
    assert_eq!(r.status, 200, "{}", r.text());
    // Remove, then add again: the element stays.
    let r = raw(r#"{"remove":"a","add":"a"}"#);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["value"], json!(["a", "b", "c"]));
    // Add, then remove: it goes (the remove sees the add).
    let r = raw(r#"{"add":"d","remove":"d"}"#);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["value"], json!(["a", "b", "c"]));
    // remove_all before add_all, one element in both.
    let r = raw(r#"{"remove_all":["b","c"],"add_all":["c","e"]}"#);
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.json()["value"], json!(["a", "c", "e"]));
    // A remove of an element that is absent at its turn fails as a
    // whole (nothing written), even if a later verb adds it.
    let r = raw(r#"{"remove":"zz","add":"zz"}"#);
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("not_present"), "{}", r.text());
    let r = http(&h, "GET", "/types/sets/buckets/b/datatypes/ord", &[], b"");
    assert_eq!(r.json()["value"], json!(["a", "c", "e"]));
}

/// `riak_kv_wm_crdt`'s and `riak_kv_wm_counter`'s quorum parameters
/// beyond r/w/dw/pr/pw: `node_confirms` on updates (one node here, so 2
/// is refused before anything is written) and `basic_quorum` on fetches,
/// with clear 400s for bad values.
#[test]
fn node_confirms_and_basic_quorum_query_parameters() {
    let (h, _d) = start();
    let url = "/types/counters/buckets/b/datatypes/nc";
    let incr = |q: &str, n: i64| post(&h, &format!("{url}?{q}"), json!({ "increment": n }));
    let r = incr("node_confirms=2", 5);
    assert_eq!(r.status, 503, "{}", r.text());
    assert!(r.text().contains("node_confirms"), "{}", r.text());
    assert_eq!(http(&h, "GET", url, &[], b"").status, 404);
    for q in ["1", "one", "default"] {
        let r = incr(&format!("node_confirms={q}"), 1);
        assert_eq!(r.status, 204, "node_confirms={q}: {}", r.text());
    }
    let r = incr("node_confirms=4", 1);
    assert_eq!(r.status, 400, "{}", r.text());
    for q in ["true", "false", "default"] {
        let r = http(&h, "GET", &format!("{url}?basic_quorum={q}"), &[], b"");
        assert_eq!(r.status, 200, "basic_quorum={q}: {}", r.text());
        assert_eq!(r.json()["value"], json!(3));
    }
    // Bad values name the parameter; nothing is written.
    let r = incr("node_confirms=lots", 1);
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("node_confirms"), "{}", r.text());
    let r = http(&h, "GET", &format!("{url}?basic_quorum=maybe"), &[], b"");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("basic_quorum"), "{}", r.text());
    let r = http(&h, "GET", url, &[], b"");
    assert_eq!(r.json()["value"], json!(3));
    // The 1.4 counters take node_confirms too.
    common::http_allow_mult(&h, "c14");
    let c14 = |q: &str| {
        http(
            &h,
            "POST",
            &format!("/buckets/c14/counters/k?{q}"),
            &[],
            b"1",
        )
    };
    let r = c14("node_confirms=2");
    assert_eq!(r.status, 503, "{}", r.text());
    let r = c14("node_confirms=x");
    assert_eq!(r.status, 400, "{}", r.text());
    assert_eq!(c14("node_confirms=1&returnvalue=true").text(), "1");
    let r = http(
        &h,
        "GET",
        "/buckets/c14/counters/k?basic_quorum=true",
        &[],
        b"",
    );
    assert_eq!(r.text(), "1");
    let r = http(
        &h,
        "GET",
        "/buckets/c14/counters/k?basic_quorum=no",
        &[],
        b"",
    );
    assert_eq!(r.status, 400, "{}", r.text());
}

/// A map's set fields, at any depth, and a set's nested `"update"` apply
/// their verbs in document order too (`riak_kv_crdt_json` builds
/// `{update, [Op, ...]}` for them as for a top-level set); a map applies
/// its field removes before its updates.
#[test]
fn nested_set_verbs_apply_in_document_order() {
    let (h, _d) = start();
    let raw = |url: &str, body: &str| {
        let r = http(
            &h,
            "POST",
            &format!("{url}?returnbody=true"),
            &[("Content-Type", "application/json")],
            body.as_bytes(),
        );
        assert_eq!(r.status, 200, "{body}: {}", r.text());
        r.json()["value"].clone()
    };
    let m = "/types/maps/buckets/b/datatypes/nested";
    let v = raw(
        m,
        r#"{"update":{"s_set":{"add_all":["a","b"]},"m_map":{"update":{"t_set":{"add_all":["x","y"]}}}}}"#,
    );
    assert_eq!(v["s_set"], json!(["a", "b"]), "{v}");
    // Remove, then add again: the element stays (adds-first would drop it).
    let v = raw(m, r#"{"update":{"s_set":{"remove":"a","add":"a"}}}"#);
    assert_eq!(v["s_set"], json!(["a", "b"]), "{v}");
    // Add, then remove: it goes.
    let v = raw(m, r#"{"update":{"s_set":{"add":"c","remove":"c"}}}"#);
    assert_eq!(v["s_set"], json!(["a", "b"]), "{v}");
    // One level down, with lists.
    let v = raw(
        m,
        r#"{"update":{"m_map":{"update":{"t_set":{"remove_all":["x","y"],"add_all":["y","z"]}}}}}"#,
    );
    assert_eq!(v["m_map"]["t_set"], json!(["y", "z"]), "{v}");
    // A set field's nested "update", object or list, keeps its order.
    let v = raw(
        m,
        r#"{"update":{"s_set":{"update":{"remove":"b","add":"b"}}}}"#,
    );
    assert_eq!(v["s_set"], json!(["a", "b"]), "{v}");
    let v = raw(
        m,
        r#"{"update":{"s_set":{"update":[{"remove":"a"},{"add":"a"},{"add":"d"},{"remove":"d"}]}}}"#,
    );
    assert_eq!(v["s_set"], json!(["a", "b"]), "{v}");
    // A remove of an element absent at its turn fails the whole update.
    let r = http(
        &h,
        "POST",
        m,
        &[("Content-Type", "application/json")],
        br#"{"update":{"s_set":{"remove":"zz","add":"zz"},"n_counter":1}}"#,
    );
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("not_present"), "{}", r.text());
    // Field removes come first whatever the JSON order: the field is
    // removed, then updated anew.
    let v = raw(m, r#"{"update":{"s_set":{"add":"e"}},"remove":"s_set"}"#);
    assert_eq!(v["s_set"], json!(["e"]), "{v}");
    assert!(v.get("n_counter").is_none(), "{v}");
    // A top-level set's nested "update" too.
    let s = "/types/sets/buckets/b/datatypes/nested";
    assert_eq!(raw(s, r#"{"add_all":["a","b"]}"#), json!(["a", "b"]));
    assert_eq!(
        raw(s, r#"{"update":{"remove":"a","add":"a"}}"#),
        json!(["a", "b"])
    );
    assert_eq!(
        raw(s, r#"{"update":[{"add":"c"},{"remove":"b"}]}"#),
        json!(["a", "c"])
    );
}
