//! `bitcask`: a log-structured hash table after Basho's bitcask paper
//! (Sheehy & Smith, 2010), written here.
//!
//! An in-memory **keydir** maps every live key to (file, offset, length,
//! timestamp, expiry). Writes append one record to the active data file; a
//! GET is one keydir lookup and one positional read. When the active file
//! passes `max_file_bytes` it is synced, closed and a **hint file** (the
//! keydir entries of that file) is written beside it, so opening reads hint
//! files instead of data. **Merge** rewrites the live records of files whose
//! dead bytes or fragmentation pass a threshold into the active file and
//! deletes them. Like Riak's bitcask: no secondary indexes, no ordered keys,
//! no head folds (metadata lives in the data files), no native AAE.
//!
//! # Directory
//!
//! ```text
//! DIR/STORE           "basalt-bitcask 1"
//! DIR/LOCK            flock'd while open
//! DIR/NNNNNNNN.data   data files; the highest is the active one
//! DIR/NNNNNNNN.hint   hint file of a closed data file
//! ```
//!
//! Every open starts a new active file (the previous one is closed, and its
//! hint written, after it is scanned), so data files are never appended to
//! after a restart and a torn tail needs no truncation.
//!
//! # Formats (integers little-endian, checksums CRC32C)
//!
//! ```text
//! data   := magic "BSLTBCD1" | version:u32 (=1) | reserved:u32 | record*
//! record := magic:u32 "BCR1" | crc:u32 | tstamp_us:u64 | expires_at:u64
//!           | flags:u8 (0 put, 1 tombstone) | key_len:u32 | meta_len:u32 | value_len:u32
//!           | key | metadata | value
//! crc    := crc32c(every byte after the crc field)
//! key    := basalt_engine::key::object(bucket, key)   (escaped, so buckets are prefixes)
//! hint   := magic "BSLTBCH1" | version:u32 (=1) | count:u64 | entry{count} | crc:u32
//! entry  := offset:u64 | len:u32 | tstamp_us:u64 | expires_at:u64 | flags:u8
//!           | key_len:u32 | key
//! ```
//!
//! The hint's crc covers everything before it. Hints list tombstones too, so
//! a reopen removes keys deleted after an older file wrote them.
//!
//! # Recovery and corruption
//!
//! Files are applied in id order (later records win). A closed file with a
//! valid hint is loaded from it; otherwise the data file is scanned, each
//! record's CRC checked, and a damaged region skipped by resynchronising on
//! the record magic (counted in `corrupt_regions`). A GET re-checks the
//! record's CRC and key: damage after the hint was written is reported as
//! `Corrupt`, never returned as data.
//!
//! # Merge
//!
//! After each roll, if any closed file has fragmentation (dead keys / keys)
//! ≥ `frag_merge_trigger` or dead bytes ≥ `dead_bytes_merge_trigger`, every
//! closed file with fragmentation ≥ `frag_threshold` or dead bytes ≥
//! `dead_bytes_threshold` is merged: its live records (those the keydir
//! points at) are copied unchanged to the active file and the keydir
//! updated; its tombstones are copied too while an older, unmerged file
//! exists (it may hold the deleted key); then the active file is synced and
//! the merged files and hints are deleted. (Riak's defaults: 60%, 512 MiB,
//! 40%, 128 MiB.) A merge runs in steps, in the writing thread under the
//! write lock: each write after the trigger reads the next
//! [`MERGE_STEP_RECORDS`] records or [`MERGE_STEP_BYTES`] of the merged
//! files, whichever comes first, and copies the live ones, so no write
//! waits for a whole merge (Riak merges in a background process instead).
//! A merge, like a recovery scan, reads a data file through a window of
//! [`scanner::SCAN_WINDOW_BYTES`] (4 MiB), never the whole file.
//!
//! # Snapshots
//!
//! A snapshot copies the keydir (O(keys)) and holds every data file open by
//! `Arc<File>`, so merges may delete files under it.
//!
//! # Files
//!
//! This file holds the keydir, opening and recovery, the write path and
//! the [`basalt_backend::Backend`] implementation (`Reads`, `Writes`,
//! `Admin`); `format` the record and hint formats, `scanner` the windowed
//! read of a data file's records, `merge` the merge,
//! `snapshot` the frozen keydir and the folds.

