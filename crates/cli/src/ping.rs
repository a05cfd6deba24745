//! `basalt ping`, as `riak ping`: prints `pong` and exits 0 when the node
//! answers a ping, else says which address did not answer and why and
//! exits 1. It pings the client PB port (`--pb`, Riak's `RpbPingReq`, which
//! needs no login even with security on) and/or the cluster port
//! (`--node`, the port `basalt admin` uses, with its TLS flags); with
//! neither flag, the PB port at its default address.

use crate::admin_client::{call, AdminNode};
use riak_pb::code;
use std::path::PathBuf;
use std::time::Duration;

/// Arguments of `basalt ping`.
#[derive(Debug, clap::Args)]
pub struct PingArgs {
    /// The node's client PB address (pb_listen); the default when neither
    /// --pb nor --node is given is 127.0.0.1:8087.
    #[arg(long)]
    pb: Option<String>,
    /// The node's cluster address (cluster_listen), pinged as `basalt
    /// admin` reaches it.
    #[arg(long)]
    node: Option<String>,
    /// A certificate of the cluster CA for a cluster port with mutual TLS
    /// (as `basalt admin --cert`).
    #[arg(long, requires_all = ["key", "cacert", "node"])]
    cert: Option<PathBuf>,
    /// The private key of --cert (PEM).
    #[arg(long, requires_all = ["cert", "cacert"])]
    key: Option<PathBuf>,
    /// The cluster CA's certificate (PEM).
    #[arg(long, requires_all = ["cert", "key"])]
    cacert: Option<PathBuf>,
    /// Seconds to wait for the connection and for the answer.
    #[arg(long, default_value_t = 5)]
    timeout: u64,
}

/// Pings a client PB port.
fn ping_pb(addr: &str, timeout: Duration) -> Result<(), String> {
    let mut c =
        riak_pb::sync::Client::connect(addr, timeout, timeout).map_err(|e| e.to_string())?;
    c.ping().map_err(|e| e.to_string())
}

/// Pings a cluster port.
fn ping_cluster(node: &AdminNode) -> Result<(), String> {
    match call(node, code::PING_REQ, &[]) {
        Ok(Ok((c, _))) if c == code::PING_RESP => Ok(()),
        Ok(Ok((c, _))) => Err(format!("answered code {c}, not a ping reply")),
        Ok(Err(msg)) => Err(msg),
        Err(e) => Err(format!("{e:#}")),
    }
}

/// Runs `basalt ping`.
pub fn run(args: &PingArgs) -> anyhow::Result<crate::Outcome> {
    let timeout = Duration::from_secs(args.timeout.max(1));
    let mut failed = Vec::new();
    let pb = match (&args.pb, &args.node) {
        (None, None) => Some("127.0.0.1:8087"),
        (pb, _) => pb.as_deref(),
    };
    if let Some(addr) = pb {
        if let Err(e) = ping_pb(addr, timeout) {
            failed.push(format!("Node at {addr} (PB) not responding to pings: {e}"));
        }
    }
    if let Some(addr) = &args.node {
        let node = AdminNode::new(
            addr,
            args.cert.as_deref(),
            args.key.as_deref(),
            args.cacert.as_deref(),
        )?
        .with_timeout(timeout);
        if let Err(e) = ping_cluster(&node) {
            failed.push(format!(
                "Node at {addr} (cluster port) not responding to pings: {e}"
            ));
        }
    }
    if failed.is_empty() {
        println!("pong");
        return Ok(crate::Outcome::Done);
    }
    for f in failed {
        eprintln!("{f}");
    }
    Ok(crate::Outcome::Code(1))
}
