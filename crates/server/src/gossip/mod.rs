//! The control plane of a node: serving cluster messages, gossip, and the
//! admin operations (`join`, `leave`, `plan`, `commit`, `clear`,
//! `member-status`, `ring-status`, `transfer-limit`).

use crate::cluster::{
    AdminCmd, ClusterState, Msg, Reply, Staged, CONTROL_TIMEOUT, GOSSIP_INTERVAL,
};
use crate::handoff::HandoffService;
use crate::kv::Kv;
use crate::security::Security;
use std::fmt::Write as _;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Notify;

/// Code of a cluster admin request (Basalt-only, served on the cluster
/// port): the body is the command line, e.g. `join 127.0.0.1:8099`, `plan`, `commit`, `leave`,
/// `leave NODE`, `clear`, `member-status`, `ring-status`.
pub const ADMIN_CLUSTER_REQ: u8 = 247;
/// Its reply: the command's text output.
pub const ADMIN_CLUSTER_RESP: u8 = 248;

/// The cluster port a node name's host is dialled at by `cluster join`
/// (the default `cluster_listen` port; Riak's handoff port).
pub const DEFAULT_CLUSTER_PORT: u16 = 8099;

/// The address `cluster join TARGET` dials: a node name `name@host` (as
/// Riak users type it, e.g. `n1@127.0.0.1`) is its host at
/// [`DEFAULT_CLUSTER_PORT`]; anything else is a cluster address as it is.
pub fn join_address(target: &str) -> String {
    match target.split_once('@') {
        Some((_, host)) if host.contains(':') && !host.starts_with('[') => {
            format!("[{host}]:{DEFAULT_CLUSTER_PORT}")
        }
        Some((_, host)) => format!("{host}:{DEFAULT_CLUSTER_PORT}"),
        None => target.to_string(),
    }
}

/// Timeout of one gossip exchange (short: a silent peer is soon down).
const GOSSIP_TIMEOUT: Duration = Duration::from_millis(1000);

/// Membership's service: gossip rounds, the claimant's changes (join,
/// leave, plan, commit, clear), the cluster's views (member and ring
/// status), and the bucket metadata and security state spread with every
/// gossip. It dereferences to the [`Kv`] it runs on.
pub struct Gossip {
    kv: Arc<Kv>,
    /// Users, grants and sources, spread with the gossip.
    pub(crate) security: Arc<Security>,
    /// Handoff (transfer limit, transfers in the ring status).
    pub(crate) handoff: Arc<HandoffService>,
    /// Wakes the gossip loop for a round now.
    pub(crate) gossip_now: Arc<Notify>,
}

impl std::ops::Deref for Gossip {
    type Target = Kv;
    fn deref(&self) -> &Kv {
        &self.kv
    }
}

impl Gossip {
    /// Gossip over `kv`'s cluster view.
    pub fn new(
        kv: Arc<Kv>,
        security: Arc<Security>,
        handoff: Arc<HandoffService>,
        gossip_now: Arc<Notify>,
    ) -> Gossip {
        Gossip {
            kv,
            security,
            handoff,
            gossip_now,
        }
    }
}

impl Gossip {
    /// Applies `change` here if this node is the claimant, else sends
    /// `forward` to the claimant. Returns the admin text of a forwarded
    /// admin command (empty otherwise).
    pub(crate) async fn at_claimant(
        &self,
        forward: Msg,
        change: impl FnOnce(&mut ClusterState) -> Result<(), crate::cluster::ClusterError>,
    ) -> Result<String, String> {
        let claimant = self
            .router
            .cluster
            .with_state(|s| s.claimant().map(str::to_string))
            .ok_or("the cluster has no valid member to act as claimant")?;
        if claimant == self.router.cluster.me() {
            self.router
                .cluster
                .update(change)
                .map_err(|e| e.to_string())?;
            self.push_gossip().await;
            return Ok(String::new());
        }
        // A join is forwarded as itself; the claimant answers with its state.
        match self
            .router
            .cluster
            .call(&claimant, &forward, CONTROL_TIMEOUT)
            .await
        {
            Ok(Reply::State(s)) => {
                self.router.cluster.adopt(&s);
                Ok(String::new())
            }
            Ok(Reply::Text(t)) => Ok(t),
            Ok(Reply::Ok) => Ok(String::new()),
            Ok(Reply::Refused(e)) => Err(e),
            Ok(other) => Err(format!("unexpected reply from the claimant: {other:?}")),
            Err(e) => Err(format!("claimant {claimant}: {e}")),
        }
    }

