//! Property tests of the data types against simple models: random
//! histories of concurrent operations on three replicas (each replica an
//! actor; `Sync` merges one replica's state into another's), then every
//! replica's final state merged in random orders and groupings. The
//! results must all be equal (convergence), and equal to the model: a
//! counter is the sum of its increments; a set holds exactly the elements
//! with an add no remove observed (add wins, removes with stale contexts
//! included); a map field is present exactly when an update of it was not
//! observed by a remove, and a set in a map loses, on a field remove, the
//! elements that remove observed (reset-remove). Also: encodings round
//! trip, and corrupt bytes decode to an error, never a panic.

use super::map::{Field, FieldKind, FieldOp, FieldValue, MapOp};
use super::*;
use proptest::prelude::*;
use std::collections::{BTreeMap, BTreeSet};

const ACTORS: [&[u8]; 3] = [b"r0", b"r1", b"r2"];

/// Merges `states` in the order `perm`, grouped left or right.
fn merge_all(states: &[Crdt], perm: &[usize], right: bool) -> Crdt {
    let picked: Vec<&Crdt> = perm.iter().map(|i| &states[*i % states.len()]).collect();
    let fold = |acc: Crdt, x: &Crdt| -> Crdt {
        let m = if right { x.merge(&acc) } else { acc.merge(x) };
        m.unwrap_or_else(|e| panic!("merge: {e}"))
    };
    let mut it = picked.into_iter();
    let first = it.next().cloned().unwrap_or_else(|| states[0].clone());
    it.fold(first, fold)
}

/// Every replica merged, in two orders and groupings (plus the result
/// merged with itself, for idempotence): all must be observed alike (value
/// and context, [`Crdt::observed`]); all but maps must be equal bytes too
/// (a map's field tombstones, as riak_dt_map's, record merge history).
fn converge(states: &[Crdt], perm: &[usize]) -> Crdt {
    let mut order: Vec<usize> = perm.iter().map(|i| i % states.len()).collect();
    order.extend(0..states.len());
    let a = merge_all(states, &order, false);
    let mut rev = order.clone();
    rev.reverse();
    let b = merge_all(states, &rev, true);
    // A tree grouping: pairs first.
    let pairs: Vec<Crdt> = states
        .chunks(2)
        .map(|c| merge_all(c, &[0, c.len() - 1], false))
        .collect();
    let c = merge_all(&pairs, &(0..pairs.len()).collect::<Vec<_>>(), true);
    let aa = a.merge(&a).unwrap_or_else(|e| panic!("{e}"));
    for (x, what) in [
        (&b, "merge order"),
        (&c, "merge grouping"),
        (&aa, "merge with itself"),
    ] {
        assert_eq!(a.observed(), x.observed(), "{what} changed the result");
        if !matches!(a, Crdt::Map(_)) {
            assert_eq!(&a, x, "{what} changed the bytes");
        }
    }
    a
}

#[derive(Debug, Clone)]
enum CounterStep {
    Inc(usize, i64),
    Sync(usize, usize),
}

fn counter_step() -> impl Strategy<Value = CounterStep> {
    prop_oneof![
        (0..3usize, -50..50i64).prop_map(|(r, n)| CounterStep::Inc(r, n)),
        (0..3usize, 0..3usize).prop_map(|(a, b)| CounterStep::Sync(a, b)),
    ]
}

#[derive(Debug, Clone)]
enum SetStep {
    Add(usize, u8),
    /// Remove at replica .0 of element .2 with the context read from replica .1.
    Remove(usize, usize, u8),
    Sync(usize, usize),
}

fn set_step() -> impl Strategy<Value = SetStep> {
    prop_oneof![
        (0..3usize, 0..4u8).prop_map(|(r, e)| SetStep::Add(r, e)),
        (0..3usize, 0..3usize, 0..4u8).prop_map(|(r, j, e)| SetStep::Remove(r, j, e)),
        (0..3usize, 0..3usize).prop_map(|(a, b)| SetStep::Sync(a, b)),
    ]
}

/// A replica and the add events it has seen (by id).
#[derive(Clone)]
struct Replica {
    state: Crdt,
    seen: BTreeSet<usize>,
}

fn replicas(t: DataType) -> Vec<Replica> {
    (0..3)
        .map(|_| Replica {
            state: Crdt::new(t, 10).unwrap_or_else(|e| panic!("{e}")),
            seen: BTreeSet::new(),
        })
        .collect()
}

fn sync(rs: &mut [Replica], a: usize, b: usize) {
    let from = rs[b].clone();
    let to = &mut rs[a];
    to.state = to
        .state
        .merge(&from.state)
        .unwrap_or_else(|e| panic!("{e}"));
    to.seen.extend(from.seen);
}

