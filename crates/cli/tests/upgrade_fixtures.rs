//! Upgrades in CI's short form: data directories written by a past
//! release, opened by this build (`basalt start`, a real process).
//!
//! `fixtures/upgrade/v0.1.0/` is a one-node data directory the v0.1.0
//! release wrote (`scripts/upgrade-fixtures.sh` regenerates it from that
//! commit; `SOURCE` says how): 40 objects in bucket `fx` with a content
//! type, user metadata and two 2i terms each, 4 of them deleted again, 6
//! counters, 6 sets and 3 maps; `expected.json` lists them. This build must
//! start on a copy of it and read every object, 2i term and data type
//! back, take new writes, and stop and start again with both.
//!
//! A data directory from a newer version is refused with a message naming
//! the file and both versions, and nothing in it changes (every file's
//! bytes compared before and after): a newer data-directory marker
//! (`FORMAT`), a newer `cluster.json` and a newer journal manifest in one
//! vnode.
//!
//! The full rolling upgrade under load (3 nodes, a replication sink, a
//! downgrade) is `scripts/rolling-upgrade.sh`; docs/operations.md
//! "Upgrading a cluster".

mod common;

use basalt_server::pb::{self, code};
use common::procs::{test_dir, Client, NodeProc};
use prost::Message;
use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/upgrade/v0.1.0")
}

fn expected() -> Value {
    let text = std::fs::read_to_string(fixture().join("expected.json")).expect("expected.json");
    serde_json::from_str(&text).expect("expected.json is JSON")
}

/// The fixture's node on a copy of its data directory under `root`.
fn fixture_node(root: &Path) -> NodeProc {
    let mut n = NodeProc::new(root, 1);
    n.name = "fx@127.0.0.1".into();
    common::copy_tree(&fixture().join("data"), &n.dir);
    let config = root.join("fx.toml");
    std::fs::write(&config, "aae_interval_secs = 0\n").expect("config");
    n.config = Some(config);
    n
}

fn get(c: &mut Client, bucket: &str, key: &str) -> pb::RpbGetResp {
    let req = pb::RpbGetReq {
        bucket: bucket.into(),
        key: key.into(),
        ..Default::default()
    };
    let (_, body) = c.call(code::GET_REQ, &req).expect("get");
    pb::RpbGetResp::decode(body.as_slice()).expect("get reply")
}

fn index(c: &mut Client, index: &str, min: &str, max: Option<&str>) -> BTreeSet<String> {
    let req = pb::RpbIndexReq {
        bucket: b"fx".to_vec(),
        index: index.into(),
        qtype: i32::from(max.is_some()),
        key: max.is_none().then(|| min.into()),
        range_min: max.map(|_| min.into()),
        range_max: max.map(Into::into),
        ..Default::default()
    };
    let (_, body) = c.call(code::INDEX_REQ, &req).expect("2i query");
    let r = pb::RpbIndexResp::decode(body.as_slice()).expect("2i reply");
    r.keys
        .into_iter()
        .map(|k| String::from_utf8_lossy(&k).into_owned())
        .collect()
}

fn dt(c: &mut Client, ty: &str, bucket: &str, key: &str) -> pb::DtValue {
    let req = pb::DtFetchReq {
        bucket: bucket.into(),
        key: key.into(),
        r#type: ty.into(),
        ..Default::default()
    };
    let (_, body) = c.call(code::DT_FETCH_REQ, &req).expect("dt fetch");
    pb::DtFetchResp::decode(body.as_slice())
        .expect("dt reply")
        .value
        .unwrap_or_else(|| panic!("{ty}/{bucket}/{key}: no value"))
}

