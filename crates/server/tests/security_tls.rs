//! Security over TLS with certificates from `security::certs` (what `basalt
//! certs` writes): the HTTPS listener with basic auth and the route
//! permission table, the plain HTTP listener under security, and
//! `certificate` sources on PB and HTTPS (client certificate chained to
//! `tls_cacertfile`, its CN the user), with wrong, foreign and expired
//! certificates refused.
//!
//! The back-off over HTTPS: five wrong passwords of one user lock it out
//! from this address (429 with `Retry-After`, counted in `/stats`), and
//! another user keeps being served.
//!
//! The route scan: every pattern the router serves (`route_patterns`),
//! filled with sample values, must answer 401 without credentials and 403
//! to an authenticated user without grants (routes open to any user
//! excepted) — with the unit test beside `api::http::auth::rule`, a route
//! added without a permission fails.

mod common;

use basalt_server::api::http::auth::rule;
use basalt_server::config::Config;
use basalt_server::pb::{self, code};
use basalt_server::security::certs::{self, Issued, Validity};
use basalt_server::security::Rule;
use basalt_server::server::http::route_patterns;
use basalt_server::ServerHandle;
use common::Client;
use prost::Message;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

type Tls = rustls::StreamOwned<rustls::ClientConnection, TcpStream>;

/// A CA and a node certificate written under `dir`; a node with PB TLS,
/// HTTP, HTTPS and client certificates asked for.
fn node(dir: &Path) -> (ServerHandle, Issued) {
    let ca = certs::new_ca("test CA", Validity::days(2)).expect("ca");
    let n = certs::node_cert(&ca, "node1", &[], Validity::days(2)).expect("node cert");
    let w = |f: &str, s: &str| std::fs::write(dir.join(f), s).expect("write");
    w("ca.pem", &ca.cert_pem);
    w("node.pem", &n.cert_pem);
    w("node-key.pem", &n.key_pem);
    let p = |f: &str| dir.join(f).display().to_string();
    let config = Config {
        tls_certfile: p("node.pem"),
        tls_keyfile: p("node-key.pem"),
        tls_cacertfile: p("ca.pem"),
        https_listen: "127.0.0.1:0".into(),
        ..common::test_config(&dir.join("data"), true)
    };
    (ServerHandle::spawn(config).expect("node"), ca)
}

fn admin(h: &ServerHandle, line: &str) {
    let mut c = Client::admin(h);
    c.send(code::basalt::ADMIN_CLUSTER_REQ, line.as_bytes());
    let reply = c.recv();
    assert_eq!(
        reply.as_ref().map(|r| r.0),
        Some(code::basalt::ADMIN_CLUSTER_RESP),
        "{line}: {reply:?}"
    );
}

fn der(pem: &str) -> CertificateDer<'static> {
    CertificateDer::from_pem_slice(pem.as_bytes()).expect("pem")
}

/// A client TLS config trusting `ca`, presenting `client` if given.
fn client_config(ca: &Issued, client: Option<&Issued>) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(der(&ca.cert_pem)).expect("root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let b = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots);
    Arc::new(match client {
        None => b.with_no_client_auth(),
        Some(c) => b
            .with_client_auth_cert(
                vec![der(&c.cert_pem)],
                PrivateKeyDer::from_pem_slice(c.key_pem.as_bytes()).expect("key"),
            )
            .expect("client cert"),
    })
}

fn tls_to(sock: TcpStream, config: Arc<rustls::ClientConfig>) -> Tls {
    let name = ServerName::try_from("127.0.0.1").expect("name");
    let conn = rustls::ClientConnection::new(config, name).expect("client");
    rustls::StreamOwned::new(conn, sock)
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s
}

/// One HTTPS request with `Connection: close`: (status, body); `None`
/// when the connection fails (e.g. the handshake is refused).
fn https(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    method: &str,
    path: &str,
    auth: Option<(&str, &str)>,
    body: &[u8],
) -> Option<(u16, String)> {
    https_full(addr, config, method, path, auth, body).map(|(s, _, b)| (s, b))
}

