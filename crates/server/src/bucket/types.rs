//! Bucket types: the registry (name → props + status), the storage keying of
//! typed buckets, and the JSON of `basalt admin bucket-type`. The PB
//! messages 31–34 and Basalt's admin codes 240–246 are served by
//! [`crate::api::pb::btypes`].
//!
//! * **Registry**: `default` always exists and is active (its props are
//!   Riak's defaults unless updated); other types are `created` then
//!   `active` (`basalt admin bucket-type create` / `activate`). New types
//!   start from Riak 2.x's custom-type defaults (`allow_mult = true`). The
//!   registry is persisted as JSON in `<data_dir>/bucket_types.json`
//!   (written with [`crate::fsutil::atomic_write`]: temp file, fsync,
//!   rename, fsync dir).
//! * **Keying**: objects are keyed by (type, bucket, key). The ring hashes
//!   `{Bucket, Key}` for the default type and `{{Type, Bucket}, Key}` for
//!   the others (Riak's `chash_std_keyfun`, see [`crate::ring`]). In the
//!   backends, a typed bucket is stored under the *storage bucket*
//!   `00 'b' 't' 00 | type_len:u16 | type | bucket` ([`storage_bucket`]); a
//!   default-type bucket keeps its name, and default-type bucket names
//!   starting with that 4-byte prefix are refused, so the two never collide.
//! * **Props** of a bucket = its type's props, then the bucket's own
//!   overrides ([`crate::bucket::store::PropsStore`]).

use crate::bucket::props::BucketProps;
use crate::error::RequestError;
use crate::fsutil::atomic_write;
use crate::pb::{quorum, RpbBucketProps};
use parking_lot::Mutex;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;

pub use super::keying::{split_storage_bucket, storage_bucket, STORAGE_PREFIX};

/// A type's lifecycle state (single node: no `ready` step).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TypeStatus {
    /// Created, not usable yet.
    Created,
    /// Usable.
    Active,
}

/// One registered type.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BucketType {
    /// Status.
    pub status: TypeStatus,
    /// The type's props (complete).
    pub props: BucketProps,
    /// When it last changed (ms since the epoch; cluster merge: the later
    /// entry wins).
    #[serde(default)]
    pub stamp: u64,
}

/// The default props of a new (non-default) type: Riak 2.x's, `allow_mult = true`.
pub fn custom_type_defaults() -> BucketProps {
    BucketProps {
        allow_mult: true,
        ..BucketProps::default()
    }
}

/// The bucket-type registry of a node.
#[derive(Debug)]
pub struct BucketTypes {
    path: Option<PathBuf>,
    types: Mutex<BTreeMap<String, BucketType>>,
}

fn bad(msg: impl Into<String>) -> RequestError {
    RequestError::Invalid(msg.into())
}

pub(crate) fn type_name(t: &[u8]) -> Result<&str, RequestError> {
    if t.is_empty() {
        return Err(bad("Bucket type cannot be zero-length"));
    }
    std::str::from_utf8(t).map_err(|_| {
        bad(format!(
            "No bucket-type named '{}'",
            String::from_utf8_lossy(t)
        ))
    })
}

