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
//! all of them replaces it. Its vtag is a hash of what a client observes
//! of the merged value (its value and context, [`Crdt::observed`]) and its
//! last-modified time the latest of the merged ones, so replicas that merge
//! the same siblings in any order hold siblings that anti-entropy sees as
//! the same (a map's bytes may still differ in its fields' tombstones, as
//! in riak_dt; the next merge joins them). Siblings that do not decode are
//! left as they are (logged), never dropped.

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
        set_value(&mut one, &merged);
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

/// `x` and `c` are one sibling held by two replicas (same identity); if it
/// is a data type whose bytes differ (a map's field tombstones record
/// merge history), `x` becomes their join, named by what it observes.
pub fn join_same(x: &mut Content, c: &Content) {
    if x.value == c.value || sibling_type(x).is_none() || sibling_type(x) != sibling_type(c) {
        return;
    }
    match merge_values([&*x, c].into_iter()) {
        Ok(Some(m)) => set_value(x, &m),
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(error = %e, "data-type sibling copies not joined: a value does not decode")
        }
    }
}

/// Stores `m` as `c`'s value, named (vtag) by what it observes.
fn set_value(c: &mut Content, m: &Crdt) {
    c.value = m.encode();
    c.value_len = c.value.len() as u32;
    c.vtag = Some(format!("{:032x}", xxhash_rust::xxh3::xxh3_128(&m.observed())).into_bytes());
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
