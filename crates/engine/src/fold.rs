//! Folds over a [`Snapshot`]: keys, heads, objects and bucket listing.
//!
//! Every fold walks the snapshot's ledger view in key order (newest version
//! of each key, tombstones and expired keys skipped) and calls a callback
//! that may stop it early with [`ControlFlow::Break`].
//!
//! Filters of head folds ([`FoldOptions`]), cheapest first:
//!
//! * **last-modified range** `(low_us, high_us)`, inclusive: SST data blocks
//!   whose `max_last_modified_us` is below `low_us` are not read at all
//!   (the SST index keeps that maximum per block); each remaining entry is
//!   checked. The block skip assumes a key's last-modified time does not go
//!   backwards between versions (true unless callers set
//!   `PutOptions::last_modified_us` out of order): otherwise an older
//!   version in a deeper level could show through a skipped newer one.
//! * **segments** `(size, ids)`: the key's tictac segment
//!   ([`crate::tictac::segment_of_ledger_key`]) is computed from the encoded
//!   key inside the SST iterator, and keys in other segments are skipped
//!   before their value is decoded. Exact: all versions of a key share its
//!   segment.
//! * **max_objects**: stop after this many results ([`FoldOutcome::complete`]
//!   is then false).
//! * **journal_check**: pass only keys whose journal record is present (an
//!   index lookup in the journal, no data read); the others are counted in
//!   [`FoldOutcome::missing_in_journal`].
//!
//! Bucket listing skips from bucket to bucket: after finding a live key in
//! a bucket it seeks to `key::prefix_end(prefix(bucket))`, so it reads about
//! one block per source per bucket instead of every key.
//!
//! Keys are decoded into reused buffers, so a key fold does not allocate per
//! key beyond what the merge iterator does.

use crate::entry::LedgerValue;
use crate::error::{Error, Result};
use crate::key::{self, KeyKind};
use crate::ledger::sst::RangeOptions;
use crate::snapshot::{now_secs, read_object, Snapshot};
use crate::tictac::{segment_of_ledger_key, TreeSize};
use crate::types::{head_of, Head, Object};
pub use crate::types::{KeyRange, KeyRangeExt};
use std::ops::ControlFlow;
use std::sync::Arc;

/// How often (in entries) a fold checks that its snapshot is still live.
const LIVENESS_CHECK_EVERY: u64 = 1024;

/// Filters of a head fold (see the module docs) and how a fold ended: the
/// backend crate's types.
pub use basalt_backend::{FoldOptions, FoldOutcome};

/// Which part of the key space a fold covers.
fn bounds(bucket: Option<&[u8]>, range: Option<&KeyRange>) -> Result<(Vec<u8>, Option<Vec<u8>>)> {
    match (bucket, range) {
        (Some(b), Some(r)) => Ok(r.encoded(b)),
        (Some(b), None) => {
            let start = key::prefix(KeyKind::Object, &[b]);
            let end = key::prefix_end(&start);
            Ok((start, end))
        }
        (None, None) => {
            let start = key::prefix(KeyKind::Object, &[]);
            let end = key::prefix_end(&start);
            Ok((start, end))
        }
        (None, Some(_)) => Err(Error::InvalidInput("a key range needs a bucket".into())),
    }
}

/// Splits an encoded object key into bucket and key, unescaping into the
/// reused buffers. Returns false if the key is not a well-formed object key.
fn split_object_key(lkey: &[u8], bucket: &mut Vec<u8>, key: &mut Vec<u8>) -> bool {
    let Some((&kind, mut rest)) = lkey.split_first() else {
        return false;
    };
    if kind != KeyKind::Object as u8 {
        return false;
    }
    for out in [&mut *bucket, &mut *key] {
        out.clear();
        loop {
            // Copy the run up to the next 0x00 in one go.
            let Some(z) = rest.iter().position(|&b| b == 0) else {
                return false;
            };
            out.extend_from_slice(rest.get(..z).unwrap_or_default());
            match rest.get(z + 1) {
                Some(0x01) => {
                    rest = rest.get(z + 2..).unwrap_or_default();
                    break;
                }
                Some(0xFF) => {
                    out.push(0);
                    rest = rest.get(z + 2..).unwrap_or_default();
                }
                _ => return false,
            }
        }
    }
    rest.is_empty()
}

/// Per-entry callback of [`walk`]: (encoded key, bucket, key, entry).
type EntryFn<'a> = dyn FnMut(&[u8], &[u8], &[u8], LedgerValue) -> Result<ControlFlow<()>> + 'a;

