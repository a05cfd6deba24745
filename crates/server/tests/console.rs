//! The web console over plain HTTP with security off (`crate::console`):
//! the page and its assets come from the binary; the JSON views answer;
//! the live stream sends samples whose figures follow the load; actions
//! need the session token and a same-host origin, answer with the node's
//! words, and a refused one changes nothing; the stream cap holds. The
//! HTTPS side (security on: plain refused, 401, 403 without
//! `basalt.admin`, nothing changed) is in `security_tls.rs`.

mod common;

use basalt_server::limits::CONSOLE_MAX_STREAMS;
use basalt_server::ServerHandle;
use serde_json::Value;
use std::io::{BufRead, BufReader, Write};
use std::net::TcpStream;
use std::time::{Duration, Instant};

fn get_json(h: &ServerHandle, path: &str) -> Value {
    let r = common::http(h, "GET", path, &[], b"");
    assert_eq!(r.status, 200, "{path}: {}", r.text());
    serde_json::from_slice(&r.body).unwrap_or_else(|e| panic!("{path}: {e}: {}", r.text()))
}

fn action(h: &ServerHandle, token: &str, body: &str) -> (u16, Value) {
    let r = common::http(
        h,
        "POST",
        "/console/api/action",
        &[
            ("x-console-token", token),
            ("content-type", "application/json"),
        ],
        body.as_bytes(),
    );
    let v = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
    (r.status, v)
}

/// Opens the event stream; the reader after the response head.
fn open_stream(h: &ServerHandle) -> (u16, BufReader<TcpStream>) {
    let addr = h.http_addr().expect("http");
    let mut s = TcpStream::connect(addr).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(10)))
        .expect("timeout");
    s.write_all(
        b"GET /console/api/events HTTP/1.1\r\nHost: x\r\nAccept: text/event-stream\r\n\r\n",
    )
    .expect("write");
    let mut r = BufReader::new(s);
    let mut line = String::new();
    r.read_line(&mut line).expect("status line");
    let status = line
        .split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    loop {
        line.clear();
        if r.read_line(&mut line).unwrap_or(0) == 0 || line == "\r\n" {
            break;
        }
    }
    (status, r)
}

/// The next `sample` event's data.
fn next_sample(r: &mut BufReader<TcpStream>) -> Value {
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut line = String::new();
    while Instant::now() < deadline {
        line.clear();
        if r.read_line(&mut line).unwrap_or(0) == 0 {
            break;
        }
        // Chunked framing lines and comments pass by; data lines carry JSON.
        if let Some(d) = line.trim_end().strip_prefix("data: ") {
            if let Ok(v) = serde_json::from_str::<Value>(d) {
                return v;
            }
        }
    }
    panic!("no sample within 10 s");
}