mod format;
mod merge;
mod scanner;
mod snapshot;

use snapshot::{bucket_keys, fold_key_list};

use crate::{check_name, check_write, claim_dir, expired, now_secs, now_us, BackendConfig};
use basalt_backend::{
    not_supported, value_hash, Admin, BackendError, BackendSnapshot, BackendStats, Capabilities,
    Capability, FoldOptions, FoldOutcome, Head, HeadFn, IndexPage, IndexQuery, KeyFn, KeyRange,
    Object, Reads, Result, WriteOptions, Writes,
};
use basalt_engine::key;
use format::{HintEntry, FLAG_PUT, FLAG_TOMBSTONE};
use parking_lot::{Mutex, RwLock};
use std::collections::{BTreeSet, HashMap};
use std::fs::{File, OpenOptions};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

/// The backend's name.
pub const NAME: &str = "bitcask";

/// Bitcask settings (Riak's names).
#[derive(Debug, Clone)]
pub struct BitcaskOptions {
    /// Roll the active file past this size.
    pub max_file_bytes: u64,
    /// Sync every write.
    pub sync: bool,
    /// Merge when a file's fragmentation (percent of dead keys) reaches this.
    pub frag_merge_trigger: u32,
    /// Merge when a file's dead bytes reach this.
    pub dead_bytes_merge_trigger: u64,
    /// Once merging, include files at this fragmentation percent.
    pub frag_threshold: u32,
    /// Once merging, include files with this many dead bytes.
    pub dead_bytes_threshold: u64,
}

impl Default for BitcaskOptions {
    fn default() -> Self {
        BitcaskOptions {
            max_file_bytes: 256 << 20,
            sync: false,
            frag_merge_trigger: 60,
            dead_bytes_merge_trigger: 512 << 20,
            frag_threshold: 40,
            dead_bytes_threshold: 128 << 20,
        }
    }
}

impl BitcaskOptions {
    /// Defaults adjusted by the common config (`test_min` shrinks files and
    /// thresholds so tests roll and merge).
    pub fn from_config(c: &BackendConfig) -> BitcaskOptions {
        let mut o = BitcaskOptions {
            sync: c.sync,
            ..BitcaskOptions::default()
        };
        if c.test_min {
            o.max_file_bytes = 32 << 10;
            o.dead_bytes_merge_trigger = 64 << 10;
            o.dead_bytes_threshold = 16 << 10;
        }
        o
    }
}

/// Where a key's current record lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Loc {
    file: u32,
    offset: u64,
    len: u32,
    tstamp_us: u64,
    expires_at: u64,
}

#[derive(Debug, Default, Clone, Copy)]
struct FileStat {
    bytes: u64,
    dead_bytes: u64,
    keys: u64,
    dead_keys: u64,
}

struct Active {
    id: u32,
    file: Arc<File>,
    size: u64,
    hints: Vec<HintEntry>,
}

struct Writer {
    active: Active,
    stats: HashMap<u32, FileStat>,
    /// True while a merge job exists (in `job`, or taken out by the step
    /// that is running it): no second merge starts meanwhile.
    merging: bool,
    /// The merge under way, advanced a few records per write.
    job: Option<MergeJob>,
}

/// Records a write reads for a merge under way: the merge's cost is spread
/// over the writes that follow its trigger instead of stalling one write
/// for the whole merge (a multi-second pause at 256 MiB files).
pub const MERGE_STEP_RECORDS: usize = 64;

