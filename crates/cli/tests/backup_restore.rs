//! Process test of `basalt admin backup` and `basalt admin restore`: a
//! three-node cluster gets keys with siblings (a bucket type with
//! allow_mult) and 2i terms, counters (a data type), bucket props and a
//! user; it is backed up while a writer keeps writing; the backup is
//! refused by a cluster with another ring size and, once damaged, by the
//! right one, both before anything is written; then it is restored onto a
//! two-node cluster (the same ring size) and every key, sibling (values,
//! indexes and vector clock) and 2i term compared with the source.

#![allow(clippy::unwrap_used)]

mod common;

use basalt_server::pb::{self, code};
use common::procs::{create_active_type, form_cluster, test_dir, Client, NodeProc};
use common::{admin, flip_bytes};
use prost::Message;
use serde_json::Value;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

const KEYS: usize = 40;
const TERMS: usize = 5;

/// (value, sorted index pairs) of each sibling, sorted; and the vclock.
type FullState = (Vec<u8>, Vec<(Vec<u8>, Vec<(Vec<u8>, Vec<u8>)>)>);

fn put(c: &mut Client, btype: Option<&str>, bucket: &str, key: &str, value: &str, i: usize) {
    let req = pb::RpbPutReq {
        bucket: bucket.into(),
        key: Some(key.into()),
        r#type: btype.map(Into::into),
        content: pb::RpbContent {
            value: value.into(),
            indexes: vec![
                pb::RpbPair {
                    key: b"term_bin".to_vec(),
                    value: Some(format!("t{}", i % TERMS).into_bytes()),
                },
                pb::RpbPair {
                    key: b"n_int".to_vec(),
                    value: Some(i.to_string().into_bytes()),
                },
            ],
            ..Default::default()
        },
        w: Some(3),
        ..Default::default()
    };
    c.call(code::PUT_REQ, &req).unwrap();
}

/// Every sibling of a key with its indexes, and its clock (r = 3).
fn state(c: &mut Client, btype: &str, bucket: &str, key: &[u8]) -> Option<FullState> {
    let req = pb::RpbGetReq {
        bucket: bucket.into(),
        key: key.to_vec(),
        r#type: Some(btype.into()),
        r: Some(3),
        ..Default::default()
    };
    let (_, body) = c.call(code::GET_REQ, &req).unwrap();
    let resp = pb::RpbGetResp::decode(body.as_slice()).unwrap();
    if resp.content.is_empty() {
        return None;
    }
    let mut sibs: Vec<_> = resp
        .content
        .into_iter()
        .map(|s| {
            let mut ix: Vec<_> = s
                .indexes
                .into_iter()
                .map(|p| (p.key, p.value.unwrap_or_default()))
                .collect();
            ix.sort();
            (s.value, ix)
        })
        .collect();
    sibs.sort();
    Some((resp.vclock.unwrap_or_default(), sibs))
}

/// The keys of a 2i equality or range query, sorted.
fn query(c: &mut Client, btype: &str, index: &str, lo: &str, hi: Option<&str>) -> Vec<Vec<u8>> {
    let req = pb::RpbIndexReq {
        bucket: b"b".to_vec(),
        r#type: Some(btype.into()),
        index: index.into(),
        qtype: i32::from(hi.is_some()),
        key: hi.is_none().then(|| lo.into()),
        range_min: hi.map(|_| lo.into()),
        range_max: hi.map(Into::into),
        ..Default::default()
    };
    let (_, body) = c.call(code::INDEX_REQ, &req).unwrap();
    let mut keys = pb::RpbIndexResp::decode(body.as_slice()).unwrap().keys;
    keys.sort();
    keys
}

fn counter(c: &mut Client, key: &str, incr: Option<i64>) -> Option<i64> {
    if let Some(n) = incr {
        let req = pb::DtUpdateReq {
            bucket: b"c".to_vec(),
            key: Some(key.into()),
            r#type: b"counters".to_vec(),
            op: pb::DtOp {
                counter_op: Some(pb::CounterOp { increment: Some(n) }),
                ..Default::default()
            },
            ..Default::default()
        };
        c.call(code::DT_UPDATE_REQ, &req).unwrap();
        return None;
    }
    let req = pb::DtFetchReq {
        bucket: b"c".to_vec(),
        key: key.into(),
        r#type: b"counters".to_vec(),
        ..Default::default()
    };
    let (_, body) = c.call(code::DT_FETCH_REQ, &req).unwrap();
    pb::DtFetchResp::decode(body.as_slice())
        .unwrap()
        .value
        .and_then(|v| v.counter_value)
}

