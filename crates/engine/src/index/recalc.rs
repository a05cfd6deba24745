//! Index entries recalculated from object metadata (leveled's `recalc`
//! reload strategy), instead of retained as key deltas.
//!
//! A write's journal blob holds only its *diffs* (the terms it added and
//! removed against the version it replaced). Without more, a ledger
//! rebuilt from the journal needs every diff whose entry is still current,
//! so journal compaction keeps a replaced record's diffs as a key delta
//! ([`super::changes_to_retain`]): under a 2i load every replaced object
//! leaves one, and a punch pass, which cannot cut a record in place, frees
//! little (`docs/engine.md`, journal compaction).
//!
//! When the application can read an object's whole term set from the
//! metadata it stores with it ([`IndexTerms`], given in
//! `Config::index_terms`; a Riak object's sibling metadata carries its
//! indexes), none of that is needed:
//!
//! - **Compaction** drops replaced records and key deltas outright.
//! - **A rebuild from the journal** (an empty ledger at open: `repair`, a
//!   backup's first open) replays every record in SQN order and derives
//!   each put's or delete's changes from the terms of the version the
//!   rebuilt ledger holds for its key so far ([`recalc_entries`]): add
//!   every term of the new version, remove every term of the previous one
//!   that the new one lacks. By induction a key's entries are then the
//!   terms of its newest surviving version, whichever older versions
//!   compaction dropped; a delete (or a put compaction rewrote as a
//!   tombstone) removes the previous version's terms. Key-delta records
//!   left from before are ignored: replayed as diffs they could bring back
//!   a term whose removal compaction dropped.
//! - **Replay after a crash** (from the ledger's persisted SQN) uses a
//!   record's blob when it holds the diffs: those records are never
//!   compacted, and their diffs were made against the versions the
//!   persisted ledger holds.
//! - **Writes** ([`recalculable`]): a put whose diffs agree with its own
//!   metadata's terms (each added term among them, no removed one) carries
//!   the one-byte [`RECALC_BLOB`] instead of its diffs (~120 bytes a
//!   record under the 2i seed load, 1.5 % of the bytes written at 8 KB),
//!   and replay after a crash recalculates it as a rebuild does, against
//!   the version the persisted ledger (plus the records replayed before
//!   it) holds: by the induction above that version's entries are its
//!   terms. A put whose diffs do not agree (an application whose changes
//!   are not its metadata's), whose metadata the source cannot read, and
//!   every delete keep their diffs. The store's [`MARKER`] is written
//!   before the first such record, so a rebuild without the source is
//!   refused as below; a build from before the blob existed refuses the
//!   record at replay ("unknown index blob version 2") rather than replay
//!   it without its entries, and a store shut down cleanly replays none,
//!   so it still opens in such a build.
//!
//! Once compaction has dropped diffs, only a rebuild that recalculates
//! gives the right entries, so before its first compaction run
//! ([`Mark::ensure`], from `journal::Liveness::before_run`; scoring does
//! not write it) the store records the mode in its directory
//! ([`MARKER`], holding the source's name); from then on a rebuild without
//! the same source is refused (`Error::InvalidInput`) before it deletes
//! anything. Opening a store never writes the marker (a node refused at
//! start leaves its vnode directories as they were).

use super::changes::{entry_value, keyed, replay_entries};
use super::{IndexChange, IndexOp};
use crate::entry::{LedgerValue, Status};
use crate::error::{Error, Result};
use crate::journal::{JournalRecord, RecordKind};
use crate::key;
use crate::ledger::Ledger;
use std::path::Path;
use std::sync::Arc;

/// The file in a store's directory (and in its backups) naming the term
/// source of a store that recalculates its index entries.
pub const MARKER: &str = "INDEX_RECALC";

pub use super::changes::RECALC_BLOB;

/// Whether `blob` is [`RECALC_BLOB`].
pub fn is_recalc_blob(blob: &[u8]) -> bool {
    blob == RECALC_BLOB
}

/// Whether a put with `metadata` and index `changes` may carry
/// [`RECALC_BLOB`] instead of its changes: it has some, `source` reads
/// the metadata's terms, and the changes agree with them (every added
/// (field, term) among them, no removed one). Replay then derives the same
/// entries: every term of the new version, minus none it had, and the
/// removal of the previous version's others.
pub fn recalculable(source: &IndexTerms, metadata: &[u8], changes: &[IndexChange]) -> bool {
    if changes.is_empty() {
        return false;
    }
    let Ok(terms) = source.terms(metadata) else {
        return false;
    };
    changes.iter().all(|c| {
        let present = terms
            .binary_search_by(|(f, t)| {
                (f.as_slice(), t.as_slice()).cmp(&(&c.field[..], &c.term[..]))
            })
            .is_ok();
        present == (c.op == IndexOp::Add)
    })
}

