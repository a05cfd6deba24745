//! Mutual TLS on the cluster port (`cluster_certfile`, `cluster_keyfile`,
//! `cluster_cacertfile`), nodes in process with certificates from
//! `security::certs` (what `basalt certs` writes):
//!
//! * nodes with certificates of the cluster CA join and serve each other's
//!   replicas; a node whose certificate comes from another CA cannot join
//!   (in either direction of the handshake), and the cluster is unchanged;
//! * a plain TCP client gets no answer from a TLS cluster port;
//! * a user's certificate of the cluster CA may send replication messages
//!   and admin requests only (never node messages), and once security is
//!   on only with `basalt.repl` / `basalt.admin`.

mod common;

use basalt_server::cluster::transport::{PeerError, Peers};
use basalt_server::cluster::{Msg, Reply};
use basalt_server::config::Config;
use basalt_server::pb::{self, code};
use basalt_server::security::certs::{self, Issued, Validity};
use basalt_server::security::tls;
use basalt_server::ServerHandle;
use prost::Message;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Writes `issued` as `dir/stem.pem` and `dir/stem-key.pem`.
fn write(dir: &Path, stem: &str, issued: &Issued) -> (PathBuf, PathBuf) {
    let (c, k) = (
        dir.join(format!("{stem}.pem")),
        dir.join(format!("{stem}-key.pem")),
    );
    std::fs::write(&c, &issued.cert_pem).expect("write cert");
    std::fs::write(&k, &issued.key_pem).expect("write key");
    (c, k)
}

/// The cluster CA and a foreign one, written under `dir` (`ca.pem`,
/// `foreign.pem`).
struct Cas {
    dir: PathBuf,
    ca: Issued,
    foreign: Issued,
}

impl Cas {
    fn new(dir: &Path) -> Cas {
        let ca = certs::new_ca("cluster CA", Validity::days(2)).expect("ca");
        let foreign = certs::new_ca("foreign CA", Validity::days(2)).expect("foreign ca");
        write(dir, "ca", &ca);
        write(dir, "foreign", &foreign);
        Cas {
            dir: dir.to_path_buf(),
            ca,
            foreign,
        }
    }

    /// A node certificate of `issuer`, trusting the CA file `trust`.
    fn node(&self, name: &str, issuer: &Issued, trust: &str) -> (String, String, String) {
        let cert = certs::node_cert(issuer, name, &[], Validity::days(2)).expect("node cert");
        let (c, k) = write(&self.dir, name, &cert);
        let s = |p: PathBuf| p.display().to_string();
        (s(c), s(k), s(self.dir.join(format!("{trust}.pem"))))
    }

    /// Client TLS settings with a user certificate of the cluster CA.
    fn user(&self, user: &str) -> Arc<rustls::ClientConfig> {
        let cert = certs::client_cert(&self.ca, user, Validity::days(2)).expect("client cert");
        let (c, k) = write(&self.dir, user, &cert);
        tls::client_config(Some((&c, &k)), &self.dir.join("ca.pem")).expect("client config")
    }
}

fn start(name: &str, files: (String, String, String)) -> (ServerHandle, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = Config {
        node_name: format!("{name}@127.0.0.1"),
        ring_size: 16,
        cluster_certfile: files.0,
        cluster_keyfile: files.1,
        cluster_cacertfile: files.2,
        ..common::test_config(dir.path(), false)
    };
    (ServerHandle::spawn(c).expect("spawn"), dir)
}

fn admin(rt: &tokio::runtime::Runtime, h: &ServerHandle, line: &str) -> Result<String, String> {
    rt.block_on(h.node().admin_request(line.as_bytes()))
        .map_err(|e| e.to_string())
}

