//! The HTTP API's hand-written header parsers: a store request's headers
//! (`content_from_request`: Content-Type and charset, `Link` via
//! `parse_links`, `X-Riak-Meta-*`, `X-Riak-Index-*`) and the
//! `X-Riak-Vclock` base64 (`decode_vclock`). Input: header lines
//! `name: value` separated by newlines, the part after a blank line is the
//! body. Checks: a parsed Link header's links are all non-empty.
#![no_main]

use basalt_server::fuzz_api as f;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (head, body) = match data.windows(2).position(|w| w == b"\n\n") {
        Some(i) => (&data[..i], &data[i + 2..]),
        None => (data, &[][..]),
    };
    let mut headers = Vec::new();
    for line in head.split(|&b| b == b'\n') {
        let Some(i) = line.iter().position(|&b| b == b':') else {
            continue;
        };
        let value = line[i + 1..].strip_prefix(b" ").unwrap_or(&line[i + 1..]);
        headers.push((&line[..i], value));
        if line[..i].eq_ignore_ascii_case(b"x-riak-vclock") {
            let _ = f::http_vclock(value);
        }
        if line[..i].eq_ignore_ascii_case(b"link") {
            if let Ok(v) = std::str::from_utf8(value) {
                if let Ok(links) = f::http_links(v) {
                    for (b, k, _) in links {
                        assert!(!b.is_empty() && !k.is_empty(), "empty link bucket or key");
                    }
                }
            }
        }
    }
    let _ = f::http_content(&headers, body.to_vec());
});
