//! Inter-node messaging over the cluster port (`cluster_listen`, default
//! 8099): frames of Riak's framing with Basalt-only codes — 252 a request
//! (`id:u64` + postcard [`Msg`]), 253 its reply (`id:u64` + postcard
//! [`Reply`]). A connection to the cluster port whose first frame is a 252
//! becomes a cluster connection (other first frames are admin requests);
//! the client PB port answers 252 with Riak's unknown-code error, and a
//! peer that answers a 252 with anything but a 253 is reported as not a
//! cluster listener ([`PeerError::NotCluster`]). Requests are served
//! concurrently (at most [`MAX_INFLIGHT`] at once, then the reader waits:
//! back-pressure) and replies may come back in any order.
//!
//! The client side keeps one multiplexed connection per peer address;
//! at most [`MAX_INFLIGHT`] requests wait on it (more answer `Overload`),
//! every call has a timeout, and a broken connection fails its waiting
//! calls at once and is re-dialled (connect timeout [`CONNECT_TIMEOUT`])
//! by the next call. A connection on which requests have been sent for
//! [`STALE_AFTER`] without a single frame coming back is **dead** even if TCP
//! has not noticed (a network partition drops packets silently, and TCP
//! retransmits for minutes): it is closed, its calls fail, and the next
//! call re-dials — failing fast while the peer is unreachable, succeeding
//! as soon as the network heals. A live peer answers the gossip that runs
//! every 500 ms on the same connection, so a slow request alone does not
//! make its connection look dead.
//!
//! **Versions**: the first frame of every connection a node dials is the
//! hello ([`CLUSTER_HELLO`], `version:u32` big-endian, this build's
//! [`PROTOCOL_VERSION`]), sent ahead of its requests. The listener answers
//! it with its own version when it speaks the one sent
//! ([`PROTOCOL_READS`]), else with an error reply naming the version found
//! and the versions it speaks, and closes: the dialler's calls then fail
//! with [`PeerError::Incompatible`] carrying that text. A connection whose
//! first frame is a request (no hello: a test, a tool) speaks version 1.
//! `Msg` and `Reply` are postcard, numbered by position: a change to them
//! that an older node cannot decode bumps [`PROTOCOL_VERSION`].
//!
//! With [`Peers::set_tls`] every connection is mutual TLS (rustls): this
//! node's certificate as the client certificate, the peer's verified
//! against the cluster CA and the address dialled (its IP or host name must
//! be a SAN). A peer that refuses this node's certificate ends the session
//! with an alert: [`PeerError::TlsRefused`].

use super::{Msg, Reply};
use crate::pb::{frame, read_frame};
use parking_lot::Mutex;
use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;
use tokio::sync::{mpsc, oneshot, Semaphore};

/// Frame code of the hello a dialling node sends first.
pub const CLUSTER_HELLO: u8 = 251;
/// Frame code of a cluster request.
pub const CLUSTER_REQ: u8 = 252;
/// Frame code of a cluster reply.
pub const CLUSTER_RESP: u8 = 253;
/// The cluster protocol (the [`Msg`] and [`Reply`] encodings) this build
/// speaks and sends in its hello.
pub const PROTOCOL_VERSION: u32 = 1;
/// The protocol versions this build's cluster listener accepts.
pub const PROTOCOL_READS: &[u32] = &[PROTOCOL_VERSION];
pub use crate::limits::CONNECT_TIMEOUT;
pub use crate::limits::MAX_INFLIGHT;
pub use crate::limits::STALE_AFTER;