/// Waits (≤ 60 s) until `nodes` see `members` valid members and no
/// pending transfer.
fn settle(rt: &tokio::runtime::Runtime, nodes: &[&ServerHandle], members: usize) {
    let t = Instant::now();
    while !nodes.iter().all(|h| {
        admin(rt, h, "ring-status").is_ok_and(|s| s.contains("pending ownership transfers: 0"))
            && admin(rt, h, "member-status").is_ok_and(|s| s.matches("valid").count() == members)
    }) {
        assert!(t.elapsed() < Duration::from_secs(60), "no settle");
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_cluster_forms_over_mutual_tls_and_a_node_of_another_ca_cannot_join() {
    let rt = common::runtime();
    let certs_dir = tempfile::tempdir().expect("tempdir");
    let cas = Cas::new(certs_dir.path());
    let (n1, _d1) = start("n1", cas.node("n1", &cas.ca, "ca"));
    let (n2, _d2) = start("n2", cas.node("n2", &cas.ca, "ca"));
    // Its certificate and its trust are the foreign CA's: it refuses n1.
    let (n3, _d3) = start("n3", cas.node("n3", &cas.foreign, "foreign"));
    // It trusts the cluster CA, but n1 refuses its certificate.
    let (n4, _d4) = start("n4", cas.node("n4", &cas.foreign, "ca"));
    let target = n1.cluster_addr().to_string();
    admin(&rt, &n2, &format!("join {target}")).expect("n2 joins");
    admin(&rt, &n1, "commit").expect("commit");
    settle(&rt, &[&n1, &n2], 2);

    // Replicas on both nodes: a write through n1 is read at r=3 through n2.
    let put = pb::RpbPutReq {
        bucket: b"b".to_vec(),
        key: Some(b"k".to_vec()),
        w: Some(3),
        content: pb::RpbContent {
            value: b"over tls".to_vec(),
            ..Default::default()
        },
        ..Default::default()
    };
    common::Client::connect(&n1).call(code::PUT_REQ, &put, code::PUT_RESP);
    let get = pb::RpbGetReq {
        bucket: b"b".to_vec(),
        key: b"k".to_vec(),
        r: Some(3),
        pr: Some(2),
        ..Default::default()
    };
    let body = common::Client::connect(&n2).call(code::GET_REQ, &get, code::GET_RESP);
    let got = pb::RpbGetResp::decode(body.as_slice()).expect("get resp");
    assert_eq!(got.content[0].value, b"over tls");

    let e = admin(&rt, &n3, &format!("join {target}")).expect_err("n3 must not join");
    assert!(e.contains("certificate"), "n3: {e}");
    let e = admin(&rt, &n4, &format!("join {target}")).expect_err("n4 must not join");
    assert!(e.contains("refused this node's certificate"), "n4: {e}");
    let members = admin(&rt, &n1, "member-status").expect("member-status");
    assert_eq!(members.matches("valid").count(), 2, "{members}");
    assert!(
        !members.contains("n3@") && !members.contains("n4@"),
        "{members}"
    );

    // A plain client: the handshake fails, nothing is answered.
    let t = Duration::from_secs(5);
    let mut plain = riak_pb::sync::Client::connect(n1.cluster_addr(), t, t).expect("connect");
    assert!(plain.call_raw(code::PING_REQ, &[]).is_err());
    for h in [n1, n2, n3, n4] {
        h.shutdown().expect("shutdown");
    }
}

/// A cluster call from a user's certificate.
fn call(rt: &tokio::runtime::Runtime, peers: &Peers, h: &ServerHandle, msg: Msg) -> Reply {
    let addr = h.cluster_addr().to_string();
    rt.block_on(peers.call(&addr, &msg, Duration::from_secs(10)))
        .unwrap_or_else(|e: PeerError| panic!("call: {e}"))
}

/// An admin request over TLS with `config`: the reply, or the error text.
fn admin_tls(
    h: &ServerHandle,
    config: &Arc<rustls::ClientConfig>,
    line: &str,
) -> Result<String, String> {
    let t = Duration::from_secs(10);
    let mut c = riak_pb::sync::Client::connect(h.cluster_addr(), t, t).expect("connect");
    let name = tls::server_name(&h.cluster_addr().to_string()).expect("name");
    c.tls_handshake(config.clone(), name).expect("handshake");
    match c.call_raw(code::basalt::ADMIN_CLUSTER_REQ, line.as_bytes()) {
        Ok((_, body)) => Ok(String::from_utf8_lossy(&body).into_owned()),
        Err(e) => Err(e.to_string()),
    }
}

#[test]
fn a_user_certificate_may_only_replicate_and_administer_with_its_grants() {
    let rt = common::runtime();
    let certs_dir = tempfile::tempdir().expect("tempdir");
    let cas = Cas::new(certs_dir.path());
    let (n1, _d1) = start("n1", cas.node("n1", &cas.ca, "ca"));
    let (ops, bob) = (cas.user("ops"), cas.user("bob"));
    let peers = Peers::new(1 << 20);
    peers.set_tls(Some(bob.clone()));
    let hello = || Msg::ReplHello {
        source: "another-cluster".into(),
    };

    // Never node messages.
    let r = call(&rt, &peers, &n1, Msg::HeldFor { partitions: vec![] });
    assert!(
        matches!(&r, Reply::Refused(e) if e.contains("not a node certificate")),
        "{r:?}"
    );
    // Security off: replication and admin with any certificate of the CA.
    let r = call(&rt, &peers, &n1, hello());
    assert!(matches!(r, Reply::ReplHello { .. }), "{r:?}");
    assert!(admin_tls(&n1, &bob, "member-status").is_ok_and(|s| s.contains("valid")));

    for line in [
        "security add-user ops",
        "security add-user bob",
        "security grant basalt.admin on any to ops",
        "security enable",
    ] {
        admin(&rt, &n1, line).unwrap_or_else(|e| panic!("{line}: {e}"));
    }
    let e = admin_tls(&n1, &bob, "member-status").expect_err("bob lacks basalt.admin");
    assert!(e.contains("basalt.admin"), "{e}");
    assert!(admin_tls(&n1, &ops, "member-status").is_ok_and(|s| s.contains("valid")));
    let r = call(&rt, &peers, &n1, hello());
    assert!(
        matches!(&r, Reply::Refused(e) if e.contains("basalt.repl")),
        "{r:?}"
    );
    admin(&rt, &n1, "security grant basalt.repl on any to bob").expect("grant");
    let r = call(&rt, &peers, &n1, hello());
    assert!(matches!(r, Reply::ReplHello { .. }), "{r:?}");
    n1.shutdown().expect("shutdown");
}
