//! Journal record format.
//!
//! Every record in a `.jnl` data file (after the 16-byte file header, see
//! [`super::file`]) is framed as:
//!
//! ```text
//! record := magic:u32 crc:u32 body_len:u32 body
//! crc    := crc32c(body_len bytes ++ body)
//! body   := kind:u8 compression:u8 sqn:u64 last_modified_us:u64
//!           expires_at:u64 key_len:u32 meta_len:u32 value_len:u32
//!           index_len:u32 key metadata value index
//! kind        := 1 put | 2 delete | 3 key delta (index changes only)
//! compression := 0 none | 1 lz4 | 2 zstd
//! ```
//!
//! `compression` says how the `value` bytes are stored (key, metadata and
//! index are never compressed); `value_len` is the *stored* length. The
//! formats are in [`super::compress`]: lz4 is an lz4 block prefixed with the
//! uncompressed length (`u32` little-endian, `lz4_flex`'s "size prepended"
//! format), zstd is one zstd frame carrying its content size. A value is
//! stored compressed only if that is smaller, so every record says for itself
//! how to read it and files (or stores) with mixed methods stay readable.
//!
//! All integers are little-endian. `magic` is [`RECORD_MAGIC`] (the bytes
//! `CERJ` on disk); it lets a scanner find the next record after a damaged
//! region. `body_len` is at most [`crate::limits::JOURNAL_RECORD_BYTES_MAX`]
//! and must fit in what remains of the file. A body is valid only if its three
//! lengths add up exactly to `body_len` minus the fixed part.

use crate::codec::{crc, DecodeError, Encode, Reader};
use crate::error::{Error, Result};
use crate::limits;

/// Magic number that starts every journal record (little-endian on disk).
pub const RECORD_MAGIC: u32 = 0x4A52_4543;

/// Bytes of the record frame before the body: magic, crc, body_len.
pub const RECORD_HEADER_LEN: usize = 12;

/// Bytes of the fixed part of a body (before key, metadata and value).
pub const BODY_FIXED_LEN: usize = 1 + 1 + 8 + 8 + 8 + 4 + 4 + 4 + 4;

/// What a record does to its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// Stores a value.
    Put,
    /// Deletes the key (a tombstone).
    Delete,
    /// Carries only the index changes of a put or delete whose value was
    /// replaced; written by journal compaction so a ledger rebuilt from the
    /// journal still has every live index entry.
    KeyDelta,
}

impl RecordKind {
    /// The on-disk tag.
    pub fn to_byte(self) -> u8 {
        match self {
            RecordKind::Put => 1,
            RecordKind::Delete => 2,
            RecordKind::KeyDelta => 3,
        }
    }

    /// Parses the on-disk tag.
    pub fn from_byte(b: u8) -> Option<RecordKind> {
        match b {
            1 => Some(RecordKind::Put),
            2 => Some(RecordKind::Delete),
            3 => Some(RecordKind::KeyDelta),
            _ => None,
        }
    }
}

/// How the value bytes are stored (the tag lives with the codecs).
pub use super::compress::Compression;

/// A record to append, borrowing its parts.
#[derive(Debug, Clone, Copy)]
pub struct NewRecord<'a> {
    /// Sequence number.
    pub sqn: u64,
    /// Put or delete.
    pub kind: RecordKind,
    /// Encoded ledger key.
    pub key: &'a [u8],
    /// Last-modified time, microseconds since the Unix epoch.
    pub last_modified_us: u64,
    /// Expiry, seconds since the Unix epoch; 0 = never.
    pub expires_at: u64,
    /// User metadata.
    pub metadata: &'a [u8],
    /// The value (empty for deletes).
    pub value: &'a [u8],
    /// Encoded index changes (opaque to the journal; empty if none).
    pub index: &'a [u8],
}

/// A record read back from the journal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JournalRecord {
    /// Sequence number.
    pub sqn: u64,
    /// Put or delete.
    pub kind: RecordKind,
    /// Encoded ledger key.
    pub key: Vec<u8>,
    /// Last-modified time, microseconds since the Unix epoch.
    pub last_modified_us: u64,
    /// Expiry, seconds since the Unix epoch; 0 = never.
    pub expires_at: u64,
    /// User metadata.
    pub metadata: Vec<u8>,
    /// The value, decompressed.
    pub value: Vec<u8>,
    /// Encoded index changes (opaque to the journal; empty if none).
    pub index: Vec<u8>,
}

