//! File-system helpers of the node's small metadata files (node name,
//! bucket props and types, cluster state, security): the engine's atomic
//! replace ([`basalt_engine::fsutil::write_atomic_with`]), with the node's
//! temporary name (`<file>.tmp`).

use std::path::{Path, PathBuf};

/// Writes `path` atomically: a temporary file next to it (`<file>.tmp`),
/// fsync, rename, fsync of the directory.
pub fn atomic_write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    basalt_engine::fsutil::write_atomic_with(path, &PathBuf::from(tmp), |w| w.write_all(bytes))
        .map_err(|e| match e {
            basalt_engine::Error::Io { source, .. } => source,
            other => std::io::Error::other(other.to_string()),
        })
}
