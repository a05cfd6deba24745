//! Conformance: a snapshot does not see later writes and deletes
//! ([`snapshots`]).

use super::{keys_of, put, tempdir, Factory};
use crate::{KeyRange, WriteOptions};
use std::ops::ControlFlow;

/// A snapshot keeps its view while writes and deletes go on.
pub fn snapshots(f: &dyn Factory) {
    let dir = tempdir();
    let b = f.open(dir.path()).expect("open");
    for i in 0..100u32 {
        put(&*b, b"s", format!("k{i:03}").as_bytes(), &i.to_le_bytes());
    }
    let snap = b.snapshot().expect("snapshot");
    for i in 0..100u32 {
        let k = format!("k{i:03}");
        if i % 2 == 0 {
            b.delete(b"s", k.as_bytes(), &WriteOptions::default())
                .expect("delete");
        } else {
            put(&*b, b"s", k.as_bytes(), b"new");
        }
    }
    put(&*b, b"s2", b"x", b"y");
    for i in 0..100u32 {
        let k = format!("k{i:03}");
        let o = snap.get(b"s", k.as_bytes()).expect("snapshot get");
        assert_eq!(
            o.map(|o| o.value),
            Some(i.to_le_bytes().to_vec()),
            "snapshot sees {k}"
        );
    }
    let mut n = 0;
    snap.fold_keys(b"s", None, &mut |_| {
        n += 1;
        ControlFlow::Continue(())
    })
    .expect("snapshot fold");
    assert_eq!(n, 100);
    let mut objs = 0;
    snap.fold_objects(
        b"s",
        Some(&KeyRange::new(b"k010", b"k019")),
        &mut |_, _, o| {
            assert_eq!(o.value.len(), 4);
            objs += 1;
            ControlFlow::Continue(())
        },
    )
    .expect("snapshot object fold");
    assert_eq!(objs, 10);
    assert_eq!(snap.list_buckets().expect("buckets"), vec![b"s".to_vec()]);
    drop(snap);
    assert_eq!(keys_of(&*b, b"s", None).len(), 50);
    b.close().expect("close");
}
