//! The cluster state every node holds and gossips: members, the owner of
//! each ring partition, pending ownership transfers and staged changes.
//!
//! Only the **claimant** (the lowest-named `valid` member) changes the state;
//! each change bumps `version`, and a node adopts any state of its cluster
//! with a higher version (see [`ClusterState::newer_than`]). A transfer of
//! partition `p` is pending while `next[p]` is set: requests keep going to
//! `owners[p]` until the old owner has handed its data to the new one and
//! the claimant records the move.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A member's status, as `riak admin member-status`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum MemberStatus {
    /// Joined, waiting for a commit to take partitions.
    Joining,
    /// A full member.
    Valid,
    /// Handing its partitions away; removed when it owns none.
    Leaving,
    /// Marked down by an operator (`basalt admin down`): it keeps its
    /// partitions but is never the claimant, so the cluster can change
    /// without it; valid again as soon as it answers the claimant.
    Down,
}

impl MemberStatus {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            MemberStatus::Joining => "joining",
            MemberStatus::Valid => "valid",
            MemberStatus::Leaving => "leaving",
            MemberStatus::Down => "down",
        }
    }
}

/// One member node.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Its PB address (for clients; shown by `member-status`).
    pub addr: String,
    /// Its HTTP address (may be empty).
    pub http: String,
    /// Its cluster address (`advertise_cluster`): where the other nodes
    /// dial it. Empty in a `cluster.json` written before the cluster port
    /// existed, until the node starts and sets it.
    #[serde(default)]
    pub cluster: String,
    /// Status.
    pub status: MemberStatus,
}

/// A change staged by `cluster join|leave|replace|force-replace|
/// force-remove`, applied by commit.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum Staged {
    /// The node joins.
    Join(String),
    /// The node leaves.
    Leave(String),
    /// `cluster replace OLD NEW`: NEW (joining) takes every partition of
    /// OLD by ownership handoff, then OLD leaves.
    Replace(String, String),
    /// `cluster force-replace OLD NEW`: NEW (joining) owns OLD's
    /// partitions at once, without handoff; OLD is removed. OLD's copies
    /// are lost: the other replicas (read repair, anti-entropy) restore
    /// them.
    ForceReplace(String, String),
    /// `cluster force-remove NODE`: NODE is removed at once; its partitions
    /// go to the other members without handoff (its copies are lost, as
    /// with force-replace).
    ForceRemove(String),
}

impl Staged {
    /// The member this change takes out of the ring (leave, replace,
    /// force-replace, force-remove), if any.
    pub fn outgoing(&self) -> Option<&str> {
        match self {
            Staged::Join(_) => None,
            Staged::Leave(n) | Staged::Replace(n, _) | Staged::ForceReplace(n, _) => Some(n),
            Staged::ForceRemove(n) => Some(n),
        }
    }

    /// The member that goes at commit without handing its partitions off
    /// (force-replace, force-remove).
    pub fn forced(&self) -> Option<&str> {
        match self {
            Staged::ForceReplace(n, _) | Staged::ForceRemove(n) => Some(n),
            _ => None,
        }
    }
}

/// The gossiped state of a cluster.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClusterState {
    /// Random id given when the first node created the cluster.
    pub cluster_id: String,
    /// Partitions of the ring (fixed for the cluster's life).
    pub ring_size: u32,
    /// Bumped by every change.
    pub version: u64,
    /// Members by node name.
    pub members: BTreeMap<String, Member>,
    /// Owner node name of each partition.
    pub owners: Vec<String>,
    /// Pending ownership transfers: partition → new owner.
    pub next: BTreeMap<u32, String>,
    /// Changes waiting for `cluster commit`.
    pub staged: Vec<Staged>,
}

/// A change the claimant refuses.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ClusterError(pub String);

/// The claim's aim: no node holds two partitions within this distance
/// (Riak's `target_n_val`; 3 = the default `n_val`), where the member
/// count allows.
pub const TARGET_N_VAL: u32 = 3;

impl ClusterState {
    /// A new one-node cluster owning every partition.
    pub fn new(node: &str, addr: &str, http: &str, ring_size: u32, cluster_id: String) -> Self {
        let mut members = BTreeMap::new();
        members.insert(
            node.to_string(),
            Member {
                addr: addr.to_string(),
                http: http.to_string(),
                cluster: String::new(),
                status: MemberStatus::Valid,
            },
        );
        ClusterState {
            cluster_id,
            ring_size,
            version: 1,
            members,
            owners: vec![node.to_string(); ring_size as usize],
            next: BTreeMap::new(),
            staged: Vec::new(),
        }
    }