/// The shared loop of every fold: live entries of `[start, end)` that pass
/// the date filter, with their key decoded.
fn walk(
    snap: &Snapshot,
    start: &[u8],
    end: Option<&[u8]>,
    ropts: &RangeOptions,
    modified: Option<(u64, u64)>,
    f: &mut EntryFn<'_>,
) -> Result<bool> {
    snap.check_range(start, end)?;
    let pinned = snap.pinned()?;
    let now = now_secs();
    let (mut b, mut k) = (Vec::new(), Vec::new());
    let mut seen = 0u64;
    for item in pinned.view.range_with(start, end, ropts) {
        seen += 1;
        if seen.is_multiple_of(LIVENESS_CHECK_EVERY) {
            snap.check_live()?;
        }
        let (lkey, v) = item?;
        if v.is_dead(now) {
            continue;
        }
        if let Some((lo, hi)) = modified {
            if v.last_modified_us < lo || v.last_modified_us > hi {
                continue;
            }
        }
        if !split_object_key(&lkey, &mut b, &mut k) {
            return Err(Error::corrupt(
                pinned.dir.join("ledger"),
                0,
                format!("malformed object key {}", key::display_bytes(&lkey)),
            ));
        }
        if f(&lkey, &b, &k, v)?.is_break() {
            return Ok(false);
        }
    }
    snap.check_live()?;
    Ok(true)
}

impl Snapshot {
    /// Calls `f` with each live key of `bucket` (optionally within `range`),
    /// in key order. Returns how the fold ended.
    pub fn fold_keys(
        &self,
        bucket: &[u8],
        range: Option<&KeyRange>,
        mut f: impl FnMut(&[u8]) -> ControlFlow<()>,
    ) -> Result<FoldOutcome> {
        let (start, end) = bounds(Some(bucket), range)?;
        let mut passed = 0u64;
        let complete = walk(
            self,
            &start,
            end.as_deref(),
            &RangeOptions::default(),
            None,
            &mut |_, _, k, _| {
                passed += 1;
                Ok(f(k))
            },
        )?;
        Ok(FoldOutcome {
            passed,
            complete,
            missing_in_journal: 0,
        })
    }

    /// Calls `f(bucket, key, head)` for each live key of `bucket` (or of
    /// every bucket, with `None`), optionally within `range`, that passes
    /// the filters of `opts`.
    pub fn fold_heads(
        &self,
        bucket: Option<&[u8]>,
        range: Option<&KeyRange>,
        opts: &FoldOptions,
        mut f: impl FnMut(&[u8], &[u8], &Head) -> ControlFlow<()>,
    ) -> Result<FoldOutcome> {
        let (start, end) = bounds(bucket, range)?;
        let mut ropts = RangeOptions {
            modified_since_us: opts.modified_range.map_or(0, |(lo, _)| lo),
            key_filter: None,
        };
        if let Some((size, ids)) = &opts.segments {
            let mut ids = ids.clone();
            ids.sort_unstable();
            ids.dedup();
            let size = *size;
            ropts.key_filter = Some(Arc::new(move |k: &[u8]| {
                ids.binary_search(&segment_of_ledger_key(k, size)).is_ok()
            }));
        }
        let pinned = self.pinned()?;
        let mut out = FoldOutcome::default();
        if opts.max_objects == Some(0) {
            return Ok(out);
        }
        let mut limited = false;
        let complete = walk(
            self,
            &start,
            end.as_deref(),
            &ropts,
            opts.modified_range,
            &mut |lkey, b, k, v| {
                if opts.journal_check && !pinned.values.contains(v.sqn, lkey)? {
                    out.missing_in_journal += 1;
                    return Ok(ControlFlow::Continue(()));
                }
                out.passed += 1;
                let flow = f(b, k, &head_of(v));
                if opts.max_objects.is_some_and(|m| out.passed >= m) {
                    limited = true;
                    return Ok(ControlFlow::Break(()));
                }
                Ok(flow)
            },
        )?;
        // Reaching max_objects on the very last key still counts as cut short
        // (the caller cannot tell otherwise without another fold).
        out.complete = complete && !limited;
        Ok(out)
    }

