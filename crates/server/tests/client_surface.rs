//! What real Riak clients trip on, one test per behaviour, over PB and
//! HTTP against an in-process node (memory backend, ring of 8): `/ping`
//! answers exactly `OK`; the resource map lists `riak_kv_wm_preflist` and
//! its route answers; bucket props carry `chash_keyfun` and `linkfun`;
//! siblings are listed newest first; a `$key` query ignores
//! `return_terms`; listings and 2i honour `timeout` with Riak's `timeout`
//! error (vnodes held paused, so the deadline is what ends the request).

mod common;

use basalt_server::pb::{self, code};
use basalt_server::ServerHandle;
use common::{http, Client};
use prost::Message;

fn start() -> (ServerHandle, tempfile::TempDir) {
    common::spawn_node(true, |_| {})
}

fn put(c: &mut Client, bucket: &str, key: &str, value: &str, index: Option<(&str, &str)>) {
    let req = pb::RpbPutReq {
        bucket: bucket.into(),
        key: Some(key.into()),
        content: pb::RpbContent {
            value: value.into(),
            content_type: Some(b"text/plain".to_vec()),
            indexes: index
                .map(|(f, t)| {
                    vec![pb::RpbPair {
                        key: f.into(),
                        value: Some(t.into()),
                    }]
                })
                .unwrap_or_default(),
            ..Default::default()
        },
        // Every replica before the answer: a coverage query (2i, listing)
        // right after reads one replica per partition, and under load the
        // third write of a quorum PUT may still be on its way.
        w: Some(3),
        ..Default::default()
    };
    c.call(code::PUT_REQ, &req, code::PUT_RESP);
}

#[test]
fn ping_is_exactly_ok_and_the_preflist_resource_is_served() {
    let (h, _d) = start();
    let r = http(&h, "GET", "/ping", &[], b"");
    assert_eq!((r.status, r.body.as_slice()), (200, b"OK".as_slice()));
    let map = http(&h, "GET", "/", &[("Accept", "application/json")], b"").json();
    assert_eq!(map["riak_kv_wm_preflist"], "/types");
    for path in [
        "/types/default/buckets/b/keys/k/preflist",
        "/buckets/b/keys/k/preflist",
    ] {
        let r = http(&h, "GET", path, &[], b"");
        assert_eq!(r.status, 200, "{path}: {}", r.text());
        let items = r.json()["preflist"].as_array().cloned().unwrap_or_default();
        assert_eq!(items.len(), 3, "n_val 3: {items:?}");
        assert!(items
            .iter()
            .all(|i| i["primary"] == true && i["node"].is_string()));
        assert!(items.iter().all(|i| i["partition"].is_u64()));
    }
    let r = http(&h, "GET", "/types/nope/buckets/b/keys/k/preflist", &[], b"");
    assert_eq!(r.status, 400, "{}", r.text());
}

#[test]
fn bucket_props_carry_keyfun_and_linkfun() {
    let (h, _d) = start();
    let mut c = Client::connect(&h);
    let b = c.call(
        code::GET_BUCKET_REQ,
        &pb::RpbGetBucketReq {
            bucket: b"b".to_vec(),
            r#type: None,
        },
        code::GET_BUCKET_RESP,
    );
    let p = pb::RpbGetBucketResp::decode(b.as_slice())
        .expect("props")
        .props;
    let mf = |m: Option<pb::RpbModFun>| m.map(|m| (m.module, m.function));
    assert_eq!(
        mf(p.chash_keyfun),
        Some((b"riak_core_util".to_vec(), b"chash_std_keyfun".to_vec()))
    );
    assert_eq!(
        mf(p.linkfun),
        Some((
            b"riak_kv_wm_link_walker".to_vec(),
            b"mapreduce_linkfun".to_vec()
        ))
    );
    let j = http(&h, "GET", "/buckets/b/props", &[], b"").json();
    assert_eq!(j["props"]["chash_keyfun"]["mod"], "riak_core_util");
    assert_eq!(j["props"]["chash_keyfun"]["fun"], "chash_std_keyfun");
    assert_eq!(j["props"]["linkfun"]["mod"], "riak_kv_wm_link_walker");
    assert_eq!(j["props"]["linkfun"]["fun"], "mapreduce_linkfun");
    // A client that sends back what it read is accepted.
    let body = serde_json::json!({ "props": j["props"] }).to_string();
    let r = http(
        &h,
        "PUT",
        "/buckets/b/props",
        &[("Content-Type", "application/json")],
        body.as_bytes(),
    );
    assert_eq!(r.status, 204, "{}", r.text());
}

