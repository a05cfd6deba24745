//! Basalt's storage engine.
//!
//! Values go to an append-only [`journal`]; keys and metadata go to an LSM
//! merge tree, the [`ledger`]. The [`store`] (leveled's "bookie") ties the two
//! together behind GET / HEAD / PUT / DELETE. See `ARCHITECTURE.md` at the
//! repository root for the map and the invariants, `docs/engine.md` for the
//! write and read paths and `docs/formats.md` for the on-disk formats.

pub mod background;
pub mod backup;
pub mod clock;
pub mod codec;
pub mod compaction;
pub mod compress;
pub mod config;
pub mod diskpace;
pub mod diskspace;
pub mod entry;
pub mod error;
pub mod fold;
pub mod fsutil;
/// For the fuzz targets only (see the module docs).
#[doc(hidden)]
pub mod fuzz_api;
pub mod index;
pub mod intterm;
pub mod journal;
pub mod key;
pub mod ledger;
pub mod limits;
pub mod nowait;
pub mod pace;
pub mod remover;
pub mod retired;
pub mod slowdown;
pub mod snapshot;
pub mod stats;
pub(crate) mod sync;
pub mod tictac;
pub(crate) mod types;
pub mod write_group;

pub use backup::BackupReport;
pub use basalt_backend::Cached;
pub use compaction::CompactionSlots;
pub use compaction::{CompactionReport, FileScore, GarbageEstimate};
pub use config::{Compression, CompressionPoint, Config, JournalFlush, Punch, SyncStrategy};
pub use diskpace::DiskPace;
pub use diskspace::{DiskSpace, DiskState};
pub use error::{Error, Result};
pub use journal::ValueCache;
pub use ledger::{BlockCache, MemtableBudget};
pub mod lock;
pub mod store;

pub use fold::{FoldOptions, FoldOutcome, KeyRange};
pub use index::{
    IndexChange, IndexCursor, IndexOp, IndexPage, IndexQuery, IndexResult, IndexTerms,
};
pub use snapshot::{Snapshot, SnapshotOptions, ValueSource};
pub use store::{Head, Object, PutOptions, RepairReport, Store, StoreStats};
pub use tictac::{TicTacTree, TreeSize};
