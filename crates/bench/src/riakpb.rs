//! A small blocking Riak Protocol Buffers client (what the PB drivers
//! need: ping, get, put, delete, 2i queries).
//!
//! Framing: every message is `length:u32 big-endian | code:u8 | body`,
//! where `length` counts the code byte and the body; bodies are the
//! `prost` messages of `basalt_server::pb`. A reply of code 0 is an
//! `RpbErrorResp`. Replies longer than [`MAX_REPLY`] are refused (the
//! connection is then unusable, as after any I/O error: drop it).

use basalt_server::pb::{self, code};
use prost::Message;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Largest reply accepted (the server's own frame limit).
pub const MAX_REPLY: usize = pb::DEFAULT_MAX_FRAME;

/// A client error.
#[derive(Debug, thiserror::Error)]
pub enum PbError {
    /// The socket failed (includes timeouts); drop the connection.
    #[error("{0}")]
    Io(#[from] io::Error),
    /// The node answered `RpbErrorResp`.
    #[error("riak error: {0}")]
    Server(String),
    /// The reply was not what the request expects; drop the connection.
    #[error("protocol error: {0}")]
    Protocol(String),
}

impl PbError {
    /// True when the connection can no longer be used.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, PbError::Server(_))
    }
}

/// Resolves `host:port` to its first address.
pub fn resolve(host: &str, port: u16) -> io::Result<SocketAddr> {
    (host, port)
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("{host} has no address")))
}

/// One connection.
#[derive(Debug)]
pub struct PbClient {
    stream: TcpStream,
}

impl PbClient {
    /// Connects within `connect_timeout`; reads and writes then time out
    /// after `io_timeout`.
    pub fn connect(
        addr: SocketAddr,
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> io::Result<PbClient> {
        let stream = TcpStream::connect_timeout(&addr, connect_timeout)?;
        stream.set_nodelay(true)?;
        stream.set_read_timeout(Some(io_timeout))?;
        stream.set_write_timeout(Some(io_timeout))?;
        Ok(PbClient { stream })
    }

    /// Changes the read/write timeout.
    pub fn set_timeout(&self, t: Duration) -> io::Result<()> {
        self.stream.set_read_timeout(Some(t))?;
        self.stream.set_write_timeout(Some(t))
    }

    fn send(&mut self, c: u8, body: &[u8]) -> Result<(), PbError> {
        self.stream.write_all(&pb::frame(c, body))?;
        Ok(())
    }

    fn recv(&mut self) -> Result<(u8, Vec<u8>), PbError> {
        let mut len = [0u8; 4];
        self.stream.read_exact(&mut len)?;
        let len = u32::from_be_bytes(len) as usize;
        if len == 0 {
            return Err(PbError::Protocol("empty frame".into()));
        }
        if len > MAX_REPLY {
            return Err(PbError::Protocol(format!(
                "reply of {len} bytes is over the {MAX_REPLY}-byte limit"
            )));
        }
        let mut c = [0u8; 1];
        self.stream.read_exact(&mut c)?;
        let mut body = vec![0u8; len - 1];
        self.stream.read_exact(&mut body)?;
        if c[0] == code::ERROR_RESP {
            let e = pb::RpbErrorResp::decode(body.as_slice())
                .map_err(|e| PbError::Protocol(format!("bad RpbErrorResp: {e}")))?;
            return Err(PbError::Server(
                String::from_utf8_lossy(&e.errmsg).into_owned(),
            ));
        }
        Ok((c[0], body))
    }

    /// Sends `req` with `c` and returns the body of a reply of code `want`.
    fn call(&mut self, c: u8, body: &[u8], want: u8) -> Result<Vec<u8>, PbError> {
        self.send(c, body)?;
        let (got, body) = self.recv()?;
        if got != want {
            return Err(PbError::Protocol(format!(
                "expected reply code {want}, got {got}"
            )));
        }
        Ok(body)
    }

    fn decode<M: Message + Default>(body: &[u8], what: &str) -> Result<M, PbError> {
        M::decode(body).map_err(|e| PbError::Protocol(format!("bad {what}: {e}")))
    }

    /// `RpbPingReq`.
    pub fn ping(&mut self) -> Result<(), PbError> {
        self.call(code::PING_REQ, &[], code::PING_RESP).map(|_| ())
    }

    /// `RpbGetReq`: `None` when not found (or only a tombstone).
    pub fn get(&mut self, req: &pb::RpbGetReq) -> Result<Option<pb::RpbGetResp>, PbError> {
        let body = self.call(code::GET_REQ, &req.encode_to_vec(), code::GET_RESP)?;
        let resp: pb::RpbGetResp = Self::decode(&body, "RpbGetResp")?;
        let live = resp.content.iter().any(|c| c.deleted != Some(true));
        Ok(live.then_some(resp))
    }

    /// `RpbPutReq`.
    pub fn put(&mut self, req: &pb::RpbPutReq) -> Result<pb::RpbPutResp, PbError> {
        let body = self.call(code::PUT_REQ, &req.encode_to_vec(), code::PUT_RESP)?;
        Self::decode(&body, "RpbPutResp")
    }

    /// `RpbDelReq`.
    pub fn delete(&mut self, req: &pb::RpbDelReq) -> Result<(), PbError> {
        self.call(code::DEL_REQ, &req.encode_to_vec(), code::DEL_RESP)
            .map(|_| ())
    }

    /// `RpbIndexReq` (not streamed): the reply.
    pub fn index(&mut self, req: &pb::RpbIndexReq) -> Result<pb::RpbIndexResp, PbError> {
        let body = self.call(code::INDEX_REQ, &req.encode_to_vec(), code::INDEX_RESP)?;
        Self::decode(&body, "RpbIndexResp")
    }
}