/// As [`https`]: (status, the head's lines, body).
fn https_full(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    method: &str,
    path: &str,
    auth: Option<(&str, &str)>,
    body: &[u8],
) -> Option<(u16, String, String)> {
    use base64::Engine as _;
    let mut s = tls_to(connect(addr), config);
    let mut req = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    if let Some((u, p)) = auth {
        let b = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
        req.push_str(&format!("Authorization: Basic {b}\r\n"));
    }
    req.push_str(&format!(
        "Content-Type: text/plain\r\nContent-Length: {}\r\n\r\n",
        body.len()
    ));
    s.write_all(req.as_bytes()).ok()?;
    s.write_all(body).ok()?;
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw).into_owned();
    let status = text.split(' ').nth(1)?.parse().ok()?;
    let (head, body) = text.split_once("\r\n\r\n")?;
    Some((status, head.to_string(), body.to_string()))
}

fn write_frame(w: &mut impl Write, c: u8, body: &[u8]) {
    w.write_all(&pb::frame(c, body)).expect("write");
    w.flush().expect("flush");
}

fn read_frame(r: &mut impl Read) -> Option<(u8, Vec<u8>)> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).ok()?;
    let mut buf = vec![0u8; u32::from_be_bytes(len) as usize];
    r.read_exact(&mut buf).ok()?;
    let (c, body) = buf.split_first()?;
    Some((*c, body.to_vec()))
}

fn errmsg(reply: &Option<(u8, Vec<u8>)>) -> String {
    match reply {
        Some((0, body)) => pb::RpbErrorResp::decode(body.as_slice())
            .map(|e| String::from_utf8_lossy(&e.errmsg).into_owned())
            .unwrap_or_default(),
        other => format!("not an error: {other:?}"),
    }
}

/// STARTTLS on the PB port with `config`; `None` if the handshake fails.
fn pb_tls(addr: SocketAddr, config: Arc<rustls::ClientConfig>) -> Option<Tls> {
    let mut s = connect(addr);
    write_frame(&mut s, code::START_TLS, &[]);
    assert_eq!(read_frame(&mut s), Some((code::START_TLS, vec![])));
    let mut t = tls_to(s, config);
    // The handshake runs on first use; a ping (refused before
    // authentication) shows whether it held.
    write_frame(&mut t, code::PING_REQ, &[]);
    read_frame(&mut t)?;
    Some(t)
}

fn pb_auth(t: &mut Tls, user: &str, password: &str) -> Option<(u8, Vec<u8>)> {
    let req = pb::RpbAuthReq {
        user: user.as_bytes().to_vec(),
        password: password.as_bytes().to_vec(),
    };
    write_frame(t, code::AUTH_REQ, &req.encode_to_vec());
    read_frame(t)
}

/// A route pattern with sample values in its parameters.
fn sample_path(pattern: &str) -> String {
    pattern
        .split('/')
        .map(|seg| if seg.starts_with('{') { "x" } else { seg })
        .collect::<Vec<_>>()
        .join("/")
}

