//! Cluster tests with real processes: `basalt start` nodes on 127.0.0.1,
//! joined with `basalt admin cluster ...`, loaded through PB, then faults:
//! a node SIGKILLed mid-load (then restarted: hinted handoff for what it
//! missed while dead, read repair for what it lost with its queue), a node joining
//! and another leaving under load, a SIGSTOPped (slow) node, anti-entropy
//! (a lost vnode and a damaged journal repaired, checked offline in the
//! vnode stores), and replication from one cluster to another (real-time and full-sync).
//!
//! The scenarios run one at a time (they share the machine's two cores).
//! Sizes are small for CI; `BASALT_LONG_TESTS=1` multiplies the load.

mod common;
use basalt_server::pb::{self, code};
use common::procs::{form_cluster, free_port, settle, start_nodes, test_dir, Client, NodeProc};
use common::{aae_round, admin, long, wait_for};
use prost::Message;
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// Writes keys `prefix0..` through `addrs` (round robin), w=2, and reads
/// back each key written so far at r=2, until `stop`; returns
/// (keys written, failed requests with their errors).
fn load(
    addrs: Vec<String>,
    prefix: &'static str,
    stop: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        let mut clients: Vec<Client> = addrs.iter().map(|a| Client::connect(a)).collect();
        let mut failures = Vec::new();
        let mut i = 0u64;
        while !stop.load(Ordering::Acquire) {
            let c = &mut clients[(i as usize) % addrs.len()];
            let key = format!("{prefix}{i}");
            match c.put(&key, &format!("v{i}")) {
                Ok(()) => {
                    written.store(i + 1, Ordering::Release);
                }
                Err(e) => failures.push(format!("put {key}: {e}")),
            }
            let probe = format!("{prefix}{}", i / 2);
            match c.get(&probe, 2, 0, true) {
                Ok(Some(v)) if v == format!("v{}", i / 2).into_bytes() => {}
                Ok(other) => failures.push(format!("get {probe}: {other:?}")),
                Err(e) => failures.push(format!("get {probe}: {e}")),
            }
            i += 1;
        }
        failures
    })
}

/// Stops a [`load`] and asserts it saw no failed request.
fn finish_load(stop: &AtomicBool, h: std::thread::JoinHandle<Vec<String>>) {
    stop.store(true, Ordering::Release);
    let failures = h.join().expect("load thread");
    assert!(
        failures.is_empty(),
        "{} failed requests: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
}

#[test]
fn kill_one_node_mid_load_then_hinted_handoff_repairs_it() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (root, _guard) = test_dir();
    let mut nodes = start_nodes(&root, 3);
    form_cluster(&nodes);
    let (ok, status) = admin(&nodes[0].cluster, &["member-status"]);
    assert!(ok && status.matches("valid").count() == 3, "{status}");

    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let target = if long() { 3000 } else { 300 };
    let h = load(
        vec![nodes[0].pb.clone(), nodes[1].pb.clone()],
        "k",
        stop.clone(),
        written.clone(),
    );
    wait_for("load before the kill", Duration::from_secs(60), || {
        written.load(Ordering::Acquire) >= target / 3
    });
    nodes[2].kill9();
    // Keys below `at_kill` were acknowledged before the kill returned, the
    // one at `at_kill` may have been under way: n3's replica of any of
    // them may have died with it (still in its queue, or the third write
    // a PUT at w=2 left behind), and no fallback ever saw those writes.
    // Every key after it was written while n3 was dead.
    let at_kill = written.load(Ordering::Acquire);
    wait_for("load after the kill", Duration::from_secs(120), || {
        written.load(Ordering::Acquire) >= target.max(at_kill + target / 3)
    });
    finish_load(&stop, h);
    let n = written.load(Ordering::Acquire);

    // Back up: hinted handoff must give it every key written while it was
    // dead. A GET at r=3, pr=3 with notfound_ok=false only succeeds when
    // all three primaries hold the key (a failed GET does no read repair).
    nodes[2].start();
    let mut c = Client::connect(&nodes[0].pb);
    let on_all_primaries = |c: &mut Client, k: &str| matches!(c.get(k, 3, 3, false), Ok(Some(_)));
    let missing_of = |c: &mut Client, keys: std::ops::Range<u64>| -> Vec<String> {
        keys.map(|i| format!("k{i}"))
            .filter(|k| !on_all_primaries(c, k))
            .collect()
    };
    let mut missing = Vec::new();
    wait_for("hinted handoff", Duration::from_secs(60), || {
        missing = missing_of(&mut c, at_kill + 1..n);
        if !missing.is_empty() {
            let e = c.get(&missing[0], 3, 3, false);
            eprintln!(
                "{} of the {} keys written while n3 was dead not yet on all primaries ({}: {e:?})",
                missing.len(),
                n - at_kill - 1,
                missing[0]
            );
        }
        missing.is_empty()
    });
    // The keys of before the kill: none lost (each read at r=2 from the
    // two live replicas), and the copies n3 lost put back by the read
    // repair that read does (as Riak relies on read repair and AAE for
    // them, not on handoff).
    let before = missing_of(&mut c, 0..at_kill + 1);
    eprintln!(
        "{} of the {} keys written before the kill not on n3 after it came back (read repair follows)",
        before.len(),
        at_kill + 1
    );
    for k in &before {
        let i: u64 = k[1..].parse().expect("key number");
        assert_eq!(
            c.get(k, 2, 0, false),
            Ok(Some(format!("v{i}").into_bytes())),
            "{k} lost"
        );
    }
    wait_for(
        "read repair of the keys of before the kill",
        Duration::from_secs(30),
        || before.iter().all(|k| on_all_primaries(&mut c, k)),
    );
    let (_, ring) = admin(&nodes[0].cluster, &["ring-status"]);
    assert!(ring.contains("pending ownership transfers: 0"), "{ring}");
}

