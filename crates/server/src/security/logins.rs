//! Back-off for failed logins: after [`Policy::failures_before_lockout`]
//! consecutive failed logins of one user from one address, further
//! attempts of that pair are refused at once — no password hashed — for a
//! cool-down that starts at [`Policy::first_lockout`] and doubles with
//! each failure after it, up to [`Policy::max_lockout`]. A success resets
//! the pair; a pair whose last failure is older than
//! [`Policy::forget_after`] starts again from zero. The table holds at
//! most [`Policy::max_entries`] pairs.
//!
//! Pure: the clock is passed in (`now`), so the tests are deterministic.
//! [`super::Security::login`] drives it with the real clock, around the
//! bounded password verifications.

use crate::limits;
use std::collections::HashMap;
use std::net::IpAddr;
use std::time::{Duration, Instant};

/// The back-off's settings (the node's are [`Policy::DEFAULT`], from
/// `limits`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Consecutive failures after which a pair is cooled down.
    pub failures_before_lockout: u32,
    /// The first cool-down.
    pub first_lockout: Duration,
    /// The longest cool-down.
    pub max_lockout: Duration,
    /// A pair whose last failure is this old is forgotten.
    pub forget_after: Duration,
    /// Pairs tracked at most.
    pub max_entries: usize,
}

impl Policy {
    /// The node's policy.
    pub const DEFAULT: Policy = Policy {
        failures_before_lockout: limits::LOGIN_FAILURES_BEFORE_LOCKOUT,
        first_lockout: limits::LOGIN_LOCKOUT_FIRST,
        max_lockout: limits::LOGIN_LOCKOUT_MAX,
        forget_after: limits::LOGIN_FAILURES_FORGOTTEN_AFTER,
        max_entries: limits::LOGIN_TRACKED_MAX,
    };

    /// The cool-down after `failures` consecutive failures (zero below the
    /// threshold).
    pub fn lockout(&self, failures: u32) -> Duration {
        let Some(extra) = failures.checked_sub(self.failures_before_lockout.max(1)) else {
            return Duration::ZERO;
        };
        let factor = 1u32.checked_shl(extra.min(31)).unwrap_or(u32::MAX);
        self.first_lockout
            .checked_mul(factor)
            .unwrap_or(self.max_lockout)
            .min(self.max_lockout)
    }
}

impl Default for Policy {
    fn default() -> Self {
        Policy::DEFAULT
    }
}

/// A login refused during a cool-down.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("too many failed logins for user {user} from {ip}; retry in {retry_secs} s")]
pub struct LockedOut {
    /// The user.
    pub user: String,
    /// The client's address.
    pub ip: IpAddr,
    /// Whole seconds until the cool-down ends (at least 1).
    pub retry_secs: u64,
}

#[derive(Debug, Clone)]
struct Entry {
    /// Consecutive failures.
    failures: u32,
    /// The end of the cool-down, if one was set.
    until: Option<Instant>,
    /// The last failure.
    last: Instant,
}

/// Failed logins per (user, address).
#[derive(Debug)]
pub struct Throttle {
    policy: Policy,
    entries: HashMap<(String, IpAddr), Entry>,
}

impl Throttle {
    /// An empty table.
    pub fn new(policy: Policy) -> Throttle {
        Throttle {
            policy,
            entries: HashMap::new(),
        }
    }

    /// The policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// Changes the policy (pairs tracked so far keep their failures).
    pub fn set_policy(&mut self, policy: Policy) {
        self.policy = policy;
    }

    /// Pairs tracked.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether no pair is tracked.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// `Err` while `user` from `ip` is cooling down at `now`.
    pub fn check(&self, user: &str, ip: IpAddr, now: Instant) -> Result<(), LockedOut> {
        let Some(e) = self.entries.get(&(user.to_string(), ip)) else {
            return Ok(());
        };
        match e.until {
            Some(until) if until > now => {
                let left = until - now;
                let secs = left.as_secs() + u64::from(left.subsec_nanos() > 0);
                Err(LockedOut {
                    user: user.to_string(),
                    ip,
                    retry_secs: secs.max(1),
                })
            }
            _ => Ok(()),
        }
    }

