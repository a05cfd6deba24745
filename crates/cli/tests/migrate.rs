//! `basalt migrate` with real processes: the source is a Basalt node
//! (it speaks Riak's PB API, the same messages the tool sends to Riak),
//! the target another. The source holds an untyped bucket with user
//! metadata and 2i terms, a typed bucket with siblings and a tombstone,
//! and a map in a data-type bucket. The copy is paced so that it is
//! under way when the source is killed (`kill -9`) and started again: the
//! run pauses, retries with back-off and finishes. Then the tool itself is
//! killed mid-copy and run again on a fresh target: it resumes from its
//! checkpoint; a whole copy again over it adds nothing. Every key is then compared (clock, siblings, metadata, 2i;
//! the map's value) with no extra sibling; finally writes on the source
//! after the copy (a new key, an update, a delete, a map update) reach
//! the target through one sync pass, and a second pass changes nothing.

mod common;
use common::procs::{test_dir, Client, NodeProc};
use common::{admin, wait_for};
use riak_pb::code;
use std::process::{Command, Stdio};
use std::time::Duration;

const PLAIN: usize = 40;

fn node(root: &std::path::Path, i: usize) -> NodeProc {
    let mut n = NodeProc::new(root, i);
    let config = root.join(format!("n{i}.toml"));
    std::fs::write(&config, "delete_mode = \"keep\"\n").expect("config");
    n.config = Some(config);
    n.start_fresh(8);
    for (name, props) in [
        ("typed", "{\"props\":{\"allow_mult\":true}}"),
        ("maps", "{\"props\":{\"datatype\":\"map\"}}"),
    ] {
        let (ok, out) = admin(&n.cluster, &["bucket-type", "create", name, props]);
        assert!(ok, "create {name}: {out}");
        let (ok, out) = admin(&n.cluster, &["bucket-type", "activate", name]);
        assert!(ok, "activate {name}: {out}");
    }
    n
}

fn put(c: &mut Client, t: Option<&str>, b: &str, k: &str, v: &str, vclock: Option<Vec<u8>>) {
    let req = riak_pb::RpbPutReq {
        bucket: b.into(),
        key: Some(k.into()),
        r#type: t.map(Into::into),
        vclock,
        content: riak_pb::RpbContent {
            value: v.into(),
            content_type: Some(b"text/plain".to_vec()),
            usermeta: vec![riak_pb::RpbPair {
                key: b"who".to_vec(),
                value: Some(k.into()),
            }],
            indexes: vec![riak_pb::RpbPair {
                key: b"n_int".to_vec(),
                value: Some(v.len().to_string().into_bytes()),
            }],
            ..Default::default()
        },
        w: Some(3),
        ..Default::default()
    };
    c.call(code::PUT_REQ, &req).expect("put");
}

fn get(c: &mut Client, t: Option<&str>, b: &str, k: &str) -> riak_pb::RpbGetResp {
    let req = riak_pb::RpbGetReq {
        bucket: b.into(),
        key: k.into(),
        r#type: t.map(Into::into),
        deletedvclock: Some(true),
        ..Default::default()
    };
    let (_, body) = c.call(code::GET_REQ, &req).expect("get");
    riak_pb::decode(&body).expect("decode")
}

fn map_update(c: &mut Client, k: &str, reg: &str) {
    let field = |name: &str, t| riak_pb::MapField {
        name: name.into(),
        r#type: t as i32,
    };
    let req = riak_pb::DtUpdateReq {
        bucket: b"m".to_vec(),
        key: Some(k.into()),
        r#type: b"maps".to_vec(),
        op: riak_pb::DtOp {
            map_op: Some(riak_pb::MapOp {
                removes: vec![],
                updates: vec![
                    riak_pb::MapUpdate {
                        field: field("r", riak_pb::map_field::MapFieldType::Register),
                        register_op: Some(reg.into()),
                        ..Default::default()
                    },
                    riak_pb::MapUpdate {
                        field: field("n", riak_pb::map_field::MapFieldType::Counter),
                        counter_op: Some(riak_pb::CounterOp { increment: Some(3) }),
                        ..Default::default()
                    },
                ],
            }),
            ..Default::default()
        },
        ..Default::default()
    };
    c.call(code::DT_UPDATE_REQ, &req).expect("map update");
}