#[test]
fn join_and_leave_under_load_lose_nothing() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (root, _guard) = test_dir();
    let mut nodes = start_nodes(&root, 4);
    form_cluster(&nodes[..3]);
    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let h = load(
        vec![nodes[0].pb.clone(), nodes[1].pb.clone()],
        "j",
        stop.clone(),
        written.clone(),
    );
    let step = if long() { 1000 } else { 100 };
    wait_for("load", Duration::from_secs(60), || {
        written.load(Ordering::Acquire) >= step
    });
    // n4 joins under load.
    let (ok, out) = admin(&nodes[3].cluster, &["cluster", "join", &nodes[0].cluster]);
    assert!(ok, "join: {out}");
    let (ok, out) = admin(&nodes[1].cluster, &["cluster", "commit"]);
    assert!(ok, "commit: {out}");
    settle(&nodes[0].cluster);
    wait_for("load", Duration::from_secs(60), || {
        written.load(Ordering::Acquire) >= 2 * step
    });
    // n3 leaves under load.
    let (ok, out) = admin(&nodes[0].cluster, &["cluster", "leave", &nodes[2].name]);
    assert!(ok, "leave: {out}");
    let (ok, out) = admin(&nodes[0].cluster, &["cluster", "commit"]);
    assert!(ok, "commit: {out}");
    settle(&nodes[0].cluster);
    wait_for("n3 to be removed", Duration::from_secs(60), || {
        !admin(&nodes[0].cluster, &["member-status"])
            .1
            .contains(&nodes[2].name)
    });
    wait_for("load", Duration::from_secs(60), || {
        written.load(Ordering::Acquire) >= 3 * step
    });
    finish_load(&stop, h);
    // Every key readable from the new node, n3 gone for good.
    nodes[2].kill9();
    let n = written.load(Ordering::Acquire);
    let mut c = Client::connect(&nodes[3].pb);
    for i in 0..n {
        let k = format!("j{i}");
        assert_eq!(
            c.get(&k, 2, 0, false),
            Ok(Some(format!("v{i}").into_bytes())),
            "{k}"
        );
    }
    let (_, status) = admin(&nodes[3].cluster, &["member-status"]);
    assert_eq!(status.matches("valid").count(), 3, "{status}");
}

#[test]
fn stopped_node_does_not_stall_gets() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (root, _guard) = test_dir();
    let nodes = start_nodes(&root, 3);
    form_cluster(&nodes);
    let mut c = Client::connect(&nodes[0].pb);
    let keys = 100;
    for i in 0..keys {
        c.put(&format!("s{i}"), &format!("v{i}")).expect("put");
    }
    nodes[2].signal("-STOP");
    let mut worst = Duration::ZERO;
    let until = Instant::now() + Duration::from_secs(if long() { 30 } else { 5 });
    let mut i = 0;
    while Instant::now() < until {
        let k = format!("s{}", i % keys);
        let t = Instant::now();
        let v = c.get(&k, 2, 0, true);
        worst = worst.max(t.elapsed());
        assert_eq!(v, Ok(Some(format!("v{}", i % keys).into_bytes())), "{k}");
        i += 1;
    }
    nodes[2].signal("-CONT");
    // The request timeout is 60 s: a GET waiting on the stopped node would
    // take that long; HEAD-first GETs need only the two live replicas.
    assert!(worst < Duration::from_secs(2), "slowest GET took {worst:?}");
    eprintln!("{i} GETs with one node stopped, slowest {worst:?}");
}

