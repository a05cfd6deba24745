//! The rolling-upgrade load and its check (`scripts/rolling-upgrade.sh`;
//! README "Upgrading a cluster"). Three commands:
//!
//! - `load`: workers send PUTs (with two 2i terms), GETs, 2i equality
//!   queries, counter increments and set adds over PB at r = w = 2 to a
//!   cluster until a stop file appears. Each worker owns its keys, keeps
//!   one connection per node and, as Riak's clients do, sends a request
//!   that fails (connection refused or reset, timeout, an error reply) to
//!   the next node, up to every node once; only a request every node
//!   failed counts as failed. The phase named in a phase file (the script
//!   writes `before`, `upgrade-n1`, ...) tags every request, so the
//!   summary gives requests, failures and throughput per phase. At the end
//!   it writes every acknowledged write to `state.json`: each key's value
//!   and index term (or the values it may hold after a failed PUT), each
//!   counter's acknowledged and attempted increments, each set's
//!   acknowledged elements.
//! - `verify`: reads all of `state.json` back from a cluster (or a
//!   replication sink): a key missing or holding another value, a 2i term
//!   not finding its key, a counter below its acknowledged increments (or
//!   above the attempted ones), a set without an acknowledged element is
//!   a loss; exit 1 if there is any.
//! - `fixture`: writes the small, fixed data set of the upgrade fixtures
//!   (`crates/cli/tests/fixtures/upgrade/`) to one node and its
//!   `expected.json`, which `crates/cli/tests/upgrade_fixtures.rs` reads
//!   back from the fixture with the current build.