/// Bytes a write reads for a merge under way, whichever of this and
/// [`MERGE_STEP_RECORDS`] comes first (at least one record). 64 records of
/// 50 KB made every write during a merge read and copy up to 3.2 MB (the
/// 50 KB Test Pilot run fell to a fifth of its rate for 40 s). Merged files
/// are ≥ 40 % dead (`frag_threshold`) or hold ≥ 128 MiB dead in ≤ 256 MiB
/// (`dead_bytes_threshold`), so a step reclaims ≥ 100 KiB: twice the
/// garbage of a 50 KB overwrite, and more for smaller ones.
pub const MERGE_STEP_BYTES: u64 = 256 << 10;

/// What one merge step may still read.
#[derive(Debug, Clone, Copy)]
struct StepBudget {
    records: usize,
    bytes: u64,
}

impl StepBudget {
    /// One write's share of a merge.
    const WRITE: StepBudget = StepBudget {
        records: MERGE_STEP_RECORDS,
        bytes: MERGE_STEP_BYTES,
    };
    /// No bound (a merge run to its end by tools and tests).
    const ALL: StepBudget = StepBudget {
        records: usize::MAX,
        bytes: u64::MAX,
    };

    fn left(&self) -> bool {
        self.records > 0 && self.bytes > 0
    }

    /// Counts one record of `len` bytes read.
    fn spend(&mut self, len: usize) {
        self.records = self.records.saturating_sub(1);
        self.bytes = self.bytes.saturating_sub(len as u64);
    }
}

/// An incremental merge: the files to merge and how far it has got.
struct MergeJob {
    pick: Vec<u32>,
    picked: BTreeSet<u32>,
    /// Index in `pick` of the file being copied (or next to load).
    next_file: usize,
    /// The file being copied.
    current: Option<MergeFile>,
}

/// One file of a merge, read through a bounded window.
struct MergeFile {
    id: u32,
    /// Its records, in order.
    records: scanner::Scanner<Arc<File>>,
    /// An older file is not part of the merge: tombstones must be kept.
    older_unmerged: bool,
}

type Files = HashMap<u32, Arc<File>>;

/// The bitcask backend.
pub struct Bitcask {
    dir: PathBuf,
    opts: BitcaskOptions,
    keydir: RwLock<HashMap<Vec<u8>, Loc>>,
    files: RwLock<Files>,
    writer: Mutex<Writer>,
    closed: AtomicBool,
    merges: AtomicU64,
    /// Bytes of records merges have read (live and dead).
    merge_bytes_read: AtomicU64,
    corrupt_regions: AtomicU64,
    _lock: basalt_engine::lock::DirLock,
}

impl std::fmt::Debug for Bitcask {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Bitcask").field("dir", &self.dir).finish()
    }
}

fn data_path(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("{id:08}.data"))
}

fn hint_path(dir: &Path, id: u32) -> PathBuf {
    dir.join(format!("{id:08}.hint"))
}

fn io<'a>(op: &'static str, path: &'a Path) -> impl FnOnce(std::io::Error) -> BackendError + 'a {
    move |e| BackendError::io(op, path, e)
}

fn create_data(dir: &Path, id: u32) -> Result<Active> {
    let p = data_path(dir, id);
    let f = OpenOptions::new()
        .read(true)
        .write(true)
        .create_new(true)
        .open(&p)
        .map_err(io("create", &p))?;
    f.write_all_at(&format::header(), 0)
        .map_err(io("write", &p))?;
    basalt_engine::fsutil::sync_dir(dir).map_err(crate::from_engine)?;
    Ok(Active {
        id,
        file: Arc::new(f),
        size: format::HEADER_BYTES,
        hints: Vec::new(),
    })
}

fn write_hint(dir: &Path, id: u32, hints: &[HintEntry]) -> Result<()> {
    basalt_engine::fsutil::write_atomic(&hint_path(dir, id), &format::encode_hint(hints))
        .map_err(crate::from_engine)
}

