//! The files of a cluster backup directory (`basalt admin backup DIR`),
//! described in docs/formats.md "Cluster backup directory":
//!
//! * one partition file per ring partition, `partition-NNNNN.bkp`
//!   (`BSLTBKP1`): a checksummed header, one record per object (each with
//!   its crc32c), and an end record with the counts; written by
//!   [`PartitionWriter`], read back and checked by [`PartitionReader`];
//! * the cluster's ring and bucket metadata as the nodes hold them
//!   (`ring.json`, `types.json`, `props.json`, `security.json`);
//! * `manifest.json` ([`Manifest`]), written last: every file with its
//!   size, crc32c and counts. A directory without it is not a backup.
//!
//! Nothing here talks to a node; [`crate::admin_backup`] does.

use anyhow::{bail, Context};
use serde::{Deserialize, Serialize};
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::Path;

/// The first bytes of a partition file.
pub(crate) const MAGIC: &[u8; 8] = b"BSLTBKP1";
/// The version of the partition files and of the manifest.
pub(crate) const VERSION: u32 = 1;
/// The manifest's `format` field.
pub(crate) const FORMAT: &str = "basalt-cluster-backup";
/// The manifest's file name.
pub(crate) const MANIFEST: &str = "manifest.json";
/// The largest record body read back (an object's bucket, key, metadata
/// and value): the cluster port's frame limit, which no object that went
/// through a node can pass.
const MAX_RECORD: usize = 64 << 20;
/// Record kinds.
const KIND_OBJECT: u8 = 1;
const KIND_END: u8 = 2;

/// The name of partition `p`'s file.
pub(crate) fn partition_file(p: u32) -> String {
    format!("partition-{p:05}.bkp")
}

/// One object of a backup: storage bucket, key, stored metadata, value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Record {
    pub bucket: Vec<u8>,
    pub key: Vec<u8>,
    pub meta: Vec<u8>,
    pub value: Vec<u8>,
}

impl Record {
    /// Bytes of bucket, key, metadata and value (what the counts count).
    pub(crate) fn data_bytes(&self) -> u64 {
        (self.bucket.len() + self.key.len() + self.meta.len() + self.value.len()) as u64
    }
}

/// A file of the backup as the manifest lists it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct FileEntry {
    /// The file's name in the directory.
    pub name: String,
    /// Its partition (partition files only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub partition: Option<u32>,
    /// Objects in it (partition files only).
    #[serde(default)]
    pub objects: u64,
    /// Bytes of buckets, keys, metadata and values in it.
    #[serde(default)]
    pub data_bytes: u64,
    /// The file's size.
    pub size: u64,
    /// crc32c of the whole file.
    pub crc32c: u32,
}

/// `manifest.json`: what the backup holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Manifest {
    /// [`FORMAT`].
    pub format: String,
    /// [`VERSION`].
    pub version: u32,
    /// When the backup ended (Unix seconds).
    pub created_unix: u64,
    /// The `basalt --version` that wrote it.
    pub created_by: String,
    /// The backed-up cluster's id.
    pub cluster_id: String,
    /// Its ring size: a restore needs the same.
    pub ring_size: u32,
    /// Its members (node names) when backed up.
    pub nodes: Vec<String>,
    /// Objects in every partition file (each replica counted).
    pub objects: u64,
    /// Their bytes.
    pub data_bytes: u64,
    /// The partition files, in partition order.
    pub partitions: Vec<FileEntry>,
    /// `ring.json`, `types.json`, `props.json`, `security.json`.
    pub metadata: Vec<FileEntry>,
}

/// `manifest.json` on disk: the manifest and the crc32c of its compact
/// JSON encoding.
#[derive(Serialize, Deserialize)]
struct ManifestFile {
    manifest: Manifest,
    crc32c: u32,
}

impl Manifest {
    /// Writes `DIR/manifest.json` atomically (written last: it makes DIR
    /// a backup).
    pub(crate) fn write(&self, dir: &Path) -> anyhow::Result<()> {
        let compact = serde_json::to_vec(self)?;
        let file = ManifestFile {
            manifest: self.clone(),
            crc32c: crc32c::crc32c(&compact),
        };
        let text = serde_json::to_vec_pretty(&file)?;
        basalt_engine::fsutil::write_atomic(&dir.join(MANIFEST), &text)
            .with_context(|| format!("writing {}", dir.join(MANIFEST).display()))
    }