    /// Whether `self` should replace `mine` (same cluster, higher version).
    pub fn newer_than(&self, mine: &ClusterState) -> bool {
        self.cluster_id == mine.cluster_id && self.version > mine.version
    }

    /// The member that applies changes: the lowest-named valid member.
    pub fn claimant(&self) -> Option<&str> {
        self.members
            .iter()
            .find(|(_, m)| m.status == MemberStatus::Valid)
            .map(|(n, _)| n.as_str())
    }

    /// The owner of partition `p`.
    pub fn owner(&self, p: u32) -> &str {
        self.owners.get(p as usize).map_or("", String::as_str)
    }

    /// Partitions owned by `node`.
    pub fn owned_by(&self, node: &str) -> Vec<u32> {
        (0..self.ring_size)
            .filter(|&p| self.owner(p) == node)
            .collect()
    }

    /// Adds `node` as a joining member and stages its join.
    pub fn add_joining(
        &mut self,
        node: &str,
        addr: &str,
        http: &str,
        ring_size: u32,
    ) -> Result<(), ClusterError> {
        if ring_size != self.ring_size {
            return Err(ClusterError(format!(
                "node {node} runs ring_size {ring_size}, this cluster {}; a node joins only a cluster of its own ring size",
                self.ring_size
            )));
        }
        if let Some(m) = self.members.get(node) {
            if m.addr == addr {
                return Ok(()); // already joined: idempotent
            }
            return Err(ClusterError(format!(
                "a member named {node} already exists at {}",
                m.addr
            )));
        }
        self.members.insert(
            node.to_string(),
            Member {
                addr: addr.to_string(),
                http: http.to_string(),
                cluster: String::new(),
                status: MemberStatus::Joining,
            },
        );
        self.staged.push(Staged::Join(node.to_string()));
        self.version += 1;
        Ok(())
    }

    /// Stages `node`'s leave.
    pub fn stage_leave(&mut self, node: &str) -> Result<(), ClusterError> {
        match self.members.get(node) {
            None => return Err(ClusterError(format!("{node} is not a member"))),
            Some(m) if m.status != MemberStatus::Valid => {
                return Err(ClusterError(format!(
                    "{node} is {}, only a valid member can leave",
                    m.status.name()
                )))
            }
            Some(_) => {}
        }
        if self.staged.contains(&Staged::Leave(node.to_string())) {
            return Ok(()); // already staged
        }
        self.check_not_outgoing(node)?;
        if self.staying_valid() <= 1 {
            return Err(ClusterError(
                "the last valid member cannot leave the cluster".into(),
            ));
        }
        self.staged.push(Staged::Leave(node.to_string()));
        self.version += 1;
        Ok(())
    }

    /// Valid members no staged change takes out of the ring.
    fn staying_valid(&self) -> usize {
        self.members
            .iter()
            .filter(|(n, m)| {
                m.status == MemberStatus::Valid
                    && !self.staged.iter().any(|s| s.outgoing() == Some(n.as_str()))
            })
            .count()
    }

    /// Refuses `node` if a staged change already takes it out of the ring.
    fn check_not_outgoing(&self, node: &str) -> Result<(), ClusterError> {
        match self.staged.iter().find(|s| s.outgoing() == Some(node)) {
            Some(s) => Err(ClusterError(format!(
                "{node} already has a staged change ({s:?}); `cluster clear` drops the staged changes"
            ))),
            None => Ok(()),
        }
    }

    /// Checks that `new` is a joining member with a staged join that no
    /// other replace already uses (the replacement of `cluster replace` /
    /// `force-replace`).
    fn check_replacement(&self, old: &str, new: &str) -> Result<(), ClusterError> {
        if old == new {
            return Err(ClusterError(format!("{old} cannot replace itself")));
        }
        match self.members.get(new) {
            Some(m) if m.status == MemberStatus::Joining => {}
            Some(m) => {
                return Err(ClusterError(format!(
                    "{new} is {}, the replacement must be a joining node (`cluster join` it first)",
                    m.status.name()
                )))
            }
            None => {
                return Err(ClusterError(format!(
                    "{new} is not a member: `cluster join` it first, then replace"
                )))
            }
        }
        let taken = self
            .staged
            .iter()
            .any(|s| matches!(s, Staged::Replace(_, n) | Staged::ForceReplace(_, n) if n == new));
        if taken {
            return Err(ClusterError(format!("{new} already replaces another node")));
        }
        Ok(())
    }

