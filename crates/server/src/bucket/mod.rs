//! Buckets: their properties ([`props`]: n_val, quorums, allow_mult, …;
//! [`store`]: the overrides, persisted and gossiped), bucket types ([`types`]: the registry) and the
//! keying of typed buckets ([`keying`]: storage bucket names). No PB handling here: that is in [`crate::api::pb`].

pub mod keying;
pub mod props;
pub mod store;
pub mod types;