    /// Reads and checks `DIR/manifest.json` (checksum, format, version).
    pub(crate) fn read(dir: &Path) -> anyhow::Result<Manifest> {
        let path = dir.join(MANIFEST);
        let text = match std::fs::read(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => bail!(
                "{} has no {MANIFEST}: not a backup, or a backup that did not finish",
                dir.display()
            ),
            Err(e) => return Err(e).with_context(|| format!("reading {}", path.display())),
        };
        let file: ManifestFile = serde_json::from_slice(&text)
            .with_context(|| format!("{} is damaged (not a manifest)", path.display()))?;
        let compact = serde_json::to_vec(&file.manifest)?;
        if crc32c::crc32c(&compact) != file.crc32c {
            bail!("{} is damaged: its checksum does not match", path.display());
        }
        let m = file.manifest;
        if m.format != FORMAT || m.version != VERSION {
            bail!(
                "{} is format {:?} version {}; this basalt reads {FORMAT:?} version {VERSION}",
                path.display(),
                m.format,
                m.version
            );
        }
        Ok(m)
    }
}

/// A writer that counts and checksums what passes.
struct Summing<W> {
    inner: W,
    size: u64,
    crc: u32,
}

impl<W: Write> Write for Summing<W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        self.size += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.inner.flush()
    }
}

/// Writes one partition file.
pub(crate) struct PartitionWriter {
    out: Summing<BufWriter<std::fs::File>>,
    name: String,
    path: std::path::PathBuf,
    partition: u32,
    objects: u64,
    data_bytes: u64,
    body: Vec<u8>,
}

fn put_u32(b: &mut Vec<u8>, v: u32) {
    b.extend_from_slice(&v.to_le_bytes());
}

fn put_bytes(b: &mut Vec<u8>, v: &[u8]) -> anyhow::Result<()> {
    let len = u32::try_from(v.len()).context("a field over 4 GiB")?;
    put_u32(b, len);
    b.extend_from_slice(v);
    Ok(())
}

impl PartitionWriter {
    /// Creates `DIR/partition-NNNNN.bkp` (it must not exist) and writes its header.
    pub(crate) fn create(dir: &Path, ring_size: u32, partition: u32) -> anyhow::Result<Self> {
        let name = partition_file(partition);
        let path = dir.join(&name);
        let f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .with_context(|| format!("creating {}", path.display()))?;
        let mut w = PartitionWriter {
            out: Summing {
                inner: BufWriter::with_capacity(1 << 20, f),
                size: 0,
                crc: 0,
            },
            name,
            path,
            partition,
            objects: 0,
            data_bytes: 0,
            body: Vec::new(),
        };
        let mut h = MAGIC.to_vec();
        put_u32(&mut h, VERSION);
        put_u32(&mut h, ring_size);
        put_u32(&mut h, partition);
        let crc = crc32c::crc32c(&h);
        put_u32(&mut h, crc);
        w.write_all(&h)?;
        Ok(w)
    }

    fn write_all(&mut self, b: &[u8]) -> anyhow::Result<()> {
        self.out
            .write_all(b)
            .with_context(|| format!("writing {}", self.path.display()))
    }

    fn record(&mut self, kind: u8) -> anyhow::Result<()> {
        let len = u32::try_from(self.body.len()).context("a record over 4 GiB")?;
        let crc = crc32c::crc32c_append(crc32c::crc32c(&[kind]), &self.body);
        let mut h = Vec::with_capacity(9);
        h.push(kind);
        put_u32(&mut h, len);
        put_u32(&mut h, crc);
        self.write_all(&h)?;
        let body = std::mem::take(&mut self.body);
        self.write_all(&body)?;
        self.body = body;
        Ok(())
    }

    /// Appends one object.
    pub(crate) fn push(
        &mut self,
        bucket: &[u8],
        key: &[u8],
        meta: &[u8],
        value: &[u8],
    ) -> anyhow::Result<()> {
        self.body.clear();
        for f in [bucket, key, meta, value] {
            let mut b = std::mem::take(&mut self.body);
            put_bytes(&mut b, f)?;
            self.body = b;
        }
        self.record(KIND_OBJECT)?;
        self.objects += 1;
        self.data_bytes += (bucket.len() + key.len() + meta.len() + value.len()) as u64;
        Ok(())
    }

    /// Writes the end record, syncs the file and says what it holds.
    pub(crate) fn finish(mut self) -> anyhow::Result<FileEntry> {
        self.body.clear();
        self.body.extend_from_slice(&self.objects.to_le_bytes());
        self.body.extend_from_slice(&self.data_bytes.to_le_bytes());
        self.record(KIND_END)?;
        self.out
            .flush()
            .with_context(|| format!("writing {}", self.path.display()))?;
        self.out
            .inner
            .get_ref()
            .sync_all()
            .with_context(|| format!("syncing {}", self.path.display()))?;
        Ok(FileEntry {
            name: self.name,
            partition: Some(self.partition),
            objects: self.objects,
            data_bytes: self.data_bytes,
            size: self.out.size,
            crc32c: self.out.crc,
        })
    }
}

