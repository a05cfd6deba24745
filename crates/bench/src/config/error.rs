//! The error of reading and checking a configuration, [`ConfigError`]: a
//! file that cannot be read or is not Erlang terms, or a key with a bad
//! value (named with the `file:line` that gave it).

use crate::keygen::KeyGenError;
use crate::term::SyntaxError;
use crate::valgen::ValGenError;
use std::path::PathBuf;

/// A configuration error.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// A file is not valid Erlang terms.
    #[error("{path}:{}: {}", .error.line, .error.message)]
    Syntax {
        /// The file.
        path: PathBuf,
        /// Where and what.
        error: SyntaxError,
    },
    /// A key has a bad value.
    #[error("{key}: {message}{}", .at.as_deref().map(|a| format!(" ({a})")).unwrap_or_default())]
    Invalid {
        /// The key.
        key: String,
        /// What is wrong.
        message: String,
        /// `file:line` where the value was given, if it came from a file.
        at: Option<String>,
    },
    /// A bad key generator.
    #[error(transparent)]
    KeyGen(#[from] KeyGenError),
    /// A bad value generator.
    #[error(transparent)]
    ValGen(#[from] ValGenError),
}
