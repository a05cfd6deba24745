//! A stored Riak object (storage versions 1 and 2): the metadata alone
//! (`RiakObject::decode_metadata`, what a HEAD reads) and metadata + value
//! (`RiakObject::decode`). Checks: an object that decodes re-encodes (as
//! version 2) to bytes that decode to the same object.
#![no_main]

use basalt_fuzz::split2;
use basalt_server::object::RiakObject;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (meta, value) = split2(data);
    let _ = RiakObject::decode_metadata(meta);
    if let Ok(o) = RiakObject::decode(meta, value) {
        // encode_metadata debug-asserts that dots are covered by the clock,
        // an invariant of objects the server builds, not of decoded bytes.
        let covered = o
            .contents
            .iter()
            .all(|c| c.dot.as_ref().is_none_or(|d| d.covered_by(&o.vclock)));
        if covered {
            let again = RiakObject::decode(&o.encode_metadata(), &o.encode_value())
                .expect("re-encoded object decodes");
            assert_eq!(again, o);
        }
    }
});
