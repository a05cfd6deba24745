//! The storage-backend boundary of Basalt: the [`Backend`] trait that every
//! backend (leveled, bitcask, RocksDB, memory) implements, made of three
//! small ones ([`Reads`], which a [`BackendSnapshot`] is too, [`Writes`]
//! and [`Admin`]), the storage types (also the leveled engine's: it
//! re-exports them), errors, and the shared [`conformance`] suite (feature
//! `conformance`).
//!
//! Like TiKV's `engine_traits`, this crate depends on no engine: a vnode (or
//! the CLI, or the load tool) talks to storage only through these types, and
//! the implementations live in `basalt-backends`.
//!
//! # Capabilities
//!
//! Backends differ in what they can do cheaply, as Riak's backends do.
//! [`Admin::capabilities`] says which of the optional features a backend
//! offers; a call that needs a missing one returns
//! [`BackendError::NotSupported`] naming the backend and the [`Capability`]:
//!
//! | capability | methods that need it |
//! |---|---|
//! | [`Capability::Indexes`] | [`Writes::index_query`], index changes in [`WriteOptions::index`] |
//! | [`Capability::FoldHeads`] | [`Reads::fold_heads`] (heads without reading values, with [`FoldOptions`] filters) |
//! | [`Capability::OrderedKeys`] | none: it says folds and listings come in key order |
//! | [`Capability::NativeAae`] | [`Admin::tictac_tree`] (a tictac tree kept up to date on writes) |
//!
//! # Tictac trees
//!
//! Every backend reports [`Head::value_hash`] as xxh3-64 of the value and
//! uses [`segment_of`] for segment filters, so a tree built from any
//! backend's folds (`basalt_backends::aae::build_tree`) equals the leveled
//! engine's for the same data.

#![warn(missing_docs)]

use std::fmt;
use std::ops::ControlFlow;
use std::path::PathBuf;

#[cfg(feature = "conformance")]
pub mod conformance;

/// The result type of every backend call.
pub type Result<T, E = BackendError> = std::result::Result<T, E>;

/// An optional feature of a backend (see the crate docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Capability {
    /// Secondary indexes (2i): index changes on writes and index queries.
    Indexes,
    /// Folds over object metadata that do not read values.
    FoldHeads,
    /// Keys come out of folds and listings in byte order.
    OrderedKeys,
    /// A tictac tree maintained on every write ([`Admin::tictac_tree`]).
    NativeAae,
}

impl Capability {
    /// The capability's name as used in messages and the CLI.
    pub fn name(self) -> &'static str {
        match self {
            Capability::Indexes => "indexes",
            Capability::FoldHeads => "fold_heads",
            Capability::OrderedKeys => "ordered_keys",
            Capability::NativeAae => "native_aae",
        }
    }
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a backend can do.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Capabilities {
    /// Secondary indexes.
    pub indexes: bool,
    /// Head folds without reading values.
    pub fold_heads: bool,
    /// Ordered folds and listings.
    pub ordered_keys: bool,
    /// A tictac tree maintained on writes.
    pub native_aae: bool,
}

impl Capabilities {
    /// True if the backend has `c`.
    pub fn has(&self, c: Capability) -> bool {
        match c {
            Capability::Indexes => self.indexes,
            Capability::FoldHeads => self.fold_heads,
            Capability::OrderedKeys => self.ordered_keys,
            Capability::NativeAae => self.native_aae,
        }
    }

    /// The names of the capabilities present, comma-separated ("-" if none).
    pub fn describe(&self) -> String {
        let names: Vec<&str> = [
            Capability::Indexes,
            Capability::FoldHeads,
            Capability::OrderedKeys,
            Capability::NativeAae,
        ]
        .into_iter()
        .filter(|c| self.has(*c))
        .map(Capability::name)
        .collect();
        if names.is_empty() {
            "-".into()
        } else {
            names.join(",")
        }
    }
}