/// A decoded record body borrowing the bytes it was decoded from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordView<'a> {
    /// Sequence number.
    pub sqn: u64,
    /// Put or delete.
    pub kind: RecordKind,
    /// How the value is stored.
    pub compression: Compression,
    /// Encoded ledger key.
    pub key: &'a [u8],
    /// Last-modified time, microseconds since the Unix epoch.
    pub last_modified_us: u64,
    /// Expiry, seconds since the Unix epoch; 0 = never.
    pub expires_at: u64,
    /// User metadata.
    pub metadata: &'a [u8],
    /// The stored value bytes.
    pub value: &'a [u8],
    /// Encoded index changes.
    pub index: &'a [u8],
}

impl RecordView<'_> {
    /// Copies the record out, decompressing the value. Fails if the stored
    /// value does not decompress, or would decompress to more than
    /// [`limits::VALUE_SIZE_BYTES_CEILING`] bytes.
    pub fn to_record(&self) -> Result<JournalRecord, DecodeError> {
        let value = super::compress::decompress(
            self.compression,
            self.value,
            limits::VALUE_SIZE_BYTES_CEILING,
        )?;
        Ok(JournalRecord {
            value,
            ..self.to_record_meta()
        })
    }

    /// Copies the record out *without its value* (`value` is left empty):
    /// what journal compaction's liveness check needs, at no decompression cost.
    pub fn to_record_meta(&self) -> JournalRecord {
        JournalRecord {
            sqn: self.sqn,
            kind: self.kind,
            key: self.key.to_vec(),
            last_modified_us: self.last_modified_us,
            expires_at: self.expires_at,
            metadata: self.metadata.to_vec(),
            value: Vec::new(),
            index: self.index.to_vec(),
        }
    }

    /// The record as a [`NewRecord`] whose `value` is the *stored* bytes, for
    /// re-encoding with [`encode_stored`] and `self.compression`.
    pub fn as_stored(&self) -> NewRecord<'_> {
        NewRecord {
            sqn: self.sqn,
            kind: self.kind,
            key: self.key,
            last_modified_us: self.last_modified_us,
            expires_at: self.expires_at,
            metadata: self.metadata,
            value: self.value,
            index: self.index,
        }
    }
}

fn len32(what: &str, n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| {
        Error::InvalidInput(format!("journal record {what} of {n} bytes is too large"))
    })
}

/// Encodes `rec` as a complete framed record, appended to `out`.
///
/// Fails with [`Error::InvalidInput`] if the record would exceed
/// [`limits::JOURNAL_RECORD_BYTES_MAX`].
pub fn encode_record(rec: &NewRecord<'_>, out: &mut Vec<u8>) -> Result<()> {
    encode_stored(rec, Compression::None, out)
}

/// Encodes `rec` whose `value` holds bytes already stored with `compression`
/// (for example the output of [`super::compress::compress`]).
///
/// Fails with [`Error::InvalidInput`] if the record would exceed
/// [`limits::JOURNAL_RECORD_BYTES_MAX`].
pub fn encode_stored(
    rec: &NewRecord<'_>,
    compression: Compression,
    out: &mut Vec<u8>,
) -> Result<()> {
    let key_len = len32("key", rec.key.len())?;
    let meta_len = len32("metadata", rec.metadata.len())?;
    let value_len = len32("value", rec.value.len())?;
    let index_len = len32("index", rec.index.len())?;
    let body_len = (BODY_FIXED_LEN as u64)
        + u64::from(key_len)
        + u64::from(meta_len)
        + u64::from(value_len)
        + u64::from(index_len);
    if body_len > limits::JOURNAL_RECORD_BYTES_MAX {
        return Err(Error::InvalidInput(format!(
            "journal record of {body_len} bytes exceeds the limit of {} bytes",
            limits::JOURNAL_RECORD_BYTES_MAX
        )));
    }
    let body_len32 = len32("body", body_len as usize)?;
    let start = out.len();
    out.reserve(RECORD_HEADER_LEN + body_len as usize);
    out.put_u32(RECORD_MAGIC);
    out.put_u32(0); // crc, patched below
    out.put_u32(body_len32);
    out.put_u8(rec.kind.to_byte());
    out.put_u8(compression.to_byte());
    out.put_u64(rec.sqn);
    out.put_u64(rec.last_modified_us);
    out.put_u64(rec.expires_at);
    out.put_u32(key_len);
    out.put_u32(meta_len);
    out.put_u32(value_len);
    out.put_u32(index_len);
    out.extend_from_slice(rec.key);
    out.extend_from_slice(rec.metadata);
    out.extend_from_slice(rec.value);
    out.extend_from_slice(rec.index);
    debug_assert_eq!(out.len() - start, RECORD_HEADER_LEN + body_len as usize);
    let sum = out.get(start + 8..).map(crc).unwrap_or(0);
    if let Some(slot) = out.get_mut(start + 4..start + 8) {
        slot.copy_from_slice(&sum.to_le_bytes());
    }
    Ok(())
}

