//! A PB connection's bytes: frames read with the size limit (the blocking
//! reader, which shares `check_header`/`split` with the server's async one),
//! then the body of each frame decoded as the message its code names, for
//! every request code the client and cluster ports accept. Checks: a frame
//! never exceeds the limit, and a message that decodes re-encodes to bytes
//! that decode to the same message.
#![no_main]

use libfuzzer_sys::fuzz_target;
use prost::Message;
use riak_pb::code::{self, basalt};
use riak_pb::*;

fn round_trip<M: Message + Default + PartialEq + std::fmt::Debug>(body: &[u8]) {
    if let Ok(m) = M::decode(body) {
        let again = M::decode(m.encode_to_vec().as_slice()).expect("re-encoded message decodes");
        assert_eq!(again, m, "decode(encode(m)) != m");
    }
}

fn body(c: u8, b: &[u8]) {
    match c {
        code::SET_CLIENT_ID_REQ => round_trip::<RpbSetClientIdReq>(b),
        code::GET_REQ => round_trip::<RpbGetReq>(b),
        code::PUT_REQ => round_trip::<RpbPutReq>(b),
        code::DEL_REQ => round_trip::<RpbDelReq>(b),
        code::LIST_BUCKETS_REQ => round_trip::<RpbListBucketsReq>(b),
        code::LIST_KEYS_REQ => round_trip::<RpbListKeysReq>(b),
        code::GET_BUCKET_REQ => round_trip::<RpbGetBucketReq>(b),
        code::SET_BUCKET_REQ => round_trip::<RpbSetBucketReq>(b),
        code::RESET_BUCKET_REQ => round_trip::<RpbResetBucketReq>(b),
        code::INDEX_REQ => round_trip::<RpbIndexReq>(b),
        code::CS_BUCKET_REQ => round_trip::<RpbCsBucketReq>(b),
        code::GET_BUCKET_TYPE_REQ => round_trip::<RpbGetBucketTypeReq>(b),
        code::SET_BUCKET_TYPE_REQ => round_trip::<RpbSetBucketTypeReq>(b),
        code::GET_BUCKET_KEY_PREFLIST_REQ => round_trip::<RpbGetBucketKeyPreflistReq>(b),
        basalt::ADMIN_TYPE_CREATE_REQ
        | basalt::ADMIN_TYPE_ACTIVATE_REQ
        | basalt::ADMIN_TYPE_LIST_REQ
        | basalt::ADMIN_TYPE_STATUS_REQ => {
            round_trip::<basalt_server::api::pb::btypes::BasaltBucketTypeReq>(b)
        }
        basalt::CLUSTER_REQ => {
            let _ = basalt_server::cluster::transport::decode::<basalt_server::cluster::Msg>(b);
        }
        // Replies a client decodes.
        code::GET_RESP => round_trip::<RpbGetResp>(b),
        code::PUT_RESP => round_trip::<RpbPutResp>(b),
        code::ERROR_RESP => round_trip::<RpbErrorResp>(b),
        code::INDEX_RESP => round_trip::<RpbIndexResp>(b),
        code::LIST_KEYS_RESP => round_trip::<RpbListKeysResp>(b),
        code::GET_BUCKET_RESP => round_trip::<RpbGetBucketResp>(b),
        _ => {}
    }
}

fuzz_target!(|data: &[u8]| {
    // The first byte picks a limit: small ones make the limit check fire.
    let Some((&l, rest)) = data.split_first() else {
        return;
    };
    let max = match l % 4 {
        0 => DEFAULT_MAX_FRAME,
        1 => 1,
        2 => 64,
        _ => 4096,
    };
    let mut r = std::io::Cursor::new(rest);
    for _ in 0..16 {
        match riak_pb::sync::read_frame(&mut r, max) {
            Ok(Some((c, b))) => {
                assert!(
                    b.len() < max,
                    "frame of {} bytes over the limit {max}",
                    b.len() + 1
                );
                body(c, &b);
            }
            Ok(None) | Err(_) => break,
        }
    }
});
