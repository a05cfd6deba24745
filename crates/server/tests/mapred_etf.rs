//! MapReduce over PB in Erlang's external term format, as riakc sends it
//! (`content_type = application/x-erlang-binary`, the job
//! `term_to_binary([{inputs, I}, {query, Q}, {timeout, T}])`), on an
//! in-process node: listed keys, a whole bucket, key filters, a 2i range,
//! JavaScript and reduce phases answer with `term_to_binary` lists (object
//! values keep their bytes); refused and malformed jobs get Riak's texts
//! and the same connection then answers a ping. An Erlang source phase in
//! a JSON job gets Riak's text too.

mod common;

use basalt_server::pb::{self, code};
use basalt_server::ServerHandle;
use common::Client;
use eetf::{Atom, Binary, FixInteger, List, Term, Tuple};
use prost::Message;
use std::collections::BTreeMap;

fn a(n: &str) -> Term {
    Term::from(Atom::from(n))
}
fn b(s: &[u8]) -> Term {
    Term::from(Binary::from(s))
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
fn modfun(f: &str) -> Term {
    t(vec![a("modfun"), a("riak_kv_mapreduce"), a(f)])
}
fn phase(kind: &str, spec: Term, keep: bool) -> Term {
    t(vec![
        a(kind),
        spec,
        a("none"),
        a(if keep { "true" } else { "false" }),
    ])
}

/// `term_to_binary(ok)`: a value riakc stores for a non-binary term.
const RAW: &[u8] = &[131, 100, 0, 2, b'o', b'k'];

fn start() -> (ServerHandle, tempfile::TempDir) {
    common::spawn_node(false, |c| {
        c.mapred.map_js_vm_count = 1;
        c.mapred.reduce_js_vm_count = 1;
        c.mapred.hook_js_vm_count = 1;
        c.mapred.js_max_vm_mem_mb = 8;
    })
}

fn put(c: &mut Client, bucket: &str, key: &str, value: &[u8], n: Option<u32>) {
    let indexes: Vec<(&str, String)> = n.map(|n| ("n_int", n.to_string())).into_iter().collect();
    common::put_all_replicas(
        c,
        bucket,
        key,
        value,
        "application/x-erlang-binary",
        &indexes,
    );
}

/// Sends `job` as riakc does; `(phase → results)` or the error text.
fn run(c: &mut Client, inputs: Term, query: Vec<Term>) -> Result<BTreeMap<u32, Vec<Term>>, String> {
    let mut job = Vec::new();
    l(vec![
        t(vec![a("inputs"), inputs]),
        t(vec![a("query"), l(query)]),
        t(vec![a("timeout"), i(60000)]),
    ])
    .encode(&mut job)
    .expect("encode");
    send(c, job, b"application/x-erlang-binary")
}

fn send(c: &mut Client, request: Vec<u8>, ct: &[u8]) -> Result<BTreeMap<u32, Vec<Term>>, String> {
    let req = pb::RpbMapRedReq {
        request,
        content_type: ct.to_vec(),
    };
    c.send(code::MAP_RED_REQ, &req.encode_to_vec());
    let mut out: BTreeMap<u32, Vec<Term>> = BTreeMap::new();
    loop {
        let (rc, body) = c.recv().expect("frame");
        if rc == code::ERROR_RESP {
            let e = pb::RpbErrorResp::decode(body.as_slice()).expect("error");
            return Err(String::from_utf8_lossy(&e.errmsg).into_owned());
        }
        assert_eq!(rc, code::MAP_RED_RESP);
        let r = pb::RpbMapRedResp::decode(body.as_slice()).expect("resp");
        if let (Some(p), Some(data)) = (r.phase, r.response) {
            match Term::decode(data.as_slice()).expect("binary_to_term") {
                Term::List(list) => out.entry(p).or_default().extend(list.elements),
                // A list of small integers travels as a string, as Erlang's does.
                Term::ByteList(bytes) => out
                    .entry(p)
                    .or_default()
                    .extend(bytes.bytes.iter().map(|n| i(i32::from(*n)))),
                other => panic!("not a list: {other}"),
            }
        }
        if r.done == Some(true) {
            return Ok(out);
        }
    }
}

/// The one phase's results, sorted by their Erlang text.
fn only(r: Result<BTreeMap<u32, Vec<Term>>, String>, phase: u32) -> Vec<String> {
    let r = r.unwrap_or_else(|e| panic!("job failed: {e}"));
    assert_eq!(r.keys().copied().collect::<Vec<_>>(), vec![phase], "{r:?}");
    let mut v: Vec<String> = r.into_values().flatten().map(|t| t.to_string()).collect();
    v.sort();
    v
}

fn bin_text(s: &str) -> String {
    b(s.as_bytes()).to_string()
}

#[test]
fn riakc_jobs_answer_in_erlang_terms() {
    let (h, _d) = start();
    let mut c = Client::connect(&h);
    for n in 0..10u32 {
        put(
            &mut c,
            "etf",
            &format!("k{n}"),
            n.to_string().as_bytes(),
            Some(n),
        );
    }
    put(&mut c, "raw", "bin", RAW, None);

    // Listed keys through map_object_value: the value binaries.
    let keys = l(vec![
        t(vec![b(b"etf"), b(b"k1")]),
        t(vec![b(b"etf"), b(b"k2")]),
    ]);
    let r = run(
        &mut c,
        keys.clone(),
        vec![phase("map", modfun("map_object_value"), true)],
    );
    assert_eq!(only(r, 0), vec![bin_text("1"), bin_text("2")]);

    // A whole bucket: map, then two reduces (only the last kept).
    let r = run(
        &mut c,
        b(b"etf"),
        vec![
            phase("map", modfun("map_object_value"), false),
            phase("reduce", modfun("reduce_string_to_integer"), false),
            phase("reduce", modfun("reduce_sum"), true),
        ],
    );
    assert_eq!(only(r, 2), vec!["45"]);

    // Key filters and a count of the inputs that pass.
    let filtered = t(vec![b(b"etf"), l(vec![l(vec![b(b"ends_with"), b(b"3")])])]);
    let r = run(
        &mut c,
        filtered,
        vec![phase("reduce", modfun("reduce_count_inputs"), true)],
    );
    assert_eq!(only(r, 0), vec!["1"]);

    // A 2i range, integer bounds as riakc may send them.
    let r = run(
        &mut c,
        t(vec![a("index"), b(b"etf"), b(b"n_int"), i(2), i(4)]),
        vec![phase("map", modfun("map_object_value"), true)],
    );
    assert_eq!(
        only(r, 0),
        vec![bin_text("2"), bin_text("3"), bin_text("4")]
    );

    // JavaScript: an anonymous map, then a named reduce.
    let js = b(b"function(v) { return [v.key]; }");
    let r = run(
        &mut c,
        keys,
        vec![
            phase("map", t(vec![a("jsanon"), js]), false),
            phase("reduce", t(vec![a("jsfun"), b(b"Riak.reduceSort")]), true),
        ],
    );
    assert_eq!(only(r, 1), vec![bin_text("k1"), bin_text("k2")]);

    // A value that is not UTF-8 comes back byte for byte.
    let r = run(
        &mut c,
        l(vec![t(vec![b(b"raw"), b(b"bin")])]),
        vec![phase("map", modfun("map_object_value"), true)],
    );
    let r = r.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(r.get(&0), Some(&vec![b(RAW)]));

    // No phases: the inputs, key data as sent.
    let kd = t(vec![a("my"), i(1)]);
    let r = run(
        &mut c,
        l(vec![t(vec![t(vec![b(b"etf"), b(b"k1")]), kd.clone()])]),
        vec![],
    );
    let r = r.unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(
        r.get(&0),
        Some(&vec![t(vec![t(vec![b(b"etf"), b(b"k1")]), kd])])
    );
}

#[test]
fn refused_and_malformed_jobs_leave_the_connection_serving() {
    let (h, _d) = start();
    let mut c = Client::connect(&h);
    let strfun = phase(
        "map",
        t(vec![a("strfun"), b(b"fun(O, _, _) -> [O] end.")]),
        true,
    );
    assert_eq!(
        run(&mut c, b(b"etf"), vec![strfun]),
        Err("Error sending inputs: {error,worker_startup_failed}".into())
    );
    c.ping();
    let e = run(
        &mut c,
        b(b"etf"),
        vec![phase(
            "map",
            t(vec![a("modfun"), a("doesnot"), a("exist")]),
            true,
        )],
    )
    .expect_err("unknown module");
    assert!(e.starts_with("Phase {xform_map,0}: invalid module"), "{e}");
    c.ping();
    let e = send(
        &mut c,
        vec![131, 108, 0xff, 0xff, 0xff, 0xff, 106],
        b"application/x-erlang-binary",
    )
    .expect_err("malformed");
    assert!(e.starts_with("badarg"), "{e}");
    c.ping();
    // Nested far past the limit: refused before decoding.
    let mut deep = vec![131];
    for _ in 0..100_000 {
        deep.extend_from_slice(&[108, 0, 0, 0, 1]);
    }
    deep.extend(std::iter::repeat_n(106u8, 100_001));
    let e = send(&mut c, deep, b"application/x-erlang-binary").expect_err("deep");
    assert!(e.contains("MAPRED_ETF_MAX_DEPTH"), "{e}");
    c.ping();
    let e = send(&mut c, b"x".to_vec(), b"text/plain").expect_err("content type");
    assert_eq!(e, "{unknown_content_type,<<\"text/plain\">>}");
    c.ping();
    // A JSON job with an Erlang source phase: Riak's words too.
    let json = br#"{"inputs":[["etf","k1"]],"query":[{"map":{"language":"erlang","source":"fun(O,_,_) -> [O] end."}}]}"#;
    assert_eq!(
        send(&mut c, json.to_vec(), b"application/json"),
        Err("Error sending inputs: {error,worker_startup_failed}".into())
    );
    c.ping();
}