impl BucketTypes {
    /// Loads `path` if it exists (`None` = memory only).
    pub fn open(path: Option<PathBuf>) -> std::io::Result<BucketTypes> {
        let mut types = BTreeMap::new();
        if let Some(p) = &path {
            match std::fs::read(p) {
                Ok(bytes) => {
                    types = crate::fsutil::decode_state(&bytes)
                        .map_err(|e| std::io::Error::other(format!("{}: {e}", p.display())))?
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(e),
            }
        }
        Ok(BucketTypes {
            path,
            types: Mutex::new(types),
        })
    }

    /// The type named `name` (`default` always exists and is active).
    pub fn get(&self, name: &str) -> Option<BucketType> {
        let t = self.types.lock().get(name).cloned();
        match (name, t) {
            ("default", None) => Some(BucketType {
                status: TypeStatus::Active,
                props: BucketProps::default(),
                stamp: 0,
            }),
            (_, t) => t,
        }
    }

    /// Every type, `default` first, then by name.
    pub fn list(&self) -> Vec<(String, BucketType)> {
        let mut out = vec![(
            "default".to_string(),
            self.get("default").unwrap_or_else(|| BucketType {
                status: TypeStatus::Active,
                props: BucketProps::default(),
                stamp: 0,
            }),
        )];
        out.extend(
            self.types
                .lock()
                .iter()
                .filter(|(n, _)| n.as_str() != "default")
                .map(|(n, t)| (n.clone(), t.clone())),
        );
        out
    }

    /// The props of a type (`None` = default) for buckets of it.
    pub fn props_of(&self, btype: Option<&[u8]>) -> BucketProps {
        let name = btype.map_or(Some("default"), |t| std::str::from_utf8(t).ok());
        name.and_then(|n| self.get(n))
            .map(|t| t.props)
            .unwrap_or_default()
    }

    /// Checks a request's `type` field: absent or `default` → `None`; an
    /// active type → its name; else an error.
    pub fn resolve(&self, btype: Option<&[u8]>) -> Result<Option<Vec<u8>>, RequestError> {
        let Some(t) = btype else { return Ok(None) };
        let name = type_name(t)?;
        if name == "default" {
            return Ok(None);
        }
        match self.get(name) {
            // Riak answers `no_type` (riak_core_bucket's error); clients
            // match on it.
            None => Err(bad(format!("No bucket-type named '{name}' (no_type)"))),
            Some(bt) if bt.status != TypeStatus::Active => {
                Err(bad(format!("Bucket-type '{name}' is not active")))
            }
            Some(_) => Ok(Some(t.to_vec())),
        }
    }

    /// The storage bucket of a request's (type, bucket), checking both.
    pub fn storage_bucket(
        &self,
        btype: Option<&[u8]>,
        bucket: &[u8],
    ) -> Result<Vec<u8>, RequestError> {
        let t = self.resolve(btype)?;
        if bucket.is_empty() {
            return Err(bad("Bucket cannot be zero-length"));
        }
        if t.is_none() && bucket.starts_with(STORAGE_PREFIX) {
            return Err(bad(
                "Bucket names starting with \\0bt\\0 are reserved (typed buckets)",
            ));
        }
        Ok(storage_bucket(t.as_deref(), bucket))
    }

    /// Creates (or re-creates, while not active) a type.
    pub fn create(&self, name: &[u8], p: &RpbBucketProps) -> Result<(), RequestError> {
        let name = type_name(name)?;
        if name == "default" {
            return Err(bad("default is the built-in bucket type: already_active"));
        }
        if name.len() > 255 {
            return Err(bad("bucket type names are at most 255 bytes"));
        }
        let mut props = custom_type_defaults();
        props.apply_new(p)?;
        let mut map = self.types.lock();
        if map
            .get(name)
            .is_some_and(|t| t.status == TypeStatus::Active)
        {
            return Err(bad(format!(
                "Error creating bucket type {name}: already_active"
            )));
        }
        let mut next = map.clone();
        let prev = map.get(name).map_or(0, |t| t.stamp);
        next.insert(
            name.to_string(),
            BucketType {
                status: TypeStatus::Created,
                props,
                stamp: crate::bucket::props::stamp_after(prev),
            },
        );
        self.persist(&next)?;
        *map = next;
        Ok(())
    }

    /// Activates a created type (activating an active type is a no-op).
    pub fn activate(&self, name: &[u8]) -> Result<(), RequestError> {
        let name = type_name(name)?;
        let mut map = self.types.lock();
        if name == "default" {
            return Ok(());
        }
        let Some(t) = map.get(name) else {
            return Err(bad(format!("{name} is not an existing bucket type")));
        };
        if t.status == TypeStatus::Active {
            return Ok(());
        }
        let mut next = map.clone();
        if let Some(t) = next.get_mut(name) {
            t.status = TypeStatus::Active;
            t.stamp = crate::bucket::props::stamp_after(t.stamp);
        }
        self.persist(&next)?;
        *map = next;
        Ok(())
    }

    /// Updates an active type's props (`n_val` included, as in Riak). As
    /// `riak_core_claimant` (`not_active`), a type not yet activated is
    /// refused: its props change by creating it again.
    pub fn update(&self, name: &[u8], p: &RpbBucketProps) -> Result<(), RequestError> {
        let name = type_name(name)?;
        let mut map = self.types.lock();
        let cur = match (name, map.get(name)) {
            (_, Some(t)) => t.clone(),
            ("default", None) => BucketType {
                status: TypeStatus::Active,
                props: BucketProps::default(),
                stamp: 0,
            },
            _ => return Err(bad(format!("No bucket-type named '{name}'"))),
        };
        if cur.status != TypeStatus::Active {
            return Err(bad(format!(
                "Bucket-type '{name}' is not active (not_active): create it again to change its props"
            )));
        }
        // n_val may change, as in Riak (riak_kv_bucket:validate/4 refuses it
        // only for strongly consistent types, which Basalt does not have).
        let mut props = cur.props.clone();
        props.apply(p)?;
        let mut next = map.clone();
        next.insert(
            name.to_string(),
            BucketType {
                status: cur.status,
                props,
                stamp: crate::bucket::props::stamp_after(cur.stamp),
            },
        );
        self.persist(&next)?;
        *map = next;
        Ok(())
    }

    /// Every registered type (for the cluster's metadata exchange).
    pub fn snapshot(&self) -> BTreeMap<String, BucketType> {
        self.types.lock().clone()
    }

    /// Takes each type of `other` that is newer than ours; true if any was.
    pub fn merge(&self, other: &BTreeMap<String, BucketType>) -> Result<bool, RequestError> {
        let mut map = self.types.lock();
        let Some(next) = crate::bucket::props::merge_newer(&map, other, |t| t.stamp) else {
            return Ok(false);
        };
        self.persist(&next)?;
        *map = next;
        Ok(true)
    }

    fn persist(&self, map: &BTreeMap<String, BucketType>) -> Result<(), RequestError> {
        let Some(path) = &self.path else {
            return Ok(());
        };
        let json = crate::fsutil::encode_state(map)
            .map_err(|e| RequestError::Storage(format!("{}: {e}", path.display())))?;
        atomic_write(path, &json)
            .map_err(|e| RequestError::Storage(format!("{}: {e}", path.display())))
    }
}

fn quorum_json(v: &serde_json::Value, name: &str) -> Result<u32, String> {
    match v {
        serde_json::Value::String(s) => match s.as_str() {
            "one" => Ok(quorum::ONE),
            "quorum" => Ok(quorum::QUORUM),
            "all" => Ok(quorum::ALL),
            "default" => Ok(quorum::DEFAULT),
            other => Err(format!("{name}: bad quorum value {other:?}")),
        },
        v => v
            .as_u64()
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| format!("{name}: expected a number or one/quorum/all/default")),
    }
}

