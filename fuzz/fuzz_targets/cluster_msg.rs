//! A cluster-port frame body: `transport::decode::<Msg>` (what a node
//! serves) and `decode::<Reply>` (what a node reads back). Checks: a message
//! that decodes re-encodes and decodes again with the same id.
#![no_main]

use basalt_server::cluster::transport::{decode, encode};
use basalt_server::cluster::{Msg, Reply};
use libfuzzer_sys::fuzz_target;

fn body_of(frame: &[u8]) -> &[u8] {
    frame.get(5..).unwrap_or_default()
}

fuzz_target!(|data: &[u8]| {
    if let Ok((id, m)) = decode::<Msg>(data) {
        let f = encode(252, id, &m).expect("re-encodes");
        let (id2, _) = decode::<Msg>(body_of(&f)).expect("re-encoded Msg decodes");
        assert_eq!(id, id2);
    }
    if let Ok((id, r)) = decode::<Reply>(data) {
        let f = encode(253, id, &r).expect("re-encodes");
        let (id2, _) = decode::<Reply>(body_of(&f)).expect("re-encoded Reply decodes");
        assert_eq!(id, id2);
    }
});
