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