/// Everything that can go wrong in a backend call.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BackendError {
    /// The backend lacks the capability the call needs.
    #[error("backend '{backend}' does not support {capability}")]
    NotSupported {
        /// The backend's name.
        backend: &'static str,
        /// The missing capability.
        capability: Capability,
    },
    /// Stored bytes failed a checksum or structural check; never returned as data.
    #[error("corrupt data in {path}: {reason}")]
    Corrupt {
        /// The damaged file or directory.
        path: PathBuf,
        /// What check failed.
        reason: String,
    },
    /// An operating-system I/O call failed.
    #[error("{op} {path}: {source}")]
    Io {
        /// What was being done.
        op: &'static str,
        /// The file or directory involved.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
    /// The caller passed something the backend refuses.
    #[error("invalid input: {0}")]
    InvalidInput(String),
    /// The directory was written by another backend (or another version).
    #[error("{path} holds a '{found}' store; it cannot be opened as '{expected}'")]
    WrongBackend {
        /// The data directory.
        path: PathBuf,
        /// What the directory's `STORE` marker (or contents) says.
        found: String,
        /// The marker of the backend that was asked to open it.
        expected: String,
    },
    /// Another process or handle holds the directory's lock.
    #[error("{path} is locked by another process or handle")]
    Locked {
        /// The data directory.
        path: PathBuf,
    },
    /// No backend of that name is built in.
    #[error("unknown backend '{name}'; known: {known}")]
    UnknownBackend {
        /// The name asked for.
        name: String,
        /// The names this build knows.
        known: String,
    },
    /// The backend (or the snapshot) is closed, expired or poisoned.
    #[error("closed: {0}")]
    Closed(String),
    /// Any other failure inside the backend, with its message.
    #[error("{backend}: {message}")]
    Other {
        /// The backend's name.
        backend: &'static str,
        /// What went wrong.
        message: String,
    },
}

impl BackendError {
    /// Builds an [`BackendError::Io`].
    pub fn io(op: &'static str, path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        BackendError::Io {
            op,
            path: path.into(),
            source,
        }
    }

    /// Builds a [`BackendError::Corrupt`].
    pub fn corrupt(path: impl Into<PathBuf>, reason: impl Into<String>) -> Self {
        BackendError::Corrupt {
            path: path.into(),
            reason: reason.into(),
        }
    }

    /// True if this reports damaged stored data.
    pub fn is_corruption(&self) -> bool {
        matches!(self, BackendError::Corrupt { .. })
    }
}

/// Metadata of an object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    /// A per-backend version number that grows with every write of the store
    /// (the engine's sequence number, SQN, of the current version); 0 if the
    /// backend keeps none.
    pub version: u64,
    /// Value size in bytes.
    pub size: u64,
    /// xxh3-64 of the value (the same on every backend).
    pub value_hash: u64,
    /// Last-modified time, microseconds since the Unix epoch.
    pub last_modified_us: u64,
    /// Expiry, seconds since the Unix epoch; 0 = never.
    pub expires_at: u64,
    /// User metadata given at put.
    pub metadata: Vec<u8>,
}

/// An object: value and metadata.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Object {
    /// The value.
    pub value: Vec<u8>,
    /// The metadata.
    pub head: Head,
}

/// The answer of a read that may only use memory ([`Reads::get_cached`],
/// [`Reads::head_cached`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Cached<T> {
    /// Answered from memory: the same answer the ordinary read gives.
    Hit(Option<T>),
    /// Answering would have read the disk or waited for a writer; the
    /// caller reads the ordinary way.
    Miss,
}

/// Add or remove one secondary-index entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum IndexOp {
    /// Add (field, term) → key.
    Add,
    /// Remove (field, term) → key.
    Remove,
}

/// One secondary-index change of a write (the caller supplies the diffs, as
/// in Riak). Fields end in `_bin` (byte terms) or `_int` (decimal `i64`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct IndexChange {
    /// Add or remove.
    pub op: IndexOp,
    /// Field name.
    pub field: Vec<u8>,
    /// Term as given.
    pub term: Vec<u8>,
}

impl IndexChange {
    /// An add.
    pub fn add(field: impl Into<Vec<u8>>, term: impl Into<Vec<u8>>) -> Self {
        IndexChange {
            op: IndexOp::Add,
            field: field.into(),
            term: term.into(),
        }
    }

    /// A removal.
    pub fn remove(field: impl Into<Vec<u8>>, term: impl Into<Vec<u8>>) -> Self {
        IndexChange {
            op: IndexOp::Remove,
            field: field.into(),
            term: term.into(),
        }
    }
}

