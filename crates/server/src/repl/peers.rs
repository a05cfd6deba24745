//! The nodes of one sink cluster and when each may be tried next: a pure
//! core (no I/O, time passed in) beside the sender ([`super::sender`]).
//!
//! Riak's sink workers keep a delay per source peer (halved on success,
//! doubled when empty, 64 s after an error). Here the source pushes, so
//! the delay is per sink node: 0 while it answers; after a failure it
//! doubles from [`FIRST_BACKOFF`] up to [`MAX_BACKOFF`], and a success
//! resets it. [`PeerSet::pick`] takes the node that is available soonest,
//! turning round the available ones so that every node of the sink
//! cluster shares the load. The set is the configured seed addresses plus
//! those discovered from the sink cluster's membership
//! ([`PeerSet::discovered`]); seeds are never dropped, so a sink that
//! forgets a node cannot cut the source off.

use std::time::{Duration, Instant};

pub use crate::limits::{REPL_FIRST_BACKOFF as FIRST_BACKOFF, REPL_MAX_BACKOFF as MAX_BACKOFF};

/// One sink node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Peer {
    /// Its cluster address.
    pub addr: String,
    /// Configured (kept) or discovered (replaced by the next discovery).
    pub seed: bool,
    /// Current back-off (zero: healthy).
    pub backoff: Duration,
    /// Not before this instant.
    pub next_at: Option<Instant>,
    /// The last failure, for `repl status`.
    pub last_error: Option<String>,
}

/// The nodes of a sink cluster; see the module docs.
#[derive(Debug, Clone, Default)]
pub struct PeerSet {
    peers: Vec<Peer>,
    turn: usize,
}

impl PeerSet {
    /// A set of seed addresses.
    pub fn new(seeds: &[String]) -> PeerSet {
        let mut set = PeerSet::default();
        for s in seeds {
            set.add(s, true);
        }
        set
    }

    fn add(&mut self, addr: &str, seed: bool) {
        if let Some(p) = self.peers.iter_mut().find(|p| p.addr == addr) {
            p.seed |= seed;
            return;
        }
        self.peers.push(Peer {
            addr: addr.to_string(),
            seed,
            backoff: Duration::ZERO,
            next_at: None,
            last_error: None,
        });
    }

    /// The sink cluster's current members: added; discovered nodes no
    /// longer among them are dropped (seeds stay).
    pub fn discovered(&mut self, members: &[String]) {
        self.peers.retain(|p| p.seed || members.contains(&p.addr));
        for m in members {
            self.add(m, false);
        }
        self.turn %= self.peers.len().max(1);
    }

    /// The node to send to now, or how long until one is available.
    pub fn pick(&mut self, now: Instant) -> Result<String, Duration> {
        let n = self.peers.len();
        if n == 0 {
            return Err(MAX_BACKOFF);
        }
        for i in 0..n {
            let p = &self.peers[(self.turn + i) % n];
            if p.next_at.is_none_or(|t| t <= now) {
                self.turn = (self.turn + i + 1) % n;
                return Ok(p.addr.clone());
            }
        }
        let soonest = self.peers.iter().filter_map(|p| p.next_at).min();
        Err(soonest.map_or(FIRST_BACKOFF, |t| t.saturating_duration_since(now)))
    }

    /// `addr` took a batch.
    pub fn success(&mut self, addr: &str) {
        if let Some(p) = self.peers.iter_mut().find(|p| p.addr == addr) {
            p.backoff = Duration::ZERO;
            p.next_at = None;
            p.last_error = None;
        }
    }

    /// `addr` failed: its back-off doubles (from [`FIRST_BACKOFF`], at
    /// most [`MAX_BACKOFF`]).
    pub fn failure(&mut self, addr: &str, now: Instant, error: &str) {
        if let Some(p) = self.peers.iter_mut().find(|p| p.addr == addr) {
            p.backoff = (p.backoff * 2).clamp(FIRST_BACKOFF, MAX_BACKOFF);
            p.next_at = Some(now + p.backoff);
            p.last_error = Some(error.to_string());
        }
    }

    /// The peers, for status.
    pub fn peers(&self) -> &[Peer] {
        &self.peers
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(addrs: &[&str]) -> PeerSet {
        PeerSet::new(&addrs.iter().map(|s| s.to_string()).collect::<Vec<_>>())
    }

    #[test]
    fn healthy_peers_take_turns() {
        let mut s = set(&["a", "b", "c"]);
        let now = Instant::now();
        let picks: Vec<_> = (0..6).filter_map(|_| s.pick(now).ok()).collect();
        assert_eq!(picks, ["a", "b", "c", "a", "b", "c"]);
    }

    #[test]
    fn a_failed_peer_backs_off_doubling_and_recovers_on_success() {
        let mut s = set(&["a", "b"]);
        let t0 = Instant::now();
        s.failure("a", t0, "refused");
        s.failure("a", t0, "refused");
        assert_eq!(s.peers()[0].backoff, FIRST_BACKOFF * 2);
        for _ in 0..4 {
            assert_eq!(s.pick(t0).ok().as_deref(), Some("b"));
        }
        s.failure("b", t0, "refused");
        assert_eq!(s.pick(t0), Err(FIRST_BACKOFF));
        for _ in 0..40 {
            s.failure("b", t0, "down");
        }
        assert_eq!(s.peers()[1].backoff, MAX_BACKOFF);
        assert_eq!(s.pick(t0 + FIRST_BACKOFF * 2).ok().as_deref(), Some("a"));
        s.success("a");
        assert_eq!(s.peers()[0].next_at, None);
        assert_eq!(s.pick(t0).ok().as_deref(), Some("a"));
    }

    #[test]
    fn discovery_adds_members_and_keeps_seeds() {
        let mut s = set(&["seed"]);
        s.discovered(&["seed".into(), "n2".into(), "n3".into()]);
        assert_eq!(s.peers().len(), 3);
        s.discovered(&["n2".into()]);
        let addrs: Vec<_> = s.peers().iter().map(|p| p.addr.as_str()).collect();
        assert_eq!(addrs, ["seed", "n2"]);
        assert_eq!(PeerSet::default().pick(Instant::now()), Err(MAX_BACKOFF));
    }
}
