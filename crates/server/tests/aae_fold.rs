//! Anti-entropy fold queries (`aae_fold`) over PB and HTTP against a model:
//! one in-process node (leveled backend, ring of 8, `xxsmall` cached trees,
//! `delete_mode = keep`) holding a known set of objects — sizes of three
//! orders of magnitude, two keys with two siblings, tombstones and a
//! second bucket. Checks each fold type's counts, keys and
//! histograms; that cached-tree queries before the trees are built fail
//! with "trees not built" and that the cached root equals the XOR of range
//! trees; count-only and real modes of `reap_tombs` and `erase_keys`
//! (erased keys read as not found, their tombstones are found); answers
//! after a restart; bad input over PB and HTTP (each error names it); a
//! typed bucket (its type in list answers, its own n_val's cached root).

mod common;

use basalt_server::aae::fold::TREE_SIZES;
use basalt_server::pb::{self, code};
use basalt_server::{Config, ServerHandle};
use base64::Engine;
use common::Client;
use prost::Message;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn config(dir: &std::path::Path) -> Config {
    Config {
        data_dir: dir.to_path_buf(),
        pb_listen: "127.0.0.1:0".into(),
        cluster_listen: "127.0.0.1:0".into(),
        http_listen: "127.0.0.1:0".into(),
        ring_size: 8,
        backend: "leveled".into(),
        delete_mode: basalt_server::config::DeleteMode::Keep,
        aae_tree_size: "xxsmall".into(),
        aae_interval_secs: 0,
        ..Config::default()
    }
}

fn http(h: &ServerHandle, path: &str) -> (u16, String) {
    let addr = h.http_addr().expect("http on");
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let req = format!("GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s.write_all(req.as_bytes()).expect("write");
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let (head, body) = text.split_once("\r\n\r\n").expect("header end");
    let status = head
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .expect("status");
    // Bodies here are small; undo chunked framing if any.
    let body = if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        let mut out = String::new();
        let mut rest = body;
        while let Some((len, after)) = rest.split_once("\r\n") {
            let n = usize::from_str_radix(len.trim(), 16).unwrap_or(0);
            if n == 0 {
                break;
            }
            out.push_str(&after[..n]);
            rest = &after[n + 2..];
        }
        out
    } else {
        body.to_string()
    };
    (status, body)
}

fn http_json(h: &ServerHandle, path: &str) -> Value {
    let (status, body) = http(h, path);
    assert_eq!(status, 200, "{path}: {body}");
    serde_json::from_str(&body).unwrap_or_else(|e| panic!("{path}: {e}: {body}"))
}

fn filter(v: Value) -> String {
    base64::engine::general_purpose::URL_SAFE.encode(v.to_string())
}

fn put(c: &mut Client, t: Option<&str>, b: &str, k: &str, v: &[u8], vclock: Option<Vec<u8>>) {
    c.call(
        code::PUT_REQ,
        &pb::RpbPutReq {
            r#type: t.map(|t| t.as_bytes().to_vec()),
            bucket: b.into(),
            key: Some(k.into()),
            vclock,
            content: pb::RpbContent {
                value: v.to_vec(),
                ..Default::default()
            },
            w: Some(3),
            ..Default::default()
        },
        code::PUT_RESP,
    );
}

fn delete(c: &mut Client, b: &str, k: &str) {
    let g = c.call(
        code::GET_REQ,
        &pb::RpbGetReq {
            bucket: b.into(),
            key: k.into(),
            ..Default::default()
        },
        code::GET_RESP,
    );
    let g = pb::RpbGetResp::decode(g.as_slice()).expect("get");
    c.call(
        code::DEL_REQ,
        &pb::RpbDelReq {
            bucket: b.into(),
            key: k.into(),
            vclock: g.vclock,
            w: Some(3),
            ..Default::default()
        },
        code::DEL_RESP,
    );
}

/// The model: key → (total value bytes, siblings) of the live keys of
/// bucket "fold", and its tombstones.
struct Model {
    live: BTreeMap<String, (u64, u32)>,
    tombs: BTreeSet<String>,
}

