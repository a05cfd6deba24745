//! PB API tests: each test starts an in-process node (memory backend, ring
//! of 8, ephemeral port) with `ServerHandle::spawn` and drives it with
//! `riak_pb`'s blocking client (`common/mod.rs`).

mod common;

use basalt_server::pb::{self, code};
use basalt_server::{Config, ServerHandle};
use common::Client;
use prost::Message;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// A node config in `dir` on a free PB port, no HTTP.
fn test_config(dir: &tempfile::TempDir, ring_size: u32, backend: &str) -> Config {
    Config {
        data_dir: dir.path().to_path_buf(),
        pb_listen: "127.0.0.1:0".into(),
        cluster_listen: "127.0.0.1:0".into(),
        http_listen: String::new(),
        ring_size,
        backend: backend.into(),
        ..Config::default()
    }
}

fn start(tweak: impl FnOnce(&mut Config)) -> (ServerHandle, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = test_config(&dir, 8, "memory");
    tweak(&mut c);
    (ServerHandle::spawn(c).expect("spawn"), dir)
}

/// Typed calls this file adds to the shared [`Client`].
impl Client {
    fn put(&mut self, req: pb::RpbPutReq) -> pb::RpbPutResp {
        let b = self.call(code::PUT_REQ, &req, code::PUT_RESP);
        pb::RpbPutResp::decode(b.as_slice()).expect("put resp")
    }
    fn get(&mut self, req: pb::RpbGetReq) -> pb::RpbGetResp {
        let b = self.call(code::GET_REQ, &req, code::GET_RESP);
        pb::RpbGetResp::decode(b.as_slice()).expect("get resp")
    }
}

