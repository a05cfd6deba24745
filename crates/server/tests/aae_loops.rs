//! Anti-entropy follow-up loops, through a node's own API (one node: every
//! replica is a local vnode): one replica of a preference list holds stale
//! versions of more keys of one bucket than an exchange's first pass
//! examines (more than `MAX_DIRTY_SEGMENTS` dirty segments). A single
//! exchange call repairs them all with follow-up loops scoped to that
//! bucket, asking each replica for one key listing per loop (the folds
//! counted by the vnodes stay bounded); the few stale keys of another
//! bucket in the same list are repaired by the next exchange; then the
//! replicas are in sync. When two buckets share the stale keys evenly,
//! the follow-up loop is scoped by last-modified time over every bucket
//! instead, and one exchange call repairs them all. Run on leveled (head
//! folds with segment and last-modified filters) and bitcask (key fold and
//! a head per key).

mod common;

use basalt_server::aae::MAX_DIRTY_SEGMENTS;
use basalt_server::config::{Config, DeleteMode};
use basalt_server::kv::{GetOpts, GetOutcome, PutOpts};
use basalt_server::vnode::request::{Obj, VnodeReq};
use basalt_server::Node;
use common::content;
use std::collections::BTreeSet;
use std::sync::Arc;

fn config(dir: &std::path::Path, backend: &str) -> Config {
    Config {
        backend: backend.into(),
        delete_mode: DeleteMode::Keep,
        aae_tree_size: "xxsmall".into(),
        aae_confirm_ms: 100,
        aae_repairs_per_sec: 0,
        aae_max_loops: 4,
        ..Config::ephemeral(dir)
    }
}

