//! The node `basalt admin` talks to and one round trip with it:
//! [`AdminNode`] (the cluster address and, for a cluster port with mutual
//! TLS, the client TLS settings) and [`call`], which sends one request with
//! `riak_pb`'s blocking client and names what answered when the address is
//! not a Basalt cluster listener (a PB port, an HTTP port, anything that
//! closes or speaks another framing). Replies are bounded by `MAX_REPLY`.
//!
//! [`line`] sends one admin line (code 247), as text or `--json`.
//!
//! Shared by [`crate::admin`] (which dispatches), [`crate::admin_backup`], [`crate::aae_fold`],
//! [`crate::admin_btypes`], [`crate::wait`], [`crate::diag`] and
//! [`crate::ping`]; it imports none of them, so imports run one way.

use anyhow::Context;
use riak_pb::sync::Client;
use std::path::Path;
use std::time::Duration;

/// How long to wait for a node to accept the connection.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long to wait for a node's reply.
const REPLY_TIMEOUT: Duration = Duration::from_secs(30);
/// The largest reply accepted (code byte included): far above any admin
/// answer (a ring status of 1024 partitions is tens of KB); a longer one,
/// or a stray length from something that is not a PB port, is an error
/// before anything is allocated.
const MAX_REPLY: usize = 16 * 1024 * 1024;

/// The node `basalt admin` talks to: its cluster address and, for a
/// cluster port with mutual TLS, the client TLS settings.
pub(crate) struct AdminNode {
    addr: String,
    tls: Option<std::sync::Arc<rustls::ClientConfig>>,
    connect_timeout: Duration,
    reply_timeout: Duration,
}

impl AdminNode {
    /// The node at cluster address `addr`; with all of `cert`, `key` and
    /// `cacert` (PEM files), over mutual TLS.
    pub(crate) fn new(
        addr: &str,
        cert: Option<&Path>,
        key: Option<&Path>,
        cacert: Option<&Path>,
    ) -> anyhow::Result<AdminNode> {
        let tls = match (cert, key, cacert) {
            (Some(cert), Some(key), Some(ca)) => Some(
                basalt_server::security::tls::client_config(Some((cert, key)), ca)
                    .context("the --cert, --key and --cacert files")?,
            ),
            _ => None,
        };
        Ok(AdminNode {
            addr: addr.to_string(),
            tls,
            connect_timeout: CONNECT_TIMEOUT,
            reply_timeout: REPLY_TIMEOUT,
        })
    }

    /// The same node, waiting at most `t` to connect and for a reply.
    pub(crate) fn with_timeout(mut self, t: Duration) -> AdminNode {
        self.connect_timeout = t;
        self.reply_timeout = t;
        self
    }

    /// The cluster address.
    pub(crate) fn addr(&self) -> &str {
        &self.addr
    }

    /// Another node of the same cluster (same TLS settings and timeouts).
    pub(crate) fn at(&self, addr: &str) -> AdminNode {
        AdminNode {
            addr: addr.to_string(),
            tls: self.tls.clone(),
            connect_timeout: self.connect_timeout,
            reply_timeout: self.reply_timeout,
        }
    }

    /// A connection kept for many requests (backup and restore), whose
    /// replies may be up to `max_reply` bytes.
    pub(crate) fn connect_with_max(&self, max_reply: usize) -> anyhow::Result<Client> {
        let mut c = self.connect()?;
        c.set_max_reply(max_reply);
        Ok(c)
    }

    /// A connection to the node, over TLS when configured.
    fn connect(&self) -> anyhow::Result<Client> {
        let node = &self.addr;
        let mut client = Client::connect(node, self.connect_timeout, self.reply_timeout)
            .with_context(|| format!("cannot reach node {node}"))?;
        if let Some(tls) = &self.tls {
            let name = basalt_server::security::tls::server_name(node)?;
            client
                .tls_handshake(tls.clone(), name)
                .with_context(|| format!("TLS with node {node}"))?;
        }
        client.set_max_reply(MAX_REPLY);
        Ok(client)
    }
}

/// One blocking PB round trip: `Ok(Err(msg))` when the node answered with
/// an `RpbErrorResp`.
pub(crate) fn call(
    target: &AdminNode,
    c: u8,
    body: &[u8],
) -> anyhow::Result<Result<(u8, Vec<u8>), String>> {
    let node = target.addr.as_str();
    let mut client = target.connect()?;
    match client.call_raw(c, body) {
        Ok(reply) => Ok(Ok(reply)),
        Err(riak_pb::Error::Riak { errmsg, .. }) if errmsg.starts_with("Unknown message code") => {
            anyhow::bail!("{node} is a Riak PB port; {USE_CLUSTER_ADDR}")
        }
        Err(riak_pb::Error::Riak { errmsg, .. }) => Ok(Err(errmsg)),
        Err(riak_pb::Error::Frame(e)) if e.is_http_reply() => {
            anyhow::bail!("{node} answers HTTP, not Basalt's cluster protocol; {USE_CLUSTER_ADDR}")
        }
        Err(e @ (riak_pb::Error::Closed | riak_pb::Error::Frame(_))) => Err(e).with_context(|| {
            format!("{node} is not a Basalt cluster listener (no valid reply); {USE_CLUSTER_ADDR}")
        }),
        Err(e) => Err(e).with_context(|| format!("no valid reply from node {node}")),
    }
}

/// Sends one admin line (code 247) and returns the node's answer as text:
/// `Ok(Err(msg))` when the node refused it. With `json` the line goes with
/// a leading `--json` word and the answer is one JSON document.
pub(crate) fn line(
    target: &AdminNode,
    line: &str,
    json: bool,
) -> anyhow::Result<Result<String, String>> {
    let body = if json {
        format!("--json {line}")
    } else {
        line.to_string()
    };
    Ok(call(
        target,
        riak_pb::code::basalt::ADMIN_CLUSTER_REQ,
        body.as_bytes(),
    )?
    .map(|(_, body)| String::from_utf8_lossy(&body).into_owned()))
}

/// The hint of every wrong-address error.
const USE_CLUSTER_ADDR: &str = "use the node's cluster address (cluster_listen, default port 8099)";
