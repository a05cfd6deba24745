//! The server's continuations, opaque base64 that clients send back: a 2i
//! continuation (`coordinator::decode_continuation`) and a CS bucket fold
//! continuation (`decode_cs_continuation`). Checks: what decodes re-encodes
//! to a continuation that decodes the same.
#![no_main]

use basalt_server::fuzz_api as f;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        if let Some((term, key)) = f::kv_continuation(s) {
            let again = f::kv_encode_continuation(&term, &key);
            assert_eq!(f::kv_continuation(&again), Some((term, key)));
        }
    }
    if let Some(key) = f::cs_continuation(data) {
        let again = f::cs_encode_continuation(&key);
        assert_eq!(f::cs_continuation(&again), Some(key));
    }
});