/// Why a call to a peer failed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum PeerError {
    /// Could not connect.
    #[error("cannot reach node at {addr}: {reason}")]
    Unreachable {
        /// Address.
        addr: String,
        /// Why.
        reason: String,
    },
    /// The connection broke before the reply.
    #[error("connection to {0} lost")]
    Lost(String),
    /// No reply in time.
    #[error("no reply from {0} in time")]
    Timeout(String),
    /// Too many requests waiting on the connection.
    #[error("too many requests in flight to {0}")]
    Overload(String),
    /// What answered at the address is not a Basalt cluster listener.
    #[error("{addr} is not a Basalt cluster listener: {what}")]
    NotCluster {
        /// Address.
        addr: String,
        /// What answered instead.
        what: String,
    },
    /// The peer ended the TLS session with an alert: it refused this
    /// node's certificate (another CA, expired, not a client certificate).
    #[error("{addr} refused this node's certificate: {reason}")]
    TlsRefused {
        /// Address.
        addr: String,
        /// The alert.
        reason: String,
    },
    /// The peer speaks another cluster protocol version (another Basalt
    /// release): its refusal, naming both versions.
    #[error("{addr} refused this node: {reason}")]
    Incompatible {
        /// Address.
        addr: String,
        /// The peer's text.
        reason: String,
    },
    /// A reply or request that does not decode.
    #[error("bad cluster message: {0}")]
    Codec(String),
}

/// The hello frame this build sends first on a connection it dials.
pub fn hello_frame() -> Vec<u8> {
    frame(CLUSTER_HELLO, &PROTOCOL_VERSION.to_be_bytes())
}

/// The listener's answer to a hello whose body is `body`: the hello frame
/// back when it speaks that version, else the refusal's text (naming the
/// version found and the versions spoken), for an error reply.
pub fn answer_hello(body: &[u8]) -> Result<Vec<u8>, String> {
    let found = <[u8; 4]>::try_from(body).map(u32::from_be_bytes);
    match found {
        Ok(v) if PROTOCOL_READS.contains(&v) => Ok(hello_frame()),
        Ok(v) => Err(format!(
            "cluster protocol version {v} is not one this node speaks (it speaks version {}): nodes of different Basalt releases cannot talk over the cluster port",
            versions_text(PROTOCOL_READS)
        )),
        Err(_) => Err(format!(
            "cluster hello of {} bytes, not a 4-byte protocol version",
            body.len()
        )),
    }
}

fn versions_text(v: &[u32]) -> String {
    let all: Vec<String> = v.iter().map(u32::to_string).collect();
    all.join(", ")
}

/// Why a connection's reader stopped, when it says more than "lost".
#[derive(Debug, Clone)]
enum Ended {
    /// Something that is not a cluster listener answered: what.
    NotCluster(String),
    /// A TLS alert from the peer.
    TlsRefused(String),
    /// The peer refused the hello: its text.
    Incompatible(String),
}

/// Encodes `id` + postcard of `m` as a frame of `code`.
pub fn encode<T: serde::Serialize>(code: u8, id: u64, m: &T) -> Result<Vec<u8>, PeerError> {
    let mut body = id.to_be_bytes().to_vec();
    let enc = postcard::to_allocvec(m).map_err(|e| PeerError::Codec(e.to_string()))?;
    body.extend_from_slice(&enc);
    Ok(frame(code, &body))
}

/// Splits a frame body into `id` and the decoded message.
pub fn decode<T: serde::de::DeserializeOwned>(body: &[u8]) -> Result<(u64, T), PeerError> {
    let (id, rest) = body
        .split_first_chunk::<8>()
        .ok_or_else(|| PeerError::Codec("frame shorter than its id".into()))?;
    let m = postcard::from_bytes(rest).map_err(|e| PeerError::Codec(e.to_string()))?;
    Ok((u64::from_be_bytes(*id), m))
}

type Waiters = Arc<Mutex<HashMap<u64, oneshot::Sender<Reply>>>>;

struct Conn {
    tx: mpsc::Sender<Vec<u8>>,
    waiters: Waiters,
    alive: Arc<AtomicBool>,
    /// When the first request was sent that no frame has followed yet
    /// (`None`: the peer has answered since the last request).
    silent_since: Arc<Mutex<Option<std::time::Instant>>>,
    /// The reader and writer tasks, stopped when the connection is closed.
    tasks: Vec<tokio::task::AbortHandle>,
    /// Set when the peer answered with something that is not a cluster
    /// reply (the PB port, an HTTP port...) or refused the TLS session.
    ended: Arc<Mutex<Option<Ended>>>,
}