/// Reads and checks the record at `loc` of `file`.
fn read_record(
    dir: &Path,
    files: &Files,
    ekey: &[u8],
    loc: &Loc,
) -> Result<(Vec<u8>, Vec<u8>, u64)> {
    let p = data_path(dir, loc.file);
    let f = files
        .get(&loc.file)
        .ok_or_else(|| BackendError::corrupt(&p, "keydir points at a missing data file"))?;
    let mut buf = vec![0u8; loc.len as usize];
    f.read_exact_at(&mut buf, loc.offset).map_err(|e| {
        if e.kind() == std::io::ErrorKind::UnexpectedEof {
            BackendError::corrupt(&p, format!("record at {} is truncated", loc.offset))
        } else {
            BackendError::io("read", &p, e)
        }
    })?;
    let rec = format::decode_record(&buf)
        .map_err(|why| BackendError::corrupt(&p, format!("record at {}: {why}", loc.offset)))?;
    if rec.key != ekey || rec.flags != FLAG_PUT {
        return Err(BackendError::corrupt(
            &p,
            format!("record at {} is not the key's", loc.offset),
        ));
    }
    let h = value_hash(rec.value);
    Ok((rec.value.to_vec(), rec.meta.to_vec(), h))
}

fn head_of(loc: &Loc, value_len: u64, meta: Vec<u8>, hash: u64) -> Head {
    Head {
        version: 0,
        size: value_len,
        value_hash: hash,
        last_modified_us: loc.tstamp_us,
        expires_at: loc.expires_at,
        metadata: meta,
    }
}