/// Riak's JSON commit hooks: a list of `{"mod": M, "fun": F}` or
/// `{"name": N}` objects.
fn hooks_json(v: &serde_json::Value, name: &str) -> Result<Vec<crate::pb::RpbCommitHook>, String> {
    let list = v
        .as_array()
        .ok_or_else(|| format!("{name}: expected a list of hooks"))?;
    list.iter()
        .map(|h| {
            let hook = crate::bucket::props::CommitHook::from_riak_json(h).ok_or_else(|| {
                format!("{name}: a hook is {{\"mod\": M, \"fun\": F}} or {{\"name\": N}}, got {h}")
            })?;
            Ok(hook.to_pb())
        })
        .collect()
}

/// Parses `riak admin bucket-type` JSON (`{"props":{...}}`) into PB props.
pub fn props_from_json(text: &str) -> Result<RpbBucketProps, String> {
    let v: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("invalid JSON: {e}"))?;
    let props = v
        .get("props")
        .and_then(|p| p.as_object())
        .ok_or_else(|| "expected {\"props\": {...}}".to_string())?;
    let mut p = RpbBucketProps::default();
    for (k, val) in props {
        let boolean = || {
            val.as_bool()
                .ok_or_else(|| format!("{k}: expected true or false"))
        };
        let num = || {
            val.as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .ok_or_else(|| format!("{k}: expected a non-negative integer"))
        };
        match k.as_str() {
            "n_val" => p.n_val = Some(num()?),
            "allow_mult" => p.allow_mult = Some(boolean()?),
            "last_write_wins" => p.last_write_wins = Some(boolean()?),
            "notfound_ok" => p.notfound_ok = Some(boolean()?),
            "basic_quorum" => p.basic_quorum = Some(boolean()?),
            "small_vclock" => p.small_vclock = Some(num()?),
            "big_vclock" => p.big_vclock = Some(num()?),
            "young_vclock" => p.young_vclock = Some(num()?),
            "old_vclock" => p.old_vclock = Some(num()?),
            "r" => p.r = Some(quorum_json(val, k)?),
            "w" => p.w = Some(quorum_json(val, k)?),
            "pr" => p.pr = Some(quorum_json(val, k)?),
            "pw" => p.pw = Some(quorum_json(val, k)?),
            "dw" => p.dw = Some(quorum_json(val, k)?),
            "rw" => p.rw = Some(quorum_json(val, k)?),
            "datatype" => {
                p.datatype = Some(
                    val.as_str()
                        .ok_or_else(|| format!("{k}: expected a string"))?
                        .as_bytes()
                        .to_vec(),
                )
            }
            "hll_precision" => p.hll_precision = Some(num()?),
            "precommit" => {
                p.precommit = hooks_json(val, k)?;
                p.has_precommit = Some(true);
            }
            "postcommit" => {
                p.postcommit = hooks_json(val, k)?;
                p.has_postcommit = Some(true);
            }
            // What GET answers and clients send back unchanged: fixed here
            // (has_* follow from the hook lists).
            "chash_keyfun" | "linkfun" | "has_precommit" | "has_postcommit" | "search"
            | "young_vclock_ms" => {}
            "consistent" | "write_once" => {
                if boolean()? {
                    return Err(format!("{k}: not supported"));
                }
            }
            other => return Err(format!("unsupported bucket property {other:?}")),
        }
    }
    Ok(p)
}

