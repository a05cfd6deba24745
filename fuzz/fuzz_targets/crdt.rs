//! A stored data-type value (`Crdt::decode`, the value of an
//! `application/riak_*` sibling) and a client's context
//! (`Clock::from_context`). Both are checksummed; the first byte picks the
//! mode: odd appends a correct CRC32C so the fuzzer reaches the structure
//! decoders. Checks: a value that decodes re-encodes to bytes that decode
//! to the same value, and merged with itself is observed as itself (value
//! and context).
#![no_main]

use basalt_server::crdt::clock::Clock;
use basalt_server::crdt::Crdt;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut bytes = rest.to_vec();
    if mode & 1 == 1 {
        let crc = crc32c(&bytes);
        bytes.extend_from_slice(&crc.to_le_bytes());
    }
    if let Ok(v) = Crdt::decode(&bytes) {
        let enc = v.encode();
        let again = Crdt::decode(&enc).expect("re-encoded value decodes");
        assert_eq!(again, v);
        let _ = v.value();
        let _ = v.context();
        let twice = v.merge(&v).expect("same type");
        assert_eq!(twice.observed(), v.observed(), "merge is not idempotent");
    }
    let _ = Clock::from_context(&bytes);
});

/// CRC32C (Castagnoli), bitwise: the fuzz crate does not depend on `crc32c`.
fn crc32c(b: &[u8]) -> u32 {
    let mut crc = !0u32;
    for &x in b {
        crc ^= u32::from(x);
        for _ in 0..8 {
            crc = if crc & 1 == 1 { (crc >> 1) ^ 0x82F6_3B78 } else { crc >> 1 };
        }
    }
    !crc
}
