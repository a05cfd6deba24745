//! When full-syncs run and which kind: the pure core of riak_kv's
//! `ttaaefs_manager` schedule (no I/O, no clock: times are passed in).
//!
//! * Each day is cut into as many slices as checks are wanted per day
//!   (`all_check + day_check + hour_check + range_check + auto_check`);
//!   the kinds are dealt to the slices in an order shuffled per day.
//! * Within a slice, node `i` of `n` (by name, among the cluster's
//!   members) runs at `i × slice / n`, and the cluster's
//!   `cluster_slice` (1–4) shifts that by quarters of the node's share,
//!   so the nodes of a cluster, and two clusters syncing with each other,
//!   do not all compare at once.
//! * `auto` becomes (see [`resolve_auto`]): a `range` check when a range
//!   was learnt from the last repairs or the last check was in sync
//!   (range = since then); otherwise `all` inside the all-check window
//!   (hours of the day, UTC), else `day`; and nothing while suppressed
//!   (after a check that found differences it could not repair).

use serde::{Deserialize, Serialize};

/// Seconds in a day.
pub const DAY: u64 = 86_400;

/// How far a `range` check after an in-sync one reaches back before that
/// check's start (clock skew, writes in flight), seconds.
pub const RANGE_SLACK_SECS: u64 = 300;

/// Suppressed auto checks after one that could not repair what it found.
pub const SUPPRESS_AFTER_FUTILE: u32 = 2;

/// A kind of full-sync check.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Check {
    /// All keys of the scope.
    All,
    /// Keys modified in the last 24 hours.
    Day,
    /// Keys modified in the last hour.
    Hour,
    /// Keys modified in a learnt range.
    Range,
    /// The manager picks ([`resolve_auto`]).
    Auto,
}

impl Check {
    /// Its name (`all`, `day`, ...).
    pub fn name(self) -> &'static str {
        match self {
            Check::All => "all",
            Check::Day => "day",
            Check::Hour => "hour",
            Check::Range => "range",
            Check::Auto => "auto",
        }
    }

    /// Parses a name.
    pub fn parse(s: &str) -> Option<Check> {
        [
            Check::All,
            Check::Day,
            Check::Hour,
            Check::Range,
            Check::Auto,
        ]
        .into_iter()
        .find(|c| c.name() == s)
    }
}

/// Checks wanted per day, by kind.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Wants {
    /// `all` checks.
    pub all: u32,
    /// `day` checks.
    pub day: u32,
    /// `hour` checks.
    pub hour: u32,
    /// `range` checks.
    pub range: u32,
    /// `auto` checks.
    pub auto: u32,
}

impl Wants {
    /// The checks per day that `[repl.fullsync]` asks for.
    pub fn of(c: &crate::config::FullSyncConfig) -> Wants {
        Wants {
            all: c.all_check,
            day: c.day_check,
            hour: c.hour_check,
            range: c.range_check,
            auto: c.auto_check,
        }
    }
}

/// Where this node stands among the nodes that sync.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Place {
    /// Its index among its cluster's members (sorted by name).
    pub index: u32,
    /// The members.
    pub count: u32,
    /// The cluster's slice, 1–4.
    pub cluster_slice: u32,
}

/// The checks of day `day` (days since the epoch) for this node: (second
/// of the day, kind), in time order.
pub fn day_plan(wants: Wants, day: u64, place: Place) -> Vec<(u64, Check)> {
    let mut kinds = Vec::new();
    for (kind, n) in [
        (Check::All, wants.all),
        (Check::Day, wants.day),
        (Check::Hour, wants.hour),
        (Check::Range, wants.range),
        (Check::Auto, wants.auto),
    ] {
        kinds.extend(std::iter::repeat_n(kind, n as usize));
    }
    if kinds.is_empty() {
        return Vec::new();
    }
    shuffle(&mut kinds, day);
    let slice = DAY / kinds.len() as u64;
    let share = slice / u64::from(place.count.max(1));
    let quarter = u64::from(place.cluster_slice.clamp(1, 4) - 1);
    let offset = u64::from(place.index) * share + quarter * share / 4;
    let plan: Vec<(u64, Check)> = kinds
        .into_iter()
        .enumerate()
        .map(|(i, k)| (i as u64 * slice + offset, k))
        .collect();
    debug_assert!(plan.iter().all(|(t, _)| *t < DAY));
    plan
}

/// The next planned check strictly after `now` (seconds since the epoch)
/// and at most two days ahead: (when, kind).
pub fn next_after(wants: Wants, place: Place, now: u64) -> Option<(u64, Check)> {
    let today = now / DAY;
    (today..today + 2).find_map(|day| {
        day_plan(wants, day, place)
            .into_iter()
            .map(|(t, k)| (day * DAY + t, k))
            .find(|(t, _)| *t > now)
    })
}

/// A deterministic shuffle (Fisher–Yates over a splitmix64 stream seeded
/// by the day): every node of a cluster deals the same order.
fn shuffle<T>(v: &mut [T], seed: u64) {
    let mut x = seed ^ 0x9E37_79B9_7F4A_7C15;
    for i in (1..v.len()).rev() {
        x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
        v.swap(i, (z % (i as u64 + 1)) as usize);
    }
}

/// What the manager remembers between checks.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct AutoState {
    /// A last-modified range (seconds) learnt from the last repairs.
    pub range: Option<(u64, u64)>,
    /// Start of the last check that found both clusters in sync.
    pub last_in_sync: Option<u64>,
    /// Auto checks still to skip.
    pub suppress: u32,
}