impl Bitcask {
    /// Opens (or creates) a bitcask in `dir`.
    pub fn open(dir: &Path, opts: BitcaskOptions) -> Result<Bitcask> {
        let lock = claim_dir(dir, NAME)?;
        let mut ids: Vec<u32> = Vec::new();
        for e in std::fs::read_dir(dir).map_err(io("list", dir))?.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(id) = name
                .strip_suffix(".data")
                .and_then(|s| s.parse::<u32>().ok())
            {
                ids.push(id);
            }
        }
        ids.sort_unstable();
        let mut keydir: HashMap<Vec<u8>, Loc> = HashMap::new();
        let mut files = Files::new();
        let mut stats: HashMap<u32, FileStat> = HashMap::new();
        let mut corrupt = 0u64;
        for &id in &ids {
            let p = data_path(dir, id);
            let f = File::open(&p).map_err(io("open", &p))?;
            let size = f.metadata().map_err(io("stat", &p))?.len();
            refuse_newer(&f, &p)?;
            let hints = std::fs::read(hint_path(dir, id))
                .ok()
                .and_then(|b| format::decode_hint(&b));
            let entries = match hints {
                Some(h) => h,
                None => {
                    use scanner::ReadAt;
                    let mut magic = [0u8; 8];
                    let got = f.read_full_at(&mut magic, 0).map_err(io("read", &p))?;
                    if magic.get(..got) != Some(&format::DATA_MAGIC[..]) {
                        corrupt += 1;
                    }
                    let mut records = scanner::Scanner::new(&f, size, scanner::SCAN_WINDOW_BYTES);
                    let mut h: Vec<HintEntry> = Vec::new();
                    while let Some((offset, raw)) = records.next().map_err(io("read", &p))? {
                        let Ok(r) = format::decode_record(raw) else {
                            continue;
                        };
                        h.push(HintEntry {
                            offset,
                            len: raw.len() as u32,
                            tstamp_us: r.tstamp_us,
                            expires_at: r.expires_at,
                            flags: r.flags,
                            key: r.key.to_vec(),
                        });
                    }
                    let damaged = records.damaged();
                    corrupt += damaged;
                    if damaged > 0 {
                        tracing::warn!(target: "basalt::bitcask", "C0001 {}: skipped {damaged} damaged region(s)", p.display());
                    }
                    write_hint(dir, id, &h)?;
                    h
                }
            };
            let st = stats.entry(id).or_default();
            st.bytes = size;
            for e in entries {
                st.keys += 1;
                if e.flags == FLAG_TOMBSTONE {
                    keydir.remove(&e.key);
                    continue;
                }
                keydir.insert(
                    e.key,
                    Loc {
                        file: id,
                        offset: e.offset,
                        len: e.len,
                        tstamp_us: e.tstamp_us,
                        expires_at: e.expires_at,
                    },
                );
            }
            files.insert(id, Arc::new(f));
        }
        // Dead = everything the keydir does not point at.
        let mut live: HashMap<u32, (u64, u64)> = HashMap::new();
        for loc in keydir.values() {
            let e = live.entry(loc.file).or_default();
            e.0 += u64::from(loc.len);
            e.1 += 1;
        }
        for (id, st) in stats.iter_mut() {
            let (lb, lk) = live.get(id).copied().unwrap_or_default();
            st.dead_bytes = st.bytes.saturating_sub(lb + format::HEADER_BYTES);
            st.dead_keys = st.keys.saturating_sub(lk);
        }
        let next = ids.last().map_or(1, |l| l + 1);
        let active = create_data(dir, next)?;
        files.insert(next, Arc::clone(&active.file));
        stats.insert(
            next,
            FileStat {
                bytes: format::HEADER_BYTES,
                ..FileStat::default()
            },
        );
        Ok(Bitcask {
            dir: dir.to_path_buf(),
            opts,
            keydir: RwLock::new(keydir),
            files: RwLock::new(files),
            writer: Mutex::new(Writer {
                active,
                stats,
                merging: false,
                job: None,
            }),
            closed: AtomicBool::new(false),
            merges: AtomicU64::new(0),
            merge_bytes_read: AtomicU64::new(0),
            corrupt_regions: AtomicU64::new(corrupt),
            _lock: lock,
        })
    }

    fn check_open(&self) -> Result<()> {
        if self.closed.load(Ordering::Acquire) {
            return Err(BackendError::Closed("bitcask is closed".into()));
        }
        Ok(())
    }

    /// Appends one encoded record for `ekey` and updates keydir and stats.
    /// Caller holds the writer lock.
    fn append(
        &self,
        w: &mut Writer,
        ekey: &[u8],
        rec: &[u8],
        tstamp_us: u64,
        expires_at: u64,
        flags: u8,
    ) -> Result<()> {
        let a = &mut w.active;
        let p = data_path(&self.dir, a.id);
        a.file.write_all_at(rec, a.size).map_err(io("write", &p))?;
        let loc = Loc {
            file: a.id,
            offset: a.size,
            len: rec.len() as u32,
            tstamp_us,
            expires_at,
        };
        a.hints.push(HintEntry {
            offset: loc.offset,
            len: loc.len,
            tstamp_us,
            expires_at,
            flags,
            key: ekey.to_vec(),
        });
        a.size += rec.len() as u64;
        let active_id = a.id;
        let old = {
            let mut kd = self.keydir.write();
            if flags == FLAG_PUT {
                kd.insert(ekey.to_vec(), loc)
            } else {
                kd.remove(ekey)
            }
        };
        let st = w.stats.entry(active_id).or_default();
        st.bytes += rec.len() as u64;
        st.keys += 1;
        if flags == FLAG_TOMBSTONE {
            st.dead_bytes += rec.len() as u64;
            st.dead_keys += 1;
        }
        if let Some(old) = old {
            let s = w.stats.entry(old.file).or_default();
            s.dead_bytes += u64::from(old.len);
            s.dead_keys += 1;
        }
        Ok(())
    }

    /// Syncs, closes the active file with its hint, starts a new one, and
    /// merges if a trigger is reached.
    fn roll(&self, w: &mut Writer) -> Result<()> {
        let p = data_path(&self.dir, w.active.id);
        w.active.file.sync_all().map_err(io("fsync", &p))?;
        write_hint(&self.dir, w.active.id, &w.active.hints)?;
        let next = create_data(&self.dir, w.active.id + 1)?;
        self.files.write().insert(next.id, Arc::clone(&next.file));
        w.stats.insert(
            next.id,
            FileStat {
                bytes: format::HEADER_BYTES,
                ..FileStat::default()
            },
        );
        w.active = next;
        if !w.merging {
            self.maybe_merge(w)?;
        }
        Ok(())
    }

    fn write(
        &self,
        ekey: &[u8],
        rec: &[u8],
        tstamp_us: u64,
        expires_at: u64,
        flags: u8,
        sync: bool,
    ) -> Result<()> {
        self.check_open()?;
        let mut w = self.writer.lock();
        self.check_open()?;
        self.append(&mut w, ekey, rec, tstamp_us, expires_at, flags)?;
        if sync || self.opts.sync {
            let p = data_path(&self.dir, w.active.id);
            w.active.file.sync_data().map_err(io("fdatasync", &p))?;
        }
        if w.active.size >= self.opts.max_file_bytes {
            self.roll(&mut w)?;
        }
        if w.job.is_some() {
            self.merge_step(&mut w, StepBudget::WRITE)?;
        }
        Ok(())
    }

    fn lookup(&self, ekey: &[u8]) -> Result<Option<Object>> {
        self.check_open()?;
        // Retry once: a merge may move the record between the two reads.
        for _ in 0..3 {
            let Some(loc) = self.keydir.read().get(ekey).copied() else {
                return Ok(None);
            };
            if expired(loc.expires_at, now_secs()) {
                return Ok(None);
            }
            let files = self.files.read();
            if !files.contains_key(&loc.file) {
                drop(files);
                continue;
            }
            let (value, meta, h) = read_record(&self.dir, &files, ekey, &loc)?;
            return Ok(Some(Object {
                head: head_of(&loc, value.len() as u64, meta, h),
                value,
            }));
        }
        Err(BackendError::Other {
            backend: NAME,
            message: "record moved repeatedly during a read".into(),
        })
    }
}

