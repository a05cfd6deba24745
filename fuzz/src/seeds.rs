//! Writes the seed corpus (`fuzz/corpus/<target>/`) from real encodings:
//! PB frames from the generated messages, a stored object and vclock from
//! the server's encoders, a cluster `Msg`, a vnode status file, and the
//! files of a tiny engine store (journal records and manifest, SST pieces,
//! ledger manifest), plus tictac exports and continuations, and MapReduce
//! jobs as Erlang terms.
//! Run: `cargo +nightly run --manifest-path fuzz/Cargo.toml --bin seeds`.

use basalt_engine::journal::record::RECORD_HEADER_LEN;
use basalt_engine::ledger::sst::FOOTER_BYTES;
use basalt_engine::{Config, Store, TicTacTree, TreeSize};
use basalt_fuzz::join2;
use basalt_server::object::vclock::VClock;
use basalt_server::object::{Content, RiakObject};
use riak_pb::code;
use std::path::{Path, PathBuf};

fn put(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("corpus")
        .join(target);
    std::fs::create_dir_all(&dir).expect("corpus dir");
    std::fs::write(dir.join(name), bytes).expect("write seed");
}

fn files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("read_dir").flatten() {
        let p = e.path();
        if p.is_dir() {
            files(&p, out);
        } else {
            out.push(p);
        }
    }
}

