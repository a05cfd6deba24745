//! Riak's Protocol Buffers wire format: framing and the messages of
//! `riak.proto` / `riak_kv.proto` (basho/riak_pb), written by hand as
//! `prost` structs with the exact field numbers (no protoc, no build script).
//!
//! A frame is `<<Len:32/big>> <<Code:8>> <<Body>>` where `Len` counts the
//! code byte and the body. proto2 `required` fields are declared `required`
//! so prost always puts them on the wire, even when empty or zero (the Go and
//! Java clients reject messages without them).

use prost::Message;
use std::io;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

/// The default largest frame accepted (64 MiB), counting the code byte.
pub const DEFAULT_MAX_FRAME: usize = 64 * 1024 * 1024;

/// Message codes (`riak_pb_messages.csv`).
#[allow(missing_docs)]
pub mod code {
    pub const ERROR_RESP: u8 = 0;
    pub const PING_REQ: u8 = 1;
    pub const PING_RESP: u8 = 2;
    pub const GET_CLIENT_ID_REQ: u8 = 3;
    pub const GET_CLIENT_ID_RESP: u8 = 4;
    pub const SET_CLIENT_ID_REQ: u8 = 5;
    pub const SET_CLIENT_ID_RESP: u8 = 6;
    pub const GET_SERVER_INFO_REQ: u8 = 7;
    pub const GET_SERVER_INFO_RESP: u8 = 8;
    pub const GET_REQ: u8 = 9;
    pub const GET_RESP: u8 = 10;
    pub const PUT_REQ: u8 = 11;
    pub const PUT_RESP: u8 = 12;
    pub const DEL_REQ: u8 = 13;
    pub const DEL_RESP: u8 = 14;
    pub const LIST_BUCKETS_REQ: u8 = 15;
    pub const LIST_BUCKETS_RESP: u8 = 16;
    pub const LIST_KEYS_REQ: u8 = 17;
    pub const LIST_KEYS_RESP: u8 = 18;
    pub const GET_BUCKET_REQ: u8 = 19;
    pub const GET_BUCKET_RESP: u8 = 20;
    pub const SET_BUCKET_REQ: u8 = 21;
    pub const SET_BUCKET_RESP: u8 = 22;
    pub const INDEX_REQ: u8 = 25;
    pub const INDEX_RESP: u8 = 26;
    pub const RESET_BUCKET_REQ: u8 = 29;
    pub const RESET_BUCKET_RESP: u8 = 30;
    pub const CS_BUCKET_REQ: u8 = 40;
    pub const CS_BUCKET_RESP: u8 = 41;
}

/// Quorum values with a special meaning in PB `uint32` quorum fields.
#[allow(missing_docs)]
pub mod quorum {
    pub const ONE: u32 = u32::MAX - 1;
    pub const QUORUM: u32 = u32::MAX - 2;
    pub const ALL: u32 = u32::MAX - 3;
    pub const DEFAULT: u32 = u32::MAX - 4;
}

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

/// Reads one frame: `Ok(None)` on a clean end of stream before a frame.
pub async fn read_frame<R: AsyncRead + Unpin>(
    r: &mut R,
    max: usize,
) -> Result<Option<(u8, Vec<u8>)>, FrameError> {
    let mut len = [0u8; 4];
    match r.read_exact(&mut len).await {
        Ok(_) => {}
        Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(None),
        Err(e) => return Err(e.into()),
    }
    let len = u32::from_be_bytes(len) as usize;
    if len == 0 {
        return Err(FrameError::Empty);
    }
    if len > max {
        return Err(FrameError::TooLarge { len, max });
    }
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf).await?;
    let code = buf[0];
    buf.remove(0);
    Ok(Some((code, buf)))
}

/// Encodes one frame (`code` + `body`).
pub fn frame(code: u8, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(5 + body.len());
    out.extend_from_slice(&((body.len() + 1) as u32).to_be_bytes());
    out.push(code);
    out.extend_from_slice(body);
    out
}

/// Encodes a message as a frame.
pub fn frame_msg<M: Message>(code: u8, msg: &M) -> Vec<u8> {
    frame(code, &msg.encode_to_vec())
}