/// Waits until the writes still running after their PUT (or a read
/// repair) have landed.
async fn settle(node: &Node) {
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    while node.vnode_queue_lengths().iter().any(|q| *q > 0) {
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
}

/// Gives the third replica of (`bucket`, `key`) a newer version than the
/// other two hold.
async fn make_stale(node: &Node, bucket: &[u8], key: &[u8]) {
    let targets = node.preflist_of(bucket, key);
    let mut newer = match node
        .get(bucket, key, &GetOpts::default())
        .await
        .expect("get")
    {
        GetOutcome::Found(o) => o,
        other => panic!("{other:?}"),
    };
    newer.vclock.increment(b"elsewhere", 1);
    let req = VnodeReq::Reconcile {
        bucket: bucket.to_vec(),
        key: key.to_vec(),
        object: Obj::local(newer),
        props: node.props().get(bucket),
    };
    node.router()
        .vcall(&targets[2], req)
        .await
        .expect("reconcile");
}

fn loops_repair_many_segments_of_one_bucket_in_one_exchange(backend: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let node = Arc::new(Node::open(config(dir.path(), backend)).expect("open"));
    rt.block_on(async {
        node.start_background();
        for i in 0..4000u32 {
            let k = format!("k{i}");
            node.put(
                b"big",
                k.as_bytes(),
                None,
                content(b"v"),
                &PutOpts::default(),
            )
            .await
            .expect("put");
        }
        for i in 0..200u32 {
            let k = format!("o{i}");
            node.put(
                b"other",
                k.as_bytes(),
                None,
                content(b"w"),
                &PutOpts::default(),
            )
            .await
            .expect("put");
        }
        settle(&node).await;
        // Build the trees before the damage, so every later write is
        // tracked incrementally.
        assert!(node
            .aae()
            .aae_verify_trees()
            .await
            .expect("verify")
            .is_empty());
        // Damage the list led by partition 0: every key of "big" in it
        // and five of "other".
        let first = 0u32;
        let in_list = |b: &[u8], k: &[u8]| node.preflist_of(b, k)[0].partition == first;
        let big: Vec<String> = (0..4000)
            .map(|i| format!("k{i}"))
            .filter(|k| in_list(b"big", k.as_bytes()))
            .collect();
        let other: Vec<String> = (0..200)
            .map(|i| format!("o{i}"))
            .filter(|k| in_list(b"other", k.as_bytes()))
            .take(5)
            .collect();
        let size = basalt_backend::TreeSize::XXSmall;
        let segments: BTreeSet<u32> = big
            .iter()
            .map(|k| basalt_backend::segment_of(b"big", k.as_bytes(), size))
            .collect();
        assert!(
            segments.len() > MAX_DIRTY_SEGMENTS,
            "{} dirty segments: more than one pass must be needed",
            segments.len()
        );
        for k in &big {
            make_stale(&node, b"big", k.as_bytes()).await;
        }
        for k in &other {
            make_stale(&node, b"other", k.as_bytes()).await;
        }
        let folds_before = node.aae().aae_tree_stats().await.2;
        let x = node.aae().aae_exchange_n(first, 3).await.expect("exchange");
        let folds = node.aae().aae_tree_stats().await.2 - folds_before;
        eprintln!(
            "{backend}: {} stale keys of big in {} segments, {} of other: {x:?}, {folds} folds",
            big.len(),
            segments.len(),
            other.len()
        );
        assert!(x.dirty_segments >= segments.len(), "{x:?}");
        assert!(
            x.loops >= 1,
            "the caps were hit: follow-up loops ran: {x:?}"
        );
        assert!(x.loops <= 4, "at most aae_max_loops: {x:?}");
        assert!(x.range_repairs > 0, "{x:?}");
        assert!(
            x.repaired >= big.len() && x.repaired <= big.len() + other.len(),
            "every stale key of big repaired in one exchange: {x:?}"
        );
        // One listing per replica per pass, each one fold of its vnode.
        assert_eq!(x.listings, 3 * (1 + x.loops), "{x:?}");
        assert_eq!(folds, x.listings as u64, "{x:?}");
        settle(&node).await;
        // The next exchange finds what the bucket-scoped loops skipped
        // (stale keys of "other"), then the replicas agree.
        let y = node.aae().aae_exchange_n(first, 3).await.expect("exchange");
        assert_eq!(
            x.repaired + y.repaired,
            big.len() + other.len(),
            "{x:?} then {y:?}"
        );
        settle(&node).await;
        let z = node.aae().aae_exchange_n(first, 3).await.expect("exchange");
        assert_eq!(z, Default::default(), "in sync after the repairs");
        for k in &big {
            let heads = replica_clocks(&node, b"big", k.as_bytes()).await;
            assert!(
                heads.windows(2).all(|w| w[0] == w[1]),
                "replicas of {k} differ"
            );
        }
        assert!(node
            .aae()
            .aae_verify_trees()
            .await
            .expect("verify")
            .is_empty());
    });
    node.close();
}

/// Each replica's clock of (`bucket`, `key`), encoded.
async fn replica_clocks(node: &Node, bucket: &[u8], key: &[u8]) -> Vec<Option<Vec<u8>>> {
    let mut out = Vec::new();
    for t in node.preflist_of(bucket, key) {
        let req = VnodeReq::Head {
            bucket: bucket.to_vec(),
            key: key.to_vec(),
        };
        match node.router().vcall(&t, req).await.expect("head") {
            basalt_server::vnode::request::VnodeReply::Object(h, _) => out.push(h.map(|h| {
                h.head()
                    .map(|o| o.vclock.encode())
                    .unwrap_or_else(|e| panic!("{e}"))
            })),
            other => panic!("{other:?}"),
        }
    }
    out
}

/// Two buckets share the stale keys evenly: no bucket holds most repairs,
/// so the follow-up loop lists every bucket within the repairs'
/// last-modified range, and one exchange call repairs them all.
fn loops_scope_by_time_when_no_bucket_dominates(backend: &str) {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let node = Arc::new(Node::open(config(dir.path(), backend)).expect("open"));
    rt.block_on(async {
        node.start_background();
        for b in [&b"x"[..], b"y"] {
            for i in 0..2000u32 {
                let k = format!("k{i}");
                node.put(b, k.as_bytes(), None, content(b"v"), &PutOpts::default())
                    .await
                    .expect("put");
            }
        }
        settle(&node).await;
        assert!(node
            .aae()
            .aae_verify_trees()
            .await
            .expect("verify")
            .is_empty());
        let first = 0u32;
        let mut stale: Vec<(&[u8], String)> = Vec::new();
        for b in [&b"x"[..], b"y"] {
            for i in 0..2000 {
                let k = format!("k{i}");
                if node.preflist_of(b, k.as_bytes())[0].partition == first {
                    stale.push((b, k));
                }
            }
        }
        let size = basalt_backend::TreeSize::XXSmall;
        let segments: BTreeSet<u32> = stale
            .iter()
            .map(|(b, k)| basalt_backend::segment_of(b, k.as_bytes(), size))
            .collect();
        assert!(segments.len() > MAX_DIRTY_SEGMENTS, "{}", segments.len());
        for (b, k) in &stale {
            make_stale(&node, b, k.as_bytes()).await;
        }
        let folds_before = node.aae().aae_tree_stats().await.2;
        let x = node.aae().aae_exchange_n(first, 3).await.expect("exchange");
        let folds = node.aae().aae_tree_stats().await.2 - folds_before;
        eprintln!(
            "{backend}: {} stale keys in x and y, {} segments: {x:?}, {folds} folds",
            stale.len(),
            segments.len()
        );
        assert!(x.loops >= 1 && x.range_repairs > 0, "{x:?}");
        assert_eq!(x.repaired, stale.len(), "all in one exchange: {x:?}");
        assert_eq!(folds, x.listings as u64, "{x:?}");
        settle(&node).await;
        let y = node.aae().aae_exchange_n(first, 3).await.expect("exchange");
        assert_eq!(y, Default::default(), "in sync after the repairs");
    });
    node.close();
}

#[test]
fn leveled_loops_scope_by_time_when_no_bucket_dominates() {
    loops_scope_by_time_when_no_bucket_dominates("leveled");
}

#[test]
fn bitcask_loops_scope_by_time_when_no_bucket_dominates() {
    loops_scope_by_time_when_no_bucket_dominates("bitcask");
}

#[test]
fn leveled_loops_repair_many_segments_of_one_bucket_in_one_exchange() {
    loops_repair_many_segments_of_one_bucket_in_one_exchange("leveled");
}

#[test]
fn bitcask_loops_repair_many_segments_of_one_bucket_in_one_exchange() {
    loops_repair_many_segments_of_one_bucket_in_one_exchange("bitcask");
}
