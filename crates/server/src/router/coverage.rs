//! Coverage plans: vnodes that together hold every key stored with `n`
//! replicas, for listings, 2i and folds (`riak_core_coverage_plan`).

use super::{Router, Target};
use crate::error::RequestError;

impl Router {
    /// Vnodes that together hold every key stored with `n` replicas: walking
    /// the ring, each pick is the furthest partition (within `n` of the
    /// first uncovered one) whose owner is up. `None` if some keys have no
    /// replica on an up node.
    pub fn coverage(&self, n: u32) -> Option<Vec<Target>> {
        Some(self.coverage_plan(n)?.into_iter().map(|(t, _)| t).collect())
    }

    /// [`Self::coverage`] with, for each target, the first primaries it
    /// answers for: every partition appears in exactly one list, so a fold
    /// filtered by them counts each key once.
    pub fn coverage_plan(&self, n: u32) -> Option<Vec<(Target, Vec<u32>)>> {
        let size = self.ring.size();
        let n = n.clamp(1, size);
        self.cluster.with_state(|s| {
            let mut out = Vec::new();
            // Keys whose first primary is f live on f..f+n-1.
            let mut f = 0u32;
            while f < size {
                let pick = (0..n)
                    .rev()
                    .map(|d| (f + d) % size)
                    .find(|&q| self.cluster.is_up(s.owner(q)))?;
                let d = (pick + size - f) % size;
                let firsts: Vec<u32> = (f..=f + d).filter(|x| *x < size).collect();
                out.push((
                    Target {
                        partition: pick,
                        node: s.owner(pick).to_string(),
                        primary: true,
                    },
                    firsts,
                ));
                f += d + 1;
            }
            Some(out)
        })
    }

    /// [`Self::coverage`], or Riak's error when some keys have no live vnode.
    pub(crate) fn coverage_or_err(&self, n: u32) -> Result<Vec<Target>, RequestError> {
        self.coverage(n)
            .ok_or_else(|| RequestError::Invalid("insufficient_vnodes_available".into()))
    }
}