#[test]
fn bad_joins_and_foreign_data_dirs_are_refused_with_reasons() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (root, _guard) = test_dir();
    let mut nodes: Vec<NodeProc> = (1..=4).map(|i| NodeProc::new(&root, i)).collect();
    nodes[0].start();
    nodes[1].start_with_ring(32);
    nodes[2].start();
    nodes[3].start();
    // Another ring size.
    let (ok, out) = admin(&nodes[1].cluster, &["cluster", "join", &nodes[0].cluster]);
    assert!(!ok && out.contains("ring_size 32"), "{out}");
    // A join target that is a PB port, and admin sent to a PB port: both
    // name what answered; nothing changes.
    let (ok, out) = admin(&nodes[3].cluster, &["cluster", "join", &nodes[0].pb]);
    assert!(
        !ok && out.contains("not a Basalt cluster listener") && out.contains("Riak PB port"),
        "{out}"
    );
    let (ok, out) = admin(&nodes[0].pb, &["member-status"]);
    assert!(!ok && out.contains("is a Riak PB port"), "{out}");
    let (ok, out) = admin(&nodes[3].cluster, &["member-status"]);
    assert!(ok && out.matches("valid").count() == 1, "{out}");
    // n3 and n4 form a cluster; n3 may not then join n1's.
    form_cluster(&nodes[2..]);
    let (ok, out) = admin(&nodes[2].cluster, &["cluster", "join", &nodes[0].cluster]);
    assert!(
        !ok && out.contains("already a member of a cluster"),
        "{out}"
    );
    // Nothing to commit; an unknown command; a node that is not there.
    let (ok, out) = admin(&nodes[0].cluster, &["cluster", "commit"]);
    assert!(!ok && out.contains("no staged changes"), "{out}");
    let dead = format!("127.0.0.1:{}", free_port());
    let t = Instant::now();
    let (ok, out) = admin(&dead, &["member-status"]);
    assert!(!ok && out.contains("cannot reach node"), "{out}");
    assert!(t.elapsed() < Duration::from_secs(10), "{:?}", t.elapsed());
    // n1's data directory under another node name.
    nodes[0].kill9();
    let out = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args([
            "start",
            "--ring-size",
            "16",
            "--http-listen",
            "",
            "--node-name",
            "other@127.0.0.1",
        ])
        .args(["--pb-listen", &format!("127.0.0.1:{}", free_port())])
        .args(["--cluster-listen", &format!("127.0.0.1:{}", free_port())])
        .arg("--data-dir")
        .arg(&nodes[0].dir)
        .output()
        .expect("run basalt start");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success() && err.contains("belongs to node"),
        "{err}"
    );
}

#[test]
fn bucket_types_and_props_reach_every_node() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (root, _guard) = test_dir();
    let nodes = start_nodes(&root, 3);
    form_cluster(&nodes);
    // A bucket type created and activated on n1 ...
    let (ok, out) = admin(
        &nodes[0].cluster,
        &["bucket-type", "create", "maps", r#"{"props":{"n_val":3}}"#],
    );
    assert!(ok, "{out}");
    let (ok, out) = admin(&nodes[0].cluster, &["bucket-type", "activate", "maps"]);
    assert!(ok, "{out}");
    // ... and bucket props set on n2 ...
    let mut c2 = Client::connect(&nodes[1].pb);
    let set = pb::RpbSetBucketReq {
        bucket: b"pp".to_vec(),
        props: pb::RpbBucketProps {
            allow_mult: Some(true),
            ..Default::default()
        },
        ..Default::default()
    };
    c2.call(code::SET_BUCKET_REQ, &set)
        .expect("set bucket props");
    // ... reach n3 by gossip.
    let mut c3 = Client::connect(&nodes[2].pb);
    wait_for("props and type on n3", Duration::from_secs(20), || {
        let get = pb::RpbGetBucketReq {
            bucket: b"pp".to_vec(),
            ..Default::default()
        };
        let props = c3
            .call(code::GET_BUCKET_REQ, &get)
            .ok()
            .and_then(|(_, b)| pb::RpbGetBucketResp::decode(b.as_slice()).ok())
            .map(|r| r.props);
        let active = admin(&nodes[2].cluster, &["bucket-type", "status", "maps"])
            .1
            .contains("maps is active");
        active && props.is_some_and(|p| p.allow_mult == Some(true))
    });
    // n3 coordinates with them: two blind writes become siblings.
    c3.put_in("pp", "k", "a").expect("put");
    c3.put_in("pp", "k", "b").expect("put");
    let get = pb::RpbGetReq {
        bucket: b"pp".to_vec(),
        key: b"k".to_vec(),
        ..Default::default()
    };
    let (_, body) = c3.call(code::GET_REQ, &get).expect("get");
    let resp = pb::RpbGetResp::decode(body.as_slice()).expect("decode");
    assert_eq!(resp.content.len(), 2, "{resp:?}");
    // Graceful shutdown of a clustered node while its peers still gossip
    // to it, then of the others.
    drop((c2, c3));
    let mut nodes = nodes;
    for n in &mut nodes {
        assert!(n.terminate(), "{} did not exit 0 after SIGTERM", n.name);
    }
}

