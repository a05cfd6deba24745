//! Basalt's storage engine.
//!
//! Values go to an append-only [`journal`]; keys and metadata go to an LSM
//! merge tree, the [`ledger`]. The [`store`] (leveled's "bookie") ties the two
//! together behind GET / HEAD / PUT / DELETE. See `ARCHITECTURE.md` at the
//! repository root for the write and read paths, the on-disk formats and the
//! invariants.

pub mod backup;
pub mod codec;
pub mod compaction;
pub mod config;
pub mod entry;
pub mod error;
pub mod fsutil;
pub mod journal;
pub mod key;
pub mod ledger;
pub mod limits;
pub mod stats;

pub use backup::BackupReport;
pub use compaction::CompactionReport;
pub use config::{Compression, CompressionPoint, Config, SyncStrategy};
pub use error::{Error, Result};
pub mod lock;
pub mod store;

pub use store::{Head, Object, PutOptions, RepairReport, Store, StoreStats};
