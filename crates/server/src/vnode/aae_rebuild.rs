//! Rebuilding a vnode's anti-entropy trees while it keeps serving: a
//! **sweep** of the vnode's keys in (bucket, key) order, in steps of at
//! most [`AAE_REBUILD_STEP_KEYS`](crate::limits::AAE_REBUILD_STEP_KEYS)
//! keys, each step one job on the vnode's worker (so requests interleave
//! between steps and no step sees a write half done).
//!
//! While the sweep runs, exchanges go on with the old trees (if any), and
//! every write updates them as usual. A write also updates the **new**
//! trees if the sweep has already passed its key (`(bucket, key) <=
//! cursor`); a write ahead of the cursor is not applied, because the sweep
//! will read the key's state when it gets there. So when the sweep ends,
//! the new trees hold exactly the store's state at that moment, with no
//! queue of changes to replay and no snapshot held for hours. When it
//! ends the new trees replace the old ones.
//!
//! The sweep reads heads only: with [`Capability::FoldHeads`] a head fold
//! of the step's range (no value reads; with the **journal check**, keys
//! whose value is no longer in the journal are left out — the seed's
//! "journal check" — so exchanges repair them from the other replicas);
//! otherwise a key fold and one HEAD per key. A step folds from the cursor
//! of one bucket; the next bucket is found by listing the buckets again,
//! so buckets created during the sweep are swept or tracked as any key.

use super::aae_tree::{key_state_hash, AaeTrees};
use super::{VnodeAae, VnodeError, VnodeState};
use crate::object::RiakObject;
use basalt_backend::{Capability, FoldOptions, KeyRange, TreeSize};
use std::collections::BTreeSet;
use std::ops::ControlFlow;

/// Where a sweep stands.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Cursor {
    /// Nothing swept yet.
    Start,
    /// Every key up to and including (`bucket`, `key`) has been swept (an
    /// empty `key` sorts before every key of `bucket`).
    At { bucket: Vec<u8>, key: Vec<u8> },
    /// Every key has been swept.
    Done,
}

/// A rebuild in progress: the new trees and the sweep's cursor.
#[derive(Debug)]
pub struct Rebuild {
    trees: AaeTrees,
    cursor: Cursor,
    journal_check: bool,
    /// Keys swept so far.
    pub keys: u64,
    /// Keys left out because their value is no longer in the journal.
    pub missing_in_journal: u64,
}

/// What one step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Step {
    /// Keys swept by this step.
    pub keys: u64,
    /// Keys swept since the rebuild started.
    pub total_keys: u64,
    /// Keys left out since the rebuild started (journal check).
    pub missing_in_journal: u64,
    /// The sweep is complete and the new trees are in place.
    pub done: bool,
}

impl Rebuild {
    /// A new sweep building trees of `size`.
    pub fn new(size: TreeSize, journal_check: bool) -> Rebuild {
        Rebuild {
            trees: AaeTrees::new(size),
            cursor: Cursor::Start,
            journal_check,
            keys: 0,
            missing_in_journal: 0,
        }
    }

    /// Whether the sweep has passed (`bucket`, `key`), so a change to it
    /// must go into the new trees now.
    pub fn behind(&self, bucket: &[u8], key: &[u8]) -> bool {
        match &self.cursor {
            Cursor::Start => false,
            Cursor::Done => true,
            Cursor::At { bucket: b, key: k } => (bucket, key) <= (b.as_slice(), k.as_slice()),
        }
    }

    /// A key's state changed (see [`AaeTrees::apply`]): applied to the
    /// new trees if the sweep has passed the key.
    pub fn apply(
        &mut self,
        first: u32,
        n_val: u32,
        bucket: &[u8],
        key: &[u8],
        old: Option<u64>,
        new: Option<u64>,
    ) {
        if self.behind(bucket, key) {
            self.trees.apply(first, n_val, bucket, key, old, new);
        }
    }
}

/// One step's keys of one bucket: (key, stored metadata), whether the
/// bucket has no more keys after them, keys the journal check left out.
struct Batch {
    heads: Vec<(Vec<u8>, Vec<u8>)>,
    exhausted: bool,
    missing: u64,
}

