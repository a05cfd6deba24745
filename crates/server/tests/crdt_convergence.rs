//! Data-type objects converge through the vnode's own steps: a property
//! test of the data-type coordinating step ([`coordinate_crdt`]) and the
//! replica merge ([`reconcile`], which goes through `RiakObject::merge`,
//! the merge point of replica writes, read repair, handoff, anti-entropy
//! and replication) against a model.
//!
//! Three replicas of one key take random steps: an update coordinated by
//! one replica (a counter increment, or a set add, or a set remove whose
//! context a client read from some replica); a replica sends its version
//! to another; a replica hands its data to another and starts again empty
//! under a new actor. At the end the replicas exchange versions in a
//! random order until nothing changes. Then every replica must hold the
//! same object, with exactly one live sibling (a data type never keeps
//! siblings), whose value is the model's: the sum of the increments; the
//! set of elements added by an add no remove observed.
//!
//! Seeded (`BASALT_TEST_SEED`), 256 cases.

use basalt_server::bucket::props::BucketProps;
use basalt_server::crdt::{DataType, Op, SetOp, Value};
use basalt_server::object::datatype::value_of;
use basalt_server::object::RiakObject;
use basalt_server::vnode::merge::{coordinate_crdt, reconcile, CrdtUpdate};
use proptest::prelude::*;
use proptest::test_runner::{Config as PtConfig, RngAlgorithm, TestRng, TestRunner};
use std::collections::BTreeSet;

const REPLICAS: usize = 3;

#[derive(Debug, Clone)]
enum Step {
    /// Replica `via` coordinates: increment by `n` / add `elem`, or (when
    /// `remove`) remove `elem` with the context of replica `read`.
    Update {
        via: usize,
        read: usize,
        remove: bool,
        elem: u8,
        n: i64,
    },
    /// `from` sends its version to `to`.
    Sync { from: usize, to: usize },
    /// `from` hands its data to `to`, then starts again empty (new actor).
    Handoff { from: usize, to: usize },
}

fn step() -> impl Strategy<Value = Step> {
    let r = 0..REPLICAS;
    prop_oneof![
        5 => (r.clone(), r.clone(), any::<bool>(), 0..4u8, -5..10i64)
            .prop_map(|(via, read, remove, elem, n)| Step::Update { via, read, remove, elem, n }),
        4 => (r.clone(), r.clone()).prop_map(|(from, to)| Step::Sync { from, to }),
        1 => (r.clone(), r).prop_map(|(from, to)| Step::Handoff { from, to }),
    ]
}

struct World {
    t: DataType,
    replicas: Vec<Option<RiakObject>>,
    /// Add events each replica's data has seen (set model).
    seen: Vec<BTreeSet<usize>>,
    actors: Vec<Vec<u8>>,
    incarnations: u64,
    props: BucketProps,
    sum: i64,
    adds: Vec<u8>,
    observed: BTreeSet<usize>,
    clock_us: u64,
}

impl World {
    fn new(t: DataType) -> World {
        World {
            t,
            replicas: vec![None; REPLICAS],
            seen: vec![BTreeSet::new(); REPLICAS],
            actors: (0..REPLICAS)
                .map(|i| format!("a{i}").into_bytes())
                .collect(),
            incarnations: 0,
            props: BucketProps {
                allow_mult: true,
                datatype: Some(t.name().into()),
                ..BucketProps::default()
            },
            sum: 0,
            adds: Vec::new(),
            observed: BTreeSet::new(),
            clock_us: 1_700_000_000_000_000,
        }
    }

    fn context_of(&self, i: usize) -> Option<Vec<u8>> {
        let o = self.replicas[i].as_ref()?;
        value_of(o, self.t).ok().flatten()?.context()
    }

    fn sync(&mut self, from: usize, to: usize) {
        let Some(incoming) = self.replicas[from].clone() else {
            return;
        };
        if let Some(n) = reconcile(self.replicas[to].as_ref(), &incoming, &self.props) {
            self.replicas[to] = Some(n);
        }
        let s = self.seen[from].clone();
        self.seen[to].extend(s);
    }

