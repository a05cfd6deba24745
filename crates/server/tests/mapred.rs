//! MapReduce over PB (23 → streamed 24) and HTTP (`POST /mapred`, plain
//! and chunked) on an in-process node (memory backend, ring of 8): the
//! results of jobs over a whole bucket, a key-filter input, a 2i range,
//! listed keys and links equal what a fold over the bucket computes
//! directly (`Node::cs_bucket_fold`); bad jobs get errors naming the
//! field; a JavaScript error, an infinite loop and a memory bomb end their
//! job with a clear error within its timeout and the node keeps serving.

mod common;

use basalt_server::kv::CsFold;
use basalt_server::pb::{self, code};
use basalt_server::{Config, ServerHandle};
use common::{http, runtime, Client};
use prost::Message;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::{Duration, Instant};

const KEYS: u32 = 120;

fn start(tweak: impl FnOnce(&mut Config)) -> (ServerHandle, tempfile::TempDir) {
    common::spawn_node(true, |c| {
        c.mapred.map_js_vm_count = 2;
        c.mapred.reduce_js_vm_count = 1;
        c.mapred.hook_js_vm_count = 1;
        c.mapred.js_max_vm_mem_mb = 8;
        tweak(c);
    })
}

fn put(
    c: &mut Client,
    bucket: &str,
    key: &str,
    value: &str,
    index: Option<u32>,
    links: &[(&str, &str, &str)],
) {
    let req = pb::RpbPutReq {
        bucket: bucket.into(),
        key: Some(key.into()),
        content: pb::RpbContent {
            value: value.into(),
            content_type: Some(b"application/json".to_vec()),
            indexes: index
                .map(|n| pb::RpbPair {
                    key: b"n_int".to_vec(),
                    value: Some(n.to_string().into_bytes()),
                })
                .into_iter()
                .collect(),
            links: links
                .iter()
                .map(|(b, k, t)| pb::RpbLink {
                    bucket: Some(b.as_bytes().to_vec()),
                    key: Some(k.as_bytes().to_vec()),
                    tag: Some(t.as_bytes().to_vec()),
                })
                .collect(),
            ..Default::default()
        },
        // Every replica before the ack: folds and jobs ask one replica per
        // partition, which a quorum write may not have reached yet.
        w: Some(3),
        ..Default::default()
    };
    c.call(code::PUT_REQ, &req, code::PUT_RESP);
}

/// Loads `KEYS` objects `{"n": i}` (2i `n_int` = i) into bucket `mr`.
fn load(h: &ServerHandle) {
    let mut c = Client::connect(h);
    for i in 0..KEYS {
        put(
            &mut c,
            "mr",
            &format!("k{i:03}"),
            &json!({"n": i}).to_string(),
            Some(i),
            &[],
        );
    }
}

/// Key → n over the whole bucket, read by a fold (not by MapReduce).
fn direct(h: &ServerHandle) -> BTreeMap<String, i64> {
    let mut out = BTreeMap::new();
    let q = CsFold {
        bucket: b"mr".to_vec(),
        start_incl: true,
        ..Default::default()
    };
    runtime()
        .block_on(h.node().cs_bucket_fold(&q, |batch| {
            for (k, o) in batch {
                let v: Value = serde_json::from_slice(&o.contents[0].value).expect("json");
                out.insert(
                    String::from_utf8(k).expect("key"),
                    v["n"].as_i64().expect("n"),
                );
            }
            std::future::ready(true)
        }))
        .expect("fold");
    assert_eq!(out.len(), KEYS as usize);
    out
}

/// A job over PB: `(phase, results)` frames until `done`, or the error.
fn pb_job(h: &ServerHandle, job: &Value) -> Result<BTreeMap<u32, Vec<Value>>, String> {
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
        assert_eq!(rc, code::MAP_RED_RESP);
        let r = pb::RpbMapRedResp::decode(body.as_slice()).expect("resp");
        if let (Some(p), Some(data)) = (r.phase, r.response) {
            let v: Vec<Value> = serde_json::from_slice(&data).expect("json list");
            out.entry(p).or_default().extend(v);
        }
        if r.done == Some(true) {
            return Ok(out);
        }
    }
}

