//! The cluster port's admin service, for `basalt admin`: the cluster admin
//! line and bucket-type administration.
//!
//! Codes: 247 (`ADMIN_CLUSTER_REQ`: a command line) → 248 (its text
//! output); 240–246 (bucket-type admin, see [`crate::api::pb::btypes`]); Riak's 31–33
//! (`bucket-type update` sends 32); Riak's anti-entropy fold requests
//! 210–231 (`basalt admin aae fold`, see [`crate::aae::pb`]); `RpbPingReq`
//! 1; the backup codes 249 → 250 go to [`super::backup`] (by the dispatch).
//! Anything else is an unknown code.

use crate::api::pb::unknown_code;
use crate::cluster::AdminCmd;
use crate::error::RequestError;
use crate::gossip::type_of;
use crate::node::Node;
use crate::pb::{code, frame};
use std::sync::Arc;

/// Handles one admin request on the cluster port: the cluster admin line
/// (247), the bucket-type admin codes (240–246), Riak's bucket-type codes
/// (`bucket-type update` sends 32) and ping; anything else is an unknown
/// code.
pub(crate) async fn handle(
    node: &Arc<Node>,
    c: u8,
    body: &[u8],
) -> Result<Vec<Vec<u8>>, RequestError> {
    if c == code::PING_REQ {
        return Ok(vec![frame(code::PING_RESP, &[])]);
    }
    if c == crate::gossip::ADMIN_CLUSTER_REQ {
        let text = node.admin_request(body).await?;
        return Ok(vec![frame(
            crate::gossip::ADMIN_CLUSTER_RESP,
            text.as_bytes(),
        )]);
    }
    if crate::aae::pb::serves(c) {
        return crate::aae::pb::handle(node.aae(), c, body).await;
    }
    if let Some(frames) = crate::api::pb::btypes::handle_admin(node.kv(), c, body)? {
        return Ok(frames);
    }
    crate::api::pb::btypes::handle(node.kv(), c, body)?.ok_or_else(|| unknown_code(c))
}

/// The services a node runs, by Riak's names (`riak admin services`):
/// `riak_kv` (KV, 2i, listings, data types), `riak_pipe` (MapReduce),
/// `riak_api` (the PB and HTTP listeners). A node answers on its cluster
/// port only once it can serve (see [`super::listen`]), so every one of
/// them is up whenever the node answers.
pub const SERVICES: [&str; 3] = ["riak_api", "riak_kv", "riak_pipe"];

/// The admin line of `basalt admin` (cluster membership, transfers,
/// anti-entropy, replication, security, the node's views): each command
/// to the part that runs it. A line that starts with the word `--json`
/// answers with one JSON document holding the facts of the text form
/// (a command that only prints a message answers `{"message": TEXT}`).
impl Node {
    /// Serves an [`ADMIN_CLUSTER_REQ`](crate::gossip::ADMIN_CLUSTER_REQ) body.
    pub async fn admin_request(self: &Arc<Self>, body: &[u8]) -> Result<String, RequestError> {
        let line = std::str::from_utf8(body)
            .map_err(|_| RequestError::Invalid("cluster command is not UTF-8".into()))?;
        let words: Vec<&str> = line.split_whitespace().collect();
        let r = match words.as_slice() {
            ["--json", rest @ ..] => self.admin_json(rest).await.map(|v| v.to_string()),
            _ => self.admin_text(&words).await,
        };
        r.map_err(RequestError::Invalid)
    }