fn map_value(c: &mut Client, k: &str) -> Option<riak_pb::DtValue> {
    let req = riak_pb::DtFetchReq {
        bucket: b"m".to_vec(),
        key: k.into(),
        r#type: b"maps".to_vec(),
        include_context: Some(false),
        ..Default::default()
    };
    let (_, body) = c.call(code::DT_FETCH_REQ, &req).expect("dt fetch");
    let mut v = riak_pb::decode::<riak_pb::DtFetchResp>(&body)
        .expect("decode")
        .value?;
    v.map_value.sort_by(|a, b| a.field.name.cmp(&b.field.name));
    Some(v)
}

/// What must match between source and target for one key: the clock,
/// and the siblings (value, metadata, 2i, tombstone flag), sorted.
fn shape(r: &riak_pb::RpbGetResp) -> (Option<Vec<u8>>, Vec<String>) {
    let mut sibs: Vec<String> = r
        .content
        .iter()
        .map(|c| {
            format!(
                "{:?}|{:?}|{:?}|{:?}|{:?}|{:?}|{:?}",
                c.value, c.content_type, c.vtag, c.last_mod, c.usermeta, c.indexes, c.deleted
            )
        })
        .collect();
    sibs.sort();
    (r.vclock.clone(), sibs)
}

/// Every key of the source, as (type, bucket, key).
fn keys() -> Vec<(Option<&'static str>, &'static str, String)> {
    let mut k: Vec<_> = (0..PLAIN)
        .map(|i| (None, "plain", format!("k{i:03}")))
        .collect();
    k.push((Some("typed"), "t", "sib".into()));
    k.push((Some("typed"), "t", "gone".into()));
    k.push((Some("typed"), "t", "late".into()));
    k
}

fn assert_same(src: &mut Client, dst: &mut Client) {
    for (t, b, k) in keys() {
        let (s, d) = (get(src, t, b, &k), get(dst, t, b, &k));
        assert_eq!(shape(&s), shape(&d), "{t:?}/{b}/{k}");
    }
    assert_eq!(map_value(src, "mk"), map_value(dst, "mk"), "the map");
}

fn migrate(src: &NodeProc, dst: &NodeProc, ckpt: &std::path::Path, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_basalt"));
    c.args([
        "migrate",
        "--from",
        &src.pb,
        "--to",
        &dst.cluster,
        "--types",
        "typed,maps",
    ])
    .arg("--checkpoint")
    .arg(ckpt)
    .args(["--retry-first-ms", "100", "--json"])
    .args(extra)
    .stdout(Stdio::piped())
    .stderr(Stdio::piped());
    c
}

fn summary(out: std::process::Output) -> serde_json::Value {
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "migrate failed: {stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(stdout.trim()).expect("json summary")
}

