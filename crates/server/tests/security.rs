//! Security on the client PB port, against a real listener: STARTTLS
//! (rustls, a certificate made here with rcgen), `RpbAuthReq`, and every
//! request code's permission.
//!
//! The scan: with security off, every code 0..=255 is sent with an empty
//! body on a fresh connection; each the port serves (anything but "Unknown
//! message code") must have a rule in `api::pb::auth::rule` — so a code
//! added without a permission fails here. With security on, each served
//! code must be refused before STARTTLS, then before authentication, then
//! without a grant (all but the open ones: ping, client id, server info).
//!
//! The back-off: five wrong passwords of one user from one address lock
//! that pair out (refused at once, no password hashed, counted), while
//! the same user from another loopback address and another user from the
//! same address still log in; after a cool-down the right password works
//! and resets the count.

mod common;

use basalt_server::api::pb::auth::{rule, Rule};
use basalt_server::config::Config;
use basalt_server::pb::{self, code};
use basalt_server::ServerHandle;
use common::Client;
use prost::Message;
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::time::Duration;

/// A node with TLS from a fresh self-signed certificate for 127.0.0.1,
/// and that certificate (DER) for the clients.
fn node(dir: &std::path::Path) -> (ServerHandle, Vec<u8>) {
    let cert = rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()])
        .expect("certificate");
    std::fs::write(dir.join("cert.pem"), cert.cert.pem()).expect("cert");
    std::fs::write(dir.join("key.pem"), cert.key_pair.serialize_pem()).expect("key");
    let config = Config {
        tls_certfile: dir.join("cert.pem").display().to_string(),
        tls_keyfile: dir.join("key.pem").display().to_string(),
        ..common::test_config(&dir.join("data"), false)
    };
    let h = ServerHandle::spawn(config).expect("node");
    (h, cert.cert.der().to_vec())
}

/// The first reply frame to `(c, body)` on a fresh plain connection.
fn first_reply(addr: SocketAddr, c: u8, body: &[u8]) -> Option<(u8, Vec<u8>)> {
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write_frame(&mut s, c, body);
    read_frame(&mut s)
}

fn write_frame(w: &mut impl Write, c: u8, body: &[u8]) {
    w.write_all(&pb::frame(c, body)).expect("write");
    w.flush().expect("flush");
}

fn read_frame(r: &mut impl Read) -> Option<(u8, Vec<u8>)> {
    let mut len = [0u8; 4];
    r.read_exact(&mut len).ok()?;
    let len = u32::from_be_bytes(len) as usize;
    let mut buf = vec![0u8; len];
    r.read_exact(&mut buf).ok()?;
    let (c, body) = buf.split_first()?;
    Some((*c, body.to_vec()))
}

fn errmsg(reply: &Option<(u8, Vec<u8>)>) -> String {
    match reply {
        Some((0, body)) => pb::RpbErrorResp::decode(body.as_slice())
            .map(|e| String::from_utf8_lossy(&e.errmsg).into_owned())
            .unwrap_or_default(),
        _ => String::new(),
    }
}

fn admin(h: &ServerHandle, line: &str) -> String {
    let mut c = Client::admin(h);
    c.send(code::basalt::ADMIN_CLUSTER_REQ, line.as_bytes());
    let reply = c.recv();
    assert_eq!(
        reply.as_ref().map(|r| r.0),
        Some(code::basalt::ADMIN_CLUSTER_RESP),
        "{line}: {}",
        errmsg(&reply)
    );
    String::from_utf8_lossy(&reply.map(|r| r.1).unwrap_or_default()).into_owned()
}

/// A TLS connection after STARTTLS, trusting `cert`.
fn starttls(
    addr: SocketAddr,
    cert: &[u8],
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    starttls_from(cert, TcpStream::connect(addr).expect("connect"))
}

/// A plain connection to `addr` from the local address `from` (any
/// 127.0.0.0/8 address reaches a loopback listener on Linux).
fn connect_from(addr: SocketAddr, from: std::net::IpAddr) -> TcpStream {
    let rt = common::runtime();
    let s = rt
        .block_on(async {
            let sock = tokio::net::TcpSocket::new_v4()?;
            sock.bind(SocketAddr::new(from, 0))?;
            sock.connect(addr).await
        })
        .expect("connect from");
    let s = s.into_std().expect("std socket");
    s.set_nonblocking(false).expect("blocking");
    s
}

