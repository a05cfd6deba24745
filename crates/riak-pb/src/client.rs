//! What the blocking and the async client share: the [`Error`] of a call,
//! and the reading of a reply — the end of the stream is
//! [`Error::Closed`], an `RpbErrorResp` (code 0) is [`Error::Riak`] with its
//! message and code, a reply of another code than the request expects is
//! [`Error::UnexpectedCode`], a body that does not decode is
//! [`Error::Decode`].

use crate::{code, FrameError, RpbErrorResp};
use prost::Message;
use std::io;

/// A client call's error. After anything but [`Error::Riak`] the connection
/// is in an unknown state: drop it ([`Error::is_fatal`]).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The socket failed (timeouts included), or a reply frame was empty or
    /// over the client's reply limit.
    #[error(transparent)]
    Frame(#[from] FrameError),
    /// The node closed the connection before replying.
    #[error("connection closed by the node")]
    Closed,
    /// The node answered `RpbErrorResp`.
    #[error("riak error: {errmsg}")]
    Riak {
        /// `errmsg`, as text (lossy UTF-8).
        errmsg: String,
        /// `errcode` (Riak always sends 0).
        errcode: u32,
    },
    /// The reply's code is not the one the request expects.
    #[error("expected reply code {want}, got {got}")]
    UnexpectedCode {
        /// The expected code.
        want: u8,
        /// The code received.
        got: u8,
    },
    /// A reply body that does not decode as the expected message.
    #[error("bad {what}: {source}")]
    Decode {
        /// The message's name.
        what: &'static str,
        /// Why.
        source: prost::DecodeError,
    },
}

impl From<io::Error> for Error {
    fn from(e: io::Error) -> Error {
        Error::Frame(FrameError::Io(e))
    }
}

impl Error {
    /// True when the connection can no longer be used.
    pub fn is_fatal(&self) -> bool {
        !matches!(self, Error::Riak { .. })
    }

    /// The `errmsg` of an [`Error::Riak`].
    pub fn riak_message(&self) -> Option<&str> {
        match self {
            Error::Riak { errmsg, .. } => Some(errmsg),
            _ => None,
        }
    }

    /// The socket error behind an [`Error::Frame`], if any.
    pub fn io_error(&self) -> Option<&io::Error> {
        match self {
            Error::Frame(FrameError::Io(e)) => Some(e),
            _ => None,
        }
    }
}

/// Decodes a reply body as `M` ([`Error::Decode`] names `M` on failure).
pub fn decode<M: Message + Default>(body: &[u8]) -> Result<M, Error> {
    M::decode(body).map_err(|source| Error::Decode {
        what: short_type_name::<M>(),
        source,
    })
}

fn short_type_name<M>() -> &'static str {
    let full = std::any::type_name::<M>();
    full.rsplit("::").next().unwrap_or(full)
}

/// A frame read as a reply: `None` (end of stream) → [`Error::Closed`],
/// an `RpbErrorResp` → [`Error::Riak`].
pub(crate) fn reply(frame: Option<(u8, Vec<u8>)>) -> Result<(u8, Vec<u8>), Error> {
    match frame {
        None => Err(Error::Closed),
        Some((code::ERROR_RESP, body)) => {
            let e: RpbErrorResp = decode(&body)?;
            Err(Error::Riak {
                errmsg: String::from_utf8_lossy(&e.errmsg).into_owned(),
                errcode: e.errcode,
            })
        }
        Some(f) => Ok(f),
    }
}

/// The body of a reply of code `want`, decoded as `M`.
pub(crate) fn expect<M: Message + Default>(reply: (u8, Vec<u8>), want: u8) -> Result<M, Error> {
    match reply {
        (got, body) if got == want => decode(&body),
        (got, _) => Err(Error::UnexpectedCode { want, got }),
    }
}

/// A fake node's first replies, for the clients' tests: an `RpbPingResp`,
/// the returned `RpbGetResp`, then an `RpbErrorResp{errmsg, errcode}`.
#[cfg(test)]
pub(crate) fn canned_replies(errmsg: &str, errcode: u32) -> (crate::RpbGetResp, Vec<Vec<u8>>) {
    use crate::{frame, frame_msg};
    let resp = crate::RpbGetResp {
        vclock: Some(b"vc".to_vec()),
        ..Default::default()
    };
    let err = RpbErrorResp {
        errmsg: errmsg.as_bytes().to_vec(),
        errcode,
    };
    let replies = vec![
        frame(code::PING_RESP, &[]),
        frame_msg(code::GET_RESP, &resp),
        frame_msg(code::ERROR_RESP, &err),
    ];
    (resp, replies)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{frame_msg, RpbGetResp};

    #[test]
    fn replies() {
        assert!(matches!(reply(None), Err(Error::Closed)));
        assert_eq!(reply(Some((2, vec![]))).ok(), Some((2, vec![])));
        let e = RpbErrorResp {
            errmsg: b"overload".to_vec(),
            errcode: 7,
        };
        let err = reply(Some((0, e.encode_to_vec()))).expect_err("riak error");
        assert_eq!(err.riak_message(), Some("overload"));
        assert!(matches!(err, Error::Riak { errcode: 7, .. }));
        assert!(!err.is_fatal());
        assert_eq!(err.to_string(), "riak error: overload");
        // A garbled RpbErrorResp is a decode error.
        assert!(matches!(
            reply(Some((0, vec![0xFF]))),
            Err(Error::Decode {
                what: "RpbErrorResp",
                ..
            })
        ));
        let want = RpbGetResp {
            vclock: Some(b"c".to_vec()),
            ..Default::default()
        };
        let f = frame_msg(code::GET_RESP, &want);
        let got: RpbGetResp =
            expect((code::GET_RESP, f[5..].to_vec()), code::GET_RESP).expect("decode");
        assert_eq!(got, want);
        let wrong = expect::<RpbGetResp>((code::PUT_RESP, vec![]), code::GET_RESP);
        assert!(matches!(
            wrong,
            Err(Error::UnexpectedCode { want: 10, got: 12 })
        ));
        assert!(wrong.is_err_and(|e| e.is_fatal()));
        let io: Error = io::Error::from(io::ErrorKind::TimedOut).into();
        assert_eq!(
            io.io_error().map(io::Error::kind),
            Some(io::ErrorKind::TimedOut)
        );
    }
}
