//! The Riak PB operations the drivers send — get, put, delete, 2i query,
//! list keys — as the trait [`RiakKv`] on `riak_pb`'s blocking client ([`PbClient`]:
//! framing, connect and I/O timeouts, a reply bound of
//! `riak_pb::DEFAULT_MAX_FRAME`). An `RpbErrorResp` reply is
//! `PbError::Riak`; after any other error the connection is unusable
//! (`PbError::is_fatal`): drop it. A list-keys reply is a stream of
//! `RpbListKeysResp` frames ending with `done`; its timeout bounds the
//! whole stream (each read waits only for what is left of it), and it
//! leaves the socket's timeouts changed.

use riak_pb::{
    code, RpbDelReq, RpbGetReq, RpbGetResp, RpbIndexReq, RpbIndexResp, RpbListKeysReq,
    RpbListKeysResp, RpbPutReq, RpbPutResp,
};
use std::io;
use std::net::{SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

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
    /// `RpbListKeysReq`: reads the streamed `RpbListKeysResp` frames to the
    /// one with `done`, all within `timeout` (else a `TimedOut` I/O error);
    /// returns the number of keys listed.
    fn list_keys(&mut self, req: &RpbListKeysReq, timeout: Duration) -> Result<u64, PbError>;
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

    fn list_keys(&mut self, req: &RpbListKeysReq, timeout: Duration) -> Result<u64, PbError> {
        let deadline = Instant::now() + timeout;
        self.set_timeout(timeout)?;
        self.send_msg(code::LIST_KEYS_REQ, req)?;
        let mut keys = 0u64;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "the key listing did not end within its timeout",
                )
                .into());
            }
            self.set_timeout(left)?;
            let (got, body) = self.recv()?;
            if got != code::LIST_KEYS_RESP {
                return Err(PbError::UnexpectedCode {
                    want: code::LIST_KEYS_RESP,
                    got,
                });
            }
            let r: RpbListKeysResp = riak_pb::decode(&body)?;
            keys += r.keys.len() as u64;
            if r.done == Some(true) {
                return Ok(keys);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use riak_pb::frame_msg;
    use std::io::Write;
    use std::net::TcpListener;

    /// A node that answers one list-keys request with `frames` frames of
    /// two keys each, `gap` apart, the last one `done`.
    fn trickling_node(frames: usize, gap: Duration) -> (SocketAddr, std::thread::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr");
        let h = std::thread::spawn(move || {
            let Ok((mut s, _)) = l.accept() else { return };
            let req = riak_pb::sync::read_frame(&mut s, 1 << 20).expect("request");
            assert_eq!(req.map(|r| r.0), Some(code::LIST_KEYS_REQ));
            for i in 0..frames {
                std::thread::sleep(gap);
                let resp = RpbListKeysResp {
                    keys: vec![format!("a{i}").into_bytes(), format!("b{i}").into_bytes()],
                    done: (i + 1 == frames).then_some(true),
                };
                if s.write_all(&frame_msg(code::LIST_KEYS_RESP, &resp))
                    .is_err()
                {
                    return;
                }
            }
        });
        (addr, h)
    }

    fn list(addr: SocketAddr, timeout: Duration) -> Result<u64, PbError> {
        let mut c = PbClient::connect(addr, timeout, timeout).expect("connect");
        let req = RpbListKeysReq {
            bucket: b"b".to_vec(),
            ..Default::default()
        };
        c.list_keys(&req, timeout)
    }

    #[test]
    fn list_keys_reads_the_stream_to_done() {
        let (addr, node) = trickling_node(3, Duration::from_millis(10));
        assert_eq!(list(addr, Duration::from_secs(10)).expect("listing"), 6);
        node.join().expect("node");
    }

    #[test]
    fn list_keys_timeout_bounds_the_whole_listing() {
        // Each frame comes well within the timeout, the whole does not.
        let (addr, node) = trickling_node(4, Duration::from_millis(150));
        let e = list(addr, Duration::from_millis(400)).expect_err("too slow");
        let kind = e.io_error().map(io::Error::kind);
        assert!(
            matches!(
                kind,
                Some(io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock)
            ),
            "{e}"
        );
        assert!(e.is_fatal());
        node.join().expect("node");
    }
}
