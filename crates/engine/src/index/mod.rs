//! Secondary indexes (Riak 2i): index changes on writes, their journal
//! encoding, the ledger's index entries, queries and continuations.
//!
//! # Model
//!
//! A put or delete may carry [`IndexChange`]s: `Add` or `Remove` of one
//! (field, term) for the written object. As in Riak, the application supplies
//! the diffs (it adds the new terms and removes the old ones); the store never
//! computes them. A field name ends in `_bin` (terms are byte strings, sorted
//! bytewise) or `_int` (terms are decimal integers of any size, as
//! Riak's, sorted numerically: `intterm`). Deleting an object does **not** remove its index entries by
//! itself: the delete must carry the removals (Riak's deletes do). An index
//! entry whose object is gone stays queryable until it is removed.
//!
//! # Ledger entries
//!
//! Each change becomes one ledger entry, keyed
//!
//! ```text
//! key::encode(KeyKind::Index, [bucket, field, stored_term, object_key])
//! stored_term := term bytes as given                  (_bin)
//!              | intterm::IntTerm::encode            (_int)
//! ```
//!
//! The `_int` form's byte order is numeric order: an `i64` (but
//! `i64::MIN`) is sign-flipped big-endian (`-1` → `7F FF..FF`, `0` →
//! `80 00..00`), larger magnitudes extend it (`intterm`). The ledger
//! value is `{sqn: the write's SQN, status: Active (add) | Tombstone (remove),
//! expires_at: the object's, value_hash: 0, size: 0, last_modified_us: the
//! write's, metadata: empty}`, so index entries of a TTL'd object expire with
//! it. Within one write, a later change of the same (field, term) wins.
//!
//! # Journal blob (`JournalRecord::index`)
//!
//! ```text
//! index  := (nothing, when the write has no changes)
//!         | version:u8 (=1) count:u32 change{count}
//!         | version:u8 (=2)            (recalculate: see below)
//! change := op:u8 (1 add, 2 remove) field_len:u32 field term_len:u32 term
//! ```
//!
//! Integers little-endian; `term` is the term as the user gave it (decimal
//! text for `_int`). Replay re-derives the ledger entries from it. A
//! `RecordKind::KeyDelta` record carries only this blob (no object entry).
//!
//! The one-byte blob `2` ([`recalc::RECALC_BLOB`], since 2026-12-07) says
//! the put's changes are the difference between its metadata's terms and
//! those of the version it replaced: a store with an [`IndexTerms`] source
//! writes it instead of the changes when they agree with its metadata,
//! and replay recalculates them ([`recalc`]). Builds before it refuse such
//! a record at replay ("unknown index blob version 2") rather than replay
//! it without its entries; a store shut down cleanly replays nothing.
//!
//! # Retention under journal compaction
//!
//! [`changes_to_retain`]: when compaction drops a replaced record, it keeps
//! only the changes whose ledger index entry still carries the record's SQN
//! (not superseded by a later add or remove of the same field, term and key);
//! if none is left the record is dropped entirely. Key deltas therefore do
//! not pile up forever (leveled #306).
//!
//! A store given an [`IndexTerms`] source (`Config::index_terms`) keeps no
//! key deltas at all: a rebuild recalculates each object's changes from its
//! metadata instead ([`recalc`]).
//!
//! # Queries
//!
//! [`query`] and [`count`] scan the ledger only (never the journal) with
//! `Ledger::range` between bounds built from encoded terms, skipping
//! tombstoned and expired entries. Results come in (term, key) order.
//! Pseudo-fields: `$bucket` (every live object key of the bucket; start and
//! end ignored) and `$key` (object keys in `[start, end]`). As in Riak,
//! `return_terms` applies to range queries only (ignored for equality and
//! `$bucket`), and `term_regex` applies to `_bin` terms (and to the object
//! key for `$key` / `$bucket`); it is an error on `_int` fields.
//!
//! A page of `max_results` results carries a continuation when it is full:
//!
//! ```text
//! continuation := base64(standard, padded) of
//!                 version:u8 (=1) crc:u32 query_tag:u32 term_len:u32 term key_len:u32 key
//! crc          := crc32c of everything after the crc field
//! query_tag    := low 32 bits of xxh3 of the scanned prefix (bucket, field)
//! ```
//!
//! `term` is the stored term of the page's last result (empty for
//! `$bucket`/`$key`), `key` its object key. The next page starts right after
//! that (term, key).
//!
//! # Cursors (`start_after`)
//!
//! [`IndexQuery::start_after`] is the backend-independent way to resume:
//! an [`IndexCursor`] (term, key) in the form results come back in (decimal
//! text for `_int`), meaning "only results strictly after (term, key) in the
//! query's order": numeric term then key for `_int`, bytewise term then key
//! for `_bin`, key alone for `$key` and `$bucket` (the cursor's term is
//! ignored there). In an equality query an empty cursor term stands for the
//! query's term. The scan starts at [`seek_after`] (the smallest ledger key
//! after the cursor), so skipping costs a seek, not a scan. It combines with
//! `max_results` (a full page still carries a continuation) and filters
//! (`term_regex`) as any page does; together with `continuation` it is
//! `InvalidInput`. This is what a cluster coordinator sends every vnode so
//! that each returns only its next page after the last result it merged.
//!
//! # Files
//!
//! This file holds the change and field types and the term encoding;
//! `changes` the write side (journal blob, ledger entries, replay,
//! retention), `recalc` the entries a rebuild derives from object metadata,
//! `query` the queries, continuations and cursors.

