//! Node statistics: `GET /stats` (Riak's JSON, `riak_kv_wm_stats`) and
//! `GET /metrics` (Prometheus text exposition format 0.0.4).
//!
//! Latencies are the coordinator's (GET, PUT, DELETE for both PB and HTTP;
//! see [`crate::latency`]), in microseconds over the recent window.

/// The state these handlers extract: the node (its stats are every part's).
type Shared = axum::extract::State<std::sync::Arc<crate::node::Node>>;
use crate::latency::{Op, Summary};
use crate::node::Node;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};

/// Backend counters summed over every vnode (wait-timer maxima: the
/// largest), and their disk bytes.
async fn backend_totals(node: &Node) -> (BTreeMap<String, u64>, u64, usize) {
    let all = node.backend_stats().await;
    let mut counters = BTreeMap::new();
    let mut disk = 0u64;
    for (_, s) in &all {
        disk = disk.saturating_add(s.disk_bytes);
        for (name, v) in &s.counters {
            let e = counters.entry(name.clone()).or_insert(0u64);
            *e = merge_counter(name, *e, *v);
        }
    }
    (counters, disk, all.len())
}

/// The leveled caches and memtable budget a node's vnodes share
/// (`block_cache_mb`, `value_cache_mb`, `memtable_mb`) and the filesystem of the data directory: every vnode
/// reports the same figure.
const NODE_WIDE_GAUGES: [&str; 9] = [
    "memtable_budget_bytes",
    "memtable_budget_used_bytes",
    "memtable_budget_freezes",
    "block_cache_capacity_bytes",
    "block_cache_bytes",
    "value_cache_capacity_bytes",
    "value_cache_bytes",
    "disk_free_bytes",
    "disk_total_bytes",
];

/// Adds one vnode's counter to the node's total: a wait timer's maximum is
/// the largest over the vnodes and a shared cache's size is the same in
/// every vnode, so both take the largest; everything else is summed.
fn merge_counter(name: &str, total: u64, v: u64) -> u64 {
    if name.ends_with("_max_ns") || NODE_WIDE_GAUGES.contains(&name) {
        total.max(v)
    } else {
        total.saturating_add(v)
    }
}

fn queue_stats(q: &[usize]) -> (usize, usize, f64, usize, usize) {
    let mut s = q.to_vec();
    s.sort_unstable();
    let total: usize = s.iter().sum();
    let mean = if s.is_empty() {
        0.0
    } else {
        total as f64 / s.len() as f64
    };
    (
        s.first().copied().unwrap_or(0),
        s.get(s.len() / 2).copied().unwrap_or(0),
        mean,
        s.last().copied().unwrap_or(0),
        total,
    )
}

/// `GET /stats`.
pub async fn stats(State(node): Shared) -> Response {
    let m = stats_json(&node).await;
    ([(header::CONTENT_TYPE, "application/json")], m.to_string()).into_response()
}