    /// Runs an admin command at the claimant. `down NODE` of the claimant
    /// itself runs here (the claimant cannot answer), once this node sees
    /// it unreachable.
    pub async fn admin(&self, cmd: AdminCmd) -> Result<String, String> {
        let claimant = self
            .router
            .cluster
            .with_state(|s| s.claimant().map(str::to_string))
            .ok_or("the cluster has no valid member to act as claimant")?;
        let me = self.router.cluster.me().to_string();
        if let AdminCmd::Down(n) = &cmd {
            if *n == me {
                return Err(format!("{n} cannot mark itself down: ask another member"));
            }
            if self.router.cluster.is_up(n) {
                return Err(format!(
                    "{n} is up (it answers {me}); only an unreachable member can be marked down"
                ));
            }
            if *n == claimant {
                self.router
                    .cluster
                    .update(|s| s.mark_down(n, &me))
                    .map_err(|e| e.to_string())?;
                self.push_gossip().await;
                return Ok(format!("Success: {n:?} marked as down\n"));
            }
        }
        if claimant != me {
            return match self
                .router
                .cluster
                .call(&claimant, &Msg::Admin(cmd), CONTROL_TIMEOUT)
                .await
            {
                Ok(Reply::Text(t)) => {
                    self.gossip_round().await;
                    Ok(t)
                }
                Ok(Reply::Refused(e)) => Err(e),
                Ok(other) => Err(format!("unexpected reply from the claimant: {other:?}")),
                Err(e) => Err(format!("claimant {claimant}: {e}")),
            };
        }
        let text = match cmd {
            AdminCmd::Leave(n) => {
                self.router
                    .cluster
                    .update(|s| s.stage_leave(&n))
                    .map_err(|e| e.to_string())?;
                format!("Success: staged leave request for {n}\n")
            }
            AdminCmd::Clear => {
                self.router.cluster.update(ClusterState::clear_staged);
                "Cleared staged cluster changes\n".to_string()
            }
            AdminCmd::Replace(old, new) => {
                self.router
                    .cluster
                    .update(|s| s.stage_replace(&old, &new))
                    .map_err(|e| e.to_string())?;
                format!("Success: staged replacement of {old} with {new}\n")
            }
            AdminCmd::ForceReplace(old, new) => {
                self.router
                    .cluster
                    .update(|s| s.stage_force_replace(&old, &new, &me))
                    .map_err(|e| e.to_string())?;
                format!("Success: staged forced replacement of {old} with {new}\n")
            }
            AdminCmd::ForceRemove(n) => {
                self.router
                    .cluster
                    .update(|s| s.stage_force_remove(&n, &me))
                    .map_err(|e| e.to_string())?;
                format!("Success: staged remove request for {n}\n")
            }
            AdminCmd::Down(n) => {
                self.router
                    .cluster
                    .update(|s| s.mark_down(&n, &me))
                    .map_err(|e| e.to_string())?;
                format!("Success: {n:?} marked as down\n")
            }
            AdminCmd::Plan => plan_text(&self.router.cluster.state()),
            AdminCmd::PlanJson => plan_json(&self.router.cluster.state()).to_string(),
            AdminCmd::Commit => {
                let plan = self
                    .router
                    .cluster
                    .update(ClusterState::commit)
                    .map_err(|e| e.to_string())?;
                format!(
                    "Cluster changes committed: {} partition transfers scheduled\n",
                    plan.len()
                )
            }
        };
        self.push_gossip().await;
        Ok(text)
    }