#[test]
fn siblings_are_listed_newest_first() {
    let (h, _d) = start();
    let mut c = Client::connect(&h);
    c.call(
        code::SET_BUCKET_REQ,
        &pb::RpbSetBucketReq {
            bucket: b"sib".to_vec(),
            props: pb::RpbBucketProps {
                allow_mult: Some(true),
                ..Default::default()
            },
            r#type: None,
        },
        code::SET_BUCKET_RESP,
    );
    for v in ["oldest", "middle", "newest"] {
        put(&mut c, "sib", "k", v, None);
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let b = c.call(
        code::GET_REQ,
        &pb::RpbGetReq {
            bucket: b"sib".to_vec(),
            key: b"k".to_vec(),
            ..Default::default()
        },
        code::GET_RESP,
    );
    let got: Vec<Vec<u8>> = pb::RpbGetResp::decode(b.as_slice())
        .expect("get")
        .content
        .into_iter()
        .map(|c| c.value)
        .collect();
    assert_eq!(
        got,
        [b"newest".to_vec(), b"middle".to_vec(), b"oldest".to_vec()]
    );
    // HTTP: the vtag list in the same order.
    let r = http(&h, "GET", "/buckets/sib/keys/k", &[], b"");
    assert_eq!(r.status, 300);
    let vtags: Vec<String> = r.text().lines().skip(1).map(str::to_string).collect();
    let first = http(
        &h,
        "GET",
        &format!("/buckets/sib/keys/k?vtag={}", vtags[0]),
        &[],
        b"",
    );
    assert_eq!(first.text(), "newest");
}

#[test]
fn a_key_query_ignores_return_terms() {
    let (h, _d) = start();
    let mut c = Client::connect(&h);
    for k in ["a", "b", "c"] {
        put(&mut c, "ix", k, "v", Some(("f_bin", "t")));
    }
    let q = pb::RpbIndexReq {
        bucket: b"ix".to_vec(),
        index: b"$key".to_vec(),
        qtype: pb::INDEX_RANGE,
        range_min: Some(b"a".to_vec()),
        range_max: Some(b"b".to_vec()),
        return_terms: Some(true),
        ..Default::default()
    };
    let b = c.call(code::INDEX_REQ, &q, code::INDEX_RESP);
    let resp = pb::RpbIndexResp::decode(b.as_slice()).expect("index");
    assert_eq!(resp.keys, [b"a".to_vec(), b"b".to_vec()]);
    assert!(resp.results.is_empty());
    // A term index still answers terms.
    let q = pb::RpbIndexReq {
        index: b"f_bin".to_vec(),
        range_min: Some(b"a".to_vec()),
        range_max: Some(b"z".to_vec()),
        ..q
    };
    let b = c.call(code::INDEX_REQ, &q, code::INDEX_RESP);
    assert_eq!(
        pb::RpbIndexResp::decode(b.as_slice())
            .expect("index")
            .results
            .len(),
        3
    );
    let j = http(
        &h,
        "GET",
        "/buckets/ix/index/$key/a/b?return_terms=true",
        &[],
        b"",
    )
    .json();
    assert_eq!(j, serde_json::json!({ "keys": ["a", "b"] }));
}

#[test]
fn listings_and_2i_honour_timeout() {
    let (h, _d) = start();
    let mut c = Client::connect(&h);
    put(&mut c, "t", "k", "v", Some(("f_bin", "x")));
    let _pause = h.node().pause_vnodes();
    let keys = pb::RpbListKeysReq {
        bucket: b"t".to_vec(),
        timeout: Some(200),
        r#type: None,
    };
    // The node's own request timeout is 60 s: answering within 10 s shows
    // the client's 200 ms was honoured (a bound against hangs, not speed).
    let t0 = std::time::Instant::now();
    assert_eq!(
        c.try_call(code::LIST_KEYS_REQ, &keys).err().as_deref(),
        Some("timeout")
    );
    assert!(t0.elapsed() < std::time::Duration::from_secs(10));
    let buckets = pb::RpbListBucketsReq {
        timeout: Some(200),
        ..Default::default()
    };
    assert_eq!(
        c.try_call(code::LIST_BUCKETS_REQ, &buckets)
            .err()
            .as_deref(),
        Some("timeout")
    );
    let q = pb::RpbIndexReq {
        bucket: b"t".to_vec(),
        index: b"f_bin".to_vec(),
        qtype: pb::INDEX_EQ,
        key: Some(b"x".to_vec()),
        timeout: Some(200),
        ..Default::default()
    };
    assert_eq!(
        c.try_call(code::INDEX_REQ, &q).err().as_deref(),
        Some("timeout")
    );
    for path in [
        "/buckets/t/keys?keys=true&timeout=200",
        "/buckets?buckets=true&timeout=200",
        "/buckets/t/index/f_bin/x?timeout=200",
    ] {
        let r = http(&h, "GET", path, &[], b"");
        assert_eq!((r.status, r.text().trim()), (503, "timeout"), "{path}");
    }
    let r = http(
        &h,
        "GET",
        "/buckets/t/keys?keys=true&timeout=soon",
        &[],
        b"",
    );
    assert_eq!(r.status, 400);
}
