//! Conformance: bad input is `InvalidInput` ([`validation`]) and a
//! missing capability is `NotSupported` ([`capabilities_honest`]).

use super::{tempdir, Factory};
use crate::{BackendError, Capability, FoldOptions, KeyRange, WriteOptions};
use std::ops::ControlFlow;

/// Bad input is `InvalidInput`.
pub fn validation(f: &dyn Factory) {
    let dir = tempdir();
    let b = f.open(dir.path()).expect("open");
    for (bucket, key) in [(&b""[..], &b"k"[..]), (b"b", b"")] {
        let e = b
            .put(bucket, key, b"v", b"", &WriteOptions::default())
            .expect_err("empty name");
        assert!(matches!(e, BackendError::InvalidInput(_)), "{e}");
    }
    let big = vec![0u8; 70 * 1024];
    let e = b
        .put(b"b", &big, b"v", b"", &WriteOptions::default())
        .expect_err("huge key");
    assert!(matches!(e, BackendError::InvalidInput(_)), "{e}");
    assert!(matches!(
        b.fold_heads(
            None,
            Some(&KeyRange::new(b"a", b"b")),
            &FoldOptions::default(),
            &mut |_, _, _| ControlFlow::Continue(())
        ),
        Err(BackendError::InvalidInput(_) | BackendError::NotSupported { .. })
    ));
    b.close().expect("close");
    assert!(
        matches!(b.get(b"b", b"k"), Err(BackendError::Closed(_))),
        "get after close"
    );
}

/// Every missing capability answers `NotSupported` naming it.
pub fn capabilities_honest(f: &dyn Factory) {
    let dir = tempdir();
    let b = f.open(dir.path()).expect("open");
    let caps = b.capabilities();
    assert_eq!(b.name(), f.name());
    match b.tictac_tree() {
        Ok(t) => assert!(caps.native_aae && t.starts_with(b"BSLTTIC1")),
        Err(e) => {
            assert!(!caps.native_aae);
            assert!(
                matches!(
                    e,
                    BackendError::NotSupported {
                        capability: Capability::NativeAae,
                        ..
                    }
                ),
                "{e}"
            );
            assert!(e.to_string().contains(f.name()) && e.to_string().contains("native_aae"));
        }
    }
    b.close().expect("close");
}
