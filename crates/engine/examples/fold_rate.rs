//! Measures fold rates: loads N small objects (default 1,000,000; first
//! argument overrides, second argument is the value size, default 32 bytes),
//! closes and reopens the store, then times a key fold, a head fold, and a
//! head fold with journal check over one bucket, and prints keys/s.
//!
//! ```text
//! cargo run --release -p basalt-engine --example fold_rate -- 1000000 32
//! ```

use basalt_engine::fold::FoldOptions;
use basalt_engine::{Config, SnapshotOptions, Store};
use std::ops::ControlFlow;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut args = std::env::args().skip(1);
    let n: u64 = args
        .next()
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(1_000_000);
    let value_len: usize = args.next().map(|a| a.parse()).transpose()?.unwrap_or(32);
    let dir = tempfile::tempdir()?;
    let value = vec![0x5Au8; value_len];
    {
        let store = Store::open(Config::new(dir.path()))?;
        let t = Instant::now();
        for i in 0..n {
            store.put(b"bucket", format!("key-{i:010}").as_bytes(), &value, b"")?;
        }
        store.close()?;
        let s = t.elapsed().as_secs_f64();
        println!(
            "load: {n} objects of {value_len} B in {s:.2} s ({:.0} puts/s)",
            n as f64 / s
        );
    }
    let store = Store::open(Config::new(dir.path()))?;
    let levels: Vec<usize> = store.stats().levels.iter().map(|l| l.files).collect();
    println!("after reopen: files per level {levels:?}");
    let rate = |what: &str, count: u64, t: Instant| {
        let s = t.elapsed().as_secs_f64();
        println!(
            "{what}: {count} keys in {s:.3} s = {:.0} keys/s",
            count as f64 / s
        );
    };
    for round in 0..2 {
        println!("round {round}");
        let t = Instant::now();
        let snap = store.snapshot(SnapshotOptions::bucket(b"bucket"))?;
        let mut count = 0u64;
        snap.fold_keys(b"bucket", None, |_| {
            count += 1;
            ControlFlow::Continue(())
        })?;
        rate("  key fold", count, t);
        for journal_check in [false, true] {
            let t = Instant::now();
            let opts = FoldOptions {
                journal_check,
                ..FoldOptions::default()
            };
            let mut count = 0u64;
            let mut bytes = 0u64;
            snap.fold_heads(Some(b"bucket"), None, &opts, |_, _, h| {
                count += 1;
                bytes += h.size;
                ControlFlow::Continue(())
            })?;
            rate(
                &format!("  head fold (journal_check={journal_check})"),
                count,
                t,
            );
            assert_eq!(bytes, count * value_len as u64);
        }
    }
    Ok(())
}
