//! Anti-entropy figures on one in-process node (every replica a local
//! vnode, no network): tree memory, rebuild rate with and without the
//! journal check, the time of an exchange of in-sync replicas, and repairs
//! per hour after deltas made underneath one replica of each key.
//!
//! ```text
//! cargo run --release -p basalt-server --example aae_figures -- \
//!     --keys 1000000 --deltas 1000000 --dir /path/on/disk
//! ```
//!
//! Steps: load `--keys` keys (n_val 3, `--value-bytes` each) through the
//! node's PUT; build every vnode's trees (journal check on), rebuild them
//! with it off, then on again (alternating, so drift in the machine shows);
//! time one exchange of each preference list (in sync: a root compare);
//! delete `--deltas` keys from the third replica's backend directly (as a
//! disk losing data: the trees do not see it), rebuild that replica's
//! trees, and run exchanges until a full pass repairs nothing. Prints one
//! line per figure and a JSON summary.

use basalt_server::config::Config;
use basalt_server::kv::PutOpts;
use basalt_server::object::Content;
use basalt_server::Node;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

struct Args {
    keys: u64,
    deltas: u64,
    value_bytes: usize,
    ring: u32,
    tree: String,
    dir: Option<std::path::PathBuf>,
}

fn args() -> Args {
    let mut a = Args {
        keys: 1_000_000,
        deltas: 1_000_000,
        value_bytes: 64,
        ring: 16,
        tree: "xsmall".into(),
        dir: None,
    };
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let v = it.next().unwrap_or_default();
        match flag.as_str() {
            "--keys" => a.keys = v.parse().expect("--keys N"),
            "--deltas" => a.deltas = v.parse().expect("--deltas N"),
            "--value-bytes" => a.value_bytes = v.parse().expect("--value-bytes N"),
            "--ring" => a.ring = v.parse().expect("--ring N"),
            "--tree" => a.tree = v,
            "--dir" => a.dir = Some(v.into()),
            other => panic!("unknown flag {other}"),
        }
    }
    a.deltas = a.deltas.min(a.keys);
    a
}

fn config(a: &Args, dir: &std::path::Path, journal_check: bool) -> Config {
    Config {
        data_dir: dir.to_path_buf(),
        pb_listen: "127.0.0.1:0".into(),
        cluster_listen: "127.0.0.1:0".into(),
        http_listen: String::new(),
        ring_size: a.ring,
        backend: "leveled".into(),
        aae_tree_size: a.tree.clone(),
        // No write is in flight during the exchanges: no confirmation pause.
        aae_confirm_ms: 0,
        // No scheduler: the harness drives every rebuild and exchange.
        aae_interval_secs: 0,
        aae_rebuild_journal_check: journal_check,
        // Capacity, not the default pacing of repairs (400/s).
        aae_repairs_per_sec: 0,
        ..Config::default()
    }
}

fn key(i: u64) -> Vec<u8> {
    format!("key{i:010}").into_bytes()
}

async fn load(node: &Arc<Node>, a: &Args) {
    let t = Instant::now();
    let mut set = tokio::task::JoinSet::new();
    for i in 0..a.keys {
        if set.len() >= 64 {
            set.join_next().await.expect("task").expect("join");
        }
        let node = node.clone();
        let value = vec![(i % 251) as u8; a.value_bytes];
        set.spawn(async move {
            let c = Content {
                value_len: value.len() as u32,
                value,
                ..Content::default()
            };
            node.put(b"bucket", &key(i), None, c, &PutOpts::default())
                .await
                .expect("put");
        });
        if i > 0 && i % 200_000 == 0 {
            eprintln!("  loaded {i} keys in {:.0} s", t.elapsed().as_secs_f64());
        }
    }
    while let Some(r) = set.join_next().await {
        r.expect("join");
    }
    settle(node).await;
    let s = t.elapsed().as_secs_f64();
    println!(
        "load: {} keys (x3 replicas) in {s:.1} s = {:.0} PUTs/s",
        a.keys,
        a.keys as f64 / s
    );
}

