//! The grow-only set (riak_dt_gset): adds only, merge is the union.

use super::codec::{Reader, Writer};
use super::CrdtError;
use std::collections::BTreeSet;

/// A grow-only set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GSet(pub BTreeSet<Vec<u8>>);

impl GSet {
    /// The join.
    pub fn merge(&self, other: &GSet) -> GSet {
        GSet(self.0.union(&other.0).cloned().collect())
    }

    /// `n | n × elem`.
    pub fn encode(&self, w: &mut Writer) {
        w.len(self.0.len());
        for e in &self.0 {
            w.bytes(e);
        }
    }

    /// Decodes [`GSet::encode`] (elements strictly increasing).
    pub fn decode(r: &mut Reader<'_>) -> Result<GSet, CrdtError> {
        let n = r.count(4)?;
        let mut out = BTreeSet::new();
        for _ in 0..n {
            let e = r.bytes()?;
            if out.last().is_some_and(|l| *l >= e) {
                return Err(CrdtError::Corrupt("gset elements out of order"));
            }
            out.insert(e);
        }
        Ok(GSet(out))
    }
}
