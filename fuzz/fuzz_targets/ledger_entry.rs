//! A ledger entry's value (`entry::LedgerValue::decode`, what SST blocks
//! and the memtable hold). Checks: a value that decodes re-encodes to
//! exactly the bytes it consumed.
#![no_main]

use basalt_engine::codec::Reader;
use basalt_engine::entry::LedgerValue;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut r = Reader::new(data);
    if let Ok(v) = LedgerValue::decode(&mut r) {
        let used = data.len() - r.remaining();
        let mut enc = Vec::new();
        v.encode_into(&mut enc);
        assert_eq!(enc.len(), v.encoded_len());
        assert_eq!(
            &enc[..],
            &data[..used],
            "re-encoding differs from the input"
        );
    }
});
