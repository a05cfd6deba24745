//! The cluster-wide views of handoff for `basalt admin`: `transfers`,
//! `handoff summary|details|config` and `ringready`, as Riak's
//! `riak admin` commands of those names.
//!
//! The node asked gathers one [`RingView`] from every member: its own,
//! and each other member's over the cluster port ([`RING_VIEW_SERVICE`],
//! a [`Msg::Service`] with an empty body, answered by
//! [`super::cluster`]). A member that does not answer is listed as such,
//! never waited for longer than [`CONTROL_TIMEOUT`]. Pending ownership
//! transfers come from the asking node's cluster state; what runs (and
//! which vnodes wait for a hinted handoff) from each member's report.
//! Each view is data ([`ClusterTransfers`]) rendered as text or JSON, so
//! both forms hold the same facts.

use crate::cluster::{Msg, Reply, CONTROL_TIMEOUT};
use crate::gossip::{PendingTransfer, RingView};
use crate::node::Node;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write as _;

/// The [`Msg::Service`] name of "your [`RingView`]".
pub const RING_VIEW_SERVICE: &str = "admin_ring_view";

/// A member that gave no report, and why.
#[derive(Debug, Clone, Serialize)]
pub struct Silent {
    /// Its node name.
    pub node: String,
    /// Why there is no report.
    pub reason: String,
}

/// Handoff across the cluster, as seen from one node.
#[derive(Debug, Clone, Serialize)]
pub struct ClusterTransfers {
    /// The node asked.
    pub node: String,
    /// Its cluster state's version.
    pub ring_version: u64,
    /// The members, in name order.
    pub members: Vec<String>,
    /// Pending ownership transfers (from the asked node's state).
    pub pending: Vec<PendingTransfer>,
    /// Each member's report that came back, in name order.
    pub reports: Vec<RingView>,
    /// Members that gave none.
    pub silent: Vec<Silent>,
    /// The owner of each partition (from the asked node's state).
    #[serde(skip)]
    pub owners: Vec<String>,
}

/// A node's waiting handoffs: (ownership transfers it is to send, vnodes
/// it holds for another owner).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Waiting {
    /// Ownership transfers this node still has to send.
    pub ownership: usize,
    /// Vnodes held here for another owner (hinted handoff pending).
    pub hinted: usize,
}

/// One node's line of `handoff summary`: active transfers (sending or
/// receiving) and all known ones, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct SummaryRow {
    /// Ownership handoffs running to or from the node.
    pub ownership_active: usize,
    /// Ownership transfers pending to or from it.
    pub ownership_known: usize,
    /// Hinted handoffs running to or from it.
    pub hinted_active: usize,
    /// Vnodes held for it elsewhere or by it for others.
    pub hinted_known: usize,
}

impl SummaryRow {
    /// Active transfers of every kind.
    pub fn total(&self) -> usize {
        self.ownership_active + self.hinted_active
    }
}

impl ClusterTransfers {
    /// What each member waits to hand off, by name.
    pub fn waiting(&self) -> BTreeMap<String, Waiting> {
        let mut out: BTreeMap<String, Waiting> = BTreeMap::new();
        for t in &self.pending {
            out.entry(t.from.clone()).or_default().ownership += 1;
        }
        for r in &self.reports {
            if !r.fallbacks.is_empty() {
                out.entry(r.node.clone()).or_default().hinted += r.fallbacks.len();
            }
        }
        out
    }

    /// `transfers`: what waits, then what runs (Riak's layout).
    pub fn text(&self) -> String {
        let mut out = String::new();
        let waiting = self.waiting();
        if waiting.is_empty() {
            out.push_str("No transfers active\n");
        }
        for (node, w) in &waiting {
            let _ = writeln!(
                out,
                "{node} waiting to hand off {} partitions ({} ownership, {} hinted)",
                w.ownership + w.hinted,
                w.ownership,
                w.hinted
            );
        }
        out.push_str("\nActive Transfers:\n\n");
        for r in &self.reports {
            for h in &r.handoffs {
                let _ = writeln!(out, "transfer type: {}", h.kind);
                let _ = writeln!(out, "partition: {}", h.partition);
                let _ = writeln!(out, "source node: {}", h.source);
                let _ = writeln!(out, "target node: {}", h.target);
                let _ = writeln!(out, "objects transferred: {}", h.sent);
                if h.done {
                    out.push_str("finished, waiting for the ring to move\n");
                }
                out.push('\n');
            }
        }
        for s in &self.silent {
            let _ = writeln!(out, "Node {} could not be contacted: {}", s.node, s.reason);
        }
        out
    }