    /// Stages `cluster replace OLD NEW`: NEW, a joining node, takes all of
    /// OLD's partitions by handoff; OLD leaves.
    pub fn stage_replace(&mut self, old: &str, new: &str) -> Result<(), ClusterError> {
        match self.members.get(old) {
            None => return Err(ClusterError(format!("{old} is not a member"))),
            Some(m) if m.status != MemberStatus::Valid => {
                return Err(ClusterError(format!(
                    "{old} is {}, only a valid member can be replaced (force-replace a down one)",
                    m.status.name()
                )))
            }
            Some(_) => {}
        }
        self.check_not_outgoing(old)?;
        self.check_replacement(old, new)?;
        self.staged
            .push(Staged::Replace(old.to_string(), new.to_string()));
        self.version += 1;
        Ok(())
    }

    /// Stages `cluster force-replace OLD NEW`: NEW, a joining node, owns
    /// OLD's partitions at commit without handoff; OLD is removed.
    /// `acting` (the claimant) cannot be replaced by force.
    pub fn stage_force_replace(
        &mut self,
        old: &str,
        new: &str,
        acting: &str,
    ) -> Result<(), ClusterError> {
        self.check_forced(old, acting)?;
        self.check_replacement(old, new)?;
        self.staged
            .push(Staged::ForceReplace(old.to_string(), new.to_string()));
        self.version += 1;
        Ok(())
    }

    /// Stages `cluster force-remove NODE`: NODE is removed at commit and
    /// its partitions go to the others without handoff. `acting` (the
    /// claimant) cannot be removed by force.
    pub fn stage_force_remove(&mut self, node: &str, acting: &str) -> Result<(), ClusterError> {
        self.check_forced(node, acting)?;
        let stays = self.staying_valid().saturating_sub(usize::from(
            self.members
                .get(node)
                .is_some_and(|m| m.status == MemberStatus::Valid),
        ));
        if stays == 0 {
            return Err(ClusterError(
                "the last valid member cannot be removed".into(),
            ));
        }
        self.staged.push(Staged::ForceRemove(node.to_string()));
        self.version += 1;
        Ok(())
    }

    /// The checks of a forced change of `node`.
    fn check_forced(&self, node: &str, acting: &str) -> Result<(), ClusterError> {
        match self.members.get(node) {
            None => return Err(ClusterError(format!("{node} is not a member"))),
            Some(m) if m.status == MemberStatus::Joining => {
                return Err(ClusterError(format!(
                    "{node} is joining: `cluster clear` drops its join"
                )))
            }
            Some(_) => {}
        }
        if node == acting {
            return Err(ClusterError(format!(
                "{node} is the claimant and cannot remove or replace itself by force; if it is down, mark it so (`basalt admin down {node}`) on another member first"
            )));
        }
        self.check_not_outgoing(node)
    }

    /// Marks `node` down (`basalt admin down`): it is no longer the
    /// claimant; it keeps its partitions. Refused for the member acting
    /// and for a member that is not valid.
    pub fn mark_down(&mut self, node: &str, acting: &str) -> Result<(), ClusterError> {
        if node == acting {
            return Err(ClusterError(format!("{node} cannot mark itself down")));
        }
        match self.members.get_mut(node) {
            None => Err(ClusterError(format!("{node} is not a member"))),
            Some(m) if m.status == MemberStatus::Down => Ok(()),
            Some(m) if m.status != MemberStatus::Valid => Err(ClusterError(format!(
                "{node} is {}, only a valid member can be marked down",
                m.status.name()
            ))),
            Some(m) => {
                m.status = MemberStatus::Down;
                self.version += 1;
                Ok(())
            }
        }
    }

    /// A member marked down answered again: valid once more. False if it
    /// was not down.
    pub fn mark_up(&mut self, node: &str) -> bool {
        match self.members.get_mut(node) {
            Some(m) if m.status == MemberStatus::Down => {
                m.status = MemberStatus::Valid;
                self.version += 1;
                true
            }
            _ => false,
        }
    }

    /// Drops the staged changes (joining members that were staged go too).
    pub fn clear_staged(&mut self) {
        for s in std::mem::take(&mut self.staged) {
            if let Staged::Join(n) = s {
                if self
                    .members
                    .get(&n)
                    .is_some_and(|m| m.status == MemberStatus::Joining)
                {
                    self.members.remove(&n);
                }
            }
        }
        self.version += 1;
    }

