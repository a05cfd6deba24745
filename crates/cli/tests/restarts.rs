//! Crash loop under load: three `basalt start` nodes on 127.0.0.1; clients
//! PUT new keys at w = 2 and GET keys already acknowledged at r = 2 (over
//! HTTP), while one node is SIGKILLed and restarted a few seconds later,
//! again and again. Every GET of an acknowledged key must find it: not one
//! "not found" (Riak's sloppy quorum with `notfound_ok` can answer 404
//! here, when an empty restarted replica and one not yet written answer
//! first; `notfound_wait_ms` makes the GET wait for the third). Failed
//! requests (error statuses from live nodes, and requests a client sent to
//! the node that was down) are counted and reported, not treated as data
//! loss; after the loop every acknowledged key is read at r = 3.
//!
//! CI: 3 kill/restart cycles; `BASALT_LONG_TESTS=1`: 12.

mod common;
use common::procs::{test_dir, NodeProc};
use common::{admin, long, wait_for};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

const NODES: usize = 3;
const CLIENTS: usize = 6;

#[derive(Default)]
struct Counts {
    puts_acked: AtomicU64,
    puts_failed: AtomicU64,
    gets_found: AtomicU64,
    gets_not_found: AtomicU64,
    gets_failed: AtomicU64,
    /// Requests to the node that was down (connection refused or reset):
    /// the client's choice of node, not an answer of the cluster.
    unreachable: AtomicU64,
}

fn client(
    id: usize,
    http: Vec<String>,
    stop: Arc<AtomicBool>,
    acked: Arc<Mutex<Vec<String>>>,
    counts: Arc<Counts>,
    not_found: Arc<Mutex<Vec<String>>>,
) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(id as u64);
    let c = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .expect("client");
    let mut n = 0u64;
    while !stop.load(Ordering::Relaxed) {
        let node = &http[rng.gen_range(0..http.len())];
        if rng.gen_bool(0.5) {
            n += 1;
            let key = format!("c{id}k{n}");
            let sent = c
                .put(format!("http://{node}/buckets/r/keys/{key}?w=2"))
                .header("Content-Type", "text/plain")
                .body(key.clone())
                .send();
            match sent {
                Ok(r) if r.status().is_success() => {
                    counts.puts_acked.fetch_add(1, Ordering::Relaxed);
                    acked.lock().expect("acked").push(key);
                }
                Ok(_) => {
                    counts.puts_failed.fetch_add(1, Ordering::Relaxed);
                }
                Err(_) => {
                    counts.unreachable.fetch_add(1, Ordering::Relaxed);
                }
            }
        } else {
            let key = {
                let a = acked.lock().expect("acked");
                if a.is_empty() {
                    continue;
                }
                a[rng.gen_range(0..a.len())].clone()
            };
            match c
                .get(format!("http://{node}/buckets/r/keys/{key}?r=2"))
                .send()
                .map(|r| r.status().as_u16())
            {
                Ok(200) => counts.gets_found.fetch_add(1, Ordering::Relaxed),
                Err(_) => counts.unreachable.fetch_add(1, Ordering::Relaxed),
                Ok(404) => {
                    not_found
                        .lock()
                        .expect("nf")
                        .push(format!("{key} via {node}"));
                    counts.gets_not_found.fetch_add(1, Ordering::Relaxed)
                }
                _ => counts.gets_failed.fetch_add(1, Ordering::Relaxed),
            };
        }
    }
}

#[test]
fn restarting_a_node_never_makes_an_acknowledged_key_not_found() {
    let (root, _tmp) = test_dir();
    let mut nodes: Vec<NodeProc> = (1..=NODES)
        .map(|i| NodeProc::new(&root, i).with_http())
        .collect();
    for n in &mut nodes {
        n.start_fresh(16);
    }
    for n in &nodes[1..] {
        let (ok, out) = admin(&n.cluster, &["cluster", "join", &nodes[0].cluster]);
        assert!(ok, "join: {out}");
    }
    assert!(admin(&nodes[0].cluster, &["cluster", "plan"]).0);
    assert!(admin(&nodes[0].cluster, &["cluster", "commit"]).0);
    wait_for("transfers", Duration::from_secs(60), || {
        admin(&nodes[0].cluster, &["ring-status"])
            .1
            .contains("pending ownership transfers: 0")
    });
    let http: Vec<String> = nodes.iter().flat_map(|n| n.http.clone()).collect();
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(Mutex::new(Vec::new()));
    let counts = Arc::new(Counts::default());
    let not_found = Arc::new(Mutex::new(Vec::new()));
    let workers: Vec<_> = (0..CLIENTS)
        .map(|id| {
            let (h, s, a, c, nf) = (
                http.clone(),
                stop.clone(),
                acked.clone(),
                counts.clone(),
                not_found.clone(),
            );
            std::thread::spawn(move || client(id, h, s, a, c, nf))
        })
        .collect();
    let cycles = if long() { 12 } else { 3 };
    std::thread::sleep(Duration::from_secs(2));
    for cycle in 0..cycles {
        // The victim rotates over nodes 2 and 3 (node 1 is the claimant).
        let victim = 1 + cycle % (NODES - 1);
        nodes[victim].kill9();
        std::thread::sleep(Duration::from_secs(3));
        nodes[victim].start();
        std::thread::sleep(Duration::from_secs(4));
    }
    stop.store(true, Ordering::Relaxed);
    for w in workers {
        w.join().expect("client");
    }
    let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
    println!(
        "restarts: {cycles} kill/restart cycles; PUT acked {} failed {}; GET of acked keys found {} not-found {} failed {}; requests to the down node {}",
        ld(&counts.puts_acked),
        ld(&counts.puts_failed),
        ld(&counts.gets_found),
        ld(&counts.gets_not_found),
        ld(&counts.gets_failed),
        ld(&counts.unreachable),
    );
    assert!(
        ld(&counts.gets_found) > 200,
        "too little load to mean anything"
    );
    let nf = not_found.lock().expect("nf");
    assert!(nf.is_empty(), "acknowledged keys answered 404: {nf:?}");
    // After the loop, nothing acknowledged is missing.
    let c = reqwest::blocking::Client::new();
    let keys = acked.lock().expect("acked").clone();
    let missing: Vec<&String> = keys
        .iter()
        .filter(|k| {
            !c.get(format!("http://{}/buckets/r/keys/{k}?r=3", http[0]))
                .send()
                .is_ok_and(|r| r.status().as_u16() == 200)
        })
        .collect();
    assert!(
        missing.is_empty(),
        "{} acknowledged keys missing: {:?}",
        missing.len(),
        &missing[..missing.len().min(10)]
    );
}
