//! Erlang-term jobs as riakc builds them → the [`Job`] a JSON job gives;
//! results → the terms riakc decodes; bad jobs → Riak's texts.

use super::*;
use crate::limits::{MAPRED_DEFAULT_TIMEOUT, MAPRED_MAX_TIMEOUT};
use crate::mapred::job::{BucketName, Inputs, JobError, KeyInput, STRFUN_REFUSED};
use crate::mapred::js::JsFun;
use eetf::{Atom, Binary, FixInteger, List, Term, Tuple};
use serde_json::json;
use std::time::Duration;

fn a(n: &str) -> Term {
    Term::from(Atom::from(n))
}
fn b(s: &str) -> Term {
    Term::from(Binary::from(s.as_bytes()))
}
fn t(v: Vec<Term>) -> Term {
    Term::from(Tuple::from(v))
}
fn l(v: Vec<Term>) -> Term {
    Term::from(List::from(v))
}
fn i(n: i32) -> Term {
    Term::from(FixInteger::from(n))
}
fn enc(term: &Term) -> Vec<u8> {
    let mut v = Vec::new();
    term.encode(&mut v).expect("encode");
    v
}
fn dec(bytes: &[u8]) -> Term {
    Term::decode(bytes).expect("decode")
}

/// `[{inputs, I}, {query, Q}, {timeout, 60000}]`, as riakc sends it.
fn job(inputs: Term, query: Vec<Term>) -> Vec<u8> {
    enc(&l(vec![
        t(vec![a("inputs"), inputs]),
        t(vec![a("query"), l(query)]),
        t(vec![a("timeout"), i(60000)]),
    ]))
}

fn ok(bytes: &[u8]) -> Job {
    parse(bytes).unwrap_or_else(|e| panic!("{e}"))
}

fn err(bytes: &[u8]) -> String {
    match parse(bytes) {
        Ok(j) => panic!("parsed: {j:?}"),
        Err(JobError(e)) => e,
    }
}

fn modfun(f: &str) -> Term {
    t(vec![a("modfun"), a("riak_kv_mapreduce"), a(f)])
}

fn map(spec: Term, arg: Term, keep: bool) -> Term {
    t(vec![
        a("map"),
        spec,
        arg,
        a(if keep { "true" } else { "false" }),
    ])
}

fn reduce(spec: Term, arg: Term, keep: bool) -> Term {
    t(vec![
        a("reduce"),
        spec,
        arg,
        a(if keep { "true" } else { "false" }),
    ])
}

fn bn(bucket: &str) -> BucketName {
    BucketName {
        btype: None,
        bucket: bucket.into(),
    }
}

