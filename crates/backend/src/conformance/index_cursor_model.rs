//! Conformance: paging 2i queries by cursors against a `BTreeMap` model
//! of the entries, a property test ([`index_cursor_model`]).

use super::index_cursor::{cursor_backend, page_by_cursor, with_index};
use super::{long, seed, tempdir, Factory};
use crate::{IndexChange, IndexCursor, IndexQuery, IndexResult};
use std::collections::BTreeMap;

/// One generated case of [`index_cursor_model`].
#[derive(Debug, Clone)]
struct CursorCase {
    int: bool,
    /// (bin term, int term, key, remove)
    ops: Vec<(Vec<u8>, i64, Vec<u8>, bool)>,
    page: u32,
    bin_bounds: (Vec<u8>, Vec<u8>),
    int_bounds: (i64, i64),
    regex: bool,
    cursor: Option<(Vec<u8>, i64, Vec<u8>)>,
}

/// Property test: paging by `start_after` (random page sizes, from a
/// random first cursor, `_bin` or `_int`, with removals and sometimes a
/// `term_regex`) equals a `BTreeMap` model of the entries. The seed comes
/// from `BASALT_TEST_SEED`; `BASALT_LONG_TESTS=1` runs more cases.
pub fn index_cursor_model(f: &dyn Factory) {
    use proptest::prelude::*;
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    match cursor_backend(f) {
        None => return,
        Some((_dir, b)) => b.close().expect("close"),
    }
    let name = f.name();
    let cases = if long() { 256 } else { 24 };
    let s = seed();
    eprintln!("conformance::index_cursor_model {name}: seed {s} (BASALT_TEST_SEED={s} to replay)");
    let mut bytes = [0u8; 32];
    bytes[..8].copy_from_slice(&s.to_le_bytes());
    let config = Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    };
    let mut runner =
        TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes));
    let byte = || prop_oneof![Just(0u8), Just(1u8), Just(b'a'), Just(b'b'), Just(0xFFu8)];
    let term = move || proptest::collection::vec(byte(), 0..3);
    let key = move || proptest::collection::vec(byte(), 1..3);
    let op = (term(), -6i64..6, key(), proptest::bool::weighted(0.2));
    let strategy = (
        any::<bool>(),
        proptest::collection::vec(op, 0..80),
        1u32..9,
        (term(), term()),
        (-7i64..7, -7i64..7),
        any::<bool>(),
        proptest::option::of((term(), -7i64..7, proptest::collection::vec(byte(), 0..3))),
    )
        .prop_map(
            |(int, ops, page, bin_bounds, int_bounds, regex, cursor)| CursorCase {
                int,
                ops,
                page,
                bin_bounds,
                int_bounds,
                regex: regex && !int,
                cursor,
            },
        );
    let result = runner.run(&strategy, |c| {
        let dir = tempdir();
        let b = f.open(dir.path()).expect("open");
        let field: &[u8] = if c.int { b"n_int" } else { b"t_bin" };
        // Model: (order term, key) -> user term; the order term is the
        // sign-flipped big-endian form for _int (numeric order).
        let order = |v: i64| ((v as u64) ^ (1 << 63)).to_be_bytes().to_vec();
        let mut m: BTreeMap<(Vec<u8>, Vec<u8>), Vec<u8>> = BTreeMap::new();
        for (bt, it, k, remove) in &c.ops {
            let (ord, user) = if c.int {
                (order(*it), it.to_string().into_bytes())
            } else {
                (bt.clone(), bt.clone())
            };
            let ch = if *remove {
                IndexChange::remove(field, user.clone())
            } else {
                IndexChange::add(field, user.clone())
            };
            b.put(b"pm", k, b"v", b"", &with_index(vec![ch]))
                .expect("put");
            if *remove {
                m.remove(&(ord, k.clone()));
            } else {
                m.insert((ord, k.clone()), user);
            }
        }
        let (lo, hi, lo_ord, hi_ord) = if c.int {
            let (a, z) = (
                c.int_bounds.0.min(c.int_bounds.1),
                c.int_bounds.0.max(c.int_bounds.1),
            );
            (
                a.to_string().into_bytes(),
                z.to_string().into_bytes(),
                order(a),
                order(z),
            )
        } else {
            let (a, z) = if c.bin_bounds.0 <= c.bin_bounds.1 {
                (c.bin_bounds.0.clone(), c.bin_bounds.1.clone())
            } else {
                (c.bin_bounds.1.clone(), c.bin_bounds.0.clone())
            };
            (a.clone(), z.clone(), a, z)
        };
        let mut q = IndexQuery::range(b"pm", field, &lo, &hi);
        q.return_terms = true;
        if c.regex {
            q.term_regex = Some("a".into());
        }
        let cursor = c.cursor.as_ref().map(|(bt, it, k)| {
            if c.int {
                (order(*it), it.to_string().into_bytes(), k.clone())
            } else {
                (bt.clone(), bt.clone(), k.clone())
            }
        });
        q.start_after = cursor
            .as_ref()
            .map(|(_, user, k)| IndexCursor::new(user.clone(), k.clone()));
        let want: Vec<IndexResult> = m
            .iter()
            .filter(|((ord, k), _)| {
                *ord >= lo_ord
                    && *ord <= hi_ord
                    && (!c.regex || ord.contains(&b'a'))
                    && cursor
                        .as_ref()
                        .is_none_or(|(co, _, ck)| (ord, k) > (co, ck))
            })
            .map(|((_, k), user)| IndexResult {
                term: Some(user.clone()),
                key: k.clone(),
            })
            .collect();
        let got = page_by_cursor(&*b, &q, c.page, name);
        b.close().expect("close");
        prop_assert_eq!(got, want);
        Ok(())
    });
    if let Err(e) = result {
        panic!("{name}: index_cursor_model (seed {s}): {e}");
    }
}
