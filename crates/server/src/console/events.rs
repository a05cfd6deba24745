//! The console's live stream, `GET /console/api/events`: server-sent
//! events, one `sample` event per [`CONSOLE_SAMPLE_EVERY`] with the rate
//! (ops/s since the previous sample) and recent latency (median, p99, max
//! over the last minute's window, µs) of every timed operation, error,
//! overload and read-repair rates, vnode queues and the process's CPU.
//!
//! Bounded: at most [`CONSOLE_MAX_STREAMS`] streams per node (another is
//! answered 503); every stream shares one sampler task, which runs only
//! while a stream is open, so the node's cost does not grow with the
//! number of viewers; a comment line every [`CONSOLE_KEEP_ALIVE`] on a
//! quiet stream; a slow client skips samples (a small broadcast buffer)
//! rather than queueing them. Streams end when the node stops; the page
//! reconnects by itself (EventSource).

use super::process;
use super::Console;
use crate::latency::Op;
use crate::limits::{CONSOLE_KEEP_ALIVE, CONSOLE_MAX_STREAMS, CONSOLE_SAMPLE_EVERY};
use crate::node::Node;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Instant;
use tokio::sync::broadcast;

/// Samples a slow stream may fall behind before it skips some.
const BUFFER: usize = 4;

/// What one sample compares with the previous one.
struct Previous {
    at: Instant,
    op_totals: [u64; Op::ALL.len()],
    errors: u64,
    overloads: u64,
    read_repairs: u64,
    cpu_ticks: Option<u64>,
}

fn previous(node: &Node) -> Previous {
    let s = node.stats();
    let mut op_totals = [0u64; Op::ALL.len()];
    for (i, op) in Op::ALL.iter().enumerate() {
        op_totals[i] = s.latency.summary(*op).total_count;
    }
    Previous {
        at: Instant::now(),
        op_totals,
        errors: s.errors.load(Ordering::Relaxed),
        overloads: s.overloads.load(Ordering::Relaxed),
        read_repairs: s.read_repairs.load(Ordering::Relaxed),
        cpu_ticks: process::cpu_ticks(),
    }
}

/// One sample: what changed since `prev` (which becomes now).
fn sample(node: &Node, streams: usize, prev: &mut Previous) -> Value {
    let now = previous(node);
    let secs = now.at.duration_since(prev.at).as_secs_f64().max(1e-3);
    let rate = |a: u64, b: u64| a.saturating_sub(b) as f64 / secs;
    let s = node.stats();
    let mut ops = serde_json::Map::new();
    for (i, op) in Op::ALL.iter().enumerate() {
        let l = s.latency.summary(*op);
        ops.insert(
            op.name().to_string(),
            json!({
                "rate": rate(now.op_totals[i], prev.op_totals[i]),
                "median_us": l.median,
                "p99_us": l.p99,
                "max_us": l.max,
            }),
        );
    }
    let cpu = match (now.cpu_ticks, prev.cpu_ticks) {
        (Some(a), Some(b)) => Value::from(100.0 * rate(a, b) / process::TICKS_PER_SEC as f64),
        _ => Value::Null,
    };
    let queues = node.vnode_queue_lengths();
    let v = json!({
        "t": basalt_engine::clock::now_us() / 1000,
        "node": node.config().node_name,
        "ops": ops,
        "errors": rate(now.errors, prev.errors),
        "overloads": rate(now.overloads, prev.overloads),
        "read_repairs": rate(now.read_repairs, prev.read_repairs),
        "vnode_queue_total": queues.iter().sum::<usize>(),
        "vnode_queue_max": queues.iter().max().copied().unwrap_or(0),
        "cpu_pct": cpu,
        "streams": streams,
    });
    *prev = now;
    v
}

/// Subscribes to the node's sampler, starting it if none runs.
fn subscribe(console: &Arc<Console>) -> broadcast::Receiver<Arc<str>> {
    let mut slot = console.sampler.lock();
    if let Some(tx) = slot.as_ref() {
        return tx.subscribe();
    }
    let (tx, rx) = broadcast::channel(BUFFER);
    *slot = Some(tx.clone());
    let console = console.clone();
    tokio::spawn(async move {
        let node = &console.node;
        let mut prev = previous(node);
        let mut tick = tokio::time::interval(CONSOLE_SAMPLE_EVERY);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            {
                // Under the slot's lock: a stream subscribing now either
                // finds this sampler still running or starts a new one.
                let mut slot = console.sampler.lock();
                if tx.receiver_count() == 0 {
                    *slot = None;
                    return;
                }
            }
            let v = sample(node, console.streams_open(), &mut prev);
            let _ = tx.send(Arc::from(v.to_string()));
        }
    });
    rx
}

/// `GET /console/api/events`.
pub async fn events(State(console): State<Arc<Console>>) -> Response {
    let Ok(permit) = console.streams.clone().try_acquire_owned() else {
        return super::json(
            StatusCode::SERVICE_UNAVAILABLE,
            &json!({"error": format!("this node serves at most {CONSOLE_MAX_STREAMS} live console streams at once; close one")}),
        );
    };
    let rx = subscribe(&console);
    let closing = console.closing.subscribe();
    let stream = futures_util::stream::unfold(
        (rx, closing, permit),
        |(mut rx, mut closing, permit)| async move {
            loop {
                if *closing.borrow() {
                    return None;
                }
                tokio::select! {
                    _ = closing.changed() => return None,
                    got = rx.recv() => match got {
                        Ok(data) => {
                            let ev = Event::default().event("sample").data(&*data);
                            return Some((Ok::<Event, std::convert::Infallible>(ev), (rx, closing, permit)));
                        }
                        // Fell behind: skip to the newest samples.
                        Err(broadcast::error::RecvError::Lagged(_)) => continue,
                        Err(broadcast::error::RecvError::Closed) => return None,
                    },
                }
            }
        },
    );
    let mut r = Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(CONSOLE_KEEP_ALIVE))
        .into_response();
    r.headers_mut().insert(
        axum::http::header::CACHE_CONTROL,
        axum::http::HeaderValue::from_static("no-store"),
    );
    r
}