#[test]
fn migrate_copies_resumes_and_syncs() {
    let (root, _tmp) = test_dir();
    let mut src = node(&root, 1);
    let dst = node(&root, 2);
    let mut s = Client::connect(&src.pb);
    for i in 0..PLAIN {
        put(
            &mut s,
            None,
            "plain",
            &format!("k{i:03}"),
            &"v".repeat(i + 1),
            None,
        );
    }
    // Two writes without a clock: siblings.
    put(&mut s, Some("typed"), "t", "sib", "one", None);
    put(&mut s, Some("typed"), "t", "sib", "two", None);
    assert_eq!(get(&mut s, Some("typed"), "t", "sib").content.len(), 2);
    put(&mut s, Some("typed"), "t", "gone", "x", None);
    let vc = get(&mut s, Some("typed"), "t", "gone").vclock;
    let del = riak_pb::RpbDelReq {
        bucket: b"t".to_vec(),
        key: b"gone".to_vec(),
        r#type: Some(b"typed".to_vec()),
        vclock: vc,
        ..Default::default()
    };
    s.call(code::DEL_REQ, &del).expect("delete");
    map_update(&mut s, "mk", "first");
    drop(s);

    // 1. The source goes away mid-copy: the run pauses and finishes.
    let ckpt = root.join("one.checkpoint");
    let child = migrate(&src, &dst, &ckpt, &["--rate", "15", "--parallel", "2"])
        .spawn()
        .expect("spawn migrate");
    wait_for("the copy to be under way", Duration::from_secs(30), || {
        checkpoint_objects(&ckpt) > 0
    });
    src.kill9();
    std::thread::sleep(Duration::from_secs(2));
    src.start_with_ring(8);
    let one = summary(child.wait_with_output().expect("migrate"));
    assert!(one["this_run"]["retries"].as_u64() > Some(0), "{one}");
    let c = &one["counts"];
    assert_eq!(c["objects"], PLAIN as u64 + 3, "{one}");
    assert_eq!(c["with_siblings"], 1, "{one}");
    assert_eq!(c["tombstones_kept"], 1, "{one}");
    assert_eq!(c["datatypes"], 1, "{one}");
    assert_eq!(c["errors"], 0, "{one}");
    let mut s = Client::connect(&src.pb);
    let mut d = Client::connect(&dst.pb);
    assert_same(&mut s, &mut d);

    // 2. The tool is killed mid-copy (to a second target) and run again:
    // it resumes from the checkpoint, and the result is the same.
    let dst2 = node(&root, 3);
    let ckpt2 = root.join("two.checkpoint");
    let mut child = migrate(&src, &dst2, &ckpt2, &["--rate", "20"])
        .spawn()
        .expect("spawn migrate");
    wait_for(
        "the second copy to be under way",
        Duration::from_secs(30),
        || checkpoint_objects(&ckpt2) > 0,
    );
    let _ = child.kill();
    let _ = child.wait();
    let before = checkpoint_objects(&ckpt2);
    assert!(
        before > 0 && before < PLAIN as u64,
        "killed mid-copy: {before}"
    );
    let two = summary(
        migrate(&src, &dst2, &ckpt2, &["--rate", "0"])
            .output()
            .expect("run"),
    );
    assert_eq!(two["counts"]["objects"], PLAIN as u64 + 3, "{two}");
    assert!(
        two["this_run"]["objects"].as_u64() < Some(PLAIN as u64 + 3),
        "resumed, not restarted: {two}"
    );
    let mut d2 = Client::connect(&dst2.pb);
    assert_same(&mut s, &mut d2);
    // The whole copy again over what it wrote (a fresh checkpoint): every
    // object merges into itself, no sibling is added.
    let again = summary(
        migrate(
            &src,
            &dst2,
            &root.join("three.checkpoint"),
            &["--rate", "0"],
        )
        .output()
        .expect("run"),
    );
    assert_eq!(again["counts"]["objects"], PLAIN as u64 + 3, "{again}");
    assert_same(&mut s, &mut d2);

    // 3. Writes after the copy reach the target through a sync pass.
    put(&mut s, Some("typed"), "t", "late", "new", None);
    let vc = get(&mut s, None, "plain", "k001").vclock;
    put(&mut s, None, "plain", "k001", "updated", vc);
    let vc = get(&mut s, None, "plain", "k002").vclock;
    let del = riak_pb::RpbDelReq {
        bucket: b"plain".to_vec(),
        key: b"k002".to_vec(),
        vclock: vc,
        ..Default::default()
    };
    s.call(code::DEL_REQ, &del).expect("delete");
    map_update(&mut s, "mk", "second");
    let sync = summary(
        migrate(
            &src,
            &dst,
            &ckpt,
            &[
                "--rate",
                "0",
                "--sync-passes",
                "2",
                "--sync-interval",
                "1",
                "--sync-overlap",
                "5",
            ],
        )
        .output()
        .expect("sync"),
    );
    assert_eq!(sync["counts"]["sync_passes"], 2, "{sync}");
    assert!(sync["counts"]["synced"].as_u64() >= Some(4), "{sync}");
    assert_same(&mut s, &mut d);
    let late = get(&mut d, Some("typed"), "t", "late");
    assert_eq!(late.content.len(), 1);
    assert_eq!(late.content[0].value, b"new");
    let upd = get(&mut d, None, "plain", "k001");
    assert_eq!(upd.content.len(), 1, "no false sibling: {upd:?}");
    assert_eq!(upd.content[0].value, b"updated");
    assert!(
        get(&mut d, None, "plain", "k002").content.is_empty(),
        "deleted"
    );
}

/// Objects the checkpoint at `path` counts (0 while there is none).
fn checkpoint_objects(path: &std::path::Path) -> u64 {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let Some((_, body)) = text.split_once('\n') else {
        return 0;
    };
    let v: serde_json::Value = serde_json::from_str(body).unwrap_or_default();
    v["counts"]["objects"].as_u64().unwrap_or(0)
}