/// Writes one frame.
pub async fn write_frame<W: AsyncWrite + Unpin>(
    w: &mut W,
    code: u8,
    body: &[u8],
) -> io::Result<()> {
    w.write_all(&frame(code, body)).await
}

/// `RpbErrorResp` (0).
#[derive(Clone, PartialEq, Message)]
pub struct RpbErrorResp {
    /// The error text.
    #[prost(bytes = "vec", required, tag = "1")]
    pub errmsg: Vec<u8>,
    /// Always 0, as riak_api.
    #[prost(uint32, required, tag = "2")]
    pub errcode: u32,
}

/// `RpbGetClientIdResp` (4).
#[derive(Clone, PartialEq, Message)]
pub struct RpbGetClientIdResp {
    /// The connection's client id.
    #[prost(bytes = "vec", required, tag = "1")]
    pub client_id: Vec<u8>,
}

/// `RpbSetClientIdReq` (5).
#[derive(Clone, PartialEq, Message)]
pub struct RpbSetClientIdReq {
    /// The new client id.
    #[prost(bytes = "vec", required, tag = "1")]
    pub client_id: Vec<u8>,
}

/// `RpbGetServerInfoResp` (8).
#[derive(Clone, PartialEq, Message)]
pub struct RpbGetServerInfoResp {
    /// Node name.
    #[prost(bytes = "vec", optional, tag = "1")]
    pub node: Option<Vec<u8>>,
    /// `X.Y.Z` version.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub server_version: Option<Vec<u8>>,
}

/// `RpbPair`.
#[derive(Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Message)]
pub struct RpbPair {
    /// Key.
    #[prost(bytes = "vec", required, tag = "1")]
    pub key: Vec<u8>,
    /// Value.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub value: Option<Vec<u8>>,
}

/// `RpbLink`.
#[derive(Clone, PartialEq, Eq, Message)]
pub struct RpbLink {
    /// Bucket.
    #[prost(bytes = "vec", optional, tag = "1")]
    pub bucket: Option<Vec<u8>>,
    /// Key.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub key: Option<Vec<u8>>,
    /// Tag.
    #[prost(bytes = "vec", optional, tag = "3")]
    pub tag: Option<Vec<u8>>,
}

/// `RpbContent`: one sibling.
#[derive(Clone, PartialEq, Message)]
pub struct RpbContent {
    /// The value (`<<>>` for head results).
    #[prost(bytes = "vec", required, tag = "1")]
    pub value: Vec<u8>,
    /// Content type.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub content_type: Option<Vec<u8>>,
    /// Charset.
    #[prost(bytes = "vec", optional, tag = "3")]
    pub charset: Option<Vec<u8>>,
    /// Content encoding.
    #[prost(bytes = "vec", optional, tag = "4")]
    pub content_encoding: Option<Vec<u8>>,
    /// Version tag.
    #[prost(bytes = "vec", optional, tag = "5")]
    pub vtag: Option<Vec<u8>>,
    /// Links.
    #[prost(message, repeated, tag = "6")]
    pub links: Vec<RpbLink>,
    /// Last modified, seconds.
    #[prost(uint32, optional, tag = "7")]
    pub last_mod: Option<u32>,
    /// Last modified, microseconds part.
    #[prost(uint32, optional, tag = "8")]
    pub last_mod_usecs: Option<u32>,
    /// User metadata.
    #[prost(message, repeated, tag = "9")]
    pub usermeta: Vec<RpbPair>,
    /// Secondary index entries (field name, term).
    #[prost(message, repeated, tag = "10")]
    pub indexes: Vec<RpbPair>,
    /// Tombstone.
    #[prost(bool, optional, tag = "11")]
    pub deleted: Option<bool>,
}

