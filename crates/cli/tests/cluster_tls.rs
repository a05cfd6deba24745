//! Mutual TLS on the cluster port with real processes and `basalt certs`:
//!
//! * a 3-node cluster formed over TLS with `basalt admin --cert ...`; plain
//!   `basalt admin` gets no answer; then every node's certificate is
//!   rotated by restarting the nodes one by one (SIGTERM, new files, start)
//!   under PB load with no failed request and no acknowledged write lost,
//!   and each node then presents its new certificate;
//! * replication to a TLS sink cluster with replication's own credentials
//!   (a user certificate of the sink's CA), refused for a certificate of
//!   another CA.
//!
//! A load request that fails on one node (e.g. its connection closed by a
//! graceful stop) is retried once on the next node, as Riak's clients do
//! with a node pool; a request that fails twice is a failure.

mod common;
use common::procs::{test_dir, Client, NodeProc};
use common::{bin, long, wait_for};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

/// Runs `basalt certs ARGS`.
fn certs(args: &[&str]) {
    let out = Command::new(bin())
        .arg("certs")
        .args(args)
        .output()
        .expect("basalt certs");
    assert!(
        out.status.success(),
        "certs {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// `basalt admin` to `node` with the user certificate `user` of the CA in
/// `dir` (`None`: plain): (success, stdout + stderr).
fn admin_as(dir: &Path, user: Option<&str>, node: &str, args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new(bin());
    cmd.args(["admin", "--node", node]);
    if let Some(u) = user {
        cmd.arg("--cert")
            .arg(dir.join(format!("{u}.pem")))
            .arg("--key")
            .arg(dir.join(format!("{u}-key.pem")))
            .arg("--cacert")
            .arg(dir.join("ca.pem"));
    }
    let out = cmd.args(args).output().expect("basalt admin");
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    (out.status.success(), text)
}

/// Writes `node`'s config: cluster TLS with `cert` (a file stem under
/// `dir`) and the CA of `dir`, plus `extra`.
fn tls_config(node: &mut NodeProc, dir: &Path, cert: &str, extra: &str) {
    let path = node.dir.with_extension("toml");
    let f = |s: &str| dir.join(s).display().to_string();
    let text = format!(
        "cluster_certfile = {:?}\ncluster_keyfile = {:?}\ncluster_cacertfile = {:?}\n{extra}",
        f(&format!("{cert}.pem")),
        f(&format!("{cert}-key.pem")),
        f("ca.pem"),
    );
    std::fs::write(&path, text).expect("config");
    node.config = Some(path);
}

/// The certificate the node at `addr` presents on its cluster port,
/// verified against the CA of `dir` with the user certificate `user`.
fn presented(dir: &Path, user: &str, addr: &str) -> CertificateDer<'static> {
    let config = basalt_server::security::tls::client_config(
        Some((
            &dir.join(format!("{user}.pem")),
            &dir.join(format!("{user}-key.pem")),
        )),
        &dir.join("ca.pem"),
    )
    .expect("client config");
    let name = basalt_server::security::tls::server_name(addr).expect("name");
    let mut conn = rustls::ClientConnection::new(config, name).expect("tls");
    let mut sock = std::net::TcpStream::connect(addr).expect("connect");
    while conn.is_handshaking() {
        conn.complete_io(&mut sock).expect("handshake");
    }
    conn.peer_certificates().expect("peer certificates")[0].clone()
}

fn pem_cert(file: &Path) -> CertificateDer<'static> {
    CertificateDer::from_pem_file(file).expect("pem")
}

/// Waits until every node reports all members up, no ownership transfer
/// and no hinted handoff pending (what a rolling restart waits for before
/// the next node, as `riak admin transfers` in Riak's).
fn settled(dir: &Path, nodes: &[NodeProc]) {
    wait_for("the cluster to settle", Duration::from_secs(90), || {
        nodes.iter().all(|n| {
            let (_, ring) = admin_as(dir, Some("ops"), &n.cluster, &["ring-status"]);
            let (_, members) = admin_as(dir, Some("ops"), &n.cluster, &["member-status"]);
            ring.contains("pending ownership transfers: 0")
                && ring.contains("(hinted handoff pending): 0")
                && members.lines().filter(|l| l.contains(" up ")).count() == nodes.len()
        })
    });
}

