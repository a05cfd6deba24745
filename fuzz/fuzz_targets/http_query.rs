//! The HTTP API's query-string handling: `query_pairs` (split and
//! percent-decode), the object request's parameters (quorums, booleans,
//! vtag), the 2i request's parameters, and `check_terms` on a 2i path's
//! field and terms (the first three pairs' values stand for them); the
//! `_int` terms it accepts are integers of any size in canonical text.
#![no_main]

use basalt_engine::intterm;
use basalt_server::fuzz_api as f;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(q) = std::str::from_utf8(data) else {
        return;
    };
    let pairs = f::http_query(q);
    let _ = f::http_object_params(&pairs);
    let _ = f::http_index_params(&pairs);
    let mut vals = pairs.iter().map(|(_, v)| v.clone());
    if let (Some(field), Some(start)) = (vals.next(), vals.next()) {
        if let Ok((s, e)) = f::http_index_terms(&field, start, vals.next()) {
            if field.ends_with("_int") {
                // `_int` terms are integers of any size, in canonical text.
                let canonical = |t: &str| intterm::canonical(t.as_bytes()).as_deref() == Some(t);
                assert!(canonical(&s), "{s}");
                assert!(e.as_deref().is_none_or(canonical), "{e:?}");
            }
        }
    }
});
