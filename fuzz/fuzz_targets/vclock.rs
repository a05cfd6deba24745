//! A stored or client-sent vector clock (`VClock::decode`, the bytes of
//! `RpbPutReq.vclock` and of the object metadata). Checks: a clock that
//! decodes re-encodes to a form that decodes to the same clock, and that
//! form is canonical (encoding it again gives the same bytes).
#![no_main]

use basalt_server::object::vclock::VClock;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(v) = VClock::decode(data) {
        let enc = v.encode();
        let again = VClock::decode(&enc).expect("re-encoded clock decodes");
        assert_eq!(again, v);
        assert_eq!(again.encode(), enc, "encoding is not canonical");
    }
});
