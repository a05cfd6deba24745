//! Index changes on the write side: the journal blob that carries them
//! (`JournalRecord::index`), the ledger entries they become
//! ([`prepare`], [`replay_entries`]) and what journal compaction keeps of
//! them ([`changes_to_retain`]). Formats in [`super`].

use super::{
    checked_field_kind, encode_term, invalid, op_from_byte, op_to_byte, show, IndexChange, IndexOp,
};
use crate::codec::{DecodeError, Encode, Reader};
use crate::config::Config;
use crate::entry::{LedgerValue, Status};
use crate::error::{Error, Result};
use crate::journal::JournalRecord;
use crate::key::{self, KeyKind};
use crate::ledger::Ledger;
use std::collections::BTreeMap;

pub(super) const BLOB_VERSION: u8 = 1;

/// A put's index blob when its changes are recalculated from its metadata
/// at replay (index blob version 2; see [`super::recalc`]).
pub const RECALC_BLOB: &[u8] = &[2];
/// Smallest encoded change: op + two lengths.
const CHANGE_MIN_BYTES: usize = 1 + 4 + 4;

/// Encodes changes as the journal record's index blob (empty for none).
pub fn encode_changes(changes: &[IndexChange]) -> Vec<u8> {
    if changes.is_empty() {
        return Vec::new();
    }
    let len: usize = changes
        .iter()
        .map(|c| CHANGE_MIN_BYTES + c.field.len() + c.term.len())
        .sum();
    let mut out = Vec::with_capacity(5 + len);
    out.put_u8(BLOB_VERSION);
    debug_assert!(u32::try_from(changes.len()).is_ok());
    out.put_u32(changes.len() as u32);
    for c in changes {
        out.put_u8(op_to_byte(c.op));
        out.put_bytes32(&c.field);
        out.put_bytes32(&c.term);
    }
    out
}

/// Decodes a journal record's index blob. Never panics on bad input.
pub fn decode_changes(blob: &[u8]) -> Result<Vec<IndexChange>, DecodeError> {
    if blob.is_empty() {
        return Ok(Vec::new());
    }
    let mut r = Reader::new(blob);
    let version = r.u8()?;
    if blob == RECALC_BLOB {
        return Err(DecodeError(
            "the changes are to be recalculated from the object's metadata (index blob 2): \
             only a store opened with its 2i term source can replay them"
                .to_string(),
        ));
    }
    if version != BLOB_VERSION {
        return Err(DecodeError(format!(
            "unknown index blob version {version} (this build reads {BLOB_VERSION})"
        )));
    }
    let count = r.u32()? as usize;
    if count > r.remaining() / CHANGE_MIN_BYTES {
        return Err(DecodeError(format!(
            "index blob claims {count} changes in {} bytes",
            r.remaining()
        )));
    }
    let mut out = Vec::with_capacity(count);
    for _ in 0..count {
        let op_b = r.u8()?;
        let op =
            op_from_byte(op_b).ok_or_else(|| DecodeError(format!("unknown index op {op_b}")))?;
        let field = r.bytes32()?.to_vec();
        let term = r.bytes32()?.to_vec();
        out.push(IndexChange { op, field, term });
    }
    if !r.is_empty() {
        return Err(DecodeError(format!(
            "{} trailing bytes after index changes",
            r.remaining()
        )));
    }
    Ok(out)
}

/// The ledger key of one index entry (`stored_term` already encoded).
pub fn entry_key(bucket: &[u8], field: &[u8], stored_term: &[u8], key: &[u8]) -> Vec<u8> {
    key::encode(KeyKind::Index, &[bucket, field, stored_term, key])
}

/// A write's validated index changes: the journal blob and the ledger keys.
#[derive(Debug, Clone, Default)]
pub struct Prepared {
    /// The journal record's index blob.
    pub blob: Vec<u8>,
    /// (ledger key, op) per distinct entry; a later change of the same entry wins.
    entries: BTreeMap<Vec<u8>, IndexOp>,
}

impl Prepared {
    /// The ledger entries of this write at `sqn`.
    pub fn ledger_entries(
        &self,
        sqn: u64,
        expires_at: u64,
        last_modified_us: u64,
    ) -> impl Iterator<Item = (Vec<u8>, LedgerValue)> + '_ {
        self.entries.iter().map(move |(k, op)| {
            (
                k.clone(),
                entry_value(*op, sqn, expires_at, last_modified_us),
            )
        })
    }

    /// Number of distinct index entries.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the write changes no index entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}

