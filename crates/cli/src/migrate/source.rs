//! The two ends of `basalt migrate` and what keeps them going when one
//! goes away: a source connection speaking Riak's PB API ([`Conn`]), the
//! target ([`Target`], a Basalt node's cluster port taking replication
//! pushes), and the back-off both retry with ([`Retry`]).
//!
//! A connection error, a timeout or an `overload`/`timeout` answer makes
//! the call wait and try again on a new connection: first after
//! [`Retry::first`], doubling up to [`Retry::max`], for at most
//! [`Retry::give_up`] in a row (then the run stops with the checkpoint
//! where it stood, and a later run resumes). Any other error answer is
//! the source's refusal, handed to the caller.

use anyhow::Context;
use basalt_server::cluster::transport::Peers;
use basalt_server::cluster::{Msg, ReplItem, Reply};
use indicatif::ProgressBar;
use prost::Message;
use riak_pb::tokio::Client;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// How long to wait for a connection.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long to wait for one reply (a list-keys or fold answer included).
pub const REPLY_TIMEOUT: Duration = Duration::from_secs(120);
/// The largest reply accepted: the PB frame limit.
pub const MAX_REPLY: usize = riak_pb::DEFAULT_MAX_FRAME;

/// The back-off of every call, and the count of retries.
pub struct Retry {
    /// The first wait.
    pub first: Duration,
    /// The longest wait.
    pub max: Duration,
    /// How long a call keeps failing before the run gives up.
    pub give_up: Duration,
    /// Retries so far.
    pub retries: AtomicU64,
    /// Where the waits are shown.
    pub bar: ProgressBar,
}

impl Retry {
    /// Waits before the next try of a call that failed with `why` since
    /// `since`; an error once it has failed for [`Retry::give_up`].
    async fn wait(
        &self,
        what: &str,
        why: &str,
        since: Instant,
        wait: &mut Duration,
    ) -> anyhow::Result<()> {
        if since.elapsed() >= self.give_up {
            anyhow::bail!(
                "{what}: {why} (still failing after {} s of retries; run again to resume)",
                self.give_up.as_secs()
            );
        }
        let n = self.retries.fetch_add(1, Ordering::Relaxed) + 1;
        self.bar.set_message(format!(
            "{what}: {why}; paused, retry {n} in {:.1} s",
            wait.as_secs_f64()
        ));
        if self.bar.is_hidden() {
            eprintln!(
                "basalt migrate: {what}: {why}; retrying in {:.1} s",
                wait.as_secs_f64()
            );
        }
        tokio::time::sleep(*wait).await;
        *wait = (*wait * 2).min(self.max);
        Ok(())
    }
}

/// True for a Riak error answer worth retrying.
fn transient(msg: &str) -> bool {
    msg.contains("overload") || msg.contains("timeout")
}

/// One connection to the source's PB port, re-dialled as needed.
pub struct Conn {
    addr: String,
    client: Option<Client>,
    retry: Arc<Retry>,
}

impl Conn {
    /// A connection to `addr` (dialled at the first call).
    pub fn new(addr: &str, retry: Arc<Retry>) -> Conn {
        Conn {
            addr: addr.to_string(),
            client: None,
            retry,
        }
    }

    async fn client(&mut self) -> Result<&mut Client, riak_pb::Error> {
        if self.client.is_none() {
            let mut c = Client::connect(&self.addr, CONNECT_TIMEOUT, REPLY_TIMEOUT).await?;
            c.set_max_reply(MAX_REPLY);
            self.client = Some(c);
        }
        self.client.as_mut().ok_or(riak_pb::Error::Closed)
    }

