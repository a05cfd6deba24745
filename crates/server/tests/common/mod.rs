//! Shared by the server's integration tests: the blocking PB client of the
//! PB tests (`pb_api.rs`, `bucket_types.rs`, `aae_fold.rs`):
//! `riak_pb::sync::Client` (20 s timeouts) with calls shaped for
//! assertions — I/O failures panic, an `RpbErrorResp` is `Err(errmsg)` or a
//! panic, raw frames for tests of bad input and streams; and the helpers of
//! the in-process node tests ([`runtime`], [`content`]).

#![allow(dead_code)]

use basalt_server::object::Content;
use basalt_server::pb::code;
use basalt_server::ServerHandle;
use prost::Message;
use std::net::SocketAddr;
use std::time::Duration;

/// One connection to a test node.
pub struct Client(pub riak_pb::sync::Client);

impl Client {
    /// Connects to the node's PB port.
    pub fn connect(h: &ServerHandle) -> Client {
        Client::to(h.addr())
    }

    /// Connects to the node's cluster port (admin requests).
    pub fn admin(h: &ServerHandle) -> Client {
        Client::to(h.cluster_addr())
    }

    /// Connects to `addr`.
    pub fn to(addr: SocketAddr) -> Client {
        let t = Duration::from_secs(20);
        Client(riak_pb::sync::Client::connect(addr, t, t).expect("connect"))
    }

    /// Sends one frame.
    pub fn send(&mut self, c: u8, body: &[u8]) {
        self.0.send(c, body).expect("write");
    }

    /// The next frame as it is; `None` when the connection failed or closed.
    pub fn recv(&mut self) -> Option<(u8, Vec<u8>)> {
        self.0.recv_frame().ok()
    }

    /// Sends a request, returns the reply; panics on an ErrorResp.
    pub fn call<M: Message>(&mut self, c: u8, m: &M, want: u8) -> Vec<u8> {
        match self.try_call(c, m) {
            Ok((rc, body)) => {
                assert_eq!(rc, want, "reply code");
                body
            }
            Err(e) => panic!("error reply: {e}"),
        }
    }

    /// Sends a request: the reply, or the `errmsg` of an ErrorResp.
    pub fn try_call<M: Message>(&mut self, c: u8, m: &M) -> Result<(u8, Vec<u8>), String> {
        match self.0.call(c, m) {
            Ok(reply) => Ok(reply),
            Err(riak_pb::Error::Riak { errmsg, .. }) => Err(errmsg),
            Err(e) => panic!("reply: {e}"),
        }
    }

    /// Pings; panics unless the reply is an empty `RpbPingResp`.
    pub fn ping(&mut self) {
        self.send(code::PING_REQ, &[]);
        assert_eq!(self.recv(), Some((code::PING_RESP, vec![])));
    }
}

/// A current-thread runtime for driving an in-process node.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// One sibling holding `v`.
pub fn content(v: &[u8]) -> Content {
    Content {
        value: v.to_vec(),
        value_len: v.len() as u32,
        ..Content::default()
    }
}