#[test]
fn anti_entropy_repairs_a_replica_that_lost_its_data() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (root, _guard) = test_dir();
    let config = root.join("aae.toml");
    std::fs::write(&config, "aae_interval_secs = 2\n").expect("config");
    let mut nodes: Vec<NodeProc> = (1..=3).map(|i| NodeProc::new(&root, i)).collect();
    for n in &mut nodes {
        n.config = Some(config.clone());
        n.start();
    }
    form_cluster(&nodes);
    let keys = if long() { 2000 } else { 200 };
    let mut c = Client::connect(&nodes[0].pb);
    for i in 0..keys {
        c.put(&format!("a{i}"), &format!("v{i}")).expect("put");
    }
    let on_all = |c: &mut Client, i: u64| {
        c.get(&format!("a{i}"), 3, 3, false)
            .is_ok_and(|v| v.is_some())
    };
    wait_for("every replica written", Duration::from_secs(30), || {
        (0..keys).all(|i| on_all(&mut c, i))
    });
    // n3 loses every vnode; no writes happen meanwhile, so no fallback
    // holds anything to hand back: only anti-entropy can repair it.
    nodes[2].kill9();
    std::fs::remove_dir_all(nodes[2].dir.join("vnodes")).expect("remove vnodes");
    nodes[2].start();
    let missing = (0..keys).filter(|&i| !on_all(&mut c, i)).count();
    assert!(
        missing > 0,
        "n3 lost its data, yet every key is on 3 replicas"
    );
    wait_for("anti-entropy repair", Duration::from_secs(60), || {
        (0..keys).all(|i| on_all(&mut c, i))
    });
    let logs: String = (1..=3)
        .map(|i| std::fs::read_to_string(root.join(format!("n{i}.log"))).unwrap_or_default())
        .collect();
    assert!(
        logs.contains("anti-entropy repaired keys"),
        "no anti-entropy repair logged"
    );
    // The repaired node's cached trees match its data, and the exchanges
    // ran from trees (built once per vnode), as `basalt admin aae` shows.
    let (ok, verify) = admin(&nodes[2].cluster, &["aae", "verify"]);
    assert!(ok && verify.contains("match a fresh fold"), "{verify}");
    let (ok, status) = admin(&nodes[0].cluster, &["aae", "status"]);
    assert!(
        ok && status.contains("vnodes with trees built: "),
        "{status}"
    );
    assert!(!status.contains("exchanges: 0\n"), "{status}");
    eprintln!("{missing} of {keys} keys lacked a replica; anti-entropy repaired them");
}

/// Owner node name of each partition, from a stopped node's `cluster.json`.
fn owners(dir: &std::path::Path) -> Vec<String> {
    let text = std::fs::read_to_string(dir.join("cluster.json")).expect("cluster.json");
    let v: serde_json::Value = serde_json::from_str(&text).expect("cluster.json parses");
    // The state inside the file's format envelope (docs/formats.md).
    v["state"]["owners"]
        .as_array()
        .expect("owners")
        .iter()
        .map(|o| o.as_str().expect("owner name").to_string())
        .collect()
}

/// The value of `b/key` in a stopped node's vnode store `dir` (opened as
/// the node opens it, so a damaged journal is replayed the same way);
/// `None` if absent.
fn stored_value(backend: &dyn basalt_backend::Backend, key: &str) -> Option<Vec<u8>> {
    let o = backend.get(b"b", key.as_bytes()).expect("vnode get")?;
    let obj = basalt_server::object::RiakObject::decode(&o.head.metadata, &o.value)
        .expect("stored object decodes");
    obj.contents.first().map(|c| c.value.clone())
}

fn open_vnode(dir: &std::path::Path) -> Box<dyn basalt_backend::Backend> {
    basalt_backends::open_backend("leveled", dir, &basalt_backends::BackendConfig::default())
        .expect("open vnode store")
}

/// Lines of a node's log containing `what`.
fn log_count(root: &std::path::Path, node: usize, what: &str) -> usize {
    std::fs::read_to_string(root.join(format!("n{node}.log")))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains(what))
        .count()
}

/// `basalt admin aae round` on every node until all three find no dirty
/// segment and skip no exchange (e.g. one whose list a scheduled exchange
/// was running) in the same sweep; the keys they repaired meanwhile.
fn aae_rounds_until_clean(nodes: &[NodeProc], timeout: Duration) -> u64 {
    let mut repaired = 0;
    let deadline = Instant::now() + timeout;
    loop {
        let mut unclean = 0;
        for n in nodes {
            let r = aae_round(&n.cluster);
            unclean += r.unclean;
            repaired += r.repaired;
        }
        if unclean == 0 {
            return repaired;
        }
        assert!(Instant::now() < deadline, "anti-entropy did not converge");
        std::thread::sleep(Duration::from_millis(300));
    }
}

