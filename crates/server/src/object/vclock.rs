//! Vector clocks, as Riak's `riak_vclock` with `vnode_vclocks`: one entry per
//! actor (a vnode id, see [`crate::ring::actor`]) with a counter and the time
//! of its last increment.
//!
//! Wire and storage encoding (opaque to clients, stable; version 1):
//! `01 | count:u32be | count × (actor_len:u16be | actor | counter:u64be | timestamp:u64be)`,
//! entries sorted by actor, timestamps in seconds since the Unix epoch.

/// Why a clock could not be decoded.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid vclock: {0}")]
pub struct VclockError(pub &'static str);

/// One actor's entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// Actor id.
    pub actor: Vec<u8>,
    /// Events seen from the actor.
    pub counter: u64,
    /// Seconds since the epoch of the last increment.
    pub timestamp: u64,
}

/// A vector clock; entries are kept sorted by actor.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct VClock {
    entries: Vec<Entry>,
}

/// Pruning limits (bucket props `small_vclock`, `big_vclock`, `young_vclock`, `old_vclock`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PruneProps {
    /// Never prune at or below this many entries.
    pub small: u32,
    /// Always prune above this many entries (oldest first, unless young).
    pub big: u32,
    /// Never prune entries younger than this (seconds).
    pub young: u64,
    /// Prune entries older than this (seconds).
    pub old: u64,
}

impl Default for PruneProps {
    fn default() -> Self {
        PruneProps {
            small: 50,
            big: 50,
            young: 20,
            old: 86_400,
        }
    }
}

impl VClock {
    /// The empty clock.
    pub fn new() -> VClock {
        VClock::default()
    }

    /// True if no actor has an entry.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// A clock of `entries` (any order; an actor given twice keeps its
    /// highest counter, and that entry's timestamp). For clocks read from
    /// another system (`basalt migrate` turns a Riak vclock into one).
    pub fn from_entries(entries: impl IntoIterator<Item = Entry>) -> VClock {
        let mut v: Vec<Entry> = entries.into_iter().collect();
        v.sort_by(|a, b| a.actor.cmp(&b.actor).then(b.counter.cmp(&a.counter)));
        v.dedup_by(|later, first| later.actor == first.actor);
        VClock { entries: v }
    }

    /// The entries, sorted by actor.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The counter of `actor` (0 if absent).
    pub fn counter(&self, actor: &[u8]) -> u64 {
        self.find(actor).map_or(0, |i| self.entries[i].counter)
    }

    fn find(&self, actor: &[u8]) -> Option<usize> {
        self.entries
            .binary_search_by(|e| e.actor.as_slice().cmp(actor))
            .ok()
    }

    /// Adds one event of `actor` at `now` (seconds).
    pub fn increment(&mut self, actor: &[u8], now: u64) {
        match self
            .entries
            .binary_search_by(|e| e.actor.as_slice().cmp(actor))
        {
            Ok(i) => {
                let e = &mut self.entries[i];
                e.counter = e.counter.saturating_add(1);
                e.timestamp = now;
            }
            Err(i) => self.entries.insert(
                i,
                Entry {
                    actor: actor.to_vec(),
                    counter: 1,
                    timestamp: now,
                },
            ),
        }
    }

    /// True if `self` has seen every event of `other` (a clock descends itself).
    pub fn descends(&self, other: &VClock) -> bool {
        other
            .entries
            .iter()
            .all(|e| self.counter(&e.actor) >= e.counter)
    }

    /// True if `self` descends `other` and differs from it.
    pub fn dominates(&self, other: &VClock) -> bool {
        self.descends(other) && !other.descends(self)
    }

    /// True if the clocks record the same events (timestamps ignored).
    pub fn same_events(&self, other: &VClock) -> bool {
        self.descends(other) && other.descends(self)
    }

    /// The least clock descending both: the larger counter per actor (with
    /// its timestamp).
    pub fn merge(&self, other: &VClock) -> VClock {
        let mut out = self.clone();
        for e in &other.entries {
            match out
                .entries
                .binary_search_by(|x| x.actor.as_slice().cmp(&e.actor))
            {
                Ok(i) => {
                    let x = &mut out.entries[i];
                    if e.counter > x.counter
                        || (e.counter == x.counter && e.timestamp > x.timestamp)
                    {
                        x.counter = e.counter;
                        x.timestamp = e.timestamp;
                    }
                }
                Err(i) => out.entries.insert(i, e.clone()),
            }
        }
        out
    }