fn http_job(h: &ServerHandle, job: &Value, chunked: bool) -> (u16, Value) {
    let path = if chunked {
        "/mapred?chunked=true"
    } else {
        "/mapred"
    };
    let r = http(
        h.http_addr().expect("http"),
        "POST",
        path,
        &[("Content-Type", "application/json")],
        job.to_string().as_bytes(),
    );
    if !chunked || r.status != 200 {
        let v = serde_json::from_slice(&r.body).unwrap_or(Value::String(r.text()));
        return (r.status, v);
    }
    // multipart/mixed: one {"phase", "data"} per part.
    let ct = r.header("content-type").expect("content type").to_string();
    let boundary = ct.split("boundary=").nth(1).expect("boundary");
    let text = r.text();
    let parts: Vec<Value> = text
        .split(&format!("--{boundary}"))
        .filter_map(|p| p.split("\r\n\r\n").nth(1))
        .filter_map(|body| serde_json::from_str(body.trim()).ok())
        .collect();
    assert!(
        text.trim_end().ends_with(&format!("--{boundary}--")),
        "closing boundary"
    );
    (r.status, Value::Array(parts))
}

fn only(results: BTreeMap<u32, Vec<Value>>, phase: u32) -> Vec<Value> {
    assert_eq!(
        results.keys().copied().collect::<Vec<_>>(),
        vec![phase],
        "{results:?}"
    );
    results.into_values().next().unwrap_or_default()
}

/// Sums `n` over what a phase saw, safe to re-reduce (numbers are earlier sums).
const SUM_N: &str = "function(vs) { var s = 0; vs.forEach(function(v) { s += (typeof v === 'number') ? v : v.n; }); return [s]; }";

#[test]
fn results_equal_a_direct_fold_over_pb_and_http() {
    let (h, _d) = start(|_| {});
    load(&h);
    let d = direct(&h);
    let total: i64 = d.values().sum();

    // Whole bucket (a coverage fold), JavaScript map and Riak.reduceSum, PB.
    let job = json!({"inputs": "mr", "query": [
        {"map": {"language": "javascript", "source": "function(v) { return [JSON.parse(v.values[0].data).n]; }"}},
        {"reduce": {"language": "javascript", "name": "Riak.reduceSum"}}]});
    assert_eq!(only(pb_job(&h, &job).expect("job"), 1), vec![json!(total)]);

    // Erlang built-ins: count the bucket's inputs, HTTP plain.
    let job = json!({"inputs": "mr", "query": [
        {"reduce": {"language": "erlang", "module": "riak_kv_mapreduce", "function": "reduce_count_inputs"}}]});
    assert_eq!(http_job(&h, &job, false), (200, json!([KEYS])));

    // Erlang map_object_value + reduce_string_to_integer... over the
    // values' JSON: map values, then a re-reduced JavaScript sum (more
    // than one batch of 20), 2i range input, HTTP chunked.
    let job = json!({"inputs": {"bucket": "mr", "index": "n_int", "start": 10, "end": 59}, "query": [
        {"map": {"language": "javascript", "name": "Riak.mapValuesJson"}},
        {"reduce": {"language": "javascript", "source": SUM_N}}]});
    let want: i64 = d.values().filter(|n| (10..=59).contains(*n)).sum();
    let (status, parts) = http_job(&h, &job, true);
    assert_eq!(status, 200);
    assert_eq!(parts, json!([{"phase": 1, "data": [want]}]));

    // Key filters: keys k000..k049 by number.
    let job = json!({"inputs": {"bucket": "mr", "key_filters": [["tokenize", "k", 1], ["string_to_int"], ["less_than", 50]]},
        "query": [{"reduce": {"language": "erlang", "module": "riak_kv_mapreduce", "function": "reduce_count_inputs"}}]});
    let want = d
        .keys()
        .filter(|k| k[1..].parse::<u32>().expect("n") < 50)
        .count();
    assert_eq!(only(pb_job(&h, &job).expect("job"), 0), vec![json!(want)]);

    // Erlang map + sort over the whole bucket: every value, sorted.
    let job = json!({"inputs": "mr", "query": [
        {"map": {"language": "erlang", "module": "riak_kv_mapreduce", "function": "map_object_value"}},
        {"reduce": {"language": "erlang", "module": "riak_kv_mapreduce", "function": "reduce_sort"}}]});
    let mut want: Vec<String> = d.values().map(|n| json!({"n": n}).to_string()).collect();
    want.sort();
    let got = only(pb_job(&h, &job).expect("job"), 1);
    assert_eq!(got, want.into_iter().map(Value::String).collect::<Vec<_>>());
}

