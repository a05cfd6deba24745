//! Journal record format. STUB.

/// What a record does to its key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordKind {
    /// Stores a value.
    Put,
    /// Deletes the key (a tombstone).
    Delete,
}

/// How the value bytes are stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Compression {
    /// Stored as given.
    #[default]
    None,
}

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
}
