//! A tictac tree as another node or a client sends it
//! (`TicTacTree::import`). An odd first byte fixes the trailing CRC.
//! Checks: a tree that imports exports to the same bytes.
#![no_main]

use basalt_engine::TicTacTree;
use basalt_fuzz::with_crc;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let buf = with_crc(data);
    if let Ok(t) = TicTacTree::import(&buf) {
        assert_eq!(t.export(), buf, "import + export changed the bytes");
    }
});