/// Offset of `sqn` in an encoded record: the frame, then `kind` and `compression`.
const SQN_OFFSET: usize = RECORD_HEADER_LEN + 2;

/// Sets the `sqn` of one record encoded by [`encode_stored`] (whose `sqn`
/// was a placeholder) and recomputes its checksum, so a record can be
/// encoded and compressed before its writer knows its SQN.
pub fn reseal(rec: &mut [u8], sqn: u64) {
    debug_assert!(rec.len() >= RECORD_HEADER_LEN + BODY_FIXED_LEN);
    debug_assert_eq!(rec.get(..4), Some(&RECORD_MAGIC.to_le_bytes()[..]));
    if let Some(slot) = rec.get_mut(SQN_OFFSET..SQN_OFFSET + 8) {
        slot.copy_from_slice(&sqn.to_le_bytes());
    }
    let sum = rec.get(8..).map(crc).unwrap_or(0);
    if let Some(slot) = rec.get_mut(4..8) {
        slot.copy_from_slice(&sum.to_le_bytes());
    }
}

/// The record checksum: CRC32C over the 4 `body_len` bytes followed by the body.
pub fn record_crc(body_len: u32, body: &[u8]) -> u32 {
    crc32c::crc32c_append(crc(&body_len.to_le_bytes()), body)
}

/// The parsed frame of a record: its length and checksum, not yet verified.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FrameHeader {
    /// Stored CRC.
    pub crc: u32,
    /// Body length in bytes.
    pub body_len: u32,
}

impl FrameHeader {
    /// Total record size (frame header plus body).
    pub fn total_len(&self) -> u64 {
        RECORD_HEADER_LEN as u64 + u64::from(self.body_len)
    }
}

/// Parses a 12-byte frame header, checking the magic and the length limits.
/// `room` is how many bytes the file holds from the record's start.
pub fn decode_frame_header(buf: &[u8], room: u64) -> Result<FrameHeader, DecodeError> {
    let mut r = Reader::new(buf);
    let magic = r.u32()?;
    if magic != RECORD_MAGIC {
        return Err(DecodeError(format!("bad record magic 0x{magic:08x}")));
    }
    let crc = r.u32()?;
    let body_len = r.u32()?;
    if (body_len as usize) < BODY_FIXED_LEN {
        return Err(DecodeError(format!(
            "record body length {body_len} is too short"
        )));
    }
    if u64::from(body_len) > limits::JOURNAL_RECORD_BYTES_MAX {
        return Err(DecodeError(format!(
            "record body length {body_len} exceeds the limit"
        )));
    }
    let h = FrameHeader { crc, body_len };
    if h.total_len() > room {
        return Err(DecodeError(format!(
            "record of {} bytes runs past the end of the file ({room} bytes left)",
            h.total_len()
        )));
    }
    Ok(h)
}

/// Verifies the CRC of `body` against the frame header and decodes it.
pub fn verify_and_decode_body<'a>(
    h: &FrameHeader,
    body: &'a [u8],
) -> Result<RecordView<'a>, DecodeError> {
    if body.len() != h.body_len as usize {
        return Err(DecodeError(format!(
            "record body is {} bytes, header says {}",
            body.len(),
            h.body_len
        )));
    }
    let sum = record_crc(h.body_len, body);
    if sum != h.crc {
        return Err(DecodeError(format!(
            "record checksum mismatch (stored 0x{:08x}, computed 0x{sum:08x})",
            h.crc
        )));
    }
    decode_body(body)
}