fn key(i: usize) -> String {
    format!("k{i:02}")
}

/// Writes the model's data: 20 live keys in "fold" (k00–k09: 5 bytes,
/// k10–k14: 50, k15–k19: 500; k00 and k01 get a second sibling of 5
/// bytes), 5 tombstones t00–t04, 3 keys in "other".
fn load(c: &mut Client) -> Model {
    c.call(
        code::SET_BUCKET_REQ,
        &pb::RpbSetBucketReq {
            bucket: b"fold".to_vec(),
            props: pb::RpbBucketProps {
                allow_mult: Some(true),
                ..Default::default()
            },
            r#type: None,
        },
        code::SET_BUCKET_RESP,
    );
    let mut live = BTreeMap::new();
    for i in 0..20 {
        let len = match i {
            0..=9 => 5,
            10..=14 => 50,
            _ => 500,
        };
        put(c, None, "fold", &key(i), &vec![b'v'; len], None);
        live.insert(key(i), (len as u64, 1));
    }
    for i in 0..2 {
        // A blind write: a second sibling.
        put(c, None, "fold", &key(i), b"sibl!", None);
        live.insert(key(i), (10, 2));
    }
    let mut tombs = BTreeSet::new();
    for i in 0..5 {
        let k = format!("t{i:02}");
        put(c, None, "fold", &k, b"gone", None);
        delete(c, "fold", &k);
        tombs.insert(k);
    }
    for i in 0..3 {
        put(c, None, "other", &format!("o{i}"), b"x", None);
    }
    Model { live, tombs }
}

fn call(c: &mut Client, req_code: u8, m: &impl Message, want: u8) -> Vec<u8> {
    c.call(req_code, m, want)
}

fn root_pb(c: &mut Client, n_val: u32) -> Result<Vec<u8>, String> {
    let (rc, body) = c.try_call(
        code::AAE_FOLD_MERGE_ROOT_N_VAL_REQ,
        &pb::RpbAaeFoldMergeRootNValReq { n_val },
    )?;
    assert_eq!(rc, code::AAE_FOLD_TREE_RESP);
    let t = pb::RpbAaeFoldTreeResp::decode(body.as_slice()).expect("tree");
    Ok(t.level_one.unwrap_or_default())
}

fn range_tree(c: &mut Client, bucket: &str) -> pb::RpbAaeFoldTreeResp {
    let b = call(
        c,
        code::AAE_FOLD_MERGE_TREES_RANGE_REQ,
        &pb::RpbAaeFoldMergeTreesRangeReq {
            bucket: bucket.into(),
            tree_size: 0,
            use_prehash: true,
            ..Default::default()
        },
        code::AAE_FOLD_TREE_RESP,
    );
    pb::RpbAaeFoldTreeResp::decode(b.as_slice()).expect("tree")
}

fn xor(a: &[u8], b: &[u8]) -> Vec<u8> {
    a.iter().zip(b).map(|(x, y)| x ^ y).collect()
}

fn clocks_range(c: &mut Client, start: &str, end: &str) -> Vec<pb::RpbKeysValue> {
    let b = call(
        c,
        code::AAE_FOLD_FETCH_CLOCKS_RANGE_REQ,
        &pb::RpbAaeFoldFetchClocksRangeReq {
            bucket: b"fold".to_vec(),
            key_range: true,
            start_key: Some(start.into()),
            end_key: Some(end.into()),
            ..Default::default()
        },
        code::AAE_FOLD_KEY_VALUE_RESP,
    );
    pb::RpbAaeFoldKeyValueResp::decode(b.as_slice())
        .expect("kv")
        .keys_value
}

fn key_counts(b: &[u8]) -> Vec<(String, Option<u32>, u32)> {
    pb::RpbAaeFoldKeyCountResp::decode(b)
        .expect("counts")
        .keys_count
        .into_iter()
        .map(|k| {
            (
                String::from_utf8_lossy(&k.tag).into_owned(),
                k.order,
                k.count,
            )
        })
        .collect()
}