#[test]
fn https_asks_for_basic_auth_and_each_route_for_its_permission() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, ca) = node(dir.path());
    let addr = h.https_addr().expect("https");
    let cfg = client_config(&ca, None);
    // Security off: HTTPS serves without credentials.
    let r = https(addr, cfg.clone(), "GET", "/buckets/b/keys/none", None, b"");
    assert_eq!(r.map(|r| r.0), Some(404));

    admin(&h, "security enable");
    admin(&h, "security add-user alice password=s3cret");
    admin(&h, "security add-source all 127.0.0.1/32 password");
    // Plain HTTP: /ping only.
    assert_eq!(common::http(&h, "GET", "/ping", &[], b"").status, 200);
    let plain = common::http(&h, "GET", "/buckets/b/keys/k", &[], b"");
    assert_eq!(plain.status, 403, "{}", plain.text());

    let patterns = route_patterns();
    for p in &patterns {
        let path = sample_path(p);
        let r = https(addr, cfg.clone(), "GET", &path, None, b"").expect("reply");
        if p == "/ping" {
            assert_eq!(r.0, 200, "{p}");
            continue;
        }
        assert_eq!(r.0, 401, "{p} without credentials: {r:?}");
        let r = https(
            addr,
            cfg.clone(),
            "GET",
            &path,
            Some(("alice", "s3cret")),
            b"",
        )
        .expect("reply");
        match rule(p, &axum::http::Method::GET) {
            Some(Rule::Open) => assert!(r.0 != 401 && r.0 != 403, "{p}: {r:?}"),
            _ => assert!(
                r.0 == 403 && r.1.contains("Permission denied: User 'alice'"),
                "{p} without a grant: {r:?}"
            ),
        }
    }
    let r = https(
        addr,
        cfg.clone(),
        "GET",
        "/buckets/b/keys/k",
        Some(("alice", "nope")),
        b"",
    );
    assert_eq!(r.map(|r| r.0), Some(401), "a wrong password");
    // A grant on one bucket: put, get, delete there, not elsewhere.
    admin(
        &h,
        "security grant riak_kv.get,riak_kv.put,riak_kv.delete on default/b to alice",
    );
    let alice = Some(("alice", "s3cret"));
    let r = https(addr, cfg.clone(), "PUT", "/buckets/b/keys/k", alice, b"v1");
    assert_eq!(r.map(|r| r.0), Some(204));
    let r = https(addr, cfg.clone(), "GET", "/buckets/b/keys/k", alice, b"");
    assert_eq!(r, Some((200, "v1".to_string())));
    let r = https(
        addr,
        cfg.clone(),
        "PUT",
        "/buckets/other/keys/k",
        alice,
        b"v",
    );
    assert_eq!(r.map(|r| r.0), Some(403));
    let r = https(addr, cfg.clone(), "DELETE", "/buckets/b/keys/k", alice, b"");
    assert_eq!(r.map(|r| r.0), Some(204));
    let r = https(addr, cfg.clone(), "GET", "/buckets/b/keys/k", alice, b"");
    assert_eq!(r.map(|r| r.0), Some(404));
    // Odd user names and malformed headers: 401, nothing else.
    for user in ["al:ice", "", "a\u{1}b", &"x".repeat(5000)] {
        let r = https(
            addr,
            cfg.clone(),
            "GET",
            "/buckets/b/keys/k",
            Some((user, "p")),
            b"",
        );
        assert_eq!(r.map(|r| r.0), Some(401), "user {user:?}");
    }
    // Garbage instead of a TLS handshake: that connection closes, the
    // node serves the others.
    let mut g = connect(addr);
    g.write_all(b"GET / HTTP/1.1\r\n\r\nnot a TLS hello")
        .expect("garbage");
    let mut rest = Vec::new();
    let _ = g.read_to_end(&mut rest);
    let r = https(addr, cfg.clone(), "GET", "/ping", None, b"");
    assert_eq!(r.map(|r| r.0), Some(200));
    h.shutdown().expect("shutdown");
}

#[test]
fn certificate_sources_take_the_client_certificate_common_name() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, ca) = node(dir.path());
    admin(&h, "security enable");
    admin(&h, "security add-user bob");
    admin(&h, "security add-user carol");
    admin(&h, "security add-source bob 127.0.0.1/32 certificate");
    admin(&h, "security add-source carol 127.0.0.1/32 certificate");
    admin(&h, "security grant riak_kv.get,riak_kv.put on any to bob");
    let bob = certs::client_cert(&ca, "bob", Validity::days(1)).expect("bob");

    // PB: bob's certificate authenticates bob (the password is ignored),
    // not carol.
    let mut t = pb_tls(h.addr(), client_config(&ca, Some(&bob))).expect("tls");
    assert!(errmsg(&pb_auth(&mut t, "carol", "")).starts_with("Authentication failed"));
    assert_eq!(
        pb_auth(&mut t, "bob", "any"),
        Some((code::AUTH_RESP, vec![]))
    );
    let put = pb::RpbPutReq {
        bucket: b"b".to_vec(),
        key: Some(b"k".to_vec()),
        content: pb::RpbContent {
            value: b"v".to_vec(),
            ..Default::default()
        },
        ..Default::default()
    };
    write_frame(&mut t, code::PUT_REQ, &put.encode_to_vec());
    assert_eq!(read_frame(&mut t).map(|r| r.0), Some(code::PUT_RESP));
    // No client certificate: refused for a certificate source.
    let mut t = pb_tls(h.addr(), client_config(&ca, None)).expect("tls");
    assert!(errmsg(&pb_auth(&mut t, "bob", "")).starts_with("Authentication failed"));
    // A certificate from another CA, and an expired one: the handshake
    // fails; the node serves on.
    let other = certs::new_ca("other CA", Validity::days(2)).expect("other ca");
    let foreign = certs::client_cert(&other, "bob", Validity::days(1)).expect("foreign");
    assert!(pb_tls(h.addr(), client_config(&ca, Some(&foreign))).is_none());
    let old = Validity {
        not_before: time::OffsetDateTime::now_utc() - time::Duration::days(10),
        days: 2,
    };
    let expired = certs::client_cert(&ca, "bob", old).expect("expired");
    assert!(pb_tls(h.addr(), client_config(&ca, Some(&expired))).is_none());
    // HTTPS: the same certificate authenticates bob's basic auth.
    let addr = h.https_addr().expect("https");
    let r = https(
        addr,
        client_config(&ca, Some(&bob)),
        "GET",
        "/buckets/b/keys/k",
        Some(("bob", "")),
        b"",
    );
    assert_eq!(r, Some((200, "v".to_string())));
    let r = https(
        addr,
        client_config(&ca, None),
        "GET",
        "/buckets/b/keys/k",
        Some(("bob", "")),
        b"",
    );
    assert_eq!(r.map(|r| r.0), Some(401));
    assert!(https(
        addr,
        client_config(&ca, Some(&foreign)),
        "GET",
        "/ping",
        None,
        b""
    )
    .is_none());
    let mut c = pb_tls(h.addr(), client_config(&ca, Some(&bob))).expect("node still serves");
    assert_eq!(pb_auth(&mut c, "bob", ""), Some((code::AUTH_RESP, vec![])));
    write_frame(&mut c, code::PING_REQ, &[]);
    assert_eq!(read_frame(&mut c), Some((code::PING_RESP, vec![])));
    h.shutdown().expect("shutdown");
}

