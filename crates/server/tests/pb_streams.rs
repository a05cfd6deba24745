//! Frame-level tests of every streamed PB reply, against what Riak's
//! services send (riak_kv_pb_bucket, riak_kv_pb_index, riak_kv_pb_csbucket,
//! riak_kv_pb_mapred): for an empty answer, one batch and many batches, a
//! stream is zero or more non-empty batch frames, then exactly one `done`
//! frame that carries no results (a 2i or CS bucket page's continuation
//! only when the page is full), then nothing: a ping right after it must
//! get the ping's own answer, so no stray frame is left on the socket (an
//! empty batch before `done` once was; riakc took it for the end and read
//! `done` as the answer to its next request).
//!
//! Riak's anti-entropy folds, coverage plans and data-type requests are
//! not streamed (one reply frame); `RpbIndexReq` without `stream` neither.
//!
//! Also: a client that goes away in the middle of a stream frees its
//! connection (`pbc_active` falls back) and the node serves on. (The
//! stream's work stops at its next frame: the send fails once the
//! connection is gone, see `server::serve_frames`.)

mod common;

use basalt_server::limits::{
    CS_BUCKET_FRAME_OBJECTS, INDEX_STREAM_CHUNK, LIST_KEYS_FRAME_KEYS, MAPRED_RESULTS_PER_FRAME,
};
use basalt_server::pb::{self, code};
use basalt_server::ServerHandle;
use common::{spawn_node, Client};
use prost::Message;
use std::collections::BTreeSet;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// One frame of a stream, reduced to what the checks need.
#[derive(Debug)]
struct Frame {
    /// Results it carries (keys, buckets, pairs, objects, JSON results).
    items: Vec<Vec<u8>>,
    done: bool,
    continuation: Option<Vec<u8>>,
}

/// Reads a stream of `want` frames to its `done` frame, checks its shape
/// (see the header) with `limit` results per frame at most, then pings.
/// Returns the batch frames' results, in order, and the `done` frame's
/// continuation.
fn read_stream(
    c: &mut Client,
    want: u8,
    limit: usize,
    decode: impl Fn(&[u8]) -> Frame,
) -> (Vec<Vec<u8>>, Option<Vec<u8>>) {
    let mut items = Vec::new();
    let mut batches = 0;
    let continuation = loop {
        let (rc, body) = c.recv().expect("a frame of the stream");
        if rc == code::ERROR_RESP {
            let e = pb::RpbErrorResp::decode(body.as_slice()).expect("error");
            panic!("error in a stream: {}", String::from_utf8_lossy(&e.errmsg));
        }
        assert_eq!(rc, want, "frame code");
        let f = decode(&body);
        if f.done {
            assert!(
                f.items.is_empty(),
                "the done frame carries no results: {f:?}"
            );
            break f.continuation;
        }
        assert!(!f.items.is_empty(), "an empty batch frame before done");
        assert!(
            f.items.len() <= limit,
            "{} results in one frame",
            f.items.len()
        );
        assert!(f.continuation.is_none(), "a continuation on a batch frame");
        batches += 1;
        items.extend(f.items);
    };
    assert!(items.is_empty() || batches > 0);
    // Nothing is left on the socket: the next answer is the ping's.
    c.ping();
    (items, continuation)
}

fn put(c: &mut Client, bucket: &str, key: &str, value: &[u8], index: Option<&str>) {
    let indexes: Vec<(&str, String)> = index
        .map(|t| ("field_bin", t.to_string()))
        .into_iter()
        .collect();
    common::put_all_replicas(c, bucket, key, value, "application/json", &indexes);
}

/// `n` keys `k00000`… in `bucket`, each indexed `field_bin = "t"`.
fn fill(c: &mut Client, bucket: &str, n: usize) -> BTreeSet<Vec<u8>> {
    (0..n)
        .map(|i| {
            let k = format!("k{i:05}");
            put(c, bucket, &k, format!("{i}").as_bytes(), Some("t"));
            k.into_bytes()
        })
        .collect()
}

fn node() -> (ServerHandle, tempfile::TempDir) {
    spawn_node(false, |_| {})
}

/// The sizes each stream is tried at: empty, one result, and more than
/// `frame` (several batches).
fn sizes(frame: usize) -> [usize; 3] {
    [0, 1, frame * 2 + frame / 2]
}