/// Sum of a counter line (`name: N`) of `basalt admin aae status` over nodes.
fn aae_status_sum(nodes: &[&NodeProc], name: &str) -> u64 {
    nodes
        .iter()
        .map(|n| {
            let (_, s) = admin(&n.cluster, &["aae", "status"]);
            s.lines()
                .find_map(|l| l.strip_prefix(&format!("{name}: ")))
                .and_then(|v| v.trim().parse::<u64>().ok())
                .unwrap_or_else(|| panic!("no {name} in {s}"))
        })
        .sum()
}

/// One node of three is SIGKILLed, then damaged underneath: one of its
/// vnodes loses its whole directory, another gets bytes flipped in its
/// journal (the engine skips the damaged records when it replays the
/// journal at start, so those keys are gone). Anti-entropy alone repairs
/// it: scheduled exchanges start the repair, exchange rounds
/// (`basalt admin aae round`) run until no segment differs, then every
/// node is stopped and every replica of every key is read from the vnode
/// stores themselves, offline — no GET (whose read repair could fix a key
/// by accident) reaches the cluster after the damage. The healthy nodes
/// keep their trees (no rebuild logged), and the lists that lost a whole
/// vnode's keys need follow-up loops (more dirty segments than one pass
/// examines; ring 8, so ~375 keys per list). Fixed seed
/// (`BASALT_TEST_SEED`); `BASALT_LONG_TESTS=1` loads 20000 keys.
#[test]
fn anti_entropy_repairs_a_deleted_vnode_and_a_damaged_journal_from_trees() {
    use rand::{Rng, SeedableRng};
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let mut rng = rand::rngs::StdRng::seed_from_u64(common::seed(0xaae3));
    let (root, _guard) = test_dir();
    let config = root.join("aae.toml");
    std::fs::write(
        &config,
        "aae_interval_secs = 2\naae_confirm_ms = 200\naae_repairs_per_sec = 5000\n",
    )
    .expect("config");
    let mut nodes: Vec<NodeProc> = (1..=3).map(|i| NodeProc::new(&root, i)).collect();
    for n in &mut nodes {
        n.config = Some(config.clone());
        n.start_with_ring(8);
    }
    form_cluster(&nodes);
    let keys: u64 = if long() { 20_000 } else { 3000 };
    let loaders: Vec<_> = nodes
        .iter()
        .enumerate()
        .map(|(t, n)| {
            let addr = n.pb.clone();
            std::thread::spawn(move || {
                let mut c = Client::connect(&addr);
                for i in (t as u64..keys).step_by(3) {
                    c.put(&format!("a{i}"), &format!("v{i}")).expect("put");
                }
            })
        })
        .collect();
    for l in loaders {
        l.join().expect("loader");
    }
    // Every replica written and every tree built: rounds find nothing.
    aae_rounds_until_clean(&nodes, Duration::from_secs(60));
    let built = "anti-entropy trees rebuilt";
    let builds_before = [log_count(&root, 1, built), log_count(&root, 2, built)];
    assert!(
        builds_before.iter().all(|b| *b > 0),
        "the healthy nodes logged their tree builds: {builds_before:?}"
    );
    let owners = owners(&nodes[0].dir);
    let ring = basalt_server::ring::Ring::new(8).expect("ring");
    let preflist = |i: u64| -> Vec<u32> {
        let h = basalt_server::ring::key_hash(None, b"b", format!("a{i}").as_bytes());
        let f = ring.first_primary(&h);
        (0..3).map(|d| (f + d) % 8).collect()
    };
    let mine: Vec<u32> = (0..8u32)
        .filter(|&p| owners[p as usize] == nodes[2].name)
        .collect();
    assert!(mine.len() >= 2, "n3 owns {mine:?}");
    let (deleted, damaged) = (mine[0], mine[1]);
    let held_by = |p: u32| (0..keys).filter(|&i| preflist(i).contains(&p)).count();
    // n3 dies and is damaged underneath; nothing is written meanwhile, so
    // no fallback holds anything to hand back.
    nodes[2].kill9();
    let vnodes = nodes[2].dir.join("vnodes");
    std::fs::remove_dir_all(vnodes.join(deleted.to_string())).expect("remove vnode");
    let journal = vnodes.join(damaged.to_string()).join("journal");
    let files = common::files_with_ext(&journal, "jnl");
    assert!(
        !files.is_empty(),
        "no journal file in {}",
        journal.display()
    );
    for f in &files {
        let len = std::fs::metadata(f).expect("journal file").len();
        let spots: Vec<u64> = (0..4).map(|_| rng.gen_range(len / 10..len - 8)).collect();
        common::flip_bytes(f, &spots);
    }
    // What the damaged vnode holds now, read as the node will at start.
    let lost_in_journal = {
        let b = open_vnode(&vnodes.join(damaged.to_string()));
        let lost = (0..keys)
            .filter(|&i| preflist(i).contains(&damaged))
            .filter(|&i| stored_value(b.as_ref(), &format!("a{i}")).is_none())
            .count();
        b.close().expect("close");
        lost
    };
    assert!(
        lost_in_journal > 0,
        "the flipped journal bytes lost no key of vnode {damaged}"
    );
    eprintln!(
        "n3: vnode {deleted} deleted ({} keys), vnode {damaged} lost {lost_in_journal} of {} keys to journal damage",
        held_by(deleted),
        held_by(damaged)
    );
    nodes[2].start_with_ring(8);
    // Scheduled exchanges (one every interval / lists) start repairing...
    let everyone: Vec<&NodeProc> = nodes.iter().collect();
    wait_for(
        "scheduled exchanges to repair",
        Duration::from_secs(30),
        || aae_status_sum(&everyone, "repairs") > 0,
    );
    // ...and rounds finish the job.
    aae_rounds_until_clean(&nodes, Duration::from_secs(60));
    let repairs = aae_status_sum(&everyone, "repairs");
    let loops = aae_status_sum(&everyone, "follow-up loops");
    let range_repairs = aae_status_sum(&everyone, "range repairs");
    assert!(
        repairs >= (held_by(deleted) + lost_in_journal) as u64,
        "{repairs} repairs"
    );
    assert!(
        loops > 0 && range_repairs > 0,
        "{loops} loops, {range_repairs} range repairs"
    );
    // The healthy nodes kept their trees: no build since the damage.
    let builds_after = [log_count(&root, 1, built), log_count(&root, 2, built)];
    assert_eq!(builds_before, builds_after, "a healthy node rebuilt trees");
    for n in &nodes[..2] {
        let (_, s) = admin(&n.cluster, &["aae", "status"]);
        let line = s
            .lines()
            .find_map(|l| l.strip_prefix("vnodes with trees built: "))
            .unwrap_or_else(|| panic!("{s}"));
        let (built, of) = line.split_once(" of ").unwrap_or_else(|| panic!("{s}"));
        assert_eq!(built, of, "{} has every tree: {s}", n.name);
    }
    for n in &mut nodes {
        assert!(n.terminate(), "{} did not exit 0 after SIGTERM", n.name);
    }
    // Every replica of every key, read from the stores themselves.
    let mut stores: std::collections::BTreeMap<u32, Box<dyn basalt_backend::Backend>> =
        std::collections::BTreeMap::new();
    for p in 0..8u32 {
        let node = nodes
            .iter()
            .find(|n| n.name == owners[p as usize])
            .expect("owner");
        stores.insert(p, open_vnode(&node.dir.join("vnodes").join(p.to_string())));
    }
    let mut missing = Vec::new();
    for i in 0..keys {
        for p in preflist(i) {
            if stored_value(stores[&p].as_ref(), &format!("a{i}"))
                != Some(format!("v{i}").into_bytes())
            {
                missing.push((i, p));
            }
        }
    }
    for (_, s) in stores {
        s.close().expect("close");
    }
    assert!(
        missing.is_empty(),
        "{} replicas missing or wrong after anti-entropy, e.g. (key, partition) {:?}",
        missing.len(),
        &missing[..missing.len().min(5)]
    );
    eprintln!(
        "{repairs} keys repaired ({loops} follow-up loops, {range_repairs} range repairs); all {} replicas present",
        keys * 3
    );
}

