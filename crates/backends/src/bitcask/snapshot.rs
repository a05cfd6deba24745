//! Bitcask snapshots and folds: a frozen copy of the keydir with every
//! data file held open ([`super`], Snapshots), read by the folds and by
//! [`BackendSnapshot`].

use super::{head_of, read_record, Bitcask, Files, Loc, NAME};
use crate::{expired, now_secs};
use basalt_backend::{
    not_supported, BackendSnapshot, Capability, FoldOptions, FoldOutcome, Head, HeadFn, KeyFn,
    KeyRange, Object, ObjectFn, Reads, Result,
};
use basalt_engine::key::{self, KeyKind};
use std::collections::{BTreeSet, HashMap};

impl Bitcask {
    pub(super) fn frozen(&self) -> Result<Frozen<'_>> {
        self.check_open()?;
        // Files first: a merge removes a file only after re-pointing its keys.
        let files = self.files.read().clone();
        let keydir = self.keydir.read().clone();
        Ok(Frozen {
            owner: self,
            keydir,
            files,
        })
    }
}
/// The live keys of `bucket` (within `range`) in `keydir`: (encoded key,
/// object key, location), unordered.
pub(super) fn bucket_keys(
    keydir: &HashMap<Vec<u8>, Loc>,
    bucket: &[u8],
    range: Option<&KeyRange>,
) -> Vec<(Vec<u8>, Vec<u8>, Loc)> {
    let prefix = key::prefix(KeyKind::Object, &[bucket]);
    let now = now_secs();
    keydir
        .iter()
        .filter(|(k, l)| k.starts_with(&prefix) && !expired(l.expires_at, now))
        .filter_map(|(k, l)| {
            let (_, key) = key::decode_object(k).ok()?;
            range
                .is_none_or(|r| r.contains(&key))
                .then(|| (k.clone(), key, *l))
        })
        .collect()
}

/// Passes each key to `f` until it breaks.
pub(super) fn fold_key_list(keys: impl Iterator<Item = Vec<u8>>, f: &mut KeyFn<'_>) -> FoldOutcome {
    let mut out = FoldOutcome {
        complete: true,
        ..FoldOutcome::default()
    };
    for k in keys {
        out.passed += 1;
        if f(&k).is_break() {
            out.complete = false;
            break;
        }
    }
    out
}

/// A copy of the keydir with its files pinned: snapshots and folds.
pub(super) struct Frozen<'a> {
    owner: &'a Bitcask,
    keydir: HashMap<Vec<u8>, Loc>,
    files: Files,
}

impl Frozen<'_> {
    fn keys_of(&self, bucket: &[u8], range: Option<&KeyRange>) -> Vec<(Vec<u8>, Vec<u8>, Loc)> {
        bucket_keys(&self.keydir, bucket, range)
    }

    fn read(&self, ekey: &[u8], loc: &Loc) -> Result<Object> {
        let (value, meta, h) = read_record(&self.owner.dir, &self.files, ekey, loc)?;
        Ok(Object {
            head: head_of(loc, value.len() as u64, meta, h),
            value,
        })
    }
}

impl BackendSnapshot for Frozen<'_> {}

impl Reads for Frozen<'_> {
    fn get(&self, bucket: &[u8], k: &[u8]) -> Result<Option<Object>> {
        let ek = key::object(bucket, k);
        match self.keydir.get(&ek) {
            Some(l) if !expired(l.expires_at, now_secs()) => self.read(&ek, l).map(Some),
            _ => Ok(None),
        }
    }
    fn head(&self, bucket: &[u8], k: &[u8]) -> Result<Option<Head>> {
        Ok(Reads::get(self, bucket, k)?.map(|o| o.head))
    }
    fn fold_keys(
        &self,
        bucket: &[u8],
        range: Option<&KeyRange>,
        f: &mut KeyFn<'_>,
    ) -> Result<FoldOutcome> {
        Ok(fold_key_list(
            self.keys_of(bucket, range).into_iter().map(|(_, k, _)| k),
            f,
        ))
    }
    fn fold_heads(
        &self,
        _: Option<&[u8]>,
        _: Option<&KeyRange>,
        _: &FoldOptions,
        _: &mut HeadFn<'_>,
    ) -> Result<FoldOutcome> {
        Err(not_supported(NAME, Capability::FoldHeads))
    }
    fn fold_objects(
        &self,
        bucket: &[u8],
        range: Option<&KeyRange>,
        f: &mut ObjectFn<'_>,
    ) -> Result<FoldOutcome> {
        let mut out = FoldOutcome {
            complete: true,
            ..FoldOutcome::default()
        };
        for (ek, k, l) in self.keys_of(bucket, range) {
            let obj = self.read(&ek, &l)?;
            out.passed += 1;
            if f(bucket, &k, obj).is_break() {
                out.complete = false;
                break;
            }
        }
        Ok(out)
    }
    fn list_buckets(&self) -> Result<Vec<Vec<u8>>> {
        let now = now_secs();
        let mut set = BTreeSet::new();
        for (k, l) in &self.keydir {
            if expired(l.expires_at, now) {
                continue;
            }
            if let Ok((b, _)) = key::decode_object(k) {
                set.insert(b);
            }
        }
        Ok(set.into_iter().collect())
    }
}
