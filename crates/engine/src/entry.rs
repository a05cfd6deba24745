//! Ledger entries: what the ledger knows about one key.
//!
//! ```text
//! ledger value := sqn:u64 status:u8 expires_at:u64 value_hash:u64
//!                 size:u64 last_modified_us:u64 metadata_len:u32 metadata
//! status       := 0 active | 1 tombstone
//! ```
//! All integers little-endian. `expires_at` is seconds since the Unix epoch,
//! 0 meaning never. `value_hash` is xxh3-64 of the stored value bytes, `size`
//! the value's length, `last_modified_us` microseconds since the Unix epoch.

use crate::codec::{DecodeError, Encode, Reader};

/// Whether a key is live or deleted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    /// The key holds a value (subject to `expires_at`).
    Active,
    /// The key was deleted.
    Tombstone,
}

/// The ledger's record of one key's current version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LedgerValue {
    /// Sequence number of the journal record holding this version.
    pub sqn: u64,
    /// Live or deleted.
    pub status: Status,
    /// Expiry, seconds since the Unix epoch; 0 = never.
    pub expires_at: u64,
    /// xxh3-64 of the value bytes (0 for tombstones).
    pub value_hash: u64,
    /// Value size in bytes (0 for tombstones).
    pub size: u64,
    /// Last-modified time, microseconds since the Unix epoch.
    pub last_modified_us: u64,
    /// Opaque user metadata (Riak keeps its vclock and content metadata here).
    pub metadata: Vec<u8>,
}

/// Fixed part of an encoded ledger value, in bytes.
pub const FIXED_BYTES: usize = 8 + 1 + 8 + 8 + 8 + 8 + 4;

impl LedgerValue {
    /// True if the entry is a tombstone or has expired at `now_secs`.
    pub fn is_dead(&self, now_secs: u64) -> bool {
        self.status == Status::Tombstone || (self.expires_at != 0 && self.expires_at <= now_secs)
    }

    /// Appends the encoded form to `out`.
    pub fn encode_into(&self, out: &mut Vec<u8>) {
        out.put_u64(self.sqn);
        out.put_u8(match self.status {
            Status::Active => 0,
            Status::Tombstone => 1,
        });
        out.put_u64(self.expires_at);
        out.put_u64(self.value_hash);
        out.put_u64(self.size);
        out.put_u64(self.last_modified_us);
        out.put_bytes32(&self.metadata);
    }

    /// Encoded size in bytes.
    pub fn encoded_len(&self) -> usize {
        FIXED_BYTES + self.metadata.len()
    }

    /// Decodes one value from the reader.
    pub fn decode(r: &mut Reader<'_>) -> Result<Self, DecodeError> {
        let sqn = r.u64()?;
        let status = match r.u8()? {
            0 => Status::Active,
            1 => Status::Tombstone,
            s => return Err(DecodeError(format!("bad ledger status {s}"))),
        };
        Ok(LedgerValue {
            sqn,
            status,
            expires_at: r.u64()?,
            value_hash: r.u64()?,
            size: r.u64()?,
            last_modified_us: r.u64()?,
            metadata: r.bytes32()?.to_vec(),
        })
    }
}

/// Hash of a value as stored in ledger entries (xxh3-64): the backend
/// crate's function, so every backend's `Head::value_hash` is the same.
pub use basalt_backend::value_hash;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        let v = LedgerValue {
            sqn: 42,
            status: Status::Tombstone,
            expires_at: 7,
            value_hash: 9,
            size: 11,
            last_modified_us: 13,
            metadata: b"meta".to_vec(),
        };
        let mut out = Vec::new();
        v.encode_into(&mut out);
        assert_eq!(out.len(), v.encoded_len());
        let mut r = Reader::new(&out);
        assert_eq!(LedgerValue::decode(&mut r).unwrap(), v);
        assert!(r.is_empty());
        assert!(LedgerValue::decode(&mut Reader::new(&out[..out.len() - 1])).is_err());
    }

    #[test]
    fn expiry() {
        let mut v = LedgerValue {
            sqn: 1,
            status: Status::Active,
            expires_at: 0,
            value_hash: 0,
            size: 0,
            last_modified_us: 0,
            metadata: vec![],
        };
        assert!(!v.is_dead(100));
        v.expires_at = 100;
        assert!(v.is_dead(100));
        assert!(!v.is_dead(99));
    }
}