fn find_tombs(c: &mut Client) -> BTreeSet<String> {
    let b = call(
        c,
        code::AAE_FOLD_FIND_TOMBS_REQ,
        &pb::RpbAaeFoldFindTombsReq {
            bucket: b"fold".to_vec(),
            ..Default::default()
        },
        code::AAE_FOLD_KEY_COUNT_RESP,
    );
    key_counts(&b).into_iter().map(|(k, _, _)| k).collect()
}

fn object_stats(c: &mut Client) -> Vec<(String, Option<u32>, u32)> {
    let b = call(
        c,
        code::AAE_FOLD_OBJECT_STATS_REQ,
        &pb::RpbAaeFoldObjectStatsReq {
            bucket: b"fold".to_vec(),
            ..Default::default()
        },
        code::AAE_FOLD_KEY_COUNT_RESP,
    );
    key_counts(&b)
}

fn build_trees(h: &ServerHandle) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let bad = rt
        .block_on(h.node().aae().aae_verify_trees())
        .expect("verify builds the trees");
    assert!(bad.is_empty());
}

#[test]
fn every_fold_type_against_a_model() {
    let dir = tempfile::tempdir().expect("tempdir");
    let h = ServerHandle::spawn(config(dir.path())).expect("spawn");
    let mut c = Client::connect(&h);
    let m = load(&mut c);

    // Before any exchange the cached trees are not built: a clear error,
    // 503 over HTTP, and no fold ran instead.
    let e = root_pb(&mut c, 3).expect_err("trees not built");
    assert!(e.starts_with("trees not built"), "{e}");
    let (status, body) = http(&h, "/cachedtrees/nvals/3/root");
    assert_eq!(status, 503, "{body}");
    assert!(body.contains("trees not built"), "{body}");
    build_trees(&h);

    // merge_root_nval = XOR of the range trees of every n_val-3 bucket.
    let root = root_pb(&mut c, 3).expect("root");
    assert_eq!(root.len(), 16 * 8, "xxsmall: 16 branches of u64");
    let fold_tree = range_tree(&mut c, "fold");
    let other_tree = range_tree(&mut c, "other");
    assert_eq!(
        xor(
            fold_tree.level_one.as_deref().unwrap_or_default(),
            other_tree.level_one.as_deref().unwrap_or_default()
        ),
        root,
        "cached root = XOR of the range trees"
    );
    assert!(root.iter().any(|b| *b != 0));
    // HTTP gives the same root.
    let j = http_json(&h, "/cachedtrees/nvals/3/root");
    let http_root = base64::engine::general_purpose::STANDARD
        .decode(j["root"].as_str().expect("root"))
        .expect("b64");
    assert_eq!(http_root, root);
    // No key has n_val 2: an all-zero root.
    assert!(root_pb(&mut c, 2).expect("root").iter().all(|b| *b == 0));

    // merge_branch_nval: each branch's segments XOR to its root entry.
    let b = call(
        &mut c,
        code::AAE_FOLD_MERGE_BRANCH_N_VAL_REQ,
        &pb::RpbAaeFoldMergeBranchNValReq {
            n_val: 3,
            id_filter: (0..16).collect(),
        },
        code::AAE_FOLD_TREE_RESP,
    );
    let t = pb::RpbAaeFoldTreeResp::decode(b.as_slice()).expect("tree");
    assert_eq!(t.level_two.len(), 16);
    for l2 in &t.level_two {
        let branch = u32::from_be_bytes(l2[..4].try_into().expect("id")) as usize;
        let mut acc = 0u64;
        for s in l2[4..].chunks_exact(8) {
            acc ^= u64::from_be_bytes(s.try_into().expect("u64"));
        }
        let want = u64::from_be_bytes(root[branch * 8..branch * 8 + 8].try_into().expect("u64"));
        assert_eq!(acc, want, "branch {branch}");
    }
    let j = http_json(
        &h,
        &format!(
            "/cachedtrees/nvals/3/branch?filter={}",
            filter(serde_json::json!([0, 3]))
        ),
    );
    assert_eq!(j["branches"].as_array().map(Vec::len), Some(2));

    // fetch_clocks_nval: exactly the model's keys (live and tombstones, of
    // both n_val-3 buckets) in the chosen segments.
    let seg = |b: &str, k: &str| {
        basalt_backend::segment_of(
            b.as_bytes(),
            k.as_bytes(),
            basalt_backend::TreeSize::XXSmall,
        )
    };
    let segments: Vec<u32> = ["k03", "k12", "t01", "o1"]
        .iter()
        .zip(["fold", "fold", "fold", "other"])
        .map(|(k, b)| seg(b, k))
        .collect();
    let mut want: BTreeSet<(String, String)> = BTreeSet::new();
    for k in m.live.keys().chain(m.tombs.iter()) {
        if segments.contains(&seg("fold", k)) {
            want.insert(("fold".into(), k.clone()));
        }
    }
    for i in 0..3 {
        let k = format!("o{i}");
        if segments.contains(&seg("other", &k)) {
            want.insert(("other".into(), k));
        }
    }
    let b = call(
        &mut c,
        code::AAE_FOLD_FETCH_CLOCKS_N_VAL_REQ,
        &pb::RpbAaeFoldFetchClocksNValReq {
            n_val: 3,
            id_filter: segments.clone(),
            ..Default::default()
        },
        code::AAE_FOLD_KEY_VALUE_RESP,
    );
    let got: BTreeSet<(String, String)> = pb::RpbAaeFoldKeyValueResp::decode(b.as_slice())
        .expect("kv")
        .keys_value
        .iter()
        .map(|kv| {
            assert!(!kv.value.is_empty(), "a clock");
            (
                String::from_utf8_lossy(&kv.bucket).into_owned(),
                String::from_utf8_lossy(&kv.key).into_owned(),
            )
        })
        .collect();
    assert_eq!(got, want);

    // fetch_clocks_range: the key range, inclusive.
    let kv = clocks_range(&mut c, "k05", "k09");
    let keys: Vec<String> = kv
        .iter()
        .map(|k| String::from_utf8_lossy(&k.key).into_owned())
        .collect();
    assert_eq!(keys, ["k05", "k06", "k07", "k08", "k09"]);
    let j = http_json(
        &h,
        &format!(
            "/rangetrees/buckets/fold/keysclocks?filter={}",
            filter(serde_json::json!({"key_range": {"start": "k05", "end": "k09"}}))
        ),
    );
    assert_eq!(j["keys-clocks"].as_array().map(Vec::len), Some(5));
    // A modified range in the distant past matches nothing; around now, all.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs();
    let j = http_json(
        &h,
        &format!(
            "/rangetrees/buckets/fold/keysclocks?filter={}",
            filter(serde_json::json!({"date_range": {"start": 0, "end": 1000}}))
        ),
    );
    assert_eq!(j["keys-clocks"].as_array().map(Vec::len), Some(0));
    let j = http_json(
        &h,
        &format!(
            "/rangetrees/buckets/fold/keysclocks?filter={}",
            filter(serde_json::json!({"date_range": {"start": now - 600, "end": now + 600}}))
        ),
    );
    assert_eq!(
        j["keys-clocks"].as_array().map(Vec::len),
        Some(m.live.len() + m.tombs.len())
    );

    // find_keys: siblings > 1, size > 100.
    let b = call(
        &mut c,
        code::AAE_FOLD_FIND_KEYS_REQ,
        &pb::RpbAaeFoldFindKeysReq {
            bucket: b"fold".to_vec(),
            finder: 0,
            find_limit: 1,
            ..Default::default()
        },
        code::AAE_FOLD_KEY_COUNT_RESP,
    );
    assert_eq!(
        key_counts(&b),
        vec![("k00".into(), None, 2), ("k01".into(), None, 2)]
    );
    let j = http_json(&h, "/objectsizes/buckets/fold/sizes/100");
    let big: Vec<(String, u64)> = j["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| {
            (
                r["key"].as_str().unwrap_or("").to_string(),
                r["value"].as_u64().unwrap_or(0),
            )
        })
        .collect();
    let want: Vec<(String, u64)> = m
        .live
        .iter()
        .filter(|(_, (s, _))| *s > 100)
        .map(|(k, (s, _))| (k.clone(), *s))
        .collect();
    assert_eq!(big, want);
    let j = http_json(&h, "/siblings/buckets/fold/counts/1");
    assert_eq!(j["results"].as_array().map(Vec::len), Some(2));

    // object_stats: count, total size, histograms (live keys only).
    let stats = object_stats(&mut c);
    let total: u64 = m.live.values().map(|(s, _)| s).sum();
    let mut want = vec![
        ("total_count".to_string(), None, m.live.len() as u32),
        ("total_size".to_string(), None, total as u32),
    ];
    // Sizes: 8 keys of 5 bytes and 2 of 10 (order 0 and 1), 5 of 50, 5 of 500.
    want.extend([
        ("sizes".to_string(), Some(0), 8),
        ("sizes".to_string(), Some(1), 7),
        ("sizes".to_string(), Some(2), 5),
        ("siblings".to_string(), Some(1), 18),
        ("siblings".to_string(), Some(2), 2),
    ]);
    assert_eq!(stats, want);
    let j = http_json(&h, "/objectstats/buckets/fold");
    assert_eq!(j["total_count"], 20);
    assert_eq!(j["siblings"]["2"], 2);

    // find_tombs.
    assert_eq!(find_tombs(&mut c), m.tombs);
    let j = http_json(&h, "/tombs/buckets/fold");
    assert_eq!(j["results"].as_array().map(Vec::len), Some(5));

    // list_buckets.
    let b = call(
        &mut c,
        code::AAE_FOLD_LIST_BUCKETS_REQ,
        &pb::RpbAaeFoldListBucketsReq { n_val: Some(3) },
        code::AAE_FOLD_LIST_BUCKETS_RESP,
    );
    let names: Vec<Vec<u8>> = pb::RpbAaeFoldListBucketsResp::decode(b.as_slice())
        .expect("buckets")
        .bucket_list
        .into_iter()
        .map(|b| b.bucket)
        .collect();
    assert_eq!(names, vec![b"fold".to_vec(), b"other".to_vec()]);
    let j = http_json(&h, "/aaebucketlist?nval=3");
    assert_eq!(j["results"].as_array().map(Vec::len), Some(2));

    // Restart: the cached trees come back from their files; the answers
    // are the same.
    let before_root = root_pb(&mut c, 3).expect("root");
    let before_stats = object_stats(&mut c);
    drop(c);
    h.shutdown().expect("shutdown");
    let h = ServerHandle::spawn(config(dir.path())).expect("respawn");
    let mut c = Client::connect(&h);
    assert_eq!(root_pb(&mut c, 3).expect("root after restart"), before_root);
    assert_eq!(object_stats(&mut c), before_stats);
    assert_eq!(find_tombs(&mut c), m.tombs);

    // reap_tombs: count only changes nothing; then reap for real.
    let reap = |change_method: i32| pb::RpbAaeFoldReapTombsReq {
        bucket: b"fold".to_vec(),
        change_method,
        ..Default::default()
    };
    let b = call(
        &mut c,
        code::AAE_FOLD_REAP_TOMBS_REQ,
        &reap(2),
        code::AAE_FOLD_KEY_COUNT_RESP,
    );
    assert_eq!(key_counts(&b), vec![("dispatched_count".into(), None, 5)]);
    assert_eq!(find_tombs(&mut c), m.tombs);
    let j = http_json(&h, "/reap/buckets/fold");
    assert_eq!(j["dispatched_count"], 5, "HTTP defaults to count");
    assert_eq!(find_tombs(&mut c).len(), 5);
    let b = call(
        &mut c,
        code::AAE_FOLD_REAP_TOMBS_REQ,
        &reap(1),
        code::AAE_FOLD_KEY_COUNT_RESP,
    );
    assert_eq!(key_counts(&b), vec![("dispatched_count".into(), None, 5)]);
    assert!(find_tombs(&mut c).is_empty(), "reaped");
    assert_eq!(root_pb(&mut c, 3).expect("root"), {
        // The cached trees followed the reaps: equal to fresh range trees.
        let f = range_tree(&mut c, "fold");
        let o = range_tree(&mut c, "other");
        xor(
            f.level_one.as_deref().unwrap_or_default(),
            o.level_one.as_deref().unwrap_or_default(),
        )
    });

    // erase_keys over k15..k19: count only, then for real through DELETE.
    let erase = |change_method: i32| pb::RpbAaeFoldEraseKeysReq {
        bucket: b"fold".to_vec(),
        key_range: true,
        start_key: Some(b"k15".to_vec()),
        end_key: Some(b"k19".to_vec()),
        change_method,
        ..Default::default()
    };
    let b = call(
        &mut c,
        code::AAE_FOLD_ERASE_KEYS_REQ,
        &erase(2),
        code::AAE_FOLD_KEY_COUNT_RESP,
    );
    assert_eq!(key_counts(&b), vec![("dispatched_count".into(), None, 5)]);
    assert_eq!(object_stats(&mut c)[0].2, 20, "count only erased nothing");
    let j = http_json(
        &h,
        &format!(
            "/erase/buckets/fold?filter={}",
            filter(serde_json::json!({
                "key_range": {"start": "k15", "end": "k19"},
                "change_method": "local"
            }))
        ),
    );
    assert_eq!(j["dispatched_count"], 5);
    // The deletes' last replica writes may still be arriving (w = quorum).
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while object_stats(&mut c)[0].2 != 15 {
        assert!(
            std::time::Instant::now() < deadline,
            "erase reached every replica"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let tombs = find_tombs(&mut c);
    assert_eq!(
        tombs,
        (15..20).map(key).collect::<BTreeSet<_>>(),
        "erased keys are tombstones (a DELETE)"
    );
    let g = call(
        &mut c,
        code::GET_REQ,
        &pb::RpbGetReq {
            bucket: b"fold".to_vec(),
            key: b"k17".to_vec(),
            ..Default::default()
        },
        code::GET_RESP,
    );
    assert!(pb::RpbGetResp::decode(g.as_slice())
        .expect("get")
        .content
        .is_empty());
    assert_eq!(clocks_range(&mut c, "k00", "k14").len(), 15);

    // The admin path (cluster port) serves the same queries.
    let mut admin = Client::admin(&h);
    assert_eq!(object_stats(&mut admin)[0].2, 15);

    let (status, body) = http(&h, "/stats");
    assert_eq!(status, 200);
    let stats: Value = serde_json::from_str(&body).expect("stats json");
    assert!(
        stats["aae_fold_requests_total"].as_u64().unwrap_or(0) > 0,
        "{body}"
    );
    drop(c);
    drop(admin);
    h.shutdown().expect("shutdown");
}

#[test]
fn bad_input_is_named_over_pb_and_http() {
    let dir = tempfile::tempdir().expect("tempdir");
    let h = ServerHandle::spawn(config(dir.path())).expect("spawn");
    let mut c = Client::connect(&h);
    let err = |c: &mut Client, code: u8, m: &dyn Fn() -> Vec<u8>| -> String {
        c.send(code, &m());
        match c.recv() {
            Some((0, body)) => String::from_utf8_lossy(
                &pb::RpbErrorResp::decode(body.as_slice())
                    .expect("err")
                    .errmsg,
            )
            .into_owned(),
            other => panic!("expected an error reply, got {other:?}"),
        }
    };
    let e = err(&mut c, code::AAE_FOLD_MERGE_ROOT_N_VAL_REQ, &|| {
        pb::RpbAaeFoldMergeRootNValReq { n_val: 0 }.encode_to_vec()
    });
    assert!(e.contains("n_val 0 out of range"), "{e}");
    let e = err(&mut c, code::AAE_FOLD_MERGE_ROOT_N_VAL_REQ, &|| {
        pb::RpbAaeFoldMergeRootNValReq { n_val: 9 }.encode_to_vec()
    });
    assert!(e.contains("n_val 9 out of range"), "{e}");
    let e = err(&mut c, code::AAE_FOLD_MERGE_TREES_RANGE_REQ, &|| {
        pb::RpbAaeFoldMergeTreesRangeReq {
            bucket: b"b".to_vec(),
            tree_size: TREE_SIZES.len() as i32 + 3,
            ..Default::default()
        }
        .encode_to_vec()
    });
    assert!(e.contains("no tree size 9"), "{e}");
    let e = err(&mut c, code::AAE_FOLD_FETCH_CLOCKS_RANGE_REQ, &|| {
        pb::RpbAaeFoldFetchClocksRangeReq {
            bucket: b"b".to_vec(),
            key_range: true,
            start_key: Some(b"z".to_vec()),
            end_key: Some(b"a".to_vec()),
            ..Default::default()
        }
        .encode_to_vec()
    });
    assert!(e.contains("bad key range"), "{e}");
    let e = err(&mut c, code::AAE_FOLD_FIND_TOMBS_REQ, &|| {
        pb::RpbAaeFoldFindTombsReq {
            bucket: b"b".to_vec(),
            modified_range: true,
            last_mod_start: Some(10),
            last_mod_end: Some(5),
            ..Default::default()
        }
        .encode_to_vec()
    });
    assert!(e.contains("bad modified range"), "{e}");
    let e = err(&mut c, code::AAE_FOLD_FETCH_CLOCKS_N_VAL_REQ, &|| {
        pb::RpbAaeFoldFetchClocksNValReq {
            n_val: 3,
            id_filter: (0..5000).collect(),
            ..Default::default()
        }
        .encode_to_vec()
    });
    assert!(e.contains("at most 4096"), "{e}");
    let e = err(&mut c, code::AAE_FOLD_MERGE_BRANCH_N_VAL_REQ, &|| {
        pb::RpbAaeFoldMergeBranchNValReq {
            n_val: 3,
            id_filter: vec![16],
        }
        .encode_to_vec()
    });
    assert!(e.contains("branch 16 out of range"), "{e}");
    let e = err(&mut c, code::AAE_FOLD_REPL_KEYS_REQ, &|| {
        pb::RpbAaeFoldReplKeysReq {
            bucket: b"b".to_vec(),
            queuename: b"q".to_vec(),
            ..Default::default()
        }
        .encode_to_vec()
    });
    assert!(e.contains("no replication queue named q"), "{e}");
    let e = err(&mut c, code::AAE_FOLD_ERASE_KEYS_REQ, &|| {
        pb::RpbAaeFoldEraseKeysReq {
            bucket: b"b".to_vec(),
            change_method: 7,
            ..Default::default()
        }
        .encode_to_vec()
    });
    assert!(e.contains("change_method"), "{e}");
    c.ping();

    let bad = |path: &str, want: &str| {
        let (status, body) = http(&h, path);
        assert_eq!(status, 400, "{path}: {body}");
        assert!(body.contains(want), "{path}: {body}");
    };
    bad("/cachedtrees/nvals/0/root", "n_val 0 out of range");
    bad("/cachedtrees/nvals/x/root", "n_val must be");
    bad("/cachedtrees/nvals/3/leaves", "unknown cached tree query");
    bad("/cachedtrees/nvals/3/branch", "filter query param required");
    bad("/rangetrees/buckets/b/trees/huge", "no tree size");
    bad("/rangetrees/buckets/b/forest", "unknown aae fold query");
    bad("/siblings/buckets/b/counts/-1", "sibling count must be");
    bad(
        &format!(
            "/tombs/buckets/b?filter={}",
            filter(serde_json::json!({"key_range": {"start": "z", "end": "a"}}))
        ),
        "bad key range",
    );
    bad(
        &format!(
            "/objectstats/buckets/b?filter={}",
            filter(serde_json::json!({"colour": "blue"}))
        ),
        "unknown filter field",
    );
    bad("/objectstats/buckets/b?filter=%%%", "not base64");
    bad("/tombs/b", "Bucket required");
    let (status, _) = http(&h, "/nosuchfold/buckets/b");
    assert_eq!(status, 404);
    drop(c);
    h.shutdown().expect("shutdown");
}

/// A typed bucket (type `tp`, n_val 2): range queries find its keys, list
/// answers carry the type, the n_val-2 cached root is its range tree, and
/// an unknown type is refused.
#[test]
fn typed_buckets_are_folded_with_their_type() {
    use basalt_server::api::pb::btypes::{code as bt, BasaltBucketTypeReq};
    let dir = tempfile::tempdir().expect("tempdir");
    let h = ServerHandle::spawn(config(dir.path())).expect("spawn");
    let mut admin = Client::admin(&h);
    admin.call(
        bt::ADMIN_TYPE_CREATE_REQ,
        &BasaltBucketTypeReq {
            r#type: b"tp".to_vec(),
            props: Some(pb::RpbBucketProps {
                n_val: Some(2),
                ..Default::default()
            }),
        },
        bt::ADMIN_TYPE_CREATE_RESP,
    );
    admin.call(
        bt::ADMIN_TYPE_ACTIVATE_REQ,
        &BasaltBucketTypeReq {
            r#type: b"tp".to_vec(),
            props: None,
        },
        bt::ADMIN_TYPE_ACTIVATE_RESP,
    );
    let mut c = Client::connect(&h);
    for i in 0..4 {
        let req = pb::RpbPutReq {
            r#type: Some(b"tp".to_vec()),
            bucket: b"tb".to_vec(),
            key: Some(format!("x{i}").into_bytes()),
            content: pb::RpbContent {
                value: b"abc".to_vec(),
                ..Default::default()
            },
            w: Some(2),
            ..Default::default()
        };
        c.call(code::PUT_REQ, &req, code::PUT_RESP);
    }
    put(&mut c, None, "plain", "p", b"v", None);
    let b = call(
        &mut c,
        code::AAE_FOLD_FETCH_CLOCKS_RANGE_REQ,
        &pb::RpbAaeFoldFetchClocksRangeReq {
            r#type: Some(b"tp".to_vec()),
            bucket: b"tb".to_vec(),
            ..Default::default()
        },
        code::AAE_FOLD_KEY_VALUE_RESP,
    );
    let kv = pb::RpbAaeFoldKeyValueResp::decode(b.as_slice()).expect("kv");
    assert_eq!(kv.keys_value.len(), 4);
    assert!(kv
        .keys_value
        .iter()
        .all(|k| k.r#type.as_deref() == Some(b"tp".as_slice()) && k.bucket == b"tb"));
    let j = http_json(&h, "/objectstats/types/tp/buckets/tb");
    assert_eq!(j["total_count"], 4);
    assert_eq!(j["total_size"], 12);
    let j = http_json(&h, "/aaebucketlist?nval=2");
    let listed: BTreeSet<String> = j["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|b| {
            format!(
                "{}/{}",
                b["bucket-type"].as_str().unwrap_or("default"),
                b["bucket"].as_str().unwrap_or("")
            )
        })
        .collect();
    assert_eq!(
        listed,
        BTreeSet::from(["tp/tb".to_string(), "default/plain".to_string()])
    );
    build_trees(&h);
    let root = root_pb(&mut c, 2).expect("root");
    let b = call(
        &mut c,
        code::AAE_FOLD_MERGE_TREES_RANGE_REQ,
        &pb::RpbAaeFoldMergeTreesRangeReq {
            r#type: Some(b"tp".to_vec()),
            bucket: b"tb".to_vec(),
            tree_size: 0,
            use_prehash: true,
            ..Default::default()
        },
        code::AAE_FOLD_TREE_RESP,
    );
    let t = pb::RpbAaeFoldTreeResp::decode(b.as_slice()).expect("tree");
    assert_eq!(t.level_one.unwrap_or_default(), root);
    assert!(root.iter().any(|b| *b != 0));
    let e = c
        .try_call(
            code::AAE_FOLD_OBJECT_STATS_REQ,
            &pb::RpbAaeFoldObjectStatsReq {
                r#type: Some(b"nosuch".to_vec()),
                bucket: b"tb".to_vec(),
                ..Default::default()
            },
        )
        .expect_err("unknown type");
    assert!(e.contains("nosuch"), "{e}");
    drop((c, admin));
    h.shutdown().expect("shutdown");
}
