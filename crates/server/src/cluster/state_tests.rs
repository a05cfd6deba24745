//! Unit tests of the cluster state ([`super`]): the claim's balance and
//! spacing, join / leave / commit / transfer, and the changes for nodes
//! replaced or gone (replace, force-replace, force-remove, down). The
//! property tests are `crates/server/tests/cluster_state.rs`.

use super::*;

fn names(n: usize) -> Vec<String> {
    (0..n).map(|i| format!("n{i}")).collect()
}

/// Windows of `n` consecutive partitions with a node twice.
fn violations(owners: &[String], n: usize) -> usize {
    let size = owners.len();
    (0..size)
        .filter(|p| {
            let mut seen: Vec<&String> = (0..n).map(|d| &owners[(p + d) % size]).collect();
            seen.sort();
            seen.dedup();
            seen.len() != n
        })
        .count()
}

#[test]
fn claim_balances_and_spaces() {
    for k in 1..=6usize {
        for size in [8usize, 16, 64, 128] {
            let cur = vec!["n0".to_string(); size];
            let owners = claim(&cur, &names(k));
            assert_eq!(owners.len(), size);
            for m in names(k) {
                let c = owners.iter().filter(|o| **o == m).count();
                assert!(
                    c == size / k || c == size / k + 1,
                    "k={k} size={size} {m} {c}"
                );
            }
            if k >= 3 {
                // A perfect spread needs size % k == 0; else only the
                // ring's wrap may break it.
                let v = violations(&owners, 3);
                let allowed = if size % k == 0 { 0 } else { 2 };
                assert!(
                    v <= allowed,
                    "k={k} size={size} {v} bad windows: {owners:?}"
                );
            }
        }
    }
}

#[test]
fn claim_moves_little_on_join() {
    let three = claim(&vec!["n0".to_string(); 64], &names(3));
    let four = claim(&three, &names(4));
    let moved = three.iter().zip(&four).filter(|(a, b)| a != b).count();
    assert!(moved <= 24, "moved {moved} of 64 (16 is the least)");
    assert!(violations(&four, 3) == 0, "{four:?}");
}

#[test]
fn join_plan_commit_transfer() {
    let mut s = ClusterState::new("a", "127.0.0.1:1", "", 16, "c1".into());
    assert!(s.add_joining("b", "127.0.0.1:2", "", 32).is_err());
    s.add_joining("b", "127.0.0.1:2", "", 16).ok();
    s.add_joining("c", "127.0.0.1:3", "", 16).ok();
    assert_eq!(s.claimant(), Some("a"));
    let plan = s.plan();
    assert!(!plan.is_empty());
    let v = s.version;
    let done = s.commit().unwrap_or_default();
    assert_eq!(done, plan);
    assert!(s.version > v);
    assert_eq!(s.owned_by("a").len(), 16, "owners move only on transfer");
    for (p, from, to) in &plan {
        assert!(s.transfer_done(*p, from, to));
    }
    assert!(s.next.is_empty());
    for n in ["a", "b", "c"] {
        let c = s.owned_by(n).len();
        assert!(c == 5 || c == 6, "{n} owns {c}");
    }
    s.check().ok();
    assert!(s.check().is_ok());
    // leave: c's partitions move away, then c is removed
    s.stage_leave("c").ok();
    let plan = s.commit().unwrap_or_default();
    let others = plan.iter().filter(|(_, from, _)| from != "c").count();
    assert!(others <= 4, "{others} moves not from the leaver: {plan:?}");
    for (p, from, to) in &plan {
        assert!(s.transfer_done(*p, from, to));
    }
    assert!(!s.members.contains_key("c"));
    assert!(s.stage_leave("b").is_ok());
    assert!(s.stage_leave("a").is_err(), "last valid member stays");
}

/// A committed three-node cluster `a`, `b`, `c` on 16 partitions,
/// every transfer done, and `d` joining.
fn three_and_a_joiner() -> ClusterState {
    let mut s = ClusterState::new("a", "127.0.0.1:1", "", 16, "c1".into());
    for n in ["b", "c"] {
        s.add_joining(n, &format!("{n}:1"), "", 16).unwrap();
    }
    for (p, from, to) in s.commit().unwrap() {
        assert!(s.transfer_done(p, &from, &to));
    }
    s.add_joining("d", "d:1", "", 16).unwrap();
    s
}