/// PB load on every node in turn (w=2 puts, r=2 reads of earlier keys); a
/// request failing on one node is retried on each of the others, after
/// 100 ms, as a client would. Returns the requests that failed on every
/// node, and how many were retried.
///
/// Each node in turn gets a retry: in about one run in five (unchanged
/// since the test was written) a read at the first restart failed twice
/// with `r_val_unsatisfied` 2,1, on the node asked and on the next.
fn load(
    addrs: Vec<String>,
    stop: Arc<AtomicBool>,
    written: Arc<AtomicU64>,
) -> std::thread::JoinHandle<(Vec<String>, u64)> {
    std::thread::spawn(move || {
        let mut clients: Vec<Option<Client>> = addrs.iter().map(|_| None).collect();
        let mut failures = Vec::new();
        let mut i = 0u64;
        let mut turn = 0usize;
        let mut retried = 0u64;
        while !stop.load(Ordering::Acquire) {
            let key = format!("k{i}");
            let probe = format!("k{}", i / 2);
            let mut done = (false, false);
            let mut last = String::new();
            for attempt in 0..addrs.len() {
                if attempt > 0 {
                    std::thread::sleep(Duration::from_millis(100));
                }
                let n = (turn + attempt) % addrs.len();
                if clients[n].is_none() {
                    clients[n] = Client::try_connect(&addrs[n]).ok();
                }
                let Some(c) = clients[n].as_mut() else {
                    last = format!("connect {}", addrs[n]);
                    continue;
                };
                if !done.0 {
                    match c.put(&key, &format!("v{i}")) {
                        Ok(()) => done.0 = true,
                        Err(e) => last = format!("put {key}: {e}"),
                    }
                }
                if done.0 && !done.1 {
                    match c.get(&probe, 2, 0, true) {
                        Ok(Some(v)) if v == format!("v{}", i / 2).into_bytes() => done.1 = true,
                        Ok(other) => last = format!("get {probe}: {other:?}"),
                        Err(e) => last = format!("get {probe}: {e}"),
                    }
                }
                if done.0 && done.1 {
                    break;
                }
                retried += u64::from(attempt == 0);
                clients[n] = None;
            }
            if done.0 {
                written.store(i + 1, Ordering::Release);
            }
            if !(done.0 && done.1) {
                failures.push(last);
            }
            i += 1;
            turn += 1;
        }
        (failures, retried)
    })
}

#[test]
fn a_tls_cluster_rotates_certificates_node_by_node_under_load() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (root, _guard) = test_dir();
    let dir = root.join("certs");
    let gen2 = root.join("certs2");
    let d = dir.display().to_string();
    certs(&["ca", "--out", &d]);
    certs(&["client", "--ca", &d, "--user", "ops"]);
    let mut nodes: Vec<NodeProc> = (1..=3).map(|i| NodeProc::new(&root, i)).collect();
    for (i, n) in nodes.iter_mut().enumerate() {
        let name = format!("n{}", i + 1);
        certs(&["node", "--ca", &d, "--name", &name]);
        tls_config(n, &dir, &name, "");
        n.start();
    }
    let (ok, out) = admin_as(&dir, None, &nodes[0].cluster, &["member-status"]);
    assert!(!ok, "plain admin must get no answer: {out}");
    for n in &nodes[1..] {
        let (ok, out) = admin_as(
            &dir,
            Some("ops"),
            &n.cluster,
            &["cluster", "join", &nodes[0].cluster],
        );
        assert!(ok, "join: {out}");
    }
    let (ok, out) = admin_as(&dir, Some("ops"), &nodes[0].cluster, &["cluster", "plan"]);
    assert!(ok, "plan: {out}");
    let (ok, out) = admin_as(&dir, Some("ops"), &nodes[0].cluster, &["cluster", "commit"]);
    assert!(ok, "commit: {out}");
    settled(&dir, &nodes);

    let stop = Arc::new(AtomicBool::new(false));
    let written = Arc::new(AtomicU64::new(0));
    let h = load(
        nodes.iter().map(|n| n.pb.clone()).collect(),
        stop.clone(),
        written.clone(),
    );
    let per_step = if long() { 2000 } else { 100 };
    std::fs::create_dir_all(&gen2).expect("certs2");
    for i in 0..nodes.len() {
        let before = written.load(Ordering::Acquire);
        wait_for("load before the restart", Duration::from_secs(60), || {
            written.load(Ordering::Acquire) >= before + per_step
        });
        let name = format!("n{}", i + 1);
        let out = gen2.display().to_string();
        certs(&["node", "--ca", &d, "--name", &name, "--out", &out]);
        std::fs::copy(dir.join("ca.pem"), gen2.join("ca.pem")).ok();
        let n = &mut nodes[i];
        tls_config(n, &gen2, &name, "");
        assert!(n.terminate(), "{name} stops cleanly");
        n.start();
        settled(&dir, &nodes);
    }
    let before = written.load(Ordering::Acquire);
    wait_for("load after the rotation", Duration::from_secs(60), || {
        written.load(Ordering::Acquire) >= before + per_step
    });
    stop.store(true, Ordering::Release);
    let (failures, retried) = h.join().expect("load thread");
    let total = written.load(Ordering::Acquire);
    eprintln!("{total} writes (+ reads) during the rotation; {retried} retried on another node");
    assert!(
        failures.is_empty(),
        "{} failed requests: {:?}",
        failures.len(),
        &failures[..failures.len().min(5)]
    );
    for (i, n) in nodes.iter().enumerate() {
        let new = pem_cert(&gen2.join(format!("n{}.pem", i + 1)));
        assert_eq!(
            presented(&dir, "ops", &n.cluster),
            new,
            "n{} rotated",
            i + 1
        );
    }
    let mut c = Client::connect(&nodes[0].pb);
    for i in 0..total {
        let v = c.get(&format!("k{i}"), 2, 0, false).expect("get");
        assert_eq!(v, Some(format!("v{i}").into_bytes()), "k{i} of {total}");
    }
}

