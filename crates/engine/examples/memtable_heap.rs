//! How much heap a memtable really takes against the bytes it counts
//! (`Memtable::bytes`, what `memtable_bytes` and a node's `memtable_mb`
//! budget are measured in).
//!
//! For each entry shape (ledger key bytes, metadata bytes) a fresh process
//! (this example run again with the shape as arguments) inserts `ENTRIES`
//! fresh keys into one memtable and reads its own resident anonymous
//! memory (`RssAnon` in `/proc/self/status`) before and after: the heap the
//! memtable really takes, allocator overhead included (mimalloc, as in a node). It prints that per
//! entry beside the memtable's own count per entry, and their ratio.
//!
//! ```text
//! cargo run --release -p basalt-engine --example memtable_heap
//! ```

use basalt_engine::entry::{LedgerValue, Status};
use basalt_engine::ledger::memtable::Memtable;
use std::process::Command;

/// The allocator a node runs with (`crates/cli`), so the figures are a
/// node's.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Resident anonymous memory of this process, in bytes.
fn rss_anon() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("read /proc/self/status");
    let line = status
        .lines()
        .find(|l| l.starts_with("RssAnon:"))
        .expect("RssAnon line");
    let kib: u64 = line
        .split_whitespace()
        .nth(1)
        .and_then(|v| v.parse().ok())
        .expect("RssAnon value");
    kib * 1024
}

const ENTRIES: usize = 200_000;

/// One shape in this process: prints its table row.
fn measure(key_len: usize, meta_len: usize) {
    let before = rss_anon();
    let m = Memtable::new();
    for i in 0..ENTRIES {
        let mut key = format!("{i:020}").into_bytes();
        key.resize(key_len, b'k');
        let value = LedgerValue {
            sqn: i as u64 + 1,
            status: Status::Active,
            expires_at: 0,
            value_hash: i as u64,
            size: 1000,
            last_modified_us: 0,
            metadata: vec![1u8; meta_len],
        };
        m.insert(key, value);
    }
    let heap = rss_anon().saturating_sub(before) as f64 / ENTRIES as f64;
    let counted = m.bytes() as f64 / ENTRIES as f64;
    println!(
        "| {key_len} | {meta_len} | {counted:.0} | {heap:.0} | {:.2} |",
        heap / counted
    );
}

fn main() {
    let args: Vec<usize> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("KEY_BYTES META_BYTES"))
        .collect();
    if let [key_len, meta_len] = args[..] {
        return measure(key_len, meta_len);
    }
    println!("| key B | metadata B | counted B/entry | resident B/entry | resident / counted |");
    println!("|---:|---:|---:|---:|---:|");
    let me = std::env::current_exe().expect("current_exe");
    // (40, 250) is near a node's ledger entry in the Test Pilot run (4 MiB
    // memtables held ~11.9k entries: ~350 counted bytes each).
    for (key_len, meta_len) in [(20, 0), (40, 100), (40, 250), (60, 1000)] {
        let out = Command::new(&me)
            .args([key_len.to_string(), meta_len.to_string()])
            .output()
            .expect("run a shape");
        print!("{}", String::from_utf8_lossy(&out.stdout));
    }
}
