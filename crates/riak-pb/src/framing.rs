//! Riak's PB framing, shared by the blocking and async sides: a frame is
//! `<<Len:32/big, Code:8, Body>>` where `Len` counts the code byte and the
//! body (so an empty body has `Len` = 1). Encoding ([`frame`],
//! [`frame_msg`]) and the checks every reader makes on the 4-byte header:
//! `Len` = 0 is [`FrameError::Empty`] (no code byte), `Len` over the
//! reader's limit is [`FrameError::TooLarge`] (refused before any body
//! byte is read or allocated).

use prost::Message;
use std::io;

/// The default largest frame accepted (64 MiB), counting the code byte.
pub const DEFAULT_MAX_FRAME: usize = 64 * 1024 * 1024;

/// Framing errors.
#[derive(Debug, thiserror::Error)]
pub enum FrameError {
    /// The socket failed or closed mid-frame.
    #[error("i/o: {0}")]
    Io(#[from] io::Error),
    /// A length of 0 (no code byte).
    #[error("empty frame (length 0)")]
    Empty,
    /// The announced length is over the limit.
    #[error("frame of {len} bytes exceeds the limit of {max} bytes")]
    TooLarge {
        /// Announced length.
        len: usize,
        /// The limit.
        max: usize,
    },
}

impl FrameError {
    /// Whether the "frame" was the start of an HTTP reply (`HTTP/1.1 400
    /// ...`): its first 4 bytes, `HTTP`, read as a length — what a frame
    /// client sees when it dialled an HTTP port by mistake.
    pub fn is_http_reply(&self) -> bool {
        matches!(self, FrameError::TooLarge { len, .. } if *len == u32::from_be_bytes(*b"HTTP") as usize)
    }
}

/// The 4-byte header of a frame whose code and body take `len` bytes.
/// A body too long for 32 bits (over 4 GiB) saturates to `u32::MAX`, which
/// every reader refuses as too large, rather than wrapping to a length that
/// would desynchronise the stream.
fn header(body_len: usize) -> [u8; 4] {
    u32::try_from(body_len.saturating_add(1))
        .unwrap_or(u32::MAX)
        .to_be_bytes()
}

/// Encodes one frame (`code` + `body`).
pub fn frame(code: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + body.len());
    out.extend_from_slice(&header(body.len()));
    out.push(code);
    out.extend_from_slice(body);
    out
}

/// Encodes a message as a frame (encoded in place, no intermediate copy).
pub fn frame_msg<M: Message>(code: u8, msg: &M) -> Vec<u8> {
    let len = msg.encoded_len();
    let mut out = Vec::with_capacity(5 + len);
    out.extend_from_slice(&header(len));
    out.push(code);
    // As `encode_to_vec` does: a `Vec` grows, so it never runs out of room.
    msg.encode_raw(&mut out);
    out
}

/// Checks a frame header just read: `Ok(None)` when the read hit the end of
/// the stream before a whole header (a clean close between frames), else
/// the number of bytes (code + body) to read next, at most `max`.
pub(crate) fn check_header(
    read: io::Result<()>,
    header: [u8; 4],
    max: usize,
) -> Result<Option<usize>, FrameError> {
    match read {
        Ok(()) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_be_bytes(header) as usize;
    if len == 0 {
        return Err(FrameError::Empty);
    }
    if len > max {
        return Err(FrameError::TooLarge { len, max });
    }
    Ok(Some(len))
}

/// Splits the `len` bytes after a header into (code, body).
pub(crate) fn split(mut buf: Vec<u8>) -> Result<(u8, Vec<u8>), FrameError> {
    let code = *buf.first().ok_or(FrameError::Empty)?;
    buf.remove(0);
    Ok((code, buf))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{code, RpbErrorResp};

    #[test]
    fn frame_layout() {
        assert_eq!(frame(code::PING_REQ, &[]), vec![0, 0, 0, 1, 1]);
        assert_eq!(frame(9, b"ab"), vec![0, 0, 0, 3, 9, b'a', b'b']);
        let e = RpbErrorResp {
            errmsg: b"x".to_vec(),
            errcode: 1,
        };
        assert_eq!(frame_msg(0, &e), frame(0, &e.encode_to_vec()));
        assert_eq!(header(usize::MAX), [0xFF; 4]);
    }

    #[test]
    fn header_checks() {
        let ok = || Ok(());
        assert_eq!(check_header(ok(), [0, 0, 0, 5], 5).ok(), Some(Some(5)));
        assert!(matches!(
            check_header(ok(), [0, 0, 0, 0], 5),
            Err(FrameError::Empty)
        ));
        assert!(matches!(
            check_header(ok(), [0, 0, 0, 6], 5),
            Err(FrameError::TooLarge { len: 6, max: 5 })
        ));
        let eof = Err(io::ErrorKind::UnexpectedEof.into());
        assert_eq!(check_header(eof, [0; 4], 5).ok(), Some(None));
        let reset = Err(io::ErrorKind::ConnectionReset.into());
        assert!(matches!(
            check_header(reset, [0; 4], 5),
            Err(FrameError::Io(_))
        ));
        assert_eq!(split(vec![7, 1, 2]).ok(), Some((7, vec![1, 2])));
        assert!(matches!(split(Vec::new()), Err(FrameError::Empty)));
    }
}
