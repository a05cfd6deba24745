//! The checkpoint of `basalt migrate`: where a migration stands, so that a
//! run stopped anywhere (a crash, `kill -9`, the source gone for longer
//! than the retry limit) resumes where it stopped.
//!
//! Format (version 1, `docs/formats.md` "Migration checkpoint"): one
//! header line `basalt-migrate-checkpoint 1 <crc32c of the rest, 8 hex
//! digits>\n`, then the state as JSON: the source and target addresses,
//! the buckets finished (type and bucket, hex), the bucket under way and
//! the last key copied there (keys are copied in byte order), whether the
//! copy is finished, the time sync passes start from, and the counts so
//! far. Written atomically (temporary file, fsync, rename) after every
//! batch the target confirmed; a file whose checksum, header or version
//! does not match is refused, never half-read.

use anyhow::Context;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

/// The checkpoint format this build writes and reads.
pub const VERSION: u32 = 1;
const MAGIC: &str = "basalt-migrate-checkpoint";

/// Running totals (also the `--json` summary's).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Counts {
    /// Objects written to the target (tombstones kept included).
    pub objects: u64,
    /// Value bytes of those objects.
    pub bytes: u64,
    /// Objects that had more than one sibling.
    pub with_siblings: u64,
    /// Siblings in all (of every object written).
    pub siblings: u64,
    /// Tombstones copied.
    pub tombstones_kept: u64,
    /// Tombstones left behind (`--tombstones skip`).
    pub tombstones_skipped: u64,
    /// Data-type values rebuilt.
    pub datatypes: u64,
    /// Keys listed that were gone when fetched.
    pub missing: u64,
    /// Keys not copied (an unreadable clock, an HLL): named on stderr.
    pub errors: u64,
    /// Buckets finished.
    pub buckets: u64,
    /// Sync passes finished.
    pub sync_passes: u64,
    /// Objects written by sync passes (also counted in `objects`).
    pub synced: u64,
}

impl Counts {
    /// Adds `o`'s counts to these.
    pub fn add(&mut self, o: &Counts) {
        self.objects += o.objects;
        self.bytes += o.bytes;
        self.with_siblings += o.with_siblings;
        self.siblings += o.siblings;
        self.tombstones_kept += o.tombstones_kept;
        self.tombstones_skipped += o.tombstones_skipped;
        self.datatypes += o.datatypes;
        self.missing += o.missing;
        self.errors += o.errors;
        self.buckets += o.buckets;
        self.sync_passes += o.sync_passes;
        self.synced += o.synced;
    }
}

/// The bucket under way.
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct Cursor {
    /// Bucket type (hex).
    pub btype: String,
    /// Bucket (hex).
    pub bucket: String,
    /// The last key copied (hex).
    pub after: String,
}

/// Where a migration stands.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq, Eq)]
pub struct State {
    /// The source's PB address.
    pub source: String,
    /// The target's cluster address.
    pub target: String,
    /// Buckets finished, as `hex(type)/hex(bucket)`.
    pub done: BTreeSet<String>,
    /// The bucket under way.
    pub current: Option<Cursor>,
    /// Every bucket of every type copied.
    pub copy_done: bool,
    /// Sync passes look at objects modified from this time (Unix seconds).
    pub sync_from: Option<u64>,
    /// Counts so far.
    pub counts: Counts,
}

/// Lower-case hex of `b`.
pub fn hex(b: &[u8]) -> String {
    b.iter().map(|x| format!("{x:02x}")).collect()
}

/// The bytes of [`hex`]'s output.
pub fn unhex(s: &str) -> anyhow::Result<Vec<u8>> {
    if !s.len().is_multiple_of(2) {
        anyhow::bail!("odd hex length");
    }
    (0..s.len())
        .step_by(2)
        .map(|i| {
            s.get(i..i + 2)
                .and_then(|d| u8::from_str_radix(d, 16).ok())
                .context("not hex")
        })
        .collect()
}

/// The name of a (type, bucket) in [`State::done`].
pub fn bucket_id(btype: &[u8], bucket: &[u8]) -> String {
    format!("{}/{}", hex(btype), hex(bucket))
}

