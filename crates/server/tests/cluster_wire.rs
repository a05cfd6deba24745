//! The cluster port's framing as a peer drives it: the hello, then
//! requests sent without waiting for the replies (a peer keeps up to
//! `MAX_INFLIGHT` in flight on one connection). Requests that arrive in the
//! same read as the first one — the node reads its sockets through a
//! buffer — must all be served, none dropped with the connection.

mod common;

use basalt_server::cluster::transport::{
    decode, encode, hello_frame, CLUSTER_HELLO, CLUSTER_REQ, CLUSTER_RESP,
};
use basalt_server::cluster::{Msg, Reply};
use basalt_server::vnode::request::VnodeReq;
use common::spawn_node;
use std::io::{Read, Write};
use std::time::Duration;

/// One frame off `s`: (code, body).
fn read_frame(s: &mut std::net::TcpStream) -> (u8, Vec<u8>) {
    let mut len = [0u8; 4];
    s.read_exact(&mut len).expect("frame length");
    let mut body = vec![0u8; u32::from_be_bytes(len) as usize];
    s.read_exact(&mut body).expect("frame body");
    (body[0], body[1..].to_vec())
}

#[test]
fn requests_sent_ahead_on_a_cluster_connection_are_all_served() {
    let (h, _d) = spawn_node(false, |_| {});
    let mut s = std::net::TcpStream::connect(h.cluster_addr()).expect("connect");
    s.set_read_timeout(Some(Duration::from_secs(20)))
        .expect("timeout");
    let get = |key: &str| Msg::Vnode {
        partition: 0,
        primary: true,
        forwarded: false,
        req: VnodeReq::Get {
            bucket: b"b".to_vec(),
            key: key.as_bytes().to_vec(),
        },
    };
    // The hello and three requests in one write: after the hello's answer
    // the node reads the first request and, in the same read, the others.
    let mut wire = hello_frame();
    for id in 1..=3u64 {
        wire.extend(encode(CLUSTER_REQ, id, &get(&format!("k{id}"))).expect("encode"));
    }
    s.write_all(&wire).expect("write");
    assert_eq!(read_frame(&mut s).0, CLUSTER_HELLO);
    let mut ids = Vec::new();
    for _ in 0..3 {
        let (code, body) = read_frame(&mut s);
        assert_eq!(code, CLUSTER_RESP);
        let (id, reply) = decode::<Reply>(&body).expect("reply");
        assert!(matches!(reply, Reply::Vnode(_)), "request {id}: {reply:?}");
        ids.push(id);
    }
    ids.sort_unstable();
    assert_eq!(ids, vec![1, 2, 3]);
}