/// Writes a metadata file (`ring.json`, ...) and syncs it; its entry.
pub(crate) fn write_meta_file(dir: &Path, name: &str, bytes: &[u8]) -> anyhow::Result<FileEntry> {
    let path = dir.join(name);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&path)
        .with_context(|| format!("creating {}", path.display()))?;
    f.write_all(bytes)
        .and_then(|()| f.sync_all())
        .with_context(|| format!("writing {}", path.display()))?;
    Ok(FileEntry {
        name: name.to_string(),
        partition: None,
        objects: 0,
        data_bytes: 0,
        size: bytes.len() as u64,
        crc32c: crc32c::crc32c(bytes),
    })
}

/// Reads a metadata file the manifest lists, checking its size and crc32c.
pub(crate) fn read_meta_file(dir: &Path, e: &FileEntry) -> anyhow::Result<Vec<u8>> {
    let path = dir.join(&e.name);
    let b = std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
    if b.len() as u64 != e.size || crc32c::crc32c(&b) != e.crc32c {
        bail!(
            "{} is damaged: its size or checksum is not the manifest's",
            path.display()
        );
    }
    Ok(b)
}

/// A reader that checksums what passes.
struct Checking<R> {
    inner: R,
    size: u64,
    crc: u32,
}

impl<R: Read> Read for Checking<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.crc = crc32c::crc32c_append(self.crc, &buf[..n]);
        self.size += n as u64;
        Ok(n)
    }
}

/// Reads one partition file, checking every record; [`Self::finish`]
/// checks the end record and the whole file against the manifest.
pub(crate) struct PartitionReader {
    input: Checking<BufReader<std::fs::File>>,
    path: std::path::PathBuf,
    entry: FileEntry,
    objects: u64,
    data_bytes: u64,
    ended: bool,
}

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut a = [0u8; 4];
    a.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(a)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut a = [0u8; 8];
    a.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(a)
}

impl PartitionReader {
    /// Opens the file of `entry` and checks its header (magic, version,
    /// checksum, ring size and partition).
    pub(crate) fn open(dir: &Path, entry: &FileEntry, ring_size: u32) -> anyhow::Result<Self> {
        let path = dir.join(&entry.name);
        let f =
            std::fs::File::open(&path).with_context(|| format!("opening {}", path.display()))?;
        let mut r = PartitionReader {
            input: Checking {
                inner: BufReader::with_capacity(1 << 20, f),
                size: 0,
                crc: 0,
            },
            path,
            entry: entry.clone(),
            objects: 0,
            data_bytes: 0,
            ended: false,
        };
        let mut h = [0u8; 24];
        r.read_exact(&mut h)?;
        if &h[..8] != MAGIC || crc32c::crc32c(&h[..20]) != u32_at(&h, 20) {
            bail!(
                "{}: not a backup partition file, or a damaged header",
                r.path.display()
            );
        }
        let (v, ring, p) = (u32_at(&h, 8), u32_at(&h, 12), u32_at(&h, 16));
        if v != VERSION || ring != ring_size || Some(p) != entry.partition {
            bail!(
                "{}: version {v}, ring {ring}, partition {p}; the manifest says version {VERSION}, ring {ring_size}, partition {:?}",
                r.path.display(),
                entry.partition
            );
        }
        Ok(r)
    }

    fn read_exact(&mut self, b: &mut [u8]) -> anyhow::Result<()> {
        self.input
            .read_exact(b)
            .with_context(|| format!("{}: truncated or unreadable", self.path.display()))
    }

    /// The next object, `None` after the end record; any damage is an error.
    pub(crate) fn next_record(&mut self) -> anyhow::Result<Option<Record>> {
        if self.ended {
            return Ok(None);
        }
        let mut h = [0u8; 9];
        self.read_exact(&mut h)?;
        let (kind, len, crc) = (h[0], u32_at(&h, 1) as usize, u32_at(&h, 5));
        if len > MAX_RECORD {
            bail!("{}: a record of {len} bytes (damaged)", self.path.display());
        }
        let mut body = vec![0u8; len];
        self.read_exact(&mut body)?;
        if crc32c::crc32c_append(crc32c::crc32c(&[kind]), &body) != crc {
            bail!(
                "{}: record {} fails its checksum (damaged)",
                self.path.display(),
                self.objects + 1
            );
        }
        match kind {
            KIND_OBJECT => {
                let mut fields: Vec<Vec<u8>> = Vec::with_capacity(4);
                let mut at = 0usize;
                for _ in 0..4 {
                    if body.len() < at + 4 {
                        bail!("{}: a record too short (damaged)", self.path.display());
                    }
                    let n = u32_at(&body, at) as usize;
                    at += 4;
                    let Some(f) = body.get(at..at + n) else {
                        bail!("{}: a record too short (damaged)", self.path.display());
                    };
                    fields.push(f.to_vec());
                    at += n;
                }
                if at != body.len() {
                    bail!(
                        "{}: a record with trailing bytes (damaged)",
                        self.path.display()
                    );
                }
                let value = fields.pop().unwrap_or_default();
                let meta = fields.pop().unwrap_or_default();
                let key = fields.pop().unwrap_or_default();
                let bucket = fields.pop().unwrap_or_default();
                let rec = Record {
                    bucket,
                    key,
                    meta,
                    value,
                };
                self.objects += 1;
                self.data_bytes += rec.data_bytes();
                Ok(Some(rec))
            }
            KIND_END if body.len() == 16 => {
                if u64_at(&body, 0) != self.objects || u64_at(&body, 8) != self.data_bytes {
                    bail!(
                        "{}: the end record's counts are not the file's (damaged)",
                        self.path.display()
                    );
                }
                self.ended = true;
                Ok(None)
            }
            _ => bail!(
                "{}: an unknown record kind {kind} (damaged)",
                self.path.display()
            ),
        }
    }