#[test]
fn console_views_stream_and_actions() {
    let dir = tempfile::tempdir().expect("tempdir");
    // leveled, so the node view has the engine's figures (memtable budget).
    let config = basalt_server::Config {
        backend: "leveled".into(),
        memtable_mb: 16,
        ..common::test_config(dir.path(), true)
    };
    let h = ServerHandle::spawn(config).expect("node");

    // The page and its assets, from the binary.
    let page = common::http(&h, "GET", "/console", &[], b"");
    assert_eq!(page.status, 200);
    assert!(page.text().contains("/console/assets/console.js"));
    assert!(page
        .header("content-security-policy")
        .is_some_and(|c| c.contains("default-src 'self'")));
    let js = common::http(&h, "GET", "/console/assets/uplot.js", &[], b"");
    assert!(js.status == 200 && js.text().contains("uPlot"));
    assert_eq!(
        common::http(&h, "GET", "/console/assets/nope.js", &[], b"").status,
        404
    );

    // The views.
    let session = get_json(&h, "/console/api/session");
    let token = session["token"].as_str().expect("token").to_string();
    assert_eq!(token.len(), 32);
    assert_eq!(session["security"], false);
    let cluster = get_json(&h, "/console/api/cluster");
    assert_eq!(cluster["members"]["members"][0]["status"], "valid");
    assert_eq!(cluster["owners"].as_array().map(Vec::len), Some(8));
    let limit = cluster["transfer_limit"].as_u64().expect("limit");
    // Writes and a read: they are served on the request's task (the
    // write in the vnode's write turn, the read from memory), and the
    // vnode view counts them.
    let put = common::http(
        &h,
        "PUT",
        "/buckets/c/keys/k",
        &[("content-type", "text/plain")],
        b"v",
    );
    assert!(put.status < 300, "{}", put.status);
    // More writes: each replica's write is made on the request's task
    // unless its vnode's thread is busy at that moment (e.g. with a tree
    // rebuild's step), so a few are sure to count.
    for i in 0..8 {
        let put = common::http(
            &h,
            "PUT",
            &format!("/buckets/c/keys/more{i}"),
            &[("content-type", "text/plain")],
            b"v",
        );
        assert!(put.status < 300, "{}", put.status);
    }
    assert_eq!(
        common::http(&h, "GET", "/buckets/c/keys/k", &[], b"").status,
        200
    );
    let node = get_json(&h, "/console/api/node");
    assert_eq!(node["vnodes"].as_array().map(Vec::len), Some(8));
    let sum = |field: &str| -> u64 {
        node["vnodes"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|v| v[field].as_u64().expect(field))
            .sum()
    };
    assert!(sum("reads_here") > 0, "{node}");
    assert!(
        sum("writes_here") > 0,
        "the PUTs above were made on their requests' tasks: {node}"
    );
    assert!(node["process"]["rss_bytes"].as_u64().unwrap_or(0) > 0);
    assert!(node["totals"]["ledger_level_files"].is_array());
    // The node's memtable budget (`memtable_mb`) and what its memtables hold.
    assert_eq!(
        node["totals"]["memtable_budget_bytes"].as_u64(),
        Some(16 << 20),
        "{node}"
    );
    assert!(node["totals"]["memtable_bytes"].is_u64(), "{node}");
    assert!(get_json(&h, "/console/api/aae")["vnodes"].is_number());
    assert!(get_json(&h, "/console/api/repl")["sinks"].is_array());
    assert!(get_json(&h, "/console/api/security")["users"]["users"].is_array());
    let reports = get_json(&h, "/console/api/reports");
    assert!(reports["dir"].is_null(), "{reports}");
    assert_eq!(
        common::http(&h, "GET", "/console/reports/index.html", &[], b"").status,
        404
    );

    // The live stream: samples arrive; PUTs between two show in the rate.
    let (status, mut stream) = open_stream(&h);
    assert_eq!(status, 200);
    let first = next_sample(&mut stream);
    assert!(first["ops"]["get"]["rate"].is_number(), "{first}");
    let start = Instant::now();
    let mut seen = 0.0;
    while start.elapsed() < Duration::from_secs(8) && seen == 0.0 {
        for i in 0..20 {
            let path = format!("/buckets/b/keys/k{i}");
            let r = common::http(&h, "PUT", &path, &[("content-type", "text/plain")], b"v");
            assert!(r.status < 300, "{}", r.text());
        }
        seen = next_sample(&mut stream)["ops"]["put"]["rate"]
            .as_f64()
            .unwrap_or(0.0);
    }
    assert!(seen > 0.0, "the PUT rate moved");
    assert_eq!(get_json(&h, "/console/api/node")["console_streams"], 1);

    // The stream cap: the first CONSOLE_MAX_STREAMS are served, one more
    // is refused.
    let mut held = vec![stream];
    for _ in 1..CONSOLE_MAX_STREAMS {
        let (s, r) = open_stream(&h);
        assert_eq!(s, 200);
        held.push(r);
    }
    assert_eq!(open_stream(&h).0, 503, "over the cap");
    drop(held);

    // Actions: no token, a wrong origin, a bad body: refused, nothing changed.
    let (s, v) = action(&h, "", r#"{"action":"transfer-limit","limit":5}"#);
    assert_eq!(s, 403, "{v}");
    let r = common::http(
        &h,
        "POST",
        "/console/api/action",
        &[("x-console-token", &token), ("origin", "http://elsewhere")],
        br#"{"action":"transfer-limit","limit":5}"#,
    );
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(action(&h, &token, "not json").0, 400);
    assert_eq!(action(&h, &token, r#"{"action":"nope"}"#).0, 400);
    assert_eq!(
        get_json(&h, "/console/api/cluster")["transfer_limit"].as_u64(),
        Some(limit)
    );
    // The node refuses: the reason comes back, nothing changed.
    let (s, v) = action(&h, &token, r#"{"action":"transfer-limit","limit":99}"#);
    assert_eq!(s, 409, "{v}");
    assert!(v["error"].as_str().unwrap_or("").contains("16"), "{v}");
    let (s, v) = action(&h, &token, r#"{"action":"leave","node":"ghost@nowhere"}"#);
    assert_eq!(s, 409, "{v}");
    assert!(
        v["error"].as_str().unwrap_or("").contains("not a member"),
        "{v}"
    );
    assert_eq!(
        get_json(&h, "/console/api/cluster")["plan"]["staged"]
            .as_array()
            .map(Vec::len),
        Some(0)
    );
    // Done: the node's answer.
    let (s, v) = action(&h, &token, r#"{"action":"transfer-limit","limit":"5"}"#);
    assert_eq!((s, v["ok"].as_bool()), (200, Some(true)), "{v}");
    assert_eq!(
        get_json(&h, "/console/api/cluster")["transfer_limit"].as_u64(),
        Some(5)
    );
    // A bucket type: created, activated, then usable by a client.
    let (s, v) = action(
        &h,
        &token,
        r#"{"action":"type-create","name":"fromconsole","props":{"n_val":1}}"#,
    );
    assert_eq!(s, 200, "{v}");
    let (s, v) = action(
        &h,
        &token,
        r#"{"action":"type-create","name":"bad","props":{"n_val":"x"}}"#,
    );
    assert_eq!(s, 400, "{v}");
    let (s, v) = action(
        &h,
        &token,
        r#"{"action":"type-activate","name":"fromconsole"}"#,
    );
    assert_eq!(s, 200, "{v}");
    let types = get_json(&h, "/console/api/types");
    let t = types["types"]
        .as_array()
        .and_then(|a| a.iter().find(|t| t["name"] == "fromconsole"))
        .cloned()
        .expect("listed");
    assert_eq!(
        (t["active"].as_bool(), t["props"]["n_val"].as_u64()),
        (Some(true), Some(1))
    );
    assert!(!types["types"]
        .as_array()
        .is_some_and(|a| a.iter().any(|t| t["name"] == "bad")));
    let put = common::http(
        &h,
        "PUT",
        "/types/fromconsole/buckets/b/keys/k",
        &[("content-type", "text/plain")],
        b"hello",
    );
    assert!(put.status == 204 || put.status == 200, "{}", put.text());
    let got = common::http(&h, "GET", "/types/fromconsole/buckets/b/keys/k", &[], b"");
    assert_eq!(got.text(), "hello");
}
