//! Compares backends on one workload, in one run, back to back:
//! load N objects of V bytes (incompressible), then a 5 GET : 1 UPDATE mix
//! with 80/20 key choice (80% of operations on 20% of the keys) from T
//! threads for S seconds. Reports throughput, p50/p99/max latency per
//! operation (hdrhistogram), write amplification per phase (this process's
//! `/proc/self/io` `write_bytes` delta, including the closing sync/flush
//! for the mix phase, divided by the user bytes written) and disk use after
//! close, as a Markdown table.
//!
//! ```text
//! cargo run --release -p basalt-backends --example compare -- \
//!     [--keys 50000] [--value-bytes 8192] [--seconds 20] [--threads 4] \
//!     [--backends leveled,bitcask,rocksdb,rocksdb-blob] [--dir DIR]
//! ```

use anyhow::{bail, Context, Result};
use basalt_backend::{Backend, WriteOptions};
use basalt_backends::{disk_usage, open_backend, BackendConfig};
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Args {
    keys: u64,
    value_bytes: usize,
    seconds: u64,
    threads: usize,
    backends: Vec<String>,
    dir: PathBuf,
}

fn parse() -> Result<Args> {
    let mut a = Args {
        keys: 50_000,
        value_bytes: 8192,
        seconds: 20,
        threads: 4,
        backends: ["leveled", "bitcask", "rocksdb", "rocksdb-blob"]
            .map(String::from)
            .to_vec(),
        dir: std::env::temp_dir().join("basalt-compare"),
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().with_context(|| format!("{flag} needs a value"))?;
        match flag.as_str() {
            "--keys" => a.keys = v.parse()?,
            "--value-bytes" => a.value_bytes = v.parse()?,
            "--seconds" => a.seconds = v.parse()?,
            "--threads" => a.threads = v.parse()?,
            "--backends" => a.backends = v.split(',').map(String::from).collect(),
            "--dir" => a.dir = v.into(),
            _ => bail!("unknown flag {flag}"),
        }
    }
    Ok(a)
}

fn write_bytes() -> u64 {
    std::fs::read_to_string("/proc/self/io")
        .ok()
        .and_then(|s| {
            s.lines()
                .find_map(|l| l.strip_prefix("write_bytes: "))
                .and_then(|v| v.trim().parse().ok())
        })
        .unwrap_or(0)
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:010}").into_bytes()
}

fn value(rng: &mut StdRng, n: usize) -> Vec<u8> {
    let mut v = vec![0u8; n];
    rng.fill_bytes(&mut v);
    v
}

/// 80% of picks in the first 20% of the keys.
fn pick(rng: &mut StdRng, keys: u64) -> u64 {
    let hot = (keys / 5).max(1);
    if rng.gen_bool(0.8) {
        rng.gen_range(0..hot)
    } else {
        rng.gen_range(0..keys)
    }
}

struct Row {
    name: String,
    load_ops: f64,
    load_wa: f64,
    mix_ops: f64,
    get: Histogram<u64>,
    upd: Histogram<u64>,
    mix_wa: f64,
    disk: u64,
    errors: u64,
}