use clap::{Parser, Subcommand};
use rand::{rngs::StdRng, Rng, SeedableRng};
use riak_pb::code;
use riak_pb::sync::Client;
use riak_pb::{
    CounterOp, DtFetchReq, DtFetchResp, DtOp, DtUpdateReq, MapField, MapOp, MapUpdate, RpbContent,
    RpbDelReq, RpbGetReq, RpbGetResp, RpbIndexReq, RpbIndexResp, RpbPair, RpbPutReq, RpbPutResp,
    SetOp,
};
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The object bucket, the counter and set buckets (in types `counters`
/// and `sets`) and the 2i index of the load.
const OBJ_BUCKET: &str = "upgrade";
const CTR_BUCKET: &str = "upgrade_c";
const SET_BUCKET: &str = "upgrade_s";
const GROUP_INDEX: &str = "grp_bin";
/// Distinct `grp_bin` terms.
const GROUPS: u64 = 32;
/// Counters and sets per worker.
const DT_KEYS: u64 = 16;
/// A connection's connect and read/write timeouts; a node that refused a
/// connection is skipped this long before it is dialled again.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
const IO_TIMEOUT: Duration = Duration::from_secs(15);
const DOWN_BACKOFF: Duration = Duration::from_millis(500);

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum Cmd {
    /// Runs the load until STOP_FILE exists, then writes OUT/state.json and OUT/summary.json.
    Load {
        /// PB addresses of the cluster's nodes, comma-separated.
        #[arg(long, value_delimiter = ',', required = true)]
        nodes: Vec<String>,
        #[arg(long, default_value_t = 4)]
        workers: usize,
        /// Object keys per worker.
        #[arg(long, default_value_t = 2000)]
        keys: u64,
        /// Requests per second per worker (0: as fast as the cluster answers).
        #[arg(long, default_value_t = 0)]
        rate: u64,
        #[arg(long)]
        phase_file: PathBuf,
        #[arg(long)]
        stop_file: PathBuf,
        #[arg(long)]
        out: PathBuf,
    },
    /// Reads every acknowledged write of STATE back; exit 1 on any loss.
    Verify {
        #[arg(long, value_delimiter = ',', required = true)]
        nodes: Vec<String>,
        #[arg(long)]
        state: PathBuf,
        /// A name for the report line (`cluster`, `sink`, ...).
        #[arg(long, default_value = "cluster")]
        label: String,
        #[arg(long, default_value_t = 2)]
        r: u32,
    },
    /// Writes the fixture data set to NODE and OUT (expected.json).
    Fixture {
        #[arg(long)]
        node: String,
        #[arg(long)]
        out: PathBuf,
    },
}

fn main() {
    let cli = Cli::parse();
    let result = match cli.cmd {
        Cmd::Load {
            nodes,
            workers,
            keys,
            rate,
            phase_file,
            stop_file,
            out,
        } => load(LoadArgs {
            nodes,
            workers,
            keys,
            rate,
            phase_file,
            stop_file,
            out,
        }),
        Cmd::Verify {
            nodes,
            state,
            label,
            r,
        } => verify(&nodes, &state, &label, r),
        Cmd::Fixture { node, out } => fixture(&node, &out),
    };
    if let Err(e) = result {
        eprintln!("upgrade_load: {e}");
        std::process::exit(1);
    }
}

/// Connections to every node, tried in turn from a home node.
struct Pool {
    nodes: Vec<String>,
    conns: Vec<Option<Client>>,
    down_until: Vec<Option<Instant>>,
    home: usize,
}

/// How one request went: the reply, and the attempts that failed first.
struct Outcome {
    reply: Result<(u8, Vec<u8>), String>,
    failed_attempts: u64,
    /// Attempts whose request was sent (it may have been applied even if
    /// no reply came).
    sent: u64,
}

impl Pool {
    fn new(nodes: &[String], home: usize) -> Pool {
        Pool {
            nodes: nodes.to_vec(),
            conns: nodes.iter().map(|_| None).collect(),
            down_until: nodes.iter().map(|_| None).collect(),
            home,
        }
    }

    /// Sends the request to the home node, then to each other node in
    /// turn while it fails; nodes that refused a connection a moment ago
    /// go last.
    fn call<M: prost::Message>(&mut self, c: u8, m: &M) -> Outcome {
        let n = self.nodes.len();
        let now = Instant::now();
        let mut order: Vec<usize> = (0..n).map(|i| (self.home + i) % n).collect();
        order.sort_by_key(|&i| self.down_until[i].is_some_and(|t| t > now));
        let mut failed = 0;
        let mut sent = 0;
        let mut last = String::from("no node");
        for i in order {
            if self.conns[i].is_none() {
                match Client::connect(self.nodes[i].as_str(), CONNECT_TIMEOUT, IO_TIMEOUT) {
                    Ok(conn) => {
                        self.conns[i] = Some(conn);
                        self.down_until[i] = None;
                    }
                    Err(e) => {
                        self.down_until[i] = Some(Instant::now() + DOWN_BACKOFF);
                        last = format!("{}: {e}", self.nodes[i]);
                        failed += 1;
                        continue;
                    }
                }
            }
            let Some(conn) = self.conns[i].as_mut() else {
                continue;
            };
            sent += 1;
            match conn.call(c, m) {
                Ok(reply) => {
                    return Outcome {
                        reply: Ok(reply),
                        failed_attempts: failed,
                        sent,
                    }
                }
                Err(e) => {
                    // An error reply leaves the connection usable; any other
                    // failure drops it.
                    if e.riak_message().is_none() {
                        self.conns[i] = None;
                    }
                    last = format!("{}: {e}", self.nodes[i]);
                    failed += 1;
                }
            }
        }
        Outcome {
            reply: Err(last),
            failed_attempts: failed,
            sent,
        }
    }
}

struct LoadArgs {
    nodes: Vec<String>,
    workers: usize,
    keys: u64,
    rate: u64,
    phase_file: PathBuf,
    stop_file: PathBuf,
    out: PathBuf,
}

/// One phase's counts.
#[derive(Default, Clone)]
struct PhaseStats {
    ok: u64,
    /// Succeeded on another node after the first failed.
    retried_ok: u64,
    /// Every node failed.
    failed: u64,
    /// Attempts that failed (a request retried twice counts 2).
    failed_attempts: u64,
    /// GETs that returned a value other than the last acknowledged one.
    stale_gets: u64,
    latency_us_sum: u64,
    latency_us_max: u64,
    /// The last few failures, for the report.
    errors: Vec<String>,
}

/// The phases seen so far (name, start) and each one's counts.
struct Phases {
    names: Mutex<Vec<(String, Instant)>>,
    stats: Mutex<Vec<PhaseStats>>,
    current: AtomicUsize,
}

impl Phases {
    fn record(&self, op_start: Instant, o: &Outcome, stale: bool) {
        let i = self.current.load(Ordering::Relaxed);
        let us = op_start.elapsed().as_micros() as u64;
        let mut all = self.stats.lock().unwrap_or_else(|e| e.into_inner());
        if all.len() <= i {
            all.resize(i + 1, PhaseStats::default());
        }
        let s = &mut all[i];
        s.failed_attempts += o.failed_attempts;
        s.stale_gets += u64::from(stale);
        match &o.reply {
            Ok(_) => {
                s.ok += 1;
                s.retried_ok += u64::from(o.failed_attempts > 0);
                s.latency_us_sum += us;
                s.latency_us_max = s.latency_us_max.max(us);
            }
            Err(e) => {
                s.failed += 1;
                if s.errors.len() < 10 {
                    s.errors.push(e.clone());
                }
            }
        }
    }
}

/// What a worker knows of one object key.
#[derive(Default)]
struct KeyState {
    /// The values the key may hold: one once a PUT was acknowledged; more
    /// after PUTs that failed on every node (each may have been applied).
    values: Vec<String>,
    group: Vec<u64>,
    vclock: Option<Vec<u8>>,
}

#[derive(Default)]
struct WorkerState {
    objects: BTreeMap<String, KeyState>,
    /// key → (acknowledged, attempted) increments.
    counters: BTreeMap<String, (i64, i64)>,
    /// key → acknowledged elements.
    sets: BTreeMap<String, BTreeSet<String>>,
}

fn load(a: LoadArgs) -> Result<(), String> {
    std::fs::create_dir_all(&a.out).map_err(|e| format!("{}: {e}", a.out.display()))?;
    let phases = Arc::new(Phases {
        names: Mutex::new(vec![(read_phase(&a.phase_file), Instant::now())]),
        stats: Mutex::new(vec![PhaseStats::default()]),
        current: AtomicUsize::new(0),
    });
    let stop = Arc::new(AtomicBool::new(false));
    let total_ok = Arc::new(AtomicU64::new(0));
    let total_failed = Arc::new(AtomicU64::new(0));
    let mut handles = Vec::new();
    for w in 0..a.workers {
        let (phases, stop, nodes) = (phases.clone(), stop.clone(), a.nodes.clone());
        let (ok, failed) = (total_ok.clone(), total_failed.clone());
        let (keys, rate) = (a.keys, a.rate);
        handles.push(std::thread::spawn(move || {
            worker(w, &nodes, keys, rate, &phases, &stop, &ok, &failed)
        }));
    }
    // The phase watcher and the per-second timeline.
    let start = Instant::now();
    let mut timeline = String::from("second,phase,ok,failed\n");
    let (mut last_ok, mut last_failed) = (0, 0);
    let mut next_tick = Duration::from_secs(1);
    while !a.stop_file.exists() {
        std::thread::sleep(Duration::from_millis(100));
        let name = read_phase(&a.phase_file);
        {
            let mut names = phases.names.lock().unwrap_or_else(|e| e.into_inner());
            if names.last().map(|(n, _)| n != &name).unwrap_or(true) {
                names.push((name.clone(), Instant::now()));
                phases.current.store(names.len() - 1, Ordering::Relaxed);
                eprintln!("load: phase {name}");
            }
        }
        if start.elapsed() >= next_tick {
            let (ok, failed) = (
                total_ok.load(Ordering::Relaxed),
                total_failed.load(Ordering::Relaxed),
            );
            timeline.push_str(&format!(
                "{},{name},{},{}\n",
                next_tick.as_secs(),
                ok - last_ok,
                failed - last_failed
            ));
            (last_ok, last_failed) = (ok, failed);
            next_tick += Duration::from_secs(1);
        }
    }
    stop.store(true, Ordering::Relaxed);
    let end = Instant::now();
    let mut state = WorkerState::default();
    for h in handles {
        let s = h.join().map_err(|_| "a worker panicked".to_string())?;
        state.objects.extend(s.objects);
        state.counters.extend(s.counters);
        state.sets.extend(s.sets);
    }
    write(&a.out.join("timeline.csv"), &timeline)?;
    write(&a.out.join("state.json"), &state_json(&state).to_string())?;
    let names = phases
        .names
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let stats = phases
        .stats
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .clone();
    let summary = summarize(&names, &stats, end);
    write(&a.out.join("summary.json"), &summary.to_string())?;
    print_summary(&summary);
    Ok(())
}

fn read_phase(path: &Path) -> String {
    std::fs::read_to_string(path)
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|_| "unnamed".into())
}

