//! Runs the shared conformance suite (`basalt_backend::conformance`) against
//! every backend this build has, one test per (backend, check), and checks
//! that a directory of one backend is refused by every other, naming both.

use basalt_backend::conformance::{self, Factory};
use basalt_backend::{Backend, BackendError, Result};
use basalt_backends::{backend_names, open_backend, BackendConfig};
use std::path::{Path, PathBuf};

struct Named(&'static str);

fn files_with(dir: &Path, exts: &[&str], out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            files_with(&p, exts, out);
        } else if p
            .extension()
            .and_then(|x| x.to_str())
            .is_some_and(|x| exts.contains(&x))
        {
            out.push(p);
        }
    }
}

impl Factory for Named {
    fn name(&self) -> &'static str {
        self.0
    }
    fn persistent(&self) -> bool {
        self.0 != "memory"
    }
    fn open(&self, dir: &Path) -> Result<Box<dyn Backend>> {
        let cfg = BackendConfig {
            test_min: true,
            ..BackendConfig::default()
        };
        open_backend(self.0, dir, &cfg)
    }
    fn data_files(&self, dir: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        let exts: &[&str] = match self.0 {
            "leveled" => &["jnl", "sst"],
            "bitcask" => &["data"],
            _ => &["sst", "blob"],
        };
        files_with(dir, exts, &mut out);
        out
    }
}

macro_rules! suite {
    ($($test:ident: $backend:literal => $check:ident;)*) => {
        $(
            #[test]
            fn $test() {
                conformance::$check(&Named($backend));
            }
        )*
    };
}

suite! {
    leveled_model: "leveled" => model;
    leveled_indexes: "leveled" => indexes;
    leveled_index_cursor_paging: "leveled" => index_cursor_paging;
    leveled_index_cursor_int: "leveled" => index_cursor_int_order;
    leveled_index_cursor_keys: "leveled" => index_cursor_keys;
    leveled_index_cursor_equality: "leveled" => index_cursor_equality;
    leveled_index_cursor_beyond_end: "leveled" => index_cursor_beyond_end;
    leveled_index_cursor_with_continuation: "leveled" => index_cursor_with_continuation;
    leveled_index_cursor_model: "leveled" => index_cursor_model;
    leveled_fold_filters: "leveled" => fold_filters;
    leveled_snapshots: "leveled" => snapshots;
    leveled_corruption: "leveled" => corruption;
    leveled_validation: "leveled" => validation;
    leveled_capabilities: "leveled" => capabilities_honest;
    bitcask_model: "bitcask" => model;
    bitcask_indexes: "bitcask" => indexes;
    bitcask_index_cursor_paging: "bitcask" => index_cursor_paging;
    bitcask_index_cursor_int: "bitcask" => index_cursor_int_order;
    bitcask_index_cursor_keys: "bitcask" => index_cursor_keys;
    bitcask_index_cursor_equality: "bitcask" => index_cursor_equality;
    bitcask_index_cursor_beyond_end: "bitcask" => index_cursor_beyond_end;
    bitcask_index_cursor_with_continuation: "bitcask" => index_cursor_with_continuation;
    bitcask_index_cursor_model: "bitcask" => index_cursor_model;
    bitcask_fold_filters: "bitcask" => fold_filters;
    bitcask_snapshots: "bitcask" => snapshots;
    bitcask_corruption: "bitcask" => corruption;
    bitcask_validation: "bitcask" => validation;
    bitcask_capabilities: "bitcask" => capabilities_honest;
    memory_model: "memory" => model;
    memory_indexes: "memory" => indexes;
    memory_index_cursor_paging: "memory" => index_cursor_paging;
    memory_index_cursor_int: "memory" => index_cursor_int_order;
    memory_index_cursor_keys: "memory" => index_cursor_keys;
    memory_index_cursor_equality: "memory" => index_cursor_equality;
    memory_index_cursor_beyond_end: "memory" => index_cursor_beyond_end;
    memory_index_cursor_with_continuation: "memory" => index_cursor_with_continuation;
    memory_index_cursor_model: "memory" => index_cursor_model;
    memory_fold_filters: "memory" => fold_filters;
    memory_snapshots: "memory" => snapshots;
    memory_validation: "memory" => validation;
    memory_capabilities: "memory" => capabilities_honest;
}

