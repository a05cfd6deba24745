//! Coverage plans handed to clients (`RpbCoverageReq` 70 → 71, Riak 2.x's
//! parallel extraction) and the queries run on one plan entry: 2i
//! (`RpbIndexReq.cover_context`) and CS bucket folds
//! (`RpbCSBucketReq.cover_context`, `kv::csfold`), both through
//! [`CoverScope`].
//!
//! A plan is [`crate::router::Router::coverage_plan`]: covering vnodes, each
//! answering for a set of first primaries (every key's first primary in
//! exactly one entry). Each entry becomes a [`CoverContext`], opaque to the
//! client, which sends it back with a 2i query; that query then asks only
//! the partition's vnode and keeps only the keys whose first primary is
//! the entry's, so the entries' answers together hold every key once.
//!
//! Context bytes (versioned, CRC-checked; Basalt's own, not Riak's
//! `term_to_binary`, which clients never look into):
//!
//! ```text
//! context := version:u8 (=1) crc32c:u32be (of what follows)
//!            ring_size:u32be n_val:u32be partition:u32be
//!            node_len:u16be node  count:u16be first:u32be{count}
//! ```
//!
//! `min_partitions` (any value, 0 included) asks, as in Riak, for the
//! parallel plan (`riak_core_coverage_plan:create_subpartition_plan`): one
//! entry per first primary, so ring-size entries. Without it the plan is
//! the traditional one (one entry per covering vnode).
//!
//! `replace_cover` (`riak_client:replace_cover`, Riak TS 1.x and KV 2.x's
//! coverage API): the entry's first primaries from other primaries of
//! their preference lists, on nodes that are up and are neither the
//! replaced entry's node nor one of the `unavailable_cover` entries'
//! nodes. A one-first entry (a parallel plan's) is replaced by one entry
//! (`replace_subpartition_chunk`), a traditional one by one entry per
//! vnode chosen (`replace_traditional_chunk`); when some first primary has
//! no such primary left the answer is Riak's `primary_partition_unavailable`.
//! Riak excludes whole nodes, not vnodes, so on a one-node cluster every
//! replacement is `primary_partition_unavailable`, in Riak as here (the
//! Java client's coverage-plan tests say they "need cluster to run").
//!
//! Limits and differences from Riak: `min_partitions` above the ring size
//! still gives ring-size entries (Riak goes on to sub-partitions of a
//! partition's hash range); a context made for another ring size is
//! refused ("ask for a new plan"); the vnode is the partition's current
//! owner (after a transfer the context still works); if it is down the
//! query answers `primary_partition_unavailable`. Riak rotates each
//! preference list by the request id before taking a replacement; Basalt
//! takes the first eligible one in ring order.

use super::Kv;
use crate::bucket::keying::split_storage_bucket;
use crate::error::RequestError;
use crate::ring::key_hash;
use crate::router::Target;
use crate::vnode::request::{VnodeReply, VnodeReq};
use basalt_backend::{IndexCursor, IndexPage, IndexQuery, IndexResult};
use std::collections::BTreeSet;

const CONTEXT_VERSION: u8 = 1;

/// One entry of a client's coverage plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoverContext {
    /// Ring size when the plan was made.
    pub ring_size: u32,
    /// The bucket's `n_val` the plan was made for.
    pub n_val: u32,
    /// The partition whose vnode answers.
    pub partition: u32,
    /// Its owner when the plan was made (for `keyspace_desc` and
    /// `unavailable_cover`).
    pub node: String,
    /// The first primaries it answers for.
    pub firsts: Vec<u32>,
}

/// An entry as the client sees it (`RpbCoverageEntry`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CoverEntry {
    /// The PB address of the node to send the query to.
    pub pb_addr: String,
    /// Human-readable description.
    pub desc: String,
    /// The opaque context.
    pub context: Vec<u8>,
}

/// What a query on one plan entry reads and keeps: the entry's vnode, and
/// only the keys whose first primary is one of the entry's.
#[derive(Debug, Clone)]
pub(crate) struct CoverScope {
    /// The vnode to ask.
    pub target: Target,
    firsts: BTreeSet<u32>,
}

fn bad_context() -> RequestError {
    RequestError::Invalid("invalid cover_context".into())
}

