//! Buckets: their properties ([`props`]: n_val, quorums, allow_mult, …,
//! persisted and gossiped) and bucket types ([`types`]: the registry, typed
//! storage buckets). No PB handling here: that is in [`crate::api::pb`].

pub mod props;
pub mod types;
