//! What a MapReduce job reads: a `(type, bucket)` and a listed key with its
//! key data. Shared by the job parser ([`super::job`]) and the phase core
//! ([`super::core`]), below both.

use serde_json::Value;

/// A `(type, bucket)`; `None` = the default type.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketName {
    /// Bucket type.
    pub btype: Option<Vec<u8>>,
    /// Bucket.
    pub bucket: Vec<u8>,
}

/// One listed input.
#[derive(Debug, Clone, PartialEq)]
pub struct KeyInput {
    /// Its bucket.
    pub bucket: BucketName,
    /// Its key.
    pub key: Vec<u8>,
    /// Key data handed to the first phase (`None`: not given).
    pub keydata: Option<Value>,
}