/// Reads every object, 2i term and data type of `expected.json` back.
fn check_fixture_data(c: &mut Client, exp: &Value) {
    let objects = exp["objects"].as_object().expect("objects");
    let mut by_colour: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut live = BTreeSet::new();
    for (key, o) in objects {
        let r = get(c, "fx", key);
        if o["deleted"].as_bool() == Some(true) {
            assert!(r.content.is_empty(), "{key} was deleted: {r:?}");
            continue;
        }
        assert_eq!(r.content.len(), 1, "{key}: one value");
        let v = &r.content[0];
        assert_eq!(
            v.value,
            o["value"].as_str().unwrap_or("").as_bytes(),
            "{key}"
        );
        assert_eq!(v.content_type.as_deref(), Some(&b"text/plain"[..]), "{key}");
        assert!(
            v.usermeta
                .iter()
                .any(|p| p.key == b"origin" && p.value.as_deref() == Some(b"fixture")),
            "{key}: {:?}",
            v.usermeta
        );
        let colour = o["colour"].as_str().unwrap_or("").to_string();
        let num = o["num"].as_u64().unwrap_or(0).to_string();
        let has = |k: &str, val: &str| {
            v.indexes
                .iter()
                .any(|p| p.key == k.as_bytes() && p.value.as_deref() == Some(val.as_bytes()))
        };
        assert!(
            has("colour_bin", &colour) && has("num_int", &num),
            "{key}: {:?}",
            v.indexes
        );
        by_colour.entry(colour).or_default().insert(key.clone());
        live.insert(key.clone());
    }
    assert_eq!(live.len(), 36, "36 live objects in the fixture");
    for (colour, keys) in &by_colour {
        assert_eq!(
            &index(c, "colour_bin", colour, None),
            keys,
            "colour_bin = {colour}"
        );
    }
    assert_eq!(index(c, "num_int", "0", Some("39")), live, "num_int 0..39");
    for (key, want) in exp["counters"].as_object().expect("counters") {
        let got = dt(c, "counters", "fxc", key).counter_value;
        assert_eq!(got, want.as_i64(), "counter {key}");
    }
    for (key, want) in exp["sets"].as_object().expect("sets") {
        let got: BTreeSet<Vec<u8>> = dt(c, "sets", "fxs", key).set_value.into_iter().collect();
        let want: BTreeSet<Vec<u8>> = want
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .map(|s| s.as_bytes().to_vec())
            .collect();
        assert_eq!(got, want, "set {key}");
    }
    for (key, want) in exp["maps"].as_object().expect("maps") {
        let entries = dt(c, "maps", "fxm", key).map_value;
        let field = |name: &str| {
            entries
                .iter()
                .find(|e| e.field.name == name.as_bytes())
                .unwrap_or_else(|| panic!("map {key}: no field {name}: {entries:?}"))
        };
        assert_eq!(
            field("name").register_value.as_deref(),
            want["name"].as_str().map(str::as_bytes),
            "map {key}"
        );
        assert_eq!(
            field("visits").counter_value,
            want["visits"].as_i64(),
            "map {key}"
        );
    }
}

#[test]
fn a_v0_1_0_data_dir_reads_back_with_this_build() {
    let (root, _guard) = test_dir();
    let exp = expected();
    let mut n = fixture_node(&root);
    n.start_with_ring(8);
    let mut c = Client::connect(&n.pb);
    check_fixture_data(&mut c, &exp);

    // New writes beside the old ones, then a restart with both.
    c.put_in("fx", "new", "written by this build").expect("put");
    let inc = pb::DtUpdateReq {
        bucket: b"fxc".to_vec(),
        key: Some(b"c0".to_vec()),
        r#type: b"counters".to_vec(),
        op: pb::DtOp {
            counter_op: Some(pb::CounterOp { increment: Some(5) }),
            ..Default::default()
        },
        ..Default::default()
    };
    c.call(code::DT_UPDATE_REQ, &inc).expect("increment");
    drop(c);
    assert!(n.terminate(), "a clean stop");
    let marker = std::fs::read_to_string(n.dir.join("FORMAT")).expect("FORMAT written");
    assert_eq!(marker, "basalt-data 2\n");
    n.start_with_ring(8);
    let mut c = Client::connect(&n.pb);
    let v = get(&mut c, "fx", "new");
    assert_eq!(v.content[0].value, b"written by this build");
    let mut exp = exp;
    exp["counters"]["c0"] = (exp["counters"]["c0"].as_i64().unwrap_or(0) + 5).into();
    check_fixture_data(&mut c, &exp);
    assert!(n.terminate(), "a clean stop");
}

/// Every file under `dir` with its bytes.
fn snapshot(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).expect("read_dir") {
            let p = e.expect("entry").path();
            if p.is_dir() {
                todo.push(p);
            } else {
                out.insert(p.clone(), std::fs::read(&p).expect("read"));
            }
        }
    }
    out
}