fn update(r: &mut Replica, i: usize, op: &Op, ctx: Option<&[u8]>) {
    r.state = r
        .state
        .update(op, ACTORS[i], ctx, 1)
        .unwrap_or_else(|e| panic!("update: {e}"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn counters_converge_to_the_sum(steps in prop::collection::vec(counter_step(), 0..40),
                                    perm in prop::collection::vec(0..3usize, 0..6)) {
        let mut rs = replicas(DataType::Counter);
        let mut sum = 0i64;
        for s in &steps {
            match s {
                CounterStep::Inc(r, n) => {
                    update(&mut rs[*r], *r, &Op::Counter(*n), None);
                    sum += n;
                }
                CounterStep::Sync(a, b) => sync(&mut rs, *a, *b),
            }
        }
        let states: Vec<Crdt> = rs.into_iter().map(|r| r.state).collect();
        let merged = converge(&states, &perm);
        prop_assert_eq!(merged.value(), Value::Counter(sum));
    }

    #[test]
    fn sets_keep_adds_no_remove_observed(steps in prop::collection::vec(set_step(), 0..40),
                                         perm in prop::collection::vec(0..3usize, 0..6)) {
        let mut rs = replicas(DataType::Set);
        let mut adds: Vec<u8> = Vec::new(); // add id → element
        let mut observed: BTreeSet<usize> = BTreeSet::new();
        for s in &steps {
            match s {
                SetStep::Add(r, e) => {
                    let op = Op::Set(SetOp { adds: vec![vec![*e]], removes: vec![] });
                    update(&mut rs[*r], *r, &op, None);
                    rs[*r].seen.insert(adds.len());
                    adds.push(*e);
                }
                SetStep::Remove(r, j, e) => {
                    // A client read replica j, then removed at replica r.
                    let ctx = rs[*j].state.context();
                    for id in &rs[*j].seen {
                        if adds[*id] == *e {
                            observed.insert(*id);
                        }
                    }
                    let op = Op::Set(SetOp { adds: vec![], removes: vec![vec![*e]] });
                    update(&mut rs[*r], *r, &op, ctx.as_deref());
                }
                SetStep::Sync(a, b) => sync(&mut rs, *a, *b),
            }
        }
        let states: Vec<Crdt> = rs.into_iter().map(|r| r.state).collect();
        let merged = converge(&states, &perm);
        let want: BTreeSet<Vec<u8>> = adds
            .iter()
            .enumerate()
            .filter(|(id, _)| !observed.contains(id))
            .map(|(_, e)| vec![*e])
            .collect();
        prop_assert_eq!(merged.value(), Value::Set(want.into_iter().collect()));
        // No tombstones: nothing is kept for removed elements, and every
        // deferred remove was applied once all replicas met.
        if let Crdt::Set(s) = &merged {
            prop_assert!(s.deferred.is_empty());
        }
    }

    #[test]
    fn map_fields_reset_on_remove(steps in prop::collection::vec(set_step(), 0..40),
                                  perm in prop::collection::vec(0..3usize, 0..6),
                                  mode in 0..3u8) {
        // The set steps drive a map: Add(r, e) adds e to set field "s" and
        // enables flag "f"; Remove(r, j, e) removes, with j's context, the
        // whole field "s" (mode 0, or mode 2 when e < 2) or element e of
        // "s" (mode 1, or mode 2 when e >= 2). Modes 0 and 1 are checked
        // against the model; mode 2 (both kinds of remove in one history)
        // for convergence only: there riak_dt_map's answer depends on
        // which later updates carried an element remove's effect.
        let s_field: Field = (b"s".to_vec(), FieldKind::Set);
        let f_field: Field = (b"f".to_vec(), FieldKind::Flag);
        let mut rs = replicas(DataType::Map);
        // Every update is an event with an id, which the replica that made
        // it and those that merged its state have seen.
        let mut adds: BTreeMap<usize, u8> = BTreeMap::new();
        // Element removes: id → adds observed; field removes: events observed.
        let mut elem_removes: BTreeMap<usize, BTreeSet<usize>> = BTreeMap::new();
        let mut field_removes: Vec<BTreeSet<usize>> = Vec::new();
        let mut next = 0usize;
        for st in &steps {
            match st {
                SetStep::Add(r, e) => {
                    let op = Op::Map(MapOp {
                        removes: vec![],
                        updates: vec![
                            (s_field.clone(), FieldOp::Set(SetOp { adds: vec![vec![*e]], removes: vec![] })),
                            (f_field.clone(), FieldOp::Flag(true)),
                        ],
                    });
                    update(&mut rs[*r], *r, &op, None);
                    rs[*r].seen.insert(next);
                    adds.insert(next, *e);
                    next += 1;
                }
                SetStep::Remove(r, j, e) => {
                    let ctx = rs[*j].state.context();
                    let seen = rs[*j].seen.clone();
                    let whole = match mode {
                        0 => true,
                        1 => false,
                        _ => *e < 2,
                    };
                    let op = if whole {
                        field_removes.push(seen);
                        MapOp { removes: vec![s_field.clone()], updates: vec![] }
                    } else {
                        let obs = seen.iter().filter(|id| adds.get(*id) == Some(e)).copied().collect();
                        elem_removes.insert(next, obs);
                        rs[*r].seen.insert(next);
                        next += 1;
                        MapOp {
                            removes: vec![],
                            updates: vec![(s_field.clone(), FieldOp::Set(SetOp { adds: vec![], removes: vec![vec![*e]] }))],
                        }
                    };
                    update(&mut rs[*r], *r, &Op::Map(op), ctx.as_deref());
                }
                SetStep::Sync(a, b) => sync(&mut rs, *a, *b),
            }
        }
        let states: Vec<Crdt> = rs.into_iter().map(|r| r.state).collect();
        let merged = converge(&states, &perm);
        if mode == 2 {
            return Ok(());
        }
        // Reset-remove: an add is gone if a field remove or an element
        // remove observed it (only one kind of remove per history here).
        let reset = |id: &usize| field_removes.iter().any(|f| f.contains(id));
        let want: Vec<Vec<u8>> = adds
            .iter()
            .filter(|(id, _)| !reset(id))
            .filter(|(id, _)| !elem_removes.values().any(|obs| obs.contains(id)))
            .map(|(_, e)| vec![*e])
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let Value::Map(m) = merged.value() else { panic!("not a map") };
        let got = match m.get(&s_field) {
            Some(FieldValue::Set(v)) => v.clone(),
            None => Vec::new(),
            Some(other) => panic!("set field holds {other:?}"),
        };
        prop_assert_eq!(got, want);
        // Flag "f" is only ever enabled: present and true iff any add happened.
        let flag = m.get(&f_field).cloned();
        let adds: Vec<u8> = adds.into_values().collect();
        prop_assert_eq!(flag, (!adds.is_empty()).then_some(FieldValue::Flag(true)));
    }

    #[test]
    fn gset_and_hll_converge(steps in prop::collection::vec((0..3usize, 0..200u32, any::<bool>()), 0..60),
                             perm in prop::collection::vec(0..3usize, 0..6)) {
        let mut g = replicas(DataType::GSet);
        let mut h = replicas(DataType::Hll);
        let mut all = BTreeSet::new();
        for (r, e, sync_too) in &steps {
            let el = e.to_le_bytes().to_vec();
            update(&mut g[*r], *r, &Op::GSet(vec![el.clone()]), None);
            update(&mut h[*r], *r, &Op::Hll(vec![el.clone()]), None);
            all.insert(el);
            if *sync_too {
                sync(&mut g, (*r + 1) % 3, *r);
                sync(&mut h, (*r + 1) % 3, *r);
            }
        }
        let gs: Vec<Crdt> = g.into_iter().map(|r| r.state).collect();
        let hs: Vec<Crdt> = h.into_iter().map(|r| r.state).collect();
        let gm = converge(&gs, &perm);
        let hm = converge(&hs, &perm);
        prop_assert_eq!(gm.value(), Value::GSet(all.iter().cloned().collect()));
        // Converged: the very sketch of every element added on one replica
        // (the estimate's accuracy is a property of the hash over many
        // inputs, tested on fixed data in `hll_precision_is_bounded_...`;
        // a shrinker can always find a few elements sharing registers).
        let mut one = hll::Hll::new(10).unwrap_or_else(|e| panic!("{e}"));
        all.iter().for_each(|e| one.add(e));
        prop_assert_eq!(&hm, &Crdt::Hll(one));
    }

    #[test]
    fn encodings_round_trip_and_corruption_is_an_error(steps in prop::collection::vec(set_step(), 0..20),
                                                        flips in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..4)) {
        let mut rs = replicas(DataType::Map);
        for st in &steps {
            if let SetStep::Add(r, e) = st {
                let op = Op::Map(MapOp {
                    removes: vec![],
                    updates: vec![
                        ((b"s".to_vec(), FieldKind::Set), FieldOp::Set(SetOp { adds: vec![vec![*e]], removes: vec![] })),
                        ((b"c".to_vec(), FieldKind::Counter), FieldOp::Counter(i64::from(*e))),
                        ((b"r".to_vec(), FieldKind::Register), FieldOp::Register(vec![*e])),
                        ((b"m".to_vec(), FieldKind::Map), FieldOp::Map(MapOp {
                            removes: vec![],
                            updates: vec![((b"x".to_vec(), FieldKind::Flag), FieldOp::Flag(true))],
                        })),
                    ],
                });
                update(&mut rs[*r], *r, &op, None);
            } else if let SetStep::Sync(a, b) = st {
                sync(&mut rs, *a, *b);
            }
        }
        for r in &rs {
            let bytes = r.state.encode();
            let back = Crdt::decode(&bytes);
            prop_assert_eq!(back.as_ref(), Ok(&r.state));
            // One change per position: two flips of one byte by the same
            // value would cancel out and leave the encoding intact.
            let mut changes = BTreeMap::new();
            for (i, x) in &flips {
                changes.entry(i.index(bytes.len())).or_insert(x | 1);
            }
            let mut bad = bytes.clone();
            for (i, x) in changes {
                bad[i] ^= x;
            }
            prop_assert!(Crdt::decode(&bad).is_err());
            for cut in [0, 1, bytes.len() / 2, bytes.len() - 1] {
                prop_assert!(Crdt::decode(&bytes[..cut]).is_err());
            }
        }
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..300)) {
        let _ = Crdt::decode(&bytes);
        let _ = clock::Clock::from_context(&bytes);
        // With a valid checksum the structure decoders themselves run.
        let mut framed = bytes.clone();
        let crc = crc32c::crc32c(&framed);
        framed.extend_from_slice(&crc.to_le_bytes());
        let _ = Crdt::decode(&framed);
        for t in 1..=5u8 {
            let mut b = b"BDT\x01".to_vec();
            b.push(t);
            b.extend_from_slice(&bytes);
            let crc = crc32c::crc32c(&b);
            b.extend_from_slice(&crc.to_le_bytes());
            let _ = Crdt::decode(&b);
        }
    }
}