#[test]
fn every_input_shape_riakc_builds() {
    let q = vec![map(modfun("map_object_value"), a("none"), true)];
    let j = ok(&job(b("bk"), q.clone()));
    assert_eq!(
        j.inputs,
        Inputs::Bucket {
            bucket: bn("bk"),
            filters: vec![]
        }
    );
    assert_eq!(j.timeout, Duration::from_secs(60));
    let j = ok(&job(t(vec![b("ty"), b("bk")]), q.clone()));
    assert!(
        matches!(&j.inputs, Inputs::Bucket { bucket, .. } if bucket.btype.as_deref() == Some(&b"ty"[..]))
    );
    // Listed keys: {B,K}, {{B,K},KD}, {{{T,B},K},KD}; and {{T,B},K} is,
    // as in Riak, bucket T, key B with key data K.
    let j = ok(&job(
        l(vec![
            t(vec![b("b"), b("k1")]),
            t(vec![t(vec![b("b"), b("k2")]), i(7)]),
            t(vec![
                t(vec![t(vec![b("ty"), b("b")]), b("k3")]),
                a("undefined"),
            ]),
            t(vec![t(vec![b("ty"), b("b")]), b("k4")]),
        ]),
        q.clone(),
    ));
    let Inputs::Keys(keys) = &j.inputs else {
        panic!("{j:?}")
    };
    assert_eq!(
        keys[0],
        KeyInput {
            bucket: bn("b"),
            key: b"k1".to_vec(),
            keydata: None
        }
    );
    assert_eq!(keys[1].keydata, Some(json!(7)));
    assert_eq!(keys[2].bucket.btype.as_deref(), Some(&b"ty"[..]));
    assert_eq!(keys[2].keydata, None);
    assert_eq!(
        (keys[3].bucket.bucket.as_slice(), keys[3].key.as_slice()),
        (&b"ty"[..], &b"b"[..])
    );
    assert_eq!(keys[3].keydata, Some(json!("k4")));
    // Key filters, untyped and typed, names and args as binaries or strings.
    let filters = l(vec![
        l(vec![b("tokenize"), b("-"), i(1)]),
        l(vec![
            Term::from(eetf::ByteList::from("starts_with")),
            Term::from(eetf::ByteList::from("a")),
        ]),
    ]);
    let j = ok(&job(t(vec![b("bk"), filters.clone()]), q.clone()));
    assert!(matches!(&j.inputs, Inputs::Bucket { filters, .. } if filters.len() == 2));
    let j = ok(&job(t(vec![t(vec![b("ty"), b("bk")]), filters]), q.clone()));
    assert!(
        matches!(&j.inputs, Inputs::Bucket { bucket, filters } if filters.len() == 2 && bucket.btype.is_some())
    );
    // 2i: equality and range, integer or binary terms, typed buckets;
    // and Riak 1.x's {modfun, riak_index, mapred_index, ...}.
    let j = ok(&job(
        t(vec![a("index"), b("bk"), b("n_int"), i(5)]),
        q.clone(),
    ));
    assert_eq!(
        j.inputs,
        Inputs::Index {
            bucket: bn("bk"),
            index: b"n_int".to_vec(),
            start: b"5".to_vec(),
            end: None
        }
    );
    let j = ok(&job(
        t(vec![
            a("index"),
            t(vec![b("ty"), b("bk")]),
            b("f_bin"),
            b("a"),
            b("m"),
        ]),
        q.clone(),
    ));
    assert!(
        matches!(&j.inputs, Inputs::Index { bucket, end: Some(e), .. } if e == b"m" && bucket.btype.is_some())
    );
    let j = ok(&job(
        t(vec![
            a("modfun"),
            a("riak_index"),
            a("mapred_index"),
            l(vec![b("bk"), t(vec![a("range"), b("n_int"), i(1), i(9)])]),
        ]),
        q.clone(),
    ));
    assert!(
        matches!(&j.inputs, Inputs::Index { start, end: Some(e), .. } if start == b"1" && e == b"9")
    );
    // No inputs at all: Riak runs the phases on nothing.
    assert_eq!(ok(&job(l(vec![]), q)).inputs, Inputs::Keys(vec![]));
}