/// STARTTLS on the plain connection `s`, trusting `cert`.
fn starttls_from(
    cert: &[u8],
    mut s: TcpStream,
) -> rustls::StreamOwned<rustls::ClientConnection, TcpStream> {
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write_frame(&mut s, code::START_TLS, &[]);
    assert_eq!(
        read_frame(&mut s),
        Some((code::START_TLS, vec![])),
        "STARTTLS acknowledged"
    );
    let mut roots = rustls::RootCertStore::empty();
    roots
        .add(rustls::pki_types::CertificateDer::from(cert.to_vec()))
        .expect("root");
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let config = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth();
    let name = rustls::pki_types::ServerName::try_from("127.0.0.1").expect("name");
    let conn = rustls::ClientConnection::new(Arc::new(config), name).expect("client");
    rustls::StreamOwned::new(conn, s)
}

fn auth(s: &mut (impl Read + Write), user: &str, password: &str) -> Option<(u8, Vec<u8>)> {
    let req = pb::RpbAuthReq {
        user: user.as_bytes().to_vec(),
        password: password.as_bytes().to_vec(),
    };
    write_frame(s, code::AUTH_REQ, &req.encode_to_vec());
    read_frame(s)
}

const SKIP: [u8; 2] = [code::AUTH_REQ, code::START_TLS];

#[test]
fn every_served_code_has_a_permission_and_is_refused_without_credentials() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, cert) = node(dir.path());
    // Security off: which codes does the client port serve?
    let mut served = Vec::new();
    for c in 0..=255u8 {
        if SKIP.contains(&c) {
            continue;
        }
        let reply = first_reply(h.addr(), c, &[]);
        if errmsg(&reply) == format!("Unknown message code: {c}") {
            continue;
        }
        assert!(
            rule(c).is_some(),
            "code {c} is served without a rule in api::pb::auth::rule: {reply:?}"
        );
        served.push(c);
    }
    assert!(served.len() >= 20, "served codes: {served:?}");

    assert!(admin(&h, "security enable").contains("security enabled"));
    for &c in &served {
        let reply = first_reply(h.addr(), c, &[]);
        assert_eq!(
            errmsg(&reply),
            "Security is enabled, please STARTTLS first",
            "code {c}"
        );
    }
    // AuthReq before STARTTLS.
    let mut s = TcpStream::connect(h.addr()).expect("connect");
    assert_eq!(
        errmsg(&auth(&mut s, "alice", "pw")),
        "Security is enabled, please STARTTLS first"
    );

    // TLS, not authenticated.
    let mut t = starttls(h.addr(), &cert);
    for &c in &served {
        write_frame(&mut t, c, &[]);
        assert_eq!(
            errmsg(&read_frame(&mut t)),
            "Security is enabled, please authenticate first",
            "code {c}"
        );
    }
    // Users and sources; bad credentials.
    admin(&h, "security add-user alice password=s3cret");
    admin(&h, "security add-source all 127.0.0.1/32 password");
    assert_eq!(
        errmsg(&auth(&mut t, "alice", "wrong")),
        "Authentication failed"
    );
    assert_eq!(
        errmsg(&auth(&mut t, "mallory", "s3cret")),
        "Authentication failed"
    );
    assert_eq!(
        auth(&mut t, "alice", "s3cret"),
        Some((code::AUTH_RESP, vec![]))
    );
    // Authenticated, no grant: only the open codes run.
    for &c in &served {
        write_frame(&mut t, c, &[]);
        let reply = read_frame(&mut t);
        let msg = errmsg(&reply);
        match rule(c) {
            Some(Rule::Open) => assert!(!msg.starts_with("Permission denied"), "code {c}: {msg}"),
            _ => assert!(
                msg.starts_with("Permission denied: User 'alice' does not have"),
                "code {c}: {reply:?}"
            ),
        }
        // A streamed reply's later frames are not read: start afresh.
        if rule(c) == Some(Rule::Open) {
            t = starttls(h.addr(), &cert);
            assert_eq!(
                auth(&mut t, "alice", "s3cret"),
                Some((code::AUTH_RESP, vec![]))
            );
        }
    }
    // A grant on one bucket: PUT and GET there, not elsewhere.
    admin(
        &h,
        "security grant riak_kv.get,riak_kv.put on default/b to alice",
    );
    let put = |bucket: &[u8]| pb::RpbPutReq {
        bucket: bucket.to_vec(),
        key: Some(b"k".to_vec()),
        content: pb::RpbContent {
            value: b"v".to_vec(),
            ..Default::default()
        },
        ..Default::default()
    };
    write_frame(&mut t, code::PUT_REQ, &put(b"b").encode_to_vec());
    assert_eq!(read_frame(&mut t).map(|r| r.0), Some(code::PUT_RESP));
    let get = |bucket: &[u8]| pb::RpbGetReq {
        bucket: bucket.to_vec(),
        key: b"k".to_vec(),
        ..Default::default()
    };
    write_frame(&mut t, code::GET_REQ, &get(b"b").encode_to_vec());
    let reply = read_frame(&mut t).expect("get reply");
    assert_eq!(reply.0, code::GET_RESP);
    let got = pb::RpbGetResp::decode(reply.1.as_slice()).expect("decode");
    assert_eq!(
        got.content.first().map(|c| c.value.clone()),
        Some(b"v".to_vec())
    );
    write_frame(&mut t, code::PUT_REQ, &put(b"other").encode_to_vec());
    assert_eq!(
        errmsg(&read_frame(&mut t)),
        "Permission denied: User 'alice' does not have 'riak_kv.put' on \"other\""
    );
    // A group's grant reaches its members.
    admin(&h, "security add-group readers");
    admin(&h, "security alter-user alice groups=readers");
    admin(&h, "security grant riak_kv.get on default to readers");
    write_frame(&mut t, code::GET_REQ, &get(b"other").encode_to_vec());
    assert_eq!(read_frame(&mut t).map(|r| r.0), Some(code::GET_RESP));
    // Garbage instead of a TLS handshake: that connection is closed, the
    // node serves the others.
    let mut g = TcpStream::connect(h.addr()).expect("connect");
    g.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    write_frame(&mut g, code::START_TLS, &[]);
    assert_eq!(read_frame(&mut g), Some((code::START_TLS, vec![])));
    g.write_all(b"GET / HTTP/1.0\r\n\r\nnot a TLS hello at all")
        .expect("garbage");
    let mut rest = Vec::new();
    let _ = g.read_to_end(&mut rest);
    write_frame(&mut t, code::PING_REQ, &[]);
    assert_eq!(read_frame(&mut t), Some((code::PING_RESP, vec![])));
    let refused = h
        .node()
        .cluster_counters()
        .into_iter()
        .find(|(n, _, _)| *n == "security_refused_total")
        .map_or(0, |(_, v, _)| v);
    assert!(
        refused as usize >= 2 * served.len(),
        "refused counted: {refused}"
    );
    // Security off again: plain requests run.
    admin(&h, "security disable");
    let reply = first_reply(h.addr(), code::PING_REQ, &[]);
    assert_eq!(reply, Some((code::PING_RESP, vec![])));
    h.shutdown().expect("shutdown");
}

