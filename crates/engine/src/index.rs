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
//! change := op:u8 (1 add, 2 remove) field_len:u32 field term_len:u32 term
//! ```
//!
//! Integers little-endian; `term` is the term as the user gave it (decimal
//! text for `_int`). Replay re-derives the ledger entries from it. A
//! `RecordKind::KeyDelta` record carries only this blob (no object entry).
//!
//! # Retention under journal compaction
//!
//! [`changes_to_retain`]: when compaction drops a replaced record, it keeps
//! only the changes whose ledger index entry still carries the record's SQN
//! (not superseded by a later add or remove of the same field, term and key);
//! if none is left the record is dropped entirely. Key deltas therefore do
//! not pile up forever (leveled #306).
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

use crate::codec::{crc, DecodeError, Encode, Reader};
use crate::config::Config;
use crate::entry::{LedgerValue, Status};
use crate::error::{Error, Result};
use crate::intterm::IntTerm;
use crate::journal::JournalRecord;
use crate::key::{self, KeyKind};
use crate::ledger::Ledger;
use crate::limits;
use base64::Engine as _;
use std::collections::BTreeMap;
use std::path::Path;

/// Adds or removes an index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IndexOp {
    /// Adds (field, term) → object key.
    Add,
    /// Removes (field, term) → object key.
    Remove,
}

impl IndexOp {
    fn to_byte(self) -> u8 {
        match self {
            IndexOp::Add => 1,
            IndexOp::Remove => 2,
        }
    }

    fn from_byte(b: u8) -> Option<IndexOp> {
        match b {
            1 => Some(IndexOp::Add),
            2 => Some(IndexOp::Remove),
            _ => None,
        }
    }
}

/// One secondary-index change carried by a put or delete.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IndexChange {
    /// Add or remove.
    pub op: IndexOp,
    /// Field name, ending in `_bin` or `_int`.
    pub field: Vec<u8>,
    /// The term as given: bytes for `_bin`, decimal integer text for `_int`.
    pub term: Vec<u8>,
}

impl IndexChange {
    /// An `Add` change.
    pub fn add(field: impl Into<Vec<u8>>, term: impl Into<Vec<u8>>) -> Self {
        IndexChange {
            op: IndexOp::Add,
            field: field.into(),
            term: term.into(),
        }
    }