#[test]
fn every_phase_shape_riakc_builds() {
    let js = "function(v) { return [v.key]; }";
    let j = ok(&job(
        b("bk"),
        vec![
            map(modfun("map_object_value"), b("filter_notfound"), false),
            map(
                t(vec![
                    a("qfun"),
                    Term::from(eetf::ExternalFun::from((
                        "riak_kv_mapreduce",
                        "map_object_value",
                        3,
                    ))),
                ]),
                a("none"),
                false,
            ),
            map(t(vec![a("jsanon"), b(js)]), l(vec![]), false),
            map(
                t(vec![a("jsanon"), Term::from(eetf::ByteList::from(js))]),
                a("none"),
                false,
            ),
            map(
                t(vec![a("jsfun"), b("Riak.mapValuesJson")]),
                a("none"),
                true,
            ),
            t(vec![a("link"), b("people"), a("_"), a("false")]),
            t(vec![a("link"), a("_"), b("friend"), a("true")]),
            reduce(
                modfun("reduce_sort"),
                l(vec![t(vec![a("reduce_phase_batch_size"), i(10)])]),
                false,
            ),
            reduce(
                modfun("reduce_plist_sum"),
                l(vec![a("reduce_phase_only_1")]),
                false,
            ),
            reduce(t(vec![a("jsfun"), b("Riak.reduceSum")]), a("none"), true),
        ],
    ));
    use crate::mapred::builtins::Builtin as B;
    use crate::mapred::job::PhaseKind as K;
    let q = &j.query;
    assert_eq!(q.len(), 10);
    assert_eq!(q[0].kind, K::Map(PhaseFun::ErlangTerms(B::MapObjectValue)));
    assert_eq!(q[0].arg, json!("filter_notfound"));
    assert!(!q[0].keep);
    assert_eq!(q[1].kind, q[0].kind);
    assert_eq!(q[1].arg, json!("none"));
    assert_eq!(q[2].kind, K::Map(PhaseFun::Js(JsFun::Source(js.into()))));
    assert_eq!(q[2].arg, json!([]));
    assert_eq!(q[3].kind, q[2].kind);
    assert_eq!(
        q[4].kind,
        K::Map(PhaseFun::Js(JsFun::Name("Riak.mapValuesJson".into())))
    );
    assert!(q[4].keep);
    assert_eq!(
        q[5].kind,
        K::Link {
            bucket: Some(b"people".to_vec()),
            tag: None
        }
    );
    assert_eq!(
        q[6].kind,
        K::Link {
            bucket: None,
            tag: Some(b"friend".to_vec())
        }
    );
    assert_eq!(q[7].kind, K::Reduce(PhaseFun::ErlangTerms(B::ReduceSort)));
    assert_eq!(q[7].arg, json!({"reduce_phase_batch_size": 10}));
    assert_eq!(q[8].arg, json!({"reduce_phase_only_1": true}));
    assert_eq!(
        shapes(&j),
        vec![
            Shape::ErlangMap,
            Shape::ErlangMap,
            Shape::Plain,
            Shape::Plain,
            Shape::Plain,
            Shape::Link,
            Shape::Link,
            Shape::Plain,
            Shape::Pairs,
            Shape::Plain
        ]
    );
    assert_eq!(shapes(&ok(&job(b("bk"), vec![]))), vec![Shape::Inputs]);
}

#[test]
fn timeouts_as_riakc_sends_them() {
    let with = |tm: Term| {
        enc(&l(vec![
            t(vec![a("inputs"), b("bk")]),
            t(vec![a("query"), l(vec![])]),
            t(vec![a("timeout"), tm]),
        ]))
    };
    assert_eq!(ok(&with(i(1500))).timeout, Duration::from_millis(1500));
    assert_eq!(ok(&with(a("infinity"))).timeout, MAPRED_MAX_TIMEOUT);
    assert_eq!(ok(&with(i(0))).timeout, MAPRED_DEFAULT_TIMEOUT);
    assert_eq!(ok(&with(i(i32::MAX))).timeout, MAPRED_MAX_TIMEOUT);
    let no_timeout = enc(&l(vec![
        t(vec![a("query"), l(vec![])]),
        t(vec![a("inputs"), b("bk")]),
    ]));
    assert_eq!(ok(&no_timeout).timeout, MAPRED_DEFAULT_TIMEOUT);
}

