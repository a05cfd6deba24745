//! The engine's 2i decoders: a client's continuation
//! (`index::decode_continuation`, base64 from the network), the index
//! changes a journal record carries (`decode_changes`) and a stored term
//! (`decode_term`, both kinds). Checks: a continuation that decodes
//! re-encodes to one that decodes the same.
#![no_main]

use basalt_engine::fuzz_api as f;
use basalt_engine::index::{decode_changes, decode_term, FieldKind};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&tag, rest)) = data.split_first() else {
        return;
    };
    let tag = u32::from(tag);
    if let Ok(s) = std::str::from_utf8(rest) {
        if let Ok((term, key)) = f::index_continuation(s, tag) {
            let again = f::index_encode_continuation(tag, &term, &key);
            let back = f::index_continuation(&again, tag).expect("re-encoded continuation decodes");
            assert_eq!(back, (term, key));
        }
    }
    let _ = decode_changes(rest);
    let _ = decode_term(FieldKind::Bin, rest);
    let _ = decode_term(FieldKind::Int, rest);
});
