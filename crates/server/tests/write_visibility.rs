//! A write is visible to the next request on any of its replicas: once a
//! PUT is acknowledged (w = 2 of n = 3), its third replica's write has been
//! made too, or queued on its vnode ahead of anything the client sends
//! next. Riak promises only the quorum, but a node whose local replica
//! writes start before the reply leaves no window in which a coverage read
//! (2i, one replica a partition) that follows the reply misses one.
//! (The replica writes of a local vnode once ran as spawned tasks; with
//! writes made in place, a client's next request could overtake one that
//! had not run yet.)

mod common;

use basalt_server::pb::{self, code};
use common::{spawn_node, Client};
use prost::Message;

#[test]
fn a_coverage_query_right_after_each_put_sees_every_put() {
    let (h, _d) = spawn_node(false, |_| {});
    let mut c = Client::connect(&h);
    for i in 0..150usize {
        let p = pb::RpbPutReq {
            bucket: b"vis".to_vec(),
            key: Some(format!("k{i:04}").into_bytes()),
            content: pb::RpbContent {
                value: b"v".to_vec(),
                indexes: vec![pb::RpbPair {
                    key: b"tag_bin".to_vec(),
                    value: Some(b"x".to_vec()),
                }],
                ..Default::default()
            },
            ..Default::default()
        };
        c.call(code::PUT_REQ, &p, code::PUT_RESP);
        let q = pb::RpbIndexReq {
            bucket: b"vis".to_vec(),
            index: b"tag_bin".to_vec(),
            qtype: pb::INDEX_EQ,
            key: Some(b"x".to_vec()),
            ..Default::default()
        };
        let b = c.call(code::INDEX_REQ, &q, code::INDEX_RESP);
        let r = pb::RpbIndexResp::decode(b.as_slice()).expect("index reply");
        assert_eq!(r.keys.len(), i + 1, "after put {i}");
    }
}
