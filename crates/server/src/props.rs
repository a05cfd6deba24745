//! Bucket properties: Riak's defaults for the `default` bucket type, and
//! per-bucket overrides (get / set / reset) held in memory and persisted as
//! JSON in `<data_dir>/bucket_props.json` (written to a temporary file and
//! renamed).

use crate::pb::{quorum, RpbBucketProps};
use crate::vclock::PruneProps;
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The properties of one bucket (quorum fields keep the PB encoding:
/// a number, or one of [`quorum`]'s symbolic values).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)]
pub struct BucketProps {
    pub n_val: u32,
    pub allow_mult: bool,
    pub last_write_wins: bool,
    pub r: u32,
    pub w: u32,
    pub pr: u32,
    pub pw: u32,
    pub dw: u32,
    pub rw: u32,
    pub notfound_ok: bool,
    pub basic_quorum: bool,
    pub small_vclock: u32,
    pub big_vclock: u32,
    pub young_vclock: u32,
    pub old_vclock: u32,
}

impl Default for BucketProps {
    fn default() -> Self {
        BucketProps {
            n_val: 3,
            allow_mult: false,
            last_write_wins: false,
            r: quorum::QUORUM,
            w: quorum::QUORUM,
            pr: 0,
            pw: 0,
            dw: quorum::QUORUM,
            rw: quorum::QUORUM,
            notfound_ok: true,
            basic_quorum: false,
            small_vclock: 50,
            big_vclock: 50,
            young_vclock: 20,
            old_vclock: 86_400,
        }
    }
}

/// Why props or a quorum value were refused.
#[derive(Debug, thiserror::Error)]
pub enum PropsError {
    /// A bad value.
    #[error("{0}")]
    Invalid(String),
    /// The props file could not be written or read.
    #[error("bucket props file {path}: {reason}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What failed.
        reason: String,
    },
}

impl BucketProps {
    /// Vclock pruning limits.
    pub fn prune(&self) -> PruneProps {
        PruneProps {
            small: self.small_vclock,
            big: self.big_vclock,
            young: u64::from(self.young_vclock),
            old: u64::from(self.old_vclock),
        }
    }

    /// Resolves a quorum value (request value, else the prop `dflt`) against
    /// `n_val`: `one`, `quorum` (n/2+1), `all`, `default`, or a number ≤ n.
    pub fn resolve(
        &self,
        requested: Option<u32>,
        dflt: u32,
        name: &str,
    ) -> Result<u32, PropsError> {
        let n = self.n_val;
        let v = match requested {
            None | Some(quorum::DEFAULT) => dflt,
            Some(v) => v,
        };
        let out = match v {
            quorum::ONE => 1,
            quorum::QUORUM => n / 2 + 1,
            quorum::ALL => n,
            quorum::DEFAULT => n / 2 + 1,
            v if v <= n => v,
            v => {
                return Err(PropsError::Invalid(format!(
                    "{{{name}_val_violation,{v}}} (n_val is {n})"
                )))
            }
        };
        Ok(out)
    }

    /// Applies the fields present in `p`.
    pub fn apply(&mut self, p: &RpbBucketProps) -> Result<(), PropsError> {
        if let Some(n) = p.n_val {
            if n == 0 || n > 64 {
                return Err(PropsError::Invalid(format!(
                    "n_val must be 1..=64, got {n}"
                )));
            }
            self.n_val = n;
        }
        macro_rules! set {
            ($($f:ident),*) => { $( if let Some(v) = p.$f { self.$f = v; } )* };
        }
        set!(
            allow_mult,
            last_write_wins,
            r,
            w,
            pr,
            pw,
            dw,
            rw,
            notfound_ok,
            basic_quorum,
            small_vclock,
            big_vclock,
            young_vclock,
            old_vclock
        );
        if p.datatype.is_some() || p.consistent == Some(true) || p.write_once == Some(true) {
            return Err(PropsError::Invalid(
                "datatype, consistent and write_once buckets are not supported".into(),
            ));
        }
        Ok(())
    }

    /// The PB form.
    pub fn to_pb(&self) -> RpbBucketProps {
        RpbBucketProps {
            n_val: Some(self.n_val),
            allow_mult: Some(self.allow_mult),
            last_write_wins: Some(self.last_write_wins),
            has_precommit: Some(false),
            has_postcommit: Some(false),
            old_vclock: Some(self.old_vclock),
            young_vclock: Some(self.young_vclock),
            big_vclock: Some(self.big_vclock),
            small_vclock: Some(self.small_vclock),
            pr: Some(self.pr),
            r: Some(self.r),
            w: Some(self.w),
            pw: Some(self.pw),
            dw: Some(self.dw),
            rw: Some(self.rw),
            basic_quorum: Some(self.basic_quorum),
            notfound_ok: Some(self.notfound_ok),
            ..Default::default()
        }
    }
}

/// Per-bucket properties of the default bucket type.
#[derive(Debug)]
pub struct PropsStore {
    path: Option<PathBuf>,
    buckets: Mutex<BTreeMap<String, BucketProps>>,
}

fn bucket_key(bucket: &[u8]) -> String {
    base64::Engine::encode(&base64::engine::general_purpose::STANDARD, bucket)
}

impl PropsStore {
    /// Loads `path` if it exists (`None` = memory only).
    pub fn open(path: Option<PathBuf>) -> Result<PropsStore, PropsError> {
        let mut buckets = BTreeMap::new();
        if let Some(p) = &path {
            match std::fs::read(p) {
                Ok(bytes) => {
                    buckets = serde_json::from_slice(&bytes).map_err(|e| PropsError::Io {
                        path: p.clone(),
                        reason: e.to_string(),
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
        })
    }

    /// The props of `bucket`.
    pub fn get(&self, bucket: &[u8]) -> BucketProps {
        self.buckets
            .lock()
            .get(&bucket_key(bucket))
            .cloned()
            .unwrap_or_default()
    }

    /// Sets the fields present in `p`.
    pub fn set(&self, bucket: &[u8], p: &RpbBucketProps) -> Result<(), PropsError> {
        let mut map = self.buckets.lock();
        let mut props = map.get(&bucket_key(bucket)).cloned().unwrap_or_default();
        props.apply(p)?;
        let mut next = map.clone();
        next.insert(bucket_key(bucket), props);
        self.persist(&next)?;
        *map = next;
        Ok(())
    }

    /// Back to the defaults.
    pub fn reset(&self, bucket: &[u8]) -> Result<(), PropsError> {
        let mut map = self.buckets.lock();
        let mut next = map.clone();
        next.remove(&bucket_key(bucket));
        self.persist(&next)?;
        *map = next;
        Ok(())
    }

    fn persist(&self, map: &BTreeMap<String, BucketProps>) -> Result<(), PropsError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let err = |e: std::io::Error| PropsError::Io {
            path: path.clone(),
            reason: e.to_string(),
        };
        let json = serde_json::to_vec_pretty(map).map_err(|e| PropsError::Io {
            path: path.clone(),
            reason: e.to_string(),
        })?;
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, json).map_err(err)?;
        std::fs::rename(&tmp, path).map_err(err)
    }
}