#[test]
fn listed_keys_keydata_keep_and_links() {
    let (h, _d) = start(|_| {});
    load(&h);
    let mut c = Client::connect(&h);
    put(
        &mut c,
        "people",
        "ann",
        "{}",
        None,
        &[("people", "bob", "friend"), ("mr", "k005", "likes")],
    );
    put(
        &mut c,
        "people",
        "bob",
        "{}",
        None,
        &[("people", "ann", "friend")],
    );

    // No phases: the inputs come back as [bucket, key(, keydata)].
    let job = json!({"inputs": [["mr", "k001"], ["mr", "k002", 7]], "query": []});
    assert_eq!(
        only(pb_job(&h, &job).expect("job"), 0),
        vec![json!(["mr", "k001"]), json!(["mr", "k002", 7])]
    );

    // Not-found handling by arg, keydata passed through.
    // (Map outputs of listed keys come in no set order, as in Riak: keys of
    // different partitions are mapped on their vnodes in parallel.)
    let job = json!({"inputs": [["mr", "k001", "a"], ["mr", "nope", "b"]], "query": [
        {"map": {"language": "erlang", "module": "riak_kv_mapreduce", "function": "map_object_value", "arg": "include_keydata"}}]});
    let mut got = only(pb_job(&h, &job).expect("job"), 0);
    got.sort_by_key(Value::to_string);
    assert_eq!(got, vec![json!("b"), json!("{\"n\":1}")]);
    let job = json!({"inputs": [["mr", "nope"]], "query": [
        {"map": {"language": "javascript", "name": "Riak.mapValuesJson"}},
        {"reduce": {"language": "javascript", "name": "Riak.filterNotFound"}}]});
    // An empty kept phase sends no result frame (as Riak), just `done`.
    assert_eq!(pb_job(&h, &job).expect("job"), BTreeMap::new());
    assert_eq!(http_job(&h, &job, false), (200, json!([])));

    // Two kept phases: PB frames carry their phase; HTTP a list per phase.
    let job = json!({"inputs": [["mr", "k003"], ["mr", "k004"]], "query": [
        {"map": {"language": "javascript", "name": "Riak.mapValuesJson", "keep": true}},
        {"reduce": {"language": "javascript", "source": SUM_N}}]});
    let got = pb_job(&h, &job).expect("job");
    assert_eq!(got.get(&1), Some(&vec![json!(7)]));
    let mut maps = got.get(&0).cloned().unwrap_or_default();
    maps.sort_by_key(|v| v["n"].as_i64());
    assert_eq!(maps, vec![json!({"n": 3}), json!({"n": 4})]);
    let (status, v) = http_job(&h, &job, false);
    assert_eq!(status, 200);
    assert_eq!(v[1], json!([7]));

    // Links: by tag, then the linked objects' values.
    let job = json!({"inputs": [["people", "ann"]], "query": [
        {"link": {"tag": "friend", "keep": true}},
        {"map": {"language": "erlang", "module": "riak_kv_mapreduce", "function": "map_key"}}]});
    let got = pb_job(&h, &job).expect("job");
    assert_eq!(got.get(&0), Some(&vec![json!(["people", "bob", "friend"])]));
    assert_eq!(got.get(&1), Some(&vec![json!(["people", "bob"])]));
    let job = json!({"inputs": [["people", "ann"]], "query": [
        {"link": {"bucket": "mr"}},
        {"map": {"language": "javascript", "name": "Riak.mapValuesJson"}}]});
    assert_eq!(
        only(pb_job(&h, &job).expect("job"), 1),
        vec![json!({"n": 5})]
    );
}