#[test]
fn list_keys_streams() {
    let (h, _d) = node();
    let mut c = Client::connect(&h);
    for n in sizes(LIST_KEYS_FRAME_KEYS) {
        let bucket = format!("lk{n}");
        let want = fill(&mut c, &bucket, n);
        let req = pb::RpbListKeysReq {
            bucket: bucket.into_bytes(),
            ..Default::default()
        };
        c.send(code::LIST_KEYS_REQ, &req.encode_to_vec());
        let (keys, cont) = read_stream(&mut c, code::LIST_KEYS_RESP, LIST_KEYS_FRAME_KEYS, |b| {
            let r = pb::RpbListKeysResp::decode(b).expect("list keys resp");
            Frame {
                items: r.keys,
                done: r.done == Some(true),
                continuation: None,
            }
        });
        assert_eq!(cont, None);
        assert_eq!(keys.len(), n, "no key twice");
        assert_eq!(keys.into_iter().collect::<BTreeSet<_>>(), want);
    }
}

#[test]
fn list_buckets_streams() {
    let (h, _d) = node();
    let mut c = Client::connect(&h);
    let mut want = BTreeSet::new();
    for n in [0, 1, 40] {
        while want.len() < n {
            let b = format!("b{:03}", want.len());
            put(&mut c, &b, "k", b"1", None);
            want.insert(b.into_bytes());
        }
        let req = pb::RpbListBucketsReq {
            stream: Some(true),
            ..Default::default()
        };
        c.send(code::LIST_BUCKETS_REQ, &req.encode_to_vec());
        let (buckets, _) = read_stream(&mut c, code::LIST_BUCKETS_RESP, usize::MAX, |b| {
            let r = pb::RpbListBucketsResp::decode(b).expect("list buckets resp");
            Frame {
                items: r.buckets,
                done: r.done == Some(true),
                continuation: None,
            }
        });
        assert_eq!(buckets.into_iter().collect::<BTreeSet<_>>(), want);
    }
}

fn index_req(bucket: &str, max_results: Option<u32>, continuation: Option<Vec<u8>>) -> Vec<u8> {
    pb::RpbIndexReq {
        bucket: bucket.into(),
        index: b"field_bin".to_vec(),
        qtype: 0,
        key: Some(b"t".to_vec()),
        stream: Some(true),
        max_results,
        continuation,
        ..Default::default()
    }
    .encode_to_vec()
}

fn index_frame(b: &[u8]) -> Frame {
    let r = pb::RpbIndexResp::decode(b).expect("index resp");
    let mut items = r.keys;
    items.extend(r.results.into_iter().map(|p| p.key));
    Frame {
        items,
        done: r.done == Some(true),
        continuation: r.continuation,
    }
}

#[test]
fn index_streams_and_pages() {
    let (h, _d) = node();
    let mut c = Client::connect(&h);
    for n in sizes(INDEX_STREAM_CHUNK) {
        let bucket = format!("ix{n}");
        let want = fill(&mut c, &bucket, n);
        c.send(code::INDEX_REQ, &index_req(&bucket, None, None));
        let (keys, cont) = read_stream(&mut c, code::INDEX_RESP, INDEX_STREAM_CHUNK, index_frame);
        assert_eq!(cont, None, "no page size: no continuation");
        assert_eq!(keys.into_iter().collect::<BTreeSet<_>>(), want);
    }
    // Pages: the done frame carries a continuation only when the page is
    // full (riak_kv_pb_index: `Count >= MaxResults`).
    let n = INDEX_STREAM_CHUNK * 2 + INDEX_STREAM_CHUNK / 2;
    let bucket = format!("ix{n}");
    let page = u32::try_from(INDEX_STREAM_CHUNK + INDEX_STREAM_CHUNK / 2).unwrap();
    let mut all = Vec::new();
    let mut cont = None;
    let mut pages = 0;
    loop {
        c.send(code::INDEX_REQ, &index_req(&bucket, Some(page), cont));
        let (keys, next) = read_stream(&mut c, code::INDEX_RESP, INDEX_STREAM_CHUNK, index_frame);
        pages += 1;
        assert_eq!(next.is_some(), keys.len() == page as usize, "{keys:?}");
        all.extend(keys);
        match next {
            Some(n) => cont = Some(n),
            None => break,
        }
    }
    assert_eq!(pages, 2);
    assert_eq!(all.len(), n);
    assert_eq!(
        all.iter().collect::<BTreeSet<_>>().len(),
        n,
        "pages do not overlap"
    );
}

