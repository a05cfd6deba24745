//! Data-type objects: a Riak object whose sibling values are
//! [`crate::crdt::Crdt`] encodings, marked by their content type
//! (`application/riak_counter`, `_set`, `_map`, `_hll`, `_gset`, as
//! riak_kv_crdt). Where a plain object would keep concurrent versions as
//! siblings, the live siblings of one data type are **merged into one**
//! ([`collapse`], called by [`super::RiakObject::merge`], the one merge
//! every path goes through: a replica's write, read repair, handoff,
//! anti-entropy repair and replication), so data types converge without
//! siblings.
//!
//! The merged sibling has no dot: it stands for several writes, and the
//! dot-less rule of the object merge (dropped only when the other side's
//! clock dominates this object's clock) keeps it until a version that saw
//! all of them replaces it. Its vtag is a hash of the merged bytes and its
//! last-modified time the latest of the merged ones, so replicas that merge
//! the same siblings in any order hold the same sibling. Siblings that do
//! not decode are left as they are (logged), never dropped.

use super::{Content, RiakObject};
use crate::crdt::{Crdt, CrdtError, DataType};

/// The data type of a live sibling (`None`: plain, or a tombstone).
pub fn sibling_type(c: &Content) -> Option<DataType> {
    if c.deleted {
        return None;
    }
    DataType::from_content_type(c.content_type.as_deref()?)
}

/// Merges, per data type, every live sibling of that type into one (see
/// the module docs); plain siblings and tombstones stay as they are.
pub fn collapse(contents: &mut Vec<Content>) {
    let mut types: Vec<DataType> = Vec::new();
    for t in contents.iter().filter_map(sibling_type) {
        if !types.contains(&t) {
            types.push(t);
        }
    }
    for t in types {
        let idx: Vec<usize> = (0..contents.len())
            .filter(|i| sibling_type(&contents[*i]) == Some(t))
            .collect();
        if idx.len() < 2 {
            continue;
        }
        let merged = match merge_values(idx.iter().map(|i| &contents[*i])) {
            Ok(Some(m)) => m,
            Ok(None) => continue,
            Err(e) => {
                tracing::warn!(error = %e, datatype = t.name(), "data-type siblings not merged: a value does not decode");
                continue;
            }
        };
        let latest = idx
            .iter()
            .copied()
            .max_by_key(|i| (contents[*i].last_mod_us(), contents[*i].vtag.clone()));
        let Some(latest) = latest else { continue };
        let mut one = contents[latest].clone();
        one.value = merged.encode();
        one.value_len = one.value.len() as u32;
        one.vtag = Some(format!("{:032x}", xxhash_rust::xxh3::xxh3_128(&one.value)).into_bytes());
        one.dot = None;
        let mut i = 0;
        contents.retain(|_| {
            let keep = !idx.contains(&i);
            i += 1;
            keep
        });
        contents.push(one);
    }
}

/// The join of the data-type values of `siblings` (`None`: none).
fn merge_values<'a>(
    siblings: impl Iterator<Item = &'a Content>,
) -> Result<Option<Crdt>, CrdtError> {
    let mut acc: Option<Crdt> = None;
    for c in siblings {
        let v = Crdt::decode(&c.value)?;
        acc = Some(match acc {
            None => v,
            Some(a) => a.merge(&v)?,
        });
    }
    Ok(acc)
}

/// The current value of data type `t` in `o`: the join of its live
/// siblings of that type (`None`: it holds none). Plain siblings beside
/// them are ignored, as riak_kv_crdt does.
pub fn value_of(o: &RiakObject, t: DataType) -> Result<Option<Crdt>, CrdtError> {
    merge_values(o.contents.iter().filter(|c| sibling_type(c) == Some(t)))
}