#[test]
fn replication_real_time_then_full_sync_after_drops() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (root, _guard) = test_dir();
    // Sink cluster: one node. Source cluster: one node replicating to it,
    // with a queue of 20 writes.
    let mut sink = NodeProc::new(&root, 2);
    sink.start();
    let config = root.join("repl.toml");
    let text = format!(
        "[repl]\nsinks = [\"{}\"]\nqueue_max_entries = 20\n",
        sink.cluster
    );
    std::fs::write(&config, text).expect("config");
    let mut source = NodeProc::new(&root, 1);
    source.config = Some(config);
    source.start();
    let mut a = Client::connect(&source.pb);
    let n = if long() { 1000 } else { 100 };
    // Real time: bursts smaller than the queue, each drained before the
    // next (a burst beyond the queue's 20 would drop writes by design).
    for burst in 0..n / 10 {
        for i in burst * 10..burst * 10 + 10 {
            a.put(&format!("r{i}"), &format!("v{i}"))
                .expect("put on the source");
        }
        wait_for("a burst to be sent", Duration::from_secs(30), || {
            admin(&source.cluster, &["repl", "status"])
                .1
                .contains("waiting: 0\n")
        });
    }
    let (_, status) = admin(&source.cluster, &["repl", "status"]);
    assert!(status.contains("discarded: 0\n"), "{status}");
    let mut b = Client::connect(&sink.pb);
    let on_sink =
        |b: &mut Client, k: &str, v: &str| b.get(k, 1, 0, true) == Ok(Some(v.as_bytes().to_vec()));
    wait_for("real-time replication", Duration::from_secs(30), || {
        (0..n).all(|i| on_sink(&mut b, &format!("r{i}"), &format!("v{i}")))
    });
    a.delete("r0").expect("delete");
    wait_for("the delete to replicate", Duration::from_secs(30), || {
        b.get("r0", 1, 0, true) == Ok(None)
    });
    // The sink goes down: writes queue up, the queue overflows.
    sink.kill9();
    for i in 0..n {
        a.put(&format!("f{i}"), &format!("w{i}"))
            .expect("put on the source");
    }
    let (_, status) = admin(&source.cluster, &["repl", "status"]);
    assert!(!status.contains("discarded: 0\n"), "{status}");
    sink.start();
    let mut b = Client::connect(&sink.pb);
    wait_for("the queue to drain", Duration::from_secs(30), || {
        admin(&source.cluster, &["repl", "status"])
            .1
            .contains("waiting: 0\n")
    });
    let missing = (0..n)
        .filter(|i| !on_sink(&mut b, &format!("f{i}"), &format!("w{i}")))
        .count();
    assert!(
        missing > 0,
        "the queue dropped writes, yet the sink has them all"
    );
    // A bucket type made on the source reaches the sink with the full-sync.
    let (ok, made) = admin(
        &source.cluster,
        &["bucket-type", "create", "replt", "{\"props\":{}}"],
    );
    assert!(ok, "{made}");
    // The sink was killed: until its rebuild scheduler has built its trees
    // again, a full-sync is refused with "retry later", which is the only
    // refusal allowed here.
    let mut out = String::new();
    wait_for(
        "a full-sync the sink accepts",
        Duration::from_secs(60),
        || {
            let (ok, o) = admin(&source.cluster, &["repl", "fullsync", "all"]);
            assert!(ok || o.contains("retry later"), "{o}");
            out = o;
            ok
        },
    );
    assert!(out.contains("queued for the sink"), "{out}");
    let (_, status) = admin(&sink.cluster, &["bucket-type", "status", "replt"]);
    assert!(status.contains("replt has been created"), "{status}");
    // Each check compares at most max_results (32) segments: repeat until
    // one finds the clusters in sync.
    let mut checks = 1;
    wait_for("a full-sync in sync", Duration::from_secs(60), || {
        let (_, again) = admin(&source.cluster, &["repl", "fullsync", "all"]);
        checks += 1;
        again.contains(": in sync")
    });
    for i in 0..n {
        let (k, v) = (format!("f{i}"), format!("w{i}"));
        assert!(
            on_sink(&mut b, &k, &v),
            "{k} after {checks} full-sync checks: {out}"
        );
    }
    eprintln!("{missing} of {n} writes were dropped while the sink was down; full-sync: {out}");
}