#[test]
fn removes_without_context_need_the_element() {
    let s = Crdt::new(DataType::Set, 14).unwrap_or_else(|e| panic!("{e}"));
    let rm = Op::Set(SetOp {
        adds: vec![],
        removes: vec![b"x".to_vec()],
    });
    let err = s.update(&rm, b"a", None, 1).err();
    assert_eq!(
        err.map(|e| e.to_string()).as_deref(),
        Some("{precondition,{not_present,<<\"x\">>}}")
    );
    assert_eq!(
        s.update(&rm, b"a", Some(b"junk"), 1).err(),
        Some(CrdtError::BadContext)
    );
    assert!(matches!(
        s.update(&Op::Counter(1), b"a", None, 1),
        Err(CrdtError::TypeMismatch { .. })
    ));
}

#[test]
fn registers_take_the_latest_assign_and_counters_in_maps_count() {
    let reg: Field = (b"r".to_vec(), FieldKind::Register);
    let cnt: Field = (b"c".to_vec(), FieldKind::Counter);
    let m = Crdt::new(DataType::Map, 14).unwrap_or_else(|e| panic!("{e}"));
    let op = |v: &[u8], n| {
        Op::Map(MapOp {
            removes: vec![],
            updates: vec![
                (reg.clone(), FieldOp::Register(v.to_vec())),
                (cnt.clone(), FieldOp::Counter(n)),
            ],
        })
    };
    let a = m
        .update(&op(b"old", 2), b"a", None, 10)
        .unwrap_or_else(|e| panic!("{e}"));
    let b = m
        .update(&op(b"new", 3), b"b", None, 20)
        .unwrap_or_else(|e| panic!("{e}"));
    let ab = a.merge(&b).unwrap_or_else(|e| panic!("{e}"));
    let Value::Map(v) = ab.value() else { panic!() };
    assert_eq!(v.get(&reg), Some(&FieldValue::Register(b"new".to_vec())));
    assert_eq!(v.get(&cnt), Some(&FieldValue::Counter(5)));
}