    /// After the end record: checks that nothing follows it and that the
    /// file's size, crc32c and counts are the manifest's.
    pub(crate) fn finish(mut self) -> anyhow::Result<()> {
        if !self.ended {
            bail!("{}: read before its end", self.path.display());
        }
        let mut rest = Vec::new();
        self.input
            .read_to_end(&mut rest)
            .with_context(|| format!("reading {}", self.path.display()))?;
        let e = &self.entry;
        if !rest.is_empty()
            || self.input.size != e.size
            || self.input.crc != e.crc32c
            || self.objects != e.objects
            || self.data_bytes != e.data_bytes
        {
            bail!(
                "{}: size, checksum or counts are not the manifest's (damaged or replaced)",
                self.path.display()
            );
        }
        Ok(())
    }
}

/// Reads every object of a partition file, checking it whole; the count.
pub(crate) fn verify_partition(dir: &Path, e: &FileEntry, ring_size: u32) -> anyhow::Result<u64> {
    let mut r = PartitionReader::open(dir, e, ring_size)?;
    let mut n = 0;
    while r.next_record()?.is_some() {
        n += 1;
    }
    r.finish()?;
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path) -> FileEntry {
        let mut w = PartitionWriter::create(dir, 8, 3).expect("create");
        w.push(b"b", b"k1", b"meta", b"value").expect("push");
        w.push(b"b", b"k2", b"", b"").expect("push");
        w.finish().expect("finish")
    }

    #[test]
    fn a_partition_file_reads_back_and_damage_is_found() {
        let d = tempfile::tempdir().expect("tempdir");
        let e = write(d.path());
        assert_eq!((e.objects, e.partition), (2, Some(3)));
        let mut r = PartitionReader::open(d.path(), &e, 8).expect("open");
        let first = r.next_record().expect("read").expect("a record");
        assert_eq!(first.key, b"k1");
        assert_eq!(first.value, b"value");
        assert!(r.next_record().expect("read").is_some());
        assert!(r.next_record().expect("read").is_none());
        r.finish().expect("matches the manifest entry");
        assert!(
            PartitionReader::open(d.path(), &e, 16).is_err(),
            "another ring size"
        );

        // Every single flipped byte is found.
        let path = d.path().join(&e.name);
        let good = std::fs::read(&path).expect("read");
        for i in 0..good.len() {
            let mut bad = good.clone();
            bad[i] ^= 0x40;
            std::fs::write(&path, &bad).expect("write");
            assert!(
                verify_partition(d.path(), &e, 8).is_err(),
                "byte {i} flipped"
            );
        }
        // A truncated file too.
        std::fs::write(&path, &good[..good.len() - 3]).expect("write");
        assert!(verify_partition(d.path(), &e, 8).is_err());
    }

    #[test]
    fn the_manifest_round_trips_and_damage_is_found() {
        let d = tempfile::tempdir().expect("tempdir");
        let m = Manifest {
            format: FORMAT.into(),
            version: VERSION,
            created_unix: 1,
            created_by: "test".into(),
            cluster_id: "c".into(),
            ring_size: 8,
            nodes: vec!["n1".into()],
            objects: 2,
            data_bytes: 10,
            partitions: vec![write(d.path())],
            metadata: vec![],
        };
        m.write(d.path()).expect("write");
        assert_eq!(Manifest::read(d.path()).expect("read"), m);
        let path = d.path().join(MANIFEST);
        let text = std::fs::read_to_string(&path).expect("read");
        std::fs::write(&path, text.replace("\"objects\": 2", "\"objects\": 3")).expect("write");
        assert!(Manifest::read(d.path()).is_err());
        std::fs::remove_file(&path).expect("rm");
        let e = Manifest::read(d.path()).err().map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("no manifest.json")));
    }
}