/// What answered a cluster request with `code` instead of a cluster reply.
fn what_answered(code: u8) -> String {
    if code == crate::pb::code::ERROR_RESP {
        "it answered with a Riak error reply (a Riak PB port?); use the node's cluster address (cluster_listen, default port 8099)".into()
    } else {
        format!("it answered with message code {code}")
    }
}

/// The text of an error reply refusing this node's hello, if `code` and
/// `body` are one.
fn hello_refused(code: u8, body: &[u8]) -> Option<String> {
    use prost::Message;
    if code != crate::pb::code::ERROR_RESP {
        return None;
    }
    let e = crate::pb::RpbErrorResp::decode(body).ok()?;
    let text = String::from_utf8_lossy(&e.errmsg).into_owned();
    text.starts_with("cluster protocol version").then_some(text)
}

impl Conn {
    /// Requests have been sent for `stale_after` and nothing came back.
    fn stale(&self, stale_after: Duration) -> bool {
        self.silent_since
            .lock()
            .is_some_and(|t| t.elapsed() >= stale_after)
    }

    /// The error of a call on this connection once it has ended.
    fn ended_error(&self, addr: &str) -> PeerError {
        match self.ended.lock().clone() {
            Some(Ended::NotCluster(what)) => PeerError::NotCluster {
                addr: addr.to_string(),
                what,
            },
            Some(Ended::TlsRefused(reason)) => PeerError::TlsRefused {
                addr: addr.to_string(),
                reason,
            },
            Some(Ended::Incompatible(reason)) => PeerError::Incompatible {
                addr: addr.to_string(),
                reason,
            },
            None => PeerError::Lost(addr.to_string()),
        }
    }

    /// Closes the connection: its tasks stop (dropping the socket) and its
    /// waiting calls fail at once.
    fn close(&self) {
        self.alive.store(false, Ordering::Release);
        for t in &self.tasks {
            t.abort();
        }
        self.waiters.lock().clear();
    }
}

/// Connections to peers, by address.
pub struct Peers {
    conns: Mutex<HashMap<String, Arc<Conn>>>,
    next_id: AtomicU64,
    max_frame: usize,
    stale_after: Duration,
    /// Mutual TLS to every peer (`None`: plain TCP).
    tls: parking_lot::RwLock<Option<Arc<rustls::ClientConfig>>>,
    /// The node's runtime, where connections are dialled and served.
    rt: std::sync::OnceLock<tokio::runtime::Handle>,
}

impl Peers {
    /// No connections yet; frames up to `max_frame` bytes.
    pub fn new(max_frame: usize) -> Peers {
        Peers {
            conns: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            max_frame,
            stale_after: STALE_AFTER,
            tls: parking_lot::RwLock::new(None),
            rt: std::sync::OnceLock::new(),
        }
    }

    /// Dials every later connection with mutual TLS (`config`: this
    /// node's certificate, the cluster CA), or plain (`None`); connections
    /// already open are closed so that none is left over the old setting.
    pub fn set_tls(&self, config: Option<Arc<rustls::ClientConfig>>) {
        *self.tls.write() = config;
        for (_, c) in self.conns.lock().drain() {
            c.close();
        }
    }

    /// [`Peers::new`] with another silence limit than [`STALE_AFTER`] (tests).
    pub fn with_stale_after(max_frame: usize, stale_after: Duration) -> Peers {
        Peers {
            stale_after,
            ..Peers::new(max_frame)
        }
    }