/// `key: value` lines of PB props, as `riak admin bucket-type status` prints them.
pub fn props_lines(p: &RpbBucketProps) -> Vec<String> {
    let q = |v: Option<u32>| match v {
        Some(quorum::ONE) => "one".to_string(),
        Some(quorum::QUORUM) => "quorum".to_string(),
        Some(quorum::ALL) => "all".to_string(),
        Some(quorum::DEFAULT) => "default".to_string(),
        Some(n) => n.to_string(),
        None => "undefined".to_string(),
    };
    let b = |v: Option<bool>| v.map_or("undefined".to_string(), |b| b.to_string());
    let n = |v: Option<u32>| v.map_or("undefined".to_string(), |n| n.to_string());
    vec![
        format!("allow_mult: {}", b(p.allow_mult)),
        format!("basic_quorum: {}", b(p.basic_quorum)),
        format!("big_vclock: {}", n(p.big_vclock)),
        format!("dw: {}", q(p.dw)),
        format!("last_write_wins: {}", b(p.last_write_wins)),
        format!("n_val: {}", n(p.n_val)),
        format!("notfound_ok: {}", b(p.notfound_ok)),
        format!("old_vclock: {}", n(p.old_vclock)),
        format!("pr: {}", q(p.pr)),
        format!("pw: {}", q(p.pw)),
        format!("r: {}", q(p.r)),
        format!("rw: {}", q(p.rw)),
        format!("small_vclock: {}", n(p.small_vclock)),
        format!("w: {}", q(p.w)),
        format!("young_vclock: {}", n(p.young_vclock)),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_bucket_roundtrip() {
        assert_eq!(split_storage_bucket(b"plain"), (None, &b"plain"[..]));
        let sb = storage_bucket(Some(b"t1"), b"b");
        assert_eq!(sb, b"\0bt\0\0\x02t1b");
        assert_eq!(split_storage_bucket(&sb), (Some(&b"t1"[..]), &b"b"[..]));
        assert_eq!(storage_bucket(None, b"b"), b"b");
    }

    #[test]
    fn typed_key_hash_is_term_to_binary_of_type_bucket_key() {
        use sha1::{Digest, Sha1};
        // term_to_binary({{<<"t">>, <<"b">>}, <<"k">>})
        let t = [
            131u8, 104, 2, 104, 2, 109, 0, 0, 0, 1, b't', 109, 0, 0, 0, 1, b'b', 109, 0, 0, 0, 1,
            b'k',
        ];
        let want: [u8; 20] = Sha1::digest(t).into();
        assert_eq!(crate::ring::key_hash(Some(b"t"), b"b", b"k"), want);
        assert_ne!(crate::ring::key_hash(None, b"b", b"k"), want);
    }

    #[test]
    fn registry_lifecycle_and_persistence() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let path = dir.path().join("bucket_types.json");
        let reg = BucketTypes::open(Some(path.clone())).unwrap_or_else(|e| panic!("{e}"));
        assert!(reg.resolve(Some(b"t")).is_err());
        let p =
            props_from_json(r#"{"props":{"n_val":2,"w":"one"}}"#).unwrap_or_else(|e| panic!("{e}"));
        assert!(reg.create(b"t", &p).is_ok());
        let e = reg.resolve(Some(b"t")).err().map(|e| e.to_string());
        assert_eq!(e.as_deref(), Some("Bucket-type 't' is not active"));
        // Not active yet: no update (Riak's not_active), a new create instead.
        let e = reg.update(b"t", &p).err().map(|e| e.to_string());
        assert!(e.is_some_and(|e| e.contains("not_active")));
        assert!(reg.activate(b"t").is_ok());
        assert!(reg.update(b"t", &p).is_ok());
        assert_eq!(reg.resolve(Some(b"t")).ok(), Some(Some(b"t".to_vec())));
        assert!(reg.create(b"t", &p).is_err());
        let again = BucketTypes::open(Some(path)).unwrap_or_else(|e| panic!("{e}"));
        let t = again.get("t").unwrap_or_else(|| panic!("lost"));
        assert_eq!(t.status, TypeStatus::Active);
        assert_eq!(
            (t.props.n_val, t.props.w, t.props.allow_mult),
            (2, quorum::ONE, true)
        );
        assert!(props_from_json("{").is_err());
        assert!(props_from_json(r#"{"props":{"bogus":1}}"#).is_err());
    }
}
