//! `RpbMembershipReq` (206) on one node: the answer names the node's own
//! PB address, as riak_kv's `membership_request(pb)` does for each member
//! that is up; a malformed body is Riak's decode error and the connection
//! keeps serving.

mod common;

use basalt_server::pb::{self, code};
use common::{spawn_node, Client};
use prost::Message;

#[test]
fn membership_names_the_pb_address_of_each_member_up() {
    let (h, _d) = spawn_node(false, |_| {});
    let mut c = Client::connect(&h);
    let body = c.call(
        code::MEMBERSHIP_REQ,
        &pb::RpbMembershipReq { queuename: None },
        code::MEMBERSHIP_RESP,
    );
    let r = pb::RpbMembershipResp::decode(body.as_slice()).expect("membership resp");
    let want = pb::RpbClusterMemberEntry {
        ip: h.addr().ip().to_string().into_bytes(),
        port: u32::from(h.addr().port()),
    };
    assert_eq!(r.up_nodes, vec![want]);
    // A body that is not an RpbMembershipReq.
    c.send(code::MEMBERSHIP_REQ, &[0xff, 0xff, 0xff]);
    let (rc, _) = c.recv().expect("reply");
    assert_eq!(rc, code::ERROR_RESP);
    c.ping();
}

/// `ServerHandle::spawn` returns with the node's own addresses in its
/// member entry, so a join made at once sends them. Before, the serving
/// thread set them a moment later, and a join racing it gave the cluster
/// an empty address: the others then had nowhere to dial the joiner
/// ("no known address").
#[test]
fn a_spawned_node_advertises_its_addresses_before_spawn_returns() {
    let (h, _d) = spawn_node(false, |_| {});
    let c = h.node().cluster();
    assert_eq!(c.addr_of(c.me()), Some(h.cluster_addr().to_string()));
}

/// A node that has no cluster address yet (opened, not serving) refuses to
/// join rather than join with nowhere to be dialled.
#[test]
fn a_node_without_a_cluster_address_refuses_to_join() {
    let d = tempfile::tempdir().expect("tempdir");
    let node = std::sync::Arc::new(
        basalt_server::Node::open(basalt_server::Config::ephemeral(d.path())).expect("open"),
    );
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let e = rt
        .block_on(node.admin_request(b"join b@127.0.0.1"))
        .expect_err("joined without an address");
    assert!(e.to_string().contains("has no cluster address"), "{e}");
}