/// Runs `basalt start` on the node's directory and expects it to refuse
/// (exit non-zero within 60 s); its stderr.
fn start_refused(n: &NodeProc) -> String {
    let err = n.dir.with_extension("err");
    let mut child = Command::new(common::bin())
        .args([
            "start",
            "--ring-size",
            "8",
            "--backend",
            "leveled",
            "--http-listen",
            "",
        ])
        .args([
            "--node-name",
            &n.name,
            "--pb-listen",
            &n.pb,
            "--cluster-listen",
            &n.cluster,
        ])
        .arg("--data-dir")
        .arg(&n.dir)
        .env_remove("RUST_LOG")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&err).expect("stderr file"))
        .spawn()
        .expect("spawn basalt start");
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(s) = child.try_wait().expect("wait") {
            break s;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("basalt start served a data directory it should refuse");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&err).unwrap_or_default();
    assert!(!status.success(), "refused with a failing exit: {text}");
    text
}

fn assert_refused_untouched(n: &NodeProc, parts: &[&str]) {
    let before = snapshot(&n.dir);
    let msg = start_refused(n);
    for p in parts {
        assert!(msg.contains(p), "{msg:?} lacks {p:?}");
    }
    let after = snapshot(&n.dir);
    let changed: Vec<&PathBuf> = before
        .keys()
        .chain(after.keys())
        .filter(|p| before.get(*p) != after.get(*p))
        .collect();
    assert!(
        changed.is_empty(),
        "changed by the refused start: {changed:?}"
    );
}

#[test]
fn a_data_dir_from_a_newer_version_is_refused_untouched() {
    let (root, _guard) = test_dir();
    let n = fixture_node(&root);

    // The data-directory marker a newer release writes.
    let marker = n.dir.join("FORMAT");
    std::fs::write(&marker, "basalt-data 3\n").expect("write FORMAT");
    assert_refused_untouched(
        &n,
        &[
            &marker.display().to_string(),
            "data directory format 3",
            "this build reads format 2",
            "newer Basalt",
            "nothing in the directory was changed",
        ],
    );
    std::fs::remove_file(&marker).expect("remove FORMAT");

    // A newer cluster state file.
    let cluster = n.dir.join("cluster.json");
    let old = std::fs::read(&cluster).expect("cluster.json");
    let mut v: Value = serde_json::from_slice(&old).expect("cluster.json is JSON");
    assert_eq!(v["format"], 1, "v0.1.0 wrote format 1");
    v["format"] = 2.into();
    std::fs::write(&cluster, v.to_string()).expect("write cluster.json");
    assert_refused_untouched(
        &n,
        &[
            &cluster.display().to_string(),
            "format version 2",
            "this build reads format 1",
        ],
    );
    std::fs::write(&cluster, &old).expect("restore cluster.json");

    // A newer journal manifest in one vnode (its checksum made good, as a
    // newer build writes it): the vnodes opened before it close as a clean
    // stop leaves them, so nothing changes either.
    let manifest = n.dir.join("vnodes/5/journal/MANIFEST");
    let mut bytes = std::fs::read(&manifest).expect("MANIFEST");
    bytes[8..12].copy_from_slice(&2u32.to_le_bytes());
    let body = bytes.len() - 4;
    let sum = crc32c::crc32c(&bytes[..body]);
    bytes[body..].copy_from_slice(&sum.to_le_bytes());
    std::fs::write(&manifest, &bytes).expect("write MANIFEST");
    assert_refused_untouched(
        &n,
        &[
            &manifest.display().to_string(),
            "format version 2",
            "newer Basalt",
        ],
    );
}

/// The long form (`BASALT_LONG_TESTS=1`): `scripts/rolling-upgrade.sh`
/// with 30 s phases — release builds of v0.1.0 (cached by commit) and of
/// this tree, a 3-node cluster and a sink upgraded under load, one node
/// downgraded; it must exit 0 (no failed request, nothing lost). Without
/// the variable it says so and does nothing.
#[test]
fn rolling_upgrade_under_load_long() {
    if !common::long() {
        eprintln!("rolling upgrade: set BASALT_LONG_TESTS=1 to run scripts/rolling-upgrade.sh");
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let status = Command::new("bash")
        .arg(root.join("scripts/rolling-upgrade.sh"))
        .current_dir(&root)
        .env("PHASE_SECS", "30")
        .status()
        .expect("run scripts/rolling-upgrade.sh");
    assert!(
        status.success(),
        "rolling upgrade failed: {status} (its report names the run directory)"
    );
}
