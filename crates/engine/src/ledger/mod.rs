//! The ledger (leveled's "penciller"): an LSM tree of keys and metadata.

pub mod bloom;
pub mod sst;