    /// The JSON form of an admin line (without its `--json` word).
    pub(crate) async fn admin_json(
        self: &Arc<Self>,
        words: &[&str],
    ) -> Result<serde_json::Value, String> {
        use serde_json::json;
        let to = |v: Result<serde_json::Value, serde_json::Error>| v.map_err(|e| e.to_string());
        match words {
            ["services"] => Ok(json!({"node": self.config().node_name, "services": SERVICES})),
            ["member-status"] => Ok(self.gossip.member_status_json()),
            ["ring-status"] => to(serde_json::to_value(self.gossip.ring_view())),
            ["transfer-limit", rest @ ..] if rest.len() <= 1 => {
                self.admin_text(words).await?;
                Ok(
                    json!({"node": self.config().node_name, "transfer_limit": self.handoff.transfer_limit()}),
                )
            }
            ["plan"] => {
                let text = self.gossip.admin(AdminCmd::PlanJson).await?;
                to(serde_json::from_str(&text))
            }
            ["status"] => Ok(super::metrics::stats_json(self).await),
            ["vnode-status"] => to(serde_json::to_value(self.vnode_rows().await)),
            ["transfers"] => Ok(self.cluster_transfers().await.json()),
            ["handoff", "summary"] => Ok(self.cluster_transfers().await.summary_json()),
            ["handoff", "details"] => Ok(self.cluster_transfers().await.details_json()),
            ["handoff", "config"] => Ok(self.handoff_config()),
            ["ringready"] => Ok(self.cluster_transfers().await.ringready_json()),
            ["config"] => Ok(self.config_json()),
            ["disk-usage"] => to(serde_json::to_value(self.disk_usage().await)),
            ["aae-status"] => to(serde_json::to_value(self.aae.aae_status_view().await)),
            ["aae-round"] => {
                let x = self.aae.aae_round().await;
                Ok(json!({
                    "dirty_segments": x.dirty_segments,
                    "repaired": x.repaired,
                    "loops": x.loops,
                    "range_repairs": x.range_repairs,
                    "skipped": x.skipped,
                }))
            }
            ["aae-verify"] => {
                let bad = self
                    .aae
                    .aae_verify_trees()
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(json!({"match": bad.is_empty(), "differ": bad}))
            }
            ["repl-status"] => Ok(self.repl.repl_status_json()),
            [w, ..] if w.starts_with("repl-fullsync") => {
                match self.repl.repl_fullsync_json(words).await {
                    Some(r) => r,
                    None => self
                        .admin_text(words)
                        .await
                        .map(|t| json!({"message": t.trim_end()})),
                }
            }
            ["security", rest @ ..] => match self.security.admin_json(rest) {
                Some(v) => Ok(v),
                None => {
                    let text = self.admin_text(words).await?;
                    Ok(json!({"message": text.trim_end()}))
                }
            },
            _ => {
                let text = self.admin_text(words).await?;
                Ok(json!({"message": text.trim_end()}))
            }
        }
    }

    /// The node's data directory as `disk-usage` reports it (walked on a
    /// blocking thread).
    pub async fn disk_usage(&self) -> super::admin_views::DiskUsage {
        let dir = self.config().data_dir.clone();
        let shown = dir.display().to_string();
        tokio::task::spawn_blocking(move || super::admin_views::disk_usage(&dir))
            .await
            .unwrap_or_else(|e| super::admin_views::DiskUsage {
                data_dir: shown,
                errors: vec![format!("the walk failed: {e}")],
                ..Default::default()
            })
    }

