//! The node's APIs: Riak's Protocol Buffers ([`pb`]: listeners, one module
//! per service) and HTTP ([`http`]), and the cluster port's node-to-node
//! messages ([`cluster`]).

pub mod http;
pub mod pb;
