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

    /// The server still names its Basalt-only codes where it serves them;
    /// they must match the shared table.
    #[test]
    fn the_servers_own_codes_match_the_table() {
        use crate::btypes::code as bt;
        assert_eq!(
            [
                bt::ADMIN_TYPE_CREATE_REQ,
                bt::ADMIN_TYPE_CREATE_RESP,
                bt::ADMIN_TYPE_ACTIVATE_REQ,
                bt::ADMIN_TYPE_ACTIVATE_RESP,
                bt::ADMIN_TYPE_LIST_REQ,
                bt::ADMIN_TYPE_LIST_RESP,
                bt::ADMIN_TYPE_STATUS_REQ,
                crate::cluster::control::ADMIN_CLUSTER_REQ,
                crate::cluster::control::ADMIN_CLUSTER_RESP,
                crate::cluster::transport::CLUSTER_REQ,
                crate::cluster::transport::CLUSTER_RESP,
            ],
            [
                basalt::ADMIN_TYPE_CREATE_REQ,
                basalt::ADMIN_TYPE_CREATE_RESP,
                basalt::ADMIN_TYPE_ACTIVATE_REQ,
                basalt::ADMIN_TYPE_ACTIVATE_RESP,
                basalt::ADMIN_TYPE_LIST_REQ,
                basalt::ADMIN_TYPE_LIST_RESP,
                basalt::ADMIN_TYPE_STATUS_REQ,
                basalt::ADMIN_CLUSTER_REQ,
                basalt::ADMIN_CLUSTER_RESP,
                basalt::CLUSTER_REQ,
                basalt::CLUSTER_RESP,
            ]
        );
        assert_eq!(
            [
                bt::GET_BUCKET_TYPE_REQ,
                bt::SET_BUCKET_TYPE_REQ,
                bt::GET_BUCKET_KEY_PREFLIST_REQ,
                bt::GET_BUCKET_KEY_PREFLIST_RESP,
            ],
            [
                super::code::GET_BUCKET_TYPE_REQ,
                super::code::SET_BUCKET_TYPE_REQ,
                super::code::GET_BUCKET_KEY_PREFLIST_REQ,
                super::code::GET_BUCKET_KEY_PREFLIST_RESP,
            ]
        );
    }
}