    /// `transfers` as JSON.
    pub fn json(&self) -> serde_json::Value {
        let waiting: Vec<serde_json::Value> = self
            .waiting()
            .into_iter()
            .map(|(node, w)| {
                serde_json::json!({"node": node, "ownership": w.ownership, "hinted": w.hinted})
            })
            .collect();
        let active: Vec<&crate::gossip::HandoffRow> =
            self.reports.iter().flat_map(|r| &r.handoffs).collect();
        serde_json::json!({
            "node": self.node,
            "ring_version": self.ring_version,
            "waiting": waiting,
            "active": active,
            "pending": self.pending,
            "silent": self.silent,
        })
    }

    /// `handoff summary`'s rows: every member that reported.
    pub fn summary(&self) -> BTreeMap<String, SummaryRow> {
        let mut rows: BTreeMap<String, SummaryRow> = self
            .reports
            .iter()
            .map(|r| (r.node.clone(), SummaryRow::default()))
            .collect();
        let mut bump = |node: &str, f: &dyn Fn(&mut SummaryRow)| {
            if let Some(r) = rows.get_mut(node) {
                f(r);
            }
        };
        for t in &self.pending {
            bump(&t.from, &|r| r.ownership_known += 1);
            bump(&t.to, &|r| r.ownership_known += 1);
        }
        let owner = |p: u32| self.owners.get(p as usize).map(String::as_str);
        for r in &self.reports {
            for p in &r.fallbacks {
                bump(&r.node, &|x| x.hinted_known += 1);
                if let Some(o) = owner(*p) {
                    bump(o, &|x| x.hinted_known += 1);
                }
            }
            for h in &r.handoffs {
                let f: &dyn Fn(&mut SummaryRow) = if h.kind == "ownership" {
                    &|x| x.ownership_active += 1
                } else {
                    &|x| x.hinted_active += 1
                };
                bump(&h.source, f);
                bump(&h.target, f);
            }
        }
        rows
    }
}

impl ClusterTransfers {
    /// `handoff summary` (Riak's table: active transfers per node and, in
    /// parentheses, all known ones).
    pub fn summary_text(&self) -> String {
        let mut out = String::from(
            "Each cell indicates active transfers and, in parenthesis, the number of all known transfers.\nThe 'Total' column is the sum of the active transfers.\n",
        );
        let _ = writeln!(
            out,
            "{:<28} {:>5} {:>11} {:>11}",
            "Node", "Total", "Ownership", "Hinted"
        );
        for (node, r) in self.summary() {
            let _ = writeln!(
                out,
                "{node:<28} {:>5} {:>11} {:>11}",
                r.total(),
                format!("{} ({})", r.ownership_active, r.ownership_known),
                format!("{} ({})", r.hinted_active, r.hinted_known),
            );
        }
        for s in &self.silent {
            let _ = writeln!(out, "Node {} could not be contacted: {}", s.node, s.reason);
        }
        out
    }

    /// `handoff summary` as JSON.
    pub fn summary_json(&self) -> serde_json::Value {
        let nodes: Vec<serde_json::Value> = self
            .summary()
            .into_iter()
            .map(|(node, r)| {
                serde_json::json!({
                    "node": node,
                    "total": r.total(),
                    "ownership_active": r.ownership_active,
                    "ownership_known": r.ownership_known,
                    "hinted_active": r.hinted_active,
                    "hinted_known": r.hinted_known,
                })
            })
            .collect();
        serde_json::json!({"nodes": nodes, "silent": self.silent})
    }

    /// `handoff details`: one row per running handoff.
    pub fn details_text(&self) -> String {
        let mut out = String::new();
        let rows: Vec<&crate::gossip::HandoffRow> =
            self.reports.iter().flat_map(|r| &r.handoffs).collect();
        if rows.is_empty() {
            out.push_str("No ongoing transfers.\n");
        } else {
            out.push_str("Type Key: O = Ownership, H = Hinted\n");
            let _ = writeln!(
                out,
                "{:<4} {:<32} {:<32} {:>10} Finished",
                "Type", "Source:ID", "Target:ID", "Objects"
            );
            for h in rows {
                let _ = writeln!(
                    out,
                    "{:<4} {:<32} {:<32} {:>10} {}",
                    if h.kind == "ownership" { "O" } else { "H" },
                    format!("{}:{}", h.source, h.partition),
                    format!("{}:{}", h.target, h.partition),
                    h.sent,
                    if h.done { "yes" } else { "no" },
                );
            }
        }
        for s in &self.silent {
            let _ = writeln!(out, "Node {} could not be contacted: {}", s.node, s.reason);
        }
        out
    }