// get, head and fold_keys read the keydir directly (fold_keys copies only
// the bucket's keys, a snapshot the whole keydir); fold_heads is
// NotSupported whatever the state; the rest go through a snapshot.
impl Reads for Bitcask {
    fn get(&self, bucket: &[u8], k: &[u8]) -> Result<Option<Object>> {
        self.lookup(&key::object(bucket, k))
    }

    fn head(&self, bucket: &[u8], k: &[u8]) -> Result<Option<Head>> {
        Ok(self.lookup(&key::object(bucket, k))?.map(|o| o.head))
    }

    fn fold_keys(
        &self,
        bucket: &[u8],
        range: Option<&KeyRange>,
        f: &mut KeyFn<'_>,
    ) -> Result<FoldOutcome> {
        self.check_open()?;
        // Only the bucket's keys are copied (no whole-keydir copy).
        let keys = bucket_keys(&self.keydir.read(), bucket, range);
        Ok(fold_key_list(keys.into_iter().map(|(_, k, _)| k), f))
    }

    fn fold_heads(
        &self,
        _: Option<&[u8]>,
        _: Option<&KeyRange>,
        _: &FoldOptions,
        _: &mut HeadFn<'_>,
    ) -> Result<FoldOutcome> {
        Err(not_supported(NAME, Capability::FoldHeads))
    }

    basalt_backend::snapshot_reads!(fold_objects, list_buckets);
}

impl Writes for Bitcask {
    fn put(
        &self,
        bucket: &[u8],
        k: &[u8],
        value: &[u8],
        metadata: &[u8],
        opts: &WriteOptions,
    ) -> Result<()> {
        if !opts.index.is_empty() {
            return Err(not_supported(NAME, Capability::Indexes));
        }
        check_write(bucket, k, value, metadata)?;
        let ek = key::object(bucket, k);
        let ts = opts.last_modified_us.unwrap_or_else(now_us);
        let rec = format::encode_record(ts, opts.expires_at, FLAG_PUT, &ek, metadata, value);
        self.write(&ek, &rec, ts, opts.expires_at, FLAG_PUT, opts.sync)
    }