/// `RpbGetReq` (9).
#[derive(Clone, PartialEq, Message)]
#[allow(missing_docs)]
pub struct RpbGetReq {
    #[prost(bytes = "vec", required, tag = "1")]
    pub bucket: Vec<u8>,
    #[prost(bytes = "vec", required, tag = "2")]
    pub key: Vec<u8>,
    #[prost(uint32, optional, tag = "3")]
    pub r: Option<u32>,
    #[prost(uint32, optional, tag = "4")]
    pub pr: Option<u32>,
    #[prost(bool, optional, tag = "5")]
    pub basic_quorum: Option<bool>,
    #[prost(bool, optional, tag = "6")]
    pub notfound_ok: Option<bool>,
    #[prost(bytes = "vec", optional, tag = "7")]
    pub if_modified: Option<Vec<u8>>,
    #[prost(bool, optional, tag = "8")]
    pub head: Option<bool>,
    #[prost(bool, optional, tag = "9")]
    pub deletedvclock: Option<bool>,
    #[prost(uint32, optional, tag = "10")]
    pub timeout: Option<u32>,
    #[prost(bool, optional, tag = "11")]
    pub sloppy_quorum: Option<bool>,
    #[prost(uint32, optional, tag = "12")]
    pub n_val: Option<u32>,
    #[prost(bytes = "vec", optional, tag = "13")]
    pub r#type: Option<Vec<u8>>,
    #[prost(uint32, optional, tag = "14")]
    pub node_confirms: Option<u32>,
}

/// `RpbGetResp` (10).
#[derive(Clone, PartialEq, Message)]
pub struct RpbGetResp {
    /// Siblings (none = not found).
    #[prost(message, repeated, tag = "1")]
    pub content: Vec<RpbContent>,
    /// Opaque vclock.
    #[prost(bytes = "vec", optional, tag = "2")]
    pub vclock: Option<Vec<u8>>,
    /// `if_modified` matched.
    #[prost(bool, optional, tag = "3")]
    pub unchanged: Option<bool>,
}

/// `RpbPutReq` (11).
#[derive(Clone, PartialEq, Message)]
#[allow(missing_docs)]
pub struct RpbPutReq {
    #[prost(bytes = "vec", required, tag = "1")]
    pub bucket: Vec<u8>,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub key: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "3")]
    pub vclock: Option<Vec<u8>>,
    #[prost(message, required, tag = "4")]
    pub content: RpbContent,
    #[prost(uint32, optional, tag = "5")]
    pub w: Option<u32>,
    #[prost(uint32, optional, tag = "6")]
    pub dw: Option<u32>,
    #[prost(bool, optional, tag = "7")]
    pub return_body: Option<bool>,
    #[prost(uint32, optional, tag = "8")]
    pub pw: Option<u32>,
    #[prost(bool, optional, tag = "9")]
    pub if_not_modified: Option<bool>,
    #[prost(bool, optional, tag = "10")]
    pub if_none_match: Option<bool>,
    #[prost(bool, optional, tag = "11")]
    pub return_head: Option<bool>,
    #[prost(uint32, optional, tag = "12")]
    pub timeout: Option<u32>,
    #[prost(bool, optional, tag = "13")]
    pub asis: Option<bool>,
    #[prost(bool, optional, tag = "14")]
    pub sloppy_quorum: Option<bool>,
    #[prost(uint32, optional, tag = "15")]
    pub n_val: Option<u32>,
    #[prost(bytes = "vec", optional, tag = "16")]
    pub r#type: Option<Vec<u8>>,
    #[prost(uint32, optional, tag = "17")]
    pub node_confirms: Option<u32>,
}

/// `RpbPutResp` (12).
#[derive(Clone, PartialEq, Message)]
pub struct RpbPutResp {
    /// Siblings (return_body / return_head).
    #[prost(message, repeated, tag = "1")]
    pub content: Vec<RpbContent>,
    /// Vclock (return_body / return_head).
    #[prost(bytes = "vec", optional, tag = "2")]
    pub vclock: Option<Vec<u8>>,
    /// The key the server generated.
    #[prost(bytes = "vec", optional, tag = "3")]
    pub key: Option<Vec<u8>>,
}

