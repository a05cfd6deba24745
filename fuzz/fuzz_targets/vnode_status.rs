//! A vnode status file (`<dir>.vnode`, `vnode_id::parse`), read at every
//! vnode start. Checks (inside `fuzz_api::vnode_status`): a status that
//! parses renders back to text that parses to the same status.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = basalt_server::fuzz_api::vnode_status(text);
    }
});