/// A node's cached anti-entropy trees survive a clean stop (saved, read
/// back: no rebuild at the next start) and not a kill -9 (no tree file is
/// left to trust: the scheduler rebuilds them at start, and they match the
/// data) — also a kill -9 in the middle of a rebuild. A second rebuild
/// request while one runs is refused, saying so.
#[test]
fn aae_trees_survive_a_clean_stop_and_are_rebuilt_after_kill_9() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (root, _guard) = test_dir();
    let config = root.join("aae.toml");
    // Slow rebuilds (50 keys per vnode at 200 keys/s: ~0.25 s per vnode,
    // steps of 20 keys), so a kill -9 can land in the middle of one.
    std::fs::write(&config, "aae_rebuild_keys_per_sec = 200\n").expect("config");
    let mut n = NodeProc::new(&root, 1);
    n.config = Some(config);
    n.start();
    let status = |n: &NodeProc| admin(&n.cluster, &["aae", "status"]).1;
    let built_all = |n: &NodeProc| status(n).contains("vnodes with trees built: 16 of 16");
    // A fresh node builds its (empty) trees at start.
    wait_for("trees built at start", Duration::from_secs(30), || {
        built_all(&n)
    });
    let mut c = Client::connect(&n.pb);
    for i in 0..800 {
        c.put(&format!("t{i}"), "v").expect("put");
    }
    let (ok, v) = admin(&n.cluster, &["aae", "verify"]);
    assert!(ok && v.contains("match a fresh fold"), "{v}");
    // Clean stop: the trees come back without a rebuild.
    assert!(n.terminate(), "clean stop");
    n.start();
    let s = status(&n);
    assert!(s.contains("vnodes with trees built: 16 of 16"), "{s}");
    assert!(s.contains("folds (builds + segment listings): 0\n"), "{s}");
    assert!(s.contains("rebuilds done: 0 "), "{s}");
    // An operator's rebuild; a second request while it runs is refused.
    let (ok, out) = admin(&n.cluster, &["aae", "rebuild"]);
    assert!(ok && out.contains("of 16 vnodes"), "{out}");
    let (ok, again) = admin(&n.cluster, &["aae", "rebuild"]);
    assert!(!ok && again.contains("already"), "{again}");
    wait_for("a rebuild under way", Duration::from_secs(30), || {
        status(&n).contains("rebuild: running: partition")
    });
    let mut c = Client::connect(&n.pb);
    for i in 800..900 {
        c.put(&format!("t{i}"), "v").expect("put");
    }
    // kill -9 mid-rebuild: nothing to trust at the next start; the
    // scheduler rebuilds every vnode at once.
    n.kill9();
    n.start();
    wait_for(
        "trees rebuilt after kill -9",
        Duration::from_secs(60),
        || built_all(&n),
    );
    let s = status(&n);
    assert!(s.contains("rebuilds done: 16 ("), "{s}");
    let (ok, v) = admin(&n.cluster, &["aae", "verify"]);
    assert!(ok && v.contains("match a fresh fold"), "{v}");
    assert!(n.terminate(), "clean stop");
}