#[test]
fn refusals_in_riaks_words() {
    let q = |spec: Term| vec![map(spec, a("none"), true)];
    // strfun, map or reduce, source or {B, K}.
    assert_eq!(
        err(&job(
            b("bk"),
            q(t(vec![a("strfun"), b("fun(_,_,_) -> [1] end.")]))
        )),
        STRFUN_REFUSED
    );
    assert_eq!(
        err(&job(
            b("bk"),
            vec![reduce(
                t(vec![a("strfun"), t(vec![b("b"), b("k")])]),
                a("none"),
                true
            )]
        )),
        STRFUN_REFUSED
    );
    // A module this node cannot load; a function riak_kv_mapreduce lacks.
    assert_eq!(
        err(&job(b("bk"), q(t(vec![a("modfun"), a("doesnot"), a("exist")])))),
        "Phase {xform_map,0}: invalid module named in PhaseSpec function:\n must be a valid module name (failed to load doesnot: nofile)"
    );
    assert_eq!(
        err(&job(b("bk"), vec![map(modfun("map_object_value"), a("none"), false), reduce(modfun("map_object_value"), a("none"), true)])),
        "Phase {reduce,1}: arg specifies riak_kv_mapreduce:map_object_value/2, which is not exported"
    );
    assert_eq!(
        err(&job(b("bk"), q(modfun("nope")))),
        "Phase {xform_map,0}: PhaseSpec specifies riak_kv_mapreduce:nope/3, which is not exported"
    );
    // qfun: an export of another module, the wrong arity, a closure.
    let e = err(&job(
        b("bk"),
        q(t(vec![
            a("qfun"),
            Term::from(eetf::ExternalFun::from(("mymod", "f", 3))),
        ])),
    ));
    assert!(e.contains("failed to load mymod"), "{e}");
    let e = err(&job(
        b("bk"),
        q(t(vec![
            a("qfun"),
            Term::from(eetf::ExternalFun::from((
                "riak_kv_mapreduce",
                "map_object_value",
                2,
            ))),
        ])),
    ));
    assert!(e.ends_with("must be of arity 3, not 2"), "{e}");
    let closure = Term::from(eetf::InternalFun::New {
        module: Atom::from("erl_eval"),
        arity: 3,
        pid: eetf::Pid::from(("nonode@nohost", 1, 0)),
        free_vars: vec![],
        index: 1,
        uniq: [0; 16],
        old_index: 1,
        old_uniq: 1,
    });
    let e = err(&job(b("bk"), q(t(vec![a("qfun"), closure]))));
    assert!(
        e.starts_with("Phase {xform_map,0}: PhaseSpec is an anonymous fun"),
        "{e}"
    );
    assert!(e.contains("Basalt runs no Erlang code"), "{e}");
    let e = err(&job(
        b("bk"),
        q(t(vec![a("jsanon"), t(vec![b("b"), b("k")])])),
    ));
    assert!(
        e.contains("JavaScript stored in a Riak object is not supported"),
        "{e}"
    );
    // Inputs and queries Riak does not recognise.
    assert_eq!(
        err(&job(i(5), vec![])),
        "{inputs,{\"Inputs must be a binary bucket, a tuple of bucket and key-filters, a list of target tuples, or a search, index, or modfun tuple:\",5}}"
    );
    assert_eq!(
        err(&job(l(vec![t(vec![b("b"), b("k")]), b("x"), i(1)]), vec![])),
        "{inputs,{\"Inputs target tuples must be {B,K} or {{B,K},KeyData}:\",[<<\"x\">>,1]}}"
    );
    let no_query = enc(&l(vec![t(vec![a("inputs"), b("bk")])]));
    assert_eq!(
        err(&no_query),
        "{query,{\"Query takes a list of step tuples\",undefined}}"
    );
    assert!(err(&job(
        b("bk"),
        vec![t(vec![
            a("map"),
            modfun("map_object_value"),
            a("none"),
            a("yes")
        ])]
    ))
    .starts_with("{query,{\"Query steps are"));
    assert!(err(&job(b("bk"), vec![a("walk")])).starts_with("{query,{\"Query steps are"));
    assert_eq!(
        err(&job(t(vec![a("search"), b("idx"), b("q")]), vec![])),
        "Error sending inputs: {error,\"search not enabled\"}"
    );
    assert_eq!(
        err(&job(
            t(vec![a("modfun"), a("mymod"), a("inputs"), l(vec![])]),
            vec![]
        )),
        "Error sending inputs: {{modfun,mymod,inputs,[]},error,undef,[]}"
    );
    assert_eq!(
        err(&job(
            t(vec![a("index"), b("bk"), b("nope"), b("x")]),
            vec![]
        )),
        "{inputs,[{unknown_field_type,<<\"nope\">>}]}"
    );
    assert!(
        err(&job(t(vec![b("bk"), l(vec![l(vec![b("bogus")])])]), vec![]))
            .contains("unknown key filter")
    );
    // Not a proplist; not a term at all; too deep; too big.
    assert!(err(&enc(&b("x"))).starts_with("function_clause"));
    assert!(err(b"{\"inputs\":\"b\"}").starts_with("badarg"));
    assert!(err(&[131, 108, 0xff, 0xff, 0xff, 0xff, 106]).starts_with("badarg"));
    let mut deep = b("x");
    for _ in 0..200 {
        deep = l(vec![deep]);
    }
    let e = err(&job(
        l(vec![t(vec![t(vec![b("b"), b("k")]), deep])]),
        vec![],
    ));
    assert!(e.contains("MAPRED_ETF_MAX_DEPTH"), "{e}");
    let huge = vec![0u8; crate::limits::MAPRED_ETF_MAX_JOB_BYTES + 1];
    assert!(err(&huge).contains("MAPRED_ETF_MAX_JOB_BYTES"));
}

