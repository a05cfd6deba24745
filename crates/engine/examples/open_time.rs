//! Time to open a store whose active journal file is large, with the clean
//! close's checkpoint and without it (forced scan), page cache dropped
//! before each open when permitted (root).
//!
//! `cargo run --release -p basalt-engine --example open_time -- [MIB]`

use basalt_engine::{Config, Store};
use std::time::Instant;

fn drop_caches() -> &'static str {
    let ok = std::process::Command::new("sh")
        .args(["-c", "sync && echo 1 > /proc/sys/vm/drop_caches"])
        .status()
        .is_ok_and(|s| s.success());
    if ok {
        "cold"
    } else {
        "warm (could not drop the page cache)"
    }
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mib: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(200);
    let dir = std::env::temp_dir().join("basalt-open-time");
    let _ = std::fs::remove_dir_all(&dir);
    let cfg = || Config::new(&dir);
    let s = Store::open(cfg())?;
    let mut x = 0x2545_F491_4F6C_DD1Du64;
    let value: Vec<u8> = (0..8192)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            x as u8
        })
        .collect();
    let n = mib * 1024 * 1024 / 8192;
    for i in 0..n {
        let mut v = value.clone();
        v[..8].copy_from_slice(&i.to_le_bytes());
        s.put(b"b", format!("k{i}").as_bytes(), &v, b"")?;
    }
    s.close()?;
    drop(s);
    for with_checkpoint in [true, false] {
        if !with_checkpoint {
            for e in std::fs::read_dir(dir.join("journal"))? {
                let p = e?.path();
                if p.extension().is_some_and(|x| x == "aix") {
                    std::fs::remove_file(p)?;
                }
            }
        }
        let cache = drop_caches();
        let t = Instant::now();
        let s = Store::open(cfg())?;
        let took = t.elapsed();
        let scanned = s
            .stats()
            .counters
            .iter()
            .find(|(k, _)| *k == "journal_open_scan_bytes")
            .map_or(0, |(_, v)| *v);
        println!(
            "{n} objects ({mib} MiB), {cache} page cache, checkpoint {}: open {:.1} ms, scanned {} MiB",
            if with_checkpoint { "used" } else { "removed" },
            took.as_secs_f64() * 1000.0,
            scanned / (1024 * 1024)
        );
        s.close()?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}
