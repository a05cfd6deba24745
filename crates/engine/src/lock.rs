//! The data directory's lock file and store-kind marker.
//!
//! `DIR/LOCK` is held with an exclusive advisory lock (`flock`) for as long as
//! a store is open, so a second process (or handle) gets a clear error instead
//! of corrupting the store. `DIR/STORE` names the kind of store the directory
//! holds, so a directory written by another backend is refused by name.

use crate::error::{Error, IoContext, Result};
use std::fs::{File, OpenOptions};
use std::path::Path;

/// The marker this engine writes into `DIR/STORE`.
pub const STORE_MARKER: &str = "basalt-leveled 1";

/// An exclusive lock on a data directory, released on drop.
#[derive(Debug)]
pub struct DirLock {
    _file: File,
}

impl DirLock {
    /// Takes the lock on `dir/LOCK`, failing at once if it is held.
    pub fn acquire(dir: &Path) -> Result<DirLock> {
        let path = dir.join("LOCK");
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .open(&path)
            .ctx("open lock file", &path)?;
        match file.try_lock() {
            Ok(()) => Ok(DirLock { _file: file }),
            Err(std::fs::TryLockError::WouldBlock) => Err(Error::Locked {
                path: dir.to_path_buf(),
            }),
            Err(std::fs::TryLockError::Error(e)) => Err(Error::io("lock", &path, e)),
        }
    }
}

/// Checks (or, for a new directory, writes) the store-kind marker `DIR/STORE`.
/// Returns true if the store is new.
pub fn check_marker(dir: &Path, marker: &str) -> Result<bool> {
    let path = dir.join("STORE");
    match std::fs::read_to_string(&path) {
        Ok(found) => {
            let found = found.trim();
            if found == marker {
                Ok(false)
            } else {
                Err(Error::WrongStore {
                    path: dir.to_path_buf(),
                    found: found.to_string(),
                    expected: marker.to_string(),
                })
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let others: Vec<String> = std::fs::read_dir(dir)
                .ctx("list", dir)?
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .filter(|n| n != "LOCK")
                .collect();
            if others == ["STORE.tmp"] {
                // The marker's own atomic write was cut short (kill -9 while
                // the store was being created): nothing else exists yet.
                let tmp = dir.join("STORE.tmp");
                std::fs::remove_file(&tmp).ctx("remove", &tmp)?;
            } else if !others.is_empty() {
                return Err(Error::WrongStore {
                    path: dir.to_path_buf(),
                    found: format!("no STORE marker but other files ({})", others.join(", ")),
                    expected: marker.to_string(),
                });
            }
            crate::fsutil::write_atomic(&path, format!("{marker}\n").as_bytes())?;
            Ok(true)
        }
        Err(e) => Err(Error::io("read", &path, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_cut_short_marker_write_is_a_new_store_and_other_files_are_foreign() {
        let d = tempfile::tempdir().unwrap();
        std::fs::write(d.path().join("STORE.tmp"), b"basalt-le").unwrap();
        assert!(check_marker(d.path(), "m").unwrap(), "created");
        assert!(!check_marker(d.path(), "m").unwrap(), "found");
        let e = tempfile::tempdir().unwrap();
        std::fs::write(e.path().join("STORE.tmp"), b"x").unwrap();
        std::fs::write(e.path().join("data"), b"x").unwrap();
        assert!(check_marker(e.path(), "m").is_err());
    }

    #[test]
    fn second_lock_fails_then_succeeds_after_release() {
        let d = tempfile::tempdir().unwrap();
        let first = DirLock::acquire(d.path()).unwrap();
        let err = DirLock::acquire(d.path()).unwrap_err();
        assert!(matches!(err, Error::Locked { .. }), "{err}");
        drop(first);
        DirLock::acquire(d.path()).unwrap();
    }

    #[test]
    fn marker_mismatch_names_both() {
        let d = tempfile::tempdir().unwrap();
        assert!(check_marker(d.path(), "a 1").unwrap());
        assert!(!check_marker(d.path(), "a 1").unwrap());
        let msg = check_marker(d.path(), "b 1").unwrap_err().to_string();
        assert!(msg.contains("a 1") && msg.contains("b 1"), "{msg}");
    }
}