/// `aae_fold` over a 3-node cluster: the coverage plan spans every node,
/// remote vnodes answer over the cluster transport, and each key counts
/// once whichever node coordinates; the cached roots (after every node
/// built its trees) agree from any node and equal the range tree of the
/// only n_val-3 bucket; erase-keys deletes through DELETE cluster-wide.
#[test]
fn aae_fold_queries_cover_the_cluster_once() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (root, _guard) = test_dir();
    let mut nodes = start_nodes(&root, 3);
    form_cluster(&nodes);
    let mut c = Client::connect(&nodes[0].pb);
    for i in 0..60 {
        c.put(&format!("f{i:02}"), "vvvv").expect("put");
    }
    wait_for("every replica written", Duration::from_secs(30), || {
        (0..60).all(|i| {
            c.get(&format!("f{i:02}"), 3, 3, false)
                .is_ok_and(|v| v.is_some())
        })
    });
    let fold = |n: &NodeProc, args: &[&str]| {
        let mut all = vec!["aae", "fold"];
        all.extend_from_slice(args);
        let (ok, out) = admin(&n.cluster, &all);
        assert!(ok, "{args:?}: {out}");
        out
    };
    for n in &nodes {
        let out = fold(n, &["object-stats", "--bucket", "b"]);
        assert!(out.contains("total_count\t60\n"), "{out}");
        assert!(out.contains("total_size\t240\n"), "{out}");
    }
    let out = fold(
        &nodes[1],
        &[
            "fetch-clocks-range",
            "--bucket",
            "b",
            "--start-key",
            "f10",
            "--end-key",
            "f19",
        ],
    );
    assert_eq!(out.lines().count(), 10, "{out}");
    for n in &nodes {
        let (ok, v) = admin(&n.cluster, &["aae", "verify"]);
        assert!(ok && v.contains("match a fresh fold"), "{v}");
    }
    let roots: Vec<String> = nodes
        .iter()
        .map(|n| fold(n, &["merge-root-nval", "--n-val", "3"]))
        .collect();
    assert!(roots.iter().all(|r| *r == roots[0]), "{roots:?}");
    let range = fold(
        &nodes[2],
        &["merge-tree-range", "--bucket", "b", "--size", "xsmall"],
    );
    let branches = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| l.starts_with("branch "))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(branches(&roots[0]).len(), 64);
    assert_eq!(branches(&roots[0]), branches(&range));
    let out = fold(
        &nodes[2],
        &[
            "erase-keys",
            "--bucket",
            "b",
            "--start-key",
            "f50",
            "--end-key",
            "f59",
            "--apply",
        ],
    );
    assert_eq!(out, "dispatched_count\t10\n");
    // The deletes' last replica writes may still be arriving (w = quorum).
    wait_for(
        "the erase on every replica",
        Duration::from_secs(10),
        || fold(&nodes[1], &["object-stats", "--bucket", "b"]).contains("total_count\t50\n"),
    );
    assert_eq!(c.get("f55", 2, 0, false), Ok(None));
    drop(c);
    for n in &mut nodes {
        assert!(n.terminate(), "{} did not exit 0 after SIGTERM", n.name);
    }
}
