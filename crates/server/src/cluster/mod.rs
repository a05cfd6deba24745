//! Clustering: several nodes share one ring.
//!
//! * [`state`]: the gossiped [`ClusterState`] (members, owners, pending
//!   transfers, staged changes) and the claim algorithm;
//! * [`transport`]: request/reply messaging between nodes over the cluster
//!   port (`cluster_listen`, default 8099: Riak's handoff port);
//! * [`Cluster`]: this node's view — its state (persisted in
//!   `<data_dir>/cluster.json`), which peers answer (failure detection) and
//!   the handoffs under way.
//!
//! Membership is a gossiped, versioned state as `riak_core`'s ring: only the
//! claimant changes it, every node pushes its state to every other member
//! each [`GOSSIP_INTERVAL`] and adopts a higher version it receives. A peer
//! that has not answered for [`DOWN_AFTER`] is treated as down: requests
//! use fallback vnodes instead (sloppy quorum) until it answers again.

pub mod state;
pub mod transport;

pub use state::{ClusterError, ClusterState, Member, MemberStatus, Staged};

use crate::fsutil::atomic_write;
use crate::vnode::request::{VnodeReply, VnodeReq, WireObject};
use parking_lot::{Mutex, RwLock};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::{Duration, Instant};
use transport::Peers;

pub use crate::limits::CONTROL_TIMEOUT;
pub use crate::limits::DOWN_AFTER;
pub use crate::limits::GOSSIP_INTERVAL;

/// One object to replicate: (storage bucket, key, object).
pub type ReplObject = (Vec<u8>, Vec<u8>, WireObject);

/// One replicated change, as a source pushes it to a sink cluster.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum ReplItem {
    /// Merge this object (or tombstone) into every replica, as-is.
    Object(ReplObject),
    /// The source reaped this tombstone (storage bucket, key, encoded
    /// clock): reap it here if every replica holds it with that clock.
    Reap(Vec<u8>, Vec<u8>, Vec<u8>),
}

/// A request from another node.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Msg {
    /// Serve `req` on the local vnode of `partition`. `primary`: the sender
    /// believes this node owns it (a stale belief is forwarded once to the
    /// real owner unless `forwarded`).
    Vnode {
        /// Partition.
        partition: u32,
        /// Sent to the owner (not a fallback).
        primary: bool,
        /// Already forwarded once.
        forwarded: bool,
        /// The request.
        req: VnodeReq,
    },
    /// Handoff batch for the local vnode of `partition`: merge each object.
    Handoff {
        /// Partition.
        partition: u32,
        /// (storage bucket, key, object).
        objects: Vec<(Vec<u8>, Vec<u8>, crate::vnode::request::WireObject)>,
    },
    /// The sender's state and bucket metadata; the reply carries the
    /// receiver's ([`Reply::Gossip`]).
    Gossip(ClusterState, Meta),
    /// A node asks to join (sent to any member, forwarded to the claimant).
    Join {
        /// Its name.
        node: String,
        /// Its PB address.
        addr: String,
        /// Its HTTP address.
        http: String,
        /// Its cluster address.
        cluster: String,
        /// Its ring size.
        ring_size: u32,
    },
    /// An admin change (forwarded to the claimant).
    Admin(AdminCmd),
    /// Replication from a source cluster: apply these changes here, in
    /// order per key; the reply is `Ok` only when all were applied.
    ReplPush {
        /// The source's cluster id (a cluster never applies its own).
        source: String,
        /// The changes.
        items: Vec<ReplItem>,
    },
    /// A full-sync of another cluster found keys newer here: queue them
    /// (as references, full-sync priority) on this node's sink `queue`.
    ReplRequeue {
        /// The local sink (queue) name.
        queue: String,
        /// (storage bucket, key).
        keys: Vec<(Vec<u8>, Vec<u8>)>,
    },
    /// A source asks a sink node who it is: [`Reply::ReplHello`].
    ReplHello {
        /// The source's cluster id.
        source: String,
    },
    /// Full-sync: the source's bucket props and types, merged here.
    ReplMeta(Meta),
    /// The old owner finished handing `partition` to `to`.
    TransferDone {
        /// Partition.
        partition: u32,
        /// Old owner.
        from: String,
        /// New owner.
        to: String,
    },
    /// Before a reap: which of these partitions does the receiver hold a
    /// copy of that it does not own (a fallback or leftover vnode whose
    /// hinted handoff is pending, or either side of an ownership
    /// transfer)? [`Reply::Held`].
    HeldFor {
        /// Partitions of the key's preference list.
        partitions: Vec<u32>,
    },
    /// A capability's request to the same capability on another node (or
    /// cluster), as opaque bytes: `service` names the handler on the
    /// receiving node, `body` is the capability's own encoding
    /// ([`encode_body`]); the answer is [`Reply::Service`]. Transport and
    /// membership know none of its types.
    Service {
        /// The receiving handler (a capability's constant, e.g.
        /// `aae::FOLD_SERVICE`).
        service: String,
        /// The request, encoded by the capability (serialized as bytes,
        /// one copy; the same postcard bytes as a `u8` sequence).
        #[serde(with = "serde_bytes")]
        body: Vec<u8>,
    },
}