/// `RpbDelReq` (13).
#[derive(Clone, PartialEq, Message)]
#[allow(missing_docs)]
pub struct RpbDelReq {
    #[prost(bytes = "vec", required, tag = "1")]
    pub bucket: Vec<u8>,
    #[prost(bytes = "vec", required, tag = "2")]
    pub key: Vec<u8>,
    #[prost(uint32, optional, tag = "3")]
    pub rw: Option<u32>,
    #[prost(bytes = "vec", optional, tag = "4")]
    pub vclock: Option<Vec<u8>>,
    #[prost(uint32, optional, tag = "5")]
    pub r: Option<u32>,
    #[prost(uint32, optional, tag = "6")]
    pub w: Option<u32>,
    #[prost(uint32, optional, tag = "7")]
    pub pr: Option<u32>,
    #[prost(uint32, optional, tag = "8")]
    pub pw: Option<u32>,
    #[prost(uint32, optional, tag = "9")]
    pub dw: Option<u32>,
    #[prost(uint32, optional, tag = "10")]
    pub timeout: Option<u32>,
    #[prost(bool, optional, tag = "11")]
    pub sloppy_quorum: Option<bool>,
    #[prost(uint32, optional, tag = "12")]
    pub n_val: Option<u32>,
    #[prost(bytes = "vec", optional, tag = "13")]
    pub r#type: Option<Vec<u8>>,
}

/// `RpbListBucketsReq` (15).
#[derive(Clone, PartialEq, Message)]
#[allow(missing_docs)]
pub struct RpbListBucketsReq {
    #[prost(uint32, optional, tag = "1")]
    pub timeout: Option<u32>,
    #[prost(bool, optional, tag = "2")]
    pub stream: Option<bool>,
    #[prost(bytes = "vec", optional, tag = "3")]
    pub r#type: Option<Vec<u8>>,
}

/// `RpbListBucketsResp` (16).
#[derive(Clone, PartialEq, Message)]
#[allow(missing_docs)]
pub struct RpbListBucketsResp {
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub buckets: Vec<Vec<u8>>,
    #[prost(bool, optional, tag = "2")]
    pub done: Option<bool>,
}

/// `RpbListKeysReq` (17).
#[derive(Clone, PartialEq, Message)]
#[allow(missing_docs)]
pub struct RpbListKeysReq {
    #[prost(bytes = "vec", required, tag = "1")]
    pub bucket: Vec<u8>,
    #[prost(uint32, optional, tag = "2")]
    pub timeout: Option<u32>,
    #[prost(bytes = "vec", optional, tag = "3")]
    pub r#type: Option<Vec<u8>>,
}

/// `RpbListKeysResp` (18), streamed.
#[derive(Clone, PartialEq, Message)]
#[allow(missing_docs)]
pub struct RpbListKeysResp {
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub keys: Vec<Vec<u8>>,
    #[prost(bool, optional, tag = "2")]
    pub done: Option<bool>,
}

/// `RpbGetBucketReq` (19).
#[derive(Clone, PartialEq, Message)]
#[allow(missing_docs)]
pub struct RpbGetBucketReq {
    #[prost(bytes = "vec", required, tag = "1")]
    pub bucket: Vec<u8>,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub r#type: Option<Vec<u8>>,
}

/// `RpbModFun`.
#[derive(Clone, PartialEq, Message)]
#[allow(missing_docs)]
pub struct RpbModFun {
    #[prost(bytes = "vec", required, tag = "1")]
    pub module: Vec<u8>,
    #[prost(bytes = "vec", required, tag = "2")]
    pub function: Vec<u8>,
}

/// `RpbCommitHook`.
#[derive(Clone, PartialEq, Message)]
#[allow(missing_docs)]
pub struct RpbCommitHook {
    #[prost(message, optional, tag = "1")]
    pub modfun: Option<RpbModFun>,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub name: Option<Vec<u8>>,
}