/// Options of one put or delete.
#[derive(Debug, Clone, Default)]
pub struct WriteOptions {
    /// Return only once the write is on stable storage.
    pub sync: bool,
    /// Secondary-index changes ([`Capability::Indexes`]; a non-empty list on
    /// a backend without it is `NotSupported`). A delete does not remove
    /// index entries by itself.
    pub index: Vec<IndexChange>,
    /// Expiry, seconds since the Unix epoch; 0 = never.
    pub expires_at: u64,
    /// Last-modified time to record; `None` = now.
    pub last_modified_us: Option<u64>,
}

/// A secondary-index query (Riak's `RpbIndexReq`); the same semantics as the
/// leveled engine's (`$bucket`, `$key`, `_bin`, `_int`, regex, paging).
///
/// # Result order
///
/// Results come in (term, key) order: `_int` terms numerically, `_bin`
/// terms bytewise, then the object key bytewise; `$key` and `$bucket` in
/// key order.
///
/// # Resuming: `continuation` or `start_after`
///
/// Two ways to ask for the next page; setting both is
/// [`BackendError::InvalidInput`].
///
/// * `continuation`: the opaque string of the previous page of **this
///   backend** (its format is backend-specific; see docs/formats.md).
/// * `start_after`: an [`IndexCursor`] (term, key), backend-independent:
///   only results strictly after it in the order above. The term is the
///   term as results carry it (decimal text for `_int`, bytes for `_bin`);
///   for `$key` and `$bucket` only the key counts (the term is ignored);
///   in an equality query an empty term stands for the query's own term.
///   Backends seek to the cursor (the entries before it are not read), so
///   `max_results = n` with a cursor costs about `n` entries whatever the
///   position. A cluster coordinator sends every vnode the same cursor, the
///   last result it returned: each vnode's first `n` after it include every
///   one of the global first `n` that the vnode holds. A full page still
///   carries the backend's own `continuation`. To page a range query by
///   cursor, set `return_terms` so results carry the terms the next cursor
///   needs ([`IndexCursor::after`] builds it from the last result).
///
/// An `_int` cursor term that is not an `i64`, a key over 64 KiB or a term
/// over 64 KiB is `InvalidInput`.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexQuery {
    /// The bucket.
    pub bucket: Vec<u8>,
    /// `..._bin`, `..._int`, `$bucket` or `$key`.
    pub field: Vec<u8>,
    /// First term (inclusive), or the term of an equality query.
    pub start: Vec<u8>,
    /// Last term (inclusive); `None` = equality.
    pub end: Option<Vec<u8>>,
    /// Return terms (range queries and `$key` only).
    pub return_terms: bool,
    /// Keep only terms matching this regular expression (`_bin`, `$key`, `$bucket`).
    pub term_regex: Option<String>,
    /// Page size; a full page carries a continuation.
    pub max_results: Option<u32>,
    /// Resume after the page that returned this (opaque, backend-specific).
    pub continuation: Option<String>,
    /// Return only results strictly after this (term, key) (see
    /// "Resuming" above); not together with `continuation`.
    pub start_after: Option<IndexCursor>,
}

/// A position in an index query's result order (see [`IndexQuery`],
/// "Resuming"): results strictly after (`term`, `key`) are returned.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct IndexCursor {
    /// The term as results carry it: decimal text for `_int`, bytes for
    /// `_bin`; ignored for `$key` and `$bucket`; empty in an equality
    /// query = the query's term.
    pub term: Vec<u8>,
    /// The object key.
    pub key: Vec<u8>,
}

impl IndexCursor {
    /// The cursor after (`term`, `key`).
    pub fn new(term: impl Into<Vec<u8>>, key: impl Into<Vec<u8>>) -> Self {
        IndexCursor {
            term: term.into(),
            key: key.into(),
        }
    }

    /// The cursor after `r` (its term, or empty when it carries none).
    pub fn after(r: &IndexResult) -> Self {
        IndexCursor {
            term: r.term.clone().unwrap_or_default(),
            key: r.key.clone(),
        }
    }
}

