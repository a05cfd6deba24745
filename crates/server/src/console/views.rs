//! The console's JSON views (`GET /console/api/...`), each made of what
//! `basalt admin` already computes: the admin line's `--json` views
//! ([`Node::admin_json`]), the `/stats` object ([`metrics::stats_json`]),
//! the vnode rows of `vnode-status`, the bucket-type registry and the
//! security listings. A view that fails in part carries the reason in
//! place of that part (`{"error": ...}`) rather than failing whole.

use super::{json, process, user_of, Console};
use crate::api::http::auth::{ConnInfo, User};
use crate::node::Node;
use crate::server::metrics;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::Response;
use axum::Extension;
use serde_json::{json, Value};
use std::sync::Arc;

type Shared = State<Arc<Console>>;

/// One admin line's JSON, or `{"error": why}`.
async fn admin(node: &Arc<Node>, words: &[&str]) -> Value {
    node.admin_json(words)
        .await
        .unwrap_or_else(|e| json!({ "error": e.trim_end() }))
}

/// `GET /console/api/session`: who and where, and the token actions carry.
pub async fn session(
    State(console): Shared,
    user: Option<Extension<User>>,
    info: Option<Extension<ConnInfo>>,
) -> Response {
    let node = &console.node;
    let c = node.config();
    json(
        StatusCode::OK,
        &json!({
            "node": c.node_name,
            "version": crate::SERVER_VERSION,
            "basalt_version": env!("CARGO_PKG_VERSION"),
            "user": user_of(user.as_ref()),
            "token": console.token,
            "security": node.security.enabled(),
            "tls": info.is_some_and(|i| i.tls),
            "backend": c.backend,
            "ring_size": c.ring_size,
            "reports": !c.bench_results_dir.is_empty(),
            "max_streams": crate::limits::CONSOLE_MAX_STREAMS,
            "sample_ms": crate::limits::CONSOLE_SAMPLE_EVERY.as_millis() as u64,
        }),
    )
}

/// `GET /console/api/cluster`: members and their status, the ring (owner
/// and pending next owner of each partition), transfers and handoffs, the
/// staged plan, the transfer limit.
pub async fn cluster(State(console): Shared) -> Response {
    let node = &console.node;
    let state = node.router.cluster.state();
    let owners: Vec<&str> = state.owners.iter().map(String::as_str).collect();
    let next: serde_json::Map<String, Value> = state
        .next
        .iter()
        .map(|(p, n)| (p.to_string(), Value::from(n.as_str())))
        .collect();
    let v = json!({
        "node": node.config().node_name,
        "members": admin(node, &["member-status"]).await,
        "ring": admin(node, &["ring-status"]).await,
        "owners": owners,
        "next": next,
        "transfers": admin(node, &["transfers"]).await,
        "handoffs": admin(node, &["handoff", "summary"]).await,
        "plan": admin(node, &["plan"]).await,
        "transfer_limit": node.handoff.transfer_limit(),
    });
    json(StatusCode::OK, &v)
}

/// The backend figures of one vnode's (or the node's summed) counters:
/// sizes, ledger levels, compaction, write amplification, cache hits.
fn backend_figures(c: &serde_json::Map<String, Value>) -> Value {
    let g = |k: &str| c.get(k).and_then(Value::as_u64).unwrap_or(0);
    let ratio = |hits: u64, misses: u64| {
        if hits + misses == 0 {
            Value::Null
        } else {
            Value::from(hits as f64 / (hits + misses) as f64)
        }
    };
    let user = g("user_bytes_written");
    let wa = if user == 0 {
        Value::Null
    } else {
        Value::from((g("journal_bytes_written") + g("ledger_bytes_written")) as f64 / user as f64)
    };
    let levels: Vec<u64> = (0..8)
        .map_while(|i| c.get(&format!("ledger_l{i}_files")).and_then(Value::as_u64))
        .collect();
    json!({
        "journal_files": g("journal_files"),
        "journal_bytes": g("journal_bytes"),
        "journal_garbage_bytes": g("journal_garbage_bytes_estimated"),
        "ledger_files": g("ledger_files"),
        "ledger_bytes": g("ledger_bytes"),
        "ledger_level_files": levels,
        "ledger_flushes": g("ledger_flushes"),
        "ledger_merges": g("ledger_merges"),
        "compaction_runs": g("compaction_runs"),
        "compaction_bytes_reclaimed": g("compaction_bytes_reclaimed"),
        "write_amplification": wa,
        "value_cache_hit_ratio": ratio(g("journal_value_cache_hits"), g("journal_value_cache_misses")),
        "block_cache_hit_ratio": ratio(g("ledger_block_cache_hits"), g("ledger_block_cache_misses")),
        "memtable_bytes": g("ledger_memtable_bytes"),
        "memtable_budget_bytes": g("memtable_budget_bytes"),
        "disk_free_bytes": c.get("disk_free_bytes").cloned().unwrap_or(Value::Null),
        "disk_total_bytes": c.get("disk_total_bytes").cloned().unwrap_or(Value::Null),
    })
}

