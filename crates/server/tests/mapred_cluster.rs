//! MapReduce on a cluster of three in-process nodes (memory backend, ring
//! of 16, n_val 3): joined and committed through the admin requests, the
//! ownership transfers awaited; objects written through one node, jobs
//! sent to another; whole-bucket map phases run on the node that
//! coordinated no job (its map-round counter); listed keys are mapped on
//! nodes that hold them, each once (the nodes' mapped-key counters); the
//! results equal a
//! coverage fold computed directly,
//! and again once a node is down (n_val 3 leaves two replicas of every
//! key). The job is retried until the survivors have marked the stopped
//! node down (its vnodes no longer in the coverage plan); the results must
//! then be exactly the fold's.

mod common;

use basalt_server::kv::CsFold;
use basalt_server::pb::{self, code};
use basalt_server::ServerHandle;
use common::{runtime, Client};
use prost::Message;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const KEYS: u32 = 90;

fn start(name: &str) -> (ServerHandle, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = common::cluster_node_config(name, dir.path());
    c.mapred.map_js_vm_count = 2;
    c.mapred.reduce_js_vm_count = 1;
    (ServerHandle::spawn(c).expect("spawn"), dir)
}

fn admin(rt: &tokio::runtime::Runtime, h: &ServerHandle, line: &str) -> String {
    common::admin_line(rt, h, line)
}

/// Waits (≤ 60 s) until every node reports no pending transfer and sees
/// three members.
fn settle(rt: &tokio::runtime::Runtime, nodes: &[&ServerHandle]) {
    common::settle_cluster(rt, nodes, 3);
}

fn job_over_pb(h: &ServerHandle, job: &Value) -> Result<BTreeMap<u32, Vec<Value>>, String> {
    let mut c = Client::connect(h);
    let req = pb::RpbMapRedReq {
        request: job.to_string().into_bytes(),
        content_type: b"application/json".to_vec(),
    };
    c.send(code::MAP_RED_REQ, &req.encode_to_vec());
    let mut out: BTreeMap<u32, Vec<Value>> = BTreeMap::new();
    loop {
        let (rc, body) = c.recv().expect("frame");
        if rc == code::ERROR_RESP {
            let e = pb::RpbErrorResp::decode(body.as_slice()).expect("error");
            return Err(String::from_utf8_lossy(&e.errmsg).into_owned());
        }
        let r = pb::RpbMapRedResp::decode(body.as_slice()).expect("resp");
        if let (Some(p), Some(data)) = (r.phase, r.response) {
            let v: Vec<Value> = serde_json::from_slice(&data).expect("json");
            out.entry(p).or_default().extend(v);
        }
        if r.done == Some(true) {
            return Ok(out);
        }
    }
}

/// The jobs and what the fold says they must give.
fn jobs(direct: &BTreeMap<String, i64>) -> Vec<(Value, BTreeMap<u32, Vec<Value>>)> {
    let total: i64 = direct.values().sum();
    let mut sorted: Vec<i64> = direct.values().copied().collect();
    sorted.sort_unstable();
    let range: i64 = direct.values().filter(|n| (20..=39).contains(*n)).sum();
    vec![
        (
            json!({"inputs": "mrc", "query": [
                {"map": {"language": "javascript", "source": "function(v) { return [JSON.parse(v.values[0].data).n]; }"}},
                {"reduce": {"language": "javascript", "name": "Riak.reduceSum"}}]}),
            BTreeMap::from([(1, vec![json!(total)])]),
        ),
        (
            json!({"inputs": "mrc", "query": [
                {"reduce": {"language": "erlang", "module": "riak_kv_mapreduce", "function": "reduce_count_inputs"}}]}),
            BTreeMap::from([(0, vec![json!(direct.len())])]),
        ),
        (
            json!({"inputs": "mrc", "query": [
                {"map": {"language": "javascript", "source": "function(v) { return [JSON.parse(v.values[0].data).n]; }"}},
                {"reduce": {"language": "javascript", "name": "Riak.reduceNumericSort"}}]}),
            BTreeMap::from([(1, sorted.into_iter().map(Value::from).collect())]),
        ),
        (
            json!({"inputs": {"bucket": "mrc", "index": "n_int", "start": 20, "end": 39}, "query": [
                {"map": {"language": "javascript", "name": "Riak.mapValuesJson"}},
                {"reduce": {"language": "javascript", "source":
                    "function(vs) { var s = 0; vs.forEach(function(v) { s += (typeof v === 'number') ? v : v.n; }); return [s]; }"}}]}),
            BTreeMap::from([(1, vec![json!(range)])]),
        ),
        (
            listed_job(direct),
            BTreeMap::from([(1, vec![json!(total)])]),
        ),
    ]
}

/// Every key listed as an input, mapped and summed.
fn listed_job(direct: &BTreeMap<String, i64>) -> Value {
    let listed: Vec<Value> = direct.keys().map(|k| json!(["mrc", k])).collect();
    json!({"inputs": listed, "query": [
        {"map": {"language": "javascript", "name": "Riak.mapValuesJson"}},
        {"reduce": {"language": "javascript", "source":
            "function(vs) { var s = 0; vs.forEach(function(v) { s += (typeof v === 'number') ? v : v.n; }); return [s]; }"}}]})
}