    /// Sends `msg` and reads every reply up to the last (`more` says if a
    /// reply is followed by another: streamed answers), retrying the whole
    /// exchange. `Ok(Err(text))`: the source refused it.
    pub async fn exchange<M: Message>(
        &mut self,
        code: u8,
        msg: &M,
        more: impl Fn(u8, &[u8]) -> bool,
    ) -> anyhow::Result<Result<Vec<(u8, Vec<u8>)>, String>> {
        let since = Instant::now();
        let mut wait = self.retry.first;
        let what = format!("source {}", self.addr);
        loop {
            let r: Result<Vec<(u8, Vec<u8>)>, riak_pb::Error> = async {
                let c = self.client().await?;
                c.send_msg(code, msg).await?;
                let mut all = Vec::new();
                loop {
                    let (rc, body) = c.recv().await?;
                    let go_on = more(rc, &body);
                    all.push((rc, body));
                    if !go_on {
                        return Ok(all);
                    }
                }
            }
            .await;
            match r {
                Ok(all) => return Ok(Ok(all)),
                Err(riak_pb::Error::Riak { errmsg, .. }) if !transient(&errmsg) => {
                    return Ok(Err(errmsg))
                }
                Err(e) => {
                    self.client = None;
                    let retry = self.retry.clone();
                    retry.wait(&what, &e.to_string(), since, &mut wait).await?;
                }
            }
        }
    }

    /// One request, one reply.
    pub async fn call<M: Message>(
        &mut self,
        code: u8,
        msg: &M,
    ) -> anyhow::Result<Result<(u8, Vec<u8>), String>> {
        Ok(self
            .exchange(code, msg, |_, _| false)
            .await?
            .map(|mut all| all.remove(0)))
    }
}

/// How long the target may take to apply one push.
pub const PUSH_TIMEOUT: Duration = Duration::from_secs(60);

/// The Basalt node objects are written to: its cluster port, which takes
/// them as replication pushes (`Msg::ReplPush`): merged into every
/// replica as they are, no clock increment, never replicated again.
pub struct Target {
    addr: String,
    peers: Peers,
    source_id: String,
    retry: Arc<Retry>,
}

impl Target {
    /// The node at cluster address `addr`; pushes name `source_id`.
    pub fn new(addr: &str, source_id: String, retry: Arc<Retry>) -> Target {
        Target {
            addr: addr.to_string(),
            peers: Peers::new(riak_pb::DEFAULT_MAX_FRAME),
            source_id,
            retry,
        }
    }

    /// Checks that the target is a Basalt node; its cluster id.
    pub async fn hello(&self) -> anyhow::Result<String> {
        let since = Instant::now();
        let mut wait = self.retry.first;
        let msg = Msg::ReplHello {
            source: self.source_id.clone(),
        };
        loop {
            match self.peers.call(&self.addr, &msg, PUSH_TIMEOUT).await {
                Ok(Reply::ReplHello { cluster_id, .. }) => return Ok(cluster_id),
                Ok(other) => anyhow::bail!(
                    "target {} answered {other:?}: not a Basalt node's cluster port",
                    self.addr
                ),
                Err(e) => {
                    let what = format!("target {}", self.addr);
                    self.retry
                        .wait(&what, &e.to_string(), since, &mut wait)
                        .await
                        .context("is --to a Basalt node's cluster address (cluster_listen)?")?
                }
            }
        }
    }

    /// Writes `items`; returns once the target applied all of them.
    pub async fn push(&self, items: Vec<ReplItem>) -> anyhow::Result<()> {
        let since = Instant::now();
        let mut wait = self.retry.first;
        let what = format!("target {}", self.addr);
        loop {
            let msg = Msg::ReplPush {
                source: self.source_id.clone(),
                items: items.clone(),
            };
            let why = match self.peers.call(&self.addr, &msg, PUSH_TIMEOUT).await {
                Ok(Reply::Ok) => return Ok(()),
                Ok(Reply::Refused(e)) => e,
                Ok(other) => anyhow::bail!("target {} answered {other:?}", self.addr),
                Err(e) => e.to_string(),
            };
            self.retry.wait(&what, &why, since, &mut wait).await?;
        }
    }
}