#[cfg(feature = "rocksdb")]
suite! {
    rocksdb_model: "rocksdb" => model;
    rocksdb_indexes: "rocksdb" => indexes;
    rocksdb_index_cursor_paging: "rocksdb" => index_cursor_paging;
    rocksdb_index_cursor_int: "rocksdb" => index_cursor_int_order;
    rocksdb_index_cursor_keys: "rocksdb" => index_cursor_keys;
    rocksdb_index_cursor_equality: "rocksdb" => index_cursor_equality;
    rocksdb_index_cursor_beyond_end: "rocksdb" => index_cursor_beyond_end;
    rocksdb_index_cursor_with_continuation: "rocksdb" => index_cursor_with_continuation;
    rocksdb_index_cursor_model: "rocksdb" => index_cursor_model;
    rocksdb_fold_filters: "rocksdb" => fold_filters;
    rocksdb_snapshots: "rocksdb" => snapshots;
    rocksdb_corruption: "rocksdb" => corruption;
    rocksdb_validation: "rocksdb" => validation;
    rocksdb_capabilities: "rocksdb" => capabilities_honest;
    rocksdb_blob_model: "rocksdb-blob" => model;
    rocksdb_blob_indexes: "rocksdb-blob" => indexes;
    rocksdb_blob_index_cursor_paging: "rocksdb-blob" => index_cursor_paging;
    rocksdb_blob_index_cursor_int: "rocksdb-blob" => index_cursor_int_order;
    rocksdb_blob_index_cursor_keys: "rocksdb-blob" => index_cursor_keys;
    rocksdb_blob_index_cursor_equality: "rocksdb-blob" => index_cursor_equality;
    rocksdb_blob_index_cursor_beyond_end: "rocksdb-blob" => index_cursor_beyond_end;
    rocksdb_blob_index_cursor_with_continuation: "rocksdb-blob" => index_cursor_with_continuation;
    rocksdb_blob_index_cursor_model: "rocksdb-blob" => index_cursor_model;
    rocksdb_blob_fold_filters: "rocksdb-blob" => fold_filters;
    rocksdb_blob_snapshots: "rocksdb-blob" => snapshots;
    rocksdb_blob_corruption: "rocksdb-blob" => corruption;
    rocksdb_blob_validation: "rocksdb-blob" => validation;
    rocksdb_blob_capabilities: "rocksdb-blob" => capabilities_honest;
}

#[test]
fn wrong_backend_is_refused_naming_both() {
    let names: Vec<&str> = backend_names()
        .into_iter()
        .filter(|n| *n != "memory")
        .collect();
    for writer in &names {
        let dir = tempfile::tempdir().unwrap();
        let b = Named(writer).open(dir.path()).unwrap();
        b.put(b"b", b"k", b"v", b"", &Default::default()).unwrap();
        b.close().unwrap();
        drop(b);
        for reader in &names {
            if reader == writer {
                continue;
            }
            let e = Named(reader)
                .open(dir.path())
                .err()
                .unwrap_or_else(|| panic!("{reader} opened {writer}'s dir"));
            let msg = e.to_string();
            assert!(
                matches!(e, BackendError::WrongBackend { .. }),
                "{reader} on {writer}: {msg}"
            );
            assert!(
                msg.contains(&format!("basalt-{writer} 1"))
                    && msg.contains(&format!("basalt-{reader} 1")),
                "{msg}"
            );
        }
        // The right backend still opens it and reads the data back.
        let b = Named(writer).open(dir.path()).unwrap();
        assert_eq!(b.get(b"b", b"k").unwrap().unwrap().value, b"v");
    }
}

#[test]
fn unknown_backend_lists_the_known_ones() {
    let dir = tempfile::tempdir().unwrap();
    let e = open_backend("nosuch", dir.path(), &BackendConfig::default())
        .err()
        .unwrap();
    assert!(
        e.to_string().contains("leveled") && e.to_string().contains("bitcask"),
        "{e}"
    );
}

#[test]
fn trees_built_by_folds_equal_across_backends_and_the_engine() {
    use basalt_backend::TreeSize;
    let mut roots = Vec::new();
    for name in backend_names() {
        let dir = tempfile::tempdir().unwrap();
        let cfg = BackendConfig {
            test_min: true,
            tictac: Some(TreeSize::XXSmall),
            ..BackendConfig::default()
        };
        let b = open_backend(name, dir.path(), &cfg).unwrap();
        for i in 0..300u32 {
            b.put(
                b"t",
                format!("k{i}").as_bytes(),
                &i.to_le_bytes(),
                b"",
                &Default::default(),
            )
            .unwrap();
        }
        let tree = basalt_backends::aae::build_tree(&*b, TreeSize::XXSmall).unwrap();
        if b.capabilities().native_aae {
            assert_eq!(
                b.tictac_tree().unwrap(),
                tree.export(),
                "{name}: native tree equals folded tree"
            );
        }
        roots.push((name, tree.root()));
    }
    assert!(roots.windows(2).all(|w| w[0].1 == w[1].1), "{roots:?}");
}

#[test]
fn segment_of_matches_the_engine() {
    for i in 0..500u32 {
        let (b, k) = (format!("b\0{i}"), format!("k{i}"));
        assert_eq!(
            basalt_backend::segment_of(
                b.as_bytes(),
                k.as_bytes(),
                basalt_backend::TreeSize::Medium
            ),
            basalt_engine::tictac::segment_of_ledger_key(
                &basalt_engine::key::object(b.as_bytes(), k.as_bytes()),
                basalt_engine::TreeSize::Medium
            )
        );
    }
}