    /// Joins the cluster of the node at `target` (a cluster address, or a
    /// node name `name@host`: see [`join_address`]): refused if this node
    /// is already in a cluster with other members.
    pub async fn join(&self, target: &str) -> Result<String, String> {
        let addr = &join_address(target);
        let (members, me) = self.router.cluster.with_state(|s| {
            let m = s.members.get(self.router.cluster.me()).cloned();
            (s.members.len(), m)
        });
        if members > 1 {
            return Err(format!(
                "{} is already a member of a cluster of {members} nodes; it must leave it first",
                self.router.cluster.me()
            ));
        }
        let me = me.ok_or("this node is not a member of its own state")?;
        if me.cluster.is_empty() {
            // The others would add it with nowhere to dial it.
            return Err(format!(
                "{} has no cluster address to give the cluster yet (its cluster listener is not up): try again once it is",
                self.router.cluster.me()
            ));
        }
        let msg = Msg::Join {
            node: self.router.cluster.me().to_string(),
            addr: me.addr.clone(),
            http: me.http.clone(),
            cluster: me.cluster.clone(),
            ring_size: self.router.ring.size(),
        };
        match self
            .router
            .cluster
            .peers
            .call(addr, &msg, CONTROL_TIMEOUT)
            .await
        {
            Ok(Reply::State(s)) => {
                if !s.members.contains_key(self.router.cluster.me()) {
                    return Err("the cluster answered without adding this node".into());
                }
                s.check().map_err(|e| e.to_string())?;
                self.router.cluster.replace(s);
                Ok(format!(
                    "Success: staged join request for {} to {addr}\n",
                    self.router.cluster.me()
                ))
            }
            Ok(Reply::Refused(e)) => Err(format!("join refused: {e}")),
            Ok(other) => Err(format!("unexpected reply: {other:?}")),
            Err(e) => Err(e.to_string()),
        }
    }

    /// One gossip exchange with every other member.
    pub async fn gossip_round(&self) {
        let (mine, peers) = self.router.cluster.with_state(|s| {
            let peers: Vec<String> = s
                .members
                .keys()
                .filter(|n| *n != self.router.cluster.me())
                .cloned()
                .collect();
            (s.clone(), peers)
        });
        let msg = Msg::Gossip(mine, self.meta());
        let calls = peers.iter().map(|p| {
            let msg = &msg;
            async move { (p, self.router.cluster.call(p, msg, GOSSIP_TIMEOUT).await) }
        });
        for (p, r) in futures_util::future::join_all(calls).await {
            match r {
                Ok(Reply::Gossip(s, meta)) => {
                    if s.cluster_id == self.router.cluster.with_state(|m| m.cluster_id.clone()) {
                        self.router.cluster.adopt(&s);
                        self.merge_meta(&meta);
                    }
                }
                Ok(Reply::Refused(why)) => tracing::warn!(peer = %p, %why, "gossip refused"),
                Ok(_) => {}
                Err(e) => tracing::debug!(peer = %p, error = %e, "gossip"),
            }
        }
        self.mark_answering_up();
    }

    /// At the claimant: a member marked down that answered is valid again
    /// (spread by the next round).
    fn mark_answering_up(&self) {
        let me = self.router.cluster.me();
        let back: Vec<String> = self.router.cluster.with_state(|s| {
            if s.claimant() != Some(me) {
                return Vec::new();
            }
            s.members
                .iter()
                .filter(|(n, m)| {
                    m.status == crate::cluster::MemberStatus::Down && self.router.cluster.is_up(n)
                })
                .map(|(n, _)| n.clone())
                .collect()
        });
        for n in back {
            if self.router.cluster.update(|s| s.mark_up(&n)) {
                tracing::info!(node = %n, "a member marked down answers again: valid");
            }
        }
    }

    /// This node's bucket metadata.
    pub fn meta(&self) -> crate::cluster::Meta {
        crate::cluster::Meta {
            props: serde_json::to_string(&self.props().snapshot()).unwrap_or_default(),
            types: serde_json::to_string(&self.types().snapshot()).unwrap_or_default(),
            security: self.security.to_json(),
        }
    }

