//! Back-pressure on the replica writes a PUT leaves behind at its quorum
//! (`limits.replica_writes_in_flight_mb`, `kv::put`), on two in-process
//! nodes whose second one holds its vnode workers (`pause_vnodes`), so its
//! replica writes wait:
//!
//! * under the limit, a PUT with w = 1 answers from the local replica and
//!   its write to the held node stays in flight, counted by
//!   `replica_write_bytes_in_flight`, until the node goes on (the count
//!   then returns to zero);
//! * over it (0 MiB), the same PUT waits for the held replica and answers
//!   only once it has written, counted in `put_replica_waits_total`.

mod common;

use basalt_server::kv::PutOpts;
use basalt_server::ServerHandle;
use common::{content, runtime};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

const VALUE: usize = 50_000;

fn start(name: &str, limit_mb: u64) -> (ServerHandle, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = common::cluster_node_config(name, dir.path());
    c.limits.replica_writes_in_flight_mb = limit_mb;
    (ServerHandle::spawn(c).expect("spawn"), dir)
}

/// Two nodes, n2 joined to n1, committed and settled.
fn two_nodes(
    rt: &tokio::runtime::Runtime,
    limit_mb: u64,
) -> [(ServerHandle, tempfile::TempDir); 2] {
    let nodes = [start("n1", limit_mb), start("n2", limit_mb)];
    let target = nodes[0].0.cluster_addr().to_string();
    common::admin_line(rt, &nodes[1].0, &format!("join {target}"));
    common::admin_line(rt, &nodes[0].0, "commit");
    common::settle_cluster(rt, &[&nodes[0].0, &nodes[1].0], 2);
    nodes
}

fn w1() -> PutOpts {
    PutOpts {
        w: Some(1),
        dw: Some(1),
        pw: Some(0),
        ..PutOpts::default()
    }
}

#[test]
fn under_the_limit_a_put_answers_at_its_quorum_and_leaves_its_replica_write_in_flight() {
    let rt = runtime();
    let [(n1, _d1), (n2, _d2)] = two_nodes(&rt, 64);
    let node = n1.node().clone();
    let held = n2.node().pause_vnodes();
    let put = rt.block_on(async {
        tokio::time::timeout(
            Duration::from_secs(20),
            node.kv()
                .put(b"b", b"k1", None, content(&[b'x'; VALUE]), &w1()),
        )
        .await
    });
    assert!(
        matches!(put, Ok(Ok(_))),
        "a PUT with w = 1 answers from its local replica: {put:?}"
    );
    let in_flight = node.replica_write_bytes_in_flight();
    assert!(
        in_flight >= VALUE as u64,
        "the held node's replica write is in flight ({in_flight} bytes counted)"
    );
    assert_eq!(
        node.kv()
            .stats()
            .replica_write_waits
            .load(Ordering::Relaxed),
        0
    );
    drop(held);
    let t = Instant::now();
    while node.replica_write_bytes_in_flight() > 0 {
        assert!(
            t.elapsed() < Duration::from_secs(20),
            "replica writes still counted in flight 20 s after the node went on: {} bytes",
            node.replica_write_bytes_in_flight()
        );
        rt.block_on(async { tokio::time::sleep(Duration::from_millis(50)).await });
    }
    n2.shutdown().expect("n2 shutdown");
    n1.shutdown().expect("n1 shutdown");
}

#[test]
fn over_the_limit_a_put_waits_for_every_replica() {
    let rt = runtime();
    let [(n1, _d1), (n2, _d2)] = two_nodes(&rt, 0);
    let node = n1.node().clone();
    let held = n2.node().pause_vnodes();
    let put = {
        let node = node.clone();
        rt.spawn(async move {
            node.kv()
                .put(b"b", b"k1", None, content(&[b'x'; VALUE]), &w1())
                .await
        })
    };
    // The local replica writes at once; the PUT must still be waiting for
    // the held node's (its requests wait up to request_timeout_ms, 60 s).
    rt.block_on(async { tokio::time::sleep(Duration::from_millis(1500)).await });
    assert!(
        !put.is_finished(),
        "a PUT over the limit answered before its held replica wrote"
    );
    drop(held);
    let r = rt
        .block_on(async { tokio::time::timeout(Duration::from_secs(20), put).await })
        .expect("the PUT answers once the held node goes on")
        .expect("task");
    assert!(r.is_ok(), "the PUT succeeds: {r:?}");
    assert_eq!(
        node.kv()
            .stats()
            .replica_write_waits
            .load(Ordering::Relaxed),
        1
    );
    assert_eq!(node.replica_write_bytes_in_flight(), 0);
    n2.shutdown().expect("n2 shutdown");
    n1.shutdown().expect("n1 shutdown");
}
