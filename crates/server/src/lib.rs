//! A Basalt node speaking Riak's Protocol Buffers and HTTP APIs (one node,
//! bucket types).
//!
//! * [`pb`]: Riak's PB messages, codes and framing (re-exported from `riak_pb`);
//! * [`object`]: Riak objects (siblings) and their storage encoding;
//! * [`vclock`]: vector clocks with pruning;
//! * [`ring`]: Riak's key hash and preference lists;
//! * [`vnode`]: one backend per partition behind a bounded queue;
//! * [`vnodereq`]: the requests a vnode serves, local or remote;
//! * [`routing`]: primaries, fallbacks, covering sets, local or remote calls;
//! * [`cluster`]: membership, gossip, inter-node transport, handoff;
//! * [`repl`]: replication to another cluster (real-time queue, full-sync);
//! * [`coordinator`]: GET / PUT / DELETE / listings / 2i over the vnodes;
//! * [`props`]: bucket properties;
//! * [`btypes`]: bucket types, typed-bucket keying, preflists, admin requests;
//! * [`server`]: the TCP listener and request dispatch;
//! * [`http`]: Riak's HTTP API (objects, props, listings, 2i, stats, metrics);
//! * [`latency`]: per-operation latency histograms over a recent window;
//! * [`config`]: the TOML configuration.

#![warn(missing_docs)]

pub mod btypes;
pub mod cluster;
pub mod config;
pub mod coordinator;
/// For the fuzz targets only (see the module docs).
#[doc(hidden)]
pub mod fuzz_api;
pub mod http;
pub mod latency;
pub mod object;
pub mod pb;
pub mod props;
pub mod repl;
pub mod ring;
pub mod routing;
pub mod server;
pub mod vclock;
pub mod vnode;
pub mod vnode_id;
pub mod vnodereq;

pub use config::Config;
pub use coordinator::Node;
pub use server::{run, serve, serve_all, ServerHandle, SERVER_VERSION};
