//! The HTTP listener's protocol limits, against a real node over raw TCP:
//! a client that trickles its headers is cut off after
//! `http_header_timeout_ms`; connections beyond `http_max_connections` are
//! closed at accept; a body that is not valid chunked encoding answers 400
//! (not 413). The node keeps serving throughout.

use basalt_server::config::Config;
use basalt_server::ServerHandle;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn start(tweak: impl FnOnce(&mut Config)) -> (ServerHandle, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = Config {
        data_dir: dir.path().to_path_buf(),
        pb_listen: "127.0.0.1:0".into(),
        http_listen: "127.0.0.1:0".into(),
        cluster_listen: "127.0.0.1:0".into(),
        ring_size: 8,
        backend: "memory".into(),
        ..Config::default()
    };
    tweak(&mut c);
    (ServerHandle::spawn(c).expect("spawn"), dir)
}

fn connect(h: &ServerHandle) -> TcpStream {
    let s = TcpStream::connect(h.http_addr().expect("http addr")).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    s
}

/// Sends `req` and reads until the server closes or 5 s pass.
fn exchange(s: &mut TcpStream, req: &str) -> String {
    s.write_all(req.as_bytes()).expect("write");
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while let Ok(n) = s.read(&mut buf) {
        if n == 0 {
            break;
        }
        out.extend_from_slice(&buf[..n]);
        if out.windows(4).any(|w| w == b"\r\n\r\n") && req.contains("keep-alive") {
            break; // the reply's head (and a short body) is in
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn ping(h: &ServerHandle) -> String {
    exchange(
        &mut connect(h),
        "GET /ping HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n",
    )
}

/// True if the server closed `s` (EOF or reset) within `within`.
fn closed_within(s: &mut TcpStream, within: Duration) -> bool {
    s.set_read_timeout(Some(within)).expect("timeout");
    let mut buf = [0u8; 256];
    loop {
        match s.read(&mut buf) {
            Ok(0) => return true,
            Ok(_) => continue, // e.g. a 408 before closing
            Err(e) => {
                return !matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                )
            }
        }
    }
}

#[test]
fn a_client_that_trickles_its_headers_is_cut_off() {
    let (h, _dir) = start(|c| c.limits.http_header_timeout_ms = 300);
    let mut slow = connect(&h);
    slow.write_all(b"GET /ping HTTP/1.1\r\nHost: t\r\n")
        .expect("write");
    let t = Instant::now();
    assert!(closed_within(&mut slow, Duration::from_secs(3)));
    assert!(t.elapsed() < Duration::from_secs(3));
    assert!(ping(&h).starts_with("HTTP/1.1 200"));
}

#[test]
fn connections_over_the_limit_are_closed_and_the_rest_served() {
    let (h, _dir) = start(|c| c.limits.http_max_connections = 2);
    let mut held: Vec<TcpStream> = (0..2).map(|_| connect(&h)).collect();
    for s in &mut held {
        let r = exchange(
            s,
            "GET /ping HTTP/1.1\r\nHost: t\r\nConnection: keep-alive\r\n\r\n",
        );
        assert!(r.starts_with("HTTP/1.1 200"), "{r}");
    }
    let mut third = connect(&h);
    assert!(
        closed_within(&mut third, Duration::from_secs(3)),
        "third connection served"
    );
    drop(held);
    // The slots free up as the held connections close.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !ping(&h).starts_with("HTTP/1.1 200") {
        assert!(Instant::now() < deadline, "no slot came free");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn a_malformed_chunked_body_is_a_bad_request() {
    let (h, _dir) = start(|_| {});
    let r = exchange(
        &mut connect(&h),
        "PUT /buckets/b/keys/k HTTP/1.1\r\nHost: t\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\nzz\r\nabc\r\n0\r\n\r\n",
    );
    assert!(r.starts_with("HTTP/1.1 400"), "{r}");
    assert!(ping(&h).starts_with("HTTP/1.1 200"));
}