fn write(path: &Path, text: &str) -> Result<(), String> {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

#[allow(clippy::too_many_arguments)]
fn worker(
    w: usize,
    nodes: &[String],
    keys: u64,
    rate: u64,
    phases: &Phases,
    stop: &AtomicBool,
    total_ok: &AtomicU64,
    total_failed: &AtomicU64,
) -> WorkerState {
    let mut pool = Pool::new(nodes, w % nodes.len());
    let mut rng = StdRng::seed_from_u64(w as u64 + 1);
    let mut st = WorkerState::default();
    let mut seq: u64 = 0;
    let pace = (rate > 0).then(|| Duration::from_micros(1_000_000 / rate));
    let mut next = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        if let Some(p) = pace {
            next += p;
            if let Some(wait) = next.checked_duration_since(Instant::now()) {
                std::thread::sleep(wait);
            }
        }
        seq += 1;
        let n = rng.gen_range(0..keys);
        let key = format!("w{w}-{n:06}");
        let t0 = Instant::now();
        let pick = rng.gen_range(0..100);
        let mut stale = false;
        let outcome = if pick < 40 || !st.objects.contains_key(&key) && pick < 65 {
            // PUT (a GET of a key not written yet becomes a PUT).
            let value = format!("{key}:{seq}:{}", "v".repeat(100));
            let group = seq % GROUPS;
            let ks = st.objects.entry(key.clone()).or_default();
            let req = RpbPutReq {
                bucket: OBJ_BUCKET.into(),
                key: Some(key.clone().into_bytes()),
                vclock: ks.vclock.clone(),
                content: RpbContent {
                    value: value.clone().into_bytes(),
                    content_type: Some(b"text/plain".to_vec()),
                    indexes: vec![
                        pair(GROUP_INDEX, &format!("g{group}")),
                        pair("seq_int", &seq.to_string()),
                    ],
                    ..Default::default()
                },
                w: Some(2),
                return_head: Some(true),
                ..Default::default()
            };
            let o = pool.call(code::PUT_REQ, &req);
            match &o.reply {
                Ok((_, body)) => {
                    ks.values = vec![value];
                    ks.group = vec![group];
                    ks.vclock = riak_pb::decode::<RpbPutResp>(body)
                        .ok()
                        .and_then(|r| r.vclock);
                }
                Err(_) => {
                    ks.values.push(value);
                    ks.group.push(group);
                    ks.vclock = None;
                }
            }
            o
        } else if pick < 65 {
            let req = RpbGetReq {
                bucket: OBJ_BUCKET.into(),
                key: key.clone().into_bytes(),
                r: Some(2),
                ..Default::default()
            };
            let o = pool.call(code::GET_REQ, &req);
            if let (Ok((_, body)), Some(ks)) = (&o.reply, st.objects.get(&key)) {
                let got = riak_pb::decode::<RpbGetResp>(body)
                    .ok()
                    .and_then(|r| r.content.into_iter().next())
                    .map(|c| String::from_utf8_lossy(&c.value).into_owned());
                stale = got.is_none_or(|v| !ks.values.contains(&v));
            }
            o
        } else if pick < 75 {
            let req = index_eq(&format!("g{}", rng.gen_range(0..GROUPS)));
            pool.call(code::INDEX_REQ, &req)
        } else if pick < 90 {
            let ckey = format!("w{w}-c{}", n % DT_KEYS);
            let req = dt_update("counters", CTR_BUCKET, &ckey, counter_op(1));
            let o = pool.call(code::DT_UPDATE_REQ, &req);
            let c = st.counters.entry(ckey).or_default();
            c.1 += o.sent as i64;
            c.0 += i64::from(o.reply.is_ok());
            o
        } else {
            let skey = format!("w{w}-s{}", n % DT_KEYS);
            let elem = format!("e{seq}");
            let op = DtOp {
                set_op: Some(SetOp {
                    adds: vec![elem.clone().into_bytes()],
                    removes: vec![],
                }),
                ..Default::default()
            };
            let o = pool.call(
                code::DT_UPDATE_REQ,
                &dt_update("sets", SET_BUCKET, &skey, op),
            );
            if o.reply.is_ok() {
                st.sets.entry(skey).or_default().insert(elem);
            }
            o
        };
        if outcome.reply.is_ok() {
            total_ok.fetch_add(1, Ordering::Relaxed);
        } else {
            total_failed.fetch_add(1, Ordering::Relaxed);
        }
        phases.record(t0, &outcome, stale);
    }
    st
}

