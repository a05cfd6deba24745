//! The async side (feature `tokio`): [`read_frame`] / [`write_frame`] over
//! any tokio `AsyncRead` / `AsyncWrite` (the server reads every client and
//! cluster frame with them), and [`Client`], the blocking
//! [`crate::sync::Client`]'s calls over a tokio `TcpStream`; each read or
//! write of a frame times out after the client's I/O timeout (an
//! `io::ErrorKind::TimedOut` error).

use crate::client::{expect, reply};
use crate::framing::{check_header, split};
use crate::{code, frame, frame_msg, Error, FrameError, DEFAULT_MAX_FRAME};
use ::tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use ::tokio::net::{TcpStream, ToSocketAddrs};
use prost::Message;
use std::future::Future;
use std::io;
use std::time::Duration;

/// Reads one frame of at most `max` bytes (code included): `Ok(None)` on a
/// clean end of stream before a frame.
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    max: usize,
) -> Result<Option<(u8, Vec<u8>)>, FrameError> {
    let mut len = [0u8; 4];
    let read = r.read_exact(&mut len).await.map(drop);
    let Some(len) = check_header(read, len, max)? else {
        return Ok(None);
    };
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf).await?;
    split(buf).map(Some)
}

/// Writes one frame.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    code: u8,
    body: &[u8],
) -> io::Result<()> {
    w.write_all(&frame(code, body)).await
}

/// `f`, or a `TimedOut` I/O error after `t`.
async fn timed<T, E: From<io::Error>>(
    t: Duration,
    f: impl Future<Output = Result<T, E>>,
) -> Result<T, E> {
    ::tokio::time::timeout(t, f)
        .await
        .unwrap_or_else(|_| Err(io::Error::from(io::ErrorKind::TimedOut).into()))
}

/// One async PB connection; requests are strictly serial.
#[derive(Debug)]
pub struct Client {
    stream: TcpStream,
    max_reply: usize,
    timeout: Duration,
}

impl Client {
    /// Connects to `addr` within `connect_timeout`; each frame read or
    /// written then times out after `io_timeout`. Nagle is off.
    pub async fn connect<A: ToSocketAddrs>(
        addr: A,
        connect_timeout: Duration,
        io_timeout: Duration,
    ) -> io::Result<Client> {
        let stream = timed(connect_timeout, TcpStream::connect(addr)).await?;
        stream.set_nodelay(true)?;
        Ok(Client {
            stream,
            max_reply: DEFAULT_MAX_FRAME,
            timeout: io_timeout,
        })
    }

    /// Changes the I/O timeout.
    pub fn set_timeout(&mut self, t: Duration) {
        self.timeout = t;
    }

    /// Changes the largest reply accepted (code byte included).
    pub fn set_max_reply(&mut self, max: usize) {
        self.max_reply = max;
    }

    /// Sends a message as one frame.
    pub async fn send_msg<M: Message>(&mut self, code: u8, msg: &M) -> Result<(), Error> {
        let f = frame_msg(code, msg);
        Ok(timed(self.timeout, self.stream.write_all(&f)).await?)
    }

    /// Reads one frame as it is, `RpbErrorResp` included;
    /// [`Error::Closed`] at the end of the stream.
    pub async fn recv_frame(&mut self) -> Result<(u8, Vec<u8>), Error> {
        let f = timed(self.timeout, read_frame(&mut self.stream, self.max_reply)).await?;
        f.ok_or(Error::Closed)
    }

    /// Reads one reply; an `RpbErrorResp` is [`Error::Riak`].
    pub async fn recv(&mut self) -> Result<(u8, Vec<u8>), Error> {
        reply(Some(self.recv_frame().await?))
    }

    /// Sends `msg` with `code` and reads the reply (code, body).
    pub async fn call<M: Message>(&mut self, code: u8, msg: &M) -> Result<(u8, Vec<u8>), Error> {
        self.send_msg(code, msg).await?;
        self.recv().await
    }

    /// Sends `req` with `code` and decodes the reply, which must have code
    /// `want`.
    pub async fn request<Req: Message, Resp: Message + Default>(
        &mut self,
        code: u8,
        req: &Req,
        want: u8,
    ) -> Result<Resp, Error> {
        expect(self.call(code, req).await?, want)
    }

    /// `RpbPingReq` → `RpbPingResp`.
    pub async fn ping(&mut self) -> Result<(), Error> {
        expect::<()>(self.call(code::PING_REQ, &()).await?, code::PING_RESP)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{RpbGetReq, RpbGetResp};
    use ::tokio::net::TcpListener;

    #[::tokio::test]
    async fn frames_round_trip_and_bad_frames() {
        let (mut a, mut b) = ::tokio::io::duplex(64);
        write_frame(&mut a, code::GET_REQ, b"xyz").await.expect("w");
        write_frame(&mut a, code::PING_REQ, &[]).await.expect("w");
        a.write_all(&[0, 0, 0, 0, 0, 0, 1, 0]).await.expect("w");
        a.write_all(&[0, 0, 0, 9, 1]).await.expect("w");
        drop(a);
        let f = read_frame(&mut b, 256).await.expect("frame");
        assert_eq!(f, Some((code::GET_REQ, b"xyz".to_vec())));
        let f = read_frame(&mut b, 256).await.expect("frame");
        assert_eq!(f, Some((code::PING_REQ, vec![])));
        assert!(matches!(
            read_frame(&mut b, 256).await,
            Err(FrameError::Empty)
        ));
        assert!(matches!(
            read_frame(&mut b, 255).await,
            Err(FrameError::TooLarge { len: 256, max: 255 })
        ));
        // Truncated: the header announces 9 bytes, 1 follows.
        assert!(matches!(
            read_frame(&mut b, 256).await,
            Err(FrameError::Io(_))
        ));
        assert_eq!(read_frame(&mut b, 256).await.expect("eof"), None);
    }

    #[::tokio::test]
    async fn client_calls_errors_and_timeout() {
        let l = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = l.local_addr().expect("addr");
        let (resp, replies) = crate::client::canned_replies("overload", 0);
        let node = ::tokio::spawn(async move {
            let (mut s, _) = l.accept().await.expect("accept");
            for r in replies {
                read_frame(&mut s, 1024).await.expect("request");
                s.write_all(&r).await.expect("reply");
            }
            // Reads the last request and never answers.
            read_frame(&mut s, 1024).await.expect("request");
            ::tokio::time::sleep(Duration::from_secs(10)).await;
        });
        let t = Duration::from_secs(10);
        let mut c = Client::connect(addr, t, t).await.expect("connect");
        c.ping().await.expect("ping");
        let req = RpbGetReq::default();
        let got: RpbGetResp = c
            .request(code::GET_REQ, &req, code::GET_RESP)
            .await
            .expect("get");
        assert_eq!(got, resp);
        let e = c.call(code::GET_REQ, &req).await.expect_err("riak error");
        assert_eq!(e.riak_message(), Some("overload"));
        c.set_timeout(Duration::from_millis(100));
        let e = c.call(code::GET_REQ, &req).await.expect_err("timeout");
        assert_eq!(
            e.io_error().map(io::Error::kind),
            Some(io::ErrorKind::TimedOut)
        );
        node.abort();
    }
}