/// The node's statistics as `GET /stats` serves them (Riak's names where
/// Riak has one); `basalt admin status` prints the same object.
pub async fn stats_json(node: &Node) -> serde_json::Value {
    let s = node.stats();
    let queues = node.vnode_queue_lengths();
    let (qmin, qmedian, qmean, qmax, qtotal) = queue_stats(&queues);
    let c = node.config();
    let (counters, disk, answered) = backend_totals(node).await;
    let mut m = serde_json::json!({
        "nodename": c.node_name,
        "riak_kv_version": crate::SERVER_VERSION,
        "storage_backend": c.backend,
        "ring_creation_size": c.ring_size,
        "node_gets_total": s.gets.load(Ordering::Relaxed),
        "node_puts_total": s.puts.load(Ordering::Relaxed),
        "node_deletes_total": s.deletes.load(Ordering::Relaxed),
        "vnode_queue_total": qtotal,
        "vnode_queue_max": qmax,
        "vnode_queue_lengths": queues,
        "replica_write_bytes_in_flight": node.replica_write_bytes_in_flight(),
        "riak_kv_vnodeq_min": qmin,
        "riak_kv_vnodeq_median": qmedian,
        "riak_kv_vnodeq_mean": qmean,
        "riak_kv_vnodeq_max": qmax,
        "riak_kv_vnodeq_total": qtotal,
        "backend_stats": counters,
        "backend_disk_bytes": disk,
        "backend_vnodes_reporting": answered,
    });
    let (aae_bytes, aae_built, aae_folds) = node.aae.aae_tree_stats().await;
    if let Some(obj) = m.as_object_mut() {
        obj.insert("aae_tree_bytes".into(), aae_bytes.into());
        obj.insert("aae_tree_vnodes_built".into(), aae_built.into());
        obj.insert("aae_folds_total".into(), aae_folds.into());
        let r = &node.aae.aae_rebuilds;
        let ld = |a: &std::sync::atomic::AtomicU64| a.load(std::sync::atomic::Ordering::Relaxed);
        obj.insert("aae_rebuilds_total".into(), ld(&r.rebuilds).into());
        obj.insert("aae_rebuild_keys_total".into(), ld(&r.keys).into());
        obj.insert(
            "aae_rebuild_missing_in_journal_total".into(),
            ld(&r.missing_in_journal).into(),
        );
        obj.insert("aae_rebuild_failures_total".into(), ld(&r.failures).into());
        obj.insert(
            "aae_rebuild_seconds_total".into(),
            (ld(&r.micros) as f64 / 1e6).into(),
        );
        for (name, v, _) in cluster_counters(node) {
            obj.insert(name.to_string(), v.into());
        }
        for op in Op::ALL {
            let l = s.latency.summary(op);
            let n = op.name();
            // Riak's names: node_gets (recent count), node_get_fsm_time_*.
            obj.insert(format!("node_{n}s"), l.count.into());
            obj.insert(
                format!("node_{n}_fsm_time_mean"),
                (l.mean.round() as u64).into(),
            );
            obj.insert(format!("node_{n}_fsm_time_median"), l.median.into());
            obj.insert(format!("node_{n}_fsm_time_95"), l.p95.into());
            obj.insert(format!("node_{n}_fsm_time_99"), l.p99.into());
            obj.insert(format!("node_{n}_fsm_time_100"), l.max.into());
        }
        // Where a PUT's time went: its coordinating step, then its replicas.
        for (name, v) in [
            s.put_coordinate.named("put_coordinate"),
            s.put_replicas.named("put_replicas"),
        ]
        .into_iter()
        .flatten()
        {
            obj.insert(name, v.into());
        }
    }
    m
}

/// A Prometheus label value, escaped.
fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

/// The exposition text of the node's metrics.
pub fn render(node: &Node, counters: &BTreeMap<String, u64>, disk: u64) -> String {
    let s = node.stats();
    let mut out = String::new();
    fn family(out: &mut String, name: &str, kind: &str, help: &str) -> String {
        let _ = writeln!(out, "# HELP {name} {help}");
        let _ = writeln!(out, "# TYPE {name} {kind}");
        name.to_string()
    }
    for (name, v, help) in [
        (
            "basalt_node_gets_total",
            s.gets.load(Ordering::Relaxed),
            "Coordinated GETs (PB and HTTP) since the node started.",
        ),
        (
            "basalt_node_puts_total",
            s.puts.load(Ordering::Relaxed),
            "Coordinated PUTs (deletes excluded) since the node started.",
        ),
        (
            "basalt_node_deletes_total",
            s.deletes.load(Ordering::Relaxed),
            "Coordinated DELETEs since the node started.",
        ),
    ] {
        let n = family(&mut out, name, "counter", help);
        let _ = writeln!(out, "{n} {v}");
    }
    for (name, v, help) in cluster_counters(node) {
        let kind = if name.ends_with("_total") {
            "counter"
        } else {
            "gauge"
        };
        let n = family(&mut out, &format!("basalt_{name}"), kind, help);
        let _ = writeln!(out, "{n} {v}");
    }
    let n = family(
        &mut out,
        "basalt_node_op_latency_microseconds",
        "summary",
        "Coordinated operation latency: quantiles over the last minute, sum and count since start.",
    );
    for op in Op::ALL {
        let l: Summary = s.latency.summary(op);
        let o = op.name();
        for (q, v) in [
            ("0.5", l.median),
            ("0.95", l.p95),
            ("0.99", l.p99),
            ("1", l.max),
        ] {
            let _ = writeln!(out, "{n}{{op=\"{o}\",quantile=\"{q}\"}} {v}");
        }
        let _ = writeln!(out, "{n}_sum{{op=\"{o}\"}} {}", l.total_sum_us);
        let _ = writeln!(out, "{n}_count{{op=\"{o}\"}} {}", l.total_count);
    }
    let n = family(
        &mut out,
        "basalt_vnode_queue_length",
        "gauge",
        "Jobs waiting in each vnode's queue.",
    );
    // Labelled by partition: a node of a cluster holds only some of them.
    for (p, v) in node.router.local_vnodes() {
        let _ = writeln!(out, "{n}{{partition=\"{p}\"}} {}", v.queue_len());
    }
    let n = family(
        &mut out,
        "basalt_backend_disk_bytes",
        "gauge",
        "Bytes of the backends' files on disk (all vnodes).",
    );
    let _ = writeln!(out, "{n} {disk}");
    let n = family(
        &mut out,
        "basalt_backend_stat",
        "gauge",
        "Backend-specific statistics summed over every vnode, by name.",
    );
    for (name, v) in counters {
        let _ = writeln!(out, "{n}{{name=\"{}\"}} {v}", label(name));
    }
    out
}

