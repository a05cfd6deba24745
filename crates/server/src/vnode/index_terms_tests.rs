//! Tests of the vnode's 2i term source (`super::index_terms`): it reads
//! from stored metadata the set the write path diffs, so that a leveled
//! vnode journals its 2i puts without their changes.

use super::*;
use crate::object::vclock::VClock;
use crate::object::Content;

fn sibling(terms: &[(&str, &str)], deleted: bool) -> Content {
    Content {
        value: b"v".to_vec(),
        value_len: 1,
        indexes: terms
            .iter()
            .map(|(f, t)| (f.as_bytes().to_vec(), t.as_bytes().to_vec()))
            .collect(),
        deleted,
        ..Content::default()
    }
}

/// An object of `contents` with a one-event clock.
fn object(contents: Vec<Content>) -> RiakObject {
    let mut vclock = VClock::new();
    vclock.increment(b"a", 1);
    RiakObject { vclock, contents }
}

/// The store's term source reads, from the stored metadata alone, the
/// set the write path diffs: every live sibling's terms, sorted and
/// deduplicated, none of a tombstone's.
#[test]
fn the_term_source_reads_what_writes_diff() {
    let o = object(vec![
        sibling(&[("b_bin", "y"), ("a_int", "7")], false),
        sibling(&[("b_bin", "y"), ("c_bin", "z")], false),
        sibling(&[("gone_bin", "x")], true),
    ]);
    let source = index_terms();
    assert_eq!(source.name(), INDEX_TERMS_SOURCE);
    let terms = source
        .terms(&o.encode_metadata())
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(terms, o.index_entries());
    assert_eq!(terms.len(), 3, "{terms:?}");
    let e = source.terms(b"\x09not metadata").unwrap_err();
    assert!(e.contains("Riak object metadata"), "{e}");
}

/// The changes a vnode's write diffs agree with what the term source
/// reads from the metadata it stores, so a leveled vnode journals its
/// 2i puts without them (`basalt_engine::index::recalc::RECALC_BLOB`):
/// if the two ever drifted apart, the puts would silently carry their
/// changes again and this count would fall.
#[test]
fn a_vnodes_2i_puts_are_journalled_without_their_changes() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let config = basalt_backends::BackendConfig {
        index_terms: Some(index_terms()),
        ..Default::default()
    };
    let st = test_state_with("leveled", dir.path(), false, &config);
    let first = object(vec![sibling(&[("b_bin", "y"), ("a_int", "7")], false)]);
    let second = object(vec![
        sibling(&[("b_bin", "z")], false),
        sibling(&[("b_bin", "z"), ("c_bin", "w")], false),
        sibling(&[("gone_bin", "x")], true),
    ]);
    let plain = object(vec![sibling(&[], false)]);
    let write = |old: Option<&RiakObject>, new: &RiakObject| {
        st.write(b"b", b"k", old, new)
            .unwrap_or_else(|e| panic!("{e}"));
    };
    write(None, &first);
    write(Some(&first), &second);
    write(Some(&second), &second); // no change: no blob at all
    write(None, &plain);
    let stats = st.backend.stats().unwrap_or_else(|e| panic!("{e}"));
    let recalculated = stats
        .counters
        .iter()
        .find(|(n, _)| n.as_str() == "index_changes_recalculated")
        .map(|(_, v)| *v);
    assert_eq!(recalculated, Some(2), "{:?}", stats.counters);
}