#[test]
fn cs_bucket_streams() {
    let (h, _d) = node();
    let mut c = Client::connect(&h);
    for n in sizes(CS_BUCKET_FRAME_OBJECTS) {
        let bucket = format!("cs{n}");
        let want = fill(&mut c, &bucket, n);
        let req = pb::RpbCsBucketReq {
            bucket: bucket.into_bytes(),
            start_key: Vec::new(),
            ..Default::default()
        };
        c.send(code::CS_BUCKET_REQ, &req.encode_to_vec());
        let (keys, cont) =
            read_stream(&mut c, code::CS_BUCKET_RESP, CS_BUCKET_FRAME_OBJECTS, |b| {
                let r = pb::RpbCsBucketResp::decode(b).expect("cs bucket resp");
                Frame {
                    items: r.objects.into_iter().map(|o| o.key).collect(),
                    done: r.done == Some(true),
                    continuation: r.continuation,
                }
            });
        assert_eq!(cont, None);
        assert_eq!(keys.into_iter().collect::<BTreeSet<_>>(), want);
    }
}

#[test]
fn mapreduce_streams() {
    let (h, _d) = node();
    let mut c = Client::connect(&h);
    for n in sizes(MAPRED_RESULTS_PER_FRAME) {
        let bucket = format!("mr{n}");
        fill(&mut c, &bucket, n);
        let job = serde_json::json!({
            "inputs": bucket,
            "query": [{"map": {"language": "erlang", "module": "riak_kv_mapreduce",
                               "function": "map_object_value"}}],
        });
        let req = pb::RpbMapRedReq {
            request: job.to_string().into_bytes(),
            content_type: b"application/json".to_vec(),
        };
        c.send(code::MAP_RED_REQ, &req.encode_to_vec());
        let (values, _) = read_stream(&mut c, code::MAP_RED_RESP, MAPRED_RESULTS_PER_FRAME, |b| {
            let r = pb::RpbMapRedResp::decode(b).expect("mapred resp");
            let done = r.done == Some(true);
            let items = match r.response {
                Some(json) => {
                    assert_eq!(r.phase, Some(0), "the map phase's results");
                    let v: Vec<serde_json::Value> =
                        serde_json::from_slice(&json).expect("a JSON list");
                    // map_object_value: each value, a JSON string.
                    v.into_iter()
                        .map(|x| x.as_str().expect("a value").as_bytes().to_vec())
                        .collect()
                }
                None => Vec::new(),
            };
            Frame {
                items,
                done,
                continuation: None,
            }
        });
        let mut got: Vec<u64> = values
            .iter()
            .map(|v| std::str::from_utf8(v).unwrap().parse().unwrap())
            .collect();
        got.sort_unstable();
        assert_eq!(got, (0..n as u64).collect::<Vec<_>>());
    }
}

