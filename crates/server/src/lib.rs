//! A Basalt node speaking Riak's Protocol Buffers and HTTP APIs, alone or
//! in a cluster. Laid out as ARCHITECTURE.md's "The server" says, and
//! checked by `crates/house`:
//!
//! * the **platform**, lowest first: [`limits`], [`pb`], [`fsutil`],
//!   [`latency`], [`error`], [`ring`]; [`crdt`], [`security`]; [`object`];
//!   [`bucket`]; [`config`]; [`vnode`]; [`cluster`]; [`router`]; [`kv`] (the
//!   request FSMs on the [`kv::Kv`] handle); [`api`] (PB and HTTP for KV);
//! * the **capabilities** beside it, each owning its handlers, state and
//!   background work: [`aae`], [`repl`], [`mapred`], [`datatypes`],
//!   [`gossip`], [`handoff`]; the platform hears of them only through the
//!   interfaces it defines ([`kv::WriteObserver`], [`kv::PreCommit`],
//!   [`kv::HeldCopies`], `cluster::Msg::Service`);
//! * the **assembly**: [`node`] (opens, wires and closes the parts),
//!   [`server`] (listeners, dispatch tables, the cluster port, stats) and
//!   [`console`] (the web console at `/console`).

#![warn(missing_docs)]

pub mod aae;
pub mod api;
pub mod bucket;
pub mod cluster;
pub mod config;
pub mod console;
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
pub use server::{run, runtime, serve, serve_all, HttpListeners, ServerHandle, SERVER_VERSION};