/// A reply larger than the socket buffers, read late, arrives whole over
/// STARTTLS. (tokio-rustls may keep encrypted bytes back when the socket
/// is full, and only a flush sends them; the server flushes every frame.
/// This test did not make that stall happen without the flush — it needs
/// the socket full at the reply's very last write — so it checks the
/// large reply, not the flush.)
#[test]
fn a_large_reply_over_starttls_arrives_whole_when_read_late() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, ca) = node(dir.path());
    let mut t = pb_tls(h.addr(), client_config(&ca, None)).expect("starttls");
    let value: Vec<u8> = (0..16u32 << 20).map(|i| (i % 251) as u8).collect();
    let put = pb::RpbPutReq {
        bucket: b"big".to_vec(),
        key: Some(b"k".to_vec()),
        content: pb::RpbContent {
            value: value.clone(),
            ..Default::default()
        },
        ..Default::default()
    };
    write_frame(&mut t, code::PUT_REQ, &put.encode_to_vec());
    assert_eq!(read_frame(&mut t).map(|f| f.0), Some(code::PUT_RESP));
    let get = pb::RpbGetReq {
        bucket: b"big".to_vec(),
        key: b"k".to_vec(),
        ..Default::default()
    };
    write_frame(&mut t, code::GET_REQ, &get.encode_to_vec());
    // The server fills the socket buffers and waits.
    std::thread::sleep(Duration::from_millis(500));
    let (c, body) = read_frame(&mut t).expect("the whole reply within the read timeout");
    assert_eq!(c, code::GET_RESP);
    let got = pb::RpbGetResp::decode(body.as_slice()).expect("decode");
    assert_eq!(got.content[0].value, value);
    h.shutdown().expect("shutdown");
}

#[test]
fn https_basic_auth_backs_off_after_failed_logins() {
    use basalt_server::security::logins::Policy;
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, ca) = node(dir.path());
    let addr = h.https_addr().expect("https");
    let cfg = client_config(&ca, None);
    h.node().security().set_login_policy(Policy {
        first_lockout: Duration::from_secs(60),
        ..Policy::DEFAULT
    });
    admin(&h, "security add-user dave password=pw");
    admin(&h, "security add-user erin password=pw2");
    admin(&h, "security add-source all 127.0.0.1/32 password");
    admin(&h, "security grant riak_kv.get,riak_kv.put on any to dave");
    admin(&h, "security grant riak_kv.get,riak_kv.put on any to erin");
    admin(&h, "security enable");
    let get = |user: &str, pw: &str| {
        https_full(
            addr,
            cfg.clone(),
            "GET",
            "/buckets/b/keys/k",
            Some((user, pw)),
            b"",
        )
        .expect("reply")
    };
    for i in 0..5 {
        assert_eq!(get("dave", "bad").0, 401, "attempt {i}");
    }
    let (status, head, body) = get("dave", "pw");
    assert_eq!(status, 429, "{head}\n{body}");
    assert!(
        body.starts_with("too many failed logins for user dave from 127.0.0.1; retry in "),
        "{body}"
    );
    let retry = head
        .lines()
        .find_map(|l| {
            l.strip_prefix("retry-after: ")
                .or_else(|| l.strip_prefix("Retry-After: "))
        })
        .and_then(|v| v.trim().parse::<u64>().ok())
        .expect("Retry-After");
    assert!((1..=60).contains(&retry), "{retry}");
    // Another user from the same address is served.
    assert_eq!(get("erin", "pw2").0, 404);
    // Counted in /stats with the other refusals (5 bad passwords, 1
    // lock-out).
    let (status, _, stats) = https_full(
        addr,
        cfg.clone(),
        "GET",
        "/stats",
        Some(("erin", "pw2")),
        b"",
    )
    .expect("stats");
    assert_eq!(status, 200);
    let stats: serde_json::Value = serde_json::from_str(&stats).expect("json");
    let refused = stats["security_refused_total"].as_u64().expect("counter");
    assert!(refused >= 6, "{refused}");
    h.shutdown().expect("shutdown");
}

