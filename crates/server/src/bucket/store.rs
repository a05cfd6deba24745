//! The bucket props store: per-bucket overrides over each bucket type's
//! props, persisted in `bucket_props.json` and spread with the gossip
//! (merged entry by entry, the later change stamp wins). The props
//! themselves, their PB and JSON shapes and validation are
//! [`super::props`]'s; the types [`super::types`]'.

use super::keying::split_storage_bucket;
use super::props::*;
use super::types::BucketTypes;
use crate::fsutil::atomic_write;
use crate::pb::RpbBucketProps;
use parking_lot::Mutex;
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;

/// Per-bucket property overrides, keyed by storage bucket
/// ([`crate::bucket::types::storage_bucket`]); a bucket's props are its type's
/// props ([`crate::bucket::types::BucketTypes`]) with its overrides applied.
#[derive(Debug)]
pub struct PropsStore {
    path: Option<PathBuf>,
    buckets: Mutex<BTreeMap<String, PropsPatch>>,
    types: Arc<BucketTypes>,
}

fn bucket_key(bucket: &[u8]) -> String {
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bucket)
}

impl PropsStore {
    /// Loads `path` if it exists (`None` = memory only).
    pub fn open(path: Option<PathBuf>, types: Arc<BucketTypes>) -> Result<PropsStore, PropsError> {
        let mut buckets = BTreeMap::new();
        if let Some(p) = &path {
            match std::fs::read(p) {
                Ok(bytes) => {
                    buckets = crate::fsutil::decode_state(&bytes).map_err(|e| PropsError::Io {
                        path: p.clone(),
                        reason: e,
                    })?
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => {
                    return Err(PropsError::Io {
                        path: p.clone(),
                        reason: e.to_string(),
                    })
                }
            }
        }
        Ok(PropsStore {
            path,
            buckets: Mutex::new(buckets),
            types,
        })
    }

    /// The props of a storage bucket: its type's props, then its overrides.
    pub fn get(&self, bucket: &[u8]) -> BucketProps {
        let (btype, _) = split_storage_bucket(bucket);
        let mut props = self.types.props_of(btype);
        if let Some(p) = self.buckets.lock().get(&bucket_key(bucket)) {
            p.apply_to(&mut props);
        }
        props
    }

    /// Sets the fields present in `p` (validated against the resolved props).
    pub fn set(&self, bucket: &[u8], p: &RpbBucketProps) -> Result<(), PropsError> {
        let mut map = self.buckets.lock();
        let mut check = self.types.props_of(split_storage_bucket(bucket).0);
        if let Some(cur) = map.get(&bucket_key(bucket)) {
            cur.apply_to(&mut check);
        }
        check.apply(p)?;
        let mut next = map.clone();
        let e = next.entry(bucket_key(bucket)).or_default();
        e.merge_pb(p)?;
        e.stamp = stamp_after(e.stamp);
        self.persist(&next)?;
        *map = next;
        Ok(())
    }

    /// Back to the type's props (an empty, stamped entry, so the reset wins
    /// over older overrides when clusters merge).
    pub fn reset(&self, bucket: &[u8]) -> Result<(), PropsError> {
        let mut map = self.buckets.lock();
        let mut next = map.clone();
        let prev = next.get(&bucket_key(bucket)).map_or(0, |e| e.stamp);
        next.insert(
            bucket_key(bucket),
            PropsPatch {
                stamp: stamp_after(prev),
                ..PropsPatch::default()
            },
        );
        self.persist(&next)?;
        *map = next;
        Ok(())
    }

    /// Every bucket's overrides (for the cluster's metadata exchange).
    pub fn snapshot(&self) -> BTreeMap<String, PropsPatch> {
        self.buckets.lock().clone()
    }

    /// Takes each entry of `other` that is newer than ours; true if any was.
    pub fn merge(&self, other: &BTreeMap<String, PropsPatch>) -> Result<bool, PropsError> {
        let mut map = self.buckets.lock();
        let Some(next) = merge_newer(&map, other, |e| e.stamp) else {
            return Ok(false);
        };
        self.persist(&next)?;
        *map = next;
        Ok(true)
    }

    fn persist(&self, map: &BTreeMap<String, PropsPatch>) -> Result<(), PropsError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let json = crate::fsutil::encode_state(map).map_err(|e| PropsError::Io {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        atomic_write(path, &json).map_err(|e| PropsError::Io {
            path: path.clone(),
            reason: e.to_string(),
        })
    }
}

impl From<PropsError> for crate::error::RequestError {
    fn from(e: PropsError) -> Self {
        match e {
            PropsError::Invalid(m) => crate::error::RequestError::Invalid(m),
            other => crate::error::RequestError::Storage(other.to_string()),
        }
    }
}
