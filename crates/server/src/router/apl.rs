//! A key's active preference list: its `n` partitions on their owners, or
//! on fallbacks for owners that are down (`riak_core_apl`).

use super::Router;
use crate::bucket::keying::split_storage_bucket;
use crate::ring::key_hash;

/// One vnode a request goes to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// The partition (of the key's preference list).
    pub partition: u32,
    /// The node that serves it.
    pub node: String,
    /// `node` owns `partition` (else it is a fallback).
    pub primary: bool,
}

impl Router {
    /// The vnodes of a key: its `n` preference-list partitions on their
    /// owners; a partition whose owner is down goes to a fallback — the
    /// owner of the next partition after the list whose node is up
    /// (`riak_core_apl` style sloppy quorum).
    pub fn targets(&self, hash: &[u8; 20], n: u32) -> Vec<Target> {
        let pl = self.ring.preflist(hash, n);
        let size = self.ring.size();
        self.cluster.with_state(|s| {
            let mut out = Vec::with_capacity(pl.len());
            let mut next_fallback = pl.last().map_or(0, |l| l + 1);
            let mut scanned = pl.len() as u32;
            for &p in &pl {
                let owner = s.owner(p);
                if self.cluster.is_up(owner) {
                    out.push(Target {
                        partition: p,
                        node: owner.to_string(),
                        primary: true,
                    });
                    continue;
                }
                while scanned < size {
                    let q = next_fallback % size;
                    next_fallback += 1;
                    scanned += 1;
                    let o = s.owner(q);
                    if self.cluster.is_up(o) {
                        out.push(Target {
                            partition: p,
                            node: o.to_string(),
                            primary: false,
                        });
                        break;
                    }
                }
            }
            out
        })
    }

    /// The vnodes of a key of a storage bucket.
    pub(crate) fn key_targets(&self, bucket: &[u8], key: &[u8], n: u32) -> Vec<Target> {
        let (btype, name) = split_storage_bucket(bucket);
        self.targets(&key_hash(btype, name, key), n)
    }
}