    /// The members that will hold partitions once the staged changes
    /// apply (a member marked down still holds its own).
    fn planned_members(&self) -> Vec<String> {
        self.members
            .iter()
            .filter(|(n, m)| {
                m.status != MemberStatus::Leaving
                    && !self.staged.iter().any(|s| s.outgoing() == Some(n.as_str()))
                    && (matches!(m.status, MemberStatus::Valid | MemberStatus::Down)
                        || self.staged.contains(&Staged::Join((*n).clone())))
            })
            .map(|(n, _)| n.clone())
            .collect()
    }

    /// The moves a commit would make: (partition, from, to). A move from
    /// a member removed by force, or of a partition it owns, is made at
    /// once (see [`Self::commit`]); the others are ownership transfers.
    pub fn plan(&self) -> Vec<(u32, String, String)> {
        let current = self.effective_owners();
        // A replacement starts from its node's partitions, so the claim
        // keeps them there and moves nothing else for it.
        let mut base = current.clone();
        for s in &self.staged {
            if let Staged::Replace(old, new) | Staged::ForceReplace(old, new) = s {
                for o in base.iter_mut().filter(|o| *o == old) {
                    *o = new.clone();
                }
            }
        }
        let target = claim(&base, &self.planned_members());
        (0..self.ring_size)
            .filter_map(|p| {
                let cur = &current[p as usize];
                let new = &target[p as usize];
                (cur != new).then(|| (p, cur.clone(), new.clone()))
            })
            .collect()
    }

    /// Whether a planned move of `p` from `from` is made at commit without
    /// handoff: `from`, or `p`'s owner now, is removed by force.
    pub fn is_forced_move(&self, p: u32, from: &str) -> bool {
        self.staged
            .iter()
            .filter_map(Staged::forced)
            .any(|n| n == from || n == self.owner(p))
    }

    /// Owners once the pending transfers complete.
    fn effective_owners(&self) -> Vec<String> {
        let mut o = self.owners.clone();
        for (p, n) in &self.next {
            if let Some(slot) = o.get_mut(*p as usize) {
                *slot = n.clone();
            }
        }
        o
    }

    /// Applies the staged changes: joiners become valid, leavers (and
    /// replaced nodes) leaving, and every partition whose owner changes
    /// gets a pending transfer — except the partitions of a member removed
    /// by force (force-remove, force-replace), which change owner at once,
    /// and that member, which is removed.
    pub fn commit(&mut self) -> Result<Vec<(u32, String, String)>, ClusterError> {
        if self.staged.is_empty() {
            return Err(ClusterError("no staged changes to commit".into()));
        }
        let plan = self.plan();
        let forced: Vec<String> = self
            .staged
            .iter()
            .filter_map(Staged::forced)
            .map(str::to_string)
            .collect();
        for (p, from, to) in &plan {
            if self.is_forced_move(*p, from) {
                if let Some(slot) = self.owners.get_mut(*p as usize) {
                    *slot = to.clone();
                }
                self.next.remove(p);
            } else if self.owner(*p) == to {
                self.next.remove(p);
            } else {
                self.next.insert(*p, to.clone());
            }
        }
        // A forced member's partition the plan kept where it was going:
        // its next owner owns it now.
        for p in 0..self.ring_size {
            if forced.iter().any(|n| n == self.owner(p)) {
                if let Some(to) = self.next.remove(&p) {
                    if let Some(slot) = self.owners.get_mut(p as usize) {
                        *slot = to;
                    }
                }
            }
        }
        for s in std::mem::take(&mut self.staged) {
            let (n, status) = match s {
                Staged::Join(n) => (n, MemberStatus::Valid),
                Staged::Leave(n) | Staged::Replace(n, _) => (n, MemberStatus::Leaving),
                Staged::ForceReplace(n, _) | Staged::ForceRemove(n) => {
                    self.members.remove(&n);
                    continue;
                }
            };
            if let Some(m) = self.members.get_mut(&n) {
                m.status = status;
            }
        }
        self.version += 1;
        self.remove_idle_leavers();
        Ok(plan)
    }

