//! Data types across a split cluster, with real processes: three `basalt
//! start` nodes joined into one cluster, a `counters` bucket type
//! (datatype counter) created on n1 and gossiped. Counters are incremented
//! through every node; then the cluster is split by stopping nodes — n3
//! down while n1 and n2 take increments, then n1 and n2 down while n3
//! alone takes increments (on fallback vnodes) — and healed by starting
//! them all again. Every replica's value is a join, so after healing every
//! node must read every counter as the sum of the acknowledged increments
//! (none lost): a read at r = 3 through each node, repeated until read
//! repair, hinted handoff and anti-entropy have had their turn (≤ 120 s),
//! then single-replica reads (r = 1) through each node must agree too.
//! An increment that failed (node down, quorum) may still have been
//! applied, so the final value lies between the acknowledged sum and the
//! attempted sum; with no failures they are equal.
//!
//! Also: `node_confirms` on a data-type update counts distinct nodes —
//! met with the three up, refused (before writing) once the other two are
//! down and every replica sits on the one node left.

mod common;
use basalt_server::pb::{self, code};
use common::procs::{create_active_type, form_cluster, start_nodes, test_dir, Client, NodeProc};
use common::wait_for;
use prost::Message;
use std::time::Duration;

const KEYS: usize = 4;

/// Three nodes in one cluster with the `counters` type active on each.
fn counters_cluster(root: &std::path::Path) -> Vec<NodeProc> {
    let nodes = start_nodes(root, 3);
    form_cluster(&nodes);
    create_active_type(&nodes, "counters", r#"{"props":{"datatype":"counter"}}"#);
    nodes
}

/// An increment by `n` of counter `c{key}` in `bucket` of type `counters`.
fn increment(bucket: &[u8], key: usize, n: i64) -> pb::DtUpdateReq {
    pb::DtUpdateReq {
        bucket: bucket.to_vec(),
        key: Some(format!("c{key}").into_bytes()),
        r#type: b"counters".to_vec(),
        op: pb::DtOp {
            counter_op: Some(pb::CounterOp { increment: Some(n) }),
            ..Default::default()
        },
        ..Default::default()
    }
}

fn incr(c: &mut Client, key: usize, n: i64) -> Result<(), String> {
    let req = pb::DtUpdateReq {
        w: Some(1),
        dw: Some(1),
        ..increment(b"split", key, n)
    };
    c.call(code::DT_UPDATE_REQ, &req).map(|_| ())
}

fn read(c: &mut Client, key: usize, r: u32) -> Option<i64> {
    let req = pb::DtFetchReq {
        bucket: b"split".to_vec(),
        key: format!("c{key}").into_bytes(),
        r#type: b"counters".to_vec(),
        r: Some(r),
        ..Default::default()
    };
    let (_, body) = c.call(code::DT_FETCH_REQ, &req).ok()?;
    pb::DtFetchResp::decode(body.as_slice())
        .ok()?
        .value?
        .counter_value
}

/// Increments every counter `rounds` times through `addr`; adds what was
/// acknowledged and what was attempted.
fn load(addr: &str, rounds: i64, acked: &mut [i64], tried: &mut [i64]) {
    let mut c = Client::connect(addr);
    for round in 1..=rounds {
        for k in 0..KEYS {
            let n = round + k as i64;
            tried[k] += n;
            // A node that still believes its peers up may time out once.
            let mut ok = false;
            for _ in 0..3 {
                if incr(&mut c, k, n).is_ok() {
                    ok = true;
                    break;
                }
                std::thread::sleep(Duration::from_millis(300));
            }
            if ok {
                acked[k] += n;
            }
        }
    }
}

#[test]
fn counters_converge_after_a_split_with_no_lost_increment() {
    let (root, _guard) = test_dir();
    let mut nodes = counters_cluster(&root);
    let mut acked = vec![0i64; KEYS];
    let mut tried = vec![0i64; KEYS];
    for n in &nodes {
        load(&n.pb, 3, &mut acked, &mut tried);
    }
    // Split: n3 away, n1 and n2 count on.
    assert!(nodes[2].terminate(), "n3 did not stop cleanly");
    load(&nodes[0].pb, 3, &mut acked, &mut tried);
    load(&nodes[1].pb, 3, &mut acked, &mut tried);
    // The other side: n3 alone counts on.
    assert!(nodes[0].terminate(), "n1 did not stop cleanly");
    assert!(nodes[1].terminate(), "n2 did not stop cleanly");
    nodes[2].start();
    load(&nodes[2].pb, 3, &mut acked, &mut tried);
    // Heal.
    nodes[0].start();
    nodes[1].start();
    let mut last = Vec::new();
    wait_for(
        "every node reads the sum at r = 3",
        Duration::from_secs(120),
        || {
            last = nodes
                .iter()
                .map(|n| {
                    let mut c = Client::connect(&n.pb);
                    (0..KEYS).map(|k| read(&mut c, k, 3)).collect::<Vec<_>>()
                })
                .collect();
            last.iter().all(|vs| {
                vs.iter()
                    .zip(acked.iter().zip(&tried))
                    .all(|(v, (a, t))| v.is_some_and(|v| v >= *a && v <= *t))
            }) && last.windows(2).all(|w| w[0] == w[1])
        },
    );
    eprintln!(
        "acknowledged {acked:?}, attempted {tried:?}, read {:?}",
        last[0]
    );
    wait_for("single replicas agree", Duration::from_secs(120), || {
        let first = last[0].clone();
        nodes.iter().all(|n| {
            let mut c = Client::connect(&n.pb);
            (0..3).all(|_| (0..KEYS).map(|k| read(&mut c, k, 1)).collect::<Vec<_>>() == first)
        })
    });
    for n in &mut nodes {
        assert!(n.terminate(), "{} did not exit 0 after SIGTERM", n.name);
    }
}

#[test]
fn node_confirms_counts_distinct_nodes() {
    let (root, _guard) = test_dir();
    let mut nodes = counters_cluster(&root);
    let confirmed = |c: &mut Client, key: usize| {
        let req = pb::DtUpdateReq {
            node_confirms: Some(2),
            ..increment(b"nc", key, 1)
        };
        c.call(code::DT_UPDATE_REQ, &req).map(|_| ())
    };
    for n in &nodes {
        let mut c = Client::connect(&n.pb);
        for k in 0..8 {
            confirmed(&mut c, k).unwrap_or_else(|e| panic!("node_confirms 2 with 3 up: {e}"));
        }
    }
    assert!(nodes[1].terminate(), "n2 did not stop cleanly");
    assert!(nodes[2].terminate(), "n3 did not stop cleanly");
    let mut c = Client::connect(&nodes[0].pb);
    let mut last = String::new();
    wait_for(
        "node_confirms refused on one node",
        Duration::from_secs(60),
        || match confirmed(&mut c, 0) {
            Ok(()) => false,
            Err(e) => {
                last = e;
                last == "{node_confirms_val_unsatisfied,2,1}"
            }
        },
    );
    assert!(nodes[0].terminate(), "n1 did not stop cleanly");
}
