//! Process-level test of `basalt start`: runs the binary on a free port with
//! a temporary data directory, pings it over PB and HTTP, checks that the PB
//! port answers Basalt's cluster and admin codes as unknown codes (they live
//! on the cluster port) and keeps the connection, stores and reads a key,
//! sends SIGTERM (via `kill -TERM`, as `unsafe` is forbidden) and checks the process exits cleanly.

mod common;

use basalt_server::pb::{self, code};
use common::free_addr;
use prost::Message;
use riak_pb::sync::Client;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The next frame on `s`, as it is.
fn recv(s: &mut Client) -> (u8, Vec<u8>) {
    s.recv_frame().expect("reply")
}

#[test]
fn start_ping_put_get_sigterm() {
    let out = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(["start", "--print-default-config"])
        .output()
        .expect("run");
    assert!(String::from_utf8_lossy(&out.stdout).contains("ring_size = 64"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("delete_mode = 3000"));
    assert!(String::from_utf8_lossy(&out.stdout).contains("cluster_listen = \"127.0.0.1:8099\""));

    let dir = tempfile::tempdir().expect("tempdir");
    let (addr, http_addr, cluster_addr) = (free_addr(), free_addr(), free_addr());
    let mut child = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args([
            "start",
            "--pb-listen",
            &addr,
            "--ring-size",
            "8",
            "--node-name",
            "t@127.0.0.1",
            "--http-listen",
            &http_addr,
            "--cluster-listen",
            &cluster_addr,
        ])
        .arg("--data-dir")
        .arg(dir.path())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn");
    let deadline = Instant::now() + Duration::from_secs(30);
    let t = Duration::from_secs(10);
    let mut s = loop {
        match Client::connect(&addr, t, t) {
            Ok(s) => break s,
            Err(_) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            Err(e) => panic!("node did not start: {e}"),
        }
    };
    s.send(code::PING_REQ, &[]).expect("w");
    assert_eq!(recv(&mut s), (code::PING_RESP, vec![]));
    // Basalt's own codes are not served on the client port: Riak's answer
    // to an unknown code, and the connection still answers a ping.
    for c in [
        code::basalt::CLUSTER_REQ,
        code::basalt::ADMIN_TYPE_CREATE_REQ,
        code::basalt::ADMIN_CLUSTER_REQ,
    ] {
        s.send(c, b"\0\0\0\0\0\0\0\x01member-status").expect("w");
        let (rc, body) = recv(&mut s);
        assert_eq!(rc, code::ERROR_RESP);
        let e = pb::RpbErrorResp::decode(body.as_slice()).expect("d");
        assert_eq!(e.errmsg, format!("Unknown message code: {c}").into_bytes());
        s.send(code::PING_REQ, &[]).expect("w");
        assert_eq!(recv(&mut s), (code::PING_RESP, vec![]));
    }
    // The cluster port serves the admin codes (and ping).
    let mut a = Client::connect(&cluster_addr, t, t).expect("cluster connect");
    a.send(code::PING_REQ, &[]).expect("w");
    assert_eq!(recv(&mut a), (code::PING_RESP, vec![]));
    a.send(code::basalt::ADMIN_CLUSTER_REQ, b"member-status")
        .expect("w");
    let (rc, body) = recv(&mut a);
    assert_eq!(rc, code::basalt::ADMIN_CLUSTER_RESP);
    assert!(String::from_utf8_lossy(&body).contains("t@127.0.0.1"));
    // The HTTP API of the same node: curl-like GET /ping.
    let mut h = TcpStream::connect(&http_addr).expect("http connect");
    h.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("t");
    h.write_all(b"GET /ping HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
        .expect("w");
    let mut resp = String::new();
    h.read_to_string(&mut resp).expect("read");
    assert!(resp.starts_with("HTTP/1.1 200"), "{resp}");
    assert!(resp.ends_with("\r\n\r\nOK"), "{resp}");
    let put = pb::RpbPutReq {
        bucket: b"b".to_vec(),
        key: Some(b"k".to_vec()),
        content: pb::RpbContent {
            value: b"v".to_vec(),
            ..Default::default()
        },
        ..Default::default()
    };
    s.send_msg(code::PUT_REQ, &put).expect("w");
    assert_eq!(recv(&mut s).0, code::PUT_RESP);
    let get = pb::RpbGetReq {
        bucket: b"b".to_vec(),
        key: b"k".to_vec(),
        ..Default::default()
    };
    s.send_msg(code::GET_REQ, &get).expect("w");
    let (c, body) = recv(&mut s);
    assert_eq!(c, code::GET_RESP);
    assert_eq!(
        pb::RpbGetResp::decode(body.as_slice()).expect("d").content[0].value,
        b"v"
    );

    // SIGTERM through kill(1): the workspace forbids `unsafe` (libc::kill),
    // and `Child::kill` would send SIGKILL.
    let rc = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("kill");
    assert!(rc.success());
    let deadline = Instant::now() + Duration::from_secs(30);
    let status = loop {
        if let Some(st) = child.try_wait().expect("wait") {
            break st;
        }
        assert!(Instant::now() < deadline, "node did not stop on SIGTERM");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert!(status.success(), "exit status {status:?}");
    assert!(dir.path().join("vnodes").join("0").exists());
}