    /// Records a finished transfer of `p` to `to`.
    pub fn transfer_done(&mut self, p: u32, from: &str, to: &str) -> bool {
        if self.next.get(&p).map(String::as_str) != Some(to) || self.owner(p) != from {
            return false;
        }
        self.next.remove(&p);
        if let Some(slot) = self.owners.get_mut(p as usize) {
            *slot = to.to_string();
        }
        self.version += 1;
        self.remove_idle_leavers();
        true
    }

    /// Leaving members that own nothing and send nothing are removed.
    fn remove_idle_leavers(&mut self) {
        let idle: Vec<String> = self
            .members
            .iter()
            .filter(|(n, m)| {
                m.status == MemberStatus::Leaving
                    && !self.owners.iter().any(|o| o == *n)
                    && !self.next.values().any(|o| o == *n)
            })
            .map(|(n, _)| n.clone())
            .collect();
        for n in idle {
            self.members.remove(&n);
        }
    }

    /// Checks the invariants (every owner a member, sizes agree).
    pub fn check(&self) -> Result<(), ClusterError> {
        if self.owners.len() != self.ring_size as usize {
            return Err(ClusterError("owner list does not match ring size".into()));
        }
        for (p, o) in self.owners.iter().enumerate() {
            if !self.members.contains_key(o) {
                return Err(ClusterError(format!(
                    "partition {p} owned by non-member {o}"
                )));
            }
        }
        Ok(())
    }
}

/// Spreads `ring_size` partitions over `members`: each member gets
/// `ring_size / members` (or one more), and no node holds two partitions
/// within [`TARGET_N_VAL`] positions where the counts allow, so one
/// preference list lands on distinct nodes. Two candidates are built and
/// the one with fewer repeated windows wins (then the one moving fewer
/// partitions): [`claim_keep`] (owners keep what they hold up to their
/// share, members over it give up an evenly spread subset, the free
/// partitions go to members under it; then swaps repair spacing) — few
/// moves on joins and leaves — and a walk around the ring that keeps an
/// owner unless it is ahead of its even share or too near its previous
/// partition — the better spacing when one node held everything.
pub fn claim(current: &[String], members: &[String]) -> Vec<String> {
    let size = current.len();
    if members.is_empty() || size == 0 {
        return current.to_vec();
    }
    let walk = claim_walk(current, members);
    let keep = claim_keep(current, members);
    let spacing = spacing_for(members.len(), size);
    let score = |o: &[String]| {
        let moved = o.iter().zip(current).filter(|(a, b)| a != b).count();
        (repeated_windows(o, spacing), moved)
    };
    if score(&keep) <= score(&walk) {
        keep
    } else {
        walk
    }
}

/// The spacing the claim aims for with `k` members on `size` partitions.
fn spacing_for(k: usize, size: usize) -> usize {
    // Fewer members than a preference list cannot be spaced: balance only.
    if k >= TARGET_N_VAL as usize {
        (TARGET_N_VAL as usize).min(size)
    } else {
        1
    }
}

/// Windows of `spacing` consecutive partitions (cyclic) holding a node twice.
fn repeated_windows(owners: &[String], spacing: usize) -> usize {
    let size = owners.len();
    if spacing < 2 {
        return 0;
    }
    (0..size)
        .filter(|&p| {
            (0..spacing)
                .any(|i| (i + 1..spacing).any(|j| owners[(p + i) % size] == owners[(p + j) % size]))
        })
        .count()
}

/// Quotas: `size / k`, one more for the first `size % k` members by what
/// they hold now (so the largest holders keep the most).
fn quotas<'a>(current: &[String], members: &'a [String]) -> BTreeMap<&'a str, usize> {
    let (size, k) = (current.len(), members.len());
    let mut by_holding: Vec<&String> = members.iter().collect();
    by_holding.sort_by_key(|m| std::cmp::Reverse(current.iter().filter(|o| o == m).count()));
    by_holding
        .iter()
        .enumerate()
        .map(|(i, m)| (m.as_str(), size / k + usize::from(i < size % k)))
        .collect()
}

