//! The membership request of riak_kv 3.x (`riak_kv_pb_object`,
//! `riak_client:membership_request(pb)`): the PB address of every member
//! that is up, so a client (or a replication peer) can spread its
//! connections over the cluster.
//!
//! Codes: `RpbMembershipReq` 206 → `RpbMembershipResp` 207, one
//! `RpbClusterMemberEntry {ip, port}` per member that is up and has
//! advertised a PB address (`advertise_pb`, else the bound one), this node
//! included. The request's `queuename` is ignored, as Riak ignores it. No
//! permission beyond a session (Riak checks none).

use super::decode;
use crate::error::RequestError;
use crate::kv::Kv;
use crate::pb::{self, code, frame_msg};
use std::sync::Arc;

/// `RpbMembershipReq`.
pub(crate) fn members(kv: &Arc<Kv>, body: &[u8]) -> Result<Vec<Vec<u8>>, RequestError> {
    let _: pb::RpbMembershipReq = decode(body)?;
    let cluster = &kv.router.cluster;
    let addrs: Vec<(String, String)> = cluster.with_state(|s| {
        s.members
            .iter()
            .map(|(name, m)| (name.clone(), m.addr.clone()))
            .collect()
    });
    let up_nodes = addrs
        .into_iter()
        .filter(|(name, addr)| !addr.is_empty() && cluster.is_up(name))
        .filter_map(|(_, addr)| {
            let (ip, port) = super::coverage::split_addr(&addr);
            (port != 0).then(|| pb::RpbClusterMemberEntry {
                ip: ip.into_bytes(),
                port,
            })
        })
        .collect();
    Ok(vec![frame_msg(
        code::MEMBERSHIP_RESP,
        &pb::RpbMembershipResp { up_nodes },
    )])
}
