//! Tombstone reaps against handoff, with real processes: a deleted key
//! must not come back when a fallback vnode that still holds an older
//! write hands it to its owner after the delete.
//!
//! Three nodes (ring 16, `delete_mode = "immediate"`, anti-entropy off so
//! only handoff moves data). Handoffs are paused (`basalt admin
//! transfer-limit 0`), a node is stopped, keys are written (their third
//! replica goes to fallbacks on the other nodes), the node comes back and
//! every key is deleted while the fallbacks still hold the old values —
//! the moment a reap would make a later handoff resurrect the key. Then
//! handoffs resume. Every key must read as not found with r = pr = 3, and
//! once the fallbacks are gone the retried reaps remove every tombstone.
//! Without the reap's fallback check this test finds the keys back.

mod common;
use common::procs::{form_cluster, test_dir, Client, NodeProc};
use common::{admin, wait_for};
use std::time::Duration;

const KEYS: usize = 48;

/// The count of `vnodes held here for other owners` in `ring-status`.
fn held_for_others(node: &str) -> usize {
    let (_, text) = admin(node, &["ring-status"]);
    text.lines()
        .find_map(|l| {
            l.strip_prefix("vnodes held here for other owners (hinted handoff pending): ")
        })
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(usize::MAX)
}

/// Tombstones of bucket `b` left anywhere (`aae fold find-tombs`).
fn tombstones(node: &str) -> usize {
    let (ok, out) = admin(node, &["aae", "fold", "find-tombs", "--bucket", "b"]);
    assert!(ok, "find-tombs: {out}");
    out.lines().filter(|l| !l.trim().is_empty()).count()
}

#[test]
fn a_fallback_handing_back_an_older_write_after_a_delete_does_not_resurrect_it() {
    let (root, _guard) = test_dir();
    let cfg = root.join("node.toml");
    std::fs::write(&cfg, "delete_mode = \"immediate\"\naae_interval_secs = 0\n").expect("config");
    let mut nodes: Vec<NodeProc> = (1..=3).map(|i| NodeProc::new(&root, i)).collect();
    for n in nodes.iter_mut() {
        n.config = Some(cfg.clone());
        n.start();
    }
    form_cluster(&nodes);
    for n in &nodes {
        let (ok, out) = admin(&n.cluster, &["transfer-limit", "0"]);
        assert!(ok && out.contains("transfer limit: 0"), "{out}");
    }
    assert!(nodes[2].terminate(), "n3 stops cleanly");
    let mut c = Client::connect(&nodes[0].pb);
    // Writes go on until the coordinator treats n3 as down and sends its
    // replicas to fallbacks; every key is then written once more so that
    // each has a fallback copy.
    wait_for("n3 seen down", Duration::from_secs(30), || {
        admin(&nodes[0].cluster, &["member-status"])
            .1
            .lines()
            .any(|l| l.contains("n3@") && l.contains("down"))
    });
    for i in 0..KEYS {
        c.put(&format!("k{i}"), &format!("v{i}")).expect("put");
    }
    let held = held_for_others(&nodes[0].cluster) + held_for_others(&nodes[1].cluster);
    assert!(held > 0, "no fallback vnode took n3's replicas");
    nodes[2].config = Some(cfg.clone());
    nodes[2].start();
    let (ok, out) = admin(&nodes[2].cluster, &["transfer-limit", "0"]);
    assert!(ok, "{out}");
    wait_for("n3 seen up", Duration::from_secs(30), || {
        !admin(&nodes[0].cluster, &["member-status"])
            .1
            .lines()
            .any(|l| l.contains("n3@") && l.contains("down"))
    });
    // Every replica is a primary again; the fallbacks still hold v{i}.
    for i in 0..KEYS {
        c.delete(&format!("k{i}")).expect("delete");
    }
    std::thread::sleep(Duration::from_secs(2)); // the immediate reaps run (and are put off)
    let still = held_for_others(&nodes[0].cluster) + held_for_others(&nodes[1].cluster);
    assert!(
        still > 0,
        "handoffs were paused, yet no fallback is left (of {held})"
    );
    for n in &nodes {
        let (ok, out) = admin(&n.cluster, &["transfer-limit", "2"]);
        assert!(ok, "{out}");
    }
    wait_for("the fallbacks handed off", Duration::from_secs(60), || {
        nodes.iter().all(|n| held_for_others(&n.cluster) == 0)
    });
    let mut back = std::collections::BTreeSet::new();
    for n in &nodes {
        let mut c = Client::connect(&n.pb);
        for i in 0..KEYS {
            if c.get(&format!("k{i}"), 3, 3, true).expect("get").is_some() {
                back.insert(i);
            }
        }
    }
    assert!(
        back.is_empty(),
        "{} of {KEYS} deleted keys came back: {back:?}",
        back.len()
    );
    // The reaps put off while the fallbacks held copies are retried (1 s,
    // then doubling to `REAP_RETRY_MAX`, 60 s: with delete_mode immediate
    // the 8 attempts come 0, 1, 3, 7, 15, 31, 63 and 123 s after the
    // delete) and remove every tombstone. On a loaded CI machine the
    // handoffs and the reads above can take past one attempt, and the next
    // may come 60 s later: wait past the last (a CI run timed out at 60 s
    // here).
    wait_for("the retried reaps", Duration::from_secs(150), || {
        tombstones(&nodes[0].cluster) == 0
    });
    for n in nodes.iter_mut() {
        n.assert_running();
    }
}