    async fn conn(&self, addr: &str) -> Result<Arc<Conn>, PeerError> {
        let existing = self.conns.lock().get(addr).cloned();
        if let Some(c) = existing {
            if c.alive.load(Ordering::Acquire) && !c.stale(self.stale_after) {
                return Ok(c);
            }
            if c.alive.load(Ordering::Acquire) {
                tracing::warn!(%addr, stale_after = ?self.stale_after, "no reply on the cluster connection; closing it and dialling again");
            }
            c.close();
            self.conns.lock().remove(addr);
        }
        let dial = dial(addr.to_string(), self.tls.read().clone(), self.max_frame);
        // The socket and the connection's tasks belong to the node's
        // runtime, whatever runtime the caller runs on (an application or
        // a test calling the node from its own runtime would otherwise own
        // them, and they would stall whenever that runtime does).
        let conn = match self.rt.get() {
            Some(rt) => rt.spawn(dial).await.map_err(|e| PeerError::Unreachable {
                addr: addr.to_string(),
                reason: format!("dialling task: {e}"),
            })??,
            None => dial.await?,
        };
        self.conns.lock().insert(addr.to_string(), conn.clone());
        Ok(conn)
    }

    /// Runs every later dial, and the tasks of its connection, on `rt` (the
    /// node's runtime); the first call wins.
    pub fn set_runtime(&self, rt: tokio::runtime::Handle) {
        let _ = self.rt.set(rt);
    }
}

/// Connects to `addr` (with mutual TLS when `tls`) and starts the
/// connection's tasks.
async fn dial(
    addr: String,
    tls: Option<Arc<rustls::ClientConfig>>,
    max_frame: usize,
) -> Result<Arc<Conn>, PeerError> {
    let unreachable = |reason: String| PeerError::Unreachable {
        addr: addr.clone(),
        reason,
    };
    let sock = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect(&addr))
        .await
        .map_err(|_| unreachable("connect timed out".into()))?
        .map_err(|e| unreachable(e.to_string()))?;
    let _ = sock.set_nodelay(true);
    Ok(match tls {
        None => {
            let (rd, wr) = sock.into_split();
            spawn_conn(rd, wr, max_frame)
        }
        Some(config) => {
            let name =
                crate::security::tls::server_name(&addr).map_err(|e| unreachable(e.to_string()))?;
            let handshake = tokio_rustls::TlsConnector::from(config).connect(name, sock);
            let stream = tokio::time::timeout(CONNECT_TIMEOUT, handshake)
                .await
                .map_err(|_| unreachable("TLS handshake timed out".into()))?
                .map_err(|e| unreachable(format!("TLS handshake: {e}")))?;
            let (rd, wr) = tokio::io::split(stream);
            spawn_conn(rd, wr, max_frame)
        }
    })
}

/// Writes the frames sent on `rx` until it closes or a write fails;
/// frames already queued behind the first are written with it, up to
/// [`crate::limits::CLUSTER_WRITE_BATCH_BYTES`].
async fn write_frames<W: tokio::io::AsyncWrite + Unpin>(
    wr: &mut W,
    rx: &mut mpsc::Receiver<Vec<u8>>,
) {
    while let Some(first) = rx.recv().await {
        let out = match rx.try_recv() {
            Err(_) => first,
            Ok(next) => {
                let mut batch = first;
                batch.extend_from_slice(&next);
                while batch.len() < crate::limits::CLUSTER_WRITE_BATCH_BYTES {
                    match rx.try_recv() {
                        Ok(f) => batch.extend_from_slice(&f),
                        Err(_) => break,
                    }
                }
                batch
            }
        };
        // A TLS stream may keep encrypted bytes back when the socket is
        // full; only a flush sends them.
        let flushed = match wr.write_all(&out).await {
            Ok(()) if rx.is_empty() => wr.flush().await,
            other => other,
        };
        if flushed.is_err() {
            return;
        }
    }
}

