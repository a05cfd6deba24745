//! Conformance: head folds with segment, last-modified and `max_objects`
//! filters against the model ([`fold_filters`]); or `NotSupported`.

use super::{tempdir, Factory};
use crate::{segment_of, BackendError, Capability, FoldOptions, TreeSize, WriteOptions};
use std::ops::ControlFlow;

/// Head folds with filters against a model, or `NotSupported`.
pub fn fold_filters(f: &dyn Factory) {
    let dir = tempdir();
    let b = f.open(dir.path()).expect("open");
    if !b.capabilities().fold_heads {
        let e = b
            .fold_heads(None, None, &FoldOptions::default(), &mut |_, _, _| {
                ControlFlow::Continue(())
            })
            .expect_err("fold_heads without the capability");
        assert!(
            matches!(
                e,
                BackendError::NotSupported {
                    capability: Capability::FoldHeads,
                    ..
                }
            ),
            "{e}"
        );
        return;
    }
    let mut model = Vec::new();
    for i in 0..200u64 {
        let bucket: &[u8] = if i % 2 == 0 { b"even" } else { b"odd" };
        let key = format!("key{i:04}").into_bytes();
        let opts = WriteOptions {
            last_modified_us: Some(1_000_000 + i * 10),
            ..WriteOptions::default()
        };
        b.put(bucket, &key, &i.to_le_bytes(), b"", &opts)
            .expect("put");
        model.push((bucket.to_vec(), key, 1_000_000 + i * 10));
    }
    let fold = |bucket: Option<&[u8]>, o: &FoldOptions| {
        let mut got = Vec::new();
        let out = b
            .fold_heads(bucket, None, o, &mut |bb, k, h| {
                got.push((bb.to_vec(), k.to_vec(), h.last_modified_us));
                ControlFlow::Continue(())
            })
            .expect("fold_heads");
        got.sort();
        (got, out)
    };
    let mut sorted = model.clone();
    sorted.sort();
    let (all, out) = fold(None, &FoldOptions::default());
    assert_eq!(all, sorted);
    assert!(out.complete);
    let lo = 1_000_000 + 50 * 10;
    let hi = 1_000_000 + 99 * 10;
    let (got, _) = fold(
        None,
        &FoldOptions {
            modified_range: Some((lo, hi)),
            ..FoldOptions::default()
        },
    );
    let want: Vec<_> = sorted
        .iter()
        .filter(|(_, _, t)| *t >= lo && *t <= hi)
        .cloned()
        .collect();
    assert_eq!(got, want, "modified range");
    let size = TreeSize::XXSmall;
    let ids: Vec<u32> = model
        .iter()
        .take(5)
        .map(|(bb, k, _)| segment_of(bb, k, size))
        .collect();
    let (got, _) = fold(
        None,
        &FoldOptions {
            segments: Some((size, ids.clone())),
            ..FoldOptions::default()
        },
    );
    let want: Vec<_> = sorted
        .iter()
        .filter(|(bb, k, _)| ids.contains(&segment_of(bb, k, size)))
        .cloned()
        .collect();
    assert_eq!(got, want, "segments");
    let (got, out) = fold(
        Some(b"odd"),
        &FoldOptions {
            max_objects: Some(7),
            journal_check: true,
            ..FoldOptions::default()
        },
    );
    assert_eq!(got.len(), 7);
    assert!(!out.complete);
    let (got, out) = fold(
        Some(b"odd"),
        &FoldOptions {
            journal_check: true,
            ..FoldOptions::default()
        },
    );
    assert_eq!((got.len(), out.missing_in_journal), (100, 0));
    b.close().expect("close");
}
