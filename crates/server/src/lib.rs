//! A Basalt node speaking Riak's Protocol Buffers and HTTP APIs, alone or
//! in a cluster. The modules, by role (lower ones never import higher ones):
//!
//! * [`object`]: Riak objects (siblings, dots), vector clocks, storage encoding;
//! * [`bucket`]: bucket properties and bucket types;
//! * [`ring`]: Riak's key hash and preference lists on the ring;
//! * [`vnode`]: one backend per partition behind a bounded queue: the
//!   requests it serves, serving them, the merge steps, its incarnation id;
//! * [`cluster`]: membership (state, claim), inter-node messages and transport;
//! * [`router`]: a key's vnodes, coverage plans, local or remote calls;
//! * [`node`]: opens and closes a node; owns the router;
//! * [`kv`]: the request FSMs (GET, PUT, DELETE, listings, 2i, CS fold)
//!   with their pure cores;
//! * [`services`]: background work: handoff, anti-entropy, replication,
//!   gossip and cluster administration;
//! * [`js`], [`mapred`], [`hooks`]: the JavaScript VM pools, MapReduce
//!   (job parser, built-ins, the pure phase core, the runner), commit hooks;
//! * [`api`]: the PB API (one file per service), HTTP, the cluster port;
//! * [`error`], [`limits`], [`config`], [`latency`]: cross-cutting pieces.

#![warn(missing_docs)]

pub mod aae;
pub mod api;
pub mod bucket;
pub mod cluster;
pub mod config;
pub mod crdt;
pub mod datatypes;
pub mod error;
pub mod fsutil;
/// For the fuzz targets only (see the module docs).
#[doc(hidden)]
pub mod fuzz_api;
pub mod gossip;
pub mod handoff;
pub mod kv;
pub mod latency;
pub mod limits;
pub mod mapred;
pub mod node;
pub mod object;
pub mod pb;
pub mod repl;
pub mod ring;
pub mod router;
pub mod security;
pub mod server;
pub mod vnode;

pub use config::Config;
pub use node::Node;
pub use server::{run, serve, serve_all, HttpListeners, ServerHandle, SERVER_VERSION};
