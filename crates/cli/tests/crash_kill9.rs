//! Crash test: `basalt kv --sync import` is SIGKILLed mid-stream, repeatedly,
//! on the same data directory, and nothing it acknowledged may be lost.
//!
//! Each cycle spawns the importer with piped stdin/stdout; a writer thread
//! feeds lines `crash<TAB>c{cycle}-k{i}<TAB>value` (values are a pure
//! function of seed, cycle and i; keys are unique, so the check is exact), a
//! reader thread collects the `ok` lines, and after a seeded random delay the
//! child gets SIGKILL. The store is then reopened in-process: it must open
//! without error, every key acknowledged in this cycle (and, every 10th
//! cycle and in the last, in every earlier cycle) must read back its exact
//! value, and any unacknowledged key that did make it must hold its exact
//! value too. The run fails if no write was ever
//! acknowledged. `BASALT_TEST_SEED` replays a seed; `BASALT_LONG_TESTS=1`
//! runs 100 cycles instead of 5.

#![allow(clippy::unwrap_used)]

mod common;

use basalt_engine::{Config, Store};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const BUCKET: &[u8] = b"crash";

fn key(cycle: u32, i: u64) -> String {
    format!("c{cycle}-k{i}")
}

/// The value of key `i` of `cycle`: printable bytes without TAB or newline,
/// from a splitmix64 stream (cheap even in a debug build).
fn value(seed: u64, cycle: u32, i: u64) -> Vec<u8> {
    let mut state = seed ^ (u64::from(cycle) << 40) ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    let mut next = move || {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    };
    let len = 1 + (next() % 3000) as usize;
    let mut v = Vec::with_capacity(len + 8);
    while v.len() < len {
        v.extend(next().to_le_bytes().iter().map(|b| b'!' + b % 94));
    }
    v.truncate(len);
    v
}

struct CycleResult {
    acked: Vec<u64>,
    sent: u64,
}

fn run_cycle(dir: &Path, seed: u64, cycle: u32, delay: Duration) -> CycleResult {
    let mut child = Command::new(common::bin())
        .args(["kv", "--data-dir"])
        .arg(dir)
        .args(["--sync", "import"])
        .env_remove("RUST_LOG")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let mut stderr = child.stderr.take().unwrap();

    let writer = std::thread::spawn(move || {
        let mut sent = 0u64;
        for i in 0..1_000_000u64 {
            let mut line = Vec::new();
            line.extend_from_slice(BUCKET);
            line.push(b'\t');
            line.extend_from_slice(key(cycle, i).as_bytes());
            line.push(b'\t');
            line.extend_from_slice(&value(seed, cycle, i));
            line.push(b'\n');
            if stdin.write_all(&line).is_err() {
                break; // the child is gone (EPIPE)
            }
            sent = i + 1;
        }
        sent
    });
    let reader = std::thread::spawn(move || {
        let prefix = format!("ok\tcrash\tc{cycle}-k");
        let mut acked = Vec::new();
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            let i = line
                .strip_prefix(&prefix)
                .and_then(|n| n.parse::<u64>().ok())
                .unwrap_or_else(|| panic!("unexpected output line {line:?}"));
            acked.push(i);
        }
        acked
    });
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });

    std::thread::sleep(delay);
    child.kill().unwrap(); // SIGKILL on Unix
    let status = child.wait().unwrap();
    let sent = writer.join().unwrap();
    let acked = reader.join().unwrap();
    let errors = errors.join().unwrap();
    assert_eq!(
        status.signal(),
        Some(9),
        "cycle {cycle}: the importer ended by itself ({status}) before the kill; stderr: {errors}"
    );
    CycleResult { acked, sent }
}

#[test]
fn acknowledged_writes_survive_sigkill() {
    let seed = common::seed(0xBA5A_17C0);
    let cycles: u32 = if std::env::var("BASALT_LONG_TESTS").is_ok_and(|v| v == "1") {
        100
    } else {
        5
    };
    let mut rng = StdRng::seed_from_u64(seed);
    let d = tempfile::tempdir().unwrap();
    let dir = d.path();
    // Every acknowledged (cycle, i) so far.
    let mut all_acked: Vec<(u32, u64)> = Vec::new();
    for cycle in 0..cycles {
        let delay = Duration::from_millis(rng.gen_range(50..=400));
        let r = run_cycle(dir, seed, cycle, delay);
        println!(
            "cycle {cycle}: killed after {delay:?}; {} lines sent, {} acknowledged",
            r.sent,
            r.acked.len()
        );
        assert!(
            r.acked.iter().enumerate().all(|(n, &i)| i == n as u64),
            "cycle {cycle}: acks out of order"
        );
        all_acked.extend(r.acked.iter().map(|&i| (cycle, i)));

        let t = std::time::Instant::now();
        let store = Store::open(Config::new(dir))
            .unwrap_or_else(|e| panic!("cycle {cycle}: store does not reopen after SIGKILL: {e}"));
        let opened = t.elapsed();
        // Every earlier acknowledgement is checked again every 10th cycle and
        // at the end (each check costs a GET); this cycle's always.
        let full = cycle % 10 == 9 || cycle + 1 == cycles;
        let from = if full {
            0
        } else {
            all_acked.len() - r.acked.len()
        };
        for &(c, i) in &all_acked[from..] {
            let got = store
                .get(BUCKET, key(c, i).as_bytes())
                .unwrap_or_else(|e| panic!("cycle {cycle}: get {}: {e}", key(c, i)));
            let obj = got
                .unwrap_or_else(|| panic!("cycle {cycle}: acknowledged key {} is lost", key(c, i)));
            assert!(
                obj.value == value(seed, c, i),
                "cycle {cycle}: wrong value for {}",
                key(c, i)
            );
        }
        // Written but not acknowledged: may be there, but only with its own value.
        let acked_here = r.acked.len() as u64;
        for i in acked_here..r.sent {
            if let Some(obj) = store.get(BUCKET, key(cycle, i).as_bytes()).unwrap() {
                assert!(
                    obj.value == value(seed, cycle, i),
                    "wrong value for {}",
                    key(cycle, i)
                );
            }
        }
        let shape: Vec<String> = store
            .stats()
            .levels
            .iter()
            .enumerate()
            .filter(|(_, l)| l.files > 0)
            .map(|(i, l)| format!("L{i}:{}", l.files))
            .collect();
        println!("cycle {cycle}: ledger files {}", shape.join(" "));
        let mut n = 0usize;
        store
            .fold_keys(BUCKET, &mut |_| {
                n += 1;
                true
            })
            .unwrap();
        assert!(
            n >= all_acked.len(),
            "cycle {cycle}: {n} keys listed, {} acknowledged",
            all_acked.len()
        );
        store.close().unwrap();
        println!(
            "cycle {cycle}: reopen took {opened:?}, reopen + check + close {:?}",
            t.elapsed()
        );
    }
    println!(
        "{} writes acknowledged over {cycles} cycles",
        all_acked.len()
    );
    assert!(
        !all_acked.is_empty(),
        "no write was acknowledged in {cycles} cycles: the test checked nothing"
    );
}
