//! The blocking side: [`read_frame`] / [`write_frame`] over any
//! `Read` / `Write`, and [`Client`], one PB connection over std TCP — a
//! connect timeout, read and write timeouts, a bound on the size of a reply
//! (default [`DEFAULT_MAX_FRAME`]), raw frames for tests and streamed
//! replies, and typed calls that decode the reply and turn an
//! `RpbErrorResp` into [`Error::Riak`]. Used by the load tool's PB
//! drivers, `basalt admin` and the tests. With feature `tls`,
//! [`Client::starttls`] upgrades the connection (`RpbStartTls`, then a
//! rustls handshake), [`Client::tls_handshake`] speaks TLS from the first
//! byte, and [`Client::auth`] sends `RpbAuthReq`.

use crate::client::{expect, reply};
use crate::framing::{check_header, split};
use crate::{code, frame, frame_msg, Error, FrameError, DEFAULT_MAX_FRAME};
use prost::Message;
use std::io::{self, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// Reads one frame of at most `max` bytes (code included): `Ok(None)` on a
/// clean end of stream before a frame.
pub fn read_frame<R: Read>(r: &mut R, max: usize) -> Result<Option<(u8, Vec<u8>)>, FrameError> {
    let mut len = [0u8; 4];
    let read = r.read_exact(&mut len);
    let Some(len) = check_header(read, len, max)? else {
        return Ok(None);
    };
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf)?;
    split(buf).map(Some)
}

/// Writes one frame.
pub fn write_frame<W: Write>(w: &mut W, code: u8, body: &[u8]) -> io::Result<()> {
    w.write_all(&frame(code, body))
}

/// One blocking PB connection. Requests are strictly serial: each call
/// writes a request and reads its reply.
#[derive(Debug)]
pub struct Client {
    stream: TcpStream,
    max_reply: usize,
    /// The TLS session after [`Client::starttls`].
    #[cfg(feature = "tls")]
    tls: Option<Box<rustls::ClientConnection>>,
}

/// A byte stream: the socket, or TLS over it.
trait Io: Read + Write {}
impl<T: Read + Write> Io for T {}