/// Starts the writer and reader tasks of a connection over `rd`/`wr`.
fn spawn_conn<R, W>(rd: R, mut wr: W, max: usize) -> Arc<Conn>
where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let mut rd = tokio::io::BufReader::with_capacity(crate::limits::CLUSTER_READ_BUFFER_BYTES, rd);
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(MAX_INFLIGHT);
    // The hello goes first: the channel is new, so it has room.
    let _ = tx.try_send(hello_frame());
    let waiters: Waiters = Arc::new(Mutex::new(HashMap::new()));
    let alive = Arc::new(AtomicBool::new(true));
    let silent_since = Arc::new(Mutex::new(None));
    let a2 = alive.clone();
    let writer = tokio::spawn(async move {
        write_frames(&mut wr, &mut rx).await;
        a2.store(false, Ordering::Release);
    });
    let (w2, h2) = (waiters.clone(), silent_since.clone());
    let waiters_rd = waiters.clone();
    let alive_rd = alive.clone();
    let ended = Arc::new(Mutex::new(None));
    let nc = ended.clone();
    let reader = tokio::spawn(async move {
        let (waiters, alive) = (waiters_rd, alive_rd);
        let what = loop {
            let (code, body) = match read_frame(&mut rd, max).await {
                Ok(Some(f)) => f,
                Err(e) if e.is_http_reply() => {
                    break Some(Ended::NotCluster("it answers HTTP".to_string()))
                }
                // A TLS alert: the peer refused this node's certificate
                // (another CA, expired...).
                Err(crate::pb::FrameError::Io(e))
                    if e.kind() == std::io::ErrorKind::InvalidData =>
                {
                    break Some(Ended::TlsRefused(e.to_string()))
                }
                Ok(None) | Err(_) => break None,
            };
            *h2.lock() = None;
            if code == CLUSTER_HELLO {
                continue;
            }
            if let Some(reason) = hello_refused(code, &body) {
                break Some(Ended::Incompatible(reason));
            }
            if code != CLUSTER_RESP {
                break Some(Ended::NotCluster(what_answered(code)));
            }
            let Ok((id, reply)) = decode::<Reply>(&body) else {
                break None;
            };
            if let Some(w) = waiters.lock().remove(&id) {
                let _ = w.send(reply);
            }
        };
        *nc.lock() = what;
        alive.store(false, Ordering::Release);
        // Dropping the senders fails every waiting call at once.
        waiters.lock().clear();
    });
    Arc::new(Conn {
        tx,
        waiters: w2,
        alive,
        silent_since,
        tasks: vec![writer.abort_handle(), reader.abort_handle()],
        ended,
    })
}

impl Peers {
    /// Sends `msg` to the node at `addr` and waits up to `timeout` for its reply.
    pub async fn call(&self, addr: &str, msg: &Msg, timeout: Duration) -> Result<Reply, PeerError> {
        let fut = async {
            let conn = self.conn(addr).await?;
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let (tx, rx) = oneshot::channel();
            {
                let mut w = conn.waiters.lock();
                // The reader marks the connection dead before it fails the
                // waiters: a waiter added after that would wait forever
                // (e.g. a TLS alert read before the first request).
                if !conn.alive.load(Ordering::Acquire) {
                    drop(w);
                    return Err(conn.ended_error(addr));
                }
                if w.len() >= MAX_INFLIGHT {
                    return Err(PeerError::Overload(addr.to_string()));
                }
                conn.silent_since
                    .lock()
                    .get_or_insert_with(std::time::Instant::now);
                w.insert(id, tx);
            }
            let f = encode(CLUSTER_REQ, id, msg)?;
            if f.len() > self.max_frame {
                conn.waiters.lock().remove(&id);
                return Err(PeerError::Codec(format!(
                    "message of {} bytes over the frame limit",
                    f.len()
                )));
            }
            if conn.tx.try_send(f).is_err() {
                conn.waiters.lock().remove(&id);
                return Err(PeerError::Overload(addr.to_string()));
            }
            let guard = WaiterGuard {
                waiters: &conn.waiters,
                id,
            };
            let r = rx.await.map_err(|_| conn.ended_error(addr));
            drop(guard);
            r
        };
        match tokio::time::timeout(timeout, fut).await {
            Ok(r) => r,
            Err(_) => Err(PeerError::Timeout(addr.to_string())),
        }
    }
}

/// Removes a waiter when its call ends (timeout included).
struct WaiterGuard<'a> {
    waiters: &'a Waiters,
    id: u64,
}

impl Drop for WaiterGuard<'_> {
    fn drop(&mut self) {
        self.waiters.lock().remove(&self.id);
    }
}