    fn apply(&mut self, s: &Step) {
        self.clock_us += 1000;
        match *s {
            Step::Update {
                via,
                read,
                remove,
                elem,
                n,
            } => {
                let (op, ctx) = match (self.t, remove) {
                    (DataType::Counter, _) => (Op::Counter(n), None),
                    (_, false) => (
                        Op::Set(SetOp {
                            adds: vec![vec![elem]],
                            removes: vec![],
                        }),
                        None,
                    ),
                    (_, true) => (
                        Op::Set(SetOp {
                            adds: vec![],
                            removes: vec![vec![elem]],
                        }),
                        self.context_of(read),
                    ),
                };
                if self.t == DataType::Set && remove && ctx.is_none() {
                    return; // a client that read nothing has nothing to remove
                }
                let update = CrdtUpdate {
                    datatype: self.t,
                    op,
                    context: ctx,
                };
                let new = coordinate_crdt(
                    self.replicas[via].as_ref(),
                    &update,
                    &self.props,
                    &self.actors[via],
                    self.clock_us,
                )
                .unwrap_or_else(|e| panic!("update: {e}"));
                self.replicas[via] = Some(new);
                match (self.t, remove) {
                    (DataType::Counter, _) => self.sum += n,
                    (_, false) => {
                        self.seen[via].insert(self.adds.len());
                        self.adds.push(elem);
                    }
                    (_, true) => {
                        for id in &self.seen[read] {
                            if self.adds[*id] == elem {
                                self.observed.insert(*id);
                            }
                        }
                    }
                }
            }
            Step::Sync { from, to } => self.sync(from, to),
            Step::Handoff { from, to } => {
                if from == to {
                    return;
                }
                self.sync(from, to);
                self.replicas[from] = None;
                self.seen[from].clear();
                self.incarnations += 1;
                self.actors[from] = format!("a{from}/{}", self.incarnations).into_bytes();
            }
        }
    }
}

fn run_case(t: DataType, steps: &[Step], order: &[(usize, usize)]) -> Result<(), TestCaseError> {
    let mut w = World::new(t);
    for s in steps {
        w.apply(s);
    }
    // Exchange until nothing changes: the random order first, then all pairs.
    for (a, b) in order {
        w.sync(*a, *b);
    }
    for _ in 0..REPLICAS {
        for a in 0..REPLICAS {
            for b in 0..REPLICAS {
                w.sync(a, b);
            }
        }
    }
    let first = w.replicas[0].clone();
    for r in &w.replicas {
        prop_assert_eq!(r, &first, "replicas differ after the exchange");
    }
    let Some(o) = first else {
        prop_assert!(w.sum == 0 && w.adds.is_empty());
        return Ok(());
    };
    let live = o.contents.iter().filter(|c| !c.deleted).count();
    prop_assert_eq!(live, 1, "a data type kept siblings: {:?}", o.contents);
    let v = value_of(&o, t).ok().flatten().map(|c| c.value());
    let want = match t {
        DataType::Counter => Value::Counter(w.sum),
        _ => Value::Set(
            w.adds
                .iter()
                .enumerate()
                .filter(|(id, _)| !w.observed.contains(id))
                .map(|(_, e)| vec![*e])
                .collect::<BTreeSet<_>>()
                .into_iter()
                .collect(),
        ),
    };
    prop_assert_eq!(v, Some(want));
    Ok(())
}

fn runner() -> TestRunner {
    let seed: u64 = std::env::var("BASALT_TEST_SEED")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(0x5eed_c4d7);
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&seed.to_le_bytes());
    eprintln!("BASALT_TEST_SEED={seed}");
    TestRunner::new_with_rng(
        PtConfig {
            cases: 256,
            failure_persistence: None,
            ..PtConfig::default()
        },
        TestRng::from_seed(RngAlgorithm::ChaCha, &bytes),
    )
}

fn strategy() -> impl Strategy<Value = (Vec<Step>, Vec<(usize, usize)>)> {
    (
        prop::collection::vec(step(), 0..40),
        prop::collection::vec((0..REPLICAS, 0..REPLICAS), 0..12),
    )
}

#[test]
fn counters_converge_to_the_sum_of_increments() {
    runner()
        .run(&strategy(), |(steps, order)| {
            run_case(DataType::Counter, &steps, &order)
        })
        .unwrap_or_else(|e| panic!("{e}"));
}

#[test]
fn sets_converge_to_the_adds_no_remove_observed() {
    runner()
        .run(&strategy(), |(steps, order)| {
            run_case(DataType::Set, &steps, &order)
        })
        .unwrap_or_else(|e| panic!("{e}"));
}
