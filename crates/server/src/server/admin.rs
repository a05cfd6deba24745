//! The cluster port's admin service, for `basalt admin`: the cluster admin
//! line and bucket-type administration.
//!
//! Codes: 247 (`ADMIN_CLUSTER_REQ`: a command line) → 248 (its text
//! output); 240–246 (bucket-type admin, see [`crate::api::pb::btypes`]); Riak's 31–33
//! (`bucket-type update` sends 32); Riak's anti-entropy fold requests
//! 210–231 (`basalt admin aae fold`, see [`crate::aae::pb`]); `RpbPingReq`
//! 1. Anything else is an unknown code.

use crate::api::pb::unknown_code;
use crate::error::RequestError;
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
