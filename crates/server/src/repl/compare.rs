//! The pure core of a full-sync: given the keys and clocks both clusters
//! listed for the same dirty segments, which way each differing key is
//! repaired. No I/O; [`super::fullsync`] runs it.
//!
//! Per key (clocks compared causally, as riak_kv's ttaaefs repair fun):
//! * same events → nothing;
//! * the local clock dominates, or the sink lacks the key → **source
//!   ahead**: queued for the sink;
//! * the sink's clock dominates, or only the sink has it → **sink
//!   ahead**: asked of the peer's queue (bi-directional) if configured;
//! * concurrent → both ways (each side merges the other's siblings).
//!
//! A tombstone on one side and nothing on the other mean the same
//! (not found): copying the tombstone would only have the other cluster
//! reap it again later and the first see it come back — the rebound of
//! riak_kv#1813. Unless `delete_mode` is `keep`, such a tombstone is
//! reaped where it is instead ([`Repairs::reap_local`],
//! [`Repairs::reap_remote`]); with `keep` it is copied like any object.

use crate::object::vclock::VClock;
use std::collections::BTreeMap;

/// A listed key: (storage bucket, key, encoded clock, 1 = tombstone).
pub type Listed = (Vec<u8>, Vec<u8>, Vec<u8>, u64);

/// (storage bucket, key).
pub type BKey = (Vec<u8>, Vec<u8>);

/// What a comparison decided; see the module docs.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Repairs {
    /// Keys to queue for the sink.
    pub to_sink: Vec<BKey>,
    /// Keys the sink holds newer: to ask of the peer's queue.
    pub to_source: Vec<BKey>,
    /// Tombstones only this cluster holds: reap here (with this clock).
    pub reap_local: Vec<(BKey, Vec<u8>)>,
    /// Tombstones only the sink holds: reap there (with this clock).
    pub reap_remote: Vec<(BKey, Vec<u8>)>,
    /// Keys newer here (or only here).
    pub source_ahead: u64,
    /// Keys newer on the sink (or only there).
    pub sink_ahead: u64,
}

impl Repairs {
    /// Whether anything differed.
    pub fn in_sync(&self) -> bool {
        self.source_ahead == 0 && self.sink_ahead == 0
    }
}

/// Compares both listings; `keep_tombstones` = `delete_mode` is `keep`.
pub fn compare(local: Vec<Listed>, remote: Vec<Listed>, keep_tombstones: bool) -> Repairs {
    let mut theirs: BTreeMap<BKey, (Vec<u8>, bool)> = remote
        .into_iter()
        .map(|(b, k, c, t)| ((b, k), (c, t == 1)))
        .collect();
    let mut r = Repairs::default();
    for (b, k, clock, tomb) in local {
        let key = (b, k);
        match theirs.remove(&key) {
            None if tomb == 1 && !keep_tombstones => {
                r.source_ahead += 1;
                r.reap_local.push((key, clock));
            }
            None => {
                r.source_ahead += 1;
                r.to_sink.push(key);
            }
            Some((other, _)) => both(&mut r, key, &clock, &other),
        }
    }
    for (key, (clock, tomb)) in theirs {
        r.sink_ahead += 1;
        if tomb && !keep_tombstones {
            r.reap_remote.push((key, clock));
        } else {
            r.to_source.push(key);
        }
    }
    r
}

fn both(r: &mut Repairs, key: BKey, mine: &[u8], theirs: &[u8]) {
    let (Ok(a), Ok(b)) = (VClock::decode(mine), VClock::decode(theirs)) else {
        // An undecodable clock: copy both ways, the merge sorts it out.
        r.source_ahead += 1;
        r.sink_ahead += 1;
        r.to_sink.push(key.clone());
        r.to_source.push(key);
        return;
    };
    if a.same_events(&b) {
        return;
    }
    if a.dominates(&b) {
        r.source_ahead += 1;
        r.to_sink.push(key);
    } else if b.dominates(&a) {
        r.sink_ahead += 1;
        r.to_source.push(key);
    } else {
        r.source_ahead += 1;
        r.sink_ahead += 1;
        r.to_sink.push(key.clone());
        r.to_source.push(key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn clock(events: &[(&str, u32)]) -> Vec<u8> {
        let mut c = VClock::new();
        for (actor, n) in events {
            for _ in 0..*n {
                c.increment(actor.as_bytes(), 1);
            }
        }
        c.encode()
    }

    fn listed(k: &str, c: &[u8], tomb: bool) -> Listed {
        (
            b"b".to_vec(),
            k.as_bytes().to_vec(),
            c.to_vec(),
            u64::from(tomb),
        )
    }

    fn bk(k: &str) -> BKey {
        (b"b".to_vec(), k.as_bytes().to_vec())
    }

    #[test]
    fn clocks_decide_the_direction() {
        let (a1, a2, b1) = (clock(&[("a", 1)]), clock(&[("a", 2)]), clock(&[("b", 1)]));
        let local = vec![
            listed("same", &a1, false),
            listed("newer_here", &a2, false),
            listed("newer_there", &a1, false),
            listed("concurrent", &a1, false),
            listed("only_here", &a1, false),
        ];
        let remote = vec![
            listed("same", &a1, false),
            listed("newer_here", &a1, false),
            listed("newer_there", &a2, false),
            listed("concurrent", &b1, false),
            listed("only_there", &a1, false),
        ];
        let r = compare(local, remote, false);
        assert_eq!(
            r.to_sink,
            [bk("newer_here"), bk("concurrent"), bk("only_here")]
        );
        assert_eq!(
            r.to_source,
            [bk("newer_there"), bk("concurrent"), bk("only_there")]
        );
        assert_eq!((r.source_ahead, r.sink_ahead), (3, 3));
        assert!(r.reap_local.is_empty() && r.reap_remote.is_empty());
        assert!(compare(
            vec![listed("k", &a1, false)],
            vec![listed("k", &a1, false)],
            false
        )
        .in_sync());
    }

    #[test]
    fn a_lone_tombstone_is_reaped_where_it_is_unless_tombstones_are_kept() {
        let t = clock(&[("a", 3)]);
        let r = compare(
            vec![listed("gone", &t, true)],
            vec![listed("gone2", &t, true)],
            false,
        );
        assert_eq!(r.reap_local, [(bk("gone"), t.clone())]);
        assert_eq!(r.reap_remote, [(bk("gone2"), t.clone())]);
        assert!(r.to_sink.is_empty() && r.to_source.is_empty());
        let kept = compare(
            vec![listed("gone", &t, true)],
            vec![listed("gone2", &t, true)],
            true,
        );
        assert_eq!(kept.to_sink, [bk("gone")]);
        assert_eq!(kept.to_source, [bk("gone2")]);
        // A tombstone against a live object is an ordinary clock question.
        let live = clock(&[("a", 2)]);
        let r = compare(
            vec![listed("k", &t, true)],
            vec![listed("k", &live, false)],
            false,
        );
        assert_eq!(r.to_sink, [bk("k")]);
    }
}