/// Bucket metadata every node exchanges with every gossip: bucket props
/// overrides and bucket types, merged entry by entry (the later change
/// stamp wins), so a props or type change made on any node reaches all.
/// Both maps travel as JSON text: their serde attributes (skipped empty
/// fields) need a self-describing format, which postcard is not.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Meta {
    /// Per-bucket overrides by storage-bucket key, as JSON.
    pub props: String,
    /// Bucket types by name, as JSON.
    pub types: String,
    /// The security state (users, grants, sources), as JSON; empty in
    /// what crosses to another cluster (`ReplMeta`): each cluster has its
    /// own users.
    pub security: String,
}

/// Changes run by the claimant.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum AdminCmd {
    /// Stage a leave.
    Leave(String),
    /// Show the staged changes and the transfers they start.
    Plan,
    /// [`AdminCmd::Plan`] as JSON (`basalt admin --json cluster plan`).
    PlanJson,
    /// Stage `cluster replace OLD NEW`.
    Replace(String, String),
    /// Stage `cluster force-replace OLD NEW`.
    ForceReplace(String, String),
    /// Stage `cluster force-remove NODE`.
    ForceRemove(String),
    /// Mark a member down (`basalt admin down NODE`).
    Down(String),
    /// Apply the staged changes.
    Commit,
    /// Drop the staged changes.
    Clear,
}

/// A reply to a [`Msg`].
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Reply {
    /// A vnode's answer.
    Vnode(Result<VnodeReply, WireError>),
    /// A cluster state.
    State(ClusterState),
    /// A cluster state and bucket metadata (the answer to a gossip).
    Gossip(ClusterState, Meta),
    /// Text for the admin (plan output...).
    Text(String),
    /// Refused, with the reason.
    Refused(String),
    /// A sink node's answer to [`Msg::ReplHello`].
    ReplHello {
        /// Its cluster id.
        cluster_id: String,
        /// The cluster addresses of its cluster's valid members.
        members: Vec<String>,
    },
    /// Done.
    Ok,
    /// The answer to [`Msg::HeldFor`]: the partitions held here for
    /// another owner.
    Held(Vec<u32>),
    /// The answer to [`Msg::Service`]: the handler's answer, encoded by
    /// the capability, or why it could not serve the request (an unknown
    /// service, a body that did not decode, the handler's refusal).
    Service(#[serde(with = "service_answer")] Result<Vec<u8>, String>),
}

/// [`Reply::Service`]'s answer with its bytes serialized as bytes: the
/// same postcard bytes as a `u8` sequence (older nodes read them), in one
/// copy instead of one serializer call a byte.
mod service_answer {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};
    use serde_bytes::{ByteBuf, Bytes};

    pub fn serialize<S: Serializer>(r: &Result<Vec<u8>, String>, s: S) -> Result<S::Ok, S::Error> {
        r.as_ref().map(|b| Bytes::new(b)).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(
        d: D,
    ) -> Result<Result<Vec<u8>, String>, D::Error> {
        Ok(Result::<ByteBuf, String>::deserialize(d)?.map(ByteBuf::into_vec))
    }
}

/// Encodes a capability's message body for [`Msg::Service`] /
/// [`Reply::Service`] (postcard, as every cluster message).
pub fn encode_body<T: Serialize>(v: &T) -> Result<Vec<u8>, String> {
    postcard::to_stdvec(v).map_err(|e| format!("encoding a service body: {e}"))
}

/// Decodes a body [`encode_body`] made; the error says what did not decode.
pub fn decode_body<T: serde::de::DeserializeOwned>(b: &[u8]) -> Result<T, String> {
    postcard::from_bytes(b).map_err(|e| format!("decoding a service body: {e}"))
}

/// A vnode error as it crosses the wire.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
pub enum WireError {
    /// Queue full.
    #[error("overload")]
    Overload,
    /// No answer in time.
    #[error("timeout")]
    Timeout,
    /// Anything else.
    #[error("{0}")]
    Other(String),
}

/// What a handoff moves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum HandoffKind {
    /// Ownership moves to a new owner (after a commit).
    Ownership,
    /// A fallback or leftover vnode returns its data to the owner.
    Hinted,
}

