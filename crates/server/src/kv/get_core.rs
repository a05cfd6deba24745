//! The pure core of a GET, as `riak_kv_get_core`: it only counts the
//! replicas' replies to the HEAD round and decides — keep waiting, the
//! quorum is met, or the answer now (give up early with `basic_quorum`, or
//! the verdict once no more replies come). No I/O, so it is tested on its
//! own against Riak's rules (r, pr, notfound_ok, basic_quorum).
//!
//! Rules:
//! * a reply is *ok* when it found the object (a tombstone counts: it is an
//!   answer), or when it is "not found" and `notfound_ok` is on;
//! * the quorum is met once `r` replies are ok and `pr` of them came from
//!   primaries;
//! * with `basic_quorum`, the GET gives up once not-founds (when they are
//!   not ok) plus failures reach `min(n / 2 + 1, n - max(r, pr) + 1)`:
//!   not found when no replica failed and none answered a live object,
//!   else `overload` if a replica was overloaded, else `r_val_unsatisfied`;
//! * with every reply in and the quorum not met: `overload` if a replica
//!   was overloaded; not found if nothing was found and at least
//!   `max(r, pr)` replicas answered; else `{r|pr}_val_unsatisfied`.
//!
//! Once the quorum is met, two more pure steps: [`winning_versions`] picks
//! the versions whose values the FSM fetches (and from which replicas, in
//! which order), and [`stale_replicas`] the replicas read repair writes to.

use super::GetOutcome;
use crate::error::RequestError;
use crate::object::RiakObject;

/// What the GET FSM does after a reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// Wait for more replies.
    Wait,
    /// The quorum is met: fetch the value and answer.
    Enough,
    /// Answer this now (no value fetch, no read repair).
    Done(Result<GetOutcome, Failure>),
}

/// Why a GET failed, as the core sees it (mapped to [`RequestError`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Failure {
    /// A replica's queue was full.
    Overload,
    /// `kind` = "r" or "pr": needed `need`, got `got`.
    Unsatisfied {
        /// "r" or "pr".
        kind: &'static str,
        /// Replies needed.
        need: u32,
        /// Ok replies (primaries for "pr").
        got: u32,
    },
}

impl From<Failure> for RequestError {
    fn from(f: Failure) -> Self {
        match f {
            Failure::Overload => RequestError::Overload,
            Failure::Unsatisfied { kind, need, got } => {
                RequestError::Unsatisfied { kind, need, got }
            }
        }
    }
}

/// The counts of one GET's HEAD round; see the module docs.
#[derive(Debug, Clone)]
pub struct GetCore {
    n: u32,
    r: u32,
    pr: u32,
    notfound_ok: bool,
    /// Not-ok not-founds + failures that end the GET (`None`: never early).
    fail_threshold: Option<u32>,
    found: u32,
    found_primary: u32,
    notfound: u32,
    notfound_primary: u32,
    failed: u32,
    overloaded: bool,
    live: bool,
}

impl GetCore {
    /// A GET of a key on `n` replicas.
    pub fn new(n: u32, r: u32, pr: u32, notfound_ok: bool, basic_quorum: bool) -> GetCore {
        let need = r.max(pr);
        let fail_threshold = basic_quorum.then(|| (n / 2 + 1).min((n + 1).saturating_sub(need)));
        GetCore {
            n,
            r,
            pr,
            notfound_ok,
            fail_threshold,
            found: 0,
            found_primary: 0,
            notfound: 0,
            notfound_primary: 0,
            failed: 0,
            overloaded: false,
            live: false,
        }
    }

    fn replies(&self) -> u32 {
        self.found + self.notfound + self.failed
    }

    /// A replica answered: `Some(deleted)` = it holds the object (a
    /// tombstone when `deleted`), `None` = not found.
    pub fn reply(&mut self, primary: bool, found: Option<bool>) {
        debug_assert!(self.replies() < self.n, "more replies than replicas");
        match found {
            Some(deleted) => {
                self.found += 1;
                self.found_primary += u32::from(primary);
                self.live |= !deleted;
            }
            None => {
                self.notfound += 1;
                self.notfound_primary += u32::from(primary);
            }
        }
    }

    /// A replica failed (error or timeout; `overload`: its queue was full).
    pub fn failed(&mut self, overload: bool) {
        debug_assert!(self.replies() < self.n, "more replies than replicas");
        self.failed += 1;
        self.overloaded |= overload;
    }