/// `state` as the file's bytes.
pub fn encode(state: &State) -> Vec<u8> {
    let body = serde_json::to_vec_pretty(state).unwrap_or_default();
    let mut out = format!("{MAGIC} {VERSION} {:08x}\n", crc32c::crc32c(&body)).into_bytes();
    out.extend_from_slice(&body);
    out
}

/// The state in a file's bytes; an error naming what is wrong.
pub fn decode(bytes: &[u8]) -> anyhow::Result<State> {
    let nl = bytes
        .iter()
        .position(|&b| b == b'\n')
        .context("no header line")?;
    let header = std::str::from_utf8(&bytes[..nl]).context("header is not text")?;
    let mut words = header.split(' ');
    if words.next() != Some(MAGIC) {
        anyhow::bail!("not a basalt migrate checkpoint");
    }
    let version: u32 = words
        .next()
        .and_then(|v| v.parse().ok())
        .context("no format version")?;
    if version != VERSION {
        anyhow::bail!("checkpoint format {version}; this build reads format {VERSION}");
    }
    let crc = words
        .next()
        .and_then(|c| u32::from_str_radix(c, 16).ok())
        .context("no checksum")?;
    let body = &bytes[nl + 1..];
    let actual = crc32c::crc32c(body);
    if actual != crc {
        anyhow::bail!(
            "checksum mismatch (stored {crc:08x}, computed {actual:08x}): the file is corrupt"
        );
    }
    serde_json::from_slice(body).context("checkpoint JSON")
}

/// A checkpoint file.
pub struct Checkpoint {
    path: PathBuf,
    /// The state, as last saved or changed since.
    pub state: State,
}

impl Checkpoint {
    /// The checkpoint at `path` (a fresh one if there is no file) for a
    /// migration from `source` to `target`; a file of another migration
    /// is refused.
    pub fn open(path: &Path, source: &str, target: &str) -> anyhow::Result<Checkpoint> {
        let state = match std::fs::read(path) {
            Ok(bytes) => {
                let s = decode(&bytes).with_context(|| format!("checkpoint {}", path.display()))?;
                if s.source != source || s.target != target {
                    anyhow::bail!(
                        "checkpoint {} is of a migration from {} to {}, not from {source} to {target}: give another --checkpoint, or remove it to start over",
                        path.display(),
                        s.source,
                        s.target
                    );
                }
                s
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => State {
                source: source.to_string(),
                target: target.to_string(),
                ..State::default()
            },
            Err(e) => {
                return Err(e).with_context(|| format!("reading checkpoint {}", path.display()))
            }
        };
        Ok(Checkpoint {
            path: path.to_path_buf(),
            state,
        })
    }

    /// Writes the state (atomically).
    pub fn save(&self) -> anyhow::Result<()> {
        basalt_server::fsutil::atomic_write(&self.path, &encode(&self.state))
            .with_context(|| format!("writing checkpoint {}", self.path.display()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trips_and_refuses_corruption_and_other_versions() {
        let mut s = State {
            source: "h:1".into(),
            target: "h:2".into(),
            ..State::default()
        };
        s.done.insert(bucket_id(b"default", b"b\xff"));
        s.current = Some(Cursor {
            btype: hex(b"t"),
            bucket: hex(b"b"),
            after: hex(b"k9"),
        });
        s.counts.objects = 12;
        let bytes = encode(&s);
        assert_eq!(decode(&bytes).expect("decodes"), s);
        assert_eq!(unhex(&hex(b"\x00\xffk")).expect("hex"), b"\x00\xffk");
        let mut flipped = bytes.clone();
        let last = flipped.len() - 3;
        flipped[last] ^= 1;
        let e = decode(&flipped).expect_err("corrupt").to_string();
        assert!(e.contains("checksum"), "{e}");
        let newer = String::from_utf8(bytes)
            .expect("utf8")
            .replacen(" 1 ", " 2 ", 1);
        let e = decode(newer.as_bytes()).expect_err("newer").to_string();
        assert!(e.contains("format 2"), "{e}");
        assert!(decode(b"{}").is_err());
    }
}