/// A handoff under way (progress for `ring-status`).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Handoff {
    /// Kind.
    pub kind: HandoffKind,
    /// Receiving node.
    pub target: String,
    /// Objects sent so far in this pass.
    pub sent: u64,
    /// Resume point: the last (bucket, key) the target acknowledged.
    pub cursor: Option<(Vec<u8>, Vec<u8>)>,
    /// A write forwarded during the pass failed: run another pass.
    pub dirty: bool,
    /// The pass finished; waiting for the ring to move.
    pub done: bool,
}

impl Handoff {
    /// A handoff of `kind` to `target`, nothing sent yet.
    pub fn new(kind: HandoffKind, target: &str) -> Handoff {
        Handoff {
            kind,
            target: target.to_string(),
            sent: 0,
            cursor: None,
            dirty: false,
            done: false,
        }
    }
}

/// This node's cluster view.
pub struct Cluster {
    me: String,
    state: RwLock<ClusterState>,
    path: Option<PathBuf>,
    /// Connections to peers.
    pub peers: Peers,
    seen: Mutex<HashMap<String, Instant>>,
    down: Mutex<HashMap<String, Instant>>,
    handoffs: Mutex<BTreeMap<u32, Handoff>>,
}

impl Cluster {
    /// Loads `<dir>/cluster.json`, or starts a one-node cluster owning
    /// every partition.
    pub fn open(
        me: &str,
        ring_size: u32,
        dir: Option<PathBuf>,
        max_frame: usize,
    ) -> Result<Cluster, ClusterError> {
        let path = dir.map(|d| d.join("cluster.json"));
        let loaded = match &path {
            Some(p) if p.exists() => {
                let bytes = std::fs::read(p)
                    .map_err(|e| ClusterError(format!("reading {}: {e}", p.display())))?;
                let s: ClusterState = crate::fsutil::decode_state(&bytes)
                    .map_err(|e| ClusterError(format!("{}: {e}", p.display())))?;
                if s.ring_size != ring_size {
                    return Err(ClusterError(format!(
                        "{} records ring_size {} but the config says {ring_size}; a node keeps its ring size",
                        p.display(),
                        s.ring_size
                    )));
                }
                s.check()?;
                Some(s)
            }
            _ => None,
        };
        let state = match loaded {
            Some(s) => s,
            None => ClusterState::new(me, "", "", ring_size, hex_id()),
        };
        let c = Cluster {
            me: me.to_string(),
            state: RwLock::new(state),
            path,
            peers: Peers::new(max_frame),
            seen: Mutex::new(HashMap::new()),
            down: Mutex::new(HashMap::new()),
            handoffs: Mutex::new(BTreeMap::new()),
        };
        c.persist();
        Ok(c)
    }

    /// This node's name.
    pub fn me(&self) -> &str {
        &self.me
    }

    /// A copy of the state.
    pub fn state(&self) -> ClusterState {
        self.state.read().clone()
    }

    /// Reads the state under the lock.
    pub fn with_state<T>(&self, f: impl FnOnce(&ClusterState) -> T) -> T {
        f(&self.state.read())
    }

    /// Changes the state and persists it; `f`'s result is returned.
    pub fn update<T>(&self, f: impl FnOnce(&mut ClusterState) -> T) -> T {
        let r = f(&mut self.state.write());
        self.persist();
        r
    }

    /// Adopts `s` if it is a newer state of this cluster; true if adopted.
    pub fn adopt(&self, s: &ClusterState) -> bool {
        let adopted = {
            let mut cur = self.state.write();
            if s.newer_than(&cur) && s.check().is_ok() {
                *cur = s.clone();
                true
            } else {
                false
            }
        };
        if adopted {
            tracing::info!(version = s.version, "adopted cluster state");
            self.persist();
        }
        adopted
    }

    /// Replaces the state with another cluster's (this node joined it).
    pub fn replace(&self, s: ClusterState) {
        *self.state.write() = s;
        self.persist();
    }

    fn persist(&self) {
        let Some(p) = &self.path else { return };
        let json = match crate::fsutil::encode_state(&*self.state.read()) {
            Ok(j) => j,
            Err(e) => {
                tracing::error!(error = %e, "encoding the cluster state");
                return;
            }
        };
        if let Err(e) = atomic_write(p, &json) {
            tracing::error!(error = %e, path = %p.display(), "saving the cluster state");
        }
    }

    /// Records that `node` answered.
    pub fn saw(&self, node: &str) {
        self.seen.lock().insert(node.to_string(), Instant::now());
        self.down.lock().remove(node);
    }

    /// Records that `node` did not answer.
    pub fn missed(&self, node: &str) {
        let last = self.seen.lock().get(node).copied();
        if last.is_none_or(|t| t.elapsed() >= DOWN_AFTER) {
            self.down
                .lock()
                .entry(node.to_string())
                .or_insert_with(Instant::now);
        }
    }

