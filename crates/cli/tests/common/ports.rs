//! Loopback ports for test nodes, chosen below the kernel's ephemeral range.
//!
//! A port that `bind("127.0.0.1:0")` found free comes from the ephemeral
//! range (`/proc/sys/net/ipv4/ip_local_port_range`, 32768–60999 by
//! default), so any outgoing connection can take it between the test
//! choosing it and the node binding it: a CI run failed so ("Address
//! already in use"). The kernel never picks a port below that range for an
//! outgoing connection, so a port chosen there stays free unless another
//! process binds it on purpose. Within a process no port is handed out
//! twice; processes start at different places (by process id).

use std::net::TcpListener;
use std::sync::atomic::{AtomicU32, Ordering};

/// The lowest port handed out.
const FLOOR: u32 = 10_000;

/// The first port of the kernel's ephemeral range (32768 if unreadable).
fn ephemeral_low() -> u32 {
    std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or(32_768)
}

/// A loopback port that is free now and below the ephemeral range; if that
/// range starts too low to leave 1,000 ports under it, any free port.
pub fn free_port() -> u16 {
    static NEXT: AtomicU32 = AtomicU32::new(0);
    let low = ephemeral_low().min(u32::from(u16::MAX));
    if low < FLOOR + 1_000 {
        return TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map(|a| a.port())
            .expect("free port");
    }
    let span = low - FLOOR;
    let start = std::process::id().wrapping_mul(97) % span;
    for _ in 0..span {
        let i = NEXT.fetch_add(1, Ordering::Relaxed);
        let port = (FLOOR + (start + i) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free loopback port in {FLOOR}..{low}");
}
