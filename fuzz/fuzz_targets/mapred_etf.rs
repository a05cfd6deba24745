//! MapReduce jobs sent as Erlang terms (`mapred::etf`, what riakc sends in
//! an `RpbMapRedReq`): `parse` and the bounded `scan::decode` never panic,
//! however the bytes nest or lie about their sizes; whatever decodes is
//! read as JSON (every mode), printed as `~p`, and written back as results
//! of every shape; a job that parses encodes results for each of its
//! phases.
#![no_main]

use basalt_server::mapred::etf::{self, scan, value, Shape};
use libfuzzer_sys::fuzz_target;

const SHAPES: [Shape; 5] = [
    Shape::Plain,
    Shape::Inputs,
    Shape::Link,
    Shape::Pairs,
    Shape::ErlangMap,
];

fuzz_target!(|data: &[u8]| {
    let job = etf::parse(data);
    if let Ok(t) = scan::decode(data, &scan::JOB) {
        let _ = value::show(&t);
        for mode in [value::Mode::Data, value::Mode::Arg, value::Mode::Text] {
            let j = value::to_json(&t, mode);
            let _ = value::to_term(&j);
            for s in SHAPES {
                let _ = etf::encode(std::slice::from_ref(&j), s);
            }
        }
        let _ = value::arg_to_json(&t, true);
    }
    if let Ok(job) = job {
        for s in etf::shapes(&job) {
            let _ = etf::encode(&[], s);
        }
    }
});