/// The console under security: plain HTTP refused with the reason, HTTPS
/// without credentials 401, a user without `basalt.admin` 403 on views and
/// actions alike with nothing changed; with the grant the console serves
/// and its actions run as that user.
#[test]
fn console_needs_https_and_basalt_admin() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, ca) = node(dir.path());
    let addr = h.https_addr().expect("https");
    let cfg = client_config(&ca, None);
    admin(&h, "security enable");
    admin(&h, "security add-user alice password=s3cret");
    admin(&h, "security add-source all 127.0.0.1/32 password");
    let alice = Some(("alice", "s3cret"));

    let plain = common::http(&h, "GET", "/console", &[], b"");
    assert_eq!(plain.status, 403);
    assert!(plain.text().contains("HTTPS"), "{}", plain.text());
    let r = https(addr, cfg.clone(), "GET", "/console", None, b"").expect("reply");
    assert_eq!(r.0, 401, "{r:?}");
    for path in ["/console", "/console/api/session", "/console/api/cluster"] {
        let r = https(addr, cfg.clone(), "GET", path, alice, b"").expect("reply");
        assert_eq!(r.0, 403, "{path} without basalt.admin: {r:?}");
    }
    let body = br#"{"action":"transfer-limit","limit":7}"#;
    let r = https(
        addr,
        cfg.clone(),
        "POST",
        "/console/api/action",
        alice,
        body,
    )
    .expect("reply");
    assert_eq!(r.0, 403, "{r:?}");

    admin(&h, "security grant basalt.admin on any to alice");
    let r = https(addr, cfg.clone(), "GET", "/console/api/cluster", alice, b"").expect("reply");
    assert_eq!(r.0, 200, "{r:?}");
    let v: serde_json::Value = serde_json::from_str(&r.1).expect("json");
    assert_ne!(v["transfer_limit"], 7, "the refused action changed nothing");
    let r = https(addr, cfg.clone(), "GET", "/console", alice, b"").expect("reply");
    assert_eq!(r.0, 200, "{r:?}");
    let r = https(addr, cfg.clone(), "GET", "/console/api/session", alice, b"").expect("reply");
    let session: serde_json::Value = serde_json::from_str(&r.1).expect("json");
    assert_eq!(
        (session["user"].as_str(), session["tls"].as_bool()),
        (Some("alice"), Some(true))
    );
    let token = session["token"].as_str().expect("token").to_string();

    // The action needs the token as well as the grant.
    let r = https(
        addr,
        cfg.clone(),
        "POST",
        "/console/api/action",
        alice,
        body,
    )
    .expect("reply");
    assert_eq!(r.0, 403, "no token: {r:?}");
    use base64::Engine as _;
    let mut s = tls_to(connect(addr), cfg.clone());
    let auth = base64::engine::general_purpose::STANDARD.encode("alice:s3cret");
    let req = format!(
        "POST /console/api/action HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Basic {auth}\r\nX-Console-Token: {token}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n",
        body.len()
    );
    s.write_all(req.as_bytes()).expect("write");
    s.write_all(body).expect("write");
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let text = String::from_utf8_lossy(&raw);
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    let r = https(addr, cfg.clone(), "GET", "/console/api/cluster", alice, b"").expect("reply");
    let v: serde_json::Value = serde_json::from_str(&r.1).expect("json");
    assert_eq!(v["transfer_limit"], 7);
}