fn pair(k: &str, v: &str) -> RpbPair {
    RpbPair {
        key: k.as_bytes().to_vec(),
        value: Some(v.as_bytes().to_vec()),
    }
}

fn index_eq(term: &str) -> RpbIndexReq {
    RpbIndexReq {
        bucket: OBJ_BUCKET.into(),
        index: GROUP_INDEX.into(),
        qtype: 0,
        key: Some(term.as_bytes().to_vec()),
        ..Default::default()
    }
}

fn counter_op(by: i64) -> DtOp {
    DtOp {
        counter_op: Some(CounterOp {
            increment: Some(by),
        }),
        ..Default::default()
    }
}

fn dt_update(ty: &str, bucket: &str, key: &str, op: DtOp) -> DtUpdateReq {
    DtUpdateReq {
        bucket: bucket.into(),
        key: Some(key.as_bytes().to_vec()),
        r#type: ty.into(),
        op,
        w: Some(2),
        ..Default::default()
    }
}

fn state_json(s: &WorkerState) -> Value {
    let objects: serde_json::Map<String, Value> = s
        .objects
        .iter()
        .map(|(k, v)| (k.clone(), json!({"values": v.values, "groups": v.group})))
        .collect();
    let counters: serde_json::Map<String, Value> = s
        .counters
        .iter()
        .map(|(k, (acked, tried))| (k.clone(), json!({"acked": acked, "attempted": tried})))
        .collect();
    let sets: serde_json::Map<String, Value> =
        s.sets.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    json!({"objects": objects, "counters": counters, "sets": sets})
}