#[test]
fn results_encode_as_riak_sends_them() {
    // map_object_value: the value binaries, bytes kept even when not UTF-8.
    let raw = crate::mapred::core::binary_marker(&[0x83, 0x61, 0x01]);
    let out = dec(&encode(&[json!("v1"), raw], Shape::ErlangMap));
    assert_eq!(
        out,
        l(vec![
            b("v1"),
            Term::from(Binary::from(vec![0x83u8, 0x61, 0x01]))
        ])
    );
    // Inputs (no phases), links, plist sums, JS objects, not-founds.
    assert_eq!(
        dec(&encode(
            &[json!(["b", "k"]), json!(["b", "k2", 3])],
            Shape::Inputs
        )),
        l(vec![
            t(vec![b("b"), b("k")]),
            t(vec![t(vec![b("b"), b("k2")]), i(3)])
        ])
    );
    assert_eq!(
        dec(&encode(&[json!(["b", "k", "t"])], Shape::Link)),
        l(vec![t(vec![t(vec![b("b"), b("k")]), b("t")])])
    );
    assert_eq!(
        dec(&encode(&[json!(["a", 3])], Shape::Pairs)),
        l(vec![t(vec![b("a"), i(3)])])
    );
    assert_eq!(
        dec(&encode(&[json!({"x": [1, true]})], Shape::Plain)),
        l(vec![t(vec![
            a("struct"),
            l(vec![t(vec![b("x"), l(vec![i(1), a("true")])])])
        ])])
    );
    let nf = json!({"not_found": {"bucket": "b", "key": "k", "keydata": null}});
    assert_eq!(
        dec(&encode(std::slice::from_ref(&nf), Shape::ErlangMap)),
        l(vec![t(vec![a("error"), a("notfound")])])
    );
    assert_eq!(
        dec(&encode(&[nf], Shape::Plain)),
        l(vec![t(vec![
            a("not_found"),
            t(vec![b("b"), b("k")]),
            a("null")
        ])])
    );
    assert_eq!(dec(&encode(&[], Shape::Plain)), l(vec![]));
    // Key data a client sent comes back as the same term.
    let kd = t(vec![a("tag"), i(1)]);
    let j = ok(&job(
        l(vec![t(vec![t(vec![b("b"), b("k")]), kd.clone()])]),
        vec![],
    ));
    let Inputs::Keys(keys) = j.inputs else {
        panic!()
    };
    let v = json!(["b", "k", keys[0].keydata.clone()]);
    assert_eq!(
        dec(&encode(&[v], Shape::Inputs)),
        l(vec![t(vec![t(vec![b("b"), b("k")]), kd])])
    );
}

proptest::proptest! {
    #[test]
    fn garbage_jobs_never_panic(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..512)) {
        let mut v = vec![131];
        v.extend_from_slice(&bytes);
        let _ = parse(&v);
    }

    #[test]
    fn mutated_jobs_never_panic(pos in 0usize..400, byte in proptest::prelude::any::<u8>()) {
        let mut v = job(
            l(vec![t(vec![t(vec![b("b"), b("k")]), t(vec![a("x"), i(1)])])]),
            vec![
                map(modfun("map_object_value"), b("filter_notfound"), false),
                t(vec![a("link"), a("_"), b("t"), a("false")]),
                reduce(t(vec![a("jsanon"), b("function(v){return v;}")]), l(vec![t(vec![a("reduce_phase_only_1"), a("true")])]), true),
            ],
        );
        let i = pos % v.len();
        v[i] = byte;
        if let Ok(j) = parse(&v) {
            // Whatever parsed encodes results without panicking.
            for s in shapes(&j) {
                let _ = encode(&[json!(["b", "k", {"x": 1}]), json!({"not_found": 1})], s);
            }
        }
    }
}
