//! `basalt kv --backend NAME` for every backend: put / get / head / delete /
//! keys / import / stats round-trip through the `Backend` trait (keys come
//! out sorted even from the unordered bitcask), a directory written by one
//! backend is refused by another with an error naming both, and `repair`
//! on a non-leveled backend is a clear user error.

#![allow(clippy::unwrap_used)]

mod common;

use common::{basalt, code, stderr, stdout};
use std::path::Path;

fn kvb(dir: &Path, backend: &str, args: &[&str], stdin: &[u8]) -> std::process::Output {
    let mut all: Vec<std::ffi::OsString> = vec![
        "kv".into(),
        "--backend".into(),
        backend.into(),
        "--data-dir".into(),
        dir.into(),
    ];
    all.extend(args.iter().map(Into::into));
    basalt(&all, stdin)
}

const BACKENDS: [&str; 4] = ["leveled", "bitcask", "rocksdb", "rocksdb-blob"];

#[test]
fn every_backend_round_trips_through_the_cli() {
    for backend in BACKENDS {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        for (k, v) in [("k2", "two"), ("k1", "one"), ("k3", "three")] {
            let out = kvb(dir, backend, &["put", "--meta", "m", "b", k], v.as_bytes());
            assert_eq!(code(&out), 0, "{backend} put: {}", stderr(&out));
        }
        let out = kvb(dir, backend, &["get", "b", "k1"], b"");
        assert_eq!(
            (code(&out), out.stdout.as_slice()),
            (0, &b"one"[..]),
            "{backend} get"
        );
        let out = kvb(dir, backend, &["head", "b", "k3"], b"");
        let head: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
        assert_eq!(
            (head["size"].as_u64(), head["metadata"].as_str()),
            (Some(5), Some("m")),
            "{backend} head"
        );
        let out = kvb(dir, backend, &["delete", "b", "k2"], b"");
        assert_eq!(code(&out), 0, "{backend} delete: {}", stderr(&out));
        let out = kvb(dir, backend, &["get", "b", "k2"], b"");
        assert_eq!(code(&out), 1, "{backend} get deleted");
        let out = kvb(dir, backend, &["import"], b"b\tk0\tzero\nb\tk9\tnine\n");
        assert_eq!(code(&out), 0, "{backend} import: {}", stderr(&out));
        let out = kvb(dir, backend, &["keys", "b"], b"");
        assert_eq!(stdout(&out), "k0\nk1\nk3\nk9\n", "{backend} keys sorted");
        let out = kvb(dir, backend, &["stats"], b"");
        assert_eq!(code(&out), 0, "{backend} stats: {}", stderr(&out));
    }
}

#[test]
fn wrong_backend_and_repair_are_user_errors() {
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    let out = kvb(dir, "bitcask", &["put", "b", "k"], b"v");
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    for other in ["leveled", "rocksdb"] {
        let out = kvb(dir, other, &["get", "b", "k"], b"");
        let err = stderr(&out);
        assert_eq!(code(&out), 2, "{err}");
        assert!(
            err.contains("basalt-bitcask 1") && err.contains(&format!("basalt-{other} 1")),
            "{err}"
        );
    }
    let out = kvb(dir, "bitcask", &["repair"], b"");
    assert_eq!(code(&out), 2);
    assert!(stderr(&out).contains("no repair"), "{}", stderr(&out));
    let out = kvb(dir, "nosuch", &["get", "b", "k"], b"");
    assert!(
        code(&out) == 2 && stderr(&out).contains("unknown backend"),
        "{}",
        stderr(&out)
    );
}

/// 2i and folds through the trait: index queries (with paging and `--count`)
/// where the backend has indexes, a typed "not supported" error naming the
/// capability where it has not (bitcask), and folds on every backend.
#[test]
fn index_and_fold_through_every_backend() {
    for backend in BACKENDS {
        let d = tempfile::tempdir().unwrap();
        let dir = d.path();
        let out = kvb(
            dir,
            backend,
            &["import"],
            b"u\tk1\tv1\tage_int=30\nu\tk2\tv2\tage_int=40\nu\tk3\tv3\tage_int=50\n",
        );
        if backend == "bitcask" {
            assert_eq!(code(&out), 2, "bitcask accepted index changes");
            assert!(stderr(&out).contains("indexes"), "{}", stderr(&out));
            let out = kvb(
                dir,
                backend,
                &["import"],
                b"u\tk1\tv1\nu\tk2\tv2\nu\tk3\tv3\n",
            );
            assert_eq!(code(&out), 0, "{}", stderr(&out));
            let out = kvb(dir, backend, &["index", "u", "age_int", "0", "100"], b"");
            assert_eq!(code(&out), 2);
            assert!(stderr(&out).contains("indexes"), "{}", stderr(&out));
        } else {
            assert_eq!(code(&out), 0, "{backend} import: {}", stderr(&out));
            let out = kvb(
                dir,
                backend,
                &["index", "u", "age_int", "35", "60", "--return-terms"],
                b"",
            );
            assert_eq!(stdout(&out), "40\tk2\n50\tk3\n", "{backend} index");
            let out = kvb(
                dir,
                backend,
                &["index", "u", "age_int", "0", "100", "--max-results", "2"],
                b"",
            );
            let text = stdout(&out);
            let cont = text
                .lines()
                .find_map(|l| l.strip_prefix("continuation\t"))
                .unwrap_or_else(|| panic!("{backend}: no continuation in {text:?}"))
                .to_string();
            let out = kvb(
                dir,
                backend,
                &["index", "u", "age_int", "0", "100", "--continuation", &cont],
                b"",
            );
            assert_eq!(stdout(&out), "k3\n", "{backend} second page");
            let out = kvb(
                dir,
                backend,
                &["index", "u", "age_int", "0", "100", "--count"],
                b"",
            );
            assert_eq!(stdout(&out), "3\n", "{backend} count");
        }
        let out = kvb(dir, backend, &["fold", "keys", "u"], b"");
        assert_eq!(stdout(&out), "k1\nk2\nk3\n", "{backend} fold keys");
        assert!(stderr(&out).contains("keys/s"), "{backend}: no rate");
        let out = kvb(dir, backend, &["fold", "objects", "u"], b"");
        assert_eq!(
            stdout(&out),
            "k1\tv1\nk2\tv2\nk3\tv3\n",
            "{backend} fold objects"
        );
        let out = kvb(dir, backend, &["compact"], b"");
        if backend == "leveled" {
            assert_eq!(code(&out), 0, "{}", stderr(&out));
        } else {
            assert_eq!(code(&out), 2, "{backend} compact");
        }
    }
}