/// Decodes a record body (without checking any CRC). Never panics.
pub fn decode_body(body: &[u8]) -> Result<RecordView<'_>, DecodeError> {
    let mut r = Reader::new(body);
    let kind_b = r.u8()?;
    let kind = RecordKind::from_byte(kind_b)
        .ok_or_else(|| DecodeError(format!("unknown record kind {kind_b}")))?;
    let comp_b = r.u8()?;
    let compression = Compression::from_byte(comp_b)
        .ok_or_else(|| DecodeError(format!("unknown compression {comp_b}")))?;
    let sqn = r.u64()?;
    let last_modified_us = r.u64()?;
    let expires_at = r.u64()?;
    let key_len = r.u32()? as usize;
    let meta_len = r.u32()? as usize;
    let value_len = r.u32()? as usize;
    let index_len = r.u32()? as usize;
    let want = key_len
        .checked_add(meta_len)
        .and_then(|n| n.checked_add(value_len))
        .and_then(|n| n.checked_add(index_len));
    if want != Some(r.remaining()) {
        return Err(DecodeError(format!(
            "record lengths (key {key_len}, metadata {meta_len}, value {value_len}, index {index_len}) do not match the body ({} bytes left)",
            r.remaining()
        )));
    }
    let key = r.take(key_len)?;
    let metadata = r.take(meta_len)?;
    let value = r.take(value_len)?;
    let index = r.take(index_len)?;
    debug_assert!(r.is_empty());
    if sqn == 0 {
        return Err(DecodeError("record has sequence number 0".into()));
    }
    Ok(RecordView {
        sqn,
        kind,
        compression,
        key,
        last_modified_us,
        expires_at,
        metadata,
        value,
        index,
    })
}

/// Decodes one complete framed record at the start of `buf`, verifying the
/// magic, the limits, the CRC and the structure. Returns the record and its
/// total length.
pub fn decode_record(buf: &[u8]) -> Result<(RecordView<'_>, u64), DecodeError> {
    let head = buf
        .get(..RECORD_HEADER_LEN)
        .ok_or_else(|| DecodeError(format!("truncated record header ({} bytes)", buf.len())))?;
    let h = decode_frame_header(head, buf.len() as u64)?;
    let body = buf
        .get(RECORD_HEADER_LEN..RECORD_HEADER_LEN + h.body_len as usize)
        .ok_or_else(|| DecodeError("truncated record body".into()))?;
    let view = verify_and_decode_body(&h, body)?;
    Ok((view, h.total_len()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sample<'a>(sqn: u64, key: &'a [u8], value: &'a [u8]) -> NewRecord<'a> {
        NewRecord {
            sqn,
            kind: RecordKind::Put,
            key,
            last_modified_us: 1234,
            expires_at: 99,
            metadata: b"meta",
            value,
            index: b"idx",
        }
    }

    #[test]
    fn record_round_trip() {
        let mut buf = Vec::new();
        encode_record(&sample(7, b"key", b"value"), &mut buf).unwrap();
        let (v, len) = decode_record(&buf).unwrap();
        assert_eq!(len as usize, buf.len());
        let r = v.to_record().unwrap();
        assert_eq!(r.sqn, 7);
        assert_eq!(r.kind, RecordKind::Put);
        assert_eq!(r.key, b"key");
        assert_eq!(r.metadata, b"meta");
        assert_eq!(r.value, b"value");
        assert_eq!(r.index, b"idx");
        assert_eq!(r.last_modified_us, 1234);
        assert_eq!(r.expires_at, 99);
        let del = NewRecord {
            kind: RecordKind::Delete,
            value: b"",
            ..sample(8, b"k", b"")
        };
        let mut buf2 = Vec::new();
        encode_record(&del, &mut buf2).unwrap();
        assert_eq!(decode_record(&buf2).unwrap().0.kind, RecordKind::Delete);
    }

    #[test]
    fn every_flipped_byte_is_detected() {
        let mut buf = Vec::new();
        encode_record(&sample(3, b"key", b"some value"), &mut buf).unwrap();
        for i in 0..buf.len() {
            let mut bad = buf.clone();
            bad[i] ^= 0x40;
            assert!(decode_record(&bad).is_err(), "flip at {i} undetected");
        }
        for n in 0..buf.len() {
            assert!(decode_record(&buf[..n]).is_err());
        }
    }

    proptest! {
        #[test]
        fn decoding_random_bytes_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = decode_record(&bytes);
            let _ = decode_body(&bytes);
            let _ = decode_frame_header(&bytes, bytes.len() as u64);
        }

        #[test]
        fn decoding_framed_random_bodies_never_panics(body in proptest::collection::vec(any::<u8>(), 0..200)) {
            // A valid frame and CRC around arbitrary bytes: only the structural checks stand.
            let mut buf = Vec::new();
            buf.put_u32(RECORD_MAGIC);
            buf.put_u32(record_crc(body.len() as u32, &body));
            buf.put_u32(body.len() as u32);
            buf.extend_from_slice(&body);
            let _ = decode_record(&buf);
        }
    }
}
