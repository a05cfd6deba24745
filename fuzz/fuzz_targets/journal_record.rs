//! A journal record as recovery and reads find it on disk: the 12-byte frame
//! header (`decode_frame_header`), the body with and without its CRC
//! (`verify_and_decode_body`, `decode_body`) and a whole record
//! (`decode_record`). An odd first byte rewrites the header's CRC to match
//! the body so the body decoder is reached. Checks: a whole record never
//! claims more bytes than it was given, and agrees with header + body.
#![no_main]

use basalt_engine::journal::record::{
    decode_body, decode_frame_header, decode_record, record_crc, verify_and_decode_body,
    RECORD_HEADER_LEN,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut buf = rest.to_vec();
    if mode & 1 == 1 && buf.len() >= RECORD_HEADER_LEN {
        let body_len = u32::try_from(buf.len() - RECORD_HEADER_LEN).unwrap_or(u32::MAX);
        buf[8..12].copy_from_slice(&body_len.to_le_bytes());
        let c = record_crc(body_len, &buf[RECORD_HEADER_LEN..]);
        buf[4..8].copy_from_slice(&c.to_le_bytes());
    }
    let _ = decode_body(&buf);
    if let Some(head) = buf.get(..RECORD_HEADER_LEN) {
        if let Ok(h) = decode_frame_header(head, buf.len() as u64) {
            assert!(h.total_len() <= buf.len() as u64);
            let body = &buf[RECORD_HEADER_LEN..RECORD_HEADER_LEN + h.body_len as usize];
            let split = verify_and_decode_body(&h, body).map(|v| v.sqn);
            let whole = decode_record(&buf);
            if let Ok((v, len)) = &whole {
                assert_eq!(*len, h.total_len());
                assert_eq!(split.as_ref().ok(), Some(&v.sqn));
            } else {
                assert!(
                    split.is_err(),
                    "header + body decode but the whole record does not"
                );
            }
        }
    }
});