#[test]
fn bad_jobs_get_errors_naming_the_field() {
    let (h, _d) = start(|_| {});
    load(&h);
    let cases = [
        ("{\"inputs\": ", "invalid_json"),
        (r#"{"inputs": "mr"}"#, "missing_field"),
        (
            r#"{"inputs": "mr", "query": [{"map": {"language": "erlang", "module": "riak_kv_mapreduce", "function": "nope"}}]}"#,
            "query[0].map.function",
        ),
        (
            r#"{"inputs": "mr", "query": [{"map": {"language": "python", "source": "x"}}]}"#,
            "query[0].map.language",
        ),
        (
            r#"{"inputs": {"bucket": "mr", "key_filters": [["sounds_like", "x"]]}, "query": []}"#,
            "key_filters: unknown key filter \"sounds_like\"",
        ),
        (r#"{"inputs": 42, "query": []}"#, "inputs: unrecognized"),
        (
            r#"{"inputs": [["mr", "k1"]], "query": [{"reduce": {"language": "erlang", "module": "riak_kv_mapreduce", "function": "reduce_sum", "arg": {"reduce_phase_batch_size": 0}}}]}"#,
            "query[0].reduce.arg",
        ),
    ];
    for (job, want) in cases {
        let v: Value = serde_json::from_str(job).unwrap_or(Value::Null);
        let mut c = Client::connect(&h);
        let req = pb::RpbMapRedReq {
            request: job.as_bytes().to_vec(),
            content_type: b"application/json".to_vec(),
        };
        let e = c.try_call(code::MAP_RED_REQ, &req).expect_err(job);
        assert!(e.contains(want), "PB {job}: {e}");
        let r = http(
            h.http_addr().expect("http"),
            "POST",
            "/mapred",
            &[("Content-Type", "application/json")],
            job.as_bytes(),
        );
        assert_eq!(r.status, 400, "HTTP {job}: {}", r.text());
        assert!(r.text().contains(want), "HTTP {job}: {}", r.text());
        let _ = v;
    }
    // A phase error names its phase and input.
    let job = json!({"inputs": [["mr", "k001"]], "query": [
        {"map": {"language": "erlang", "module": "riak_kv_mapreduce", "function": "map_object_value"}},
        {"reduce": {"language": "erlang", "module": "riak_kv_mapreduce", "function": "reduce_sum"}}]});
    let e = pb_job(&h, &job).expect_err("a sum over strings");
    let v: Value = serde_json::from_str(&e).expect("json error");
    assert_eq!(v["phase"], json!(1));
    assert!(
        v["error"]
            .as_str()
            .is_some_and(|s| s.contains("not a number")),
        "{e}"
    );
    let (status, v) = http_job(&h, &job, false);
    assert_eq!(status, 500);
    assert_eq!(v["phase"], json!(1));
    // Chunked: the headers are gone by then; the error is the last part.
    let (status, parts) = http_job(&h, &job, true);
    assert_eq!(status, 200);
    let last = parts
        .as_array()
        .and_then(|p| p.last())
        .cloned()
        .unwrap_or_default();
    assert_eq!(last["phase"], json!(1), "{parts}");
    assert!(
        last["error"]
            .as_str()
            .is_some_and(|s| s.contains("not a number")),
        "{parts}"
    );
}

#[test]
fn node_limits_refuse_big_and_whole_bucket_jobs() {
    let (h, _d) = start(|c| {
        c.mapred.allow_bucket_inputs = false;
        c.mapred.max_inputs = 5;
    });
    load(&h);
    let job = json!({"inputs": "mr", "query": [{"reduce": {"language": "erlang", "module": "riak_kv_mapreduce", "function": "reduce_count_inputs"}}]});
    let e = pb_job(&h, &job).expect_err("refused");
    assert!(e.contains("mapred.allow_bucket_inputs"), "{e}");
    let keys: Vec<Value> = (0..6).map(|i| json!(["mr", format!("k{i:03}")])).collect();
    let job = json!({"inputs": keys, "query": [{"reduce": {"language": "erlang", "module": "riak_kv_mapreduce", "function": "reduce_count_inputs"}}]});
    let e = pb_job(&h, &job).expect_err("too many");
    assert!(e.contains("mapred.max_inputs"), "{e}");
    let job =
        json!({"inputs": {"bucket": "mr", "index": "n_int", "start": 0, "end": 100}, "query": []});
    let e = pb_job(&h, &job).expect_err("too many");
    assert!(e.contains("mapred.max_inputs"), "{e}");
    // Within the limit it runs.
    let job =
        json!({"inputs": {"bucket": "mr", "index": "n_int", "start": 0, "end": 4}, "query": []});
    assert_eq!(
        pb_job(&h, &job).expect("job").get(&0).map(Vec::len),
        Some(5)
    );
}

#[test]
fn javascript_errors_loops_and_memory_bombs_end_their_job_and_the_node_serves_on() {
    let (h, _d) = start(|_| {});
    load(&h);
    let js_job = |src: &str, timeout: u64| {
        json!({"inputs": [["mr", "k001"]], "timeout": timeout, "query": [
            {"map": {"language": "javascript", "source": src}}]})
    };
    let e = pb_job(
        &h,
        &js_job("function(v) { throw new Error('no good'); }", 10_000),
    )
    .expect_err("throws");
    assert!(e.contains("no good"), "{e}");
    assert!(e.contains("\"phase\":0"), "{e}");

    // An infinite loop: the job's timeout (1 s) ends it. The bound below
    // only guards against a hang.
    let t = Instant::now();
    let e = pb_job(&h, &js_job("function(v) { while (true) {} }", 1000)).expect_err("loops");
    assert!(e.contains("timeout"), "{e}");
    assert!(
        t.elapsed() < Duration::from_secs(30),
        "took {:?}",
        t.elapsed()
    );

    // A memory bomb: the VM's heap limit (8 MiB here).
    let bomb = "function(v) { var a = []; while (true) { a.push(new Array(100000).fill('x')); } }";
    let e = pb_job(&h, &js_job(bomb, 20_000)).expect_err("bomb");
    assert!(e.contains("out of memory"), "{e}");
    let (status, v) = http_job(&h, &js_job(bomb, 20_000), false);
    assert_eq!(status, 500);
    assert!(
        v["error"]
            .as_str()
            .is_some_and(|s| s.contains("out of memory")),
        "{v}"
    );

    // The node and its VMs serve on.
    Client::connect(&h).ping();
    for _ in 0..4 {
        let job = json!({"inputs": [["mr", "k002"]], "query": [
            {"map": {"language": "javascript", "name": "Riak.mapValuesJson"}}]});
        assert_eq!(
            only(pb_job(&h, &job).expect("job"), 0),
            vec![json!({"n": 2})]
        );
    }
    let stats = http(h.http_addr().expect("http"), "GET", "/stats", &[], b"");
    let v: Value = serde_json::from_slice(&stats.body).expect("stats");
    assert!(
        v["mapred_errors_total"].as_u64().is_some_and(|n| n >= 4),
        "{v}"
    );
}

#[test]
fn a_2i_input_on_a_backend_without_2i_is_an_error_naming_the_field() {
    let (h, _d) = start(|c| c.backend = "bitcask".into());
    let mut c = Client::connect(&h);
    put(&mut c, "mr", "k1", "{\"n\":1}", None, &[]);
    let job =
        json!({"inputs": {"bucket": "mr", "index": "n_int", "start": 0, "end": 9}, "query": []});
    let e = pb_job(&h, &job).expect_err("no 2i");
    assert!(e.starts_with("inputs.index: "), "{e}");
    let (status, v) = http_job(&h, &job, false);
    assert_eq!(status, 400, "{v}");
    // The rest of MapReduce works on that backend.
    let job = json!({"inputs": "mr", "query": [
        {"map": {"language": "javascript", "name": "Riak.mapValuesJson"}}]});
    assert_eq!(
        only(pb_job(&h, &job).expect("job"), 0),
        vec![json!({"n": 1})]
    );
}