fn summarize(names: &[(String, Instant)], stats: &[PhaseStats], end: Instant) -> Value {
    let rows: Vec<Value> = names
        .iter()
        .enumerate()
        .map(|(i, (name, start))| {
            let until = names.get(i + 1).map(|(_, t)| *t).unwrap_or(end);
            let secs = until.duration_since(*start).as_secs_f64();
            let s = stats.get(i).cloned().unwrap_or_default();
            json!({
                "phase": name,
                "seconds": (secs * 10.0).round() / 10.0,
                "ok": s.ok,
                "ops_per_sec": if secs > 0.0 { (s.ok as f64 / secs).round() } else { 0.0 },
                "retried_ok": s.retried_ok,
                "failed": s.failed,
                "failed_attempts": s.failed_attempts,
                "stale_gets": s.stale_gets,
                "mean_ms": if s.ok > 0 { (s.latency_us_sum as f64 / s.ok as f64 / 100.0).round() / 10.0 } else { 0.0 },
                "max_ms": (s.latency_us_max as f64 / 100.0).round() / 10.0,
                "errors": s.errors,
            })
        })
        .collect();
    json!({ "phases": rows })
}

fn print_summary(v: &Value) {
    println!(
        "{:<14} {:>7} {:>9} {:>8} {:>10} {:>7} {:>9} {:>7} {:>8} {:>8}",
        "phase",
        "secs",
        "ok",
        "ok/s",
        "retried",
        "failed",
        "attempts",
        "stale",
        "mean ms",
        "max ms"
    );
    for r in v["phases"].as_array().into_iter().flatten() {
        println!(
            "{:<14} {:>7} {:>9} {:>8} {:>10} {:>7} {:>9} {:>7} {:>8} {:>8}",
            r["phase"].as_str().unwrap_or(""),
            r["seconds"].to_string(),
            r["ok"].to_string(),
            r["ops_per_sec"].to_string(),
            r["retried_ok"].to_string(),
            r["failed"].to_string(),
            r["failed_attempts"].to_string(),
            r["stale_gets"].to_string(),
            r["mean_ms"].to_string(),
            r["max_ms"].to_string()
        );
        for e in r["errors"].as_array().into_iter().flatten() {
            println!("    error: {}", e.as_str().unwrap_or(""));
        }
    }
}

/// Calls until some node answers (the check retries as the load does).
fn must(pool: &mut Pool, c: u8, m: &impl prost::Message) -> Result<Vec<u8>, String> {
    pool.call(c, m).reply.map(|(_, body)| body)
}