impl VnodeState {
    /// Starts rebuilding this vnode's trees (a rebuild in progress starts
    /// over).
    pub fn aae_rebuild_start(&self, journal_check: bool) -> Result<(), VnodeError> {
        let aae = self.aae_handle()?;
        aae.rebuilt.lock().take();
        *aae.rebuild.lock() = Some(Rebuild::new(aae.size, journal_check));
        Ok(())
    }

    /// Drops the rebuild in progress (the old trees stay).
    pub fn aae_rebuild_abort(&self) {
        if let Some(aae) = &self.aae {
            aae.rebuild.lock().take();
        }
    }

    /// Sweeps at most `max_keys` more keys into the rebuild; when the sweep
    /// is complete the new trees (stamped `now_secs`) replace the old
    /// ones. An error drops the rebuild.
    pub fn aae_rebuild_step(&self, max_keys: usize, now_secs: u64) -> Result<Step, VnodeError> {
        let aae = self.aae_handle()?;
        // Taken out while the step runs: only this worker writes, so no
        // write can come between (`track` would find no rebuild).
        let Some(mut rb) = aae.rebuild.lock().take() else {
            // A step queued again after one that timed out, behind it: the
            // rebuild may have completed meanwhile.
            if let Some(done) = *aae.rebuilt.lock() {
                return Ok(Step { keys: 0, ..done });
            }
            return Err(VnodeError::Remote(format!(
                "no anti-entropy rebuild in progress on partition {} (a write that failed after reaching the store drops it)",
                self.partition
            )));
        };
        let keys = self.sweep(aae, &mut rb, max_keys.max(1))?;
        let step = Step {
            keys,
            total_keys: rb.keys,
            missing_in_journal: rb.missing_in_journal,
            done: rb.cursor == Cursor::Done,
        };
        if step.done {
            let mut trees = rb.trees;
            trees.set_built_at(now_secs);
            aae.folds.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            tracing::info!(
                partition = self.partition,
                keys = rb.keys,
                missing_in_journal = rb.missing_in_journal,
                bytes = trees.memory_bytes(),
                "anti-entropy trees rebuilt"
            );
            *aae.trees.lock() = Some(trees);
            *aae.rebuilt.lock() = Some(step);
        } else {
            *aae.rebuild.lock() = Some(rb);
        }
        Ok(step)
    }

    /// (Built at, keys swept by the rebuild in progress) of this vnode's
    /// trees: `None` for trees not built, `None` for no rebuild.
    pub fn aae_tree_state(&self) -> (Option<u64>, Option<u64>) {
        let Some(aae) = &self.aae else {
            return (None, None);
        };
        let built = aae.trees.lock().as_ref().map(AaeTrees::built_at);
        let sweeping = aae.rebuild.lock().as_ref().map(|r| r.keys);
        (built, sweeping)
    }

    fn aae_handle(&self) -> Result<&VnodeAae, VnodeError> {
        self.aae.as_ref().ok_or(VnodeError::Remote(
            "this vnode keeps no anti-entropy trees".into(),
        ))
    }

    /// Moves the cursor over at most `max_keys` keys; the keys swept.
    fn sweep(&self, aae: &VnodeAae, rb: &mut Rebuild, max_keys: usize) -> Result<u64, VnodeError> {
        let mut swept = 0usize;
        while swept < max_keys {
            let (bucket, after) = match &rb.cursor {
                Cursor::Done => break,
                Cursor::Start => match self.backend.list_buckets()?.into_iter().next() {
                    None => {
                        rb.cursor = Cursor::Done;
                        break;
                    }
                    Some(b) => (b, Vec::new()),
                },
                Cursor::At { bucket, key } => (bucket.clone(), key.clone()),
            };
            let batch = self.heads_after(&bucket, &after, max_keys - swept, rb.journal_check)?;
            rb.missing_in_journal += batch.missing;
            let mut last = after;
            for (key, meta) in batch.heads {
                let state = RiakObject::decode_metadata(&meta)?.state_hash();
                let (first, n_val) = aae.list_of(&bucket, &key);
                let h = key_state_hash(&bucket, &key, state);
                rb.trees.apply(first, n_val, &bucket, &key, None, Some(h));
                rb.keys += 1;
                swept += 1;
                debug_assert!(last < key, "a sweep moves forward");
                last = key;
            }
            rb.cursor = if batch.exhausted {
                let next = self
                    .backend
                    .list_buckets()?
                    .into_iter()
                    .find(|b| *b > bucket);
                next.map_or(Cursor::Done, |b| Cursor::At {
                    bucket: b,
                    key: Vec::new(),
                })
            } else {
                Cursor::At { bucket, key: last }
            };
        }
        Ok(swept as u64)
    }