    /// Ok replies and ok replies from primaries.
    fn ok(&self) -> (u32, u32) {
        if self.notfound_ok {
            (
                self.found + self.notfound,
                self.found_primary + self.notfound_primary,
            )
        } else {
            (self.found, self.found_primary)
        }
    }

    /// The quorum is met.
    pub fn enough(&self) -> bool {
        let (ok, primary) = self.ok();
        ok >= self.r && primary >= self.pr
    }

    /// Some replica found the object (live or tombstone).
    pub fn found_any(&self) -> bool {
        self.found > 0
    }

    /// Every replica answered or failed.
    pub fn all_in(&self) -> bool {
        self.replies() >= self.n
    }

    /// The decision after the replies so far.
    pub fn verdict(&self) -> Verdict {
        if self.enough() {
            return Verdict::Enough;
        }
        if let Some(threshold) = self.fail_threshold {
            let bad = self.failed + if self.notfound_ok { 0 } else { self.notfound };
            if bad >= threshold {
                return Verdict::Done(self.give_up());
            }
        }
        if self.all_in() {
            return Verdict::Done(self.exhausted());
        }
        Verdict::Wait
    }

    /// `basic_quorum`'s early answer.
    fn give_up(&self) -> Result<GetOutcome, Failure> {
        if self.failed == 0 && !self.live {
            Ok(GetOutcome::NotFound)
        } else if self.overloaded {
            Err(Failure::Overload)
        } else {
            Err(Failure::Unsatisfied {
                kind: "r",
                need: self.r.max(self.pr),
                got: self.ok().0,
            })
        }
    }

    /// The answer when no more replies will come and the quorum is not met.
    pub fn exhausted(&self) -> Result<GetOutcome, Failure> {
        debug_assert!(!self.enough());
        let (ok, primary) = self.ok();
        if self.overloaded {
            return Err(Failure::Overload);
        }
        if self.found == 0 && self.found + self.notfound >= self.r.max(self.pr) {
            return Ok(GetOutcome::NotFound);
        }
        Err(if ok < self.r {
            Failure::Unsatisfied {
                kind: "r",
                need: self.r,
                got: ok,
            }
        } else {
            Failure::Unsatisfied {
                kind: "pr",
                need: self.pr,
                got: primary,
            }
        })
    }
}

/// The versions a GET fetches, from the HEAD round's found replies
/// `(replica, object, queue length)`: one entry per distinct version
/// (clock events and siblings) whose clock no other found version
/// dominates, listing every replica holding it, the least-queued first —
/// if that one fails before its value comes back (a node killed between
/// the rounds), the FSM asks the next.
pub fn winning_versions<T: Copy>(found: &[(T, &RiakObject, u32)]) -> Vec<Vec<T>> {
    let mut winners: Vec<(&RiakObject, Vec<(T, u32)>)> = Vec::new();
    for &(replica, object, queue) in found {
        if found.iter().any(|f| f.1.vclock.dominates(&object.vclock)) {
            continue;
        }
        match winners.iter_mut().find(|w| w.0.same_state(object)) {
            Some(w) => w.1.push((replica, queue)),
            None => winners.push((object, vec![(replica, queue)])),
        }
    }
    winners
        .into_iter()
        .map(|(_, mut holders)| {
            holders.sort_by_key(|h| h.1);
            holders.into_iter().map(|h| h.0).collect()
        })
        .collect()
}

/// The replicas read repair writes `merged` to: those that answered the
/// HEAD round with another version, or with not found.
pub fn stale_replicas<'a, T>(
    heads: &'a [(T, Option<RiakObject>, u32)],
    merged: &'a RiakObject,
) -> impl Iterator<Item = &'a T> {
    heads
        .iter()
        .filter(|(_, h, _)| h.as_ref().is_none_or(|h| !h.same_state(merged)))
        .map(|(t, _, _)| t)
}

