//! Helpers shared by the engine's integration tests.

use basalt_engine::Store;
use std::path::Path;

/// `.jnl` files in the journal directory, not counting an unlisted empty
/// one: the spare the flusher makes ahead of a roll (its 16-byte header).
#[allow(dead_code)] // not every test binary counts files
pub fn jnl_files_on_disk(dir: &Path, s: &Store) -> usize {
    let listed: Vec<std::path::PathBuf> = s
        .stats()
        .journal_files
        .into_iter()
        .map(|f| f.path)
        .collect();
    std::fs::read_dir(dir.join("journal"))
        .expect("test setup")
        .map(|e| e.expect("test setup").path())
        .filter(|p| p.extension().is_some_and(|x| x == "jnl"))
        .filter(|p| listed.contains(p) || std::fs::metadata(p).is_ok_and(|m| m.len() > 16))
        .count()
}

/// Compacts the journal until no run is worth it; returns the number of runs
/// that did work. Each run must write no more than it read.
#[allow(dead_code)] // not every test binary compacts
pub fn compact_all(s: &Store) -> usize {
    for n in 0..100 {
        let r = s.compact_journal().expect("compact");
        if !r.compacted {
            return n;
        }
        assert!(r.bytes_out <= r.bytes_in, "{r:?}");
    }
    panic!("compaction never settled");
}