/// The keep-first claim (see [`claim`]).
fn claim_keep(current: &[String], members: &[String]) -> Vec<String> {
    let size = current.len();
    let quotas = quotas(current, members);
    let spacing = spacing_for(members.len(), size);
    let mut target: Vec<Option<&str>> = vec![None; size];
    let mut count: BTreeMap<&str, usize> = members.iter().map(|m| (m.as_str(), 0)).collect();
    for m in members {
        let held: Vec<usize> = (0..size).filter(|&p| current[p] == *m).collect();
        let q = quotas[m.as_str()];
        let keep: Vec<usize> = if held.len() <= q {
            held
        } else {
            (0..q).map(|i| held[i * held.len() / q]).collect()
        };
        for p in keep {
            target[p] = Some(m.as_str());
        }
    }
    // A kept partition too near an earlier one of the same node is freed.
    for p in 0..size {
        if let Some(m) = target[p] {
            if (1..spacing).any(|d| d <= p && target[p - d] == Some(m)) {
                target[p] = None;
            }
        }
    }
    for m in target.iter().flatten() {
        *count.entry(m).or_default() += 1;
    }
    let near = |target: &[Option<&str>], p: usize, m: &str| {
        (1..spacing)
            .filter(|d| {
                target[(p + d) % size] == Some(m) || target[(p + size - d) % size] == Some(m)
            })
            .count()
    };
    for p in 0..size {
        if target[p].is_some() {
            continue;
        }
        let pick = members
            .iter()
            .map(String::as_str)
            .filter(|m| count[m] < quotas[m])
            .min_by(|a, b| {
                near(&target, p, a)
                    .cmp(&near(&target, p, b))
                    .then((quotas[b] - count[b]).cmp(&(quotas[a] - count[a])))
                    .then(a.cmp(b))
            });
        if let Some(m) = pick {
            target[p] = Some(m);
            *count.entry(m).or_default() += 1;
        }
    }
    debug_assert!(
        target.iter().all(Option::is_some),
        "quotas sum to the ring size"
    );
    let mut owners: Vec<&str> = target.into_iter().map(|t| t.unwrap_or("")).collect();
    // Swaps that remove a repeat without adding one (balance unchanged).
    if spacing >= 2 {
        let conflicts = |o: &[&str], p: usize| {
            (1..spacing)
                .filter(|d| o[(p + d) % size] == o[p] || o[(p + size - d) % size] == o[p])
                .count()
        };
        for p in 0..size {
            if conflicts(&owners, p) == 0 {
                continue;
            }
            for q in 0..size {
                if owners[q] == owners[p] {
                    continue;
                }
                let before = conflicts(&owners, p) + conflicts(&owners, q);
                owners.swap(p, q);
                let after = conflicts(&owners, p) + conflicts(&owners, q);
                if after < before {
                    break;
                }
                owners.swap(p, q);
            }
        }
    }
    owners.into_iter().map(str::to_string).collect()
}

/// The ring-walk claim (see [`claim`]).
fn claim_walk(current: &[String], members: &[String]) -> Vec<String> {
    let size = current.len();
    if members.is_empty() || size == 0 {
        return current.to_vec();
    }
    let quotas = quotas(current, members);
    let mut count: BTreeMap<&str, usize> = members.iter().map(|m| (m.as_str(), 0)).collect();
    let spacing = spacing_for(members.len(), size);
    let mut target: Vec<&str> = Vec::with_capacity(size);
    for p in 0..size {
        // Conflicts with the previous `spacing - 1` picks, and (for the
        // ring's wrap) with the first ones.
        let near = |m: &str, target: &[&str]| {
            (1..spacing)
                .filter(|d| {
                    (*d <= p && target[p - d] == m)
                        || (p + d >= size && target.get(p + d - size) == Some(&m))
                })
                .count()
        };
        // How far behind its even share a member is (larger = more behind).
        let behind = |m: &str| {
            let share = quotas[m] as f64 * (p + 1) as f64 / size as f64;
            share - count[m] as f64
        };
        let open: Vec<&str> = members
            .iter()
            .map(String::as_str)
            .filter(|m| count[m] < quotas[m])
            .collect();
        debug_assert!(!open.is_empty(), "quotas sum to the ring size");
        let cur = current[p].as_str();
        let best = open
            .iter()
            .copied()
            .min_by(|a, b| {
                near(a, &target)
                    .cmp(&near(b, &target))
                    .then(behind(b).total_cmp(&behind(a)))
                    .then(a.cmp(b))
            })
            .unwrap_or(cur);
        let keep = open.contains(&cur) && near(cur, &target) == 0 && behind(cur) > -1.0;
        let catch_up = best != cur && near(best, &target) == 0 && behind(best) >= 1.0;
        let pick = if keep && !catch_up { cur } else { best };
        *count.entry(pick).or_default() += 1;
        target.push(pick);
    }
    target.into_iter().map(str::to_string).collect()
}

#[cfg(test)]
#[path = "state_tests.rs"]
mod tests;
