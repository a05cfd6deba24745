//! Typed errors of the engine.
//!
//! Every fallible call returns [`Result`]. I/O errors carry the path and the
//! operation that failed, so an operator can act on the message alone.
//! Corruption is its own variant: a damaged record is reported, never returned
//! as data.

use std::path::PathBuf;

/// The engine's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Everything that can go wrong inside the engine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// An operating-system I/O call failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What we were doing ("open", "write", "fsync", ...).
        op: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// A checksum or structural check failed: the bytes on disk are damaged.
    #[error("corrupt data in {path} at offset {offset}: {reason}")]
    Corrupt {
        /// The damaged file.
        path: PathBuf,
        /// Byte offset of the damaged record or block (0 if unknown).
        offset: u64,
        /// What check failed.
        reason: String,
    },

    /// A caller passed a value the engine refuses (empty key, oversize value ...).
    #[error("invalid input: {0}")]
    InvalidInput(String),

    /// Another process (or another handle in this process) holds the store's lock.
    #[error("store {path} is already open by another process or handle (lock file {path}/LOCK is held); close it first")]
    Locked {
        /// The data directory.
        path: PathBuf,
    },

    /// The manifest is missing or damaged; the message says how to recover.
    #[error("{what} manifest {path}: {reason}. {advice}")]
    Manifest {
        /// "ledger" or "journal".
        what: &'static str,
        /// The manifest file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
        /// What the operator should do.
        advice: &'static str,
    },

    /// The directory holds a store of another kind or version.
    #[error("{path} holds '{found}', not a store this build can open ('{expected}')")]
    WrongStore {
        /// The data directory.
        path: PathBuf,
        /// The marker found in the directory.
        found: String,
        /// The marker this build writes.
        expected: String,
    },

    /// A file names a format version this build does not read: it was
    /// written by a newer Basalt. Refused before any check or repair, and
    /// left untouched.
    #[error("{path}: {what} format version {found}; this build reads version {reads}. It was written by a newer Basalt: run that version (the file is left untouched){}", if *intact { "" } else { "; if no newer Basalt wrote it, its header is damaged" })]
    UnsupportedVersion {
        /// What the file is ("journal manifest", "ledger manifest", ...).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The version its header names.
        found: u32,
        /// The versions this build reads, as text ("1", "1 and 2").
        reads: String,
        /// A checksum covers the version: it is no damage.
        intact: bool,
    },

    /// The snapshot outlived its timeout (or its store was closed) and has
    /// released what it pinned; take a new snapshot.
    #[error("snapshot {id} has expired ({reason}); take a new snapshot")]
    SnapshotExpired {
        /// The snapshot's id.
        id: u64,
        /// "timeout" or "store closed".
        reason: &'static str,
    },

    /// The store was closed, or poisoned by an earlier fatal I/O error.
    #[error("store is closed or poisoned by an earlier fatal error: {0}")]
    Closed(String),
}

impl Error {
    /// Wraps an I/O error with the operation and path it concerns.
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Error::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// Builds a corruption error.
    pub fn corrupt(path: impl Into<PathBuf>, offset: u64, reason: impl Into<String>) -> Self {
        Error::Corrupt {
            path: path.into(),
            offset,
            reason: reason.into(),
        }
    }

    /// The same error for another writer of a write group that failed as a
    /// whole (the I/O source is rebuilt from its kind and message).
    pub fn for_another_writer(&self) -> Error {
        match self {
            Error::Io { op, path, source } => Error::Io {
                op,
                path: path.clone(),
                source: std::io::Error::new(source.kind(), source.to_string()),
            },
            Error::Corrupt {
                path,
                offset,
                reason,
            } => Error::corrupt(path.clone(), *offset, reason.clone()),
            Error::InvalidInput(m) => Error::InvalidInput(m.clone()),
            Error::Locked { path } => Error::Locked { path: path.clone() },
            Error::Manifest {
                what,
                path,
                reason,
                advice,
            } => Error::Manifest {
                what,
                path: path.clone(),
                reason: reason.clone(),
                advice,
            },
            Error::WrongStore {
                path,
                found,
                expected,
            } => Error::WrongStore {
                path: path.clone(),
                found: found.clone(),
                expected: expected.clone(),
            },
            Error::UnsupportedVersion {
                what,
                path,
                found,
                reads,
                intact,
            } => Error::UnsupportedVersion {
                what,
                path: path.clone(),
                found: *found,
                reads: reads.clone(),
                intact: *intact,
            },
            Error::SnapshotExpired { id, reason } => Error::SnapshotExpired { id: *id, reason },
            Error::Closed(m) => Error::Closed(m.clone()),
        }
    }

    /// Builds the error of a file whose header names `found`, a version not
    /// among `reads`; `intact` when a checksum covers the version.
    pub fn unsupported_version(
        what: &'static str,
        path: impl Into<PathBuf>,
        found: u32,
        reads: &[u32],
        intact: bool,
    ) -> Self {
        Error::UnsupportedVersion {
            what,
            path: path.into(),
            found,
            reads: crate::codec::versions_text(reads),
            intact,
        }
    }

    /// [`Error::UnsupportedVersion`] if `header` (of the file at `path`)
    /// has the magic `magic` and a version not among `reads`; no checksum
    /// covers such a header (see [`crate::codec::unread_version`]).
    pub fn refuse_unread_header(
        header: &[u8],
        magic: &[u8; 8],
        reads: &[u32],
        what: &'static str,
        path: &std::path::Path,
    ) -> Result<()> {
        match crate::codec::unread_version(header, magic, reads) {
            Some(found) => Err(Error::unsupported_version(what, path, found, reads, false)),
            None => Ok(()),
        }
    }

    /// True if this error reports damaged on-disk data.
    pub fn is_corruption(&self) -> bool {
        matches!(self, Error::Corrupt { .. })
    }
}

/// Extension to attach an operation and a path to `std::io::Result`.
pub trait IoContext<T> {
    /// Converts an I/O error into [`Error::Io`] with context.
    fn ctx(self, op: &'static str, path: &std::path::Path) -> Result<T>;
}

impl<T> IoContext<T> for std::io::Result<T> {
    fn ctx(self, op: &'static str, path: &std::path::Path) -> Result<T> {
        self.map_err(|e| Error::io(op, path, e))
    }
}
