//! Little-endian encoding helpers with bounds-checked decoding.
//!
//! Decoders never panic on bad input: every read is checked and returns a
//! [`DecodeError`], which callers turn into [`crate::Error::Corrupt`] with the
//! file and offset they know.

/// A decode failed: the buffer is too short or holds an impossible value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct DecodeError(pub String);

/// The format version in a file's header (`magic`, then a little-endian
/// `u32` version) when the magic is `magic` and the version is not one of
/// `reads`: a file written by a build that knows more formats (a newer
/// Basalt). `None` when the magic differs or is cut short (another check
/// reports that) or the version is one this build reads. Callers check this
/// before checksums and structure, so a newer file is refused as such,
/// never "repaired" as damage.
pub fn unread_version(bytes: &[u8], magic: &[u8; 8], reads: &[u32]) -> Option<u32> {
    if bytes.get(..8)? != magic {
        return None;
    }
    let version = u32::from_le_bytes(*bytes.get(8..12)?.first_chunk::<4>()?);
    (!reads.contains(&version)).then_some(version)
}

/// [`unread_version`] of a file that ends in the CRC32C of everything
/// before it (the manifests): only when that checksum holds, so a damaged
/// version field is damage (reported and repaired as such), not a newer
/// file.
pub fn unread_version_intact(bytes: &[u8], magic: &[u8; 8], reads: &[u32]) -> Option<u32> {
    let found = unread_version(bytes, magic, reads)?;
    let (body, tail) = bytes.split_last_chunk::<4>()?;
    (crc(body) == u32::from_le_bytes(*tail)).then_some(found)
}

/// `reads` as text for a message: "1", "1 and 2", "1, 2 and 3".
pub fn versions_text(reads: &[u32]) -> String {
    let all: Vec<String> = reads.iter().map(u32::to_string).collect();
    match all.split_last() {
        None => String::new(),
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
    }
}

/// Appends little-endian integers and length-prefixed byte strings.
pub trait Encode {
    /// Appends one byte.
    fn put_u8(&mut self, v: u8);
    /// Appends a little-endian u32.
    fn put_u32(&mut self, v: u32);
    /// Appends a little-endian u64.
    fn put_u64(&mut self, v: u64);
    /// Appends a u32 length followed by the bytes.
    fn put_bytes32(&mut self, v: &[u8]);
}

impl Encode for Vec<u8> {
    fn put_u8(&mut self, v: u8) {
        self.push(v);
    }
    fn put_u32(&mut self, v: u32) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_u64(&mut self, v: u64) {
        self.extend_from_slice(&v.to_le_bytes());
    }
    fn put_bytes32(&mut self, v: &[u8]) {
        debug_assert!(u32::try_from(v.len()).is_ok());
        self.put_u32(v.len() as u32);
        self.extend_from_slice(v);
    }
}

/// A cursor over a byte slice whose reads are all bounds-checked.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// Starts reading at the beginning of `buf`.
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes not yet consumed.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    /// True when every byte has been consumed.
    pub fn is_empty(&self) -> bool {
        self.remaining() == 0
    }

    /// Takes the next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], DecodeError> {
        let end = self
            .pos
            .checked_add(n)
            .filter(|end| *end <= self.buf.len())
            .ok_or_else(|| {
                DecodeError(format!(
                    "truncated: need {n} bytes at {}, have {}",
                    self.pos,
                    self.remaining()
                ))
            })?;
        let out = &self.buf[self.pos..end];
        self.pos = end;
        Ok(out)
    }

    /// Reads one byte.
    pub fn u8(&mut self) -> Result<u8, DecodeError> {
        Ok(self.take(1)?[0])
    }

    /// Reads a little-endian u32.
    pub fn u32(&mut self) -> Result<u32, DecodeError> {
        let b = self.take(4)?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }

    /// Reads a little-endian u64.
    pub fn u64(&mut self) -> Result<u64, DecodeError> {
        let b = self.take(8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_le_bytes(a))
    }

    /// Reads a u32 length and that many bytes.
    pub fn bytes32(&mut self) -> Result<&'a [u8], DecodeError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
}

/// CRC32C (Castagnoli) of `data`, the checksum of every on-disk record and block.
pub fn crc(data: &[u8]) -> u32 {
    crc32c::crc32c(data)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_truncation() {
        let mut v = Vec::new();
        v.put_u8(7);
        v.put_u32(0xdead_beef);
        v.put_u64(u64::MAX - 1);
        v.put_bytes32(b"hello");
        let mut r = Reader::new(&v);
        assert_eq!(r.u8().unwrap(), 7);
        assert_eq!(r.u32().unwrap(), 0xdead_beef);
        assert_eq!(r.u64().unwrap(), u64::MAX - 1);
        assert_eq!(r.bytes32().unwrap(), b"hello");
        assert!(r.is_empty());
        assert!(r.u8().is_err());
        let mut short = Reader::new(&v[..v.len() - 1]);
        short.take(13).unwrap();
        assert!(short.bytes32().is_err());
    }

    #[test]
    fn huge_length_is_an_error_not_a_panic() {
        let mut v = Vec::new();
        v.put_u32(u32::MAX);
        assert!(Reader::new(&v).bytes32().is_err());
    }
}