impl IndexQuery {
    /// Equality query.
    pub fn eq(bucket: &[u8], field: &[u8], term: &[u8]) -> Self {
        IndexQuery {
            bucket: bucket.to_vec(),
            field: field.to_vec(),
            start: term.to_vec(),
            ..IndexQuery::default()
        }
    }

    /// Range query `start..=end`.
    pub fn range(bucket: &[u8], field: &[u8], start: &[u8], end: &[u8]) -> Self {
        IndexQuery {
            bucket: bucket.to_vec(),
            field: field.to_vec(),
            start: start.to_vec(),
            end: Some(end.to_vec()),
            ..IndexQuery::default()
        }
    }

    /// Checks the resume fields: `continuation` and `start_after` together
    /// are `InvalidInput` (every backend calls this first).
    pub fn check_resume(&self) -> Result<()> {
        if self.continuation.is_some() && self.start_after.is_some() {
            return Err(BackendError::InvalidInput(
                "index query: give either continuation or start_after, not both".into(),
            ));
        }
        Ok(())
    }
}

/// One index query result.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct IndexResult {
    /// The term, when `return_terms` applies.
    pub term: Option<Vec<u8>>,
    /// The object key.
    pub key: Vec<u8>,
}

/// One page of index results, in (term, key) order.
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IndexPage {
    /// The results.
    pub results: Vec<IndexResult>,
    /// Set when the page is full: pass it back for the next page.
    pub continuation: Option<String>,
}

/// An inclusive range of keys within one bucket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRange {
    /// First key (inclusive).
    pub start: Vec<u8>,
    /// Last key (inclusive).
    pub end: Vec<u8>,
}

impl KeyRange {
    /// The keys `start..=end`.
    pub fn new(start: &[u8], end: &[u8]) -> KeyRange {
        KeyRange {
            start: start.to_vec(),
            end: end.to_vec(),
        }
    }

    /// True if `key` lies in the range.
    pub fn contains(&self, key: &[u8]) -> bool {
        self.start.as_slice() <= key && key <= self.end.as_slice()
    }
}

/// The size of a tictac tree: its width (number of level-1 branches), each
/// branch covering 256 segments. The engine's trees and every backend's
/// folds use this one type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
pub enum TreeSize {
    /// Width 16: 4,096 segments.
    XXSmall,
    /// Width 64: 16,384 segments.
    XSmall,
    /// Width 256: 65,536 segments.
    Small,
    /// Width 1024: 262,144 segments.
    Medium,
    /// Width 4096: 1,048,576 segments (what Riak's cached AAE trees use).
    Large,
    /// Width 16384: 4,194,304 segments.
    XLarge,
}

impl TreeSize {
    /// Every size, smallest first.
    pub const ALL: [TreeSize; 6] = [
        TreeSize::XXSmall,
        TreeSize::XSmall,
        TreeSize::Small,
        TreeSize::Medium,
        TreeSize::Large,
        TreeSize::XLarge,
    ];

    /// Number of branches (level-1 entries).
    pub fn width(self) -> u32 {
        match self {
            TreeSize::XXSmall => 16,
            TreeSize::XSmall => 64,
            TreeSize::Small => 256,
            TreeSize::Medium => 1024,
            TreeSize::Large => 4096,
            TreeSize::XLarge => 16384,
        }
    }

    /// Number of segments (level-2 entries): `width × 256`, a power of two.
    pub fn segments(self) -> u32 {
        self.width() * 256
    }

    /// The byte used for this size in the engine's tree export format.
    pub fn to_byte(self) -> u8 {
        match self {
            TreeSize::XXSmall => 0,
            TreeSize::XSmall => 1,
            TreeSize::Small => 2,
            TreeSize::Medium => 3,
            TreeSize::Large => 4,
            TreeSize::XLarge => 5,
        }
    }

    /// Parses the export byte.
    pub fn from_byte(b: u8) -> Option<TreeSize> {
        TreeSize::ALL.get(usize::from(b)).copied()
    }

    /// Parses a name (`xxsmall`, `xsmall`, `small`, `medium`, `large`,
    /// `xlarge`; ASCII case ignored).
    pub fn from_name(name: &str) -> Option<TreeSize> {
        TreeSize::ALL
            .into_iter()
            .find(|s| s.name().eq_ignore_ascii_case(name))
    }