    /// Records that `node` cannot be reached.
    pub fn mark_down(&self, node: &str) {
        self.down
            .lock()
            .entry(node.to_string())
            .or_insert_with(Instant::now);
    }

    /// Whether `node` is believed up (this node always is).
    pub fn is_up(&self, node: &str) -> bool {
        node == self.me || !self.down.lock().contains_key(node)
    }

    /// The cluster address of a member (where peers dial it).
    pub fn addr_of(&self, node: &str) -> Option<String> {
        self.state
            .read()
            .members
            .get(node)
            .map(|m| m.cluster.clone())
            .filter(|a| !a.is_empty())
    }

    /// Sets this node's advertised PB, HTTP and cluster addresses in its own
    /// member entry.
    pub fn set_my_addrs(&self, pb: &str, http: &str, cluster: &str) {
        let me = self.me.clone();
        let changed = self.update(|s| match s.members.get_mut(&me) {
            Some(m) if m.addr != pb || m.http != http || m.cluster != cluster => {
                m.addr = pb.to_string();
                m.http = http.to_string();
                m.cluster = cluster.to_string();
                s.version += 1;
                true
            }
            _ => false,
        });
        if changed {
            tracing::info!(pb, http, cluster, "advertised addresses set");
        }
    }

    /// The handoffs under way.
    pub fn handoffs(&self) -> BTreeMap<u32, Handoff> {
        self.handoffs.lock().clone()
    }

    /// Runs `f` on the handoff table.
    pub fn with_handoffs<T>(&self, f: impl FnOnce(&mut BTreeMap<u32, Handoff>) -> T) -> T {
        f(&mut self.handoffs.lock())
    }

    /// Sends `msg` to `node` (by name) with `timeout`, tracking liveness.
    pub async fn call(
        &self,
        node: &str,
        msg: &Msg,
        timeout: Duration,
    ) -> Result<Reply, transport::PeerError> {
        let addr = self
            .addr_of(node)
            .ok_or_else(|| transport::PeerError::Unreachable {
                addr: node.to_string(),
                reason: "no known address".into(),
            })?;
        let r = self.peers.call(&addr, msg, timeout).await;
        match &r {
            Ok(_) => self.saw(node),
            Err(transport::PeerError::Overload(_)) => {}
            // A refused or broken connection is a certain sign: down at once.
            Err(
                transport::PeerError::Unreachable { .. }
                | transport::PeerError::Lost(_)
                | transport::PeerError::TlsRefused { .. },
            ) => self.mark_down(node),
            Err(_) => self.missed(node),
        }
        r
    }
}

/// A random 16-hex-digit id.
pub fn hex_id() -> String {
    format!("{:016x}", rand::random::<u64>())
}

#[cfg(test)]
mod wire_tests {
    use super::*;

    /// `postcard` of `v`, for the comparisons below.
    fn enc<T: Serialize>(v: &T) -> Vec<u8> {
        postcard::to_allocvec(v).unwrap_or_else(|e| panic!("{e}"))
    }

    /// A service body and answer serialized as bytes give the frames a
    /// `u8` sequence gave (what nodes before `serde_bytes` send and
    /// expect), and read back: old and new nodes understand each other.
    #[test]
    fn service_bytes_encode_as_a_u8_sequence_did() {
        // The variant's tag: the frame of an empty request / answer
        // without its two empty fields (one byte each).
        let empty = enc(&Msg::Service {
            service: String::new(),
            body: Vec::new(),
        });
        let msg_tag = &empty[..empty.len() - 2];
        let empty = enc(&Reply::Service(Ok(Vec::new())));
        let reply_tag = &empty[..empty.len() - 2];
        for n in [0usize, 5, 127, 128, 20_000] {
            let body: Vec<u8> = (0..n).map(|i| (i * 31) as u8).collect();
            let msg = Msg::Service {
                service: "aae_fold".into(),
                body: body.clone(),
            };
            let mut before = msg_tag.to_vec();
            before.extend(enc(&("aae_fold".to_string(), body.clone())));
            assert_eq!(enc(&msg), before, "request of {n} bytes");
            match postcard::from_bytes::<Msg>(&before) {
                Ok(Msg::Service { body: b, .. }) => assert_eq!(b, body),
                other => panic!("{other:?}"),
            }
            for answer in [Ok(body.clone()), Err(format!("refused {n}"))] {
                let mut before = reply_tag.to_vec();
                before.extend(enc(&answer));
                assert_eq!(enc(&Reply::Service(answer.clone())), before, "answer {n}");
                match postcard::from_bytes::<Reply>(&before) {
                    Ok(Reply::Service(a)) => assert_eq!(a, answer),
                    other => panic!("{other:?}"),
                }
            }
        }
    }
}