/// `GET /metrics`.
pub async fn metrics(State(node): Shared) -> Response {
    let (counters, disk, _) = backend_totals(&node).await;
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        render(&node, &counters, disk),
    )
        .into_response()
}

impl Node {
    /// The node's counters beyond the per-operation ones (anti-entropy,
    /// reaps, security, MapReduce, hooks, replication): (name, value, help),
    /// for `/stats` and `/metrics`.
    pub fn cluster_counters(&self) -> Vec<(&'static str, u64, &'static str)> {
        cluster_counters(self)
    }
}

/// Anti-entropy and replication counters: (name, value, help), for
/// `/stats` and `/metrics` (`repl_queue`, `reaps_pending` and `pbc_active` are gauges, the rest counters).
fn cluster_counters(node: &Node) -> Vec<(&'static str, u64, &'static str)> {
    let s = node.stats();
    let ld = |a: &AtomicU64| a.load(Ordering::Relaxed);
    let mut out = vec![
        (
            "aae_exchanges_total",
            ld(&s.aae_exchanges),
            "Anti-entropy exchanges run by this node.",
        ),
        (
            "aae_repairs_total",
            ld(&s.aae_repairs),
            "Keys repaired by anti-entropy.",
        ),
        (
            "aae_fold_requests_total",
            ld(&s.aae_fold_requests),
            "Anti-entropy fold queries (aae_fold) coordinated by this node.",
        ),
        (
            "aae_loops_total",
            ld(&s.aae_loops),
            "Anti-entropy follow-up loops run by exchanges that hit their caps.",
        ),
        (
            "aae_range_repairs_total",
            ld(&s.aae_range_repairs),
            "Keys repaired by scoped (bucket or last-modified range) anti-entropy follow-up loops.",
        ),
        (
            "request_errors_total",
            ld(&s.errors),
            "Coordinated GETs, PUTs and DELETEs that answered an error (overload included).",
        ),
        (
            "request_overloads_total",
            ld(&s.overloads),
            "Coordinated GETs, PUTs and DELETEs refused with overload.",
        ),
        (
            "put_replica_waits_total",
            ld(&s.replica_write_waits),
            "PUTs that waited, past their quorum, for the node's replica writes in flight to fall back under limits.replica_writes_in_flight_mb (or for their own replicas).",
        ),
        (
            "read_repairs_total",
            ld(&s.read_repairs),
            "Read repairs sent to stale or missing replicas by GETs this node coordinated.",
        ),
        (
            "read_repairs_dropped_total",
            ld(&s.read_repairs_dropped),
            "Read repairs dropped because the background queue was full (limits BACKGROUND_QUEUE requests, BACKGROUND_BYTES object bytes); anti-entropy repairs those replicas later.",
        ),
        (
            "get_notfound_waits_total",
            ld(&s.notfound_waits),
            "GETs whose quorum answered only not-found and that waited for the other replicas.",
        ),
        (
            "get_notfound_rescues_total",
            ld(&s.notfound_rescues),
            "Of those, GETs that a later replica answered with the object.",
        ),
        (
            "reaps_total",
            ld(&s.reaps),
            "Tombstones this node reaped from every replica (delete_mode, full-sync, aae fold reap-tombs).",
        ),
        (
            "reaps_deferred_total",
            ld(&s.reaps_deferred),
            "Reap attempts put off: a copy of the key's partitions held for another owner, a member down, or a primary unreachable.",
        ),
        (
            "reaps_dropped_total",
            ld(&s.reaps_dropped),
            "Reaps given up (put off at every attempt, or over the pending limit): their tombstones stay.",
        ),
        (
            "pbc_active",
            s.pbc_active.load(Ordering::Relaxed) as u64,
            "Client (PB) connections open now; one ends once its request in flight has stopped.",
        ),
        (
            "pbc_connects_total",
            ld(&s.pbc_connects),
            "Client (PB) connections accepted since the node started.",
        ),
        (
            "reaps_pending",
            s.reaps_pending.load(Ordering::Relaxed) as u64,
            "Reaps waiting for their delete_mode delay or a retry.",
        ),
        (
            "security_refused_total",
            node.security.refused.load(Ordering::Relaxed),
            "Requests refused by security (no TLS, not authenticated, bad credentials, permission missing).",
        ),
        (
            "index_results_read_total",
            ld(&s.index_results_read),
            "2i results the covering vnodes returned to this node's queries.",
        ),
        (
            "mapred_jobs_total",
            ld(&s.mapred_jobs),
            "MapReduce jobs run by this node.",
        ),
        (
            "mapred_errors_total",
            ld(&s.mapred_errors),
            "MapReduce jobs that failed (bad job, phase error, timeout, limit).",
        ),
        (
            "mapred_local_map_rounds_total",
            ld(&s.mapred_local_rounds),
            "Map rounds run on this node's vnodes for whole-bucket MapReduce jobs (any coordinator).",
        ),
        (
            "mapred_local_map_keys_total",
            ld(&s.mapred_local_keys),
            "Listed keys mapped on this node's vnodes for MapReduce map phases (any coordinator).",
        ),
        (
            "precommit_refused_total",
            ld(&node.hooks.postcommit.precommit_refused),
            "Writes refused by a pre-commit hook (or failed in one).",
        ),
        (
            "postcommit_errors_total",
            ld(&node.hooks.postcommit.errors),
            "Post-commit hook runs that failed (the writes stand).",
        ),
        (
            "postcommit_dropped_total",
            ld(&node.hooks.postcommit.dropped),
            "Post-commit hook runs dropped because too many were in flight.",
        ),
        (
            "divergent_merges_total",
            crate::object::DIVERGENT_MERGES.load(Ordering::Relaxed),
            "Merges that met one clock over different siblings (kept the union).",
        ),
    ];
    out.extend(node.repl.repl_counters());
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_cache_sizes_and_maxima_are_not_summed() {
        let vnodes = [
            [
                ("journal_value_cache_hits", 5),
                ("value_cache_capacity_bytes", 64),
                ("journal_fsync_max_ns", 7),
            ],
            [
                ("journal_value_cache_hits", 3),
                ("value_cache_capacity_bytes", 64),
                ("journal_fsync_max_ns", 9),
            ],
        ];
        let mut total = BTreeMap::new();
        for counters in vnodes {
            for (name, v) in counters {
                let e = total.entry(name).or_insert(0u64);
                *e = merge_counter(name, *e, v);
            }
        }
        assert_eq!(total["journal_value_cache_hits"], 8);
        assert_eq!(total["value_cache_capacity_bytes"], 64);
        assert_eq!(total["journal_fsync_max_ns"], 9);
    }

    #[test]
    fn queue_summary_and_labels() {
        assert_eq!(queue_stats(&[3, 0, 1]), (0, 1, 4.0 / 3.0, 3, 4));
        assert_eq!(queue_stats(&[]), (0, 0, 0.0, 0, 0));
        assert_eq!(label("a\"b\\c\n"), "a\\\"b\\\\c\\n");
    }
}
