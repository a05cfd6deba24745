//! Coverage plans over PB (`RpbCoverageReq` 70 → 71) and 2i on a plan's
//! entries (`cover_context`), with `return_body` (`RpbIndexBodyResp` 42):
//! Riak 2.x's parallel full-bucket read, as the Java client's
//! `FullBucketRead` does it; CS bucket folds (`RpbCSBucketReq` 40) on a
//! plan's entries. One in-process node (ring 8, n_val 3).

mod common;

use basalt_server::pb::{self, code};
use common::{spawn_node, Client};
use prost::Message;
use std::collections::BTreeSet;

const KEYS: usize = 150;

fn fill(c: &mut Client, bucket: &str) {
    for i in 0..KEYS {
        let req = pb::RpbPutReq {
            bucket: bucket.into(),
            key: Some(format!("k{i:03}").into_bytes()),
            content: pb::RpbContent {
                value: format!("v{i}").into_bytes(),
                content_type: Some(b"text/plain".to_vec()),
                indexes: vec![pb::RpbPair {
                    key: b"n_int".to_vec(),
                    value: Some((i as i64 - 50).to_string().into_bytes()),
                }],
                ..Default::default()
            },
            ..Default::default()
        };
        c.call(code::PUT_REQ, &req, code::PUT_RESP);
    }
}

fn plan(c: &mut Client, bucket: &str, min_partitions: Option<u32>) -> Vec<pb::RpbCoverageEntry> {
    let req = pb::RpbCoverageReq {
        bucket: bucket.into(),
        min_partitions,
        ..Default::default()
    };
    let b = c.call(code::COVERAGE_REQ, &req, code::COVERAGE_RESP);
    pb::RpbCoverageResp::decode(b.as_slice())
        .expect("coverage resp")
        .entries
}

fn bucket_query(bucket: &str, cover: &[u8]) -> pb::RpbIndexReq {
    pb::RpbIndexReq {
        bucket: bucket.into(),
        index: b"$bucket".to_vec(),
        qtype: pb::INDEX_EQ,
        key: Some(bucket.into()),
        cover_context: Some(cover.to_vec()),
        ..Default::default()
    }
}

/// All keys of one entry, paged by `page` (keys answers).
fn entry_keys(c: &mut Client, q: &pb::RpbIndexReq, page: u32) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut cont = None;
    for _ in 0..1000 {
        let req = pb::RpbIndexReq {
            max_results: Some(page),
            continuation: cont.clone(),
            ..q.clone()
        };
        let b = c.call(code::INDEX_REQ, &req, code::INDEX_RESP);
        let r = pb::RpbIndexResp::decode(b.as_slice()).expect("index resp");
        assert!(r.keys.len() <= page as usize);
        out.extend(r.keys);
        cont = r.continuation;
        if cont.is_none() {
            return out;
        }
    }
    panic!("paging did not end");
}

#[test]
fn a_plan_covers_every_key_once_and_entries_page() {
    let (h, _d) = spawn_node(false, |_| {});
    let mut c = Client::connect(&h);
    fill(&mut c, "cov");
    let entries = plan(&mut c, "cov", None);
    // Ring 8, n_val 3: three covering vnodes (3 + 3 + 2 first primaries).
    assert_eq!(entries.len(), 3, "{entries:?}");
    let addr = h.addr();
    let mut seen = Vec::new();
    for e in &entries {
        assert_eq!(e.ip, addr.ip().to_string().into_bytes());
        assert_eq!(e.port, u32::from(addr.port()));
        let desc = String::from_utf8(e.keyspace_desc.clone().expect("desc")).expect("utf8");
        assert!(desc.contains(" : "), "{desc}");
        let q = bucket_query("cov", &e.cover_context);
        let keys = entry_keys(&mut c, &q, 7);
        let unpaged =
            pb::RpbIndexResp::decode(c.call(code::INDEX_REQ, &q, code::INDEX_RESP).as_slice())
                .expect("d")
                .keys;
        assert_eq!(keys, unpaged, "paged = unpaged for {desc}");
        seen.extend(keys);
    }
    let unique: BTreeSet<Vec<u8>> = seen.iter().cloned().collect();
    assert_eq!(seen.len(), KEYS, "no key twice");
    assert_eq!(unique.len(), KEYS, "every key");
    // A range query on an entry: its share of the range, numerically.
    let mut in_range = 0;
    for e in &entries {
        let q = pb::RpbIndexReq {
            bucket: b"cov".to_vec(),
            index: b"n_int".to_vec(),
            qtype: pb::INDEX_RANGE,
            range_min: Some(b"-10".to_vec()),
            range_max: Some(b"9".to_vec()),
            return_terms: Some(true),
            cover_context: Some(e.cover_context.clone()),
            ..Default::default()
        };
        let r = pb::RpbIndexResp::decode(c.call(code::INDEX_REQ, &q, code::INDEX_RESP).as_slice())
            .expect("d");
        let terms: Vec<i64> = r
            .results
            .iter()
            .map(|p| String::from_utf8_lossy(&p.key).parse().expect("int"))
            .collect();
        assert!(terms.windows(2).all(|w| w[0] <= w[1]), "{terms:?}");
        in_range += terms.len();
    }
    assert_eq!(in_range, 20);
    // Any min_partitions (0 included, as Riak's parallel plan): one entry
    // per first primary, every key once.
    for m in [0, 1, 5, 8, 100] {
        let split = plan(&mut c, "cov", Some(m));
        assert_eq!(split.len(), 8, "min_partitions {m}");
        let mut n = 0;
        for e in &split {
            n += entry_keys(&mut c, &bucket_query("cov", &e.cover_context), 1000).len();
        }
        assert_eq!(n, KEYS);
    }
}