impl CoverContext {
    /// The context's bytes (module docs).
    pub fn encode(&self) -> Vec<u8> {
        let mut body = Vec::with_capacity(16 + self.node.len() + 4 * self.firsts.len());
        body.extend_from_slice(&self.ring_size.to_be_bytes());
        body.extend_from_slice(&self.n_val.to_be_bytes());
        body.extend_from_slice(&self.partition.to_be_bytes());
        let node = &self.node.as_bytes()[..self.node.len().min(usize::from(u16::MAX))];
        body.extend_from_slice(&(node.len() as u16).to_be_bytes());
        body.extend_from_slice(node);
        let firsts = &self.firsts[..self.firsts.len().min(usize::from(u16::MAX))];
        body.extend_from_slice(&(firsts.len() as u16).to_be_bytes());
        for f in firsts {
            body.extend_from_slice(&f.to_be_bytes());
        }
        let mut out = vec![CONTEXT_VERSION];
        out.extend_from_slice(&crc32c::crc32c(&body).to_be_bytes());
        out.extend_from_slice(&body);
        out
    }

    /// Parses context bytes; `invalid cover_context` on anything wrong.
    /// Never panics.
    pub fn decode(b: &[u8]) -> Result<CoverContext, RequestError> {
        let (&version, rest) = b.split_first().ok_or_else(bad_context)?;
        if version != CONTEXT_VERSION || rest.len() < 4 {
            return Err(bad_context());
        }
        let (crc, body) = rest.split_at(4);
        if crc32c::crc32c(body).to_be_bytes() != crc {
            return Err(bad_context());
        }
        let mut r = body;
        let mut take = |n: usize| -> Result<&[u8], RequestError> {
            if r.len() < n {
                return Err(bad_context());
            }
            let (h, t) = r.split_at(n);
            r = t;
            Ok(h)
        };
        let u32_of = |s: &[u8]| u32::from_be_bytes([s[0], s[1], s[2], s[3]]);
        let ring_size = u32_of(take(4)?);
        let n_val = u32_of(take(4)?);
        let partition = u32_of(take(4)?);
        let nl = take(2)?;
        let node_len = usize::from(u16::from_be_bytes([nl[0], nl[1]]));
        let node = String::from_utf8(take(node_len)?.to_vec()).map_err(|_| bad_context())?;
        let cl = take(2)?;
        let count = usize::from(u16::from_be_bytes([cl[0], cl[1]]));
        let mut firsts = Vec::with_capacity(count.min(1024));
        for _ in 0..count {
            firsts.push(u32_of(take(4)?));
        }
        if !r.is_empty() || partition >= ring_size || firsts.iter().any(|f| *f >= ring_size) {
            return Err(bad_context());
        }
        Ok(CoverContext {
            ring_size,
            n_val,
            partition,
            node,
            firsts,
        })
    }
}

/// Partitions holding every key whose first primary is in `firsts`, with
/// `n` replicas on a ring of `size`: those within `n` after each of them.
fn holders(firsts: &[u32], n: u32, size: u32) -> Vec<u32> {
    let n = n.clamp(1, size);
    (0..size)
        .filter(|p| firsts.iter().all(|f| (p + size - f) % size < n))
        .collect()
}

impl Kv {
    /// A coverage plan for `bucket` (a storage bucket) as client entries:
    /// one per covering vnode, or one per first primary when
    /// `min_partitions` is given (Riak's parallel plan, whatever its value).
    pub fn coverage_entries(
        &self,
        bucket: &[u8],
        min_partitions: Option<u32>,
    ) -> Result<Vec<CoverEntry>, RequestError> {
        let n_val = self.props.get(bucket).n_val;
        let plan = self
            .router
            .coverage_plan(n_val)
            .ok_or_else(|| RequestError::Invalid("insufficient_vnodes_available".into()))?;
        let split = min_partitions.is_some();
        let mut out = Vec::new();
        for (t, firsts) in plan {
            let groups: Vec<Vec<u32>> = if split {
                firsts.iter().map(|f| vec![*f]).collect()
            } else {
                vec![firsts]
            };
            for g in groups {
                out.push(self.entry_for(&t, n_val, g));
            }
        }
        Ok(out)
    }

