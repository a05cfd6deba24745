//! The journal's `MANIFEST` file (`journal::manifest::Manifest::decode`).
//! Checks: a manifest that decodes re-encodes to the same bytes.
#![no_main]

use basalt_engine::journal::manifest::Manifest;
use basalt_fuzz::with_crc;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let buf = with_crc(data);
    if let Ok(m) = Manifest::decode(&buf) {
        let again = Manifest::decode(&m.encode()).expect("re-encoded manifest decodes");
        assert_eq!(again, m);
    }
});
