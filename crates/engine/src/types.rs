//! The small value types the read paths share: [`Head`] and [`Object`]
//! (what HEAD and GET answer) and [`KeyRange`] (a key range within one
//! bucket).
//!
//! They live here, below [`crate::store`], [`crate::snapshot`] and
//! [`crate::fold`], so those modules import them one way; each is
//! re-exported from its old path (`store::Head`, `store::Object`,
//! `fold::KeyRange`) and from the crate root.

use crate::entry::LedgerValue;
use crate::key;

/// Metadata of an object, answered from the ledger alone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// Sequence number of the current version.
    pub sqn: u64,
    /// Value size in bytes.
    pub size: u64,
    /// xxh3-64 of the value.
    pub value_hash: u64,
    /// Last-modified time, microseconds since the Unix epoch.
    pub last_modified_us: u64,
    /// Expiry, seconds since the Unix epoch; 0 = never.
    pub expires_at: u64,
    /// The user metadata given at put.
    pub metadata: Vec<u8>,
}

/// An object: its value and its metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// The value bytes.
    pub value: Vec<u8>,
    /// The metadata.
    pub head: Head,
}

pub(crate) fn head_of(v: LedgerValue) -> Head {
    Head {
        sqn: v.sqn,
        size: v.size,
        value_hash: v.value_hash,
        last_modified_us: v.last_modified_us,
        expires_at: v.expires_at,
        metadata: v.metadata,
    }
}

/// An inclusive range of keys within one bucket (Riak's `{StartKey, EndKey}`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange {
    /// First key (inclusive).
    pub start: Vec<u8>,
    /// Last key (inclusive).
    pub end: Vec<u8>,
}

impl KeyRange {
    /// The keys `start..=end`.
    pub fn new(start: &[u8], end: &[u8]) -> KeyRange {
        KeyRange {
            start: start.to_vec(),
            end: end.to_vec(),
        }
    }

    /// The encoded ledger-key bounds `[start, end)` of this range in `bucket`.
    pub fn encoded(&self, bucket: &[u8]) -> (Vec<u8>, Option<Vec<u8>>) {
        let start = key::object(bucket, &self.start);
        // No encoded object key lies strictly between object(b, end) and
        // object(b, end) ++ [0] (encoded keys end with a terminator that no
        // longer key can extend), so this bound includes `end` exactly.
        let mut end = key::object(bucket, &self.end);
        end.push(0);
        (start, Some(end))
    }
}