    /// A replacement for the entry `failed` (its vnode unreachable for the
    /// client): the same first primaries from other primaries, on up nodes
    /// other than those of `failed` and `unavailable` (module docs). One
    /// entry when one vnode holds them all, else one per vnode chosen;
    /// `primary_partition_unavailable` when some first primary has no
    /// primary on such a node.
    pub fn replace_cover(
        &self,
        failed: &[u8],
        unavailable: &[Vec<u8>],
    ) -> Result<Vec<CoverEntry>, RequestError> {
        let ctx = self.current_context(failed)?;
        let mut avoid: BTreeSet<String> = BTreeSet::from([ctx.node.clone()]);
        for u in unavailable {
            avoid.insert(CoverContext::decode(u)?.node);
        }
        let size = ctx.ring_size;
        let pick = |firsts: &[u32]| -> Option<Target> {
            self.router.cluster.with_state(|s| {
                holders(firsts, ctx.n_val, size).into_iter().find_map(|p| {
                    let owner = s.owner(p);
                    (!avoid.contains(owner) && self.router.cluster.is_up(owner)).then(|| Target {
                        partition: p,
                        node: owner.to_string(),
                        primary: true,
                    })
                })
            })
        };
        if let Some(t) = pick(&ctx.firsts) {
            return Ok(vec![self.entry_for(&t, ctx.n_val, ctx.firsts.clone())]);
        }
        // Each first primary on its own, then one entry per vnode chosen
        // (as Riak consolidates the filters of a replaced traditional chunk).
        let mut chosen: Vec<(Target, Vec<u32>)> = Vec::new();
        for f in &ctx.firsts {
            let t = pick(&[*f])
                .ok_or_else(|| RequestError::Invalid("primary_partition_unavailable".into()))?;
            match chosen.iter_mut().find(|(c, _)| c.partition == t.partition) {
                Some((_, firsts)) => firsts.push(*f),
                None => chosen.push((t, vec![*f])),
            }
        }
        Ok(chosen
            .into_iter()
            .map(|(t, firsts)| self.entry_for(&t, ctx.n_val, firsts))
            .collect())
    }

    fn entry_for(&self, t: &Target, n_val: u32, firsts: Vec<u32>) -> CoverEntry {
        let pb_addr = self.router.cluster.with_state(|s| {
            s.members
                .get(&t.node)
                .map(|m| m.addr.clone())
                .unwrap_or_default()
        });
        // As `riak_kv_pb_coverage`: "node : partition", marked when the
        // entry answers for only some of the keys its vnode holds.
        let mut desc = format!("{} : {}", t.node, t.partition);
        if (firsts.len() as u32) < n_val.min(self.router.ring.size()) {
            desc.push_str(" (subselection)");
        }
        let ctx = CoverContext {
            ring_size: self.router.ring.size(),
            n_val,
            partition: t.partition,
            node: t.node.clone(),
            firsts,
        };
        CoverEntry {
            pb_addr,
            desc,
            context: ctx.encode(),
        }
    }

    /// Decodes a context and checks it against the current ring.
    fn current_context(&self, b: &[u8]) -> Result<CoverContext, RequestError> {
        let ctx = CoverContext::decode(b)?;
        if ctx.ring_size != self.router.ring.size() {
            return Err(RequestError::Invalid(
                "cover_context was made for another ring size; ask for a new coverage plan".into(),
            ));
        }
        Ok(ctx)
    }

    /// The vnode answering for a context: the partition's current owner,
    /// which must be up (else `primary_partition_unavailable`).
    fn cover_target(&self, ctx: &CoverContext) -> Result<Target, RequestError> {
        let owner = self
            .router
            .cluster
            .with_state(|s| s.owner(ctx.partition).to_string());
        if !self.router.cluster.is_up(&owner) {
            return Err(RequestError::Invalid(
                "primary_partition_unavailable".into(),
            ));
        }
        Ok(Target {
            partition: ctx.partition,
            node: owner,
            primary: true,
        })
    }