impl Client {
    /// Connects to the first address of `addr` that accepts within
    /// `connect_timeout` (each address tried in turn); reads and writes
    /// then time out after `io_timeout`. Nagle is off.
    pub fn connect<A: ToSocketAddrs>(
        addr: A,
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> io::Result<Client> {
        let mut last = None;
        for a in addr.to_socket_addrs()? {
            match TcpStream::connect_timeout(&a, connect_timeout) {
                Ok(stream) => {
                    let c = Client::from_stream(stream)?;
                    c.set_timeout(io_timeout)?;
                    return Ok(c);
                }
                Err(e) => last = Some(e),
            }
        }
        Err(last.unwrap_or_else(|| {
            io::Error::new(io::ErrorKind::NotFound, "the address resolves to nothing")
        }))
    }

    /// Wraps a connected stream (its timeouts are left as they are).
    pub fn from_stream(stream: TcpStream) -> io::Result<Client> {
        stream.set_nodelay(true)?;
        Ok(Client {
            stream,
            max_reply: DEFAULT_MAX_FRAME,
            #[cfg(feature = "tls")]
            tls: None,
        })
    }

    /// Runs `f` on the connection's byte stream (TLS once upgraded).
    fn with_io<T>(&mut self, f: impl FnOnce(&mut dyn Io) -> T) -> T {
        #[cfg(feature = "tls")]
        if let Some(tls) = self.tls.as_deref_mut() {
            return f(&mut rustls::Stream::new(tls, &mut self.stream));
        }
        f(&mut self.stream)
    }

    /// `RpbStartTls`, then a TLS handshake with `config` for server
    /// `name`; every later frame travels over TLS.
    #[cfg(feature = "tls")]
    pub fn starttls(
        &mut self,
        config: std::sync::Arc<rustls::ClientConfig>,
        name: rustls::pki_types::ServerName<'static>,
    ) -> Result<(), Error> {
        if self.tls.is_some() {
            return Err(io::Error::other("the connection already uses TLS").into());
        }
        expect::<()>(self.call_raw(code::START_TLS, &[])?, code::START_TLS)?;
        self.tls_handshake(config, name)
    }

    /// A TLS handshake with `config` for server `name` right away, without
    /// `RpbStartTls` (a listener that speaks TLS from the first byte, as
    /// Basalt's cluster port with mutual TLS); every later frame travels
    /// over TLS.
    #[cfg(feature = "tls")]
    pub fn tls_handshake(
        &mut self,
        config: std::sync::Arc<rustls::ClientConfig>,
        name: rustls::pki_types::ServerName<'static>,
    ) -> Result<(), Error> {
        if self.tls.is_some() {
            return Err(io::Error::other("the connection already uses TLS").into());
        }
        let mut conn = rustls::ClientConnection::new(config, name)
            .map_err(|e| Error::from(io::Error::other(e)))?;
        while conn.is_handshaking() {
            conn.complete_io(&mut self.stream)?;
        }
        self.tls = Some(Box::new(conn));
        Ok(())
    }

    /// `RpbAuthReq` with `user` and `password` → `RpbAuthResp`.
    #[cfg(feature = "tls")]
    pub fn auth(&mut self, user: &str, password: &str) -> Result<(), Error> {
        let req = crate::RpbAuthReq {
            user: user.as_bytes().to_vec(),
            password: password.as_bytes().to_vec(),
        };
        expect::<()>(self.call(code::AUTH_REQ, &req)?, code::AUTH_RESP)
    }

    /// Changes the read and write timeout.
    pub fn set_timeout(&self, t: Duration) -> io::Result<()> {
        self.stream.set_read_timeout(Some(t))?;
        self.stream.set_write_timeout(Some(t))
    }

    /// Changes the largest reply accepted (code byte included); a longer
    /// one fails with [`FrameError::TooLarge`] before its body is read.
    pub fn set_max_reply(&mut self, max: usize) {
        self.max_reply = max;
    }

    /// The socket, e.g. to write bytes that are not a frame (under TLS,
    /// bytes written here bypass it).
    pub fn stream(&mut self) -> &mut TcpStream {
        &mut self.stream
    }

    /// Sends one frame.
    pub fn send(&mut self, code: u8, body: &[u8]) -> Result<(), Error> {
        Ok(self.with_io(|mut io| write_frame(&mut io, code, body))?)
    }

    /// Sends a message as one frame.
    pub fn send_msg<M: Message>(&mut self, code: u8, msg: &M) -> Result<(), Error> {
        let f = frame_msg(code, msg);
        Ok(self.with_io(|io| io.write_all(&f))?)
    }

    /// Reads one frame as it is, `RpbErrorResp` included;
    /// [`Error::Closed`] at the end of the stream.
    pub fn recv_frame(&mut self) -> Result<(u8, Vec<u8>), Error> {
        let max = self.max_reply;
        self.with_io(|mut io| read_frame(&mut io, max))?
            .ok_or(Error::Closed)
    }

    /// Reads one reply; an `RpbErrorResp` is [`Error::Riak`].
    pub fn recv(&mut self) -> Result<(u8, Vec<u8>), Error> {
        let max = self.max_reply;
        reply(self.with_io(|mut io| read_frame(&mut io, max))?)
    }

    /// Sends `msg` with `code` and reads the reply (code, body).
    pub fn call<M: Message>(&mut self, code: u8, msg: &M) -> Result<(u8, Vec<u8>), Error> {
        self.send_msg(code, msg)?;
        self.recv()
    }

    /// Sends a raw body with `code` and reads the reply (code, body).
    pub fn call_raw(&mut self, code: u8, body: &[u8]) -> Result<(u8, Vec<u8>), Error> {
        self.send(code, body)?;
        self.recv()
    }

    /// Sends `req` with `code` and decodes the reply, which must have code
    /// `want`.
    pub fn request<Req: Message, Resp: Message + Default>(
        &mut self,
        code: u8,
        req: &Req,
        want: u8,
    ) -> Result<Resp, Error> {
        expect(self.call(code, req)?, want)
    }

    /// `RpbPingReq` → `RpbPingResp`.
    pub fn ping(&mut self) -> Result<(), Error> {
        expect::<()>(self.call_raw(code::PING_REQ, &[])?, code::PING_RESP)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RpbGetReq, RpbGetResp};
    use std::net::TcpListener;

    #[test]
    fn frames_round_trip() {
        let mut wire = Vec::new();
        write_frame(&mut wire, code::PING_REQ, &[]).expect("write");
        write_frame(&mut wire, code::GET_REQ, b"body").expect("write");
        let mut r = wire.as_slice();
        assert_eq!(
            read_frame(&mut r, 16).expect("read"),
            Some((code::PING_REQ, vec![]))
        );
        assert_eq!(
            read_frame(&mut r, 16).expect("read"),
            Some((code::GET_REQ, b"body".to_vec()))
        );
        assert_eq!(read_frame(&mut r, 16).expect("eof"), None);
    }

    #[test]
    fn empty_oversize_and_truncated_frames_are_refused() {
        let mut r: &[u8] = &[0, 0, 0, 0];
        assert!(matches!(read_frame(&mut r, 16), Err(FrameError::Empty)));
        // Refused on the header: the body is never read.
        let mut r: &[u8] = &[0, 0, 0, 17, 1];
        assert!(matches!(
            read_frame(&mut r, 16),
            Err(FrameError::TooLarge { len: 17, max: 16 })
        ));
        assert_eq!(r, &[1]);
        // Truncated body: an I/O error, not a clean end.
        let mut r: &[u8] = &[0, 0, 0, 5, 1, 2];
        assert!(
            matches!(read_frame(&mut r, 16), Err(FrameError::Io(e)) if e.kind() == io::ErrorKind::UnexpectedEof)
        );
    }

    /// The frames a fake node read.
    type Seen = std::thread::JoinHandle<Vec<(u8, Vec<u8>)>>;

    /// A one-connection node that answers each request with `replies`' next
    /// bytes; returns the address and the requests it read.
    fn fake_node(replies: Vec<Vec<u8>>) -> (String, Seen) {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = l.local_addr().expect("addr").to_string();
        let h = std::thread::spawn(move || {
            let (mut s, _) = l.accept().expect("accept");
            let mut seen = Vec::new();
            for r in replies {
                match read_frame(&mut s, DEFAULT_MAX_FRAME) {
                    Ok(Some(f)) => seen.push(f),
                    _ => break,
                }
                if s.write_all(&r).is_err() {
                    break;
                }
            }
            seen
        });
        (addr, h)
    }

    #[test]
    fn client_calls_errors_and_reply_limit() {
        let (resp, mut replies) = crate::client::canned_replies("no such bucket", 3);
        replies.push(frame(code::PUT_RESP, &[]));
        replies.push(frame(code::GET_RESP, &[0; 64]));
        let (addr, node) = fake_node(replies);
        let t = Duration::from_secs(10);
        let mut c = Client::connect(addr.as_str(), t, t).expect("connect");
        c.ping().expect("ping");
        let req = RpbGetReq {
            bucket: b"b".to_vec(),
            key: b"k".to_vec(),
            ..Default::default()
        };
        let got: RpbGetResp = c.request(code::GET_REQ, &req, code::GET_RESP).expect("get");
        assert_eq!(got, resp);
        let e = c.call(code::GET_REQ, &req).expect_err("error reply");
        assert!(matches!(&e, Error::Riak { errmsg, errcode: 3 } if errmsg == "no such bucket"));
        let e = c
            .request::<_, RpbGetResp>(code::GET_REQ, &req, code::GET_RESP)
            .expect_err("wrong code");
        assert!(matches!(e, Error::UnexpectedCode { want: 10, got: 12 }));
        c.set_max_reply(32);
        let e = c.call(code::GET_REQ, &req).expect_err("too large");
        assert!(matches!(
            e,
            Error::Frame(FrameError::TooLarge { len: 65, max: 32 })
        ));
        let seen = node.join().expect("node");
        assert_eq!(seen.len(), 5);
        assert_eq!(seen[0], (code::PING_REQ, vec![]));
        assert_eq!(seen[1], (code::GET_REQ, req.encode_to_vec()));
    }

    #[test]
    fn closed_connection_and_unreachable_node() {
        let (addr, node) = fake_node(Vec::new());
        let t = Duration::from_secs(10);
        let mut c = Client::connect(addr.as_str(), t, t).expect("connect");
        node.join().expect("node");
        assert!(matches!(c.recv_frame(), Err(Error::Closed)));
        // A port nobody listens on.
        let free = TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("addr");
        let e = Client::connect(free, t, t).expect_err("refused");
        assert_eq!(e.kind(), io::ErrorKind::ConnectionRefused);
    }
}