fn notfound_ok_of(c: &mut Client, bucket: &str) -> Option<bool> {
    let req = pb::RpbGetBucketReq {
        bucket: bucket.into(),
        ..Default::default()
    };
    let (_, body) = c.call(code::GET_BUCKET_REQ, &req).unwrap();
    pb::RpbGetBucketResp::decode(body.as_slice())
        .unwrap()
        .props
        .notfound_ok
}

fn users(node: &str) -> Value {
    let (ok, out) = admin(node, &["--json", "security", "print-users"]);
    assert!(ok, "{out}");
    serde_json::from_str(&out).unwrap()
}

/// Nothing in the cluster: no object on any member, no bucket type.
fn assert_untouched(nodes: &[&NodeProc]) {
    for n in nodes {
        let mut c = Client::connect(&n.pb);
        let (_, body) = c
            .call(code::LIST_BUCKETS_REQ, &pb::RpbListBucketsReq::default())
            .unwrap();
        let b = pb::RpbListBucketsResp::decode(body.as_slice()).unwrap();
        assert!(b.buckets.is_empty(), "{}: {:?}", n.name, b.buckets);
        let (_, out) = admin(&n.cluster, &["bucket-type", "list"]);
        assert!(!out.contains("sib"), "{}: {out}", n.name);
    }
}

fn cluster(root: &std::path::Path, first: usize, n: usize, ring: u32) -> Vec<NodeProc> {
    let mut nodes: Vec<NodeProc> = (first..first + n).map(|i| NodeProc::new(root, i)).collect();
    for node in &mut nodes {
        node.start_fresh(ring);
    }
    if n > 1 {
        form_cluster(&nodes);
    }
    nodes
}