fn run(name: &str, a: &Args) -> Result<Row> {
    let dir = a.dir.join(name);
    let _ = std::fs::remove_dir_all(&dir);
    let b: Arc<dyn Backend> = Arc::from(open_backend(name, &dir, &BackendConfig::default())?);
    let user = (a.value_bytes + 14 + 5) as f64;
    let errors = Arc::new(AtomicU64::new(0));
    // Load.
    let w0 = write_bytes();
    let t0 = Instant::now();
    std::thread::scope(|s| {
        for t in 0..a.threads {
            let b = Arc::clone(&b);
            let errors = Arc::clone(&errors);
            s.spawn(move || {
                let mut rng = StdRng::seed_from_u64(t as u64);
                let mut i = t as u64;
                while i < a.keys {
                    if b.put(
                        b"bench",
                        &key(i),
                        &value(&mut rng, a.value_bytes),
                        b"",
                        &WriteOptions::default(),
                    )
                    .is_err()
                    {
                        errors.fetch_add(1, Ordering::Relaxed);
                    }
                    i += a.threads as u64;
                }
            });
        }
    });
    b.sync()?;
    let load_secs = t0.elapsed().as_secs_f64();
    let load_wa = (write_bytes() - w0) as f64 / (user * a.keys as f64);
    // Mix.
    let w1 = write_bytes();
    let stop = Arc::new(AtomicBool::new(false));
    let updates = Arc::new(AtomicU64::new(0));
    let t1 = Instant::now();
    let hists: Vec<(Histogram<u64>, Histogram<u64>)> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..a.threads)
            .map(|t| {
                let (b, stop, updates, errors) = (
                    Arc::clone(&b),
                    Arc::clone(&stop),
                    Arc::clone(&updates),
                    Arc::clone(&errors),
                );
                s.spawn(move || {
                    let mut rng = StdRng::seed_from_u64(1000 + t as u64);
                    let mut get = Histogram::<u64>::new(3).expect("histogram");
                    let mut upd = Histogram::<u64>::new(3).expect("histogram");
                    while !stop.load(Ordering::Relaxed) {
                        let k = key(pick(&mut rng, a.keys));
                        if rng.gen_range(0..6) == 0 {
                            let v = value(&mut rng, a.value_bytes);
                            let st = Instant::now();
                            if b.put(b"bench", &k, &v, b"", &WriteOptions::default())
                                .is_err()
                            {
                                errors.fetch_add(1, Ordering::Relaxed);
                            }
                            let _ = upd.record(st.elapsed().as_micros() as u64);
                            updates.fetch_add(1, Ordering::Relaxed);
                        } else {
                            let st = Instant::now();
                            match b.get(b"bench", &k) {
                                Ok(Some(o)) if o.value.len() == a.value_bytes => {}
                                _ => {
                                    errors.fetch_add(1, Ordering::Relaxed);
                                }
                            }
                            let _ = get.record(st.elapsed().as_micros() as u64);
                        }
                    }
                    (get, upd)
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs(a.seconds));
        stop.store(true, Ordering::Relaxed);
        handles
            .into_iter()
            .map(|h| h.join().expect("worker"))
            .collect()
    });
    let mix_secs = t1.elapsed().as_secs_f64();
    b.close()?;
    drop(b);
    let mix_wa =
        (write_bytes() - w1) as f64 / (user * updates.load(Ordering::Relaxed).max(1) as f64);
    let mut get = Histogram::<u64>::new(3)?;
    let mut upd = Histogram::<u64>::new(3)?;
    for (g, u) in &hists {
        get.add(g)?;
        upd.add(u)?;
    }
    let disk = disk_usage(&dir);
    let _ = std::fs::remove_dir_all(&dir);
    Ok(Row {
        name: name.to_string(),
        load_ops: a.keys as f64 / load_secs,
        load_wa,
        mix_ops: (get.len() + upd.len()) as f64 / mix_secs,
        get,
        upd,
        mix_wa,
        disk,
        errors: errors.load(Ordering::Relaxed),
    })
}

fn ms(us: u64) -> String {
    format!("{:.2}", us as f64 / 1000.0)
}

fn main() -> Result<()> {
    let a = parse()?;
    std::fs::create_dir_all(&a.dir)?;
    let mut rows = Vec::new();
    for name in &a.backends {
        eprintln!("compare: {name} ...");
        rows.push(run(name, &a)?);
    }
    println!(
        "{} keys x {} B values (random, incompressible); mix 5 GET : 1 UPDATE, 80/20 keys, {} threads, {} s; WA = /proc/self/io write_bytes / user bytes\n",
        a.keys, a.value_bytes, a.threads, a.seconds
    );
    println!("| backend | load PUT/s | load WA | mix ops/s | GET p50 / p99 / max ms | UPDATE p50 / p99 / max ms | mix WA (incl. close) | disk after close MB | errors |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {:.0} | {:.2} | {:.0} | {} / {} / {} | {} / {} / {} | {:.2} | {:.0} | {} |",
            r.name,
            r.load_ops,
            r.load_wa,
            r.mix_ops,
            ms(r.get.value_at_quantile(0.5)),
            ms(r.get.value_at_quantile(0.99)),
            ms(r.get.max()),
            ms(r.upd.value_at_quantile(0.5)),
            ms(r.upd.value_at_quantile(0.99)),
            ms(r.upd.max()),
            r.mix_wa,
            r.disk as f64 / 1e6,
            r.errors
        );
    }
    Ok(())
}
