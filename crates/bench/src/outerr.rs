//! The error of writing and reading a results directory's files,
//! [`OutputError`].
//!
//! Kept apart from [`crate::output`] so that the writers and readers of
//! single files ([`crate::activity`], [`crate::waits`]) can return it
//! without importing `output`, which reads their files back: imports run
//! one way, `output` → `activity` / `waits` → `outerr`. The type is
//! re-exported as `output::OutputError`, its usual name.

use std::path::PathBuf;

/// An output error.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// A file or directory could not be written or read.
    #[error("{path}: {source}")]
    Io {
        /// The path.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A bad argument or file content.
    #[error("{0}")]
    Invalid(String),
}