#[test]
fn return_body_answers_objects_and_is_for_system_indexes_only() {
    let (h, _d) = spawn_node(false, |_| {});
    let mut c = Client::connect(&h);
    fill(&mut c, "rb");
    let mut values = BTreeSet::new();
    for e in plan(&mut c, "rb", None) {
        let q = pb::RpbIndexReq {
            return_body: Some(true),
            ..bucket_query("rb", &e.cover_context)
        };
        let b = c.call(code::INDEX_REQ, &q, code::INDEX_BODY_RESP);
        let r = pb::RpbIndexBodyResp::decode(b.as_slice()).expect("body resp");
        for o in r.objects {
            assert!(o.object.vclock.is_some());
            let i: usize = String::from_utf8_lossy(&o.key[1..]).parse().expect("key");
            assert_eq!(o.object.content[0].value, format!("v{i}").into_bytes());
            values.insert(o.key);
        }
        // Streamed: frames of objects, then done.
        c.send(
            code::INDEX_REQ,
            &pb::RpbIndexReq {
                stream: Some(true),
                max_results: Some(5),
                ..q.clone()
            }
            .encode_to_vec(),
        );
        let mut got = 0;
        loop {
            let (rc, body) = c.recv().expect("frame");
            assert_eq!(rc, code::INDEX_BODY_RESP);
            let r = pb::RpbIndexBodyResp::decode(body.as_slice()).expect("d");
            got += r.objects.len();
            if r.done == Some(true) {
                assert!(r.continuation.is_some(), "a full page continues");
                break;
            }
        }
        assert_eq!(got, 5);
    }
    assert_eq!(values.len(), KEYS);
    // Without a cover context too ($key range).
    let q = pb::RpbIndexReq {
        bucket: b"rb".to_vec(),
        index: b"$key".to_vec(),
        qtype: pb::INDEX_RANGE,
        range_min: Some(b"k010".to_vec()),
        range_max: Some(b"k019".to_vec()),
        return_body: Some(true),
        ..Default::default()
    };
    let b = c.call(code::INDEX_REQ, &q, code::INDEX_BODY_RESP);
    let r = pb::RpbIndexBodyResp::decode(b.as_slice()).expect("d");
    let keys: Vec<&[u8]> = r.objects.iter().map(|o| o.key.as_slice()).collect();
    assert_eq!(keys.len(), 10);
    assert_eq!(keys[0], b"k010");
    // Not on a term index.
    let q = pb::RpbIndexReq {
        index: b"n_int".to_vec(),
        qtype: pb::INDEX_EQ,
        key: Some(b"1".to_vec()),
        ..q
    };
    let e = c.try_call(code::INDEX_REQ, &q).expect_err("refused");
    assert!(e.contains("return_body") && e.contains("$bucket"), "{e}");
}