fn main() {
    // PB frames (first byte: the limit mode, 0 = default limit).
    let mut vc = VClock::new();
    vc.increment(b"node-a", 1_700_000_000);
    vc.increment(b"node-b", 1_700_000_001);
    let put_req = riak_pb::RpbPutReq {
        bucket: b"b".to_vec(),
        key: Some(b"k".to_vec()),
        vclock: Some(vc.encode()),
        content: riak_pb::RpbContent {
            value: b"hello".to_vec(),
            content_type: Some(b"text/plain".to_vec()),
            ..Default::default()
        },
        ..Default::default()
    };
    let get_req = riak_pb::RpbGetReq {
        bucket: b"b".to_vec(),
        key: b"k".to_vec(),
        ..Default::default()
    };
    let index_req = riak_pb::RpbIndexReq {
        bucket: b"b".to_vec(),
        index: b"f_bin".to_vec(),
        qtype: riak_pb::INDEX_RANGE,
        range_min: Some(b"a".to_vec()),
        range_max: Some(b"z".to_vec()),
        max_results: Some(10),
        ..Default::default()
    };
    for (name, frame) in [
        ("put", riak_pb::frame_msg(code::PUT_REQ, &put_req)),
        ("get", riak_pb::frame_msg(code::GET_REQ, &get_req)),
        ("index", riak_pb::frame_msg(code::INDEX_REQ, &index_req)),
        ("ping", riak_pb::frame(code::PING_REQ, &[])),
    ] {
        let mut s = vec![0u8];
        s.extend_from_slice(&frame);
        put("pb_frame", name, &s);
    }

    // Vclock and objects (v2 as encoded, v1 as the version byte says).
    put("vclock", "two_actors", &vc.encode());
    put("vclock", "empty", &VClock::new().encode());
    let o = RiakObject {
        vclock: vc.clone(),
        contents: vec![Content {
            value: b"hello".to_vec(),
            value_len: 5,
            content_type: Some(b"text/plain".to_vec()),
            usermeta: vec![(b"m".to_vec(), b"v".to_vec())],
            indexes: vec![(b"f_bin".to_vec(), b"x".to_vec())],
            links: vec![(b"b".to_vec(), b"k2".to_vec(), b"t".to_vec())],
            ..Content::default()
        }],
    };
    let meta = o.encode_metadata();
    put("object", "v2", &join2(&meta, &o.encode_value()));
    let mut v1 = meta.clone();
    v1[0] = 1;
    put("object", "v1", &join2(&v1, &o.encode_value()));

    // Cluster messages: a real frame body (id + postcard).
    let msg = basalt_server::cluster::Msg::Service {
        service: "repl_keys".into(),
        body: vec![1, 2, 3],
    };
    let f = basalt_server::cluster::transport::encode(252, 7, &msg).expect("encode");
    put("cluster_msg", "repl_keys", &f[5..]);
    let reply = basalt_server::cluster::Reply::Text("ok".into());
    let f = basalt_server::cluster::transport::encode(253, 8, &reply).expect("encode");
    put("cluster_msg", "reply_text", &f[5..]);

    put(
        "vnode_status",
        "clean",
        basalt_server::fuzz_api::vnode_status_text(0xabc, true).as_bytes(),
    );
    put(
        "vnode_status",
        "open",
        basalt_server::fuzz_api::vnode_status_text(7, false).as_bytes(),
    );

    // Tictac export (mode byte 0: the CRC is already there).
    let mut t = TicTacTree::new(TreeSize::XXSmall);
    t.add(b"b", b"k", 42);
    let mut s = vec![0u8];
    s.extend_from_slice(&t.export());
    put("tictac", "xxsmall", &s);

    // Continuations.
    let c = basalt_engine::fuzz_api::index_encode_continuation(3, b"term", b"key");
    let mut s = vec![3u8];
    s.extend_from_slice(c.as_bytes());
    put("engine_index", "continuation", &s);
    put(
        "server_continuation",
        "kv",
        basalt_server::fuzz_api::kv_encode_continuation(b"t", b"k").as_bytes(),
    );
    put(
        "server_continuation",
        "cs",
        &basalt_server::fuzz_api::cs_encode_continuation(b"key"),
    );

    // HTTP.
    put(
        "http_headers",
        "store",
        format!(
            "content-type: text/plain; charset=utf-8\nlink: </buckets/b/keys/k>; riaktag=\"t\", </buckets/b>; rel=\"up\"\nx-riak-meta-a: b\nx-riak-index-f_int: 1, 2\nx-riak-vclock: {}\n\nbody",
            base64_std(&vc.encode())
        )
        .as_bytes(),
    );
    put(
        "http_query",
        "object",
        b"r=quorum&w=2&returnbody=true&vtag=x",
    );
    put(
        "http_query",
        "index",
        b"f=age_int&s=1&e=10&max_results=5&return_terms=true&continuation=abc%3D",
    );

    // MapReduce jobs as riakc sends them: term_to_binary([{inputs, I},
    // {query, Q}, {timeout, T}]), every input and phase shape.
    {
        use eetf::{Atom, Binary, FixInteger, List, Term, Tuple};
        let a = |n: &str| Term::from(Atom::from(n));
        let b = |s: &str| Term::from(Binary::from(s.as_bytes()));
        let t = |v: Vec<Term>| Term::from(Tuple::from(v));
        let l = |v: Vec<Term>| Term::from(List::from(v));
        let i = |n: i32| Term::from(FixInteger::from(n));
        let modfun = |f: &str| t(vec![a("modfun"), a("riak_kv_mapreduce"), a(f)]);
        let job = |inputs: Term, query: Vec<Term>| {
            let mut v = Vec::new();
            l(vec![
                t(vec![a("inputs"), inputs]),
                t(vec![a("query"), l(query)]),
                t(vec![a("timeout"), i(60000)]),
            ])
            .encode(&mut v)
            .expect("encode job");
            v
        };
        put(
            "mapred_etf",
            "keys",
            &job(
                l(vec![
                    t(vec![b("b"), b("k")]),
                    t(vec![t(vec![b("b"), b("k2")]), t(vec![a("kd"), i(1)])]),
                    t(vec![
                        t(vec![t(vec![b("ty"), b("b")]), b("k3")]),
                        a("undefined"),
                    ]),
                ]),
                vec![
                    t(vec![
                        a("map"),
                        modfun("map_object_value"),
                        b("filter_notfound"),
                        a("false"),
                    ]),
                    t(vec![a("link"), a("_"), b("tag"), a("false")]),
                    t(vec![
                        a("map"),
                        t(vec![a("jsanon"), b("function(v) { return [1]; }")]),
                        a("none"),
                        a("false"),
                    ]),
                    t(vec![
                        a("reduce"),
                        modfun("reduce_sum"),
                        l(vec![t(vec![a("reduce_phase_batch_size"), i(10)])]),
                        a("true"),
                    ]),
                ],
            ),
        );
        let sort = || {
            vec![t(vec![
                a("reduce"),
                t(vec![a("jsfun"), b("Riak.reduceSort")]),
                a("none"),
                a("true"),
            ])]
        };
        put(
            "mapred_etf",
            "key_filters",
            &job(
                t(vec![b("bk"), l(vec![l(vec![b("starts_with"), b("a")])])]),
                sort(),
            ),
        );
        put(
            "mapred_etf",
            "index",
            &job(t(vec![a("index"), b("bk"), b("n_int"), i(1), i(9)]), sort()),
        );
    }

    // A tiny store: journal records, manifests, SST pieces.
    let dir = std::env::temp_dir().join(format!("basalt-fuzz-seeds-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    {
        let store = Store::open(Config::new(&dir)).expect("open store");
        for i in 0..20u32 {
            let k = format!("key{i:03}");
            store
                .put(b"bucket", k.as_bytes(), b"value", b"meta")
                .expect("put");
        }
        store.close().expect("close");
    }
    let mut all = Vec::new();
    files(&dir, &mut all);
    for p in all {
        let bytes = std::fs::read(&p).expect("read store file");
        let name = p
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("file")
            .to_string();
        if bytes.starts_with(b"BSLTJMF1") {
            let mut s = vec![0u8];
            s.extend_from_slice(&bytes);
            put("journal_manifest", &name, &s);
        } else if bytes.starts_with(b"BSLTLMF1") {
            let mut s = vec![0u8];
            s.extend_from_slice(&bytes);
            put("ledger_manifest", &name, &s);
        } else if bytes.starts_with(b"BSLTJNL1") && bytes.len() > 16 + RECORD_HEADER_LEN {
            // The first record after the 16-byte file header.
            let mut s = vec![0u8];
            s.extend_from_slice(&bytes[16..bytes.len().min(16 + 256)]);
            put("journal_record", "first", &s);
        } else if bytes.len() >= FOOTER_BYTES
            && bytes[bytes.len() - FOOTER_BYTES..].starts_with(b"BSLTSST1")
        {
            sst_seeds(&bytes);
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
    // A ledger value.
    let v = basalt_engine::entry::LedgerValue {
        sqn: 1,
        status: basalt_engine::entry::Status::Active,
        expires_at: 0,
        value_hash: 9,
        size: 5,
        last_modified_us: 1,
        metadata: b"meta".to_vec(),
    };
    let mut s = Vec::new();
    v.encode_into(&mut s);
    put("ledger_entry", "active", &s);
}

fn base64_std(b: &[u8]) -> String {
    use base64::Engine as _;
    base64::engine::general_purpose::STANDARD.encode(b)
}

/// The footer, the index + meta sections and the first data block of a real
/// SST file, in the `sst` target's input format.
fn sst_seeds(file: &[u8]) {
    let len = file.len() as u64;
    let footer = &file[file.len() - FOOTER_BYTES..];
    let mut s = vec![0u8];
    s.extend_from_slice(&len.to_le_bytes());
    s.extend_from_slice(footer);
    put("sst", "footer", &s);
    let sec = |at: usize| {
        let off = u64::from_le_bytes(footer[at..at + 8].try_into().expect("8")) as usize;
        let l = u32::from_le_bytes(footer[at + 8..at + 12].try_into().expect("4")) as usize;
        (off, l)
    };
    // Footer layout: magic(8) version(4) index(12) bloom(12) meta(12).
    let (io, il) = sec(12);
    let (mo, ml) = sec(36);
    if io + il <= file.len() && mo + ml <= file.len() {
        let mut s = vec![1u8];
        s.extend_from_slice(&join2(
            &{
                let mut x = vec![0u8];
                x.extend_from_slice(&file[io..io + il]);
                x
            },
            &{
                let mut x = vec![0u8];
                x.extend_from_slice(&file[mo..mo + ml]);
                x
            },
        ));
        put("sst", "index_meta", &s);
        // The first block: index entry 0 is bytes32 key, offset u64, len u32.
        let klen = u32::from_le_bytes(file[io..io + 4].try_into().expect("4")) as usize;
        let at = io + 4 + klen + 8;
        if let Some(b) = file.get(at..at + 4) {
            let bl = u32::from_le_bytes(b.try_into().expect("4")) as usize;
            let mut s = vec![3u8, 0u8];
            s.extend_from_slice(&file[..bl.min(io)]);
            put("sst", "block0", &s);
        }
    }
}