/// `GET /console/api/node`: this node's vnodes (queue, refusals, backend
/// figures), the node's backend totals, its process (CPU, memory, open
/// files) and the free space of its data directory.
pub async fn node(State(console): Shared) -> Response {
    let node = &console.node;
    let stats = metrics::stats_json(node).await;
    let rows = node.vnode_rows().await;
    let vnodes: Vec<Value> = rows
        .iter()
        .map(|r| {
            let c: serde_json::Map<String, Value> = r
                .counters
                .iter()
                .map(|(k, v)| (k.clone(), Value::from(*v)))
                .collect();
            json!({
                "partition": r.partition,
                "role": r.role,
                "owner": r.owner,
                "queue": r.queue,
                "overloads": r.overloads,
                "reads_here": r.reads_here,
                "writes_here": r.writes_here,
                "backend": r.backend,
                "disk_bytes": r.disk_bytes,
                "error": r.error,
                "figures": if r.error.is_none() { backend_figures(&c) } else { Value::Null },
            })
        })
        .collect();
    let totals = stats
        .get("backend_stats")
        .and_then(Value::as_object)
        .map_or(Value::Null, backend_figures);
    let dir = node.config().data_dir.clone();
    let disk = match basalt_engine::DiskSpace::of(&dir) {
        Ok(d) => {
            json!({"free_bytes": d.free_bytes, "total_bytes": d.total_bytes, "free_pct": d.free_pct()})
        }
        Err(e) => json!({"error": e.to_string()}),
    };
    let pick = |k: &str| stats.get(k).cloned().unwrap_or(Value::Null);
    let v = json!({
        "node": node.config().node_name,
        "backend": node.config().backend,
        "data_dir": dir.display().to_string(),
        "vnodes": vnodes,
        "totals": totals,
        "disk_bytes": pick("backend_disk_bytes"),
        "disk": disk,
        "process": process::figures().json(),
        "counters": {
            "node_gets_total": pick("node_gets_total"),
            "node_puts_total": pick("node_puts_total"),
            "node_deletes_total": pick("node_deletes_total"),
            "request_errors_total": pick("request_errors_total"),
            "request_overloads_total": pick("request_overloads_total"),
            "read_repairs_total": pick("read_repairs_total"),
            "pbc_active": pick("pbc_active"),
            "vnode_queue_total": pick("vnode_queue_total"),
            "vnode_queue_max": pick("vnode_queue_max"),
        },
        "console_streams": console.streams_open(),
    });
    json(StatusCode::OK, &v)
}

/// `GET /console/api/aae`: `aae-status` (exchanges, repairs, rebuilds and
/// when the next is due).
pub async fn aae(State(c): Shared) -> Response {
    json(StatusCode::OK, &admin(&c.node, &["aae-status"]).await)
}

/// `GET /console/api/repl`: `repl-status` (sinks, queues per priority,
/// delay, the last full-sync and its result).
pub async fn repl(State(c): Shared) -> Response {
    json(StatusCode::OK, &admin(&c.node, &["repl-status"]).await)
}

/// `GET /console/api/types`: every bucket type, its status and props (as
/// HTTP `GET /types/T/props` shows them).
pub async fn types(State(c): Shared) -> Response {
    let list: Vec<Value> = c
        .node
        .types()
        .list()
        .into_iter()
        .map(|(name, t)| {
            json!({
                "name": name,
                "active": t.status == crate::bucket::types::TypeStatus::Active,
                "props": crate::api::http::buckets::props_json(&t.props),
            })
        })
        .collect();
    json(StatusCode::OK, &json!({ "types": list }))
}

/// `GET /console/api/security`: status, users, groups, grants and sources
/// (read-only; passwords are never shown, only whether one is set).
pub async fn security(State(c): Shared) -> Response {
    let s = &c.node.security;
    let part = |w: &str| s.admin_json(&[w]).unwrap_or(Value::Null);
    json(
        StatusCode::OK,
        &json!({
            "status": part("status"),
            "users": part("print-users"),
            "groups": part("print-groups"),
            "grants": part("print-grants"),
            "sources": part("print-sources"),
        }),
    )
}
