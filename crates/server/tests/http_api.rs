//! Riak HTTP API tests: a node with PB and HTTP listeners (`ServerHandle`),
//! driven with raw HTTP/1.1 over `std::net::TcpStream` (`Connection: close`).
//! Covers /ping, the resource map, /stats, object GET/HEAD/PUT/POST/DELETE
//! with headers, vclock round trips vs siblings, 2i headers and bad input.

use basalt_backend::IndexQuery;
use basalt_server::config::Config;
use basalt_server::pb::RpbBucketProps;
use basalt_server::ServerHandle;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

fn start() -> (ServerHandle, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = Config {
        data_dir: dir.path().to_path_buf(),
        pb_listen: "127.0.0.1:0".into(),
        http_listen: "127.0.0.1:0".into(),
        ring_size: 8,
        backend: "memory".into(),
        ..Config::default()
    };
    c.limits.max_object_bytes = 4096;
    (ServerHandle::spawn(c).expect("spawn"), dir)
}

struct Resp {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Resp {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

fn req(h: &ServerHandle, method: &str, path: &str, headers: &[(&str, &str)], body: &[u8]) -> Resp {
    let addr = h.http_addr().expect("http on");
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
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
    let headers = lines
        .filter_map(|l| l.split_once(": "))
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect();
    Resp {
        status,
        headers,
        body: raw[split + 4..].to_vec(),
    }
}

fn get(h: &ServerHandle, path: &str) -> Resp {
    req(h, "GET", path, &[], b"")
}

#[test]
fn ping_root_and_stats() {
    let (h, _d) = start();
    let r = get(&h, "/ping");
    assert_eq!((r.status, r.text().as_str()), (200, "OK\n"));
    let r = req(&h, "GET", "/", &[("Accept", "application/json")], b"");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("application/json"));
    let map: serde_json::Value = serde_json::from_slice(&r.body).expect("json");
    for m in [
        "riak_kv_wm_buckets",
        "riak_kv_wm_bucket_type",
        "riak_kv_wm_ping",
        "riak_kv_wm_stats",
    ] {
        assert!(map.get(m).is_some(), "{m} in {map}");
    }
    assert!(r.header("link").is_some_and(|l| l.contains("/ping")));
    let r = get(&h, "/");
    assert!(r.text().contains("<a href=\"/stats\">riak_kv_wm_stats</a>"));

    req(
        &h,
        "PUT",
        "/buckets/s/keys/k",
        &[("Content-Type", "text/plain")],
        b"v",
    );
    get(&h, "/buckets/s/keys/k");
    get(&h, "/buckets/s/keys/k");
    req(&h, "DELETE", "/buckets/s/keys/k", &[], b"");
    let r = get(&h, "/stats");
    assert_eq!(r.status, 200);
    let s: serde_json::Value = serde_json::from_slice(&r.body).expect("json");
    assert_eq!(s["riak_kv_version"], basalt_server::SERVER_VERSION);
    assert_eq!(s["node_puts_total"], 1);
    assert_eq!(s["node_deletes_total"], 1);
    assert_eq!(s["node_gets_total"], 3); // two GETs + the delete's read
    assert_eq!(s["vnode_queue_lengths"].as_array().map(Vec::len), Some(8));
}

#[test]
fn object_round_trip_with_headers() {
    let (h, _d) = start();
    let r = get(&h, "/buckets/b/keys/k");
    assert_eq!((r.status, r.text().as_str()), (404, "not found\n"));
    let r = req(
        &h,
        "PUT",
        "/buckets/b/keys/k?w=quorum&dw=1",
        &[
            ("Content-Type", "text/plain; charset=utf-8"),
            ("X-Riak-Meta-Color", "blue"),
            ("X-Riak-Index-Email_bin", "a@x.org, b@x.org"),
            ("X-Riak-Index-age_int", "42"),
        ],
        b"hello",
    );
    assert_eq!(r.status, 204);
    let r = get(&h, "/buckets/b/keys/k?r=one");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "hello");
    assert_eq!(r.header("content-type"), Some("text/plain; charset=utf-8"));
    assert_eq!(r.header("x-riak-meta-color"), Some("blue"));
    assert_eq!(r.header("x-riak-index-email_bin"), Some("a@x.org, b@x.org"));
    assert_eq!(r.header("x-riak-index-age_int"), Some("42"));
    assert!(r
        .header("etag")
        .is_some_and(|e| e.len() > 2 && e.starts_with('"')));
    assert!(r
        .header("last-modified")
        .is_some_and(|d| d.ends_with("GMT")));
    assert!(r.header("x-riak-vclock").is_some());
    let head = req(&h, "HEAD", "/buckets/b/keys/k", &[], b"");
    assert_eq!(head.status, 200);
    assert!(head.body.is_empty());
    assert_eq!(head.header("x-riak-meta-color"), Some("blue"));

    // The index headers are visible to a 2i query (the PB API's path).
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("rt");
    let page = rt
        .block_on(h.node().index_query(IndexQuery {
            bucket: b"b".to_vec(),
            field: b"age_int".to_vec(),
            start: b"40".to_vec(),
            end: Some(b"50".to_vec()),
            return_terms: false,
            term_regex: None,
            max_results: None,
            continuation: None,
        }))
        .expect("2i");
    assert_eq!(page.results.len(), 1);
    assert_eq!(page.results[0].key, b"k");