    /// Takes the newer entries of another node's bucket metadata.
    pub fn merge_meta(&self, meta: &crate::cluster::Meta) {
        let types: std::collections::BTreeMap<String, crate::bucket::types::BucketType> =
            match serde_json::from_str(&meta.types) {
                Ok(t) => t,
                Err(e) => {
                    tracing::warn!(error = %e, "bad bucket types from a peer");
                    return;
                }
            };
        let props: std::collections::BTreeMap<String, crate::bucket::props::PropsPatch> =
            match serde_json::from_str(&meta.props) {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(error = %e, "bad bucket props from a peer");
                    return;
                }
            };
        if let Err(e) = self.types().merge(&types) {
            tracing::warn!(error = %e, "merging bucket types from a peer");
        }
        if let Err(e) = self.props().merge(&props) {
            tracing::warn!(error = %e, "merging bucket props from a peer");
        }
        self.security.merge_json(&meta.security);
    }

    async fn push_gossip(&self) {
        self.gossip_round().await;
    }

    /// Gossips every [`GOSSIP_INTERVAL`] while the node lives.
    pub fn start_gossip(self: &Arc<Self>) {
        let node = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(GOSSIP_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let now = match node.upgrade() {
                Some(n) => n.gossip_now.clone(),
                None => return,
            };
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = now.notified() => {}
                }
                let Some(n) = node.upgrade() else { break };
                n.gossip_round().await;
            }
        });
    }

    /// The members as `member-status` shows them, and the state's
    /// cluster id, version and claimant.
    pub fn member_rows(&self) -> (Vec<MemberRow>, ClusterState) {
        let s = self.router.cluster.state();
        let rows = s
            .members
            .iter()
            .map(|(name, m)| MemberRow {
                node: name.clone(),
                status: m.status.name(),
                partitions: s.owned_by(name).len(),
                ring_pct: s.owned_by(name).len() as f64 * 100.0 / f64::from(s.ring_size),
                pending: s.next.values().filter(|n| *n == name).count() as i64
                    - s.next.keys().filter(|p| s.owner(**p) == name).count() as i64,
                up: self.router.cluster.is_up(name),
                address: m.addr.clone(),
            })
            .collect();
        (rows, s)
    }

    /// `member-status`: one line per member.
    pub fn member_status(&self) -> String {
        let (rows, s) = self.member_rows();
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<8} {:>6} {:>8} {:<5} {:<24} Node",
            "Status", "Ring", "Pending", "Up", "Address"
        );
        for r in &rows {
            let _ = writeln!(
                out,
                "{:<8} {:>5.1}% {:>8} {:<5} {:<24} {}",
                r.status,
                r.ring_pct,
                r.pending,
                if r.up { "up" } else { "down" },
                r.address,
                r.node,
            );
        }
        let _ = writeln!(
            out,
            "cluster {} version {} claimant {}",
            s.cluster_id,
            s.version,
            s.claimant().unwrap_or("-")
        );
        out
    }

    /// `member-status` as JSON: the same rows and footer.
    pub fn member_status_json(&self) -> serde_json::Value {
        let (rows, s) = self.member_rows();
        serde_json::json!({
            "members": rows,
            "cluster_id": s.cluster_id,
            "version": s.version,
            "claimant": s.claimant(),
        })
    }

    /// What `ring-status` shows: the state's pending transfers, this
    /// node's vnodes held for other owners and its handoffs.
    pub fn ring_view(&self) -> RingView {
        let s = self.router.cluster.state();
        let me = self.router.cluster.me();
        let owned: std::collections::BTreeSet<u32> = s.owned_by(me).into_iter().collect();
        let fallbacks: Vec<u32> = self
            .router
            .local_vnodes()
            .into_iter()
            .map(|(p, _)| p)
            .filter(|p| !owned.contains(p) && s.next.get(p).is_none_or(|to| to != me))
            .collect();
        let handoffs = self
            .router
            .cluster
            .handoffs()
            .into_iter()
            .map(|(p, h)| HandoffRow {
                partition: p,
                kind: match h.kind {
                    crate::cluster::HandoffKind::Ownership => "ownership",
                    crate::cluster::HandoffKind::Hinted => "hinted",
                }
                .to_string(),
                source: me.to_string(),
                target: h.target,
                sent: h.sent,
                done: h.done,
            })
            .collect();
        RingView {
            node: me.to_string(),
            claimant: s.claimant().map(str::to_string),
            ring_version: s.version,
            ring_size: s.ring_size,
            pending: s
                .next
                .iter()
                .map(|(p, to)| PendingTransfer {
                    partition: *p,
                    from: s.owner(*p).to_string(),
                    to: to.clone(),
                })
                .collect(),
            fallbacks,
            handoffs,
            transfer_limit: self.handoff.transfer_limit(),
            unreachable: s
                .members
                .keys()
                .filter(|n| !self.router.cluster.is_up(n))
                .cloned()
                .collect(),
        }
    }

    /// `ring-status`: pending transfers and this node's handoffs in progress.
    pub fn ring_status(&self) -> String {
        self.ring_view().text()
    }
    /// A grant scope (`TYPE` or `TYPE/BUCKET`, not `any`) whose bucket
    /// type does not exist (`default` always does).
    pub(crate) fn missing_type(&self, scope: &str) -> bool {
        use crate::security::model::Scope;
        match Scope::parse(scope) {
            Ok(Scope::Type(t) | Scope::Bucket(t, _)) => self.types().get(&t).is_none(),
            Ok(Scope::Any) | Err(_) => false,
        }
    }
}