#[test]
fn replace_hands_exactly_the_old_nodes_partitions_to_the_new() {
    let mut s = three_and_a_joiner();
    let c_owned = s.owned_by("c");
    assert!(s.stage_replace("c", "x").is_err(), "not a member");
    assert!(s.stage_replace("c", "b").is_err(), "not joining");
    s.stage_replace("c", "d").unwrap();
    assert!(s.stage_replace("b", "d").is_err(), "d already replaces c");
    assert!(s.stage_leave("c").is_err(), "c already goes");
    let plan = s.plan();
    assert_eq!(
        plan,
        c_owned
            .iter()
            .map(|p| (*p, "c".to_string(), "d".to_string()))
            .collect::<Vec<_>>(),
        "only c's partitions move, all to d"
    );
    assert!(plan.iter().all(|(p, f, _)| !s.is_forced_move(*p, f)));
    s.commit().unwrap();
    assert_eq!(s.members["c"].status, MemberStatus::Leaving);
    assert_eq!(s.members["d"].status, MemberStatus::Valid);
    assert_eq!(s.owned_by("c"), c_owned, "owners move only on transfer");
    for (p, from, to) in plan {
        assert!(s.transfer_done(p, &from, &to));
    }
    assert!(!s.members.contains_key("c"), "the idle leaver goes");
    assert_eq!(s.owned_by("d"), c_owned);
    assert!(s.check().is_ok());
}

#[test]
fn force_replace_and_force_remove_reassign_at_commit() {
    let mut s = three_and_a_joiner();
    let c_owned = s.owned_by("c");
    assert!(
        s.stage_force_replace("a", "d", "a").is_err(),
        "not the claimant"
    );
    assert!(
        s.stage_force_replace("d", "c", "a").is_err(),
        "d is joining"
    );
    s.stage_force_replace("c", "d", "a").unwrap();
    let plan = s.plan();
    assert!(plan.iter().all(|(p, f, _)| s.is_forced_move(*p, f)));
    s.commit().unwrap();
    assert!(!s.members.contains_key("c"), "removed at once");
    assert_eq!(s.owned_by("d"), c_owned, "owned at once, no transfer");
    assert!(s.next.is_empty());
    assert!(s.check().is_ok());

    // force-remove d: its partitions go to a and b at once.
    assert!(s.stage_force_remove("a", "a").is_err(), "not the claimant");
    s.stage_force_remove("d", "a").unwrap();
    let plan = s.plan();
    assert!(plan.iter().any(|(_, f, _)| f == "d"));
    s.commit().unwrap();
    assert!(!s.members.contains_key("d"));
    assert_eq!(s.owned_by("a").len() + s.owned_by("b").len(), 16);
    assert!(s.check().is_ok());
    assert!(s.next.values().all(|n| n == "a" || n == "b"));
    // The last valid member stays.
    s.stage_force_remove("b", "a").unwrap();
    s.commit().unwrap();
    assert!(s.stage_force_remove("a", "b").is_err());
}

#[test]
fn a_pending_transfer_of_a_removed_node_is_settled_at_commit() {
    let mut s = three_and_a_joiner();
    s.commit().unwrap(); // d joins: transfers to d pending
    let to_d: Vec<u32> = s
        .next
        .iter()
        .filter(|(_, n)| *n == "d")
        .map(|(p, _)| *p)
        .collect();
    assert!(!to_d.is_empty());
    s.stage_force_remove("d", "a").unwrap();
    s.commit().unwrap();
    assert!(s.check().is_ok());
    for p in to_d {
        assert_ne!(s.owner(p), "d");
        assert_ne!(s.next.get(&p).map(String::as_str), Some("d"));
    }
    assert!(s.next.values().all(|n| s.members.contains_key(n)));
}

#[test]
fn down_moves_the_claimant_and_up_brings_it_back() {
    let mut s = three_and_a_joiner();
    assert_eq!(s.claimant(), Some("a"));
    assert!(s.mark_down("b", "b").is_err(), "not itself");
    assert!(s.mark_down("d", "b").is_err(), "d is joining");
    let v = s.version;
    s.mark_down("a", "b").unwrap();
    assert!(s.version > v);
    assert_eq!(s.members["a"].status.name(), "down");
    assert_eq!(s.claimant(), Some("b"));
    assert!(s.stage_leave("a").is_err(), "a down member cannot leave");
    // A down member keeps its partitions in a plan.
    let a_owned = s.owned_by("a");
    assert!(s
        .plan()
        .iter()
        .all(|(_, f, _)| f != "a" || !a_owned.is_empty()));
    s.stage_force_remove("a", "b").unwrap();
    s.clear_staged();
    assert!(s.mark_up("a"));
    assert!(!s.mark_up("a"), "already valid");
    assert_eq!(s.claimant(), Some("a"));
}
