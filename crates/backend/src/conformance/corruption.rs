//! Conformance (persistent backends): bytes flipped in data files never
//! come back as a wrong value; errors are typed; most keys still read
//! ([`corruption`]).

use super::{put, tempdir, Factory};

/// Flipped bytes in data files: never a wrong value, errors typed.
pub fn corruption(f: &dyn Factory) {
    if !f.persistent() {
        return;
    }
    let dir = tempdir();
    let n = 400u32;
    let value = |i: u32| format!("value-{i:05}-").repeat(20).into_bytes();
    {
        let b = f.open(dir.path()).expect("open");
        for i in 0..n {
            put(&*b, b"c", format!("k{i:04}").as_bytes(), &value(i));
        }
        b.close().expect("close");
    }
    let mut files = f.data_files(dir.path());
    files.sort_by_key(|p| std::cmp::Reverse(std::fs::metadata(p).map(|m| m.len()).unwrap_or(0)));
    assert!(!files.is_empty(), "{}: no data files to damage", f.name());
    for p in files.iter().take(2) {
        let mut bytes = std::fs::read(p).expect("read");
        let mid = bytes.len() / 2;
        for x in bytes.iter_mut().skip(mid).take(8) {
            *x ^= 0x5A;
        }
        std::fs::write(p, bytes).expect("write");
    }
    let b = match f.open(dir.path()) {
        Ok(b) => b,
        Err(e) => {
            assert!(
                e.is_corruption(),
                "{}: open after damage must be Corrupt or succeed: {e}",
                f.name()
            );
            return;
        }
    };
    let mut bad = 0;
    for i in 0..n {
        let k = format!("k{i:04}");
        match b.get(b"c", k.as_bytes()) {
            Ok(Some(o)) => assert_eq!(o.value, value(i), "{}: wrong value for {k}", f.name()),
            Ok(None) => bad += 1,
            Err(e) => {
                assert!(e.is_corruption(), "{}: {k}: untyped error {e}", f.name());
                bad += 1;
            }
        }
    }
    assert!(
        bad <= n / 4,
        "{}: {bad} of {n} keys lost to two 8-byte flips",
        f.name()
    );
}