/// `RpbBucketProps`.
#[derive(Clone, PartialEq, Message)]
#[allow(missing_docs)]
pub struct RpbBucketProps {
    #[prost(uint32, optional, tag = "1")]
    pub n_val: Option<u32>,
    #[prost(bool, optional, tag = "2")]
    pub allow_mult: Option<bool>,
    #[prost(bool, optional, tag = "3")]
    pub last_write_wins: Option<bool>,
    #[prost(message, repeated, tag = "4")]
    pub precommit: Vec<RpbCommitHook>,
    #[prost(bool, optional, tag = "5")]
    pub has_precommit: Option<bool>,
    #[prost(message, repeated, tag = "6")]
    pub postcommit: Vec<RpbCommitHook>,
    #[prost(bool, optional, tag = "7")]
    pub has_postcommit: Option<bool>,
    #[prost(message, optional, tag = "8")]
    pub chash_keyfun: Option<RpbModFun>,
    #[prost(message, optional, tag = "9")]
    pub linkfun: Option<RpbModFun>,
    #[prost(uint32, optional, tag = "10")]
    pub old_vclock: Option<u32>,
    #[prost(uint32, optional, tag = "11")]
    pub young_vclock: Option<u32>,
    #[prost(uint32, optional, tag = "12")]
    pub big_vclock: Option<u32>,
    #[prost(uint32, optional, tag = "13")]
    pub small_vclock: Option<u32>,
    #[prost(uint32, optional, tag = "14")]
    pub pr: Option<u32>,
    #[prost(uint32, optional, tag = "15")]
    pub r: Option<u32>,
    #[prost(uint32, optional, tag = "16")]
    pub w: Option<u32>,
    #[prost(uint32, optional, tag = "17")]
    pub pw: Option<u32>,
    #[prost(uint32, optional, tag = "18")]
    pub dw: Option<u32>,
    #[prost(uint32, optional, tag = "19")]
    pub rw: Option<u32>,
    #[prost(bool, optional, tag = "20")]
    pub basic_quorum: Option<bool>,
    #[prost(bool, optional, tag = "21")]
    pub notfound_ok: Option<bool>,
    #[prost(bytes = "vec", optional, tag = "22")]
    pub backend: Option<Vec<u8>>,
    #[prost(bool, optional, tag = "23")]
    pub search: Option<bool>,
    #[prost(int32, optional, tag = "24")]
    pub repl: Option<i32>,
    #[prost(bytes = "vec", optional, tag = "25")]
    pub search_index: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "26")]
    pub datatype: Option<Vec<u8>>,
    #[prost(bool, optional, tag = "27")]
    pub consistent: Option<bool>,
    #[prost(bool, optional, tag = "28")]
    pub write_once: Option<bool>,
    #[prost(uint32, optional, tag = "29")]
    pub hll_precision: Option<u32>,
}

/// `RpbGetBucketResp` (20).
#[derive(Clone, PartialEq, Message)]
#[allow(missing_docs)]
pub struct RpbGetBucketResp {
    #[prost(message, required, tag = "1")]
    pub props: RpbBucketProps,
}

/// `RpbSetBucketReq` (21).
#[derive(Clone, PartialEq, Message)]
#[allow(missing_docs)]
pub struct RpbSetBucketReq {
    #[prost(bytes = "vec", required, tag = "1")]
    pub bucket: Vec<u8>,
    #[prost(message, required, tag = "2")]
    pub props: RpbBucketProps,
    #[prost(bytes = "vec", optional, tag = "3")]
    pub r#type: Option<Vec<u8>>,
}

/// `RpbResetBucketReq` (29).
#[derive(Clone, PartialEq, Message)]
#[allow(missing_docs)]
pub struct RpbResetBucketReq {
    #[prost(bytes = "vec", required, tag = "1")]
    pub bucket: Vec<u8>,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub r#type: Option<Vec<u8>>,
}

/// `RpbIndexReq.IndexQueryType`: `eq`.
pub const INDEX_EQ: i32 = 0;
/// `RpbIndexReq.IndexQueryType`: `range`.
pub const INDEX_RANGE: i32 = 1;