#[test]
fn backup_under_load_then_restore_onto_fewer_nodes() {
    let (root, _keep) = test_dir();
    let src = cluster(&root, 1, 3, 16);
    let dst = cluster(&root, 4, 2, 16);
    let other = cluster(&root, 6, 1, 8);
    create_active_type(&src, "sib", r#"{"props":{"allow_mult":true}}"#);
    create_active_type(&src, "counters", r#"{"props":{"datatype":"counter"}}"#);
    let (ok, out) = admin(
        &src[0].cluster,
        &["security", "add-user", "alice", "password=s3cret"],
    );
    assert!(ok, "{out}");

    let mut c = Client::connect(&src[0].pb);
    let mut c2 = Client::connect(&src[1].pb);
    for i in 0..KEYS {
        let k = format!("k{i}");
        put(&mut c, Some("sib"), "b", &k, &format!("v{i}"), i);
        if i % 4 == 0 {
            // A second write without the clock: a sibling.
            put(&mut c2, Some("sib"), "b", &k, &format!("w{i}"), i + 1);
        }
    }
    for i in 0..10 {
        counter(&mut c, &format!("n{i}"), Some(i as i64 + 1));
        counter(&mut c2, &format!("n{i}"), Some(-1));
    }
    let req = pb::RpbSetBucketReq {
        bucket: b"plain".to_vec(),
        props: pb::RpbBucketProps {
            notfound_ok: Some(false),
            ..Default::default()
        },
        ..Default::default()
    };
    c.call(code::SET_BUCKET_REQ, &req).unwrap();

    // A writer keeps writing to bucket "load" while the backup runs.
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(0usize));
    let writer = {
        let (stop, acked, pb_addr) = (stop.clone(), acked.clone(), src[2].pb.clone());
        std::thread::spawn(move || {
            let mut c = Client::connect(&pb_addr);
            let mut i = 0usize;
            while !stop.load(Ordering::Relaxed) {
                c.put_in("load", &format!("l{i}"), &format!("x{i}"))
                    .unwrap();
                i += 1;
                *acked.lock().unwrap() = i;
            }
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(300));
    let before = *acked.lock().unwrap();
    let dir = root.join("backup");
    let (ok, out) = admin(
        &src[0].cluster,
        &[
            "--json",
            "backup",
            dir.to_str().unwrap(),
            "--max-mbps",
            "20",
        ],
    );
    stop.store(true, Ordering::Relaxed);
    writer.join().unwrap();
    assert!(ok, "backup: {out}");
    let summary: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(summary["partitions"], 16, "{summary}");
    // Each of the KEYS + 10 counters + `before` load keys is backed up
    // once per replica (n_val 3).
    let least = 3 * (KEYS + 10 + before) as u64;
    assert!(
        summary["objects"].as_u64().unwrap() >= least,
        "{summary} < {least}"
    );
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["manifest"]["ring_size"], 16);
    let sec = std::fs::read_to_string(dir.join("security.json")).unwrap();
    assert!(sec.contains("alice"), "the security state is in the backup");

    // Another ring size: refused before anything is written.
    let (ok, out) = admin(&other[0].cluster, &["restore", dir.to_str().unwrap()]);
    assert!(!ok && out.contains("ring size"), "{out}");
    assert_untouched(&[&other[0]]);

    // A damaged copy: found before anything is written.
    let bad = root.join("bad");
    std::fs::create_dir(&bad).unwrap();
    for e in std::fs::read_dir(&dir).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), bad.join(e.file_name())).unwrap();
    }
    let biggest = std::fs::read_dir(&bad)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "bkp"))
        .max_by_key(|p| std::fs::metadata(p).unwrap().len())
        .unwrap();
    let len = std::fs::metadata(&biggest).unwrap().len();
    flip_bytes(&biggest, &[len / 2]);
    let (ok, out) = admin(&dst[0].cluster, &["restore", bad.to_str().unwrap()]);
    assert!(!ok && out.contains("damaged"), "{out}");
    assert_untouched(&[&dst[0], &dst[1]]);

    // The restore, onto two nodes.
    let (ok, out) = admin(
        &dst[1].cluster,
        &["--json", "restore", dir.to_str().unwrap()],
    );
    assert!(ok, "restore: {out}");
    let restored: Value = serde_json::from_str(out.trim()).unwrap();
    assert_eq!(restored["objects"], summary["objects"], "{restored}");
    assert_eq!(restored["security_restored"], true, "{restored}");
    // A second restore without --force: the cluster holds data now.
    let (ok, out) = admin(&dst[0].cluster, &["restore", dir.to_str().unwrap()]);
    assert!(!ok && out.contains("--force"), "{out}");

    // Every key, sibling, clock and 2i term as in the source.
    let mut s = Client::connect(&src[0].pb);
    for (i, d) in dst.iter().enumerate() {
        let mut t = Client::connect(&d.pb);
        for k in 0..KEYS {
            let key = format!("k{k}");
            let want = state(&mut s, "sib", "b", key.as_bytes());
            assert!(want.is_some(), "{key} on the source");
            if k % 4 == 0 {
                assert_eq!(want.as_ref().unwrap().1.len(), 2, "{key} has siblings");
            }
            assert_eq!(
                state(&mut t, "sib", "b", key.as_bytes()),
                want,
                "{key} on dst {i}"
            );
        }
        for term in 0..=TERMS {
            let q = format!("t{term}");
            let want = query(&mut s, "sib", "term_bin", &q, None);
            assert_eq!(query(&mut t, "sib", "term_bin", &q, None), want, "term {q}");
        }
        let want = query(&mut s, "sib", "n_int", "0", Some("1000"));
        assert_eq!(
            want.len(),
            KEYS + KEYS / 4,
            "a sibling's own term counts too"
        );
        assert_eq!(query(&mut t, "sib", "n_int", "0", Some("1000")), want);
        for n in 0..10 {
            let key = format!("n{n}");
            assert_eq!(counter(&mut t, &key, None), Some(n as i64), "counter {key}");
        }
        assert_eq!(notfound_ok_of(&mut t, "plain"), Some(false));
        // The load: what was acknowledged before the backup began is there,
        // and each key holds what the writer wrote.
        let loaded = t.list_keys("load").unwrap();
        assert!(loaded.len() >= before, "{} < {before}", loaded.len());
        for i in 0..before {
            let v = state_plain(&mut t, &format!("l{i}"));
            assert_eq!(v, Some(format!("x{i}").into_bytes()), "l{i}");
        }
    }
    assert_eq!(users(&dst[0].cluster), users(&src[0].cluster));
}

fn state_plain(c: &mut Client, key: &str) -> Option<Vec<u8>> {
    let req = pb::RpbGetReq {
        bucket: b"load".to_vec(),
        key: key.into(),
        ..Default::default()
    };
    let (_, body) = c.call(code::GET_REQ, &req).unwrap();
    let resp = pb::RpbGetResp::decode(body.as_slice()).unwrap();
    resp.content.first().map(|c| c.value.clone())
}
