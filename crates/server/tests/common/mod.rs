//! Shared by the server's integration tests: the blocking PB client of the
//! PB tests (`pb_api.rs`, `bucket_types.rs`, `aae_fold.rs`):
//! `riak_pb::sync::Client` (20 s timeouts) with calls shaped for
//! assertions — I/O failures panic, an `RpbErrorResp` is `Err(errmsg)` or a
//! panic, raw frames for tests of bad input and streams; and the helpers of
//! the in-process node tests ([`runtime`], [`content`]).

#![allow(dead_code)]

use basalt_server::object::Content;
use basalt_server::pb::code;
use basalt_server::ServerHandle;
use prost::Message;
use std::net::SocketAddr;
use std::time::Duration;

/// One connection to a test node.
pub struct Client(pub riak_pb::sync::Client);

impl Client {
    /// Connects to the node's PB port.
    pub fn connect(h: &ServerHandle) -> Client {
        Client::to(h.addr())
    }

    /// Connects to the node's cluster port (admin requests).
    pub fn admin(h: &ServerHandle) -> Client {
        Client::to(h.cluster_addr())
    }

    /// Connects to `addr`.
    pub fn to(addr: SocketAddr) -> Client {
        let t = Duration::from_secs(20);
        Client(riak_pb::sync::Client::connect(addr, t, t).expect("connect"))
    }

    /// Sends one frame.
    pub fn send(&mut self, c: u8, body: &[u8]) {
        self.0.send(c, body).expect("write");
    }

    /// The next frame as it is; `None` when the connection failed or closed.
    pub fn recv(&mut self) -> Option<(u8, Vec<u8>)> {
        self.0.recv_frame().ok()
    }

    /// Sends a request, returns the reply; panics on an ErrorResp.
    pub fn call<M: Message>(&mut self, c: u8, m: &M, want: u8) -> Vec<u8> {
        match self.try_call(c, m) {
            Ok((rc, body)) => {
                assert_eq!(rc, want, "reply code");
                body
            }
            Err(e) => panic!("error reply: {e}"),
        }
    }

    /// Sends a request: the reply, or the `errmsg` of an ErrorResp.
    pub fn try_call<M: Message>(&mut self, c: u8, m: &M) -> Result<(u8, Vec<u8>), String> {
        match self.0.call(c, m) {
            Ok(reply) => Ok(reply),
            Err(riak_pb::Error::Riak { errmsg, .. }) => Err(errmsg),
            Err(e) => panic!("reply: {e}"),
        }
    }

    /// The preflist of `bucket`/`key` (of bucket type `btype`) as the
    /// node answers `RpbGetBucketKeyPreflistReq`.
    pub fn preflist(
        &mut self,
        btype: Option<&str>,
        bucket: &[u8],
        key: &[u8],
    ) -> Vec<basalt_server::pb::RpbBucketKeyPreflistItem> {
        use basalt_server::api::pb::btypes::code as bt;
        let req = basalt_server::pb::RpbGetBucketKeyPreflistReq {
            bucket: bucket.to_vec(),
            key: key.to_vec(),
            r#type: btype.map(|t| t.as_bytes().to_vec()),
        };
        let b = self.call(
            bt::GET_BUCKET_KEY_PREFLIST_REQ,
            &req,
            bt::GET_BUCKET_KEY_PREFLIST_RESP,
        );
        basalt_server::pb::RpbGetBucketKeyPreflistResp::decode(b.as_slice())
            .expect("preflist")
            .preflist
    }

    /// Pings; panics unless the reply is an empty `RpbPingResp`.
    pub fn ping(&mut self) {
        self.send(code::PING_REQ, &[]);
        assert_eq!(self.recv(), Some((code::PING_RESP, vec![])));
    }
}

/// A test node's config: loopback listeners on any free port (HTTP only
/// when `http`), ring 8, the in-memory backend, anti-entropy off, data
/// under `dir`.
pub fn test_config(dir: &std::path::Path, http: bool) -> basalt_server::Config {
    basalt_server::Config {
        data_dir: dir.to_path_buf(),
        pb_listen: "127.0.0.1:0".into(),
        cluster_listen: "127.0.0.1:0".into(),
        http_listen: if http {
            "127.0.0.1:0".into()
        } else {
            String::new()
        },
        ring_size: 8,
        backend: "memory".into(),
        aae_interval_secs: 0,
        ..basalt_server::Config::default()
    }
}

/// A node on [`test_config`] changed by `tweak`, in a new temporary
/// directory (removed when the returned guard drops).
pub fn spawn_node(
    http: bool,
    tweak: impl FnOnce(&mut basalt_server::Config),
) -> (ServerHandle, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = test_config(dir.path(), http);
    tweak(&mut c);
    (ServerHandle::spawn(c).expect("spawn"), dir)
}

/// A current-thread runtime for driving an in-process node.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime")
}

/// One sibling holding `v`.
pub fn content(v: &[u8]) -> Content {
    Content {
        value: v.to_vec(),
        value_len: v.len() as u32,
        ..Content::default()
    }
}

/// An HTTP reply: status, headers, body (de-chunked).
pub struct HttpResp {
    /// Status code.
    pub status: u16,
    /// Headers as sent.
    pub headers: Vec<(String, String)>,
    /// The body.
    pub body: Vec<u8>,
}

impl HttpResp {
    /// A header's value (case-insensitive name).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }

    /// The body as text.
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The body as JSON (panics if it is not).
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", self.text()))
    }
}

/// Where an HTTP request goes: an address, or a test node's HTTP port.
pub trait HttpAddr {
    /// The socket address.
    fn http_socket(&self) -> SocketAddr;
}

impl HttpAddr for SocketAddr {
    fn http_socket(&self) -> SocketAddr {
        *self
    }
}

impl HttpAddr for &ServerHandle {
    fn http_socket(&self) -> SocketAddr {
        self.http_addr().expect("http on")
    }
}

/// One HTTP/1.1 request (`Connection: close`) to `to`; panics on I/O
/// failures.
pub fn http(
    to: impl HttpAddr,
    method: &str,
    path: &str,
    headers: &[(&str, &str)],
    body: &[u8],
) -> HttpResp {
    use std::io::{Read, Write};
    let addr = to.http_socket();
    let mut s = std::net::TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    let mut out = format!("{method} {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n");
    for (n, v) in headers {
        out.push_str(&format!("{n}: {v}\r\n"));
    }
    out.push_str(&format!("Content-Length: {}\r\n\r\n", body.len()));
    let mut bytes = out.into_bytes();
    bytes.extend_from_slice(body);
    s.write_all(&bytes).expect("write");
    let mut raw = Vec::new();
    let _ = s.read_to_end(&mut raw);
    let split = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("header end");
    let head = String::from_utf8_lossy(&raw[..split]).into_owned();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|l| l.split(' ').nth(1))
        .and_then(|c| c.parse().ok())
        .expect("status");
    let headers: Vec<(String, String)> = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_string(), v.trim().to_string()))
        .collect();
    let mut r = HttpResp {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    };
    if r.header("transfer-encoding")
        .is_some_and(|t| t.eq_ignore_ascii_case("chunked"))
    {
        let mut b = &r.body[..];
        let mut out = Vec::new();
        loop {
            let eol = b.windows(2).position(|w| w == b"\r\n").expect("chunk line");
            let size = usize::from_str_radix(std::str::from_utf8(&b[..eol]).expect("utf8"), 16)
                .expect("chunk size");
            b = &b[eol + 2..];
            if size == 0 {
                break;
            }
            out.extend_from_slice(&b[..size]);
            assert_eq!(&b[size..size + 2], b"\r\n", "chunk end");
            b = &b[size + 2..];
        }
        r.body = out;
    }
    r
}

/// Sets `allow_mult = true` on default-type bucket `bucket` over HTTP;
/// panics unless the node answers 204.
pub fn http_allow_mult(to: impl HttpAddr, bucket: &str) {
    let r = http(
        to,
        "PUT",
        &format!("/buckets/{bucket}/props"),
        &[("Content-Type", "application/json")],
        br#"{"props":{"allow_mult":true}}"#,
    );
    assert_eq!(r.status, 204, "allow_mult on {bucket}: {}", r.text());
}

/// The config of in-process cluster node `name` (`name@127.0.0.1`): ring
/// 16, the in-memory backend, anti-entropy off, loopback listeners on any
/// port, no HTTP, data under `dir`.
pub fn cluster_node_config(name: &str, dir: &std::path::Path) -> basalt_server::Config {
    basalt_server::Config {
        node_name: format!("{name}@127.0.0.1"),
        ring_size: 16,
        ..test_config(dir, false)
    }
}

/// One admin line on node `h` (as `basalt admin` sends it); panics on an
/// error answer.
pub fn admin_line(rt: &tokio::runtime::Runtime, h: &ServerHandle, line: &str) -> String {
    rt.block_on(h.node().admin_request(line.as_bytes()))
        .unwrap_or_else(|e| panic!("{line}: {e}"))
}

/// Waits (≤ 60 s) until every node of `nodes` reports no pending transfer
/// and sees `members` valid members.
pub fn settle_cluster(rt: &tokio::runtime::Runtime, nodes: &[&ServerHandle], members: usize) {
    let t = std::time::Instant::now();
    loop {
        let done = nodes.iter().all(|h| {
            let ring = rt.block_on(h.node().admin_request(b"ring-status"));
            let status = rt.block_on(h.node().admin_request(b"member-status"));
            ring.is_ok_and(|s| s.contains("pending ownership transfers: 0"))
                && status.is_ok_and(|s| s.matches("valid").count() >= members)
        });
        if done {
            return;
        }
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "the cluster did not settle in 60 s"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Puts `value` (`content_type`, with the 2i `indexes` as (field, term))
/// under `bucket`/`key` over PB with w = 3, so every replica holds it
/// before the answer (a coverage query may then read any of them).
pub fn put_all_replicas(
    c: &mut Client,
    bucket: &str,
    key: &str,
    value: &[u8],
    content_type: &str,
    indexes: &[(&str, String)],
) {
    let req = basalt_server::pb::RpbPutReq {
        bucket: bucket.into(),
        key: Some(key.into()),
        content: basalt_server::pb::RpbContent {
            value: value.to_vec(),
            content_type: Some(content_type.as_bytes().to_vec()),
            indexes: indexes
                .iter()
                .map(|(f, t)| basalt_server::pb::RpbPair {
                    key: f.as_bytes().to_vec(),
                    value: Some(t.clone().into_bytes()),
                })
                .collect(),
            ..Default::default()
        },
        w: Some(3),
        ..Default::default()
    };
    c.call(code::PUT_REQ, &req, code::PUT_RESP);
}