pub(super) fn entry_value(
    op: IndexOp,
    sqn: u64,
    expires_at: u64,
    last_modified_us: u64,
) -> LedgerValue {
    LedgerValue {
        sqn,
        status: match op {
            IndexOp::Add => Status::Active,
            IndexOp::Remove => Status::Tombstone,
        },
        expires_at,
        value_hash: 0,
        size: 0,
        last_modified_us,
        metadata: Vec::new(),
    }
}

pub(super) fn keyed(
    bucket: &[u8],
    key: &[u8],
    changes: &[IndexChange],
) -> Result<BTreeMap<Vec<u8>, IndexOp>> {
    let mut entries = BTreeMap::new();
    for c in changes {
        let kind = checked_field_kind(&c.field)?;
        let stored = encode_term(kind, &c.field, &c.term)?;
        entries.insert(entry_key(bucket, &c.field, &stored, key), c.op);
    }
    Ok(entries)
}

/// Validates a write's changes against `config`'s limits (count, term size,
/// field suffix, integer terms) and prepares them.
pub fn prepare(
    bucket: &[u8],
    key: &[u8],
    changes: &[IndexChange],
    config: &Config,
) -> Result<Prepared> {
    if changes.is_empty() {
        return Ok(Prepared::default());
    }
    if changes.len() > config.index_changes_max {
        return Err(invalid(format!(
            "{} index changes in one write; the limit is {} (index_changes_max)",
            changes.len(),
            config.index_changes_max
        )));
    }
    for c in changes {
        if c.term.len() > config.index_term_bytes_max {
            return Err(invalid(format!(
                "index field '{}': term of {} bytes exceeds the limit of {} bytes (index_term_bytes_max)",
                show(&c.field),
                c.term.len(),
                config.index_term_bytes_max
            )));
        }
    }
    let entries = keyed(bucket, key, changes)?;
    Ok(Prepared {
        blob: encode_changes(changes),
        entries,
    })
}

fn corrupt_record(rec: &JournalRecord, why: impl std::fmt::Display) -> Error {
    Error::corrupt(
        "journal",
        0,
        format!("index changes of record sqn {}: {why}", rec.sqn),
    )
}

fn record_entries(rec: &JournalRecord) -> Result<BTreeMap<Vec<u8>, IndexOp>> {
    let changes = decode_changes(&rec.index).map_err(|e| corrupt_record(rec, e))?;
    if changes.is_empty() {
        return Ok(BTreeMap::new());
    }
    let (bucket, key) = key::decode_object(&rec.key).map_err(|e| corrupt_record(rec, e))?;
    keyed(&bucket, &key, &changes).map_err(|e| corrupt_record(rec, e))
}

/// The ledger index entries a journal record implies (used by replay).
pub fn replay_entries(rec: &JournalRecord) -> Result<Vec<(Vec<u8>, LedgerValue)>> {
    Ok(record_entries(rec)?
        .into_iter()
        .map(|(k, op)| {
            let v = entry_value(op, rec.sqn, rec.expires_at, rec.last_modified_us);
            (k, v)
        })
        .collect())
}

/// For journal compaction dropping the replaced record `rec`: its index
/// changes whose ledger entry still carries `rec.sqn` (not superseded),
/// re-encoded as an index blob, or `None` if none is left.
pub fn changes_to_retain(ledger: &Ledger, rec: &JournalRecord) -> Result<Option<Vec<u8>>> {
    let changes = decode_changes(&rec.index).map_err(|e| corrupt_record(rec, e))?;
    if changes.is_empty() {
        return Ok(None);
    }
    let (bucket, key) = key::decode_object(&rec.key).map_err(|e| corrupt_record(rec, e))?;
    // The last change of each entry is the one the ledger got.
    let mut last: BTreeMap<Vec<u8>, usize> = BTreeMap::new();
    for (i, c) in changes.iter().enumerate() {
        let kind = checked_field_kind(&c.field).map_err(|e| corrupt_record(rec, e))?;
        let stored = encode_term(kind, &c.field, &c.term).map_err(|e| corrupt_record(rec, e))?;
        last.insert(entry_key(&bucket, &c.field, &stored, &key), i);
    }
    let mut keep: Vec<usize> = Vec::new();
    for (lkey, i) in last {
        if ledger.get(&lkey)?.is_some_and(|v| v.sqn == rec.sqn) {
            keep.push(i);
        }
    }
    if keep.is_empty() {
        return Ok(None);
    }
    keep.sort_unstable();
    let kept: Vec<IndexChange> = keep
        .into_iter()
        .filter_map(|i| changes.get(i).cloned())
        .collect();
    Ok(Some(encode_changes(&kept)))
}