/// One member as `member-status` shows it.
#[derive(Debug, Clone, serde::Serialize)]
pub struct MemberRow {
    /// Its node name.
    pub node: String,
    /// `joining`, `valid` or `leaving`.
    pub status: &'static str,
    /// Partitions it owns.
    pub partitions: usize,
    /// Its share of the ring, in percent.
    pub ring_pct: f64,
    /// Partitions it will gain (positive) or give away (negative) with
    /// the pending transfers.
    pub pending: i64,
    /// Whether this node believes it up.
    pub up: bool,
    /// Its PB address.
    pub address: String,
}

/// A pending ownership transfer: `partition` moves `from` → `to`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PendingTransfer {
    /// The partition.
    pub partition: u32,
    /// Its owner now.
    pub from: String,
    /// Its next owner.
    pub to: String,
}

/// A handoff running on a node.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HandoffRow {
    /// The partition handed off.
    pub partition: u32,
    /// `ownership` or `hinted`.
    pub kind: String,
    /// The node sending (the one running it).
    pub source: String,
    /// The node receiving.
    pub target: String,
    /// Objects sent in this pass.
    pub sent: u64,
    /// The pass finished; waiting for the ring to move.
    pub done: bool,
}

/// What `ring-status` shows ([`Gossip::ring_view`]); also the part of
/// `transfers` each node reports about itself.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct RingView {
    /// The node reporting.
    pub node: String,
    /// The claimant, if any member is valid.
    pub claimant: Option<String>,
    /// The cluster state's version.
    pub ring_version: u64,
    /// Partitions in the ring.
    pub ring_size: u32,
    /// Pending ownership transfers.
    pub pending: Vec<PendingTransfer>,
    /// Vnodes held on this node for other owners (hinted handoff pending).
    pub fallbacks: Vec<u32>,
    /// Handoffs running on this node.
    pub handoffs: Vec<HandoffRow>,
    /// This node's transfer limit.
    pub transfer_limit: usize,
    /// Members this node believes down.
    pub unreachable: Vec<String>,
}

impl RingView {
    /// The `ring-status` text.
    pub fn text(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "claimant: {}  ring version: {}  ring size: {}",
            self.claimant.as_deref().unwrap_or("-"),
            self.ring_version,
            self.ring_size
        );
        let _ = writeln!(out, "pending ownership transfers: {}", self.pending.len());
        for t in &self.pending {
            let _ = writeln!(
                out,
                "  partition {:>4}: {} -> {}",
                t.partition, t.from, t.to
            );
        }
        let fallbacks = &self.fallbacks;
        let _ = writeln!(
            out,
            "vnodes held here for other owners (hinted handoff pending): {}{}",
            fallbacks.len(),
            if fallbacks.is_empty() {
                String::new()
            } else {
                format!(" {fallbacks:?}")
            }
        );
        let _ = writeln!(
            out,
            "handoffs running on {}: {} (transfer limit {})",
            self.node,
            self.handoffs.len(),
            self.transfer_limit
        );
        for h in &self.handoffs {
            let _ = writeln!(
                out,
                "  partition {:>4}: {} to {}, {} objects sent{}",
                h.partition,
                if h.kind == "ownership" {
                    "Ownership"
                } else {
                    "Hinted"
                },
                h.target,
                h.sent,
                if h.done {
                    ", finished, waiting for the ring"
                } else {
                    ""
                }
            );
        }
        let _ = writeln!(out, "unreachable members:");
        for n in &self.unreachable {
            let _ = writeln!(out, "  {n}");
        }
        out
    }
}