/// What an `auto` check at `now` runs, with the last-modified range of a
/// `range` check; `None` = skip this one (suppressed). `window` = (first
/// hour, end hour) of the day (UTC) when an `all` check may run; it may
/// wrap midnight, (0, 24) = always.
pub fn resolve_auto(
    state: &mut AutoState,
    now: u64,
    window: (u32, u32),
) -> Option<(Check, Option<(u64, u64)>)> {
    if state.suppress > 0 {
        state.suppress -= 1;
        return None;
    }
    if let Some(r) = state.range {
        return Some((Check::Range, Some(r)));
    }
    if let Some(t) = state.last_in_sync {
        return Some((
            Check::Range,
            Some((t.saturating_sub(RANGE_SLACK_SECS), now)),
        ));
    }
    let hour = ((now % DAY) / 3600) as u32;
    let (from, to) = window;
    let inside = if from <= to {
        hour >= from && hour < to
    } else {
        hour >= from || hour < to
    };
    Some((if inside { Check::All } else { Check::Day }, None))
}

/// What a check found, as the manager learns from it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Learnt {
    /// When it started.
    pub started: u64,
    /// Both clusters agreed.
    pub in_sync: bool,
    /// Keys it repaired (queued one way or the other, or reaped).
    pub repaired: u64,
    /// Differences it found.
    pub differences: u64,
    /// Last-modified range of the repaired keys.
    pub modified: Option<(u64, u64)>,
}

/// Updates the state after a check; `max_results` as configured.
pub fn learn(state: &mut AutoState, l: Learnt, max_results: u64) {
    if l.in_sync {
        state.last_in_sync = Some(l.started);
        state.range = None;
        return;
    }
    state.last_in_sync = None;
    state.range = if l.repaired > max_results / 2 {
        l.modified
    } else {
        None
    };
    if l.repaired == 0 && l.differences > 0 {
        state.suppress = SUPPRESS_AFTER_FUTILE;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ONE: Place = Place {
        index: 0,
        count: 1,
        cluster_slice: 1,
    };

    #[test]
    fn a_day_has_one_check_per_want_spread_evenly_and_the_nodes_apart() {
        let wants = Wants {
            all: 1,
            hour: 2,
            auto: 21,
            ..Wants::default()
        };
        let plan = day_plan(wants, 20_000, ONE);
        assert_eq!(plan.len(), 24);
        assert!(plan
            .iter()
            .enumerate()
            .all(|(i, (t, _))| *t == i as u64 * 3600));
        assert_eq!(plan.iter().filter(|(_, k)| *k == Check::Hour).count(), 2);
        assert_ne!(
            day_plan(wants, 20_000, ONE),
            day_plan(wants, 20_001, ONE),
            "the order changes from day to day"
        );
        let second = Place {
            index: 1,
            count: 3,
            cluster_slice: 1,
        };
        let other_cluster = Place {
            index: 1,
            count: 3,
            cluster_slice: 3,
        };
        assert_eq!(day_plan(wants, 7, second)[0].0, 1200);
        assert_eq!(day_plan(wants, 7, other_cluster)[0].0, 1200 + 600);
        assert!(day_plan(Wants::default(), 7, ONE).is_empty());
    }

    #[test]
    fn next_after_finds_the_following_slot_across_midnight() {
        let wants = Wants {
            auto: 4,
            ..Wants::default()
        };
        let day = 100 * DAY;
        assert_eq!(
            next_after(wants, ONE, day),
            Some((day + 6 * 3600, Check::Auto))
        );
        assert_eq!(
            next_after(wants, ONE, day + 23 * 3600),
            Some((day + DAY, Check::Auto))
        );
        assert_eq!(next_after(Wants::default(), ONE, day), None);
    }

    #[test]
    fn auto_picks_range_then_all_in_the_window_else_day_and_respects_suppression() {
        let mut s = AutoState::default();
        let at = |h: u64| 50 * DAY + h * 3600;
        assert_eq!(
            resolve_auto(&mut s, at(23), (22, 6)),
            Some((Check::All, None))
        );
        assert_eq!(
            resolve_auto(&mut s, at(3), (22, 6)),
            Some((Check::All, None))
        );
        assert_eq!(
            resolve_auto(&mut s, at(12), (22, 6)),
            Some((Check::Day, None))
        );
        learn(
            &mut s,
            Learnt {
                started: at(12),
                in_sync: true,
                repaired: 0,
                differences: 0,
                modified: None,
            },
            32,
        );
        assert_eq!(
            resolve_auto(&mut s, at(13), (22, 6)),
            Some((Check::Range, Some((at(12) - RANGE_SLACK_SECS, at(13)))))
        );
        learn(
            &mut s,
            Learnt {
                started: at(13),
                in_sync: false,
                repaired: 100,
                differences: 100,
                modified: Some((5, 9)),
            },
            32,
        );
        assert_eq!(
            resolve_auto(&mut s, at(14), (22, 6)),
            Some((Check::Range, Some((5, 9))))
        );
        learn(
            &mut s,
            Learnt {
                started: at(14),
                in_sync: false,
                repaired: 0,
                differences: 7,
                modified: None,
            },
            32,
        );
        assert_eq!(resolve_auto(&mut s, at(15), (22, 6)), None);
        assert_eq!(resolve_auto(&mut s, at(16), (22, 6)), None);
        assert_eq!(
            resolve_auto(&mut s, at(17), (0, 24)),
            Some((Check::All, None))
        );
    }
}