/// The error of a crash replay that meets a [`RECALC_BLOB`] record in a
/// store opened without a term source.
pub fn needs_source(dir: &Path, sqn: u64) -> Error {
    Error::InvalidInput(format!(
        "{}: journal record sqn {sqn} (not yet in the ledger) carries no index changes: \
         they are recalculated from its object's metadata ({MARKER}), so replaying it needs \
         the store's 2i term source. Open it as its owner does (a node's vnode: `basalt kv` \
         reads the marker)",
        dir.display()
    ))
}

/// An object's 2i terms, sorted and without duplicates: `(field, term)`,
/// the term as the application gives it (decimal text for `_int`).
pub type Terms = Vec<(Vec<u8>, Vec<u8>)>;

type TermsFn = dyn Fn(&[u8]) -> std::result::Result<Terms, String> + Send + Sync;

/// Where a store reads an object's whole 2i term set: a function of the
/// metadata stored with the object, and a name for it (kept in the store's
/// [`MARKER`], so that a store is always rebuilt with the same source).
#[derive(Clone)]
pub struct IndexTerms {
    name: String,
    terms: Arc<TermsFn>,
}

impl IndexTerms {
    /// A term source named `name` (e.g. `"riak-object 1"`).
    pub fn new(
        name: impl Into<String>,
        terms: impl Fn(&[u8]) -> std::result::Result<Terms, String> + Send + Sync + 'static,
    ) -> Self {
        IndexTerms {
            name: name.into(),
            terms: Arc::new(terms),
        }
    }

    /// The source's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The terms of an object with this metadata.
    pub fn terms(&self, metadata: &[u8]) -> std::result::Result<Terms, String> {
        (self.terms)(metadata)
    }
}

impl std::fmt::Debug for IndexTerms {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IndexTerms")
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

/// The term source named in `dir`'s [`MARKER`], if the store has one.
pub fn marker_source(dir: &Path) -> Result<Option<String>> {
    let path = dir.join(MARKER);
    match std::fs::read_to_string(&path) {
        Ok(s) => Ok(Some(s.trim().to_string())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::io("read", &path, e)),
    }
}

/// Records the source named `name` as the store's (once; an existing
/// marker naming another source is an error).
pub fn write_marker(dir: &Path, name: &str) -> Result<()> {
    match marker_source(dir)? {
        Some(found) if found == name => Ok(()),
        Some(found) => Err(mismatch(dir, &found, Some(name))),
        None => crate::fsutil::write_atomic(&dir.join(MARKER), format!("{name}\n").as_bytes()),
    }
}

/// Writes a store's [`MARKER`] before its compaction first drops a
/// record's index changes (once per open store).
#[derive(Debug)]
pub struct Mark {
    dir: std::path::PathBuf,
    name: String,
    done: std::sync::atomic::AtomicBool,
}

impl Mark {
    /// The mark of the store in `dir` recalculating with `terms`.
    pub fn new(dir: &Path, terms: &IndexTerms) -> Self {
        Mark {
            dir: dir.to_path_buf(),
            name: terms.name().to_string(),
            done: Default::default(),
        }
    }