#[test]
fn bad_security_input_gets_clear_errors() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, _) = node(dir.path());
    let refused = |line: &str| {
        let mut c = Client::admin(&h);
        c.send(code::basalt::ADMIN_CLUSTER_REQ, line.as_bytes());
        errmsg(&c.recv())
    };
    assert!(refused("security add-source alice 10.0.0.0/8 password").contains("no user"));
    admin(&h, "security add-user alice");
    assert!(refused("security add-source alice 10.0.0.300/8 password").contains("bad CIDR"));
    assert!(refused("security add-source alice 10.0.0.0/8 magic").contains("bad source method"));
    assert!(refused("security grant riak_kv.fly on any to alice").contains("unknown permission"));
    assert!(refused("security grant riak_kv.get on nosuch/ to alice").contains("bad grant scope"));
    assert!(
        refused("security grant riak_kv.get on nosuch to alice")
            .contains("no bucket type \"nosuch\""),
        "{}",
        refused("security grant riak_kv.get on nosuch to alice")
    );
    assert!(refused("security grant riak_kv.get on nosuch/b to alice").contains("no bucket type"));
    admin(&h, "security grant riak_kv.get on default/b to alice");
    assert!(refused("security add-user al\u{7}ice").contains("control"));
    assert!(refused("security frobnicate").contains("unknown security command"));
    // STARTTLS twice is refused on the TLS connection; AuthReq with
    // security off says so.
    let mut c = Client::connect(&h);
    let r = c.0.call(code::AUTH_REQ, &pb::RpbAuthReq::default());
    assert!(
        matches!(r, Err(riak_pb::Error::Riak { ref errmsg, .. }) if errmsg == "Security not enabled"),
        "{r:?}"
    );
    c.ping();
    h.shutdown().expect("shutdown");
}

