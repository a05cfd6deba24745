//! Files of a newer format are refused by name: a store whose journal or
//! ledger manifest, or a journal data file, names a format version this
//! build does not read fails to open (and to repair) with a message naming
//! the file, the version found and the versions this build reads, and the
//! file is left as it was. A manifest whose checksum does not cover the
//! version it names is damage, reported as before.
//!
//! Method: write a store, close it, rewrite the version field (bytes 8..12,
//! after the 8-byte magic) of one file as a newer build would, fix its
//! checksum where it has one at the end, and open it again.

use basalt_engine::{Config, Error, Store};
use std::path::Path;

/// A closed store with a few records in `dir`.
fn make_store(dir: &Path) {
    let s = Store::open(Config::test_min(dir)).expect("open store");
    for i in 0..10u32 {
        s.put(b"b", format!("k{i}").as_bytes(), b"v", b"")
            .expect("put");
    }
    s.close().expect("close");
}

/// Sets the version field of `path` to `version`; with `crc_at_end`, the
/// trailing CRC32C of everything before it is recomputed (as a newer
/// build's own file would have it).
fn set_version(path: &Path, version: u32, crc_at_end: bool) -> Vec<u8> {
    let mut bytes = std::fs::read(path).expect("read");
    bytes[8..12].copy_from_slice(&version.to_le_bytes());
    if crc_at_end {
        let body = bytes.len() - 4;
        let sum = crc32c::crc32c(&bytes[..body]);
        bytes[body..].copy_from_slice(&sum.to_le_bytes());
    }
    std::fs::write(path, &bytes).expect("write");
    bytes
}

fn refused(dir: &Path, file: &Path, what: &str) {
    let e = Store::open(Config::test_min(dir)).expect_err("a newer file must be refused");
    assert!(matches!(e, Error::UnsupportedVersion { .. }), "{e}");
    let msg = e.to_string();
    for part in [
        &file.display().to_string(),
        what,
        "format version 2",
        "this build reads version 1",
        "newer Basalt",
    ] {
        assert!(msg.contains(part), "{msg:?} lacks {part:?}");
    }
}

#[test]
fn newer_journal_manifest_is_refused_even_by_repair() {
    let d = tempfile::tempdir().expect("tempdir");
    make_store(d.path());
    let path = d.path().join("journal/MANIFEST");
    let bytes = set_version(&path, 2, true);
    refused(d.path(), &path, "journal manifest");
    let e = Store::repair(Config::test_min(d.path())).expect_err("repair must refuse");
    assert!(matches!(e, Error::UnsupportedVersion { .. }), "{e}");
    assert_eq!(std::fs::read(&path).expect("read"), bytes, "left untouched");
}

#[test]
fn newer_ledger_manifest_is_refused() {
    let d = tempfile::tempdir().expect("tempdir");
    make_store(d.path());
    let path = d.path().join("ledger/MANIFEST");
    let bytes = set_version(&path, 2, true);
    refused(d.path(), &path, "ledger manifest");
    assert_eq!(std::fs::read(&path).expect("read"), bytes, "left untouched");
    // The version changed under the old checksum: damage, not a newer file
    // (a repair rebuilds the ledger from the journal).
    set_version(&path, 3, false);
    let e = Store::open(Config::test_min(d.path())).expect_err("damage");
    assert!(matches!(e, Error::Manifest { .. }), "{e}");
}

#[test]
fn newer_journal_data_file_is_refused() {
    let d = tempfile::tempdir().expect("tempdir");
    make_store(d.path());
    let path = d.path().join("journal/00000001.jnl");
    set_version(&path, 2, false);
    refused(d.path(), &path, "journal data file");
    // No checksum covers a data file's header: the message says so.
    let e = Store::open(Config::test_min(d.path())).expect_err("refused");
    assert!(e.to_string().contains("its header is damaged"), "{e}");
}
