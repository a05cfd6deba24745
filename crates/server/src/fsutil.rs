//! File-system helpers of the node's small metadata files (node name,
//! bucket props and types, cluster state, security): the engine's atomic
//! replace ([`basalt_engine::fsutil::write_atomic_with`]), with the node's
//! temporary name (`<file>.tmp`); the versioned envelope of the node's
//! JSON state files ([`encode_state`], [`decode_state`]); and the data
//! directory's format marker `<data_dir>/FORMAT` ([`check_data_format`],
//! [`write_data_format`]), read before anything in the directory is
//! opened, so a directory a newer Basalt wrote is refused untouched.

use serde::de::DeserializeOwned;
use serde::Serialize;
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

/// Format version of the node's JSON state files (`cluster.json`,
/// `security.json`, `bucket_types.json`, `bucket_props.json`,
/// `repl/sinks.json`), written into each as `{"format": 1, "state": ...}`.
pub const STATE_FORMAT: u64 = 1;

/// A state file as written: its format version and its state.
#[derive(Serialize)]
struct Envelope<'a, T> {
    format: u64,
    state: &'a T,
}

/// `state` as the JSON of a state file, in the [`STATE_FORMAT`] envelope.
pub fn encode_state<T: Serialize>(state: &T) -> serde_json::Result<Vec<u8>> {
    serde_json::to_vec_pretty(&Envelope {
        format: STATE_FORMAT,
        state,
    })
}

/// The state of a state file (`bytes`). A file in the envelope must name a
/// format this build reads, else it is refused with a message naming the
/// format found and the format read (the caller names the file); a file without the
/// envelope (written before formats were recorded) is format 1, its whole
/// JSON the state. The envelope is an object of exactly `format` (a number)
/// and `state`, which no state of format 1 is (none is an object of two
/// such keys with a number for `format`).
pub fn decode_state<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, String> {
    let mut v: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    let enveloped = v.as_object().is_some_and(|o| {
        o.len() == 2 && o.get("format").is_some_and(|f| f.is_number()) && o.contains_key("state")
    });
    if enveloped {
        let format = v.get("format").cloned().unwrap_or_default();
        if format.as_u64() != Some(STATE_FORMAT) {
            return Err(format!(
                "format version {format}; this build reads format {STATE_FORMAT}. It was written by a newer Basalt: run that version (the file is left untouched)"
            ));
        }
        v = v
            .get_mut("state")
            .map(serde_json::Value::take)
            .unwrap_or_default();
    }
    serde_json::from_value(v).map_err(|e| e.to_string())
}

/// Format version of a node's data directory as a whole, in
/// `<data_dir>/FORMAT` (`basalt-data 2`). A release that changes any
/// on-disk format in a way older builds cannot read raises it, so an older
/// build refuses the directory before it opens (and changes) anything.
/// Builds before the marker (v0.1.0) ignore the file.
///
/// Format 2: the ledger's SST files are written in SST format version 2
/// (compressed data blocks), which format-1 builds cannot read; format-1
/// directories (SST version 1) are read as they are and move to version 2
/// file by file as the ledger merges.
pub const DATA_FORMAT: u64 = 2;

/// The marker's file name under the data directory.
pub const DATA_FORMAT_FILE: &str = "FORMAT";

/// Checks `<dir>/FORMAT` before the node opens anything: absent (a new
/// directory, or one written before the marker) or naming a format up to
/// [`DATA_FORMAT`] is fine; a newer format, or a file that is not a
/// marker, is refused with a message naming the file and both formats.
/// Reads only.
pub fn check_data_format(dir: &Path) -> Result<(), String> {
    let path = dir.join(DATA_FORMAT_FILE);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let found = text
        .trim()
        .strip_prefix("basalt-data ")
        .and_then(|v| v.parse::<u64>().ok());
    match found {
        Some(v) if v <= DATA_FORMAT => Ok(()),
        Some(v) => Err(format!(
            "{}: data directory format {v}; this build reads format {DATA_FORMAT}. It was written by a newer Basalt: run that version (nothing in the directory was changed)",
            path.display()
        )),
        None => Err(format!(
            "{}: not a data directory format marker (expected \"basalt-data N\", found {:?}); nothing in the directory was changed",
            path.display(),
            text.chars().take(40).collect::<String>()
        )),
    }
}

/// Writes `<dir>/FORMAT` naming [`DATA_FORMAT`] (atomically), unless it
/// already says so.
pub fn write_data_format(dir: &Path) -> std::io::Result<()> {
    let path = dir.join(DATA_FORMAT_FILE);
    let want = format!("basalt-data {DATA_FORMAT}\n");
    if std::fs::read_to_string(&path).ok().as_deref() == Some(want.as_str()) {
        return Ok(());
    }
    atomic_write(&path, want.as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn state_files_round_trip_read_the_old_shape_and_refuse_a_newer_format() {
        type State = BTreeMap<String, BTreeMap<String, u32>>;
        let mut m = State::new();
        m.insert("format".to_string(), BTreeMap::from([("a".to_string(), 1)]));
        m.insert("state".to_string(), BTreeMap::new());
        let bytes = encode_state(&m).unwrap_or_default();
        assert_eq!(decode_state::<State>(&bytes).ok(), Some(m.clone()));
        // Written before formats were recorded: the whole file is the state,
        // even a map whose keys are "format" and "state".
        let old = serde_json::to_vec(&m).unwrap_or_default();
        assert_eq!(decode_state::<State>(&old).ok(), Some(m));
        let newer = br#"{"format": 2, "state": {}}"#;
        let e = decode_state::<BTreeMap<String, u32>>(newer)
            .err()
            .unwrap_or_default();
        assert!(
            e.starts_with("format version 2; this build reads format 1"),
            "{e}"
        );
    }

    #[test]
    fn the_data_format_marker_refuses_a_newer_or_foreign_one_and_reads_its_own() {
        let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(check_data_format(d.path()), Ok(()), "absent: fine");
        write_data_format(d.path()).unwrap_or_else(|e| panic!("{e}"));
        let path = d.path().join(DATA_FORMAT_FILE);
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        assert_eq!(text, "basalt-data 2\n");
        assert_eq!(check_data_format(d.path()), Ok(()));
        std::fs::write(&path, "basalt-data 1\n").unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(check_data_format(d.path()), Ok(()), "an older format: fine");
        std::fs::write(&path, "basalt-data 3\n").unwrap_or_else(|e| panic!("{e}"));
        let e = check_data_format(d.path()).err().unwrap_or_default();
        assert!(
            e.contains("data directory format 3; this build reads format 2")
                && e.contains("newer Basalt")
                && e.contains(&path.display().to_string()),
            "{e}"
        );
        std::fs::write(&path, "hello").unwrap_or_else(|e| panic!("{e}"));
        let e = check_data_format(d.path()).err().unwrap_or_default();
        assert!(e.contains("not a data directory format marker"), "{e}");
    }
}