    fn delete(&self, bucket: &[u8], k: &[u8], opts: &WriteOptions) -> Result<()> {
        if !opts.index.is_empty() {
            return Err(not_supported(NAME, Capability::Indexes));
        }
        check_name("bucket", bucket)?;
        check_name("key", k)?;
        let ek = key::object(bucket, k);
        let ts = now_us();
        let rec = format::encode_record(ts, 0, FLAG_TOMBSTONE, &ek, b"", b"");
        self.write(&ek, &rec, ts, 0, FLAG_TOMBSTONE, opts.sync)
    }

    fn index_query(&self, _: &IndexQuery) -> Result<IndexPage> {
        Err(not_supported(NAME, Capability::Indexes))
    }
}

impl Admin for Bitcask {
    fn name(&self) -> &'static str {
        NAME
    }

    fn capabilities(&self) -> Capabilities {
        Capabilities::default()
    }

    fn snapshot(&self) -> Result<Box<dyn BackendSnapshot + '_>> {
        Ok(Box::new(self.frozen()?))
    }

    fn tictac_tree(&self) -> Result<Vec<u8>> {
        Err(not_supported(NAME, Capability::NativeAae))
    }

    fn stats(&self) -> Result<BackendStats> {
        let w = self.writer.lock();
        let dead: u64 = w.stats.values().map(|s| s.dead_bytes).sum();
        Ok(BackendStats {
            backend: NAME,
            counters: vec![
                ("keys".into(), self.keydir.read().len() as u64),
                ("data_files".into(), w.stats.len() as u64),
                ("dead_bytes".into(), dead),
                ("merges".into(), self.merges.load(Ordering::Relaxed)),
                (
                    "merge_bytes_read".into(),
                    self.merge_bytes_read.load(Ordering::Relaxed),
                ),
                (
                    "corrupt_regions".into(),
                    self.corrupt_regions.load(Ordering::Relaxed),
                ),
            ],
            disk_bytes: crate::disk_usage(&self.dir),
        })
    }

    fn sync(&self) -> Result<()> {
        self.check_open()?;
        let w = self.writer.lock();
        let p = data_path(&self.dir, w.active.id);
        w.active.file.sync_data().map_err(io("fdatasync", &p))
    }

    fn close(&self) -> Result<()> {
        let w = self.writer.lock();
        if self.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let p = data_path(&self.dir, w.active.id);
        w.active.file.sync_all().map_err(io("fsync", &p))?;
        write_hint(&self.dir, w.active.id, &w.active.hints)
    }
}

impl Drop for Bitcask {
    fn drop(&mut self) {
        if let Err(e) = self.close() {
            tracing::error!(target: "basalt::bitcask", "C0002 close on drop failed: {e}");
        }
    }
}

/// Fails when the data file `f` (at `p`) names a format version this build
/// does not read: its records are not scanned as if they were damage.
fn refuse_newer(f: &File, p: &Path) -> Result<()> {
    let mut header = [0u8; 12];
    if f.read_exact_at(&mut header, 0).is_err() {
        return Ok(()); // shorter than a header: the scan reports it
    }
    let (magic, version) = header.split_at(8);
    let found = version
        .first_chunk::<4>()
        .map_or(format::VERSION, |v| u32::from_le_bytes(*v));
    if magic == format::DATA_MAGIC && found != format::VERSION {
        return Err(BackendError::Other {
            backend: NAME,
            message: format!(
                "{}: bitcask data file format version {found}; this build reads version {}. It was written by a newer Basalt: run that version (the file is left untouched); if no newer Basalt wrote it, its header is damaged",
                p.display(),
                format::VERSION
            ),
        });
    }
    Ok(())
}
