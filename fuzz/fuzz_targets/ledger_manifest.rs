//! The ledger's manifest file (`ledger::manifest::Manifest::decode`).
//! Checks: a manifest that decodes re-encodes to bytes that decode the same.
#![no_main]

use basalt_engine::ledger::manifest::Manifest;
use basalt_fuzz::with_crc;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let buf = with_crc(data);
    if let Ok(m) = Manifest::decode(&buf) {
        let again = Manifest::decode(&m.encode()).expect("re-encoded manifest decodes");
        assert_eq!(again, m);
    }
});
