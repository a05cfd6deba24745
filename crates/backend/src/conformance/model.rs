//! Conformance: random put / delete / get / head / fold_keys /
//! list_buckets (and close + reopen for persistent backends) against a
//! `BTreeMap` model ([`model`]).

use super::{check_fold_keys, long, seed, tempdir, Factory, Model};
use crate::{value_hash, Cached, WriteOptions};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};

/// Random operations against a `BTreeMap` model, with reopens.
pub fn model(f: &dyn Factory) {
    let cases = if long() { 40 } else { 4 };
    let ops = if long() { 2000 } else { 400 };
    let base = seed();
    for case in 0..cases {
        let s = base.wrapping_add(case);
        eprintln!(
            "conformance::model {}: seed {s} (BASALT_TEST_SEED={s} to replay)",
            f.name()
        );
        let mut rng = StdRng::seed_from_u64(s);
        let dir = tempdir();
        let mut b = f.open(dir.path()).expect("open");
        let mut m: Model = BTreeMap::new();
        let buckets: [&[u8]; 3] = [b"b1", b"b2", b"b\x003"];
        for i in 0..ops {
            let ctx = format!("{} seed {s} op {i}", f.name());
            let bucket = buckets[rng.gen_range(0..buckets.len())].to_vec();
            let key = format!("k{:03}", rng.gen_range(0..60)).into_bytes();
            match rng.gen_range(0..100) {
                0..=39 => {
                    let len = rng.gen_range(0..600);
                    let value: Vec<u8> = (0..len).map(|_| rng.gen()).collect();
                    let meta = format!("m{i}").into_bytes();
                    b.put(&bucket, &key, &value, &meta, &WriteOptions::default())
                        .expect("put");
                    m.insert((bucket, key), (value, meta));
                }
                40..=54 => {
                    b.delete(&bucket, &key, &WriteOptions::default())
                        .expect("delete");
                    m.remove(&(bucket, key));
                }
                55..=79 => {
                    let got = b.get(&bucket, &key).expect("get");
                    let want = m.get(&(bucket.clone(), key.clone()));
                    assert_eq!(
                        got.as_ref().map(|o| (&o.value, &o.head.metadata)),
                        want.map(|(v, mm)| (v, mm)),
                        "{ctx}: get"
                    );
                    if let Cached::Hit(c) = b.get_cached(&bucket, &key).expect("get_cached") {
                        assert_eq!(c, got, "{ctx}: get_cached hit differs from get");
                    }
                    if let Some(o) = got {
                        assert_eq!(o.head.size, o.value.len() as u64, "{ctx}: size");
                        assert_eq!(o.head.value_hash, value_hash(&o.value), "{ctx}: hash");
                    }
                }
                80..=89 => {
                    let got = b.head(&bucket, &key).expect("head");
                    if let Cached::Hit(c) = b.head_cached(&bucket, &key).expect("head_cached") {
                        assert_eq!(c, got, "{ctx}: head_cached hit differs from head");
                    }
                    let want = m.get(&(bucket, key));
                    assert_eq!(
                        got.map(|h| (h.size, h.value_hash, h.metadata)),
                        want.map(|(v, mm)| (v.len() as u64, value_hash(v), mm.clone())),
                        "{ctx}: head"
                    );
                }
                90..=94 => check_fold_keys(&*b, &m, &bucket, &ctx),
                95..=96 => {
                    let got = b.list_buckets().expect("list_buckets");
                    let want: BTreeSet<Vec<u8>> = m.keys().map(|(bb, _)| bb.clone()).collect();
                    assert_eq!(got, want.into_iter().collect::<Vec<_>>(), "{ctx}: buckets");
                }
                _ => {
                    if f.persistent() {
                        b.close().expect("close");
                        drop(b);
                        b = f.open(dir.path()).expect("reopen");
                    }
                }
            }
        }
        for ((bucket, key), (v, _)) in &m {
            let got = b.get(bucket, key).expect("final get").map(|o| o.value);
            assert_eq!(got.as_ref(), Some(v), "{} seed {s}: final get", f.name());
        }
        for bucket in buckets {
            check_fold_keys(&*b, &m, bucket, "final");
        }
        b.close().expect("close");
    }
}