#[test]
fn results_equal_a_direct_fold_on_three_nodes_and_with_one_down() {
    let rt = runtime();
    let (n1, _d1) = start("n1");
    let (n2, _d2) = start("n2");
    let (n3, _d3) = start("n3");
    let target = n1.cluster_addr().to_string();
    admin(&rt, &n2, &format!("join {target}"));
    admin(&rt, &n3, &format!("join {target}"));
    admin(&rt, &n1, "commit");
    settle(&rt, &[&n1, &n2, &n3]);

    let mut c = Client::connect(&n1);
    for i in 0..KEYS {
        let req = pb::RpbPutReq {
            bucket: b"mrc".to_vec(),
            key: Some(format!("k{i:03}").into_bytes()),
            w: Some(3),
            content: pb::RpbContent {
                value: json!({"n": i}).to_string().into_bytes(),
                content_type: Some(b"application/json".to_vec()),
                indexes: vec![pb::RpbPair {
                    key: b"n_int".to_vec(),
                    value: Some(i.to_string().into_bytes()),
                }],
                ..Default::default()
            },
            ..Default::default()
        };
        c.call(code::PUT_REQ, &req, code::PUT_RESP);
    }
    let mut direct = BTreeMap::new();
    let q = CsFold {
        bucket: b"mrc".to_vec(),
        start_incl: true,
        ..Default::default()
    };
    rt.block_on(n1.node().cs_bucket_fold(&q, |batch| {
        for (k, o) in batch {
            let v: Value = serde_json::from_slice(&o.contents[0].value).expect("json");
            direct.insert(
                String::from_utf8(k).expect("key"),
                v["n"].as_i64().expect("n"),
            );
        }
        std::future::ready(true)
    }))
    .expect("fold");
    assert_eq!(direct.len(), KEYS as usize);

    // Commit hooks in a cluster: props with hooks travel in the vnode
    // requests (postcard) and the gossip; a w = 3 PUT through n2 reaches
    // every replica, an invalid one is refused on every node.
    let hooked = pb::RpbSetBucketReq {
        bucket: b"hk".to_vec(),
        r#type: None,
        props: pb::RpbBucketProps {
            precommit: vec![pb::RpbCommitHook {
                modfun: Some(pb::RpbModFun {
                    module: b"basalt_hooks".to_vec(),
                    function: b"validate_json".to_vec(),
                }),
                name: None,
            }],
            has_precommit: Some(true),
            ..Default::default()
        },
    };
    c.call(code::SET_BUCKET_REQ, &hooked, code::SET_BUCKET_RESP);
    let t = Instant::now();
    while [&n2, &n3]
        .iter()
        .any(|h| h.node().props().get(b"hk").precommit.is_empty())
    {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "props did not reach n2 and n3"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    for (h, ok) in [(&n2, true), (&n3, true), (&n2, false), (&n3, false)] {
        let mut hc = Client::connect(h);
        let value: &[u8] = if ok { b"{\"ok\":1}" } else { b"{nope" };
        let req = pb::RpbPutReq {
            bucket: b"hk".to_vec(),
            key: Some(format!("k{}", h.addr().port()).into_bytes()),
            w: Some(3),
            content: pb::RpbContent {
                value: value.to_vec(),
                ..Default::default()
            },
            ..Default::default()
        };
        let res = hc.try_call(code::PUT_REQ, &req);
        assert_eq!(res.is_ok(), ok, "{res:?}");
        if !ok {
            assert!(res.is_err_and(|e| e.starts_with("Invalid JSON")));
        }
    }

    // Every job, sent to the nodes that did not take the writes.
    let rounds = |h: &ServerHandle| {
        let s = h.node().stats();
        s.mapred_local_rounds
            .load(std::sync::atomic::Ordering::Relaxed)
    };
    assert_eq!(rounds(&n1), 0);
    for (job, want) in jobs(&direct) {
        for h in [&n2, &n3] {
            assert_eq!(job_over_pb(h, &job).as_ref(), Ok(&want), "{job}");
        }
    }
    // n1 coordinated no job, yet ran map rounds on its vnodes: the
    // whole-bucket map phases of n2's and n3's jobs ran where the data is.
    assert!(rounds(&n1) > 0, "no map round ran on n1");
    // Listed keys are mapped on a vnode that holds them, each key once:
    // the nodes' mapped-key counters grow by exactly the number listed.
    let local_keys = |hs: [&ServerHandle; 3]| -> u64 {
        hs.iter()
            .map(|h| {
                h.node()
                    .stats()
                    .mapred_local_keys
                    .load(std::sync::atomic::Ordering::Relaxed)
            })
            .sum()
    };
    let before = local_keys([&n1, &n2, &n3]);
    let total: i64 = direct.values().sum();
    assert_eq!(
        job_over_pb(&n2, &listed_job(&direct)),
        Ok(BTreeMap::from([(1, vec![json!(total)])]))
    );
    assert_eq!(
        local_keys([&n1, &n2, &n3]) - before,
        direct.len() as u64,
        "every listed key mapped once, on a node holding it"
    );

    // n3 down: n1 and n2 hold a replica of every key.
    n3.shutdown().expect("shutdown");
    for (job, want) in jobs(&direct) {
        let t = Instant::now();
        let got = loop {
            match job_over_pb(&n2, &job) {
                Ok(got) => break got,
                // Until n2 marks n3 down, its vnodes are still in the plan.
                Err(e) if t.elapsed() < Duration::from_secs(30) => {
                    let _ = e;
                    std::thread::sleep(Duration::from_millis(250));
                }
                Err(e) => panic!("{job}: {e}"),
            }
        };
        assert_eq!(got, want, "{job} with n3 down");
    }
}