    /// `handoff details` as JSON.
    pub fn details_json(&self) -> serde_json::Value {
        let rows: Vec<&crate::gossip::HandoffRow> =
            self.reports.iter().flat_map(|r| &r.handoffs).collect();
        serde_json::json!({"transfers": rows, "silent": self.silent})
    }

    /// Whether every member answered with the asking node's ring version
    /// (Riak's `ringready`), and the text saying so.
    pub fn ringready(&self) -> (bool, String) {
        if !self.silent.is_empty() {
            let down: Vec<&str> = self.silent.iter().map(|s| s.node.as_str()).collect();
            return (
                false,
                format!("FALSE {down:?} down.  All nodes need to be up to check.\n"),
            );
        }
        let differ: Vec<String> = self
            .reports
            .iter()
            .filter(|r| r.ring_version != self.ring_version)
            .map(|r| format!("{} has version {}", r.node, r.ring_version))
            .collect();
        if differ.is_empty() {
            (
                true,
                format!("TRUE All nodes agree on the ring {:?}\n", self.members),
            )
        } else {
            (
                false,
                format!(
                    "FALSE Ring not ready: {} has version {}, {}\n",
                    self.node,
                    self.ring_version,
                    differ.join(", ")
                ),
            )
        }
    }

    /// `ringready` as JSON.
    pub fn ringready_json(&self) -> serde_json::Value {
        let versions: BTreeMap<&str, u64> = self
            .reports
            .iter()
            .map(|r| (r.node.as_str(), r.ring_version))
            .collect();
        serde_json::json!({
            "ready": self.ringready().0,
            "members": self.members,
            "ring_version": self.ring_version,
            "versions": versions,
            "silent": self.silent,
        })
    }
}

impl Node {
    /// Gathers [`ClusterTransfers`]: this node's state and every member's
    /// [`RingView`] (the others' asked at once, over the cluster port).
    pub async fn cluster_transfers(&self) -> ClusterTransfers {
        let me = self.router.cluster.me().to_string();
        let state = self.router.cluster.state();
        let mine = self.gossip.ring_view();
        let others: Vec<String> = state
            .members
            .keys()
            .filter(|n| **n != me)
            .cloned()
            .collect();
        let msg = Msg::Service {
            service: RING_VIEW_SERVICE.to_string(),
            body: Vec::new(),
        };
        let calls = others.iter().map(|n| {
            let msg = &msg;
            async move { (n, self.router.cluster.call(n, msg, CONTROL_TIMEOUT).await) }
        });
        let mut reports = vec![mine];
        let mut silent = Vec::new();
        for (node, r) in futures_util::future::join_all(calls).await {
            let report = match r {
                Ok(Reply::Service(Ok(body))) => crate::cluster::decode_body::<RingView>(&body),
                Ok(Reply::Service(Err(e))) | Ok(Reply::Refused(e)) => Err(e),
                Ok(other) => Err(format!("unexpected reply {other:?}")),
                Err(e) => Err(e.to_string()),
            };
            match report {
                Ok(v) => reports.push(v),
                Err(reason) => silent.push(Silent {
                    node: node.clone(),
                    reason,
                }),
            }
        }
        reports.sort_by(|a, b| a.node.cmp(&b.node));
        ClusterTransfers {
            node: me,
            ring_version: state.version,
            members: state.members.keys().cloned().collect(),
            pending: state
                .next
                .iter()
                .map(|(p, to)| PendingTransfer {
                    partition: *p,
                    from: state.owner(*p).to_string(),
                    to: to.clone(),
                })
                .collect(),
            reports,
            silent,
            owners: state.owners.clone(),
        }
    }

    /// `handoff config`: this node's handoff settings.
    pub fn handoff_config(&self) -> serde_json::Value {
        let c = self.config();
        serde_json::json!({
            "node": c.node_name,
            "transfer_limit": self.handoff.transfer_limit(),
            "transfer_limit_config": c.transfer_limit,
            "max_transfer_limit": crate::handoff::MAX_TRANSFER_LIMIT,
            "handoff_listen": c.cluster_listen,
            "handoff_batch_objects": crate::handoff::HANDOFF_BATCH,
            "handoff_interval_ms": crate::handoff::HANDOFF_INTERVAL.as_millis() as u64,
        })
    }
}