async fn settle(node: &Node) {
    tokio::time::sleep(Duration::from_millis(100)).await;
    while node.vnode_queue_lengths().iter().any(|q| *q > 0) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Rebuilds every vnode unpaced; (replica keys swept, seconds, keys left
/// out by the journal check).
async fn rebuild_all(node: &Node) -> (u64, f64, u64) {
    let t = Instant::now();
    let (mut keys, mut missing) = (0, 0);
    for (p, _) in node.router().local_vnodes() {
        let r = node.aae().aae_rebuild_vnode(p, 0).await.expect("rebuild");
        keys += r.keys;
        missing += r.missing_in_journal;
    }
    (keys, t.elapsed().as_secs_f64(), missing)
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(0.0)
}

fn main() {
    let a = args();
    let tmp;
    let dir = match &a.dir {
        Some(d) => {
            std::fs::create_dir_all(d).expect("dir");
            tempfile::tempdir_in(d).expect("tempdir")
        }
        None => {
            tmp = tempfile::tempdir().expect("tempdir");
            tempfile::tempdir_in(tmp.path()).expect("tempdir")
        }
    };
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let mut summary: BTreeMap<&str, serde_json::Value> = BTreeMap::new();
    rt.block_on(async {
        let open = |jc: bool| {
            let n = Arc::new(Node::open(config(&a, dir.path(), jc)).expect("open"));
            n.start_background();
            n
        };
        let mut node = open(true);
        println!(
            "aae figures: {} keys, {} deltas, {} B values, ring {}, tree {}, data in {}",
            a.keys,
            a.deltas,
            a.value_bytes,
            a.ring,
            a.tree,
            dir.path().display()
        );
        load(&node, &a).await;

        // Rebuild rate, journal check on / off / on / off.
        let mut rates: BTreeMap<bool, Vec<f64>> = BTreeMap::new();
        for jc in [true, false, true, false] {
            node.close();
            drop(node);
            node = open(jc);
            let (keys, s, missing) = rebuild_all(&node).await;
            let rate = keys as f64 / s;
            println!(
                "rebuild (journal check {}): {keys} replica keys in {s:.2} s = {rate:.0} keys/s ({missing} left out)",
                if jc { "on" } else { "off" }
            );
            rates.entry(jc).or_default().push(rate);
        }
        let on = median(rates.get_mut(&true).expect("on"));
        let off = median(rates.get_mut(&false).expect("off"));
        summary.insert("rebuild_keys_per_sec_journal_check", on.round().into());
        summary.insert("rebuild_keys_per_sec_no_journal_check", off.round().into());

        // Memory.
        let (bytes, built, _) = node.aae().aae_tree_stats().await;
        println!(
            "tree memory: {bytes} bytes over {built} vnodes = {:.1} bytes per key (replica keys: {}); fixed by tree size and ring, not by keys",
            bytes as f64 / (a.keys * 3) as f64,
            a.keys * 3
        );
        summary.insert("tree_bytes", bytes.into());

        // In-sync exchanges.
        let firsts: Vec<u32> = (0..a.ring).collect();
        let mut ms = Vec::new();
        for &f in &firsts {
            let t = Instant::now();
            let x = node.aae().aae_exchange_n(f, 3).await.expect("exchange");
            assert_eq!(x.repaired, 0, "in sync");
            ms.push(t.elapsed().as_secs_f64() * 1e3);
        }
        let max = ms.iter().copied().fold(0.0, f64::max);
        let med = median(&mut ms);
        println!(
            "in-sync exchange (root compare, 3 replicas of {} keys each list): median {med:.3} ms, max {max:.3} ms",
            a.keys / u64::from(a.ring)
        );
        summary.insert("in_sync_exchange_ms_median", med.into());
        summary.insert("in_sync_exchange_ms_max", max.into());

        // Deltas: delete keys from each key's third replica underneath.
        let t = Instant::now();
        let mut per_vnode: BTreeMap<u32, Vec<Vec<u8>>> = BTreeMap::new();
        for i in 0..a.deltas {
            let k = key(i);
            let targets = node.preflist_of(b"bucket", &k);
            per_vnode.entry(targets[2].partition).or_default().push(k);
        }
        for (p, keys) in per_vnode {
            let v = node
                .router()
                .local_vnodes()
                .into_iter()
                .find(|(q, _)| *q == p)
                .expect("vnode")
                .1;
            v.call(Duration::from_secs(600), move |st| {
                let opts = basalt_backend::WriteOptions::default();
                for k in &keys {
                    st.backend.delete(b"bucket", k, &opts)?;
                }
                Ok(())
            })
            .await
            .expect("delete underneath");
        }
        println!(
            "deltas: {} keys deleted underneath their third replica in {:.1} s",
            a.deltas,
            t.elapsed().as_secs_f64()
        );
        // The trees still hold the lost keys: an exchange sees nothing.
        let x = node.aae().aae_exchange_n(0, 3).await.expect("exchange");
        println!("exchange before the rebuild: {x:?} (the trees do not know)");
        let (keys, s, _) = rebuild_all(&node).await;
        println!("rebuild after the loss: {keys} replica keys in {s:.1} s");
        let t = Instant::now();
        let mut repaired = 0u64;
        let mut passes = 0;
        let mut exchanges = 0u64;
        loop {
            passes += 1;
            let mut pass = 0;
            for &f in &firsts {
                let x = node.aae().aae_exchange_n(f, 3).await.expect("exchange");
                exchanges += 1;
                pass += x.repaired as u64;
            }
            settle(&node).await;
            repaired += pass;
            if pass == 0 {
                break;
            }
            if passes % 10 == 0 {
                eprintln!(
                    "  pass {passes}: {repaired} repaired in {:.0} s",
                    t.elapsed().as_secs_f64()
                );
            }
        }
        let s = t.elapsed().as_secs_f64();
        let per_hour = repaired as f64 / s * 3600.0;
        println!(
            "repairs: {repaired} keys in {s:.1} s over {exchanges} exchanges ({passes} passes) = {per_hour:.0} per hour"
        );
        summary.insert("repaired", repaired.into());
        summary.insert("repairs_per_hour", per_hour.round().into());
        summary.insert("repair_exchanges", exchanges.into());
        let bad = node.aae().aae_verify_trees().await.expect("verify");
        assert!(bad.is_empty(), "trees differ after repair on {bad:?}");
        node.close();
    });
    println!(
        "summary: {}",
        serde_json::to_string(&summary).expect("summary")
    );
}
