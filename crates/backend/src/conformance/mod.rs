//! The conformance suite every [`Backend`] must pass (feature `conformance`).
//!
//! An implementation's tests supply a [`Factory`] and call each check (or
//! [`run_all`]). What is checked:
//!
//! * [`model`]: random put / delete / get / head / fold_keys / list_buckets
//!   (and close + reopen for persistent backends) against a `BTreeMap`
//!   model; a hit of `get_cached` / `head_cached` equals `get` / `head`.
//!   The seed is printed; `BASALT_TEST_SEED` replays one;
//!   `BASALT_LONG_TESTS=1` runs more cases.
//! * [`indexes`]: 2i equality, range, `_int` order, `return_terms`, regex,
//!   paging equal to the unpaged answer, removals, `$key`/`$bucket`; or a
//!   typed `NotSupported` without the capability.
//! * `index_cursor_*`: paging by [`IndexQuery::start_after`]:
//!   [`index_cursor_paging`] (a `_bin` range with repeated terms, regex),
//!   [`index_cursor_int_order`] (numeric order, negatives),
//!   [`index_cursor_keys`] (`$key`, `$bucket`), [`index_cursor_equality`],
//!   [`index_cursor_beyond_end`], [`index_cursor_with_continuation`] (an
//!   error) and [`index_cursor_model`] (a property test against a
//!   `BTreeMap`); without the capability, a cursor query is `NotSupported`.
//! * [`fold_filters`]: head folds with segment, last-modified and
//!   `max_objects` filters against the model; or `NotSupported`.
//! * [`snapshots`]: a snapshot does not see later writes and deletes.
//! * [`corruption`] (persistent backends): bytes flipped in data files never
//!   come back as a wrong value; errors are typed; most keys still read.
//! * [`validation`] and [`capabilities_honest`]: bad input is
//!   `InvalidInput`; a missing capability is `NotSupported`.
//!
//! One file per behaviour (named after its check); this file holds the
//! [`Factory`], the helpers the checks share, and [`run_all`].

use crate::*;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

mod corruption;
mod fold_filters;
mod index_cursor;
mod index_cursor_model;
mod indexes;
mod model;
mod snapshots;
mod validation;

pub use corruption::corruption;
pub use fold_filters::fold_filters;
pub use index_cursor::{
    index_cursor_beyond_end, index_cursor_equality, index_cursor_int_order, index_cursor_keys,
    index_cursor_paging, index_cursor_with_continuation,
};
pub use index_cursor_model::index_cursor_model;
pub use indexes::indexes;
pub use model::model;
pub use snapshots::snapshots;
pub use validation::{capabilities_honest, validation};

/// How the suite opens the backend under test.
pub trait Factory {
    /// The backend's name.
    fn name(&self) -> &'static str;
    /// True if data survives close + reopen.
    fn persistent(&self) -> bool;
    /// Opens (creating if new) the backend in `dir`, with small test sizes.
    fn open(&self, dir: &Path) -> Result<Box<dyn Backend>>;
    /// The files of `dir` holding values or keys (the corruption targets).
    fn data_files(&self, dir: &Path) -> Vec<PathBuf>;
}

fn seed() -> u64 {
    std::env::var("BASALT_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5EED_BA5A)
}

fn long() -> bool {
    std::env::var("BASALT_LONG_TESTS").is_ok_and(|v| v == "1")
}

fn tempdir() -> tempfile::TempDir {
    tempfile::tempdir().expect("tempdir")
}

fn put(b: &dyn Backend, bucket: &[u8], key: &[u8], value: &[u8]) {
    b.put(bucket, key, value, b"meta", &WriteOptions::default())
        .expect("put");
}

fn keys_of(b: &dyn Backend, bucket: &[u8], range: Option<&KeyRange>) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    b.fold_keys(bucket, range, &mut |k| {
        out.push(k.to_vec());
        ControlFlow::Continue(())
    })
    .expect("fold_keys");
    out
}

type Model = BTreeMap<(Vec<u8>, Vec<u8>), (Vec<u8>, Vec<u8>)>;

fn check_fold_keys(b: &dyn Backend, model: &Model, bucket: &[u8], ctx: &str) {
    let mut got = keys_of(b, bucket, None);
    let want: Vec<Vec<u8>> = model
        .keys()
        .filter(|(mb, _)| mb == bucket)
        .map(|(_, k)| k.clone())
        .collect();
    if b.capabilities().ordered_keys {
        assert_eq!(got, want, "{ctx}: fold_keys order/content");
    } else {
        got.sort();
        assert_eq!(got, want, "{ctx}: fold_keys content");
    }
}

/// Every check above.
pub fn run_all(f: &dyn Factory) {
    model(f);
    indexes(f);
    index_cursor_paging(f);
    index_cursor_int_order(f);
    index_cursor_keys(f);
    index_cursor_equality(f);
    index_cursor_beyond_end(f);
    index_cursor_with_continuation(f);
    index_cursor_model(f);
    fold_filters(f);
    snapshots(f);
    corruption(f);
    validation(f);
    capabilities_honest(f);
}
