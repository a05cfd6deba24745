//! Riak's APIs for KV, bucket props and bucket types: Protocol Buffers
//! ([`pb`]: one module per service) and HTTP ([`http`]), with the
//! permission tables of both. The capabilities' own PB and HTTP handlers
//! live in their folders; [`crate::server`] runs the listeners and routes
//! each request.

pub mod http;
pub mod pb;