    /// Prunes as `riak_vclock:prune/3`: while the clock has more than
    /// `small` entries, drop the oldest entry if it is not younger than
    /// `young` and either the clock has more than `big` entries or the entry
    /// is older than `old`.
    pub fn prune(&mut self, now: u64, props: &PruneProps) {
        let mut by_age: Vec<Entry> = self.entries.clone();
        by_age.sort_by_key(|e| e.timestamp);
        let mut start = 0;
        while by_age.len() - start > props.small as usize {
            let oldest = &by_age[start];
            let age = now.saturating_sub(oldest.timestamp);
            if age < props.young {
                break;
            }
            if by_age.len() - start > props.big as usize || age > props.old {
                start += 1;
            } else {
                break;
            }
        }
        if start > 0 {
            let mut kept = by_age.split_off(start);
            kept.sort_by(|a, b| a.actor.cmp(&b.actor));
            self.entries = kept;
        }
    }

    /// The binary encoding (see the module docs).
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(5 + self.entries.len() * 32);
        out.push(1);
        out.extend_from_slice(&(self.entries.len() as u32).to_be_bytes());
        for e in &self.entries {
            out.extend_from_slice(&(e.actor.len() as u16).to_be_bytes());
            out.extend_from_slice(&e.actor);
            out.extend_from_slice(&e.counter.to_be_bytes());
            out.extend_from_slice(&e.timestamp.to_be_bytes());
        }
        out
    }

    /// Decodes [`VClock::encode`]'s output; an empty slice is the empty clock.
    pub fn decode(bytes: &[u8]) -> Result<VClock, VclockError> {
        if bytes.is_empty() {
            return Ok(VClock::new());
        }
        if bytes[0] != 1 {
            return Err(VclockError("unknown version"));
        }
        let mut pos = 1;
        let take = |pos: &mut usize, n: usize| -> Result<&[u8], VclockError> {
            let end = pos.checked_add(n).ok_or(VclockError("length overflow"))?;
            let s = bytes.get(*pos..end).ok_or(VclockError("truncated"))?;
            *pos = end;
            Ok(s)
        };
        let count = u32::from_be_bytes(
            take(&mut pos, 4)?
                .try_into()
                .map_err(|_| VclockError("count"))?,
        );
        let mut entries: Vec<Entry> = Vec::new();
        for _ in 0..count {
            let alen = u16::from_be_bytes(
                take(&mut pos, 2)?
                    .try_into()
                    .map_err(|_| VclockError("actor"))?,
            );
            let actor = take(&mut pos, alen as usize)?.to_vec();
            let counter = u64::from_be_bytes(
                take(&mut pos, 8)?
                    .try_into()
                    .map_err(|_| VclockError("counter"))?,
            );
            let timestamp = u64::from_be_bytes(
                take(&mut pos, 8)?
                    .try_into()
                    .map_err(|_| VclockError("timestamp"))?,
            );
            if let Some(last) = entries.last() {
                if last.actor >= actor {
                    return Err(VclockError("actors not sorted"));
                }
            }
            entries.push(Entry {
                actor,
                counter,
                timestamp,
            });
        }
        if pos != bytes.len() {
            return Err(VclockError("trailing bytes"));
        }
        Ok(VClock { entries })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn increment_descends_merge() {
        let mut a = VClock::new();
        a.increment(b"x", 1);
        let mut b = a.clone();
        b.increment(b"y", 2);
        assert!(b.descends(&a) && b.dominates(&a) && !a.descends(&b));
        let mut c = a.clone();
        c.increment(b"x", 3);
        assert!(!c.descends(&b) && !b.descends(&c));
        let m = b.merge(&c);
        assert!(m.descends(&b) && m.descends(&c));
        assert_eq!(m.counter(b"x"), 2);
        assert_eq!(VClock::decode(&m.encode()), Ok(m));
        assert!(VClock::decode(&[1, 0, 0, 0, 5]).is_err());
        assert!(VClock::decode(&[9]).is_err());
    }

    #[test]
    fn prune_drops_oldest_above_big() {
        let mut v = VClock::new();
        for i in 0..10u64 {
            v.increment(format!("a{i}").as_bytes(), 1000 + i);
        }
        let props = PruneProps {
            small: 2,
            big: 5,
            young: 0,
            old: 1_000_000,
        };
        v.prune(5000, &props);
        assert_eq!(v.entries().len(), 5);
        assert_eq!(v.counter(b"a9"), 1);
        assert_eq!(v.counter(b"a0"), 0);
        // young entries are never pruned
        let mut w = VClock::new();
        for i in 0..10u64 {
            w.increment(format!("a{i}").as_bytes(), 1000);
        }
        w.prune(1005, &PruneProps { young: 20, ..props });
        assert_eq!(w.entries().len(), 10);
    }
}