    /// The (at most `limit`) smallest keys of `bucket` above `after`, with
    /// their metadata.
    fn heads_after(
        &self,
        bucket: &[u8],
        after: &[u8],
        limit: usize,
        journal_check: bool,
    ) -> Result<Batch, VnodeError> {
        let caps = self.backend.capabilities();
        let range = KeyRange::new(after, &crate::vnode::serve::KEY_ABOVE_ALL);
        if caps.has(Capability::FoldHeads) && caps.has(Capability::OrderedKeys) {
            let opts = FoldOptions {
                journal_check,
                ..FoldOptions::default()
            };
            let mut heads = Vec::new();
            let outcome =
                self.backend
                    .fold_heads(Some(bucket), Some(&range), &opts, &mut |_, k, h| {
                        if k <= after {
                            return ControlFlow::Continue(());
                        }
                        heads.push((k.to_vec(), h.metadata.clone()));
                        if heads.len() >= limit {
                            ControlFlow::Break(())
                        } else {
                            ControlFlow::Continue(())
                        }
                    })?;
            return Ok(Batch {
                exhausted: heads.len() < limit,
                heads,
                missing: outcome.missing_in_journal,
            });
        }
        // Unordered or without head folds: the smallest keys above the
        // cursor, then one HEAD each.
        let ordered = caps.has(Capability::OrderedKeys);
        let mut keys: BTreeSet<Vec<u8>> = BTreeSet::new();
        let mut more = false;
        self.backend.fold_keys(bucket, Some(&range), &mut |k| {
            if k > after {
                keys.insert(k.to_vec());
                if keys.len() > limit {
                    more = true;
                    keys.pop_last();
                    if ordered {
                        return ControlFlow::Break(());
                    }
                }
            }
            ControlFlow::Continue(())
        })?;
        // A key gone between the fold and its HEAD is left ahead of the
        // cursor; the next step does not find it again.
        let mut heads = Vec::with_capacity(keys.len());
        for k in keys {
            if let Some(h) = self.backend.head(bucket, &k)? {
                heads.push((k, h.metadata));
            }
        }
        Ok(Batch {
            heads,
            exhausted: !more,
            missing: 0,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn behind_follows_bucket_then_key_order() {
        let mut r = Rebuild::new(TreeSize::XXSmall, false);
        assert!(!r.behind(b"a", b"k"), "nothing swept yet");
        r.cursor = Cursor::At {
            bucket: b"b".to_vec(),
            key: b"m".to_vec(),
        };
        assert!(r.behind(b"a", b"zzz"), "an earlier bucket");
        assert!(r.behind(b"b", b"a"));
        assert!(r.behind(b"b", b"m"), "the cursor's own key");
        assert!(!r.behind(b"b", b"ma"));
        assert!(!r.behind(b"c", b"a"), "a later bucket");
        r.cursor = Cursor::At {
            bucket: b"c".to_vec(),
            key: Vec::new(),
        };
        assert!(r.behind(b"b", b"zzz"));
        assert!(!r.behind(b"c", b"\0"), "no key of c swept yet");
        r.cursor = Cursor::Done;
        assert!(r.behind(b"zz", b"zz"));
    }

    #[test]
    fn apply_only_behind_the_cursor() {
        let mut r = Rebuild::new(TreeSize::XXSmall, false);
        r.cursor = Cursor::At {
            bucket: b"b".to_vec(),
            key: b"m".to_vec(),
        };
        r.apply(0, 3, b"b", b"z", None, Some(5));
        assert!(r.trees.root(0, 3).iter().all(|h| *h == 0), "ahead: ignored");
        r.apply(0, 3, b"b", b"a", None, Some(5));
        assert!(
            r.trees.root(0, 3).iter().any(|h| *h != 0),
            "behind: applied"
        );
    }
}
