//! The node's JSON state files carry a format version and a node refuses a
//! newer one by name: `cluster.json`, `bucket_types.json` and
//! `security.json` written by a newer Basalt (`{"format": 2, ...}`) stop
//! `Node::open` with a message naming the file, the format found and the
//! format this build reads, and the file is left as it was; a file written
//! before formats were recorded (the bare state) still opens. On the wire,
//! the cluster port answers a hello of another protocol version with an
//! error naming both versions and closes, and a hello of its own version
//! with its version.
//!
//! Method: open and close a node (memory backend) on a scratch directory so
//! it writes its files, then rewrite one file and open again; for the wire,
//! raw frames to a running node's cluster port.

mod common;

use basalt_server::cluster::transport::{CLUSTER_HELLO, PROTOCOL_VERSION};
use basalt_server::config::Config;
use basalt_server::pb::code;
use basalt_server::Node;
use prost::Message;
use std::path::Path;

fn open(dir: &Path) -> Result<Node, String> {
    Node::open(Config::ephemeral(dir)).map_err(|e| e.to_string())
}

fn refused(dir: &Path, file: &str) {
    let path = dir.join(file);
    let before = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
    let msg = open(dir)
        .err()
        .unwrap_or_else(|| panic!("{file} of format 2 was read"));
    for part in [
        path.display().to_string().as_str(),
        "format version 2",
        "this build reads format 1",
        "newer Basalt",
    ] {
        assert!(msg.contains(part), "{msg:?} lacks {part:?}");
    }
    let after = std::fs::read(&path).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(before, after, "{file} left untouched");
}

#[test]
fn newer_state_files_are_refused_by_name_and_older_ones_read() {
    let d = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    open(d.path()).unwrap_or_else(|e| panic!("{e}")).close();
    let path = d.path().join("cluster.json");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{e}"));
    let v: serde_json::Value = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(v["format"], 1, "{text}");
    assert!(v["state"]["ring_size"].is_number(), "{text}");

    // Newer: refused, the file kept.
    let mut newer = v.clone();
    newer["format"] = 2.into();
    std::fs::write(&path, newer.to_string()).unwrap_or_else(|e| panic!("{e}"));
    refused(d.path(), "cluster.json");

    // Written before formats were recorded: the bare state opens.
    std::fs::write(&path, v["state"].to_string()).unwrap_or_else(|e| panic!("{e}"));
    open(d.path()).unwrap_or_else(|e| panic!("{e}")).close();

    for file in ["bucket_types.json", "security.json"] {
        let p = d.path().join(file);
        std::fs::write(&p, r#"{"format": 2, "state": {}}"#).unwrap_or_else(|e| panic!("{e}"));
        refused(d.path(), file);
        std::fs::remove_file(&p).unwrap_or_else(|e| panic!("{e}"));
    }
    open(d.path()).unwrap_or_else(|e| panic!("{e}")).close();
}

#[test]
fn the_cluster_port_refuses_another_protocol_version_by_name() {
    let (h, _dir) = common::spawn_node(false, |_| {});
    let mut c = common::Client::admin(&h);
    c.send(CLUSTER_HELLO, &99u32.to_be_bytes());
    let (rc, body) = c.recv().unwrap_or_else(|| panic!("no answer to the hello"));
    assert_eq!(rc, code::ERROR_RESP);
    let e = basalt_server::pb::RpbErrorResp::decode(&body[..]).unwrap_or_else(|e| panic!("{e}"));
    let msg = String::from_utf8_lossy(&e.errmsg).into_owned();
    assert!(
        msg.contains("cluster protocol version 99") && msg.contains("it speaks version 1"),
        "{msg}"
    );
    assert_eq!(c.recv(), None, "closed after the refusal");

    let mut c = common::Client::admin(&h);
    c.send(CLUSTER_HELLO, &PROTOCOL_VERSION.to_be_bytes());
    let ack = c.recv();
    assert_eq!(
        ack,
        Some((CLUSTER_HELLO, PROTOCOL_VERSION.to_be_bytes().to_vec()))
    );
}