#[test]
fn hll_precision_is_bounded_and_folds_on_merge() {
    assert_eq!(
        Crdt::new(DataType::Hll, 3).err(),
        Some(CrdtError::BadPrecision(3))
    );
    assert_eq!(
        Crdt::new(DataType::Hll, 17).err(),
        Some(CrdtError::BadPrecision(17))
    );
    let mut fine = hll::Hll::new(14).unwrap_or_else(|e| panic!("{e}"));
    let mut coarse = hll::Hll::new(10).unwrap_or_else(|e| panic!("{e}"));
    for i in 0..2000u32 {
        fine.add(&i.to_le_bytes());
        coarse.add(&(i + 1000).to_le_bytes());
    }
    let m = fine.merge(&coarse);
    assert_eq!(m.precision, 10);
    // 3000 distinct; precision 10 has about 3 % standard error.
    let v = m.value() as f64;
    assert!((v - 3000.0).abs() < 300.0, "estimate {v}");
    // Folding keeps what the coarse sketch would have seen itself.
    let mut direct = hll::Hll::new(10).unwrap_or_else(|e| panic!("{e}"));
    for i in 0..3000u32 {
        direct.add(&i.to_le_bytes());
    }
    assert_eq!(m, direct);
}

#[test]
fn a_set_of_many_removed_elements_stays_small() {
    let mut s = Crdt::new(DataType::Set, 14).unwrap_or_else(|e| panic!("{e}"));
    let n = 2000u32;
    for i in 0..n {
        let op = Op::Set(SetOp {
            adds: vec![i.to_le_bytes().to_vec()],
            removes: vec![],
        });
        s = s
            .update(&op, b"a", None, 1)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let full = s.encode().len();
    for i in 0..n {
        let ctx = s.context();
        let op = Op::Set(SetOp {
            adds: vec![],
            removes: vec![i.to_le_bytes().to_vec()],
        });
        s = s
            .update(&op, b"a", ctx.as_deref(), 1)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let empty = s.encode().len();
    assert!(full > 20_000, "{full}");
    // Only the clock remains: one actor.
    assert!(empty < 64, "{empty} bytes after removing every element");
}

/// Issue 16's closing figure: a set of 10,000 elements (added by one
/// update) after 10,000 removes (100 updates of 100, each with the
/// context just fetched) encodes as the clock alone. Prints both sizes
/// (`cargo test -p basalt-server --lib ten_thousand -- --nocapture`).
#[test]
fn ten_thousand_removes_leave_only_the_clock() {
    let mut s = Crdt::new(DataType::Set, 14).unwrap_or_else(|e| panic!("{e}"));
    let elems: Vec<Vec<u8>> = (0..10_000u32)
        .map(|i| format!("element-{i:05}").into_bytes())
        .collect();
    let add = Op::Set(SetOp {
        adds: elems.clone(),
        removes: vec![],
    });
    s = s
        .update(&add, b"a", None, 1)
        .unwrap_or_else(|e| panic!("{e}"));
    let full = s.encode().len();
    for chunk in elems.chunks(100) {
        let ctx = s.context();
        let op = Op::Set(SetOp {
            adds: vec![],
            removes: chunk.to_vec(),
        });
        s = s
            .update(&op, b"b", ctx.as_deref(), 1)
            .unwrap_or_else(|e| panic!("{e}"));
    }
    let empty = s.encode().len();
    println!("10,000-element set: {full} bytes; after 10,000 removes: {empty} bytes");
    assert!(full > 100_000, "{full}");
    // Two actors' clock entries, nothing per removed element.
    assert!(empty < 96, "{empty} bytes after removing every element");
}

#[test]
fn updates_past_a_limit_fail_and_change_nothing() {
    use crate::limits::{CRDT_MAX_DEPTH, CRDT_MAX_ELEMENT_BYTES};
    let s = Crdt::new(DataType::Set, 14).unwrap_or_else(|e| panic!("{e}"));
    let big = Op::Set(SetOp {
        adds: vec![vec![0; CRDT_MAX_ELEMENT_BYTES + 1]],
        removes: vec![],
    });
    assert_eq!(
        s.update(&big, b"a", None, 1).err(),
        Some(CrdtError::TooLarge("element size"))
    );
    // Maps nested one deeper than the limit.
    let mut op = MapOp {
        removes: vec![],
        updates: vec![((b"f".to_vec(), FieldKind::Flag), FieldOp::Flag(true))],
    };
    for _ in 0..CRDT_MAX_DEPTH {
        op = MapOp {
            removes: vec![],
            updates: vec![((b"m".to_vec(), FieldKind::Map), FieldOp::Map(op))],
        };
    }
    let m = Crdt::new(DataType::Map, 14).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        m.update(&Op::Map(op.clone()), b"a", None, 1).err(),
        Some(CrdtError::TooLarge("maps nested too deep"))
    );
    // One level less is accepted, and decodes.
    if let Some((_, FieldOp::Map(inner))) = op.updates.pop() {
        let ok = m
            .update(&Op::Map(inner), b"a", None, 1)
            .unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(Crdt::decode(&ok.encode()).ok(), Some(ok));
    }
}