    /// The size's name, lower case.
    pub fn name(self) -> &'static str {
        match self {
            TreeSize::XXSmall => "xxsmall",
            TreeSize::XSmall => "xsmall",
            TreeSize::Small => "small",
            TreeSize::Medium => "medium",
            TreeSize::Large => "large",
            TreeSize::XLarge => "xlarge",
        }
    }
}

/// The tictac segment of (`bucket`, `key`) in a tree of `size`: the same
/// function as the engine's `tictac::segment_of` (xxh3-128 of the escaped
/// object key `'o' | esc(bucket) 00 01 | esc(key) 00 01`, where `esc` writes
/// 0x00 as 0x00 0xFF; `segment32 = (bits 16..32) << 16 | bits 0..16`, masked
/// to the tree's segment count).
pub fn segment_of(bucket: &[u8], key: &[u8], size: TreeSize) -> u32 {
    let mut enc = Vec::with_capacity(5 + bucket.len() + key.len());
    enc.push(b'o');
    for part in [bucket, key] {
        for &b in part {
            enc.push(b);
            if b == 0 {
                enc.push(0xFF);
            }
        }
        enc.extend_from_slice(&[0, 1]);
    }
    let h = xxhash_rust::xxh3::xxh3_128(&enc);
    let segment_id = (h & 0xFFFF) as u32;
    let extra = ((h >> 16) & 0xFFFF) as u32;
    ((extra << 16) | segment_id) & (size.segments() - 1)
}

/// xxh3-64 of a value: [`Head::value_hash`] on every backend.
pub fn value_hash(value: &[u8]) -> u64 {
    xxhash_rust::xxh3::xxh3_64(value)
}

/// Filters of a head fold.
#[derive(Debug, Clone, Default)]
pub struct FoldOptions {
    /// Pass only keys whose value is present in the value store (the
    /// leveled journal); backends that keep values with keys pass all.
    pub journal_check: bool,
    /// Pass only keys in these segments of a tree of this size ([`segment_of`]).
    pub segments: Option<(TreeSize, Vec<u32>)>,
    /// Pass only keys last modified within `low_us..=high_us`.
    pub modified_range: Option<(u64, u64)>,
    /// Stop after passing this many keys.
    pub max_objects: Option<u64>,
}

/// How a fold ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FoldOutcome {
    /// Keys passed to the callback.
    pub passed: u64,
    /// False if the callback or `max_objects` stopped the fold.
    pub complete: bool,
    /// Keys skipped by the journal check.
    pub missing_in_journal: u64,
}

/// Callback of [`Reads::fold_keys`].
pub type KeyFn<'a> = dyn FnMut(&[u8]) -> ControlFlow<()> + 'a;
/// Callback of [`Reads::fold_heads`]: (bucket, key, head).
pub type HeadFn<'a> = dyn FnMut(&[u8], &[u8], &Head) -> ControlFlow<()> + 'a;
/// Callback of [`Reads::fold_objects`]: (bucket, key, object).
pub type ObjectFn<'a> = dyn FnMut(&[u8], &[u8], Object) -> ControlFlow<()> + 'a;

/// Counters and sizes of a backend.
#[derive(Debug, Clone, Default)]
pub struct BackendStats {
    /// The backend's name.
    pub backend: &'static str,
    /// Named counters (backend-specific).
    pub counters: Vec<(String, u64)>,
    /// Bytes of the backend's files on disk (0 for memory).
    pub disk_bytes: u64,
}