/// Serves a cluster connection whose first request frame body is `first`:
/// each request runs in its own task through `handler`. Stops reading when
/// `stop` turns true (node shutdown); requests already taken finish.
pub async fn serve_conn<R, W, H, F>(
    (rd, mut wr): (R, W),
    first: Vec<u8>,
    max_frame: usize,
    mut stop: tokio::sync::watch::Receiver<bool>,
    handler: H,
) where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
    H: Fn(Msg) -> F + Send + Sync + 'static,
    F: std::future::Future<Output = Reply> + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel::<Vec<u8>>(MAX_INFLIGHT);
    let writer = tokio::spawn(async move { write_frames(&mut wr, &mut rx).await });
    let mut rd = tokio::io::BufReader::with_capacity(crate::limits::CLUSTER_READ_BUFFER_BYTES, rd);
    let slots = Arc::new(Semaphore::new(MAX_INFLIGHT));
    let handler = Arc::new(handler);
    let mut next = Some(first);
    loop {
        if *stop.borrow() {
            break;
        }
        let body = match next.take() {
            Some(b) => b,
            None => match tokio::select! {
                f = read_frame(&mut rd, max_frame) => f,
                _ = stop.changed() => break,
            } {
                Ok(Some((CLUSTER_REQ, b))) => b,
                Ok(Some((code, _))) => {
                    tracing::warn!(code, "unexpected frame on a cluster connection; closing it");
                    break;
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::debug!(error = %e, "cluster connection ends");
                    break;
                }
            },
        };
        let (id, msg) = match decode::<Msg>(&body) {
            Ok(x) => x,
            Err(e) => {
                tracing::warn!(error = %e, "undecodable cluster request; closing the connection");
                break;
            }
        };
        let Ok(permit) = slots.clone().acquire_owned().await else {
            break;
        };
        let (h, tx) = (handler.clone(), tx.clone());
        tokio::spawn(async move {
            let reply = h(msg).await;
            match encode(CLUSTER_RESP, id, &reply) {
                Ok(f) => {
                    let _ = tx.send(f).await;
                }
                Err(e) => tracing::warn!(error = %e, "encoding a cluster reply"),
            }
            drop(permit);
        });
    }
    drop(tx);
    let _ = writer.await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{ClusterState, Meta};
    use crate::vnode::request::{Obj, VnodeReply, VnodeReq, WireObject};

    /// Found by the partition test: a peer behind a network that drops
    /// packets never resets the connection, so calls only time out. Even
    /// when they come one after another (nothing waiting between them),
    /// the connection must be declared dead after the silence limit and
    /// re-dialled — not kept forever.
    #[test]
    fn a_silent_connection_is_redialled_even_between_sequential_calls() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            // A peer that accepts and never answers (a blackholed node).
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let addr = listener.local_addr().expect("addr").to_string();
            let accepted = Arc::new(AtomicU64::new(0));
            let counter = accepted.clone();
            tokio::spawn(async move {
                let mut held = Vec::new();
                while let Ok((sock, _)) = listener.accept().await {
                    counter.fetch_add(1, Ordering::SeqCst);
                    held.push(sock);
                }
            });
            let peers = Peers::with_stale_after(1 << 20, Duration::from_millis(300));
            let msg = Msg::Vnode {
                partition: 0,
                primary: true,
                forwarded: false,
                req: VnodeReq::ListBuckets,
            };
            let call = || peers.call(&addr, &msg, Duration::from_millis(100));
            assert!(matches!(call().await, Err(PeerError::Timeout(_))));
            assert!(matches!(call().await, Err(PeerError::Timeout(_))));
            assert_eq!(
                accepted.load(Ordering::SeqCst),
                1,
                "one connection while young"
            );
            tokio::time::sleep(Duration::from_millis(300)).await;
            assert!(matches!(call().await, Err(PeerError::Timeout(_))));
            assert_eq!(
                accepted.load(Ordering::SeqCst),
                2,
                "the silent connection was closed and dialled again"
            );
        });
    }

    /// The hello goes first; a listener refusing its version makes the
    /// call fail with that listener's text, and a listener of this
    /// version answers it with its own.
    #[test]
    fn a_refused_hello_fails_the_call_with_the_peers_text() {
        assert_eq!(answer_hello(&1u32.to_be_bytes()), Ok(hello_frame()));
        let refusal = answer_hello(&7u32.to_be_bytes()).err().unwrap_or_default();
        assert!(
            refusal.starts_with(
                "cluster protocol version 7 is not one this node speaks (it speaks version 1)"
            ),
            "{refusal}"
        );
        assert!(answer_hello(&[1, 2]).is_err());
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        rt.block_on(async {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind");
            let addr = listener.local_addr().expect("addr").to_string();
            tokio::spawn(async move {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let first = read_frame(&mut sock, 1 << 20).await;
                if !matches!(first, Ok(Some((CLUSTER_HELLO, _)))) {
                    return;
                }
                // A refusal as a listener of another release words it.
                let why = answer_hello(&99u32.to_be_bytes()).err().unwrap_or_default();
                let err = crate::pb::RpbErrorResp {
                    errmsg: why.into_bytes(),
                    errcode: 0,
                };
                let f = crate::pb::frame_msg(crate::pb::code::ERROR_RESP, &err);
                let _ = sock.write_all(&f).await;
            });
            let peers = Peers::new(1 << 20);
            let msg = Msg::Vnode {
                partition: 0,
                primary: true,
                forwarded: false,
                req: VnodeReq::ListBuckets,
            };
            let e = peers.call(&addr, &msg, Duration::from_secs(5)).await;
            let text = e
                .as_ref()
                .err()
                .map(ToString::to_string)
                .unwrap_or_default();
            assert!(matches!(e, Err(PeerError::Incompatible { .. })), "{text}");
            assert!(text.contains("cluster protocol version 99"), "{text}");
        });
    }

    #[test]
    fn messages_roundtrip_through_frames() {
        let state = ClusterState::new("a", "127.0.0.1:1", "", 8, "c".into());
        let msgs = [
            Msg::Gossip(
                state.clone(),
                Meta {
                    props: r#"{"YQ==":{"allow_mult":true,"stamp":5}}"#.into(),
                    types: "{}".into(),
                    security: String::new(),
                },
            ),
            Msg::Vnode {
                partition: 3,
                primary: true,
                forwarded: false,
                req: VnodeReq::Coordinate {
                    bucket: b"b".to_vec(),
                    key: b"k".to_vec(),
                    client: None,
                    content: Obj::Wire(WireObject {
                        meta: vec![1, 2],
                        value: vec![3],
                    }),
                    props: crate::bucket::props::BucketProps::default(),
                    now_secs: 9,
                },
            },
            Msg::Vnode {
                partition: 1,
                primary: false,
                forwarded: true,
                req: VnodeReq::Index(basalt_backend::IndexQuery::range(
                    b"b", b"f_int", b"1", b"9",
                )),
            },
        ];
        for (i, m) in msgs.iter().enumerate() {
            let f = encode(CLUSTER_REQ, i as u64, m).unwrap_or_default();
            // frame = len:4 | code | id:8 | postcard
            assert_eq!(f.get(4), Some(&CLUSTER_REQ));
            let (id, back): (u64, Msg) = decode(&f[5..]).unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(id, i as u64);
            assert_eq!(format!("{back:?}"), format!("{m:?}"));
        }
        let reply = Reply::Vnode(Ok(VnodeReply::Index(basalt_backend::IndexPage::default())));
        let f = encode(CLUSTER_RESP, 7, &reply).unwrap_or_default();
        let (id, back): (u64, Reply) = decode(&f[5..]).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!((id, format!("{back:?}")), (7, format!("{reply:?}")));
        assert!(decode::<Msg>(&[0, 1, 2]).is_err());
        assert!(decode::<Msg>(&[0, 0, 0, 0, 0, 0, 0, 1, 0xFF, 0xFF]).is_err());
    }
}