    /// The text form of an admin line.
    async fn admin_text(self: &Arc<Self>, words: &[&str]) -> Result<String, String> {
        use super::admin_views as views;
        match words {
            ["join", addr] => self.gossip.join(addr).await,
            ["leave"] => self.gossip.admin(AdminCmd::Leave(self.router.cluster.me().to_string())).await,
            ["leave", n] => self.gossip.admin(AdminCmd::Leave((*n).to_string())).await,
            ["plan"] => self.gossip.admin(AdminCmd::Plan).await,
            ["commit"] => self.gossip.admin(AdminCmd::Commit).await,
            ["clear"] => self.gossip.admin(AdminCmd::Clear).await,
            ["replace", old, new] => {
                self.gossip
                    .admin(AdminCmd::Replace((*old).to_string(), (*new).to_string()))
                    .await
            }
            ["force-replace", old, new] => {
                self.gossip
                    .admin(AdminCmd::ForceReplace((*old).to_string(), (*new).to_string()))
                    .await
            }
            ["force-remove", n] => self.gossip.admin(AdminCmd::ForceRemove((*n).to_string())).await,
            ["down", n] => self.gossip.admin(AdminCmd::Down((*n).to_string())).await,
            ["services"] => Ok(format!(
                "node: {}\nservices: {}\n",
                self.config().node_name,
                SERVICES.join(" ")
            )),
            ["member-status"] => Ok(self.gossip.member_status()),
            ["ring-status"] => Ok(self.gossip.ring_status()),
            ["status"] => Ok(views::status_text(
                &self.config().node_name,
                &super::metrics::stats_json(self).await,
            )),
            ["vnode-status"] => Ok(views::vnode_text(&self.vnode_rows().await)),
            ["transfers"] => Ok(self.cluster_transfers().await.text()),
            ["handoff", "summary"] => Ok(self.cluster_transfers().await.summary_text()),
            ["handoff", "details"] => Ok(self.cluster_transfers().await.details_text()),
            ["handoff", "config"] => Ok(super::transfers::handoff_config_text(&self.handoff_config())),
            ["ringready"] => Ok(self.cluster_transfers().await.ringready().1),
            ["config"] => Ok(views::config_text(&self.config_json())),
            ["disk-usage"] => Ok(self.disk_usage().await.text()),
            ["transfer-limit"] => Ok(format!(
                "transfer limit: {}\n",
                self.handoff.transfer_limit()
            )),
            ["transfer-limit", n] => match n.parse::<usize>() {
                Ok(n) => self
                    .handoff
                    .set_transfer_limit(n)
                    .map(|()| format!("transfer limit: {n}\n")),
                Err(_) => Err(format!("transfer-limit: {n:?} is not a number\n")),
            },
            ["aae-status"] => Ok(self.aae.aae_status().await),
            ["aae-rebuild"] => self.aae.aae_request_rebuild(None),
            ["aae-rebuild", p] => match p.parse::<u32>() {
                Ok(p) => self.aae.aae_request_rebuild(Some(p)),
                Err(_) => Err(format!("aae-rebuild: {p:?} is not a partition number\n")),
            },
            ["aae-round"] => {
                let x = self.aae.aae_round().await;
                Ok(format!(
                    "anti-entropy round: {} dirty segments, {} keys repaired, {} follow-up loops, {} range repairs, {} exchanges skipped\n",
                    x.dirty_segments, x.repaired, x.loops, x.range_repairs, x.skipped
                ))
            }
            ["aae-verify"] => self.aae.aae_verify_trees().await.map_err(|e| e.to_string()).map(|bad| {
                if bad.is_empty() {
                    "every local vnode's anti-entropy trees match a fresh fold\n".to_string()
                } else {
                    format!("trees differ from a fresh fold on partitions {bad:?}\n")
                }
            }),
            [w, ..] if w.starts_with("repl-") => self.repl.repl_admin(words).await,
            ["security", "grant", _, "on", scope, "to", _] if self.gossip.missing_type(scope) => {
                Err(format!("no bucket type {:?}: create it first (grant on {scope})", type_of(scope)))
            }
            ["security", rest @ ..] => {
                let r = self.security.admin(rest);
                if r.is_ok() && rest.first().is_some_and(|w| !w.starts_with("print") && *w != "status") {
                    self.gossip.gossip_now.notify_one();
                }
                r
            }
            _ => Err(format!(
                "unknown cluster command {:?}: services | join ADDR | leave [NODE] | replace OLD NEW | force-replace OLD NEW | force-remove NODE | down NODE | plan | commit | clear | member-status | ring-status | status | vnode-status | transfers | handoff summary|details|config | ringready | config | disk-usage | transfer-limit [N] | repl-status | repl-fullsync | repl-sink-add NAME FILTER PEER[,PEER] | repl-sink-remove NAME | repl-sink-suspend NAME | repl-sink-resume NAME | repl-queue-clear NAME | aae-status | aae-round | aae-rebuild [PARTITION] | aae-verify (a leading --json answers in JSON)",
                words.join(" ")
            )),
        }
    }
}