fn verify(nodes: &[String], state: &Path, label: &str, r: u32) -> Result<(), String> {
    let text = std::fs::read_to_string(state).map_err(|e| format!("{}: {e}", state.display()))?;
    let v: Value = serde_json::from_str(&text).map_err(|e| format!("{}: {e}", state.display()))?;
    let mut pool = Pool::new(nodes, 0);
    let (mut ok, mut missing, mut changed) = (0u64, 0u64, 0u64);
    let mut problems: Vec<String> = Vec::new();
    let note = |p: String, problems: &mut Vec<String>| {
        if problems.len() < 20 {
            problems.push(p);
        }
    };
    // key → the groups it may be in, for the 2i check.
    let mut groups: BTreeMap<u64, Vec<(String, bool)>> = BTreeMap::new();
    let objects = v["objects"].as_object().cloned().unwrap_or_default();
    for (key, o) in &objects {
        let values: Vec<&str> = o["values"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .collect();
        let gs: Vec<u64> = o["groups"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_u64)
            .collect();
        let req = RpbGetReq {
            bucket: OBJ_BUCKET.into(),
            key: key.clone().into_bytes(),
            r: Some(r),
            ..Default::default()
        };
        let body = must(&mut pool, code::GET_REQ, &req)?;
        let resp = riak_pb::decode::<RpbGetResp>(&body).map_err(|e| e.to_string())?;
        let got: Vec<String> = resp
            .content
            .iter()
            .map(|c| String::from_utf8_lossy(&c.value).into_owned())
            .collect();
        match got.as_slice() {
            [] => {
                missing += 1;
                note(format!("{key}: missing"), &mut problems);
            }
            [one] if values.contains(&one.as_str()) => {
                ok += 1;
                let i = values.iter().position(|x| x == one).unwrap_or(0);
                if let Some(g) = gs.get(i) {
                    groups
                        .entry(*g)
                        .or_default()
                        .push((key.clone(), values.len() == 1));
                }
            }
            _ => {
                changed += 1;
                note(
                    format!("{key}: {got:?}, expected one of {values:?}"),
                    &mut problems,
                );
            }
        }
    }
    let mut index_missing = 0u64;
    for (g, keys) in &groups {
        let body = must(&mut pool, code::INDEX_REQ, &index_eq(&format!("g{g}")))?;
        let resp = riak_pb::decode::<RpbIndexResp>(&body).map_err(|e| e.to_string())?;
        let found: BTreeSet<Vec<u8>> = resp.keys.into_iter().collect();
        for (k, _) in keys {
            if !found.contains(k.as_bytes()) {
                index_missing += 1;
                note(format!("{k}: not found by grp_bin = g{g}"), &mut problems);
            }
        }
    }
    let (mut counters_ok, mut counters_bad) = (0u64, 0u64);
    for (key, c) in v["counters"].as_object().cloned().unwrap_or_default() {
        let (acked, tried) = (
            c["acked"].as_i64().unwrap_or(0),
            c["attempted"].as_i64().unwrap_or(0),
        );
        let got = dt_fetch(&mut pool, "counters", CTR_BUCKET, &key, r)?
            .and_then(|v| v.counter_value)
            .unwrap_or(0);
        if got >= acked && got <= tried {
            counters_ok += 1;
        } else {
            counters_bad += 1;
            note(
                format!("counter {key}: {got}, acknowledged {acked}, attempted {tried}"),
                &mut problems,
            );
        }
    }
    let (mut sets_ok, mut sets_bad) = (0u64, 0u64);
    for (key, elems) in v["sets"].as_object().cloned().unwrap_or_default() {
        let got: BTreeSet<Vec<u8>> = dt_fetch(&mut pool, "sets", SET_BUCKET, &key, r)?
            .map(|v| v.set_value.into_iter().collect())
            .unwrap_or_default();
        let lost: Vec<&str> = elems
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(Value::as_str)
            .filter(|e| !got.contains(e.as_bytes()))
            .collect();
        if lost.is_empty() {
            sets_ok += 1;
        } else {
            sets_bad += 1;
            note(format!("set {key}: lost {lost:?}"), &mut problems);
        }
    }
    let lost = missing + changed + index_missing + counters_bad + sets_bad;
    let report = json!({
        "label": label, "objects_ok": ok, "missing": missing, "changed": changed,
        "index_missing": index_missing, "counters_ok": counters_ok, "counters_bad": counters_bad,
        "sets_ok": sets_ok, "sets_bad": sets_bad, "problems": problems,
    });
    println!("{report}");
    if lost > 0 {
        return Err(format!(
            "{label}: {lost} acknowledged writes lost or changed"
        ));
    }
    Ok(())
}

fn dt_fetch(
    pool: &mut Pool,
    ty: &str,
    bucket: &str,
    key: &str,
    r: u32,
) -> Result<Option<riak_pb::DtValue>, String> {
    let req = DtFetchReq {
        bucket: bucket.into(),
        key: key.as_bytes().to_vec(),
        r#type: ty.into(),
        r: Some(r),
        ..Default::default()
    };
    let body = must(pool, code::DT_FETCH_REQ, &req)?;
    let resp = riak_pb::decode::<DtFetchResp>(&body).map_err(|e| e.to_string())?;
    Ok(resp.value)
}

/// The fixture's data set: 40 objects in bucket `fx` (values, content
/// type, user metadata, a `bin` and an `int` index term each), 4 of them
/// then deleted; 6 counters, 6 sets and 3 maps; all at w = 1 (one node).
fn fixture(node: &str, out: &Path) -> Result<(), String> {
    let mut pool = Pool::new(&[node.to_string()], 0);
    let mut objects = serde_json::Map::new();
    for i in 0..40u32 {
        let key = format!("k{i:03}");
        let value = format!("value {i} written by the old release");
        let req = RpbPutReq {
            bucket: b"fx".to_vec(),
            key: Some(key.clone().into_bytes()),
            content: RpbContent {
                value: value.clone().into_bytes(),
                content_type: Some(b"text/plain".to_vec()),
                usermeta: vec![pair("origin", "fixture")],
                indexes: vec![
                    pair("colour_bin", &format!("c{}", i % 5)),
                    pair("num_int", &i.to_string()),
                ],
                ..Default::default()
            },
            w: Some(1),
            ..Default::default()
        };
        must(&mut pool, code::PUT_REQ, &req)?;
        let deleted = i % 10 == 9;
        if deleted {
            let del = RpbDelReq {
                bucket: b"fx".to_vec(),
                key: key.clone().into_bytes(),
                ..Default::default()
            };
            must(&mut pool, code::DEL_REQ, &del)?;
        }
        objects.insert(
            key,
            json!({"value": value, "colour": format!("c{}", i % 5), "num": i, "deleted": deleted}),
        );
    }
    let mut counters = serde_json::Map::new();
    let mut sets = serde_json::Map::new();
    for i in 0..6i64 {
        let key = format!("c{i}");
        for _ in 0..=i {
            must(
                &mut pool,
                code::DT_UPDATE_REQ,
                &dt_update("counters", "fxc", &key, counter_op(i + 1)),
            )?;
        }
        counters.insert(key, json!((i + 1) * (i + 1)));
        let key = format!("s{i}");
        let elems: Vec<String> = (0..=i).map(|e| format!("elem{e}")).collect();
        let op = DtOp {
            set_op: Some(SetOp {
                adds: elems.iter().map(|e| e.clone().into_bytes()).collect(),
                removes: vec![],
            }),
            ..Default::default()
        };
        must(
            &mut pool,
            code::DT_UPDATE_REQ,
            &dt_update("sets", "fxs", &key, op),
        )?;
        sets.insert(key, json!(elems));
    }
    let mut maps = serde_json::Map::new();
    for i in 0..3i64 {
        let key = format!("m{i}");
        let field = |name: &str, t: i32| MapField {
            name: name.as_bytes().to_vec(),
            r#type: t,
        };
        let op = DtOp {
            map_op: Some(MapOp {
                removes: vec![],
                updates: vec![
                    MapUpdate {
                        field: field("name", 3),
                        register_op: Some(format!("map {i}").into_bytes()),
                        ..Default::default()
                    },
                    MapUpdate {
                        field: field("visits", 1),
                        counter_op: Some(CounterOp {
                            increment: Some(10 + i),
                        }),
                        ..Default::default()
                    },
                ],
            }),
            ..Default::default()
        };
        must(
            &mut pool,
            code::DT_UPDATE_REQ,
            &dt_update("maps", "fxm", &key, op),
        )?;
        maps.insert(key, json!({"name": format!("map {i}"), "visits": 10 + i}));
    }
    let expected = json!({
        "objects": objects, "counters": counters, "sets": sets, "maps": maps,
    });
    let text = serde_json::to_string_pretty(&expected).map_err(|e| e.to_string())?;
    write(out, &(text + "\n"))
}