/// The six reads (and memory-only forms of two), the same on a live
/// backend and on a snapshot of it.
///
/// A [`BackendSnapshot`] is `Reads` and nothing more; a [`Backend`] is
/// `Reads` plus [`Writes`] and [`Admin`]. A live backend without a faster
/// direct path answers a read from a fresh snapshot: [`snapshot_reads!`]
/// writes those methods (`Admin::snapshot(self)?.get(..)` and so on).
pub trait Reads: Send + Sync {
    /// The value and metadata of (`bucket`, `key`), or `None`.
    fn get(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Object>>;
    /// The metadata of (`bucket`, `key`), or `None` (may read the value on
    /// backends that store them together).
    fn head(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Head>>;
    /// [`Reads::get`] if it can be answered without waiting for the disk or
    /// a writer, else [`Cached::Miss`] (the default: the backend has no
    /// such read). A node runs it on its request's own thread, so it must
    /// never block; a `Hit` is the answer `get` gives.
    fn get_cached(&self, bucket: &[u8], key: &[u8]) -> Result<Cached<Object>> {
        let _ = (bucket, key);
        Ok(Cached::Miss)
    }
    /// [`Reads::head`] under [`Reads::get_cached`]'s rules.
    fn head_cached(&self, bucket: &[u8], key: &[u8]) -> Result<Cached<Head>> {
        let _ = (bucket, key);
        Ok(Cached::Miss)
    }
    /// Every live key of `bucket` (within `range`), in order if `ordered_keys`.
    fn fold_keys(
        &self,
        bucket: &[u8],
        range: Option<&KeyRange>,
        f: &mut KeyFn<'_>,
    ) -> Result<FoldOutcome>;
    /// Heads of `bucket` (every bucket with `None`) passing the filters of
    /// `opts` ([`Capability::FoldHeads`]).
    fn fold_heads(
        &self,
        bucket: Option<&[u8]>,
        range: Option<&KeyRange>,
        opts: &FoldOptions,
        f: &mut HeadFn<'_>,
    ) -> Result<FoldOutcome>;
    /// Objects of `bucket` (within `range`).
    fn fold_objects(
        &self,
        bucket: &[u8],
        range: Option<&KeyRange>,
        f: &mut ObjectFn<'_>,
    ) -> Result<FoldOutcome>;
    /// Every bucket holding a live object, sorted.
    fn list_buckets(&self) -> Result<Vec<Vec<u8>>>;
}

/// A read-only, point-in-time view of a backend: its [`Reads`]. Writes made
/// after it was taken are invisible to it. Dropping it releases what it
/// pins. A marker: implement [`Reads`], then `impl BackendSnapshot for T {}`.
pub trait BackendSnapshot: Reads {}

/// The writes of a live backend, and the secondary index they maintain
/// (snapshots have no index view, so [`Writes::index_query`] lives here).
pub trait Writes: Send + Sync {
    /// Stores an object, with its index changes.
    fn put(
        &self,
        bucket: &[u8],
        key: &[u8],
        value: &[u8],
        metadata: &[u8],
        opts: &WriteOptions,
    ) -> Result<()>;
    /// Whether a [`Writes::put`] of `bytes` (bucket, key, value and
    /// metadata) without sync might wait now — for the disk, an fsync,
    /// back-pressure or pacing — instead of running at memory speed (the
    /// default: it might). A node runs such a put on its request's own
    /// thread, as the only writer of the backend meanwhile, only when this
    /// says no; the answer may only change by the backend's own background
    /// work, and should allow a margin for it.
    fn put_would_wait(&self, bytes: u64) -> bool {
        let _ = bytes;
        true
    }
    /// Deletes an object, with its index changes.
    fn delete(&self, bucket: &[u8], key: &[u8], opts: &WriteOptions) -> Result<()>;
    /// One page of a secondary-index query ([`Capability::Indexes`]).
    fn index_query(&self, q: &IndexQuery) -> Result<IndexPage>;
}

/// What a backend is and how it is run: its name and capabilities,
/// snapshots, the native tictac tree, statistics, sync and close.
pub trait Admin: Send + Sync {
    /// The backend's name (`leveled`, `bitcask`, `rocksdb`, `rocksdb-blob`, `memory`).
    fn name(&self) -> &'static str;
    /// What it can do.
    fn capabilities(&self) -> Capabilities;
    /// A point-in-time view. It may borrow the backend.
    fn snapshot(&self) -> Result<Box<dyn BackendSnapshot + '_>>;
    /// The maintained tictac tree in the engine's export format
    /// (`BSLTTIC1`, see docs/formats.md) ([`Capability::NativeAae`]).
    fn tictac_tree(&self) -> Result<Vec<u8>>;
    /// Counters and disk use.
    fn stats(&self) -> Result<BackendStats>;
    /// The longest wait of each of the store's wait timers since the
    /// previous call (`<timer>_window_max_ns`), resetting them; empty for
    /// backends without wait timers. One caller per store (the bench's
    /// interval sampler).
    fn take_wait_maxima(&self) -> Vec<(String, u64)> {
        Vec::new()
    }
    /// Makes every acknowledged write durable.
    fn sync(&self) -> Result<()>;
    /// Persists what is in memory and closes; later calls fail with `Closed`.
    fn close(&self) -> Result<()>;
}

/// A storage backend: what a vnode needs, [`Reads`] + [`Writes`] +
/// [`Admin`]; every type with the three is a `Backend`. `Send + Sync`;
/// share it by `Arc`. Callers of `dyn Backend` call the three traits'
/// methods directly (a trait object's supertrait methods need no import).
///
/// Keys are (bucket, key) pairs of 1 byte to 64 KiB each. Expired objects
/// (`expires_at` in the past) read as absent.
pub trait Backend: Reads + Writes + Admin {}

impl<T: Reads + Writes + Admin + ?Sized> Backend for T {}

/// Writes, inside an `impl Reads for T` block of a live backend `T:
/// Admin`, the named reads as reads of a fresh snapshot
/// (`Admin::snapshot(self)?.get(bucket, key)` and so on): the default for
/// a read without a faster direct path. Any of `get`, `head`, `fold_keys`,
/// `fold_heads`, `fold_objects`, `list_buckets`.
///
/// ```ignore
/// impl Reads for MyBackend {
///     fn get(&self, bucket: &[u8], key: &[u8]) -> Result<Option<Object>> { /* direct */ }
///     basalt_backend::snapshot_reads!(head, fold_keys, fold_heads, fold_objects, list_buckets);
/// }
/// ```
#[macro_export]
macro_rules! snapshot_reads {
    ($($read:ident),+ $(,)?) => {
        $($crate::snapshot_reads!(@one $read);)+
    };
    (@one get) => {
        fn get(
            &self,
            bucket: &[u8],
            key: &[u8],
        ) -> $crate::Result<::std::option::Option<$crate::Object>> {
            $crate::Reads::get(&*$crate::Admin::snapshot(self)?, bucket, key)
        }
    };
    (@one head) => {
        fn head(
            &self,
            bucket: &[u8],
            key: &[u8],
        ) -> $crate::Result<::std::option::Option<$crate::Head>> {
            $crate::Reads::head(&*$crate::Admin::snapshot(self)?, bucket, key)
        }
    };
    (@one fold_keys) => {
        fn fold_keys(
            &self,
            bucket: &[u8],
            range: ::std::option::Option<&$crate::KeyRange>,
            f: &mut $crate::KeyFn<'_>,
        ) -> $crate::Result<$crate::FoldOutcome> {
            $crate::Reads::fold_keys(&*$crate::Admin::snapshot(self)?, bucket, range, f)
        }
    };
    (@one fold_heads) => {
        fn fold_heads(
            &self,
            bucket: ::std::option::Option<&[u8]>,
            range: ::std::option::Option<&$crate::KeyRange>,
            opts: &$crate::FoldOptions,
            f: &mut $crate::HeadFn<'_>,
        ) -> $crate::Result<$crate::FoldOutcome> {
            $crate::Reads::fold_heads(&*$crate::Admin::snapshot(self)?, bucket, range, opts, f)
        }
    };
    (@one fold_objects) => {
        fn fold_objects(
            &self,
            bucket: &[u8],
            range: ::std::option::Option<&$crate::KeyRange>,
            f: &mut $crate::ObjectFn<'_>,
        ) -> $crate::Result<$crate::FoldOutcome> {
            $crate::Reads::fold_objects(&*$crate::Admin::snapshot(self)?, bucket, range, f)
        }
    };
    (@one list_buckets) => {
        fn list_buckets(
            &self,
        ) -> $crate::Result<::std::vec::Vec<::std::vec::Vec<u8>>> {
            $crate::Reads::list_buckets(&*$crate::Admin::snapshot(self)?)
        }
    };
}

/// The `NotSupported` error of `backend` for `capability`.
pub fn not_supported(backend: &'static str, capability: Capability) -> BackendError {
    BackendError::NotSupported {
        backend,
        capability,
    }
}