/// A client that closes its connection after the first frame of a long
/// key listing: the node ends the connection (its `pbc_active` gauge
/// falls back) and serves the next client.
#[test]
fn a_stream_the_client_leaves_is_freed() {
    let (h, _d) = node();
    let mut c = Client::connect(&h);
    fill(&mut c, "gone", LIST_KEYS_FRAME_KEYS * 4);
    let active = || h.node().kv().stats().pbc_active.load(Ordering::Relaxed);
    assert_eq!(active(), 1);
    let mut leaver = Client::connect(&h);
    let req = pb::RpbListKeysReq {
        bucket: b"gone".to_vec(),
        ..Default::default()
    };
    leaver.send(code::LIST_KEYS_REQ, &req.encode_to_vec());
    let (rc, _) = leaver.recv().expect("first frame");
    assert_eq!(rc, code::LIST_KEYS_RESP);
    drop(leaver);
    let deadline = Instant::now() + Duration::from_secs(20);
    while active() != 1 {
        assert!(
            Instant::now() < deadline,
            "the left stream's connection is still open ({} active)",
            active()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    c.ping();
    assert_eq!(
        h.node().kv().stats().pbc_connects.load(Ordering::Relaxed),
        2
    );
}

/// Sends a JSON MapReduce job whose map phase is `source` over `bucket`.
fn send_js_job(c: &mut Client, bucket: &str, source: &str, timeout_ms: u64) {
    let job = serde_json::json!({
        "inputs": bucket,
        "query": [{"map": {"language": "javascript", "source": source}}],
        "timeout": timeout_ms,
    });
    let req = pb::RpbMapRedReq {
        request: job.to_string().into_bytes(),
        content_type: b"application/json".to_vec(),
    };
    c.send(code::MAP_RED_REQ, &req.encode_to_vec());
}

/// A MapReduce job whose client leaves while its map phase spins forever
/// (timeout a minute away) is dropped there and then: its connection
/// closes, and the node's only map VM is free for the next job, which
/// answers long before the first one's timeout would have freed it.
#[test]
fn a_mapreduce_job_the_client_leaves_is_stopped() {
    let (h, _d) = spawn_node(false, |c| c.mapred.map_js_vm_count = 1);
    let mut c = Client::connect(&h);
    put(&mut c, "spin", "k", b"1", None);
    let active = || h.node().kv().stats().pbc_active.load(Ordering::Relaxed);
    let mut leaver = Client::connect(&h);
    send_js_job(
        &mut leaver,
        "spin",
        "function(v) { while (true) {} }",
        60_000,
    );
    // Let it reach the VM, then leave.
    std::thread::sleep(Duration::from_millis(300));
    drop(leaver);
    let deadline = Instant::now() + Duration::from_secs(20);
    while active() != 1 {
        assert!(
            Instant::now() < deadline,
            "the left job's connection is still open"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    // The VM is free: a job with a 20 s timeout (a third of the first
    // one's) gets its answer.
    send_js_job(&mut c, "spin", "function(v) { return [1]; }", 20_000);
    let (values, _) = read_stream(&mut c, code::MAP_RED_RESP, usize::MAX, |b| {
        let r = pb::RpbMapRedResp::decode(b).expect("mapred resp");
        Frame {
            items: r.response.map(|x| vec![x]).unwrap_or_default(),
            done: r.done == Some(true),
            continuation: None,
        }
    });
    assert_eq!(values, vec![b"[1]".to_vec()]);
}

/// Requests sent back to back in one write (as a pipelining client or a
/// fast one does) are answered one by one, in order, whether they stream
/// or not; a frame larger than the connection's read buffer, and one cut
/// across two writes, are read whole.
#[test]
fn requests_sent_back_to_back_are_answered_in_order() {
    use std::io::{Read, Write};
    let (h, _d) = spawn_node(false, |_| {});
    let frame = |c: u8, body: &[u8]| -> Vec<u8> {
        let mut f = ((body.len() + 1) as u32).to_be_bytes().to_vec();
        f.push(c);
        f.extend_from_slice(body);
        f
    };
    let put = |key: &str, value: Vec<u8>| {
        pb::RpbPutReq {
            bucket: b"pipe".to_vec(),
            key: Some(key.as_bytes().to_vec()),
            content: pb::RpbContent {
                value,
                ..Default::default()
            },
            ..Default::default()
        }
        .encode_to_vec()
    };
    let get = |key: &str| {
        pb::RpbGetReq {
            bucket: b"pipe".to_vec(),
            key: key.as_bytes().to_vec(),
            ..Default::default()
        }
        .encode_to_vec()
    };
    let big = vec![7u8; 24 * 1024];
    let mut wire = Vec::new();
    wire.extend(frame(code::PING_REQ, &[]));
    wire.extend(frame(code::PUT_REQ, &put("a", b"one".to_vec())));
    wire.extend(frame(code::GET_REQ, &get("a")));
    wire.extend(frame(
        code::LIST_KEYS_REQ,
        &pb::RpbListKeysReq {
            bucket: b"pipe".to_vec(),
            ..Default::default()
        }
        .encode_to_vec(),
    ));
    wire.extend(frame(code::PUT_REQ, &put("b", big.clone())));
    wire.extend(frame(code::GET_REQ, &get("b")));
    wire.extend(frame(code::PING_REQ, &[]));
    let mut s = std::net::TcpStream::connect(h.addr()).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    // All but the last 3 bytes at once, the rest a moment later.
    let (now, later) = wire.split_at(wire.len() - 3);
    s.write_all(now).expect("write");
    std::thread::sleep(Duration::from_millis(100));
    s.write_all(later).expect("write");
    let mut next = || -> (u8, Vec<u8>) {
        let mut len = [0u8; 4];
        s.read_exact(&mut len).expect("length");
        let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
        s.read_exact(&mut body).expect("frame");
        (body[0], body[1..].to_vec())
    };
    assert_eq!(next().0, code::PING_RESP);
    assert_eq!(next().0, code::PUT_RESP);
    let (c, b) = next();
    assert_eq!(c, code::GET_RESP);
    let got = pb::RpbGetResp::decode(b.as_slice()).expect("get");
    assert_eq!(got.content[0].value, b"one");
    let mut keys = Vec::new();
    loop {
        let (c, b) = next();
        assert_eq!(c, code::LIST_KEYS_RESP);
        let r = pb::RpbListKeysResp::decode(b.as_slice()).expect("keys");
        keys.extend(r.keys);
        if r.done == Some(true) {
            break;
        }
    }
    assert_eq!(keys, vec![b"a".to_vec()]);
    assert_eq!(next().0, code::PUT_RESP);
    let (c, b) = next();
    assert_eq!(c, code::GET_RESP);
    let got = pb::RpbGetResp::decode(b.as_slice()).expect("get");
    assert_eq!(got.content[0].value, big);
    assert_eq!(next().0, code::PING_RESP);
}
