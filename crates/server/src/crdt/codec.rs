//! Byte encoding shared by every data type (`docs/formats.md` "Data
//! types"): little-endian integers, `len:u32 | bytes` strings, and a
//! bounds-checked [`Reader`] whose every failure is a [`CrdtError`], never
//! a panic. Counts read from bytes are checked against the bytes left
//! before anything is allocated, so corrupt input cannot ask for memory it
//! does not carry.

use super::CrdtError;

/// Appends encodings to a buffer.
#[derive(Debug, Default)]
pub struct Writer {
    /// The bytes so far.
    pub buf: Vec<u8>,
}

impl Writer {
    /// One byte.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    /// A little-endian `u32`.
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// A little-endian `u64`.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// A count (`u32`); counts are bounded by the limits, far below 2^32.
    pub fn len(&mut self, n: usize) {
        debug_assert!(u32::try_from(n).is_ok(), "count over u32");
        self.u32(n as u32);
    }
    /// `len:u32 | bytes`.
    pub fn bytes(&mut self, b: &[u8]) {
        self.len(b.len());
        self.buf.extend_from_slice(b);
    }
}

/// Reads encodings from a slice.
#[derive(Debug)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    /// A reader at the start of `buf`.
    pub fn new(buf: &'a [u8]) -> Reader<'a> {
        Reader { buf, pos: 0 }
    }

    /// Bytes not read yet.
    pub fn remaining(&self) -> usize {
        self.buf.len() - self.pos
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], CrdtError> {
        let end = self
            .pos
            .checked_add(n)
            .ok_or(CrdtError::Corrupt("length overflow"))?;
        let s = self
            .buf
            .get(self.pos..end)
            .ok_or(CrdtError::Corrupt("truncated"))?;
        self.pos = end;
        Ok(s)
    }

    /// One byte.
    pub fn u8(&mut self) -> Result<u8, CrdtError> {
        Ok(self.take(1)?[0])
    }

    /// A little-endian `u32`.
    pub fn u32(&mut self) -> Result<u32, CrdtError> {
        let s = self.take(4)?;
        Ok(u32::from_le_bytes([s[0], s[1], s[2], s[3]]))
    }

    /// A little-endian `u64`.
    pub fn u64(&mut self) -> Result<u64, CrdtError> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }

    /// A count of items each at least `min_item_bytes` long: refused if
    /// the bytes left cannot hold that many.
    pub fn count(&mut self, min_item_bytes: usize) -> Result<usize, CrdtError> {
        let n = self.u32()? as usize;
        if n.saturating_mul(min_item_bytes.max(1)) > self.remaining() {
            return Err(CrdtError::Corrupt("count larger than the bytes left"));
        }
        Ok(n)
    }

    /// `len:u32 | bytes`.
    pub fn bytes(&mut self) -> Result<Vec<u8>, CrdtError> {
        let n = self.u32()? as usize;
        Ok(self.take(n)?.to_vec())
    }

    /// Fails unless every byte was read.
    pub fn finish(&self) -> Result<(), CrdtError> {
        if self.pos == self.buf.len() {
            Ok(())
        } else {
            Err(CrdtError::Corrupt("trailing bytes"))
        }
    }
}