fn put_req(bucket: &str, key: &str, value: &str) -> pb::RpbPutReq {
    pb::RpbPutReq {
        bucket: bucket.into(),
        key: Some(key.into()),
        content: pb::RpbContent {
            value: value.into(),
            content_type: Some(b"text/plain".to_vec()),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn get_req(bucket: &str, key: &str) -> pb::RpbGetReq {
    pb::RpbGetReq {
        bucket: bucket.into(),
        key: key.into(),
        ..Default::default()
    }
}

fn set_props(c: &mut Client, bucket: &str, props: pb::RpbBucketProps) {
    c.call(
        code::SET_BUCKET_REQ,
        &pb::RpbSetBucketReq {
            bucket: bucket.into(),
            props,
            r#type: None,
        },
        code::SET_BUCKET_RESP,
    );
}

#[test]
fn ping_server_info_client_id() {
    let (h, _d) = start(|_| {});
    let mut c = Client::connect(&h);
    c.ping();
    c.send(code::GET_SERVER_INFO_REQ, &[]);
    let (rc, body) = c.recv().expect("reply");
    assert_eq!(rc, code::GET_SERVER_INFO_RESP);
    let info = pb::RpbGetServerInfoResp::decode(body.as_slice()).expect("decode");
    assert_eq!(info.server_version.as_deref(), Some(&b"3.2.0"[..]));
    assert_eq!(info.node.as_deref(), Some(&b"basalt@127.0.0.1"[..]));
    // A new connection's client id is four zero bytes, as Riak's (the
    // Python client's test_uses_client_id_if_given relies on it).
    c.send(code::GET_CLIENT_ID_REQ, &[]);
    let (_, body) = c.recv().expect("reply");
    assert_eq!(
        pb::RpbGetClientIdResp::decode(body.as_slice())
            .expect("d")
            .client_id,
        [0u8; 4]
    );
    c.call(
        code::SET_CLIENT_ID_REQ,
        &pb::RpbSetClientIdReq {
            client_id: b"abcd".to_vec(),
        },
        code::SET_CLIENT_ID_RESP,
    );
    c.send(code::GET_CLIENT_ID_REQ, &[]);
    let (_, body) = c.recv().expect("reply");
    assert_eq!(
        pb::RpbGetClientIdResp::decode(body.as_slice())
            .expect("d")
            .client_id,
        b"abcd"
    );
    h.shutdown().expect("shutdown");
}

#[test]
fn put_get_roundtrip_metadata_notfound_and_head() {
    let (h, _d) = start(|_| {});
    let mut c = Client::connect(&h);
    // not found: an empty GetResp
    c.send(code::GET_REQ, &get_req("b", "nope").encode_to_vec());
    assert_eq!(c.recv(), Some((code::GET_RESP, vec![])));
    let mut req = put_req("b", "k", "hello");
    req.content.charset = Some(b"utf-8".to_vec());
    req.content.usermeta = vec![pb::RpbPair {
        key: b"color".to_vec(),
        value: Some(b"blue".to_vec()),
    }];
    req.content.indexes = vec![pb::RpbPair {
        key: b"age_int".to_vec(),
        value: Some(b"42".to_vec()),
    }];
    req.return_body = Some(true);
    let pr = c.put(req);
    assert_eq!(pr.content.len(), 1);
    assert_eq!(pr.content[0].value, b"hello");
    assert!(pr.key.is_none());
    let g = c.get(get_req("b", "k"));
    assert_eq!(g.content.len(), 1);
    let ct = &g.content[0];
    assert_eq!(ct.value, b"hello");
    assert_eq!(ct.content_type.as_deref(), Some(&b"text/plain"[..]));
    assert_eq!(ct.charset.as_deref(), Some(&b"utf-8"[..]));
    assert_eq!(ct.usermeta[0].value.as_deref(), Some(&b"blue"[..]));
    assert_eq!(ct.indexes[0].key, b"age_int");
    assert!(ct.vtag.is_some() && ct.last_mod.unwrap_or(0) > 0);
    assert_eq!(g.vclock, pr.vclock);
    // head: metadata, empty value
    let mut hr = get_req("b", "k");
    hr.head = Some(true);
    let hg = c.get(hr);
    assert_eq!(hg.content[0].value, b"");
    assert_eq!(hg.content[0].usermeta, g.content[0].usermeta);
    // if_modified with the current clock -> unchanged
    let mut im = get_req("b", "k");
    im.if_modified = g.vclock.clone();
    assert_eq!(c.get(im).unchanged, Some(true));
    // server-generated key
    let mut gen = put_req("b", "x", "generated");
    gen.key = None;
    let key = c.put(gen).key.expect("generated key");
    assert_eq!(
        c.get(get_req("b", std::str::from_utf8(&key).expect("utf8")))
            .content[0]
            .value,
        b"generated"
    );
}

#[test]
fn vclock_increments_delete_and_deletedvclock() {
    let (h, _d) = start(|_| {});
    let mut c = Client::connect(&h);
    c.put(put_req("b", "k", "v1"));
    let v1 = c.get(get_req("b", "k")).vclock.expect("vclock");
    let mut p2 = put_req("b", "k", "v2");
    p2.vclock = Some(v1.clone());
    c.put(p2);
    let g2 = c.get(get_req("b", "k"));
    let v2 = g2.vclock.expect("vclock");
    assert_ne!(v1, v2);
    let c1 = basalt_server::object::vclock::VClock::decode(&v1).expect("decode");
    let c2 = basalt_server::object::vclock::VClock::decode(&v2).expect("decode");
    assert!(c2.dominates(&c1));
    assert_eq!(g2.content[0].value, b"v2");
    c.call(
        code::DEL_REQ,
        &pb::RpbDelReq {
            bucket: b"b".to_vec(),
            key: b"k".to_vec(),
            vclock: Some(v2),
            ..Default::default()
        },
        code::DEL_RESP,
    );
    let g = c.get(get_req("b", "k"));
    assert!(g.content.is_empty() && g.vclock.is_none());
    let mut dv = get_req("b", "k");
    dv.deletedvclock = Some(true);
    let g = c.get(dv);
    assert!(g.content.is_empty());
    let tomb = basalt_server::object::vclock::VClock::decode(&g.vclock.expect("tombstone clock"))
        .expect("decode");
    assert!(tomb.dominates(&c2));
    // deleting a missing key is fine
    c.call(
        code::DEL_REQ,
        &pb::RpbDelReq {
            bucket: b"b".to_vec(),
            key: b"missing".to_vec(),
            ..Default::default()
        },
        code::DEL_RESP,
    );
}

#[test]
fn siblings_resolution_lww_and_conditional_puts() {
    let (h, _d) = start(|_| {});
    let mut c = Client::connect(&h);
    set_props(
        &mut c,
        "multi",
        pb::RpbBucketProps {
            allow_mult: Some(true),
            ..Default::default()
        },
    );
    c.put(put_req("multi", "k", "a"));
    c.put(put_req("multi", "k", "b"));
    let g = c.get(get_req("multi", "k"));
    let mut vals: Vec<Vec<u8>> = g.content.iter().map(|x| x.value.clone()).collect();
    vals.sort();
    assert_eq!(vals, vec![b"a".to_vec(), b"b".to_vec()]);
    let mut fix = put_req("multi", "k", "merged");
    fix.vclock = g.vclock;
    fix.return_body = Some(true);
    let r = c.put(fix);
    assert_eq!(r.content.len(), 1);
    let g = c.get(get_req("multi", "k"));
    assert_eq!(g.content.len(), 1);
    assert_eq!(g.content[0].value, b"merged");
    // default bucket: no siblings, last writer wins
    c.put(put_req("plain", "k", "a"));
    c.put(put_req("plain", "k", "b"));
    assert_eq!(c.get(get_req("plain", "k")).content.len(), 1);
    // last_write_wins
    set_props(
        &mut c,
        "lww",
        pb::RpbBucketProps {
            last_write_wins: Some(true),
            ..Default::default()
        },
    );
    c.put(put_req("lww", "k", "a"));
    c.put(put_req("lww", "k", "b"));
    let g = c.get(get_req("lww", "k"));
    assert_eq!(g.content.len(), 1);
    assert_eq!(g.content[0].value, b"b");
    // if_none_match on an existing key
    let mut inm = put_req("plain", "k", "x");
    inm.if_none_match = Some(true);
    assert_eq!(c.try_call(code::PUT_REQ, &inm), Err("match_found".into()));
    let mut inm2 = put_req("plain", "new", "x");
    inm2.if_none_match = Some(true);
    c.put(inm2);
    // if_not_modified
    let mut inm3 = put_req("plain", "k", "x");
    inm3.if_not_modified = Some(true);
    inm3.vclock = Some(basalt_server::object::vclock::VClock::new().encode());
    assert_eq!(c.try_call(code::PUT_REQ, &inm3), Err("modified".into()));
    let mut inm4 = put_req("plain", "absent", "x");
    inm4.if_not_modified = Some(true);
    assert_eq!(c.try_call(code::PUT_REQ, &inm4), Err("notfound".into()));
    // return_head: metadata without values
    let mut rh = put_req("plain", "k", "headme");
    rh.return_head = Some(true);
    let r = c.put(rh);
    assert_eq!(r.content[0].value, b"");
    assert!(r.vclock.is_some());
}

#[test]
fn list_buckets_keys_and_bucket_props() {
    let (h, _d) = start(|_| {});
    let mut c = Client::connect(&h);
    for i in 0..20 {
        c.put(put_req("lb1", &format!("k{i:02}"), "v"));
    }
    c.put(put_req("lb2", "x", "v"));
    c.call(
        code::DEL_REQ,
        &pb::RpbDelReq {
            bucket: b"lb1".to_vec(),
            key: b"k00".to_vec(),
            ..Default::default()
        },
        code::DEL_RESP,
    );
    let b = c.call(
        code::LIST_BUCKETS_REQ,
        &pb::RpbListBucketsReq::default(),
        code::LIST_BUCKETS_RESP,
    );
    let buckets = pb::RpbListBucketsResp::decode(b.as_slice())
        .expect("d")
        .buckets;
    assert!(buckets.contains(&b"lb1".to_vec()) && buckets.contains(&b"lb2".to_vec()));
    c.send(
        code::LIST_KEYS_REQ,
        &pb::RpbListKeysReq {
            bucket: b"lb1".to_vec(),
            ..Default::default()
        }
        .encode_to_vec(),
    );
    let mut keys = Vec::new();
    loop {
        let (rc, body) = c.recv().expect("frame");
        assert_eq!(rc, code::LIST_KEYS_RESP);
        let r = pb::RpbListKeysResp::decode(body.as_slice()).expect("d");
        keys.extend(r.keys);
        if r.done == Some(true) {
            break;
        }
    }
    keys.sort();
    assert_eq!(keys.len(), 19, "deleted key not listed, no duplicates");
    assert_eq!(keys[0], b"k01");
    // props get / set / reset
    let get = |c: &mut Client| {
        let b = c.call(
            code::GET_BUCKET_REQ,
            &pb::RpbGetBucketReq {
                bucket: b"pp".to_vec(),
                r#type: None,
            },
            code::GET_BUCKET_RESP,
        );
        pb::RpbGetBucketResp::decode(b.as_slice()).expect("d").props
    };
    let p = get(&mut c);
    assert_eq!(
        (p.n_val, p.allow_mult, p.notfound_ok),
        (Some(3), Some(false), Some(true))
    );
    set_props(
        &mut c,
        "pp",
        pb::RpbBucketProps {
            n_val: Some(2),
            allow_mult: Some(true),
            ..Default::default()
        },
    );
    let p = get(&mut c);
    assert_eq!((p.n_val, p.allow_mult), (Some(2), Some(true)));
    c.call(
        code::RESET_BUCKET_REQ,
        &pb::RpbResetBucketReq {
            bucket: b"pp".to_vec(),
            r#type: None,
        },
        code::RESET_BUCKET_RESP,
    );
    assert_eq!(get(&mut c).n_val, Some(3));
    // invalid quorum and unknown type
    let mut bad = get_req("pp", "k");
    bad.r = Some(7);
    assert!(c
        .try_call(code::GET_REQ, &bad)
        .is_err_and(|e| e.contains("r_val_violation")));
    let mut typed = get_req("pp", "k");
    typed.r#type = Some(b"maps".to_vec());
    assert!(c
        .try_call(code::GET_REQ, &typed)
        .is_err_and(|e| e.contains("No bucket-type named 'maps'")));
    assert!(c
        .try_call(code::GET_REQ, &get_req("", "k"))
        .is_err_and(|e| e.contains("zero-length")));
}

#[test]
fn secondary_index_eq_range_paging_regex() {
    let (h, _d) = start(|_| {});
    let mut c = Client::connect(&h);
    for i in 0..10 {
        let mut p = put_req("ix", &format!("k{i}"), "v");
        p.content.indexes = vec![
            pb::RpbPair {
                key: b"n_int".to_vec(),
                value: Some(i.to_string().into_bytes()),
            },
            pb::RpbPair {
                key: b"color_bin".to_vec(),
                value: Some(if i % 2 == 0 {
                    b"red".to_vec()
                } else {
                    b"blue".to_vec()
                }),
            },
        ];
        c.put(p);
    }
    let q = |c: &mut Client, req: pb::RpbIndexReq| {
        let b = c.call(code::INDEX_REQ, &req, code::INDEX_RESP);
        pb::RpbIndexResp::decode(b.as_slice()).expect("d")
    };
    let base = pb::RpbIndexReq {
        bucket: b"ix".to_vec(),
        ..Default::default()
    };
    let r = q(
        &mut c,
        pb::RpbIndexReq {
            index: b"color_bin".to_vec(),
            qtype: pb::INDEX_EQ,
            key: Some(b"red".to_vec()),
            ..base.clone()
        },
    );
    assert_eq!(
        r.keys,
        vec![
            b"k0".to_vec(),
            b"k2".to_vec(),
            b"k4".to_vec(),
            b"k6".to_vec(),
            b"k8".to_vec()
        ]
    );
    let range = pb::RpbIndexReq {
        index: b"n_int".to_vec(),
        qtype: pb::INDEX_RANGE,
        range_min: Some(b"3".to_vec()),
        range_max: Some(b"7".to_vec()),
        ..base.clone()
    };
    let r = q(&mut c, range.clone());
    assert_eq!(r.keys.len(), 5);
    let r = q(
        &mut c,
        pb::RpbIndexReq {
            return_terms: Some(true),
            ..range.clone()
        },
    );
    assert_eq!(r.results.len(), 5);
    assert_eq!(
        r.results[0],
        pb::RpbPair {
            key: b"3".to_vec(),
            value: Some(b"k3".to_vec())
        }
    );
    // paging: 2 + 2 + 1
    let mut got = Vec::new();
    let mut cont = None;
    for _ in 0..5 {
        let r = q(
            &mut c,
            pb::RpbIndexReq {
                max_results: Some(2),
                continuation: cont.clone(),
                ..range.clone()
            },
        );
        got.extend(r.keys);
        cont = r.continuation;
        if cont.is_none() {
            break;
        }
    }
    assert_eq!(
        got,
        vec![
            b"k3".to_vec(),
            b"k4".to_vec(),
            b"k5".to_vec(),
            b"k6".to_vec(),
            b"k7".to_vec()
        ]
    );
    let r = q(
        &mut c,
        pb::RpbIndexReq {
            index: b"color_bin".to_vec(),
            qtype: pb::INDEX_RANGE,
            range_min: Some(b"a".to_vec()),
            range_max: Some(b"z".to_vec()),
            term_regex: Some(b"^bl".to_vec()),
            ..base.clone()
        },
    );
    assert_eq!(r.keys.len(), 5);
    // an update moves the index entry
    let mut p = put_req("ix", "k0", "v");
    p.content.indexes = vec![pb::RpbPair {
        key: b"color_bin".to_vec(),
        value: Some(b"green".to_vec()),
    }];
    c.put(p);
    let r = q(
        &mut c,
        pb::RpbIndexReq {
            index: b"color_bin".to_vec(),
            qtype: pb::INDEX_EQ,
            key: Some(b"red".to_vec()),
            ..base
        },
    );
    assert_eq!(r.keys.len(), 4);
}

/// `_int` results come back in numeric order (negative and multi-digit terms),
/// and continuations page through them in that order (found by the Go
/// client interop test: `-1` was returned before `-2`).
/// A page of a 2i query reads at most `max_results` results from each
/// covering vnode (they seek to the page's cursor), not each vnode's whole
/// result; paging through still gives exactly the unpaged answer.
#[test]
fn index_pages_read_bounded_results_per_vnode() {
    use std::sync::atomic::Ordering;
    let (h, _d) = start(|_| {});
    let mut c = Client::connect(&h);
    for i in 0..400 {
        let mut p = put_req("big", &format!("k{i:03}"), "v");
        p.content.indexes = vec![
            pb::RpbPair {
                key: b"t_bin".to_vec(),
                value: Some(b"x".to_vec()),
            },
            pb::RpbPair {
                key: b"n_int".to_vec(),
                value: Some((i * 7 % 400).to_string().into_bytes()),
            },
        ];
        c.put(p);
    }
    let vnodes = h.node().router().coverage(3).expect("coverage").len() as u64;
    let read = || h.node().stats().index_results_read.load(Ordering::Relaxed);
    let eq = pb::RpbIndexReq {
        bucket: b"big".to_vec(),
        index: b"t_bin".to_vec(),
        qtype: pb::INDEX_EQ,
        key: Some(b"x".to_vec()),
        ..Default::default()
    };
    let range = pb::RpbIndexReq {
        bucket: b"big".to_vec(),
        index: b"n_int".to_vec(),
        qtype: pb::INDEX_RANGE,
        range_min: Some(b"-5".to_vec()),
        range_max: Some(b"1000".to_vec()),
        return_terms: Some(true),
        ..Default::default()
    };
    for (base, page) in [(eq, 10u32), (range, 25u32)] {
        let all = {
            let b = c.call(code::INDEX_REQ, &base, code::INDEX_RESP);
            pb::RpbIndexResp::decode(b.as_slice()).expect("d")
        };
        let mut got = pb::RpbIndexResp::default();
        let mut cont = None;
        let mut pages = 0;
        loop {
            let before = read();
            let req = pb::RpbIndexReq {
                max_results: Some(page),
                continuation: cont.clone(),
                ..base.clone()
            };
            let b = c.call(code::INDEX_REQ, &req, code::INDEX_RESP);
            let r = pb::RpbIndexResp::decode(b.as_slice()).expect("d");
            let cost = read() - before;
            assert!(
                cost <= u64::from(page) * vnodes,
                "page {pages} read {cost} results from {vnodes} vnodes (page size {page})"
            );
            assert!(r.keys.len() + r.results.len() <= page as usize);
            got.keys.extend(r.keys);
            got.results.extend(r.results);
            pages += 1;
            cont = r.continuation;
            if cont.is_none() {
                break;
            }
            assert!(pages <= 400 / page + 1, "paging does not end");
        }
        assert_eq!(got.keys, all.keys);
        assert_eq!(got.results, all.results);
        assert_eq!(got.keys.len() + got.results.len(), 400);
    }
}

#[test]
fn int_index_results_and_paging_are_numeric() {
    let (h, _d) = start(|_| {});
    let mut c = Client::connect(&h);
    let terms = [-20i64, -3, -2, -1, 0, 2, 9, 10, 100];
    for (i, t) in terms.iter().enumerate() {
        let mut p = put_req("ixn", &format!("k{i}"), "v");
        p.content.indexes = vec![pb::RpbPair {
            key: b"n_int".to_vec(),
            value: Some(t.to_string().into_bytes()),
        }];
        c.put(p);
    }
    let range = pb::RpbIndexReq {
        bucket: b"ixn".to_vec(),
        index: b"n_int".to_vec(),
        qtype: pb::INDEX_RANGE,
        range_min: Some(b"-100".to_vec()),
        range_max: Some(b"1000".to_vec()),
        return_terms: Some(true),
        ..Default::default()
    };
    let want: Vec<Vec<u8>> = terms.iter().map(|t| t.to_string().into_bytes()).collect();
    let b = c.call(code::INDEX_REQ, &range, code::INDEX_RESP);
    let r = pb::RpbIndexResp::decode(b.as_slice()).expect("d");
    let got: Vec<Vec<u8>> = r.results.into_iter().map(|p| p.key).collect();
    assert_eq!(got, want);
    let mut paged = Vec::new();
    let mut cont = None;
    for _ in 0..10 {
        let req = pb::RpbIndexReq {
            max_results: Some(2),
            continuation: cont.clone(),
            ..range.clone()
        };
        let b = c.call(code::INDEX_REQ, &req, code::INDEX_RESP);
        let r = pb::RpbIndexResp::decode(b.as_slice()).expect("d");
        paged.extend(r.results.into_iter().map(|p| p.key));
        cont = r.continuation;
        if cont.is_none() {
            break;
        }
    }
    assert_eq!(paged, want);
}

/// A PUT's `n_val`, `sloppy_quorum` and `node_confirms` (riak_kv 2.9+):
/// `node_confirms` above the distinct nodes of the preference list (one
/// here) is refused before writing, above n_val is a violation; a request
/// `n_val` above the bucket's likewise; `n_val = 1` writes, and a GET with
/// `n_val = 1` reads that first replica.
#[test]
fn put_honours_n_val_sloppy_quorum_and_node_confirms() {
    let (h, _d) = start(|_| {});
    let mut c = Client::connect(&h);
    let req = |n_val: Option<u32>, sloppy: Option<bool>, nc: Option<u32>| pb::RpbPutReq {
        n_val,
        sloppy_quorum: sloppy,
        node_confirms: nc,
        ..put_req("nv", "k", "v")
    };
    let e = c
        .try_call(code::PUT_REQ, &req(None, None, Some(2)))
        .expect_err("one node");
    assert_eq!(e, "{node_confirms_val_unsatisfied,2,1}");
    let e = c
        .try_call(code::PUT_REQ, &req(None, None, Some(5)))
        .expect_err("above n_val");
    assert!(e.contains("node_confirms_val_violation"), "{e}");
    let e = c
        .try_call(code::PUT_REQ, &req(Some(5), None, None))
        .expect_err("above the bucket's n_val");
    assert!(e.contains("n_val_violation"), "{e}");
    assert!(
        c.get(get_req("nv", "k")).content.is_empty(),
        "nothing written"
    );
    c.put(req(Some(1), Some(false), Some(1)));
    let got = c.get(pb::RpbGetReq {
        n_val: Some(1),
        r: Some(1),
        sloppy_quorum: Some(false),
        ..get_req("nv", "k")
    });
    assert_eq!(
        got.content.first().map(|x| x.value.clone()),
        Some(b"v".to_vec())
    );
}

/// `_int` terms are integers of any size, as Riak's: terms beyond 64 bits
/// (and `i64::MIN`) order, range and page numerically on both the memory
/// and the leveled backend; an equality query finds a huge term; results
/// come back canonical (no `+`, no leading zeros).
#[test]
fn int_index_terms_beyond_64_bits() {
    for backend in ["memory", "leveled"] {
        let (h, _d) = start(|c| c.backend = backend.into());
        let mut c = Client::connect(&h);
        let big = "1".to_string() + &"0".repeat(40);
        let want: Vec<String> = vec![
            format!("-{big}"),
            "-18446744073709551616".into(),
            "-9223372036854775809".into(),
            i64::MIN.to_string(),
            "-1".into(),
            "0".into(),
            i64::MAX.to_string(),
            "9223372036854775808".into(),
            "18446744073709551616".into(),
            big.clone(),
        ];
        // Written in a scrambled order, some with a sign or leading zeros.
        for (i, t) in want.iter().enumerate().rev() {
            let given = if i % 3 == 0 && !t.starts_with('-') {
                format!("+000{t}")
            } else {
                t.clone()
            };
            let mut p = put_req("ixbig", &format!("k{i:02}"), "v");
            // Every replica before the reply: a coverage query asks one
            // replica per partition, which a quorum write may not have
            // reached yet (this test once missed the last key so).
            p.w = Some(3);
            p.content.indexes = vec![pb::RpbPair {
                key: b"n_int".to_vec(),
                value: Some(given.into_bytes()),
            }];
            c.put(p);
        }
        let range = |min: &str, max: &str| pb::RpbIndexReq {
            bucket: b"ixbig".to_vec(),
            index: b"n_int".to_vec(),
            qtype: pb::INDEX_RANGE,
            range_min: Some(min.as_bytes().to_vec()),
            range_max: Some(max.as_bytes().to_vec()),
            return_terms: Some(true),
            ..Default::default()
        };
        let all = range(&format!("-{big}0"), &format!("{big}0"));
        let b = c.call(code::INDEX_REQ, &all, code::INDEX_RESP);
        let r = pb::RpbIndexResp::decode(b.as_slice()).expect("d");
        let got: Vec<String> = r
            .results
            .iter()
            .map(|p| String::from_utf8(p.key.clone()).expect("utf8"))
            .collect();
        assert_eq!(got, want, "{backend}");
        // A range inside the extended values only.
        let b = c.call(
            code::INDEX_REQ,
            &range("-18446744073709551616", "-9223372036854775808"),
            code::INDEX_RESP,
        );
        let r = pb::RpbIndexResp::decode(b.as_slice()).expect("d");
        let got: Vec<&[u8]> = r.results.iter().map(|p| p.key.as_slice()).collect();
        assert_eq!(got.len(), 3, "{backend}: {got:?}");
        // Paging across the 64-bit boundaries.
        let mut paged = Vec::new();
        let mut cont = None;
        for _ in 0..20 {
            let req = pb::RpbIndexReq {
                max_results: Some(3),
                continuation: cont.clone(),
                ..all.clone()
            };
            let b = c.call(code::INDEX_REQ, &req, code::INDEX_RESP);
            let r = pb::RpbIndexResp::decode(b.as_slice()).expect("d");
            paged.extend(
                r.results
                    .into_iter()
                    .map(|p| String::from_utf8(p.key).expect("utf8")),
            );
            cont = r.continuation;
            if cont.is_none() {
                break;
            }
        }
        assert_eq!(paged, want, "{backend} paged");
        // Equality on a huge term, given with leading zeros.
        let eq = pb::RpbIndexReq {
            bucket: b"ixbig".to_vec(),
            index: b"n_int".to_vec(),
            qtype: pb::INDEX_EQ,
            key: Some(format!("00{big}").into_bytes()),
            ..Default::default()
        };
        let b = c.call(code::INDEX_REQ, &eq, code::INDEX_RESP);
        let r = pb::RpbIndexResp::decode(b.as_slice()).expect("d");
        assert_eq!(r.keys, vec![b"k09".to_vec()], "{backend}");
        // Not an integer: an error, nothing written.
        let mut p = put_req("ixbig", "bad", "v");
        p.content.indexes = vec![pb::RpbPair {
            key: b"n_int".to_vec(),
            value: Some(b"12x".to_vec()),
        }];
        let e = c.try_call(code::PUT_REQ, &p).expect_err("refused");
        assert!(e.contains("not an integer"), "{backend}: {e}");
    }
}

/// `stream = true`: frames of keys / results (100 per frame), then a final
/// `{done = true}` frame carrying the continuation when the page is full.
#[test]
fn secondary_index_streaming_frames_done_and_continuation() {
    let (h, _d) = start(|_| {});
    let mut c = Client::connect(&h);
    for i in 0..250 {
        let mut p = put_req("ixs", &format!("k{i:03}"), "v");
        p.content.indexes = vec![pb::RpbPair {
            key: b"n_int".to_vec(),
            value: Some(i.to_string().into_bytes()),
        }];
        c.put(p);
    }
    // Sends a streamed query, returns (data frames, done frame).
    let stream = |c: &mut Client, req: &pb::RpbIndexReq| {
        c.send(code::INDEX_REQ, &req.encode_to_vec());
        let mut frames = Vec::new();
        loop {
            let (rc, body) = c.recv().expect("frame");
            assert_eq!(rc, code::INDEX_RESP, "reply code");
            let r = pb::RpbIndexResp::decode(body.as_slice()).expect("d");
            if r.done == Some(true) {
                assert!(r.keys.is_empty() && r.results.is_empty());
                return (frames, r);
            }
            assert!(r.continuation.is_none(), "continuation before done");
            frames.push(r);
        }
    };
    let range = pb::RpbIndexReq {
        bucket: b"ixs".to_vec(),
        index: b"n_int".to_vec(),
        qtype: pb::INDEX_RANGE,
        range_min: Some(b"0".to_vec()),
        range_max: Some(b"1000".to_vec()),
        stream: Some(true),
        ..Default::default()
    };
    let (frames, done) = stream(&mut c, &range);
    assert_eq!(
        frames.iter().map(|f| f.keys.len()).collect::<Vec<_>>(),
        vec![100, 100, 50]
    );
    assert!(done.continuation.is_none());
    let keys: Vec<Vec<u8>> = frames.into_iter().flat_map(|f| f.keys).collect();
    let want: Vec<Vec<u8>> = (0..250).map(|i| format!("k{i:03}").into_bytes()).collect();
    assert_eq!(keys, want);
    // return terms + paging: 150 then 100, continuation only in done frames
    let mut got = Vec::new();
    let mut cont = None;
    let mut pages = 0;
    loop {
        let req = pb::RpbIndexReq {
            return_terms: Some(true),
            max_results: Some(150),
            continuation: cont.clone(),
            ..range.clone()
        };
        let (frames, done) = stream(&mut c, &req);
        pages += 1;
        got.extend(frames.into_iter().flat_map(|f| f.results));
        cont = done.continuation;
        if cont.is_none() {
            break;
        }
        assert!(pages < 5, "paging does not end");
    }
    assert_eq!(pages, 2);
    assert_eq!(got.len(), 250);
    assert_eq!(
        got[149],
        pb::RpbPair {
            key: b"149".to_vec(),
            value: Some(b"k149".to_vec())
        }
    );
    // eq query with no match: the done frame alone
    let (frames, done) = stream(
        &mut c,
        &pb::RpbIndexReq {
            qtype: pb::INDEX_EQ,
            key: Some(b"9999".to_vec()),
            ..range.clone()
        },
    );
    assert!(frames.is_empty());
    assert!(done.continuation.is_none());
    // the connection keeps serving
    c.ping();
}

#[test]
fn bad_frames_fuzz_keep_the_node_serving() {
    let (h, _d) = start(|c| c.limits.max_frame_bytes = 4096);
    let mut good = Client::connect(&h);
    good.ping();
    // unknown code and malformed bodies: ErrorResp, connection kept
    let mut c = Client::connect(&h);
    c.send(99, &[]);
    let (rc, body) = c.recv().expect("reply");
    assert_eq!(rc, code::ERROR_RESP);
    let e = pb::RpbErrorResp::decode(body.as_slice()).expect("d");
    assert_eq!(e.errmsg, b"Unknown message code: 99");
    c.send(code::GET_REQ, &[0xFF, 0xFF, 0xFF]);
    assert_eq!(c.recv().map(|f| f.0), Some(code::ERROR_RESP));
    c.send(code::PUT_REQ, &[]); // required fields missing
    assert_eq!(c.recv().map(|f| f.0), Some(code::ERROR_RESP));
    c.ping();
    // oversized frame: ErrorResp then closed
    let mut big = Client::connect(&h);
    big.0
        .stream()
        .write_all(&100_000u32.to_be_bytes())
        .expect("w");
    assert_eq!(big.recv().map(|f| f.0), Some(code::ERROR_RESP));
    // random and truncated frames, fixed seed
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(0xBA5A17);
    for _ in 0..200 {
        let mut s = TcpStream::connect(h.addr()).expect("connect");
        s.set_read_timeout(Some(Duration::from_millis(200)))
            .expect("t");
        let len = rng.gen_range(0..64);
        let mut junk: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
        if rng.gen_bool(0.5) && junk.len() > 5 {
            let body = junk.len() - 4;
            junk[..4].copy_from_slice(&(body as u32).to_be_bytes());
            junk[4] = rng.gen_range(0..32);
        }
        let _ = s.write_all(&junk);
        let mut sink = [0u8; 256];
        let _ = s.read(&mut sink);
    }
    good.ping();
    let mut fresh = Client::connect(&h);
    fresh.put(put_req("after", "fuzz", "ok"));
    assert_eq!(fresh.get(get_req("after", "fuzz")).content[0].value, b"ok");
}

#[test]
fn full_vnode_queue_answers_overload() {
    // A queue of one job: no anti-entropy, whose tree rebuilds and probes
    // would take the slot the test's own requests race for.
    let (h, _d) = start(|c| {
        c.limits.vnode_queue_len = 1;
        c.aae_interval_secs = 0;
    });
    let mut c = Client::connect(&h);
    c.put(put_req("o", "k", "v"));
    let addr = h.addr();
    let results = {
        let _pause = h.node().pause_vnodes();
        let mut threads = Vec::new();
        for _ in 0..4 {
            threads.push(std::thread::spawn(move || {
                let mut cl = Client::to(addr);
                cl.try_call(code::GET_REQ, &get_req("o", "k")).map(|_| ())
            }));
            std::thread::sleep(Duration::from_millis(100));
        }
        std::thread::sleep(Duration::from_millis(200));
        threads
    };
    let results: Vec<Result<(), String>> = results
        .into_iter()
        .map(|t| t.join().expect("join"))
        .collect();
    assert!(
        results.iter().any(|r| r == &Err("overload".to_string())),
        "{results:?}"
    );
    assert!(results.iter().any(Result::is_ok), "{results:?}");
    assert_eq!(c.get(get_req("o", "k")).content[0].value, b"v");
}

#[test]
fn data_survives_restart_on_leveled() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = test_config(&dir, 4, "leveled");
    let h = ServerHandle::spawn(config.clone()).expect("spawn");
    let mut c = Client::connect(&h);
    c.put(put_req("persist", "k", "durable"));
    set_props(
        &mut c,
        "persist",
        pb::RpbBucketProps {
            allow_mult: Some(true),
            ..Default::default()
        },
    );
    drop(c);
    h.shutdown().expect("shutdown");
    let h = ServerHandle::spawn(config).expect("respawn");
    let mut c = Client::connect(&h);
    assert_eq!(c.get(get_req("persist", "k")).content[0].value, b"durable");
    let b = c.call(
        code::GET_BUCKET_REQ,
        &pb::RpbGetBucketReq {
            bucket: b"persist".to_vec(),
            r#type: None,
        },
        code::GET_BUCKET_RESP,
    );
    assert_eq!(
        pb::RpbGetBucketResp::decode(b.as_slice())
            .expect("d")
            .props
            .allow_mult,
        Some(true)
    );
}

fn del(c: &mut Client, bucket: &str, key: &str) {
    c.call(
        code::DEL_REQ,
        &pb::RpbDelReq {
            bucket: bucket.into(),
            key: key.into(),
            ..Default::default()
        },
        code::DEL_RESP,
    );
}

fn list_buckets(c: &mut Client) -> Vec<Vec<u8>> {
    let b = c.call(
        code::LIST_BUCKETS_REQ,
        &pb::RpbListBucketsReq::default(),
        code::LIST_BUCKETS_RESP,
    );
    pb::RpbListBucketsResp::decode(b.as_slice())
        .expect("d")
        .buckets
}

/// Sends a CS bucket fold; returns the object frames and the done frame.
fn cs_fold(
    c: &mut Client,
    req: &pb::RpbCsBucketReq,
) -> Result<(Vec<pb::RpbCsBucketResp>, pb::RpbCsBucketResp), String> {
    c.send(code::CS_BUCKET_REQ, &req.encode_to_vec());
    let mut frames = Vec::new();
    loop {
        let (rc, body) = c.recv().expect("frame");
        if rc == code::ERROR_RESP {
            let e = pb::RpbErrorResp::decode(body.as_slice()).expect("error resp");
            return Err(String::from_utf8_lossy(&e.errmsg).into_owned());
        }
        assert_eq!(rc, code::CS_BUCKET_RESP, "reply code");
        let r = pb::RpbCsBucketResp::decode(body.as_slice()).expect("d");
        if r.done == Some(true) {
            assert!(r.objects.is_empty(), "objects in the done frame");
            return Ok((frames, r));
        }
        assert!(r.continuation.is_none(), "continuation before done");
        assert!(!r.objects.is_empty(), "empty object frame");
        frames.push(r);
    }
}

fn cs_keys(frames: &[pb::RpbCsBucketResp]) -> Vec<String> {
    frames
        .iter()
        .flat_map(|f| &f.objects)
        .map(|o| String::from_utf8_lossy(&o.key).into_owned())
        .collect()
}

fn cs_req(bucket: &str, start: &str, end: Option<&str>) -> pb::RpbCsBucketReq {
    pb::RpbCsBucketReq {
        bucket: bucket.into(),
        start_key: start.into(),
        end_key: end.map(Into::into),
        ..Default::default()
    }
}

#[test]
fn cs_bucket_fold_ranges_incl_flags_tombstones_and_paging() {
    // memory and leveled are ordered; bitcask is not (the vnode then keeps
    // the smallest keys).
    for backend in ["memory", "leveled", "bitcask"] {
        let (h, _d) = start(|c| {
            c.backend = backend.into();
            c.delete_mode = basalt_server::config::DeleteMode::Keep;
        });
        let mut c = Client::connect(&h);
        for i in 0..250 {
            c.put(put_req("cs", &format!("k{i:03}"), &format!("v{i}")));
        }
        c.put(put_req("cs2", "k100", "other bucket"));
        del(&mut c, "cs", "k105");
        let fmt = |r: std::ops::Range<u32>, skip: u32| -> Vec<String> {
            r.filter(|i| *i != skip)
                .map(|i| format!("k{i:03}"))
                .collect()
        };
        // Defaults: start included, end excluded; the tombstone is left out.
        let (frames, done) = cs_fold(&mut c, &cs_req("cs", "k100", Some("k110"))).expect("fold");
        assert_eq!(cs_keys(&frames), fmt(100..110, 105), "{backend}");
        assert!(done.continuation.is_none());
        let o = &frames[0].objects[0];
        assert_eq!(o.object.content.len(), 1);
        assert_eq!(o.object.content[0].value, b"v100");
        assert_eq!(
            o.object.content[0].content_type.as_deref(),
            Some(&b"text/plain"[..])
        );
        assert!(o.object.vclock.as_ref().is_some_and(|v| !v.is_empty()));
        // The fold's vclock is the object's: a PUT with it replaces, no sibling.
        let mut p = put_req("cs", "k100", "v100b");
        p.vclock = o.object.vclock.clone();
        c.put(p);
        // Flags flipped.
        let mut req = cs_req("cs", "k100", Some("k110"));
        req.start_incl = Some(false);
        req.end_incl = Some(true);
        let (frames, _) = cs_fold(&mut c, &req).expect("fold");
        assert_eq!(cs_keys(&frames), fmt(101..111, 105), "{backend}");
        // No end key: to the end of the bucket.
        let (frames, _) = cs_fold(&mut c, &cs_req("cs", "k240", None)).expect("fold");
        assert_eq!(cs_keys(&frames), fmt(240..250, 999));
        // Empty range, unknown bucket: only the done frame.
        let (frames, done) = cs_fold(&mut c, &cs_req("cs", "k300", None)).expect("fold");
        assert!(frames.is_empty() && done.continuation.is_none());
        let (frames, _) = cs_fold(&mut c, &cs_req("nope", "", None)).expect("fold");
        assert!(frames.is_empty());
        // Whole bucket in pages of 60: frames of at most 100 objects, the
        // continuation only in the done frame of a full page.
        let mut all = Vec::new();
        let mut pages = Vec::new();
        let mut cont = None;
        loop {
            let mut req = cs_req("cs", "", None);
            req.max_results = Some(60);
            req.continuation = cont.take();
            let (frames, done) = cs_fold(&mut c, &req).expect("page");
            assert!(frames.iter().all(|f| f.objects.len() <= 100));
            let keys = cs_keys(&frames);
            pages.push(keys.len());
            all.extend(keys);
            match done.continuation {
                Some(k) => cont = Some(k),
                None => break,
            }
        }
        assert_eq!(pages, vec![60, 60, 60, 60, 9], "{backend}");
        assert_eq!(all, fmt(0..250, 105), "sorted, deduplicated, {backend}");
        // Without a page size: everything in one stream, several frames.
        let (frames, done) = cs_fold(&mut c, &cs_req("cs", "", None)).expect("fold");
        assert_eq!(cs_keys(&frames), fmt(0..250, 105));
        assert!(frames.len() >= 3, "{} frames", frames.len());
        assert!(done.continuation.is_none());
        let k100 = frames
            .iter()
            .flat_map(|f| &f.objects)
            .find(|o| o.key == b"k100")
            .expect("k100");
        assert_eq!(k100.object.content.len(), 1);
        assert_eq!(k100.object.content[0].value, b"v100b");
        // Bad input: an error, and the connection keeps serving.
        let mut req = cs_req("cs", "", None);
        req.continuation = Some(b"garbage!".to_vec());
        assert_eq!(
            cs_fold(&mut c, &req).err().as_deref(),
            Some("invalid continuation")
        );
        assert!(cs_fold(&mut c, &cs_req("", "a", None)).is_err());
        c.ping();
        h.shutdown().expect("shutdown");
    }
}

#[test]
fn list_keys_streams_many_keys_in_several_frames() {
    let (h, _d) = start(|_| {});
    let mut c = Client::connect(&h);
    const N: usize = 20_000;
    // Pipelined in batches (the connection answers in order).
    for batch in 0..N / 500 {
        for i in batch * 500..(batch + 1) * 500 {
            let req = put_req("many", &format!("key{i:05}"), "v");
            c.send(code::PUT_REQ, &req.encode_to_vec());
        }
        for _ in 0..500 {
            assert_eq!(c.recv().map(|f| f.0), Some(code::PUT_RESP));
        }
    }
    let list = pb::RpbListKeysReq {
        bucket: b"many".to_vec(),
        ..Default::default()
    };
    c.send(code::LIST_KEYS_REQ, &list.encode_to_vec());
    let mut sizes = Vec::new();
    let mut keys = Vec::new();
    loop {
        let (rc, body) = c.recv().expect("frame");
        assert_eq!(rc, code::LIST_KEYS_RESP);
        let r = pb::RpbListKeysResp::decode(body.as_slice()).expect("d");
        if r.done == Some(true) {
            assert!(r.keys.is_empty());
            break;
        }
        sizes.push(r.keys.len());
        keys.extend(r.keys);
    }
    assert!(sizes.len() >= 20, "frames: {sizes:?}");
    assert!(
        sizes
            .iter()
            .all(|s| (1..=basalt_server::limits::LIST_KEYS_FRAME_KEYS).contains(s)),
        "{sizes:?}"
    );
    keys.sort();
    let want: Vec<Vec<u8>> = (0..N).map(|i| format!("key{i:05}").into_bytes()).collect();
    assert_eq!(keys, want, "every key exactly once");
    // A client that leaves mid-stream does not disturb the node.
    let mut quitter = Client::connect(&h);
    quitter.send(code::LIST_KEYS_REQ, &list.encode_to_vec());
    assert_eq!(quitter.recv().map(|f| f.0), Some(code::LIST_KEYS_RESP));
    drop(quitter);
    let mut c2 = Client::connect(&h);
    c2.ping();
    assert_eq!(c2.get(get_req("many", "key12345")).content[0].value, b"v");
    h.shutdown().expect("shutdown");
}

#[test]
fn basic_quorum_fails_fast_on_a_majority_of_notfounds() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = test_config(&dir, 8, "leveled");
    let h = ServerHandle::spawn(config.clone()).expect("spawn");
    let mut c = Client::connect(&h);
    c.put(put_req("bq", "k", "v"));
    let pl = h.node().preflist_of(b"bq", b"k");
    assert_eq!(pl.len(), 3);
    drop(c);
    h.shutdown().expect("shutdown");
    // The first two replicas lose the object: only the third holds it.
    for p in &pl[..2] {
        std::fs::remove_dir_all(dir.path().join("vnodes").join(p.partition.to_string()))
            .expect("rm");
    }
    let h = ServerHandle::spawn(config).expect("respawn");
    let mut c = Client::connect(&h);
    let req =
        |basic_quorum: Option<bool>, notfound_ok: Option<bool>, r: Option<u32>| pb::RpbGetReq {
            r,
            basic_quorum,
            notfound_ok,
            ..get_req("bq", "k")
        };
    // r = 1, notfound_ok = false: two not-founds are a majority of 3.
    let got = c.get(req(Some(true), Some(false), Some(1)));
    assert!(got.content.is_empty() && got.vclock.is_none(), "{got:?}");
    // The same from the bucket props.
    set_props(
        &mut c,
        "bq",
        pb::RpbBucketProps {
            basic_quorum: Some(true),
            notfound_ok: Some(false),
            ..Default::default()
        },
    );
    let got = c.get(req(None, None, Some(1)));
    assert!(got.content.is_empty(), "{got:?}");
    // Without basic_quorum and r = 2, one answer is not enough: an r error.
    assert_eq!(
        c.try_call(code::GET_REQ, &req(Some(false), None, None))
            .err()
            .as_deref(),
        Some("{r_val_unsatisfied,2,1}")
    );
    // Without basic_quorum and r = 1, the third replica's answer counts
    // (and read repair restores the other two).
    let got = c.get(req(Some(false), None, Some(1)));
    assert_eq!(
        got.content.first().map(|x| x.value.clone()),
        Some(b"v".to_vec())
    );
    // Read repair runs in the background: within a few seconds the other
    // two replicas hold it and the basic_quorum GET finds it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        let got = c.get(req(None, None, Some(1)));
        if got.content.first().map(|x| x.value.clone()) == Some(b"v".to_vec()) {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "read repair did not land: {got:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    // A missing key under basic_quorum is still a plain not found.
    let got = c.get(pb::RpbGetReq {
        key: b"absent".to_vec(),
        ..req(Some(true), Some(false), None)
    });
    assert!(got.content.is_empty());
    h.shutdown().expect("shutdown");
}

fn tombstone_clock(c: &mut Client, bucket: &str, key: &str) -> Option<Vec<u8>> {
    let got = c.get(pb::RpbGetReq {
        deletedvclock: Some(true),
        ..get_req(bucket, key)
    });
    assert!(got.content.is_empty(), "deleted");
    got.vclock
}

#[test]
fn tombstones_are_reaped_after_delete_mode_and_kept_with_keep() {
    use basalt_server::config::DeleteMode;
    // keep: the tombstone stays (its clock is readable, its bucket listed).
    let (h, _d) = start(|c| c.delete_mode = DeleteMode::Keep);
    let mut c = Client::connect(&h);
    c.put(put_req("kept", "k", "v"));
    del(&mut c, "kept", "k");
    std::thread::sleep(Duration::from_millis(600));
    assert!(tombstone_clock(&mut c, "kept", "k").is_some());
    assert!(list_buckets(&mut c).contains(&b"kept".to_vec()));
    h.shutdown().expect("shutdown");

    // 300 ms: the tombstone goes once every replica holds it.
    let (h, _d) = start(|c| c.delete_mode = DeleteMode::DelayMs(300));
    let mut c = Client::connect(&h);
    c.put(put_req("reap", "gone", "v"));
    c.put(put_req("reap", "back", "v1"));
    del(&mut c, "reap", "gone");
    del(&mut c, "reap", "back");
    // Rewritten before the delay ends: the reap must leave it alone.
    c.put(put_req("reap", "back", "v2"));
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while tombstone_clock(&mut c, "reap", "gone").is_some() {
        assert!(std::time::Instant::now() < deadline, "tombstone not reaped");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(c.get(get_req("reap", "back")).content[0].value, b"v2");
    let mut c2 = Client::connect(&h);
    let list = pb::RpbListKeysReq {
        bucket: b"reap".to_vec(),
        ..Default::default()
    };
    let b = c2.call(code::LIST_KEYS_REQ, &list, code::LIST_KEYS_RESP);
    let mut keys = pb::RpbListKeysResp::decode(b.as_slice()).expect("d").keys;
    while let Some((_, body)) = c2.recv() {
        let r = pb::RpbListKeysResp::decode(body.as_slice()).expect("d");
        keys.extend(r.keys);
        if r.done == Some(true) {
            break;
        }
    }
    assert_eq!(keys, vec![b"back".to_vec()]);

    // A bucket holding only a reaped tombstone is no longer listed.
    c.put(put_req("reap_only", "k", "v"));
    del(&mut c, "reap_only", "k");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while list_buckets(&mut c).contains(&b"reap_only".to_vec()) {
        assert!(std::time::Instant::now() < deadline, "bucket still listed");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(tombstone_clock(&mut c, "reap_only", "k").is_none());
    h.shutdown().expect("shutdown");
}

#[test]
fn a_read_that_finds_a_tombstone_on_every_replica_reaps_it() {
    use basalt_server::config::DeleteMode;
    // Deleted under `keep`: the tombstone is on disk and no reap waits.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut config = test_config(&dir, 8, "leveled");
    config.delete_mode = DeleteMode::Keep;
    let h = ServerHandle::spawn(config.clone()).expect("spawn");
    let mut c = Client::connect(&h);
    c.put(put_req("old", "k", "v"));
    del(&mut c, "old", "k");
    h.shutdown().expect("shutdown");

    // Reopened with a 100 ms delay: nothing reaps it until a GET sees it
    // on all three replicas (Riak's get FSM asks for the delete then).
    config.delete_mode = DeleteMode::DelayMs(100);
    config.pb_listen = "127.0.0.1:0".into();
    let h = ServerHandle::spawn(config).expect("respawn");
    let mut c = Client::connect(&h);
    std::thread::sleep(Duration::from_millis(400));
    assert!(tombstone_clock(&mut c, "old", "k").is_some(), "kept");
    let deadline = std::time::Instant::now() + Duration::from_secs(15);
    while tombstone_clock(&mut c, "old", "k").is_some() {
        assert!(std::time::Instant::now() < deadline, "tombstone not reaped");
        std::thread::sleep(Duration::from_millis(50));
    }
    h.shutdown().expect("shutdown");
}

#[test]
fn a_vnode_whose_backend_closed_itself_is_reopened() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = test_config(&dir, 4, "leveled");
    let h = ServerHandle::spawn(config).expect("spawn");
    let mut c = Client::connect(&h);
    // One replica only, so nothing else could answer for it.
    set_props(
        &mut c,
        "one",
        pb::RpbBucketProps {
            n_val: Some(1),
            ..Default::default()
        },
    );
    c.put(put_req("one", "k", "v1"));
    let p = h.node().preflist_of(b"one", b"k")[0].partition;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    // The backend closes itself (as after a failed journal write): the next
    // request reopens the vnode and succeeds, data intact.
    rt.block_on(h.node().router().fault_close_vnode_backend(p))
        .expect("close backend");
    assert_eq!(c.get(get_req("one", "k")).content[0].value, b"v1");
    c.put(put_req("one", "k2", "v2"));
    assert_eq!(c.get(get_req("one", "k2")).content[0].value, b"v2");
    // A second failure within the restart interval is reported (the only
    // replica failed), not looped on; the node keeps serving.
    rt.block_on(h.node().router().fault_close_vnode_backend(p))
        .expect("close backend");
    let err = c.try_call(code::GET_REQ, &get_req("one", "k"));
    assert_eq!(err.err().as_deref(), Some("{r_val_unsatisfied,1,0}"));
    c.put(put_req("other", "k", "v"));
    c.ping();
}

/// Streams a list-buckets request; returns each frame's buckets up to and
/// including the `done` frame, then checks that the connection's next
/// request gets its own answer (no stray frame left on the socket).
fn stream_buckets(c: &mut Client, btype: Option<&str>) -> Vec<Vec<Vec<u8>>> {
    c.send(
        code::LIST_BUCKETS_REQ,
        &pb::RpbListBucketsReq {
            stream: Some(true),
            r#type: btype.map(|t| t.as_bytes().to_vec()),
            ..Default::default()
        }
        .encode_to_vec(),
    );
    let mut frames = Vec::new();
    loop {
        let (rc, body) = c.recv().expect("frame");
        assert_eq!(rc, code::LIST_BUCKETS_RESP);
        let r = pb::RpbListBucketsResp::decode(body.as_slice()).expect("d");
        frames.push(r.buckets);
        if r.done == Some(true) {
            break;
        }
    }
    c.ping();
    frames
}

#[test]
fn streamed_list_buckets_sends_no_empty_batch() {
    let (h, _d) = start(|_| {});
    let mut c = Client::connect(&h);
    // Nothing stored: only the `done` frame, with no buckets (riakc takes an
    // empty batch for the end and would read `done` as the next answer).
    assert_eq!(stream_buckets(&mut c, None), vec![Vec::<Vec<u8>>::new()]);
    c.put(put_req("sb1", "k", "v"));
    assert_eq!(
        stream_buckets(&mut c, None),
        vec![vec![b"sb1".to_vec()], vec![]]
    );
    // The default type named explicitly lists the same.
    assert_eq!(
        stream_buckets(&mut c, Some("default")),
        vec![vec![b"sb1".to_vec()], vec![]]
    );
}