    /// Records a failed login of `user` from `ip` at `now`; the cool-down
    /// it starts, if any.
    pub fn failure(&mut self, user: &str, ip: IpAddr, now: Instant) -> Option<Duration> {
        let key = (user.to_string(), ip);
        let forget = self.policy.forget_after;
        if !self.entries.contains_key(&key) && self.entries.len() >= self.policy.max_entries {
            self.evict(now);
        }
        let e = self.entries.entry(key).or_insert(Entry {
            failures: 0,
            until: None,
            last: now,
        });
        if now.saturating_duration_since(e.last) >= forget {
            e.failures = 0;
            e.until = None;
        }
        e.failures = e.failures.saturating_add(1);
        e.last = now;
        let lockout = self.policy.lockout(e.failures);
        if lockout.is_zero() {
            return None;
        }
        e.until = now.checked_add(lockout);
        Some(lockout)
    }

    /// Records a successful login: the pair starts again from zero.
    pub fn success(&mut self, user: &str, ip: IpAddr) {
        self.entries.remove(&(user.to_string(), ip));
    }

    /// Makes room for one pair: drops the forgotten pairs; if none was,
    /// the oldest pair not cooling down; if every pair is, the oldest.
    /// A scan of the table (at most `max_entries`), on a failure from a
    /// new pair when the table is full.
    fn evict(&mut self, now: Instant) {
        let forget = self.policy.forget_after;
        let before = self.entries.len();
        self.entries
            .retain(|_, e| now.saturating_duration_since(e.last) < forget);
        if self.entries.len() < before {
            return;
        }
        let cooling = |e: &Entry| e.until.is_some_and(|u| u > now);
        let victim = self
            .entries
            .iter()
            .filter(|(_, e)| !cooling(e))
            .min_by_key(|(_, e)| e.last)
            .or_else(|| self.entries.iter().min_by_key(|(_, e)| e.last))
            .map(|(k, _)| k.clone());
        if let Some(k) = victim {
            self.entries.remove(&k);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().expect("ip")
    }

    fn policy() -> Policy {
        Policy {
            failures_before_lockout: 5,
            first_lockout: Duration::from_secs(1),
            max_lockout: Duration::from_secs(60),
            forget_after: Duration::from_secs(600),
            max_entries: 10_000,
        }
    }

    const S: Duration = Duration::from_secs(1);

    #[test]
    fn lockout_grows_exponentially_and_is_capped() {
        let p = policy();
        let got: Vec<u64> = (0..=14).map(|f| p.lockout(f).as_secs()).collect();
        assert_eq!(
            got,
            [0, 0, 0, 0, 0, 1, 2, 4, 8, 16, 32, 60, 60, 60, 60],
            "cool-down by failures"
        );
        assert_eq!(p.lockout(u32::MAX), Duration::from_secs(60));
    }

    #[test]
    fn five_failures_lock_the_pair_and_only_that_pair() {
        let mut t = Throttle::new(policy());
        let t0 = Instant::now();
        let (me, other_ip) = (ip("127.0.0.1"), ip("127.0.0.2"));
        for i in 0..4 {
            assert_eq!(t.failure("alice", me, t0), None, "failure {i}");
            assert_eq!(t.check("alice", me, t0), Ok(()));
        }
        assert_eq!(t.failure("alice", me, t0), Some(S));
        let e = t.check("alice", me, t0).expect_err("locked");
        assert_eq!(e.retry_secs, 1);
        assert_eq!(
            e.to_string(),
            "too many failed logins for user alice from 127.0.0.1; retry in 1 s"
        );
        // Another user from the same address, the same user from another.
        assert_eq!(t.check("bob", me, t0), Ok(()));
        assert_eq!(t.check("alice", other_ip, t0), Ok(()));
        // Still locked just before the end, free at it.
        assert!(t
            .check("alice", me, t0 + Duration::from_millis(999))
            .is_err());
        assert_eq!(t.check("alice", me, t0 + S), Ok(()));
    }

    #[test]
    fn each_failure_after_a_cooldown_doubles_it_up_to_the_cap() {
        let mut t = Throttle::new(policy());
        let a = ip("10.1.2.3");
        let mut now = Instant::now();
        for _ in 0..4 {
            t.failure("u", a, now);
        }
        let mut seen = vec![];
        for _ in 0..9 {
            let d = t.failure("u", a, now).expect("cooling");
            seen.push(d.as_secs());
            let e = t.check("u", a, now).expect_err("locked");
            assert_eq!(e.retry_secs, d.as_secs());
            now += d; // the cool-down ends: one more attempt runs
            assert_eq!(t.check("u", a, now), Ok(()));
        }
        assert_eq!(seen, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
    }

    #[test]
    fn retry_secs_rounds_up() {
        let mut t = Throttle::new(policy());
        let a = ip("::1");
        let now = Instant::now();
        for _ in 0..6 {
            t.failure("u", a, now);
        }
        // 2 s cool-down; 0.5 s later 1.5 s are left: "retry in 2 s".
        let e = t
            .check("u", a, now + Duration::from_millis(500))
            .expect_err("locked");
        assert_eq!(e.retry_secs, 2);
    }

    #[test]
    fn success_resets_the_pair() {
        let mut t = Throttle::new(policy());
        let a = ip("127.0.0.1");
        let now = Instant::now();
        for _ in 0..4 {
            t.failure("u", a, now);
        }
        t.success("u", a);
        assert!(t.is_empty());
        for _ in 0..4 {
            assert_eq!(t.failure("u", a, now), None, "counting from zero again");
        }
        assert_eq!(t.failure("u", a, now), Some(S));
    }

    #[test]
    fn old_failures_are_forgotten() {
        let mut t = Throttle::new(policy());
        let a = ip("127.0.0.1");
        let now = Instant::now();
        for _ in 0..4 {
            t.failure("u", a, now);
        }
        let later = now + Duration::from_secs(600);
        assert_eq!(t.failure("u", a, later), None, "the fifth, but 10 min on");
    }

    #[test]
    fn the_table_is_bounded_and_keeps_pairs_cooling_down() {
        let mut t = Throttle::new(Policy {
            max_entries: 3,
            ..policy()
        });
        let a = ip("127.0.0.1");
        let t0 = Instant::now();
        for _ in 0..10 {
            t.failure("locked", a, t0); // cooling down for 32 s
        }
        t.failure("x1", a, t0 + S);
        t.failure("x2", a, t0 + 2 * S);
        assert_eq!(t.len(), 3);
        // Full: the oldest pair not cooling down (x1) goes, not "locked".
        t.failure("x3", a, t0 + 3 * S);
        assert_eq!(t.len(), 3);
        assert!(t.check("locked", a, t0 + 3 * S).is_err());
        assert!(t.entries.contains_key(&("x2".to_string(), a)));
        assert!(!t.entries.contains_key(&("x1".to_string(), a)));
        // Once its cool-down is over, "locked" is the oldest and goes.
        let later = t0 + 40 * S;
        t.failure("x4", a, later);
        assert_eq!(t.len(), 3);
        assert!(!t.entries.contains_key(&("locked".to_string(), a)));
        // Forgotten pairs all go at once when room is needed.
        let much_later = later + Duration::from_secs(600);
        t.failure("y", a, much_later);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn every_pair_cooling_down_evicts_the_oldest() {
        let mut t = Throttle::new(Policy {
            max_entries: 2,
            ..policy()
        });
        let a = ip("127.0.0.1");
        let t0 = Instant::now();
        for u in ["a", "b"] {
            for _ in 0..5 {
                t.failure(u, a, t0);
            }
        }
        t.failure("c", a, t0);
        assert_eq!(t.len(), 2);
        assert!(t.entries.contains_key(&("c".to_string(), a)));
    }
}