    // Typed form with the default type, and returnbody.
    let r = req(
        &h,
        "PUT",
        "/types/default/buckets/b/keys/k?returnbody=true",
        &[
            ("Content-Type", "application/json"),
            ("X-Riak-Vclock", r.header("x-riak-vclock").unwrap_or("")),
        ],
        b"{}",
    );
    assert_eq!((r.status, r.text().as_str()), (200, "{}"));
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(get(&h, "/types/default/buckets/b/keys/k").text(), "{}");

    assert_eq!(req(&h, "DELETE", "/buckets/b/keys/k", &[], b"").status, 204);
    assert_eq!(get(&h, "/buckets/b/keys/k").status, 404);
    assert_eq!(req(&h, "DELETE", "/buckets/b/keys/k", &[], b"").status, 404);
}

#[test]
fn post_generates_a_key() {
    let (h, _d) = start();
    let r = req(
        &h,
        "POST",
        "/buckets/p/keys",
        &[("Content-Type", "text/plain")],
        b"gen",
    );
    assert_eq!(r.status, 201);
    let loc = r.header("location").expect("location").to_string();
    assert!(
        loc.starts_with("/buckets/p/keys/") && loc.len() > 16,
        "{loc}"
    );
    assert_eq!(get(&h, &loc).text(), "gen");
    let r = req(
        &h,
        "POST",
        "/types/default/buckets/p/keys?returnbody=true",
        &[("Content-Type", "text/plain")],
        b"gen2",
    );
    assert_eq!((r.status, r.text().as_str()), (201, "gen2"));
    assert!(r
        .header("location")
        .is_some_and(|l| l.starts_with("/types/default/buckets/p/keys/")));
}

#[test]
fn vclock_round_trip_replaces_instead_of_siblings() {
    let (h, _d) = start();
    h.node()
        .props()
        .set(
            b"m",
            &RpbBucketProps {
                allow_mult: Some(true),
                ..Default::default()
            },
        )
        .expect("props");
    let ct = [("Content-Type", "text/plain")];
    req(&h, "PUT", "/buckets/m/keys/k", &ct, b"one");
    let vc = get(&h, "/buckets/m/keys/k")
        .header("x-riak-vclock")
        .expect("vclock")
        .to_string();
    // With the clock: an update, no sibling.
    let with = [
        ("Content-Type", "text/plain"),
        ("X-Riak-Vclock", vc.as_str()),
    ];
    assert_eq!(
        req(&h, "PUT", "/buckets/m/keys/k", &with, b"two").status,
        204
    );
    let r = get(&h, "/buckets/m/keys/k");
    assert_eq!((r.status, r.text().as_str()), (200, "two"));
    // Without: a sibling.
    req(&h, "PUT", "/buckets/m/keys/k", &ct, b"three");
    let r = get(&h, "/buckets/m/keys/k");
    assert_eq!(r.status, 300);
    let lines: Vec<String> = r.text().lines().map(str::to_string).collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert_eq!(lines[0], "Siblings:");
    let one = get(&h, &format!("/buckets/m/keys/k?vtag={}", lines[1]));
    assert_eq!(one.status, 200);
    // Resolving with the 300's clock leaves one value.
    let vc = r.header("x-riak-vclock").expect("vclock").to_string();
    let with = [
        ("Content-Type", "text/plain"),
        ("X-Riak-Vclock", vc.as_str()),
    ];
    req(&h, "PUT", "/buckets/m/keys/k", &with, b"merged");
    let r = get(&h, "/buckets/m/keys/k");
    assert_eq!((r.status, r.text().as_str()), (200, "merged"));
}

#[test]
fn bad_input_is_rejected_and_the_node_keeps_serving() {
    let (h, _d) = start();
    let ct = ("Content-Type", "text/plain");
    let cases: Vec<(Resp, u16, &str)> = vec![
        (
            get(&h, "/buckets/b/keys/k?r=most"),
            400,
            "r query parameter",
        ),
        (
            req(&h, "PUT", "/buckets/b/keys/k?w=lots", &[ct], b"v"),
            400,
            "w query parameter",
        ),
        (
            req(&h, "DELETE", "/buckets/b/keys/k?rw=x", &[], b""),
            400,
            "rw query parameter",
        ),
        (
            req(
                &h,
                "PUT",
                "/buckets/b/keys/k",
                &[ct, ("X-Riak-Index-foo", "1")],
                b"v",
            ),
            400,
            "Could not parse index fields",
        ),
        (
            req(
                &h,
                "PUT",
                "/buckets/b/keys/k",
                &[ct, ("X-Riak-Index-n_int", "1, x")],
                b"v",
            ),
            400,
            "is not an integer",
        ),
        (
            req(
                &h,
                "PUT",
                "/buckets/b/keys/k",
                &[ct, ("X-Riak-Vclock", "!!!")],
                b"v",
            ),
            400,
            "X-Riak-Vclock",
        ),
        (
            req(&h, "PUT", "/buckets/b/keys/k", &[], b"v"),
            400,
            "Content-Type",
        ),
        (
            req(&h, "PUT", "/buckets/b/keys/k", &[ct], &[b'x'; 5000]),
            413,
            "too large",
        ),
        (
            req(&h, "PUT", "/types/nope/buckets/b/keys/k", &[ct], b"v"),
            400,
            "nope",
        ),
    ];
    for (r, status, reason) in cases {
        assert_eq!(r.status, status, "{}", r.text());
        assert!(r.text().contains(reason), "{reason} in {}", r.text());
        assert_eq!(r.header("content-type"), Some("text/plain"));
    }
    assert_eq!(get(&h, "/buckets/b/keys/k").status, 404);
    assert_eq!(get(&h, "/ping").text(), "OK\n");
}