    /// The scope of a plan entry's context: its vnode (the partition's
    /// current owner, which must be up) and its first primaries. Errors: a
    /// damaged context, one made for another ring size,
    /// `primary_partition_unavailable`.
    pub(crate) fn cover_scope(&self, context: &[u8]) -> Result<CoverScope, RequestError> {
        let ctx = self.current_context(context)?;
        Ok(CoverScope {
            target: self.cover_target(&ctx)?,
            firsts: ctx.firsts.iter().copied().collect(),
        })
    }

    /// Whether `key` of `bucket` (a storage bucket) belongs to the entry:
    /// its first primary is one of the entry's.
    pub(crate) fn in_cover(&self, scope: &CoverScope, bucket: &[u8], key: &[u8]) -> bool {
        let (btype, bname) = split_storage_bucket(bucket);
        scope
            .firsts
            .contains(&self.router.ring.first_primary(&key_hash(btype, bname, key)))
    }

    /// A 2i query on one coverage plan entry (`cover_context`): only that
    /// entry's vnode, only keys whose first primary is the entry's. Paged
    /// as [`Node::index_query`]: the vnode is read in rounds of
    /// `max_results` after the last result seen, until the page is full or
    /// the vnode has no more, so a page reads O(`max_results` × rounds).
    pub async fn index_query_cover(
        &self,
        q: IndexQuery,
        context: &[u8],
    ) -> Result<IndexPage, RequestError> {
        let scope = self.cover_scope(context)?;
        let mut after = match &q.continuation {
            None => q.start_after.clone().map(|c| (c.term, c.key)),
            Some(c) => Some(
                super::index::decode_continuation(c)
                    .ok_or_else(|| RequestError::Invalid("invalid continuation".into()))?,
            ),
        };
        let max = q.max_results.filter(|m| *m > 0);
        let mut results: Vec<IndexResult> = Vec::new();
        loop {
            let mut sub = q.clone();
            sub.max_results = max;
            sub.continuation = None;
            sub.start_after = after
                .as_ref()
                .map(|(t, k)| IndexCursor::new(t.clone(), k.clone()));
            sub.return_terms = q.end.is_some() || q.field == b"$key";
            let VnodeReply::Index(page) = self
                .router
                .vcall(&scope.target, VnodeReq::Index(sub))
                .await?
            else {
                return Err(RequestError::Storage("unexpected index reply".into()));
            };
            let full = max.is_some_and(|m| page.results.len() >= m as usize);
            if let Some(last) = page.results.last() {
                after = Some((last.term.clone().unwrap_or_default(), last.key.clone()));
            }
            results.extend(
                page.results
                    .into_iter()
                    .filter(|r| self.in_cover(&scope, &q.bucket, &r.key)),
            );
            if !full || max.is_some_and(|m| results.len() >= m as usize) {
                break;
            }
        }
        let mut continuation = None;
        if let Some(m) = max {
            if results.len() >= m as usize {
                results.truncate(m as usize);
                continuation = results.last().map(|l| {
                    super::index::encode_continuation(l.term.as_deref().unwrap_or_default(), &l.key)
                });
            }
        }
        if !(q.return_terms && q.end.is_some() && q.field != b"$key") {
            for r in &mut results {
                r.term = None;
            }
        }
        Ok(IndexPage {
            results,
            continuation,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_round_trips_and_refuses_damage() {
        let c = CoverContext {
            ring_size: 64,
            n_val: 3,
            partition: 7,
            node: "n1@127.0.0.1".into(),
            firsts: vec![5, 6, 7],
        };
        let b = c.encode();
        assert_eq!(CoverContext::decode(&b).unwrap(), c);
        for i in 0..b.len() {
            let mut d = b.clone();
            d[i] ^= 0x40;
            assert!(CoverContext::decode(&d).is_err(), "flip at {i}");
            assert!(CoverContext::decode(&b[..i]).is_err(), "cut at {i}");
        }
        assert!(CoverContext::decode(b"").is_err());
    }

    #[test]
    fn holders_are_the_replicas_of_every_first() {
        assert_eq!(holders(&[5, 6, 7], 3, 64), vec![7]);
        assert_eq!(holders(&[6], 3, 64), vec![6, 7, 8]);
        assert_eq!(holders(&[63], 3, 64), vec![0, 1, 63]);
        assert_eq!(holders(&[62, 63, 0], 3, 64), vec![0]);
    }
}
