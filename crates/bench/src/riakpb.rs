//! The Riak PB operations the drivers send — get, put, delete, 2i query —
//! as the trait [`RiakKv`] on `riak_pb`'s blocking client ([`PbClient`]:
//! framing, connect and I/O timeouts, a reply bound of
//! `riak_pb::DEFAULT_MAX_FRAME`). An `RpbErrorResp` reply is
//! `PbError::Riak`; after any other error the connection is unusable
//! (`PbError::is_fatal`): drop it.

use riak_pb::{
    code, RpbDelReq, RpbGetReq, RpbGetResp, RpbIndexReq, RpbIndexResp, RpbPutReq, RpbPutResp,
};
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};

pub use riak_pb::sync::Client as PbClient;
pub use riak_pb::Error as PbError;

/// Resolves `host:port` to its first address.
pub fn resolve(host: &str, port: u16) -> io::Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address")))
}

/// The key/value requests of the PB drivers.
pub trait RiakKv {
    /// `RpbGetReq`: `None` when not found (or only a tombstone).
    fn get(&mut self, req: &RpbGetReq) -> Result<Option<RpbGetResp>, PbError>;
    /// `RpbPutReq`.
    fn put(&mut self, req: &RpbPutReq) -> Result<RpbPutResp, PbError>;
    /// `RpbDelReq`.
    fn delete(&mut self, req: &RpbDelReq) -> Result<(), PbError>;
    /// `RpbIndexReq` (not streamed): the reply.
    fn index(&mut self, req: &RpbIndexReq) -> Result<RpbIndexResp, PbError>;
}

impl RiakKv for PbClient {
    fn get(&mut self, req: &RpbGetReq) -> Result<Option<RpbGetResp>, PbError> {
        let resp: RpbGetResp = self.request(code::GET_REQ, req, code::GET_RESP)?;
        let live = resp.content.iter().any(|c| c.deleted != Some(true));
        Ok(live.then_some(resp))
    }

    fn put(&mut self, req: &RpbPutReq) -> Result<RpbPutResp, PbError> {
        self.request(code::PUT_REQ, req, code::PUT_RESP)
    }

    fn delete(&mut self, req: &RpbDelReq) -> Result<(), PbError> {
        self.request(code::DEL_REQ, req, code::DEL_RESP)
    }

    fn index(&mut self, req: &RpbIndexReq) -> Result<RpbIndexResp, PbError> {
        self.request(code::INDEX_REQ, req, code::INDEX_RESP)
    }
}
