//! A fixed, serial request load for counting what one request costs
//! (`docs/benchmarks/2026-12-02-0330-request-cost.md`, `scripts/request-cost.sh`):
//! the same number of GETs, PUTs or UPDATEs every run, one at a time, so
//! `valgrind --tool=callgrind` instruction counts (and allocation calls)
//! divided by the count are per request and repeatable.
//!
//! ```text
//! request_cost pb ADDR OP COUNT VALUE_BYTES KEYS [N_VAL]
//! request_cost embedded DIR OP COUNT VALUE_BYTES KEYS MARK_DIR
//! ```
//! `OP` is `load` (PUT keys 0..KEYS once), `get` (GET key i mod KEYS),
//! `put` (a blind PUT of key i mod KEYS, no clock) or `update` (GET then
//! PUT with the clock it returned: one op, two requests). `pb` talks to a
//! node over one PB connection, bucket `cost` (its `n_val` set to N_VAL
//! first when given). `embedded` opens a leveled store in DIR, loads it,
//! then waits for `MARK_DIR/go` before the counted ops and writes
//! `MARK_DIR/done` after them (the script turns callgrind's
//! instrumentation on and off in between), then waits for `MARK_DIR/end`.

use riak_pb::sync::Client;
use riak_pb::{
    code, RpbBucketProps, RpbContent, RpbGetReq, RpbGetResp, RpbPutReq, RpbSetBucketReq,
};
use std::path::{Path, PathBuf};
use std::time::Duration;

// As the `basalt` binary (the node measured beside it) allocates.
#[global_allocator]
static ALLOC: mimalloc::MiMalloc = mimalloc::MiMalloc;

const BUCKET: &[u8] = b"cost";

fn key(i: u64, keys: u64) -> Vec<u8> {
    format!("{}", i % keys.max(1)).into_bytes()
}

fn usage() -> ! {
    eprintln!("usage: request_cost pb ADDR OP COUNT VALUE_BYTES KEYS [N_VAL]");
    eprintln!("       request_cost embedded DIR OP COUNT VALUE_BYTES KEYS MARK_DIR");
    std::process::exit(2)
}

fn num(s: Option<&String>) -> u64 {
    s.and_then(|s| s.parse().ok()).unwrap_or_else(|| usage())
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (mode, target, op) = match (args.first(), args.get(1), args.get(2)) {
        (Some(m), Some(t), Some(o)) => (m.as_str(), t.clone(), o.clone()),
        _ => usage(),
    };
    let count = num(args.get(3));
    let size = num(args.get(4)) as usize;
    let keys = num(args.get(5));
    match mode {
        "pb" => pb(
            &target,
            &op,
            count,
            size,
            keys,
            args.get(6).map(|_| num(args.get(6))),
        ),
        "embedded" => {
            let marks = PathBuf::from(args.get(6).unwrap_or_else(|| usage()));
            embedded(Path::new(&target), &op, count, size, keys, &marks)
        }
        _ => usage(),
    }
}

fn pb(
    addr: &str,
    op: &str,
    count: u64,
    size: usize,
    keys: u64,
    n_val: Option<u64>,
) -> Result<(), Box<dyn std::error::Error>> {
    let mut c = Client::connect(addr, Duration::from_secs(5), Duration::from_secs(60))?;
    if let Some(n) = n_val {
        let req = RpbSetBucketReq {
            bucket: BUCKET.to_vec(),
            props: RpbBucketProps {
                n_val: Some(n as u32),
                ..RpbBucketProps::default()
            },
            ..RpbSetBucketReq::default()
        };
        c.call(code::SET_BUCKET_REQ, &req)?;
    }
    let value = vec![b'v'; size];
    let put = |c: &mut Client, k: Vec<u8>, vclock: Option<Vec<u8>>| {
        let req = RpbPutReq {
            bucket: BUCKET.to_vec(),
            key: Some(k),
            vclock,
            content: RpbContent {
                value: value.clone(),
                ..RpbContent::default()
            },
            ..RpbPutReq::default()
        };
        c.request::<_, riak_pb::RpbPutResp>(code::PUT_REQ, &req, code::PUT_RESP)
            .map(|_| ())
    };
    let get = |c: &mut Client, k: Vec<u8>| {
        let req = RpbGetReq {
            bucket: BUCKET.to_vec(),
            key: k,
            ..RpbGetReq::default()
        };
        c.request::<_, RpbGetResp>(code::GET_REQ, &req, code::GET_RESP)
    };
    let n = if op == "load" { keys } else { count };
    for i in 0..n {
        let k = key(i, keys);
        match op {
            "load" | "put" => put(&mut c, k, None)?,
            "get" => {
                let r = get(&mut c, k)?;
                if r.content.is_empty() {
                    return Err(format!("key {i} not found: load first").into());
                }
            }
            "update" => {
                let r = get(&mut c, k.clone())?;
                put(&mut c, k, r.vclock)?;
            }
            _ => usage(),
        }
    }
    println!("{op}: {n} ops");
    Ok(())
}

fn wait_for(path: &Path) {
    while !path.exists() {
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn embedded(
    dir: &Path,
    op: &str,
    count: u64,
    size: usize,
    keys: u64,
    marks: &Path,
) -> Result<(), Box<dyn std::error::Error>> {
    let cfg = basalt_backends::BackendConfig::default();
    let store = basalt_backends::open_backend("leveled", dir, &cfg)?;
    let opts = basalt_backend::WriteOptions::default();
    let value = vec![b'v'; size];
    for i in 0..keys {
        store.put(BUCKET, &key(i, keys), &value, b"", &opts)?;
    }
    std::fs::write(marks.join("ready"), b"")?;
    wait_for(&marks.join("go"));
    for i in 0..count {
        let k = key(i, keys);
        match op {
            "get" => {
                if store.get(BUCKET, &k)?.is_none() {
                    return Err(format!("key {i} not found").into());
                }
            }
            "put" => store.put(BUCKET, &k, &value, b"", &opts)?,
            "update" => {
                store.get(BUCKET, &k)?;
                store.put(BUCKET, &k, &value, b"", &opts)?;
            }
            _ => usage(),
        }
    }
    std::fs::write(marks.join("done"), b"")?;
    wait_for(&marks.join("end"));
    store.close()?;
    println!("{op}: {count} ops");
    Ok(())
}