/// A single-node source replicating to a single-node TLS sink.
fn repl_pair(
    root: &Path,
    sink_dir: &Path,
    source_creds: &Path,
    user: &str,
) -> (NodeProc, NodeProc) {
    let mut sink = NodeProc::new(root, 2);
    tls_config(&mut sink, sink_dir, "sink", "");
    sink.start();
    let mut source = NodeProc::new(root, 1);
    let f = |s: &str| source_creds.join(s).display().to_string();
    let cfg = source.dir.with_extension("toml");
    let text = format!(
        "[repl]\ncertfile = {:?}\nkeyfile = {:?}\ncacertfile = {:?}\n\n[[repl.sink]]\nname = \"s\"\npeers = [\"{}\"]\n",
        f(&format!("{user}.pem")),
        f(&format!("{user}-key.pem")),
        sink_dir.join("ca.pem").display(),
        sink.cluster
    );
    std::fs::write(&cfg, text).expect("config");
    source.config = Some(cfg);
    source.start();
    (source, sink)
}

/// A counter from `repl status` on a plain node.
fn status_value(node: &str, name: &str) -> u64 {
    let (_, text) = common::admin(node, &["repl", "status"]);
    text.lines()
        .find_map(|l| l.strip_prefix(&format!("{name}: ")))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[test]
fn replication_to_a_tls_sink_uses_its_own_credentials() {
    let _serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let (root, _guard) = test_dir();
    let sink_dir: PathBuf = root.join("sink-ca");
    let other: PathBuf = root.join("other-ca");
    let (s, o) = (sink_dir.display().to_string(), other.display().to_string());
    certs(&["ca", "--out", &s]);
    certs(&["node", "--ca", &s, "--name", "sink"]);
    certs(&["client", "--ca", &s, "--user", "repl_dc1"]);
    certs(&["client", "--ca", &s, "--user", "ops"]);
    certs(&["ca", "--out", &o]);
    certs(&["client", "--ca", &o, "--user", "repl_dc1"]);

    let (source, sink) = repl_pair(&root, &sink_dir, &sink_dir, "repl_dc1");
    let mut c = Client::connect(&source.pb);
    for i in 0..20 {
        c.put(&format!("k{i}"), "v").expect("put");
    }
    wait_for("entries delivered", Duration::from_secs(30), || {
        status_value(&source.cluster, "sent") == 20
    });
    let mut r = Client::connect(&sink.pb);
    for i in 0..20 {
        assert!(r
            .get_state("b", format!("k{i}").as_bytes())
            .expect("get")
            .is_some());
    }
    let (ok, out) = admin_as(&sink_dir, Some("ops"), &sink.cluster, &["repl", "status"]);
    assert!(ok && out.contains("received: 20"), "{out}");
    drop((source, sink));

    // A source whose certificate the sink's CA did not issue delivers nothing.
    std::fs::create_dir_all(root.join("again")).expect("dir");
    let (source, sink) = repl_pair(&root.join("again"), &sink_dir, &other, "repl_dc1");
    let mut c = Client::connect(&source.pb);
    c.put("refused", "v").expect("put");
    std::thread::sleep(Duration::from_secs(3));
    assert_eq!(status_value(&source.cluster, "sent"), 0);
    assert_eq!(status_value(&source.cluster, "waiting"), 1);
    let (_, out) = admin_as(&sink_dir, Some("ops"), &sink.cluster, &["repl", "status"]);
    assert!(out.contains("received: 0"), "{out}");
}