/// `handoff config` as text: one `name: value` line per setting.
pub fn handoff_config_text(v: &serde_json::Value) -> String {
    let mut out = String::new();
    if let Some(map) = v.as_object() {
        for (k, v) in map {
            let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
            let _ = writeln!(out, "{k}: {v}");
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gossip::HandoffRow;

    fn view(node: &str, version: u64, fallbacks: Vec<u32>, handoffs: Vec<HandoffRow>) -> RingView {
        RingView {
            node: node.into(),
            claimant: Some("a".into()),
            ring_version: version,
            ring_size: 8,
            pending: Vec::new(),
            fallbacks,
            handoffs,
            transfer_limit: 2,
            unreachable: Vec::new(),
        }
    }

    fn sample() -> ClusterTransfers {
        let h = HandoffRow {
            partition: 3,
            kind: "ownership".into(),
            source: "a".into(),
            target: "b".into(),
            sent: 40,
            done: false,
        };
        ClusterTransfers {
            node: "a".into(),
            ring_version: 7,
            members: vec!["a".into(), "b".into(), "c".into()],
            pending: vec![
                PendingTransfer {
                    partition: 3,
                    from: "a".into(),
                    to: "b".into(),
                },
                PendingTransfer {
                    partition: 5,
                    from: "a".into(),
                    to: "b".into(),
                },
            ],
            reports: vec![view("a", 7, vec![], vec![h]), view("b", 7, vec![6], vec![])],
            silent: vec![Silent {
                node: "c".into(),
                reason: "refused".into(),
            }],
            owners: ["a", "a", "b", "a", "b", "a", "c", "b"]
                .map(String::from)
                .to_vec(),
        }
    }

    #[test]
    fn transfers_count_what_waits_and_what_runs() {
        let t = sample();
        let w = t.waiting();
        assert_eq!(
            w["a"],
            Waiting {
                ownership: 2,
                hinted: 0
            }
        );
        assert_eq!(
            w["b"],
            Waiting {
                ownership: 0,
                hinted: 1
            }
        );
        let text = t.text();
        assert!(
            text.contains("a waiting to hand off 2 partitions (2 ownership, 0 hinted)"),
            "{text}"
        );
        assert!(
            text.contains("b waiting to hand off 1 partitions (0 ownership, 1 hinted)"),
            "{text}"
        );
        assert!(
            text.contains(
                "partition: 3\nsource node: a\ntarget node: b\nobjects transferred: 40\n"
            ),
            "{text}"
        );
        assert!(
            text.contains("Node c could not be contacted: refused"),
            "{text}"
        );
        let j = t.json();
        assert_eq!(j["waiting"].as_array().map(Vec::len), Some(2));
        assert_eq!(j["active"][0]["sent"], 40);
        assert_eq!(j["silent"][0]["node"], "c");
    }

    #[test]
    fn summary_counts_both_ends() {
        let s = sample().summary();
        // a sends 3 (running) and 5; b receives both; b holds 6 for c (silent: no row).
        assert_eq!(
            s["a"],
            SummaryRow {
                ownership_active: 1,
                ownership_known: 2,
                hinted_active: 0,
                hinted_known: 0
            }
        );
        assert_eq!(
            s["b"],
            SummaryRow {
                ownership_active: 1,
                ownership_known: 2,
                hinted_active: 0,
                hinted_known: 1
            }
        );
        assert!(!s.contains_key("c"));
        let text = sample().summary_text();
        assert!(text.contains("1 (2)"), "{text}");
        assert!(
            sample().details_text().contains("O    a:3"),
            "{}",
            sample().details_text()
        );
    }

    #[test]
    fn ringready_needs_every_member_at_one_version() {
        let mut t = sample();
        assert!(!t.ringready().0, "c is silent");
        t.silent.clear();
        t.members.pop();
        assert_eq!(
            t.ringready(),
            (
                true,
                "TRUE All nodes agree on the ring [\"a\", \"b\"]\n".into()
            )
        );
        t.reports[1].ring_version = 6;
        let (ok, text) = t.ringready();
        assert!(!ok && text.contains("b has version 6"), "{text}");
        assert_eq!(t.ringready_json()["ready"], false);
    }
}
