//! Back-pressure on the replica writes a PUT leaves behind at its quorum
//! (`limits.replica_writes_in_flight_mb`, `kv::put`), on two in-process
//! nodes whose second one holds its vnode workers (`pause_vnodes`), so its
//! replica writes wait. The PUTs go over PB, so everything they start runs
//! on the nodes' own runtimes:
//!
//! * under the limit, a PUT with w = 1 answers from the local replica and
//!   its write to the held node stays in flight, counted by
//!   `replica_write_bytes_in_flight`, until the node goes on (the count
//!   then returns to zero);
//! * over it (0 MiB), the same PUT waits for the held replica and answers
//!   only once it has written, counted in `put_replica_waits_total`.

mod common;

use basalt_server::pb::{self, code};
use basalt_server::ServerHandle;
use common::{runtime, Client};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const VALUE: usize = 50_000;

fn start(name: &str, limit_mb: u64) -> (ServerHandle, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = common::cluster_node_config(name, dir.path());
    c.limits.replica_writes_in_flight_mb = limit_mb;
    (ServerHandle::spawn(c).expect("spawn"), dir)
}

/// Two nodes, the second joined to the first, committed and settled.
/// The admin lines go over the nodes' cluster ports, as `basalt admin`
/// sends them: a join made in-process right after the node was spawned
/// could be sent before the node advertised its own cluster address, and
/// the first node would then not know where to reach it.
fn two_nodes(names: [&str; 2], limit_mb: u64) -> [(ServerHandle, tempfile::TempDir); 2] {
    let rt = runtime();
    let nodes = [start(names[0], limit_mb), start(names[1], limit_mb)];
    let target = nodes[0].0.cluster_addr().to_string();
    admin_over_port(&nodes[1].0, &format!("join {target}"));
    admin_over_port(&nodes[0].0, "commit");
    common::settle_cluster(&rt, &[&nodes[0].0, &nodes[1].0], 2);
    // `ringready` asks every member: the first node reaches the second.
    let t = Instant::now();
    loop {
        let ready = admin_over_port(&nodes[0].0, "ringready");
        if ready.starts_with("TRUE") {
            break;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the first node did not reach the second in 60 s: {ready}"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    nodes
}

/// One admin line sent to `h`'s cluster port (as `basalt admin` does):
/// the answer's text.
fn admin_over_port(h: &ServerHandle, line: &str) -> String {
    let mut a = Client::admin(h);
    a.send(riak_pb::code::basalt::ADMIN_CLUSTER_REQ, line.as_bytes());
    let (_, body) = a.recv().expect("admin answer");
    String::from_utf8_lossy(&body).into_owned()
}

/// A key of bucket `b` with a primary replica on `h` and one on the
/// node named `other`, from `h`'s preflists (the claim decides which
/// partitions each node owns).
fn key_on_both(h: &ServerHandle, other: &str) -> String {
    let mut c = Client::connect(h);
    let me = h.node().config().node_name.clone();
    for i in 0..200 {
        let key = format!("k{i}");
        let pl = c.preflist(None, b"b", key.as_bytes());
        let on = |n: &str| pl.iter().any(|i| i.primary && i.node == n.as_bytes());
        if on(&me) && on(&format!("{other}@127.0.0.1")) {
            return key;
        }
    }
    panic!("no key of 200 has primaries on both {me} and {other}");
}

/// A PB PUT of a `VALUE`-byte object with w = dw = 1, pw = 0.
fn put_w1(h: &ServerHandle, key: &str) -> Result<(u8, Vec<u8>), String> {
    let req = pb::RpbPutReq {
        bucket: b"b".to_vec(),
        key: Some(key.into()),
        content: pb::RpbContent {
            value: vec![b'x'; VALUE],
            ..Default::default()
        },
        w: Some(1),
        dw: Some(1),
        pw: Some(0),
        ..Default::default()
    };
    Client::connect(h).try_call(code::PUT_REQ, &req)
}

/// Waits (≤ 20 s) until `h` counts no replica write in flight.
fn wait_no_writes_in_flight(h: &ServerHandle) {
    let t = Instant::now();
    while h.node().replica_write_bytes_in_flight() > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "replica writes still counted in flight 20 s after the held node went on: {} bytes",
            h.node().replica_write_bytes_in_flight()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn under_the_limit_a_put_answers_at_its_quorum_and_leaves_its_replica_write_in_flight() {
    let [(n1, _d1), (n2, _d2)] = two_nodes(["u1", "u2"], 64);
    let key = key_on_both(&n1, "u2");
    let held = n2.node().pause_vnodes();
    let put = put_w1(&n1, &key);
    assert!(
        matches!(put, Ok((code::PUT_RESP, _))),
        "a PUT with w = 1 answers from its local replica: {put:?}"
    );
    let in_flight = n1.node().replica_write_bytes_in_flight();
    assert!(
        in_flight >= VALUE as u64,
        "the held node's replica write is in flight ({in_flight} bytes counted)"
    );
    let waits = &n1.node().kv().stats().replica_write_waits;
    assert_eq!(waits.load(Ordering::Relaxed), 0);
    drop(held);
    wait_no_writes_in_flight(&n1);
    n2.shutdown().expect("n2 shutdown");
    n1.shutdown().expect("n1 shutdown");
}

#[test]
fn over_the_limit_a_put_waits_for_every_replica() {
    let [(n1, _d1), (n2, _d2)] = two_nodes(["o1", "o2"], 0);
    let key = key_on_both(&n1, "o2");
    let held = n2.node().pause_vnodes();
    let put = std::thread::scope(|s| {
        let put = s.spawn(|| put_w1(&n1, &key));
        // The local replica writes at once; the PUT must still be waiting
        // for the held node's (its requests wait up to request_timeout_ms,
        // 60 s).
        std::thread::sleep(Duration::from_millis(1500));
        let in_flight = n1.node().replica_write_bytes_in_flight();
        let early = put.is_finished();
        drop(held);
        let r = put.join().expect("put thread");
        assert!(
            !early,
            "a PUT over the limit answered before its held replica wrote: {r:?}, {in_flight} bytes in flight"
        );
        assert!(
            in_flight >= VALUE as u64,
            "the held replica's write was in flight while the PUT waited ({in_flight} bytes)"
        );
        r
    });
    assert!(
        matches!(put, Ok((code::PUT_RESP, _))),
        "the PUT succeeds once the held node goes on: {put:?}"
    );
    let waits = &n1.node().kv().stats().replica_write_waits;
    assert_eq!(waits.load(Ordering::Relaxed), 1);
    wait_no_writes_in_flight(&n1);
    n2.shutdown().expect("n2 shutdown");
    n1.shutdown().expect("n1 shutdown");
}