#[test]
fn bad_or_unplaceable_contexts_are_errors() {
    let (h, _d) = spawn_node(false, |_| {});
    let mut c = Client::connect(&h);
    fill(&mut c, "bad");
    let entries = plan(&mut c, "bad", None);
    let mut ctx = entries[0].cover_context.clone();
    ctx[6] ^= 1;
    let e = c
        .try_call(code::INDEX_REQ, &bucket_query("bad", &ctx))
        .expect_err("damaged");
    assert!(e.contains("cover_context"), "{e}");
    // Replacing an entry on a one-node cluster: Riak leaves out the
    // replaced entry's node, so no primary is left, in Riak as here (the
    // Java client's ITestCoveragePlan asks as below and "needs cluster").
    for (min_partitions, e) in [
        (None, &entries[0]),
        (Some(5), &plan(&mut c, "bad", Some(5))[0]),
    ] {
        let req = pb::RpbCoverageReq {
            bucket: b"bad".to_vec(),
            min_partitions,
            replace_cover: Some(e.cover_context.clone()),
            unavailable_cover: vec![e.cover_context.clone()],
            ..Default::default()
        };
        let e = c.try_call(code::COVERAGE_REQ, &req).expect_err("nowhere");
        assert_eq!(e, "primary_partition_unavailable");
    }
    let req = pb::RpbCoverageReq {
        bucket: b"bad".to_vec(),
        replace_cover: Some(b"junk".to_vec()),
        ..Default::default()
    };
    assert!(c.try_call(code::COVERAGE_REQ, &req).is_err());
}

/// Every object of one plan entry by `RpbCSBucketReq` with its
/// `cover_context`, paged by `page`: (keys in answer order, pages).
fn cs_entry_keys(c: &mut Client, bucket: &str, cover: &[u8], page: u32) -> (Vec<Vec<u8>>, usize) {
    let mut out = Vec::new();
    let mut cont = None;
    for pages in 1..1000 {
        let req = pb::RpbCsBucketReq {
            bucket: bucket.into(),
            start_key: Vec::new(),
            max_results: Some(page),
            continuation: cont.clone(),
            cover_context: Some(cover.to_vec()),
            ..Default::default()
        };
        c.send(code::CS_BUCKET_REQ, &req.encode_to_vec());
        let mut got = 0;
        loop {
            let (rc, body) = c.recv().expect("frame");
            assert_eq!(
                rc,
                code::CS_BUCKET_RESP,
                "{}",
                String::from_utf8_lossy(&body)
            );
            let r = pb::RpbCsBucketResp::decode(body.as_slice()).expect("cs resp");
            for o in r.objects {
                let i: usize = String::from_utf8_lossy(&o.key[1..]).parse().expect("key");
                assert_eq!(o.object.content[0].value, format!("v{i}").into_bytes());
                out.push(o.key);
                got += 1;
            }
            if r.done == Some(true) {
                cont = r.continuation;
                break;
            }
        }
        assert!(got <= page as usize, "{got} > {page}");
        if cont.is_none() {
            return (out, pages);
        }
    }
    panic!("paging did not end");
}

/// `RpbCSBucketReq` with a plan entry's `cover_context` (Riak's parallel
/// CS fold): each entry folds its share, in key order, paged; the entries
/// together give every key exactly once; a damaged context is an error.
#[test]
fn cs_bucket_folds_run_on_plan_entries() {
    let (h, _d) = spawn_node(false, |_| {});
    let mut c = Client::connect(&h);
    fill(&mut c, "csc");
    let entries = plan(&mut c, "csc", None);
    assert_eq!(entries.len(), 3, "{entries:?}");
    let mut seen = Vec::new();
    for e in &entries {
        let (keys, pages) = cs_entry_keys(&mut c, "csc", &e.cover_context, 10);
        assert!(!keys.is_empty() && keys.len() < KEYS, "{}", keys.len());
        assert!(pages > 1, "{} keys in one page of 10", keys.len());
        assert!(keys.windows(2).all(|w| w[0] < w[1]), "key order");
        // Unpaged, the same keys; and the same as the entry's 2i share.
        let (unpaged, _) = cs_entry_keys(&mut c, "csc", &e.cover_context, 1000);
        assert_eq!(keys, unpaged);
        let mut by_2i = entry_keys(&mut c, &bucket_query("csc", &e.cover_context), 1000);
        by_2i.sort();
        assert_eq!(keys, by_2i);
        seen.extend(keys);
    }
    let unique: BTreeSet<Vec<u8>> = seen.iter().cloned().collect();
    assert_eq!(seen.len(), KEYS, "no key twice");
    assert_eq!(unique.len(), KEYS, "every key");
    // One entry per first primary: still every key once.
    let mut n = 0;
    for e in plan(&mut c, "csc", Some(8)) {
        n += cs_entry_keys(&mut c, "csc", &e.cover_context, 1000).0.len();
    }
    assert_eq!(n, KEYS);
    let mut ctx = entries[0].cover_context.clone();
    ctx[6] ^= 1;
    let req = pb::RpbCsBucketReq {
        bucket: b"csc".to_vec(),
        cover_context: Some(ctx),
        ..Default::default()
    };
    let e = c.try_call(code::CS_BUCKET_REQ, &req).expect_err("damaged");
    assert!(e.contains("cover_context"), "{e}");
}
