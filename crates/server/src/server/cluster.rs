//! The cluster port's node-to-node messages ([`Msg`]): each goes to the
//! part of the node that serves it — a vnode request to the router, a
//! handoff batch to the handoff service, gossip and joins to membership,
//! replication messages to the replication service, a MapReduce map
//! round to `mapred::local`.

use crate::cluster::{ClusterState, Msg, Reply};
use crate::node::Node;
use std::sync::Arc;

/// Hands a capability's message ([`Msg::Service`]) to the capability that
/// serves it: the encoded answer, or why there is none.
async fn serve_service(this: &Arc<Node>, service: &str, body: &[u8]) -> Result<Vec<u8>, String> {
    match service {
        crate::aae::FOLD_SERVICE => {
            let q: crate::aae::FoldQuery = crate::cluster::decode_body(body)?;
            let r = this.aae.aae_fold(&q).await.map_err(|e| e.to_string())?;
            crate::cluster::encode_body(&r)
        }
        crate::mapred::local::MAP_FOLD_SERVICE | crate::mapred::local::MAP_KEYS_SERVICE => {
            this.mapred.serve_map(service, body).await
        }
        super::transfers::RING_VIEW_SERVICE => {
            crate::cluster::encode_body(&this.gossip.ring_view())
        }
        other => Err(format!("no service {other:?} on this node")),
    }
}

/// Serves one message from another node.
pub async fn serve(this: Arc<Node>, msg: Msg) -> Reply {
    match msg {
        Msg::Vnode {
            partition,
            primary,
            forwarded,
            req,
        } => {
            this.router
                .serve_vnode_msg(partition, primary, forwarded, req)
                .await
        }
        Msg::Handoff { partition, objects } => this.handoff.receive(partition, objects).await,
        Msg::Service { service, body } => {
            Reply::Service(serve_service(&this, &service, &body).await)
        }
        Msg::Gossip(s, meta) => {
            let (id, size) = this
                .router
                .cluster
                .with_state(|m| (m.cluster_id.clone(), m.ring_size));
            if s.cluster_id != id || s.ring_size != size {
                // Another cluster (or ring): refused, nothing adopted.
                return Reply::Refused(format!(
                    "{} is in cluster {id} (ring_size {size}), not in cluster {} (ring_size {})",
                    this.router.cluster.me(),
                    s.cluster_id,
                    s.ring_size
                ));
            }
            this.router.cluster.adopt(&s);
            this.gossip.merge_meta(&meta);
            Reply::Gossip(this.router.cluster.state(), this.gossip.meta())
        }
        Msg::Join {
            node,
            addr,
            http,
            cluster,
            ring_size,
        } => {
            let fwd = Msg::Join {
                node: node.clone(),
                addr: addr.clone(),
                http: http.clone(),
                cluster: cluster.clone(),
                ring_size,
            };
            let cmd = move |s: &mut ClusterState| {
                s.add_joining(&node, &addr, &http, ring_size)?;
                if let Some(m) = s.members.get_mut(&node) {
                    m.cluster = cluster;
                }
                Ok(())
            };
            match this.gossip.at_claimant(fwd, cmd).await {
                Ok(_) => Reply::State(this.router.cluster.state()),
                Err(e) => Reply::Refused(e),
            }
        }
        Msg::ReplPush { source, items } => this.repl.apply_repl(&source, items).await,
        Msg::ReplHello { .. } => this.repl.repl_hello(),
        Msg::ReplMeta(meta) => {
            this.gossip.merge_meta(&meta);
            Reply::Ok
        }
        Msg::ReplRequeue { queue, keys } => this.repl.repl_requeue(&queue, keys),
        Msg::Admin(cmd) => match this.gossip.admin(cmd).await {
            Ok(text) => Reply::Text(text),
            Err(e) => Reply::Refused(e),
        },
        Msg::HeldFor { partitions } => Reply::Held(this.handoff.held_for(&partitions)),
        Msg::TransferDone {
            partition,
            from,
            to,
        } => {
            let (f, t) = (from.clone(), to.clone());
            let r = this
                .gossip
                .at_claimant(
                    Msg::TransferDone {
                        partition,
                        from,
                        to,
                    },
                    move |s| {
                        s.transfer_done(partition, &f, &t);
                        Ok(())
                    },
                )
                .await;
            match r {
                Ok(_) => Reply::Ok,
                Err(e) => Reply::Refused(e),
            }
        }
    }
}