/// The bucket type of a grant scope `TYPE` or `TYPE/BUCKET`.
pub(crate) fn type_of(scope: &str) -> &str {
    scope.split_once('/').map_or(scope, |(t, _)| t)
}

/// `cluster plan` output.
pub fn plan_text(s: &ClusterState) -> String {
    let mut out = String::new();
    if s.staged.is_empty() {
        out.push_str("There are no staged changes\n");
        return out;
    }
    out.push_str("Staged changes:\n");
    for c in &s.staged {
        let _ = match c {
            Staged::Join(n) => writeln!(out, "  join   {n}"),
            Staged::Leave(n) => writeln!(out, "  leave  {n}"),
            Staged::Replace(old, new) => writeln!(out, "  replace {old} with {new}"),
            Staged::ForceReplace(old, new) => {
                writeln!(out, "  force-replace {old} with {new}")
            }
            Staged::ForceRemove(n) => writeln!(out, "  force-remove {n}"),
        };
    }
    let (transfers, forced) = plan_moves(s);
    let _ = writeln!(
        out,
        "Transfers after commit: {}",
        transfers.values().sum::<usize>()
    );
    for ((from, to), n) in transfers {
        let _ = writeln!(out, "  {n:>4} partitions {from} -> {to}");
    }
    if !forced.is_empty() {
        let _ = writeln!(
            out,
            "Reassigned at commit without handoff: {} (the copies on the removed nodes are lost; read repair and anti-entropy restore them from the other replicas)",
            forced.values().sum::<usize>()
        );
        for ((from, to), n) in forced {
            let _ = writeln!(out, "  {n:>4} partitions {from} -> {to}");
        }
    }
    out
}

/// Partitions a commit moves, counted per (from, to): ownership
/// transfers, and moves made at once (force-remove, force-replace).
type Moves = std::collections::BTreeMap<(String, String), usize>;

/// The plan's moves, split as [`Moves`]: (transfers, forced).
fn plan_moves(s: &ClusterState) -> (Moves, Moves) {
    let (mut transfers, mut forced) = (Moves::new(), Moves::new());
    for (p, from, to) in s.plan() {
        let which = if s.is_forced_move(p, &from) {
            &mut forced
        } else {
            &mut transfers
        };
        *which.entry((from, to)).or_default() += 1;
    }
    (transfers, forced)
}

/// `cluster plan` as JSON: the staged changes and the transfers a
/// commit would start, per (from, to) pair as the text counts them.
pub fn plan_json(s: &ClusterState) -> serde_json::Value {
    use serde_json::json;
    let staged: Vec<serde_json::Value> = s
        .staged
        .iter()
        .map(|c| match c {
            Staged::Join(n) => json!({"change": "join", "node": n}),
            Staged::Leave(n) => json!({"change": "leave", "node": n}),
            Staged::Replace(old, new) => json!({"change": "replace", "node": old, "with": new}),
            Staged::ForceReplace(old, new) => {
                json!({"change": "force-replace", "node": old, "with": new})
            }
            Staged::ForceRemove(n) => json!({"change": "force-remove", "node": n}),
        })
        .collect();
    let (transfers, forced) = if s.staged.is_empty() {
        Default::default()
    } else {
        plan_moves(s)
    };
    let rows = |m: &Moves| -> Vec<serde_json::Value> {
        m.iter()
            .map(|((from, to), n)| json!({"from": from, "to": to, "partitions": n}))
            .collect()
    };
    json!({
        "staged": staged,
        "transfers": transfers.values().sum::<usize>(),
        "moves": rows(&transfers),
        "reassigned": forced.values().sum::<usize>(),
        "reassigned_moves": rows(&forced),
    })
}

#[cfg(test)]
mod tests {
    use super::join_address;

    #[test]
    fn join_takes_an_address_or_a_node_name() {
        assert_eq!(join_address("10.0.0.2:9000"), "10.0.0.2:9000");
        assert_eq!(join_address("n1@127.0.0.1"), "127.0.0.1:8099");
        assert_eq!(join_address("riak@db2.example"), "db2.example:8099");
        assert_eq!(join_address("n1@::1"), "[::1]:8099");
    }
}
