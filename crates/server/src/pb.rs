//! Riak's Protocol Buffers wire format, as the rest of the server names it:
//! a re-export of the `riak_pb` crate (`crates/riak-pb`: messages generated
//! from basho/riak_pb's `.proto` files, the message code table, framing
//! with a size limit) with the async [`read_frame`] / [`write_frame`] of
//! its `tokio` side, so `crate::pb::RpbContent`, `crate::pb::code::GET_REQ`
//! and `crate::pb::frame_msg` name the generated items.

pub use riak_pb::messages::*;
pub use riak_pb::tokio::{read_frame, write_frame};
pub use riak_pb::{
    code, frame, frame_msg, quorum, FrameError, DEFAULT_MAX_FRAME, INDEX_EQ, INDEX_RANGE,
};

#[cfg(test)]
mod tests {
    use super::code::basalt;

    /// The cluster code still names its Basalt-only codes where it serves
    /// them; they must match the shared table.
    #[test]
    fn the_cluster_codes_match_the_table() {
        use crate::cluster::transport;
        use crate::gossip as control;
        assert_eq!(
            [
                control::ADMIN_CLUSTER_REQ,
                control::ADMIN_CLUSTER_RESP,
                transport::CLUSTER_REQ,
                transport::CLUSTER_RESP,
            ],
            [
                basalt::ADMIN_CLUSTER_REQ,
                basalt::ADMIN_CLUSTER_RESP,
                basalt::CLUSTER_REQ,
                basalt::CLUSTER_RESP,
            ]
        );
    }
}