    /// Makes sure the marker is on disk (durably) before the caller drops
    /// index changes a rebuild without the source would need.
    pub fn ensure(&self) -> Result<()> {
        use std::sync::atomic::Ordering;
        if self.done.load(Ordering::Acquire) {
            return Ok(());
        }
        write_marker(&self.dir, &self.name)?;
        self.done.store(true, Ordering::Release);
        Ok(())
    }
}

/// Checks that a ledger rebuilt from the journal of the store in `dir`
/// would get its index entries right with `terms`: a store whose marker
/// names a source needs that source.
pub fn check_rebuild(dir: &Path, terms: Option<&IndexTerms>) -> Result<()> {
    match (marker_source(dir)?, terms) {
        (None, _) => Ok(()),
        (Some(found), Some(t)) if found == t.name() => Ok(()),
        (Some(found), t) => Err(mismatch(dir, &found, t.map(IndexTerms::name))),
    }
}

fn mismatch(dir: &Path, found: &str, given: Option<&str>) -> Error {
    let given = given.map_or_else(|| "none".to_string(), |g| format!("'{g}'"));
    Error::InvalidInput(format!(
        "{} recalculates its 2i entries from object metadata ('{found}' in {MARKER}), \
         so its journal no longer holds every index change; rebuilding its ledger needs \
         that term source (given: {given}). Open or repair it as its owner does \
         (a node's vnode: `basalt kv repair` reads the marker)",
        dir.display()
    ))
}

/// What [`recalc_entries`] could not derive and replayed from the blob.
#[derive(Debug, Default)]
pub struct Fallback {
    /// Records whose metadata the source could not read (or whose terms
    /// were invalid): their blob's diffs were used instead.
    pub records: u64,
    /// [`RECALC_BLOB`] records whose terms (or their previous version's)
    /// could not be read: they carry no diffs to fall back on, so their
    /// index entries (or the removals of the previous version's) are
    /// skipped. Their own metadata was read when they were written, so
    /// only a changed term source, damage the checksums missed or a
    /// previous version whose metadata the source never could read gets
    /// here.
    pub skipped: u64,
}

/// The ledger index entries of `rec` in a rebuild that recalculates (see
/// the module docs): called before `rec`'s own object entry is inserted,
/// with the ledger holding every earlier record. Key deltas give none. A
/// record whose metadata the source cannot read falls back to its blob and
/// is counted in `fallback`.
pub fn recalc_entries(
    ledger: &Ledger,
    source: &IndexTerms,
    rec: &JournalRecord,
    fallback: &mut Fallback,
) -> Result<Vec<(Vec<u8>, LedgerValue)>> {
    let new_terms = match rec.kind {
        RecordKind::KeyDelta => return Ok(Vec::new()),
        RecordKind::Delete => Ok(Vec::new()),
        RecordKind::Put => source.terms(&rec.metadata),
    };
    let prev = ledger.get(&rec.key)?;
    if is_recalc_blob(&rec.index) && prev.as_ref().is_some_and(|v| v.sqn >= rec.sqn) {
        // The ledger already holds this version or a newer one, and with
        // it the entries of that version's terms: nothing to add.
        return Ok(Vec::new());
    }
    let prev_terms = match &prev {
        // Not the previous version (replay runs in SQN order): leave the
        // record to its blob.
        Some(v) if v.sqn >= rec.sqn => Err("a newer version is already replayed".into()),
        Some(v) if v.status == Status::Active => source.terms(&v.metadata),
        _ => Ok(Vec::new()),
    };
    let (new_terms, prev_terms) = match (new_terms, prev_terms) {
        (Ok(n), Ok(p)) => (n, p),
        // A record without its changes whose previous version's metadata
        // cannot be read: its own terms are still known (they were read
        // when it was written), only which of the previous version's to
        // remove is not.
        (Ok(n), Err(why)) if is_recalc_blob(&rec.index) => {
            note_skipped(rec, &format!("previous version: {why}"), fallback);
            (n, Vec::new())
        }
        (Err(why), _) | (_, Err(why)) => return blob_fallback(rec, &why, fallback),
    };
    let mut changes: Vec<IndexChange> = Vec::with_capacity(new_terms.len() + prev_terms.len());
    for (field, term) in &prev_terms {
        if !new_terms.iter().any(|(f, t)| f == field && t == term) {
            changes.push(IndexChange::remove(field.clone(), term.clone()));
        }
    }
    // Every term of the new version, not only the added ones: its entries
    // then carry its SQN whatever the rebuild saw before.
    for (field, term) in &new_terms {
        changes.push(IndexChange::add(field.clone(), term.clone()));
    }
    let (bucket, key) = match key::decode_object(&rec.key) {
        Ok(bk) => bk,
        Err(e) => return blob_fallback(rec, &e.to_string(), fallback),
    };
    let entries = match keyed(&bucket, &key, &changes) {
        Ok(m) => m,
        Err(e) => return blob_fallback(rec, &e.to_string(), fallback),
    };
    Ok(entries
        .into_iter()
        .map(|(k, op): (Vec<u8>, IndexOp)| {
            let v = entry_value(op, rec.sqn, rec.expires_at, rec.last_modified_us);
            (k, v)
        })
        .collect())
}

fn blob_fallback(
    rec: &JournalRecord,
    why: &str,
    fallback: &mut Fallback,
) -> Result<Vec<(Vec<u8>, LedgerValue)>> {
    if is_recalc_blob(&rec.index) {
        note_skipped(rec, why, fallback);
        return Ok(Vec::new());
    }
    if fallback.records < 10 {
        tracing::warn!(target: "basalt::store", sqn = rec.sqn, reason = why, "I0024 could not recalculate a record's 2i terms from its metadata while rebuilding the ledger; replaying the changes it was written with");
    }
    fallback.records += 1;
    replay_entries(rec)
}

/// Counts (and logs, the first few) a record without its changes whose
/// index entries replay could not derive in full.
fn note_skipped(rec: &JournalRecord, why: &str, fallback: &mut Fallback) {
    if fallback.skipped < 10 {
        tracing::error!(target: "basalt::store", sqn = rec.sqn, reason = why, "I0025 could not recalculate a record's 2i changes from the metadata while replaying the journal, and it carries none to fall back on: the entries that depend on the unreadable metadata are skipped");
    }
    fallback.skipped += 1;
}