    /// Calls `f(bucket, key, object)` for each live object of `bucket`
    /// (optionally within `range`), reading each value from the journal.
    pub fn fold_objects(
        &self,
        bucket: &[u8],
        range: Option<&KeyRange>,
        mut f: impl FnMut(&[u8], &[u8], Object) -> ControlFlow<()>,
    ) -> Result<FoldOutcome> {
        let (start, end) = bounds(Some(bucket), range)?;
        let pinned = self.pinned()?;
        let mut passed = 0u64;
        let complete = walk(
            self,
            &start,
            end.as_deref(),
            &RangeOptions::default(),
            None,
            &mut |lkey, b, k, v| {
                let obj = read_object(&pinned, lkey, v)?;
                passed += 1;
                Ok(f(b, k, obj))
            },
        )?;
        Ok(FoldOutcome {
            passed,
            complete,
            missing_in_journal: 0,
        })
    }

    /// Every bucket holding at least one live object, sorted.
    pub fn list_buckets(&self) -> Result<Vec<Vec<u8>>> {
        let (mut start, end) = bounds(None, None)?;
        self.check_range(&start, end.as_deref())?;
        let pinned = self.pinned()?;
        let now = now_secs();
        let mut out: Vec<Vec<u8>> = Vec::new();
        let (mut b, mut k) = (Vec::new(), Vec::new());
        let mut seen = 0u64;
        'buckets: loop {
            for item in pinned.view.range(&start, end.as_deref()) {
                seen += 1;
                if seen.is_multiple_of(LIVENESS_CHECK_EVERY) {
                    self.check_live()?;
                }
                let (lkey, v) = item?;
                if v.is_dead(now) {
                    continue;
                }
                if !split_object_key(&lkey, &mut b, &mut k) {
                    return Err(Error::corrupt(
                        pinned.dir.join("ledger"),
                        0,
                        format!("malformed object key {}", key::display_bytes(&lkey)),
                    ));
                }
                debug_assert!(out.last().is_none_or(|last| last.as_slice() < b.as_slice()));
                out.push(b.clone());
                // Seek past every key of this bucket.
                match key::prefix_end(&key::prefix(KeyKind::Object, &[&b])) {
                    Some(next) => {
                        start = next;
                        continue 'buckets;
                    }
                    None => break 'buckets,
                }
            }
            break;
        }
        self.check_live()?;
        Ok(out)
    }
}

/// The tictac tree of every object in the snapshot whose ledger status is
/// active, from its encoded key and `value_hash`. Expiry is ignored, as in
/// the store's incremental updates: TTL expiry is not a change event.
pub(crate) fn build_tree(snap: &Snapshot, size: TreeSize) -> Result<crate::tictac::TicTacTree> {
    let (start, end) = bounds(None, None)?;
    snap.check_range(&start, end.as_deref())?;
    let pinned = snap.pinned()?;
    let mut tree = crate::tictac::TicTacTree::new(size);
    let mut seen = 0u64;
    for item in pinned.view.range(&start, end.as_deref()) {
        seen += 1;
        if seen.is_multiple_of(LIVENESS_CHECK_EVERY) {
            snap.check_live()?;
        }
        let (lkey, v) = item?;
        if v.status == crate::entry::Status::Active {
            tree.toggle_ledger_key(&lkey, v.value_hash);
        }
    }
    Ok(tree)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn split_matches_decode(b in proptest::collection::vec(any::<u8>(), 0..8),
                                k in proptest::collection::vec(any::<u8>(), 0..8)) {
            let enc = key::object(&b, &k);
            let (mut bb, mut kk) = (vec![9u8], vec![9u8]);
            prop_assert!(split_object_key(&enc, &mut bb, &mut kk));
            prop_assert_eq!((bb, kk), (b, k));
        }

        #[test]
        fn split_never_panics(bytes in proptest::collection::vec(any::<u8>(), 0..24)) {
            let (mut bb, mut kk) = (Vec::new(), Vec::new());
            let ok = split_object_key(&bytes, &mut bb, &mut kk);
            prop_assert_eq!(ok, key::decode_object(&bytes).is_ok());
        }
    }

    #[test]
    fn key_range_bound_is_inclusive() {
        let r = KeyRange::new(b"b", b"d");
        let (s, e) = r.encoded(b"x");
        let e = e.unwrap_or_default();
        let inside = |k: &[u8]| {
            let enc = key::object(b"x", k);
            enc >= s && enc < e
        };
        assert!(inside(b"b") && inside(b"c") && inside(b"d"));
        assert!(!inside(b"a") && !inside(b"d\0") && !inside(b"da") && !inside(b"e"));
    }
}