#[test]
fn failed_logins_back_off_per_user_and_address() {
    use basalt_server::security::logins::Policy;
    use std::sync::atomic::Ordering;
    let dir = tempfile::tempdir().expect("tempdir");
    let (h, cert) = node(dir.path());
    let addr = h.addr();
    let sec = h.node().security();
    // A cool-down long enough that the test never races its end.
    sec.set_login_policy(Policy {
        first_lockout: Duration::from_secs(60),
        max_lockout: Duration::from_secs(600),
        forget_after: Duration::from_secs(600),
        ..Policy::DEFAULT
    });
    admin(&h, "security add-user alice password=right");
    admin(&h, "security add-user bob password=bob-pw");
    admin(&h, "security add-source all 127.0.0.0/8 password");
    admin(&h, "security enable");
    let refused0 = sec.refused.load(Ordering::Relaxed);

    let mut t = starttls(addr, &cert);
    for i in 0..5 {
        let r = auth(&mut t, "alice", "wrong");
        assert_eq!(errmsg(&r), "Authentication failed", "attempt {i}");
    }
    // The sixth, even with the right password: refused at once.
    let started = std::time::Instant::now();
    let r = auth(&mut t, "alice", "right");
    let msg = errmsg(&r);
    assert!(
        msg.starts_with("too many failed logins for user alice from 127.0.0.1; retry in "),
        "{msg}"
    );
    assert!(msg.ends_with(" s"), "{msg}");
    assert_eq!(sec.lockouts.load(Ordering::Relaxed), 1);
    assert_eq!(sec.refused.load(Ordering::Relaxed), refused0 + 6);
    // Still refused on a new connection from the same address, and an
    // unknown password does not get hashed either.
    let mut t2 = starttls(addr, &cert);
    assert!(errmsg(&auth(&mut t2, "alice", "right")).starts_with("too many failed logins"));
    assert_eq!(sec.lockouts.load(Ordering::Relaxed), 2);
    assert!(
        started.elapsed() < Duration::from_secs(30),
        "refusals in a cool-down do not wait"
    );
    // Another user from the same address logs in.
    let mut b = starttls(addr, &cert);
    assert_eq!(
        auth(&mut b, "bob", "bob-pw"),
        Some((code::AUTH_RESP, vec![]))
    );
    write_frame(&mut b, code::PING_REQ, &[]);
    assert_eq!(read_frame(&mut b), Some((code::PING_RESP, vec![])));
    // The same user from another address logs in.
    let from = "127.0.0.2".parse().expect("ip");
    let mut a2 = starttls_from(&cert, connect_from(addr, from));
    assert_eq!(
        auth(&mut a2, "alice", "right"),
        Some((code::AUTH_RESP, vec![]))
    );
    // The lock-out shows in `security status`.
    let status = admin(&h, "security status");
    assert!(
        status.contains("logins refused in a cool-down after failures (this node): 2"),
        "{status}"
    );

    // A short cool-down: after it, the right password works and resets
    // the count (four more failures do not lock the pair out).
    sec.set_login_policy(Policy {
        first_lockout: Duration::from_millis(300),
        ..Policy::DEFAULT
    });
    let mut c = starttls(addr, &cert);
    for _ in 0..5 {
        assert_eq!(
            errmsg(&auth(&mut c, "bob", "nope")),
            "Authentication failed"
        );
    }
    std::thread::sleep(Duration::from_millis(400));
    assert_eq!(
        auth(&mut c, "bob", "bob-pw"),
        Some((code::AUTH_RESP, vec![]))
    );
    let mut c = starttls(addr, &cert);
    for i in 0..4 {
        let r = auth(&mut c, "bob", "nope");
        assert_eq!(
            errmsg(&r),
            "Authentication failed",
            "after the reset, attempt {i}"
        );
    }
    assert_eq!(
        auth(&mut c, "bob", "bob-pw"),
        Some((code::AUTH_RESP, vec![]))
    );
    h.shutdown().expect("shutdown");
}