/// `RpbIndexReq` (25).
#[derive(Clone, PartialEq, Message)]
#[allow(missing_docs)]
pub struct RpbIndexReq {
    #[prost(bytes = "vec", required, tag = "1")]
    pub bucket: Vec<u8>,
    #[prost(bytes = "vec", required, tag = "2")]
    pub index: Vec<u8>,
    /// [`INDEX_EQ`] or [`INDEX_RANGE`] (an enum on the wire: a varint).
    #[prost(int32, required, tag = "3")]
    pub qtype: i32,
    #[prost(bytes = "vec", optional, tag = "4")]
    pub key: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "5")]
    pub range_min: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "6")]
    pub range_max: Option<Vec<u8>>,
    #[prost(bool, optional, tag = "7")]
    pub return_terms: Option<bool>,
    #[prost(bool, optional, tag = "8")]
    pub stream: Option<bool>,
    #[prost(uint32, optional, tag = "9")]
    pub max_results: Option<u32>,
    #[prost(bytes = "vec", optional, tag = "10")]
    pub continuation: Option<Vec<u8>>,
    #[prost(uint32, optional, tag = "11")]
    pub timeout: Option<u32>,
    #[prost(bytes = "vec", optional, tag = "12")]
    pub r#type: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "13")]
    pub term_regex: Option<Vec<u8>>,
    #[prost(bool, optional, tag = "14")]
    pub pagination_sort: Option<bool>,
    #[prost(bytes = "vec", optional, tag = "15")]
    pub cover_context: Option<Vec<u8>>,
    #[prost(bool, optional, tag = "16")]
    pub return_body: Option<bool>,
}

/// `RpbIndexResp` (26).
#[derive(Clone, PartialEq, Message)]
#[allow(missing_docs)]
pub struct RpbIndexResp {
    #[prost(bytes = "vec", repeated, tag = "1")]
    pub keys: Vec<Vec<u8>>,
    #[prost(message, repeated, tag = "2")]
    pub results: Vec<RpbPair>,
    #[prost(bytes = "vec", optional, tag = "3")]
    pub continuation: Option<Vec<u8>>,
    #[prost(bool, optional, tag = "4")]
    pub done: Option<bool>,
}

/// `RpbCSBucketReq` (40): a range fold over a bucket's objects.
#[derive(Clone, PartialEq, Message)]
#[allow(missing_docs)]
pub struct RpbCsBucketReq {
    #[prost(bytes = "vec", required, tag = "1")]
    pub bucket: Vec<u8>,
    #[prost(bytes = "vec", required, tag = "2")]
    pub start_key: Vec<u8>,
    #[prost(bytes = "vec", optional, tag = "3")]
    pub end_key: Option<Vec<u8>>,
    /// Default true.
    #[prost(bool, optional, tag = "4")]
    pub start_incl: Option<bool>,
    /// Default false.
    #[prost(bool, optional, tag = "5")]
    pub end_incl: Option<bool>,
    #[prost(bytes = "vec", optional, tag = "6")]
    pub continuation: Option<Vec<u8>>,
    #[prost(uint32, optional, tag = "7")]
    pub max_results: Option<u32>,
    #[prost(uint32, optional, tag = "8")]
    pub timeout: Option<u32>,
    #[prost(bytes = "vec", optional, tag = "9")]
    pub r#type: Option<Vec<u8>>,
    #[prost(bytes = "vec", optional, tag = "10")]
    pub cover_context: Option<Vec<u8>>,
}

/// `RpbIndexObject`: one object of a CS bucket fold.
#[derive(Clone, PartialEq, Message)]
#[allow(missing_docs)]
pub struct RpbIndexObject {
    #[prost(bytes = "vec", required, tag = "1")]
    pub key: Vec<u8>,
    #[prost(message, required, tag = "2")]
    pub object: RpbGetResp,
}

/// `RpbCSBucketResp` (41).
#[derive(Clone, PartialEq, Message)]
#[allow(missing_docs)]
pub struct RpbCsBucketResp {
    #[prost(message, repeated, tag = "1")]
    pub objects: Vec<RpbIndexObject>,
    #[prost(bytes = "vec", optional, tag = "2")]
    pub continuation: Option<Vec<u8>>,
    #[prost(bool, optional, tag = "3")]
    pub done: Option<bool>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn required_fields_are_on_the_wire() {
        let e = RpbErrorResp {
            errmsg: Vec::new(),
            errcode: 0,
        };
        // field 1 (len 0) and field 2 (varint 0) both present.
        assert_eq!(e.encode_to_vec(), vec![0x0A, 0x00, 0x10, 0x00]);
        let c = RpbContent {
            value: Vec::new(),
            ..Default::default()
        };
        assert_eq!(c.encode_to_vec(), vec![0x0A, 0x00]);
    }

    #[test]
    fn frame_layout() {
        assert_eq!(frame(code::PING_REQ, &[]), vec![0, 0, 0, 1, 1]);
    }
}