    /// A `Remove` change.
    pub fn remove(field: impl Into<Vec<u8>>, term: impl Into<Vec<u8>>) -> Self {
        IndexChange {
            op: IndexOp::Remove,
            field: field.into(),
            term: term.into(),
        }
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

const BLOB_VERSION: u8 = 1;
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
        out.put_u8(c.op.to_byte());
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
    if version != BLOB_VERSION {
        return Err(DecodeError(format!("unknown index blob version {version}")));
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
        let op = IndexOp::from_byte(op_b)
            .ok_or_else(|| DecodeError(format!("unknown index op {op_b}")))?;
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

fn entry_value(op: IndexOp, sqn: u64, expires_at: u64, last_modified_us: u64) -> LedgerValue {
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

fn keyed(bucket: &[u8], key: &[u8], changes: &[IndexChange]) -> Result<BTreeMap<Vec<u8>, IndexOp>> {
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

// ---------------------------------------------------------------- queries

/// A secondary-index query (Riak's `RpbIndexReq`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexQuery {
    /// The bucket.
    pub bucket: Vec<u8>,
    /// `..._bin`, `..._int`, `$bucket` or `$key`.
    pub field: Vec<u8>,
    /// First term (inclusive); the term for an equality query.
    pub start: Vec<u8>,
    /// Last term (inclusive); `None` = equality on `start`.
    pub end: Option<Vec<u8>>,
    /// Return each result's term (range queries and `$key` only, as Riak).
    pub return_terms: bool,
    /// Keep only terms matching this regular expression (`_bin`, `$key`, `$bucket`).
    pub term_regex: Option<String>,
    /// Page size; a full page carries a continuation.
    pub max_results: Option<u32>,
    /// Resume after the page that returned this continuation.
    pub continuation: Option<String>,
    /// Return only results strictly after this (term, key) in the query's
    /// order: a backend-independent alternative to `continuation` (setting
    /// both is `InvalidInput`). See the module docs, "Cursors".
    pub start_after: Option<IndexCursor>,
}

/// A position in a query's result order, given as the caller sees results:
/// `term` is the user form (decimal text for `_int`, bytes for `_bin`;
/// ignored for `$key` and `$bucket`, which order by key alone), `key` the
/// object key. An empty `term` in an equality query stands for the query's
/// own term (equality results carry no terms).
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct IndexCursor {
    /// The term (user form).
    pub term: Vec<u8>,
    /// The object key.
    pub key: Vec<u8>,
}

impl IndexCursor {
    /// The cursor after (`term`, `key`).
    pub fn new(term: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        IndexCursor {
            term: term.into(),
            key: key.into(),
        }
    }
}

/// The smallest ledger key strictly after the cursor (`term`, `key`) in a
/// query of `field` (`_bin`, `_int`, `$bucket` or `$key`) on `bucket`;
/// `equality_term` is the query's term when it is an equality query (an
/// empty cursor term then stands for it). A scan from this key returns
/// exactly the entries after the cursor. Errors (`InvalidInput`): an `_int`
/// cursor term that is not an integer, an oversized term or key, a field
/// without a valid suffix.
pub fn seek_after(
    bucket: &[u8],
    field: &[u8],
    equality_term: Option<&[u8]>,
    term: &[u8],
    key: &[u8],
) -> Result<Vec<u8>> {
    if key.len() > limits::KEY_SIZE_BYTES_MAX {
        return Err(invalid(format!(
            "start_after: key is {} bytes; the limit is {} bytes",
            key.len(),
            limits::KEY_SIZE_BYTES_MAX
        )));
    }
    if term.len() > limits::INDEX_TERM_BYTES_CEILING {
        return Err(invalid(format!(
            "start_after: term is {} bytes; the limit is {} bytes",
            term.len(),
            limits::INDEX_TERM_BYTES_CEILING
        )));
    }
    let mut after = match field {
        BUCKET_FIELD | KEY_FIELD => key::object(bucket, key),
        f => {
            let kind = checked_field_kind(f)?;
            let term = match equality_term {
                Some(t) if term.is_empty() => t,
                _ => term,
            };
            let stored = encode_term(kind, f, term).map_err(|_| {
                invalid(format!(
                    "start_after: term '{}' of integer field '{}' is not an integer",
                    show(term),
                    show(f)
                ))
            })?;
            key::encode(KeyKind::Index, &[bucket, f, &stored, key])
        }
    };
    // Every encoded key ends in a component terminator, so the smallest key
    // greater than `after` is `after` followed by 0x00.
    after.push(0);
    Ok(after)
}

impl IndexQuery {
    /// Equality query: entries of `field` whose term is `term`.
    pub fn eq(bucket: &[u8], field: &[u8], term: &[u8]) -> Self {
        IndexQuery {
            bucket: bucket.to_vec(),
            field: field.to_vec(),
            start: term.to_vec(),
            ..IndexQuery::default()
        }
    }

    /// Range query: entries of `field` with `start <= term <= end`.
    pub fn range(bucket: &[u8], field: &[u8], start: &[u8], end: &[u8]) -> Self {
        IndexQuery {
            bucket: bucket.to_vec(),
            field: field.to_vec(),
            start: start.to_vec(),
            end: Some(end.to_vec()),
            ..IndexQuery::default()
        }
    }
}

/// One query result.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct IndexResult {
    /// The term (user form), when `return_terms` applies.
    pub term: Option<Vec<u8>>,
    /// The object key.
    pub key: Vec<u8>,
}

/// One page of query results.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexPage {
    /// Results in (term, key) order.
    pub results: Vec<IndexResult>,
    /// Set when the page holds `max_results` results: pass it back for the next page.
    pub continuation: Option<String>,
}

/// Name of the pseudo-index of every key in a bucket.
pub const BUCKET_FIELD: &[u8] = b"$bucket";
/// Name of the pseudo-index of object keys.
pub const KEY_FIELD: &[u8] = b"$key";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Target {
    Index(FieldKind),
    Bucket,
    Key,
}

struct Plan {
    target: Target,
    /// Every scanned ledger key starts with this.
    prefix: Vec<u8>,
    lo: Vec<u8>,
    hi: Option<Vec<u8>>,
    regex: Option<regex::bytes::Regex>,
    return_terms: bool,
    limit: Option<usize>,
    tag: u32,
}

const CONTINUATION_VERSION: u8 = 1;

fn query_tag(prefix: &[u8]) -> u32 {
    key::hash(prefix) as u32
}

/// Encodes a continuation after (stored term, key) for the query whose
/// scanned prefix has tag `tag`.
pub(crate) fn encode_continuation(tag: u32, term: &[u8], key: &[u8]) -> String {
    let mut body = Vec::with_capacity(16 + term.len() + key.len());
    body.put_u32(tag);
    body.put_bytes32(term);
    body.put_bytes32(key);
    let mut raw = Vec::with_capacity(5 + body.len());
    raw.put_u8(CONTINUATION_VERSION);
    raw.put_u32(crc(&body));
    raw.extend_from_slice(&body);
    base64::engine::general_purpose::STANDARD.encode(raw)
}

/// Decodes a continuation into (stored term, key), checking it belongs to
/// the query with tag `tag`. Errors name the problem; never panics.
pub(crate) fn decode_continuation(c: &str, tag: u32) -> Result<(Vec<u8>, Vec<u8>)> {
    let bad = |why: &str| {
        invalid(format!(
            "continuation '{}' is invalid: {why}",
            show(c.as_bytes())
        ))
    };
    let raw = base64::engine::general_purpose::STANDARD
        .decode(c.as_bytes())
        .map_err(|_| bad("not base64"))?;
    let mut r = Reader::new(&raw);
    let version = r.u8().map_err(|_| bad("too short"))?;
    if version != CONTINUATION_VERSION {
        return Err(bad("unknown version"));
    }
    let sum = r.u32().map_err(|_| bad("too short"))?;
    let body = r.take(r.remaining()).map_err(|_| bad("too short"))?;
    if crc(body) != sum {
        return Err(bad("checksum mismatch"));
    }
    let mut r = Reader::new(body);
    let parsed = (|| -> Result<(u32, Vec<u8>, Vec<u8>), DecodeError> {
        let t = r.u32()?;
        let term = r.bytes32()?.to_vec();
        let key = r.bytes32()?.to_vec();
        Ok((t, term, key))
    })();
    let (t, term, key) = parsed.map_err(|_| bad("truncated"))?;
    if !r.is_empty() {
        return Err(bad("trailing bytes"));
    }
    if t != tag {
        return Err(bad("it belongs to another bucket or field"));
    }
    Ok((term, key))
}

fn plan(q: &IndexQuery) -> Result<Plan> {
    if q.bucket.is_empty() {
        return Err(invalid("index query: bucket must not be empty".into()));
    }
    if q.bucket.len() > limits::KEY_SIZE_BYTES_MAX {
        return Err(invalid(format!(
            "index query: bucket is {} bytes; the limit is {} bytes",
            q.bucket.len(),
            limits::KEY_SIZE_BYTES_MAX
        )));
    }
    let target = match q.field.as_slice() {
        BUCKET_FIELD => Target::Bucket,
        KEY_FIELD => Target::Key,
        f => Target::Index(checked_field_kind(f).map_err(|_| {
            invalid(format!(
                "index field '{}' must end in _bin or _int, or be $bucket or $key",
                show(f)
            ))
        })?),
    };
    let limit = match q.max_results {
        Some(0) => return Err(invalid("max_results must be at least 1".into())),
        Some(n) => Some(n as usize),
        None => None,
    };
    let regex = match &q.term_regex {
        None => None,
        Some(_) if target == Target::Index(FieldKind::Int) => {
            return Err(invalid(format!(
                "term_regex applies to _bin fields only, not to integer field '{}'",
                show(&q.field)
            )))
        }
        Some(re) if re.len() > limits::INDEX_REGEX_BYTES_MAX => {
            return Err(invalid(format!(
                "term_regex of {} bytes exceeds the limit of {} bytes",
                re.len(),
                limits::INDEX_REGEX_BYTES_MAX
            )))
        }
        Some(re) => Some(
            regex::bytes::RegexBuilder::new(re)
                .size_limit(limits::INDEX_REGEX_COMPILED_BYTES_MAX)
                .build()
                .map_err(|e| {
                    invalid(format!(
                        "term_regex '{}' is invalid: {e}",
                        show(re.as_bytes())
                    ))
                })?,
        ),
    };
    let b = q.bucket.as_slice();
    let end = q.end.as_deref().unwrap_or(&q.start);
    let (prefix, lo, hi) = match target {
        Target::Bucket => {
            let p = key::prefix(KeyKind::Object, &[b]);
            let hi = key::prefix_end(&p);
            (p.clone(), p, hi)
        }
        Target::Key => (
            key::prefix(KeyKind::Object, &[b]),
            key::prefix(KeyKind::Object, &[b, &q.start]),
            key::prefix_end(&key::prefix(KeyKind::Object, &[b, end])),
        ),
        Target::Index(kind) => {
            let f = q.field.as_slice();
            let s = encode_term(kind, f, &q.start)?;
            let e = encode_term(kind, f, end)?;
            (
                key::prefix(KeyKind::Index, &[b, f]),
                key::prefix(KeyKind::Index, &[b, f, &s]),
                key::prefix_end(&key::prefix(KeyKind::Index, &[b, f, &e])),
            )
        }
    };
    let tag = query_tag(&prefix);
    let mut lo = lo;
    if let Some(c) = &q.start_after {
        if q.continuation.is_some() {
            return Err(invalid(
                "index query: give either continuation or start_after, not both".into(),
            ));
        }
        let eq_term = q.end.is_none().then_some(q.start.as_slice());
        lo = lo.max(seek_after(b, &q.field, eq_term, &c.term, &c.key)?);
    }
    if let Some(c) = &q.continuation {
        let (term, objkey) = decode_continuation(c, tag)?;
        let mut after = match target {
            Target::Index(_) => key::encode(KeyKind::Index, &[b, &q.field, &term, &objkey]),
            Target::Bucket | Target::Key => key::object(b, &objkey),
        };
        // The smallest key greater than `after`.
        after.push(0);
        lo = lo.max(after);
    }
    let return_terms =
        q.return_terms && q.end.is_some() && matches!(target, Target::Index(_) | Target::Key);
    debug_assert!(lo.starts_with(&prefix));
    Ok(Plan {
        target,
        prefix,
        lo,
        hi,
        regex,
        return_terms,
        limit,
        tag,
    })
}

/// One matching entry: stored term (empty for `$bucket` / `$key`) and key.
struct Hit {
    term: Vec<u8>,
    key: Vec<u8>,
}

/// Scans the plan's range, calling `f` with each live, matching entry until
/// it returns false.
fn scan(
    ledger: &Ledger,
    ledger_dir: &Path,
    plan: &Plan,
    now_secs: u64,
    f: &mut dyn FnMut(Hit) -> Result<bool>,
) -> Result<()> {
    if plan
        .hi
        .as_deref()
        .is_some_and(|hi| hi <= plan.lo.as_slice())
    {
        return Ok(());
    }
    let bad = |k: &[u8], why: &str| {
        Error::corrupt(
            ledger_dir,
            0,
            format!("ledger key {} in an index scan: {why}", show(k)),
        )
    };
    for item in ledger.range(&plan.lo, plan.hi.as_deref()) {
        let (k, v) = item?;
        if v.is_dead(now_secs) {
            continue;
        }
        let rest = k
            .strip_prefix(plan.prefix.as_slice())
            .ok_or_else(|| bad(&k, "outside the scanned prefix"))?;
        let (term, rest) = match plan.target {
            Target::Index(_) => key::split_component(rest).map_err(|e| bad(&k, &e.0))?,
            Target::Bucket | Target::Key => (Vec::new(), rest),
        };
        let (objkey, rest) = key::split_component(rest).map_err(|e| bad(&k, &e.0))?;
        if !rest.is_empty() {
            return Err(bad(&k, "trailing bytes"));
        }
        if let Some(re) = &plan.regex {
            let subject = match plan.target {
                Target::Index(_) => &term,
                Target::Bucket | Target::Key => &objkey,
            };
            if !re.is_match(subject) {
                continue;
            }
        }
        if !f(Hit { term, key: objkey })? {
            break;
        }
    }
    Ok(())
}

/// Runs `q` over the ledger and returns one page of results.
pub fn query(
    ledger: &Ledger,
    ledger_dir: &Path,
    q: &IndexQuery,
    now_secs: u64,
) -> Result<IndexPage> {
    let plan = plan(q)?;
    let mut page = IndexPage::default();
    let mut last: Option<Hit> = None;
    let limit = plan.limit;
    scan(ledger, ledger_dir, &plan, now_secs, &mut |hit| {
        let term = if plan.return_terms {
            Some(match plan.target {
                Target::Index(kind) => decode_term(kind, &hit.term)
                    .map_err(|e| Error::corrupt(ledger_dir, 0, format!("index term: {e}")))?,
                Target::Bucket | Target::Key => hit.key.clone(),
            })
        } else {
            None
        };
        page.results.push(IndexResult {
            term,
            key: hit.key.clone(),
        });
        let full = limit.is_some_and(|n| page.results.len() >= n);
        if full {
            last = Some(hit);
        }
        Ok(!full)
    })?;
    debug_assert!(limit.is_none_or(|n| page.results.len() <= n));
    if let Some(hit) = last {
        page.continuation = Some(encode_continuation(plan.tag, &hit.term, &hit.key));
    }
    Ok(page)
}

/// Counts the entries `q` matches (after its continuation, if any),
/// ignoring `max_results` and `return_terms` (leveled #433's count-only query).
pub fn count(ledger: &Ledger, ledger_dir: &Path, q: &IndexQuery, now_secs: u64) -> Result<u64> {
    let mut plan = plan(q)?;
    plan.limit = None;
    let mut n = 0u64;
    scan(ledger, ledger_dir, &plan, now_secs, &mut |_| {
        n += 1;
        Ok(true)
    })?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn int_encoding_orders_numerically() {
        let vals = [
            i64::MIN + 1,
            -1000,
            -1,
            0,
            1,
            7,
            1000,
            i64::MAX - 1,
            i64::MAX,
        ];
        for w in vals.windows(2) {
            assert!(int_to_sortable(w[0]) < int_to_sortable(w[1]), "{w:?}");
        }
        for v in vals {
            let stored = encode_term(FieldKind::Int, b"f_int", v.to_string().as_bytes()).unwrap();
            assert_eq!(stored, int_to_sortable(v));
        }
        assert_eq!(int_to_sortable(0), [0x80, 0, 0, 0, 0, 0, 0, 0]);
        assert_eq!(
            int_to_sortable(-1),
            [0x7F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF]
        );
    }

    #[test]
    fn term_validation_names_field_and_term() {
        let e = encode_term(FieldKind::Int, b"age_int", b"12x").unwrap_err();
        assert!(matches!(e, Error::InvalidInput(_)));
        let m = e.to_string();
        assert!(m.contains("age_int") && m.contains("12x"), "{m}");
        assert_eq!(
            decode_term(
                FieldKind::Int,
                &encode_term(FieldKind::Int, b"a_int", b"-042").unwrap()
            )
            .unwrap(),
            b"-42"
        );
        assert!(decode_term(FieldKind::Int, b"short").is_err());
        let e = checked_field_kind(b"colour").unwrap_err().to_string();
        assert!(e.contains("colour") && e.contains("_bin"), "{e}");
        assert!(checked_field_kind(&[b'x'; 300]).is_err());
    }

    #[test]
    fn blob_round_trip_and_empty() {
        assert!(encode_changes(&[]).is_empty());
        assert_eq!(decode_changes(&[]).unwrap(), vec![]);
        let changes = vec![
            IndexChange::add("a_bin", &b"x\0y"[..]),
            IndexChange::remove("n_int", "-5"),
        ];
        let blob = encode_changes(&changes);
        assert_eq!(blob[0], BLOB_VERSION);
        assert_eq!(decode_changes(&blob).unwrap(), changes);
        for n in 1..blob.len() {
            assert!(decode_changes(&blob[..n]).is_err(), "truncated at {n}");
        }
        let mut long = blob.clone();
        long.push(0);
        assert!(decode_changes(&long).is_err());
    }

    #[test]
    fn continuation_round_trip_and_garbage() {
        let c = encode_continuation(7, b"term", b"key");
        assert_eq!(
            decode_continuation(&c, 7).unwrap(),
            (b"term".to_vec(), b"key".to_vec())
        );
        assert!(decode_continuation(&c, 8)
            .unwrap_err()
            .to_string()
            .contains("another"));
        for bad in ["", "!!!", "AAAA", "AQAAAAA=", &c[..c.len() - 4]] {
            let e = decode_continuation(bad, 7).unwrap_err();
            assert!(matches!(e, Error::InvalidInput(_)), "{bad}");
            assert!(e.to_string().contains("continuation"), "{e}");
        }
    }

    #[test]
    fn a_cursor_is_the_scan_start() {
        let mut q = IndexQuery::range(b"b", b"n_int", b"-100", b"100");
        q.start_after = Some(IndexCursor::new("-7", "k"));
        let p = plan(&q).unwrap();
        let mut want = entry_key(b"b", b"n_int", &int_to_sortable(-7), b"k");
        want.push(0);
        assert_eq!(p.lo, want, "the scan seeks to the cursor");
        // Before the range: the range's own start.
        q.start_after = Some(IndexCursor::new("-1000", "k"));
        assert_eq!(
            plan(&q).unwrap().lo,
            key::prefix(KeyKind::Index, &[b"b", b"n_int", &int_to_sortable(-100)])
        );
        // Equality: an empty term is the query's term.
        let mut q = IndexQuery::eq(b"b", b"t_bin", b"red");
        q.start_after = Some(IndexCursor::new("", "k1"));
        let mut want = entry_key(b"b", b"t_bin", b"red", b"k1");
        want.push(0);
        assert_eq!(plan(&q).unwrap().lo, want);
        // $key: the term is ignored.
        let mut q = IndexQuery::range(b"b", b"$key", b"a", b"z");
        q.start_after = Some(IndexCursor::new("whatever", "m"));
        let mut want = key::object(b"b", b"m");
        want.push(0);
        assert_eq!(plan(&q).unwrap().lo, want);
        // Not with a continuation; bad integer terms are named.
        q.continuation = Some(encode_continuation(
            query_tag(&plan(&q).unwrap().prefix),
            b"",
            b"m",
        ));
        let e = plan(&q).err().unwrap().to_string();
        assert!(
            e.contains("continuation") && e.contains("start_after"),
            "{e}"
        );
        let mut q = IndexQuery::range(b"b", b"n_int", b"1", b"2");
        q.start_after = Some(IndexCursor::new("x1", "k"));
        let e = plan(&q).err().unwrap();
        assert!(
            matches!(e, Error::InvalidInput(_)) && e.to_string().contains("x1"),
            "{e}"
        );
    }

    proptest! {
        #[test]
        fn int_order_matches(a in any::<i64>(), b in any::<i64>()) {
            prop_assert_eq!(a.cmp(&b), int_to_sortable(a).cmp(&int_to_sortable(b)));
            let text = a.to_string();
            let stored = encode_term(FieldKind::Int, b"f_int", text.as_bytes()).unwrap();
            prop_assert_eq!(decode_term(FieldKind::Int, &stored).unwrap(), text.into_bytes());
        }

        #[test]
        fn blob_round_trips(changes in proptest::collection::vec(
            (any::<bool>(), proptest::collection::vec(any::<u8>(), 0..12), proptest::collection::vec(any::<u8>(), 0..12)),
            0..8)) {
            let changes: Vec<IndexChange> = changes
                .into_iter()
                .map(|(add, field, term)| IndexChange {
                    op: if add { IndexOp::Add } else { IndexOp::Remove },
                    field,
                    term,
                })
                .collect();
            prop_assert_eq!(decode_changes(&encode_changes(&changes)).unwrap(), changes);
        }

        #[test]
        fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..64)) {
            let _ = decode_changes(&bytes);
            let _ = decode_term(FieldKind::Int, &bytes);
            let _ = key::split_component(&bytes);
            let s = base64::engine::general_purpose::STANDARD.encode(&bytes);
            let _ = decode_continuation(&s, 0);
            let _ = decode_continuation(&String::from_utf8_lossy(&bytes), 0);
        }

        #[test]
        fn stored_bin_term_order_is_key_order(t1 in proptest::collection::vec(any::<u8>(), 0..6),
                                              t2 in proptest::collection::vec(any::<u8>(), 0..6),
                                              k1 in proptest::collection::vec(any::<u8>(), 1..4),
                                              k2 in proptest::collection::vec(any::<u8>(), 1..4)) {
            let e1 = entry_key(b"b", b"f_bin", &t1, &k1);
            let e2 = entry_key(b"b", b"f_bin", &t2, &k2);
            prop_assert_eq!((&t1, &k1).cmp(&(&t2, &k2)), e1.cmp(&e2));
        }
    }
}