use crate::codec::DecodeError;
use crate::error::{Error, Result};
use crate::intterm::IntTerm;
use crate::key::{self};
use crate::limits;

mod changes;
mod query;
pub mod recalc;
#[cfg(test)]
mod tests;

pub(crate) use query::{decode_continuation, encode_continuation};

pub use changes::{
    changes_to_retain, decode_changes, encode_changes, entry_key, prepare, replay_entries, Prepared,
};
pub use query::{
    count, query, seek_after, IndexCursor, IndexPage, IndexQuery, IndexResult, BUCKET_FIELD,
    KEY_FIELD,
};
pub use recalc::{IndexTerms, Terms};

/// An index change and its op: the backend crate's types (the engine adds
/// their journal encoding, `op_to_byte` / `op_from_byte`).
pub use basalt_backend::{IndexChange, IndexOp};

/// The journal byte of an [`IndexOp`] (1 add, 2 remove).
fn op_to_byte(op: IndexOp) -> u8 {
    match op {
        IndexOp::Add => 1,
        IndexOp::Remove => 2,
    }
}

/// The [`IndexOp`] of a journal byte.
fn op_from_byte(b: u8) -> Option<IndexOp> {
    match b {
        1 => Some(IndexOp::Add),
        2 => Some(IndexOp::Remove),
        _ => None,
    }
}

/// The type of an index field, from its name's suffix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldKind {
    /// `_bin`: byte-string terms, sorted bytewise.
    Bin,
    /// `_int`: integer terms of any size (`intterm`), sorted numerically.
    Int,
}

/// The kind of `field` (by its `_bin` / `_int` suffix), if it has one.
pub fn field_kind(field: &[u8]) -> Option<FieldKind> {
    if field.ends_with(b"_bin") {
        Some(FieldKind::Bin)
    } else if field.ends_with(b"_int") {
        Some(FieldKind::Int)
    } else {
        None
    }
}

fn show(b: &[u8]) -> String {
    let mut s = key::display_bytes(b);
    if s.len() > 80 {
        let mut cut = 77;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("...");
    }
    s
}

fn invalid(msg: String) -> Error {
    Error::InvalidInput(msg)
}

fn checked_field_kind(field: &[u8]) -> Result<FieldKind> {
    if field.len() > limits::INDEX_FIELD_BYTES_MAX {
        return Err(invalid(format!(
            "index field '{}' is {} bytes; the limit is {} bytes",
            show(field),
            field.len(),
            limits::INDEX_FIELD_BYTES_MAX
        )));
    }
    field_kind(field).ok_or_else(|| {
        invalid(format!(
            "index field '{}' must end in _bin or _int",
            show(field)
        ))
    })
}

/// The 8-byte stored form of an `i64` term (`_int` terms in
/// `i64::MIN + 1 ..= i64::MAX`; the others: [`IntTerm::encode`]).
pub fn int_to_sortable(v: i64) -> [u8; 8] {
    ((v as u64) ^ (1 << 63)).to_be_bytes()
}

fn parse_int(field: &[u8], term: &[u8]) -> Result<IntTerm> {
    IntTerm::parse(term).ok_or_else(|| {
        invalid(format!(
            "index field '{}': term '{}' is not an integer (at most {} digits)",
            show(field),
            show(term),
            limits::INDEX_INT_DIGITS_MAX
        ))
    })
}

/// The stored (ledger) form of `term` for a field of `kind`; `_int` terms
/// must parse as integers (`intterm`; else [`Error::InvalidInput`] naming
/// field and term).
pub fn encode_term(kind: FieldKind, field: &[u8], term: &[u8]) -> Result<Vec<u8>> {
    match kind {
        FieldKind::Bin => Ok(term.to_vec()),
        FieldKind::Int => Ok(parse_int(field, term)?.encode()),
    }
}

/// The user form of a stored term (canonical decimal text for `_int`).
/// Never panics.
pub fn decode_term(kind: FieldKind, stored: &[u8]) -> Result<Vec<u8>, DecodeError> {
    match kind {
        FieldKind::Bin => Ok(stored.to_vec()),
        FieldKind::Int => IntTerm::decode(stored)
            .map(|t| t.to_decimal().into_bytes())
            .map_err(DecodeError),
    }
}