/// Whether a GET asks for the tombstone to be reaped (Riak's
/// `final_action` = `delete`): the merged object is a tombstone, all
/// `n_val` replicas `answered`, and none is `stale` (missing, or holding
/// another version).
pub fn reap_on_read(merged: &RiakObject, answered: usize, stale: usize, n_val: u32) -> bool {
    merged.is_deleted() && answered == n_val as usize && stale == 0
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::object::vclock::VClock;
    use crate::object::Content;
    use proptest::prelude::*;

    fn version(actors: &[&[u8]], vtag: &str) -> RiakObject {
        let mut vclock = VClock::new();
        for a in actors {
            vclock.increment(a, 1);
        }
        RiakObject {
            vclock,
            contents: vec![Content {
                vtag: Some(vtag.as_bytes().to_vec()),
                ..Content::default()
            }],
        }
    }

    #[test]
    fn winners_skip_dominated_versions_and_list_holders_least_queued_first() {
        let old = version(&[b"a"], "old");
        let new = version(&[b"a", b"b"], "new");
        let other = version(&[b"a", b"c"], "other");
        // Replica 3 holds `new` too, with a shorter queue than replica 1.
        let found = [(0, &old, 5), (1, &new, 3), (2, &other, 1), (3, &new, 0)];
        assert_eq!(winning_versions(&found), vec![vec![3, 1], vec![2]]);
        // One version everywhere: one fetch, every holder a fallback.
        let same = [(0, &old, 2), (1, &old, 1)];
        assert_eq!(winning_versions(&same), vec![vec![1, 0]]);
        assert!(winning_versions::<u8>(&[]).is_empty());
    }

    #[test]
    fn stale_replicas_are_the_other_versions_and_the_not_founds() {
        let old = version(&[b"a"], "old");
        let new = version(&[b"a", b"b"], "new");
        let heads = [
            (0, Some(old.clone()), 0),
            (1, Some(new.clone()), 0),
            (2, None, 0),
        ];
        assert_eq!(stale_replicas(&heads, &new).collect::<Vec<_>>(), [&0, &2]);
        assert_eq!(stale_replicas(&heads, &old).collect::<Vec<_>>(), [&1, &2]);
    }

    #[test]
    fn a_read_reaps_only_a_tombstone_every_replica_holds() {
        let live = version(&[b"a"], "v");
        let mut tomb = version(&[b"a", b"b"], "t");
        tomb.contents[0].deleted = true;
        let heads = [(0, Some(tomb.clone()), 0), (1, Some(tomb.clone()), 0)];
        let stale = stale_replicas(&heads, &tomb).count();
        assert!(reap_on_read(&tomb, heads.len(), stale, 2));
        // A replica yet to answer: no reap.
        assert!(!reap_on_read(&tomb, 1, 0, 2));
        // A replica missing it or holding another version: no reap.
        for other in [None, Some(live.clone())] {
            let heads = [(0, Some(tomb.clone()), 0), (1, other, 0)];
            let stale = stale_replicas(&heads, &tomb).count();
            assert!(!reap_on_read(&tomb, heads.len(), stale, 2));
        }
        // A live object is never reaped.
        assert!(!reap_on_read(&live, 2, 0, 2));
    }

    /// One replica's reply in a test history.
    #[derive(Debug, Clone, Copy)]
    enum Reply {
        Live,
        Tombstone,
        NotFound,
        Failed,
        Overload,
    }

    fn feed(core: &mut GetCore, primary: bool, r: Reply) {
        match r {
            Reply::Live => core.reply(primary, Some(false)),
            Reply::Tombstone => core.reply(primary, Some(true)),
            Reply::NotFound => core.reply(primary, None),
            Reply::Failed => core.failed(false),
            Reply::Overload => core.failed(true),
        }
    }

    fn reply() -> impl Strategy<Value = Reply> {
        prop_oneof![
            Just(Reply::Live),
            Just(Reply::Tombstone),
            Just(Reply::NotFound),
            Just(Reply::Failed),
            Just(Reply::Overload),
        ]
    }

    #[test]
    fn basic_quorum_gives_up_on_a_majority_of_not_founds() {
        // n = 3, r = 1: gives up after 2 not-founds; without it, never early.
        let mut c = GetCore::new(3, 1, 0, false, true);
        c.reply(true, None);
        assert_eq!(c.verdict(), Verdict::Wait);
        c.reply(true, None);
        assert_eq!(c.verdict(), Verdict::Done(Ok(GetOutcome::NotFound)));
        let mut c = GetCore::new(3, 1, 0, false, false);
        c.reply(true, None);
        c.reply(true, None);
        assert_eq!(c.verdict(), Verdict::Wait);
        // r = 3: one not-found already makes r unreachable.
        let mut c = GetCore::new(3, 3, 0, false, true);
        c.reply(true, None);
        assert_eq!(c.verdict(), Verdict::Done(Ok(GetOutcome::NotFound)));
    }

    #[test]
    fn a_live_object_seen_turns_giving_up_into_an_r_error() {
        let mut c = GetCore::new(3, 2, 0, false, true);
        c.reply(true, Some(false));
        c.reply(true, None);
        c.reply(true, None);
        assert_eq!(
            c.verdict(),
            Verdict::Done(Err(Failure::Unsatisfied {
                kind: "r",
                need: 2,
                got: 1
            }))
        );
    }

    #[test]
    fn pr_counts_primaries_only() {
        let mut c = GetCore::new(3, 2, 2, false, false);
        c.reply(true, Some(false));
        c.reply(false, Some(false));
        assert_eq!(c.verdict(), Verdict::Wait);
        c.failed(false);
        assert_eq!(
            c.verdict(),
            Verdict::Done(Err(Failure::Unsatisfied {
                kind: "pr",
                need: 2,
                got: 1
            }))
        );
    }

    proptest! {
        /// Against a model that recounts the whole history after each
        /// reply: the core waits exactly while the model says neither
        /// "enough" nor an answer, and its answers are the model's.
        #[test]
        fn the_core_agrees_with_riaks_rules(
            n in 1u32..=5,
            r_raw in 1u32..=5,
            pr_raw in 0u32..=5,
            notfound_ok: bool,
            basic_quorum: bool,
            history in proptest::collection::vec((reply(), any::<bool>()), 5),
        ) {
            let r = r_raw.min(n);
            let pr = pr_raw.min(r);
            let mut core = GetCore::new(n, r, pr, notfound_ok, basic_quorum);
            let threshold = (n / 2 + 1).min(n + 1 - r.max(pr));
            for (i, &(rep, primary)) in history.iter().take(n as usize).enumerate() {
                feed(&mut core, primary, rep);
                let seen = &history[..=i];
                let is_ok = |x: &(Reply, bool)| match x.0 {
                    Reply::Live | Reply::Tombstone => true,
                    Reply::NotFound => notfound_ok,
                    _ => false,
                };
                let ok = seen.iter().filter(|x| is_ok(x)).count() as u32;
                let ok_primary = seen.iter().filter(|x| is_ok(x) && x.1).count() as u32;
                let failed = seen.iter().filter(|x| matches!(x.0, Reply::Failed | Reply::Overload)).count() as u32;
                let notfound = seen.iter().filter(|x| matches!(x.0, Reply::NotFound)).count() as u32;
                let found = seen.iter().filter(|x| matches!(x.0, Reply::Live | Reply::Tombstone)).count() as u32;
                let live = seen.iter().any(|x| matches!(x.0, Reply::Live));
                let overload = seen.iter().any(|x| matches!(x.0, Reply::Overload));
                let v = core.verdict();
                if ok >= r && ok_primary >= pr {
                    prop_assert_eq!(v, Verdict::Enough);
                    break;
                }
                let bad = failed + if notfound_ok { 0 } else { notfound };
                if basic_quorum && bad >= threshold {
                    let want = if failed == 0 && !live {
                        Ok(GetOutcome::NotFound)
                    } else if overload {
                        Err(Failure::Overload)
                    } else {
                        Err(Failure::Unsatisfied { kind: "r", need: r.max(pr), got: ok })
                    };
                    prop_assert_eq!(v, Verdict::Done(want));
                    break;
                }
                if i as u32 + 1 == n {
                    let want = if overload {
                        Err(Failure::Overload)
                    } else if found == 0 && found + notfound >= r.max(pr) {
                        Ok(GetOutcome::NotFound)
                    } else if ok < r {
                        Err(Failure::Unsatisfied { kind: "r", need: r, got: ok })
                    } else {
                        Err(Failure::Unsatisfied { kind: "pr", need: pr, got: ok_primary })
                    };
                    prop_assert_eq!(v, Verdict::Done(want));
                    break;
                }
                prop_assert_eq!(v, Verdict::Wait);
            }
        }

        /// A GET never answers "not found" when a replica that answered
        /// holds a live object.
        #[test]
        fn never_not_found_past_a_live_reply(
            n in 1u32..=5,
            r_raw in 1u32..=5,
            notfound_ok: bool,
            basic_quorum: bool,
            history in proptest::collection::vec((reply(), any::<bool>()), 5),
        ) {
            let r = r_raw.min(n);
            let mut core = GetCore::new(n, r, 0, notfound_ok, basic_quorum);
            let mut live = false;
            for &(rep, primary) in history.iter().take(n as usize) {
                feed(&mut core, primary, rep);
                live |= matches!(rep, Reply::Live);
                if let Verdict::Done(out) = core.verdict() {
                    prop_assert!(!(live && out == Ok(GetOutcome::NotFound)));
                    break;
                }
            }
        }
    }
}
