//! The PB and cluster listeners: one tokio task per connection, one request
//! at a time per connection (as Riak), streamed replies written to the
//! socket as they are produced through a bounded channel (back-pressure
//! from slow readers), graceful shutdown (stop accepting, finish the
//! request in flight, close idle connections, then close the vnodes). What
//! a request means is [`dispatch`]'s.
//!
//! With `cluster_certfile` & co. the cluster port speaks mutual TLS from
//! the first byte: a peer without a certificate of the cluster CA is
//! refused at the handshake; a node certificate may send everything, a
//! user's certificate only admin requests (`basalt.admin` once security
//! is on) and replication messages (`basalt.repl`). On a plain cluster
//! port, with security on, admin requests come only from loopback.

pub mod admin;
pub mod admin_views;
pub mod backup;
pub mod cluster;
pub mod dispatch;
pub mod http;
pub(crate) mod listen;
pub mod metrics;
pub mod transfers;

use crate::api::pb::{error_frame, Port};
use crate::config::Config;
use crate::limits::STREAM_QUEUE_FRAMES;
use crate::node::Node;
use crate::node::OpenError;
use crate::pb::{self, FrameError};
use crate::security::tls::ClusterPeer;
use dispatch::dispatch;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

/// The `server_version` reported by server info: Riak KV's last 3.2 line,
/// so clients enable every KV feature (the Python client needs `X.Y.Z` ≥ 2.1).
pub const SERVER_VERSION: &str = "3.2.0";

/// Errors starting or running a server.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The node did not open.
    #[error(transparent)]
    Open(#[from] OpenError),
    /// Binding or accepting failed.
    #[error("listener {addr}: {source}")]
    Listen {
        /// The address.
        addr: String,
        /// The error.
        #[source]
        source: std::io::Error,
    },
    /// The runtime could not be built.
    #[error("runtime: {0}")]
    Runtime(std::io::Error),
}

/// Opens the node and serves until `shutdown` resolves; then finishes
/// in-flight requests and closes the vnodes. The ports
/// (`config.pb_listen`, `config.cluster_listen`, and `config.http_listen` /
/// `https_listen` unless empty) are bound first, so a port in use fails
/// at once, and listen only once the node is open ([`listen`]).
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<(), ServerError> {
    let ports = listen::Ports::bind(&config).await?;
    let node = Arc::new(tokio::task::block_in_place(|| Node::open(config))?);
    let l = ports.listen()?;
    serve_all(l.pb, l.http, Some(l.cluster), node, shutdown).await
}

/// Serves PB on `listener` until `shutdown` resolves, then closes `node`
/// (no HTTP, no cluster listener: a node alone, without admin requests).
pub async fn serve(
    listener: TcpListener,
    node: Arc<Node>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    serve_all(listener, HttpListeners::default(), None, node, shutdown).await
}

/// The HTTP API's listeners: plain (`http_listen`) and TLS
/// (`https_listen`), each optional.
#[derive(Debug, Default)]
pub struct HttpListeners {
    /// Plain HTTP.
    pub http: Option<TcpListener>,
    /// HTTPS (needs the node's TLS settings).
    pub https: Option<TcpListener>,
}

/// Accepts on `l`, or never when there is no listener.
async fn accept_on(l: &Option<TcpListener>) -> std::io::Result<(TcpStream, SocketAddr)> {
    match l {
        Some(l) => l.accept().await,
        None => std::future::pending().await,
    }
}

/// The address to advertise: `configured`, or else the bound one.
fn advertised(configured: &str, bound: Option<SocketAddr>) -> String {
    match configured {
        "" => bound.map(|a| a.to_string()).unwrap_or_default(),
        a => a.to_string(),
    }
}

/// Puts the addresses this node is reached at (configured, or else bound)
/// in its own member entry, where a join and gossip tell them to peers.
/// Idempotent: the same addresses again change nothing.
fn advertise(
    node: &Node,
    pb: Option<SocketAddr>,
    http: Option<SocketAddr>,
    cluster: Option<SocketAddr>,
) {
    node.cluster().set_my_addrs(
        &advertised(&node.config().advertise_pb, pb),
        &http.map(|a| a.to_string()).unwrap_or_default(),
        &advertised(&node.config().advertise_cluster, cluster),
    );
}

/// Serves PB on `listener`, the HTTP API on `http` (plain and/or TLS) and cluster and admin
/// traffic on `cluster` (each when given), all over `node`, until
/// `shutdown` resolves; then stops them and closes `node`.
pub async fn serve_all(
    listener: TcpListener,
    http: HttpListeners,
    cluster: Option<TcpListener>,
    node: Arc<Node>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    let HttpListeners { http, https } = http;
    let local = listener.local_addr().ok();
    let cluster_local = cluster.as_ref().and_then(|l| l.local_addr().ok());
    tracing::info!(addr = ?local, cluster = ?cluster_local, node = %node.config().node_name, "PB and cluster listeners up");
    let http_local = http.as_ref().and_then(|l| l.local_addr().ok());
    advertise(&node, local, http_local, cluster_local);
    let https_local = https.as_ref().and_then(|l| l.local_addr().ok());
    let exposed: Vec<SocketAddr> = [local, http_local, https_local]
        .into_iter()
        .flatten()
        .filter(|a| !a.ip().is_loopback())
        .collect();
    if !exposed.is_empty() && !node.security.enabled() {
        tracing::warn!(
            addrs = ?exposed,
            "client listeners on non-loopback addresses with security disabled: anyone who reaches them can read, write and delete (see `basalt admin security`)"
        );
    }
    // Connections to other nodes live on this runtime, whoever dials them.
    let rt = tokio::runtime::Handle::current();
    node.cluster().peers.set_runtime(rt.clone());
    node.repl.repl_peers.set_runtime(rt);
    if node.cluster_tls.is_none() && cluster_local.is_some_and(|a| !a.ip().is_loopback()) {
        tracing::warn!(
            addr = ?cluster_local,
            "cluster listener on a non-loopback address without mutual TLS: anyone who reaches it can join, read and write (see cluster_certfile, cluster_keyfile, cluster_cacertfile)"
        );
    }
    node.start_background();
    node.gossip.start_gossip();
    node.handoff.clone().start(Arc::downgrade(&node));
    node.aae.start_aae();
    node.repl.start_repl();
    let (stop_tx, stop_rx) = watch::channel(false);
    // One console for every HTTP listener of the node.
    let console = Arc::new(crate::console::Console::new(node.clone()));
    let mut http_tasks = Vec::new();
    for (l, tls, is_https) in [(http, None, false), (https, node.tls.clone(), true)] {
        let Some(l) = l else { continue };
        if is_https && tls.is_none() {
            // Config validation requires TLS settings for https_listen.
            tracing::error!("https_listen without TLS settings; HTTPS not served");
            continue;
        }
        let mut stop = stop_rx.clone();
        http_tasks.push(tokio::spawn(http::serve(
            l,
            node.clone(),
            console.clone(),
            tls,
            async move {
                let _ = stop.wait_for(|s| *s).await;
            },
        )));
    }
    let mut conns = JoinSet::new();
    tokio::pin!(shutdown);
    loop {
        let (acc, port) = tokio::select! {
            _ = &mut shutdown => break,
            acc = listener.accept() => (acc, Port::Client),
            acc = accept_on(&cluster) => (acc, Port::Cluster),
            Some(_) = conns.join_next(), if !conns.is_empty() => continue,
        };
        match acc {
            Ok((sock, peer)) => {
                let node = node.clone();
                let stop = stop_rx.clone();
                conns.spawn(async move { connection(sock, peer, port, node, stop).await });
            }
            Err(e) => tracing::warn!(error = %e, ?port, "accept"),
        }
    }
    tracing::info!("shutting down: finishing in-flight requests");
    drop(listener);
    drop(cluster);
    let _ = stop_tx.send(true);
    console.close();
    while conns.join_next().await.is_some() {}
    for t in http_tasks {
        match t.await {
            Ok(Err(e)) => tracing::warn!(error = %e, "HTTP listener"),
            Err(e) => tracing::warn!(error = %e, "HTTP listener task"),
            Ok(Ok(())) => {}
        }
    }
    let left = node.drain_calls(crate::limits::SHUTDOWN_DRAIN).await;
    if left > 0 {
        tracing::warn!(
            calls = left,
            "closing the vnodes with replica calls still running after {:?}",
            crate::limits::SHUTDOWN_DRAIN
        );
    }
    tokio::task::block_in_place(|| node.close());
    tracing::info!("vnodes closed");
    Ok(())
}

/// The node's async runtime: `config.runtime_threads` worker threads (0:
/// one a CPU, tokio's default), every driver (I/O, timers) enabled.
pub fn runtime(config: &Config) -> std::io::Result<tokio::runtime::Runtime> {
    let mut b = tokio::runtime::Builder::new_multi_thread();
    if config.runtime_threads > 0 {
        b.worker_threads(config.runtime_threads);
    }
    b.enable_all().build()
}

/// A server running on its own runtime thread (tests, embedding).
pub struct ServerHandle {
    addr: SocketAddr,
    http_addr: Option<SocketAddr>,
    https_addr: Option<SocketAddr>,
    cluster_addr: SocketAddr,
    node: Arc<Node>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<Result<(), ServerError>>>,
}

impl ServerHandle {
    /// Opens the node and starts serving PB on `config.pb_listen`, cluster
    /// and admin traffic on `config.cluster_listen` and HTTP on
    /// `config.http_listen` unless empty (port 0 = any).
    pub fn spawn(config: Config) -> Result<ServerHandle, ServerError> {
        let rt = runtime(&config).map_err(ServerError::Runtime)?;
        let ports = rt.block_on(listen::Ports::bind(&config))?;
        let local = ports.pb.local_addr();
        let http_addr = ports.http.as_ref().map(|r| r.local_addr());
        let https_addr = ports.https.as_ref().map(|r| r.local_addr());
        let cluster_addr = ports.cluster.local_addr();
        let node = Arc::new(Node::open(config)?);
        // Before this returns, not when the serving thread gets to it: a
        // caller that joins this node to another at once must send its
        // cluster address, or the others have none to dial it at.
        advertise(&node, Some(local), http_addr, Some(cluster_addr));
        let l = {
            let _rt = rt.enter();
            ports.listen()?
        };
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let n2 = node.clone();
        let thread = std::thread::spawn(move || {
            rt.block_on(serve_all(l.pb, l.http, Some(l.cluster), n2, async {
                let _ = rx.await;
            }))
        });
        Ok(ServerHandle {
            addr: local,
            http_addr,
            https_addr,
            cluster_addr,
            node,
            stop: Some(tx),
            thread: Some(thread),
        })
    }

    /// The bound address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The bound cluster address (node-to-node and admin traffic).
    pub fn cluster_addr(&self) -> SocketAddr {
        self.cluster_addr
    }

    /// The bound HTTP address, if the HTTP API is on.
    pub fn http_addr(&self) -> Option<SocketAddr> {
        self.http_addr
    }

    /// The bound HTTPS address, if `https_listen` is set.
    pub fn https_addr(&self) -> Option<SocketAddr> {
        self.https_addr
    }

    /// The node.
    pub fn node(&self) -> &Arc<Node> {
        &self.node
    }

    /// Graceful shutdown; waits for it.
    pub fn shutdown(mut self) -> Result<(), ServerError> {
        self.stop_and_join()
    }

    fn stop_and_join(&mut self) -> Result<(), ServerError> {
        if let Some(s) = self.stop.take() {
            let _ = s.send(());
        }
        match self.thread.take().map(|t| t.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(ServerError::Runtime(std::io::Error::other(
                "server thread panicked",
            ))),
            None => Ok(()),
        }
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        let _ = self.stop_and_join();
    }
}

/// How [`serve_frames`] ended.
enum End {
    /// The client went away, a fatal frame error, or shutdown.
    Closed,
    /// The client asked for TLS (`RpbStartTls`, acknowledged): upgrade the
    /// socket, then serve on.
    StartTls,
    /// Another node: the socket carries cluster messages from now on,
    /// starting with this body.
    Cluster(Vec<u8>),
}

/// A client connection counted in `pbc_active` (and `pbc_connects`) for
/// as long as it lives.
struct ClientConn(Arc<Node>);

impl ClientConn {
    fn count(node: &Arc<Node>) -> ClientConn {
        let s = node.stats();
        s.pbc_connects.fetch_add(1, Ordering::Relaxed);
        s.pbc_active.fetch_add(1, Ordering::Relaxed);
        ClientConn(node.clone())
    }
}

impl Drop for ClientConn {
    fn drop(&mut self) {
        self.0.stats().pbc_active.fetch_sub(1, Ordering::Relaxed);
    }
}

async fn connection(
    mut sock: TcpStream,
    peer: SocketAddr,
    port: Port,
    node: Arc<Node>,
    mut stop: watch::Receiver<bool>,
) {
    let _counted = (port == Port::Client).then(|| ClientConn::count(&node));
    let max = node.config().limits.max_frame_bytes;
    let mut conn = Conn {
        peer,
        port,
        // As riak_kv_pb_object with vnode vclocks (every Riak since 1.0):
        // a connection's client id starts as four zero bytes; it only
        // echoes what `RpbSetClientIdReq` set (clocks use vnode actors).
        client_id: vec![0; 4],
        session: crate::api::pb::auth::Session::default(),
        cluster_peer: None,
    };
    if port == Port::Cluster {
        if let Some(tls) = node.cluster_tls.clone() {
            return cluster_tls_connection(sock, conn, node, stop, tls).await;
        }
    }
    match serve_frames(&mut sock, &mut conn, &node, &mut stop).await {
        End::Closed => {}
        End::Cluster(body) => {
            let _ = sock.set_nodelay(true);
            serve_cluster(sock.into_split(), body, max, &conn, &node, &stop).await;
        }
        End::StartTls => {
            let Some(config) = node.tls.clone() else {
                return;
            };
            let handshake = tokio_rustls::TlsAcceptor::from(config).accept(sock);
            let handshake =
                tokio::time::timeout(crate::security::tls::HANDSHAKE_TIMEOUT, handshake);
            match handshake.await.unwrap_or_else(|_| {
                Err(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no handshake within the time limit",
                ))
            }) {
                Ok(mut tls) => {
                    conn.session.tls = true;
                    conn.session.cert_cn = crate::security::tls::peer_common_name(tls.get_ref().1);
                    if let End::StartTls | End::Cluster(_) =
                        serve_frames(&mut tls, &mut conn, &node, &mut stop).await
                    {
                        tracing::warn!(%peer, "unexpected request on a TLS connection; closed");
                    }
                    let _ = tls.shutdown().await;
                }
                Err(e) => {
                    node.security
                        .refused(&peer.to_string(), None, &format!("TLS handshake: {e}"));
                }
            }
        }
    }
}

/// A cluster-port connection with mutual TLS: the handshake (a
/// certificate of the cluster CA required, within the handshake time
/// limit), then admin requests or cluster messages as its certificate's
/// role allows ([`cluster_gate`]).
async fn cluster_tls_connection(
    sock: TcpStream,
    mut conn: Conn,
    node: Arc<Node>,
    mut stop: watch::Receiver<bool>,
    tls: crate::security::tls::ClusterTls,
) {
    let _ = sock.set_nodelay(true);
    let handshake = tokio_rustls::TlsAcceptor::from(tls.server).accept(sock);
    let mut stream =
        match tokio::time::timeout(crate::security::tls::HANDSHAKE_TIMEOUT, handshake).await {
            Ok(Ok(s)) => s,
            Ok(Err(e)) => {
                let why = format!("cluster port TLS handshake: {e}");
                return node.security.refused(&conn.peer.to_string(), None, &why);
            }
            Err(_) => {
                let why = "cluster port TLS handshake: not finished within the time limit";
                return node.security.refused(&conn.peer.to_string(), None, why);
            }
        };
    let Some(role) = ClusterPeer::of_conn(stream.get_ref().1) else {
        let why = "cluster port: the certificate has no common name";
        return node.security.refused(&conn.peer.to_string(), None, why);
    };
    conn.cluster_peer = Some(role);
    let max = node.config().limits.max_frame_bytes;
    match serve_frames(&mut stream, &mut conn, &node, &mut stop).await {
        End::Closed => {}
        End::Cluster(body) => {
            let halves = tokio::io::split(stream);
            serve_cluster(halves, body, max, &conn, &node, &stop).await
        }
        End::StartTls => tracing::warn!(peer = %conn.peer, "STARTTLS on the cluster port; closed"),
    }
}

/// Serves cluster messages on `sock` from `first` on, each through
/// [`cluster_gate`] and then `api::cluster`.
async fn serve_cluster<R, W>(
    halves: (R, W),
    first: Vec<u8>,
    max: usize,
    conn: &Conn,
    node: &Arc<Node>,
    stop: &watch::Receiver<bool>,
) where
    R: tokio::io::AsyncRead + Unpin + Send + 'static,
    W: tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let n = node.clone();
    let (role, peer) = (conn.cluster_peer.clone(), conn.peer.to_string());
    crate::cluster::transport::serve_conn(halves, first, max, stop.clone(), move |m| {
        let n = n.clone();
        let gate = cluster_gate(&n, role.as_ref(), &peer, &m);
        async move {
            match gate {
                Ok(()) => cluster::serve(n, m).await,
                Err(why) => crate::cluster::Reply::Refused(why),
            }
        }
    })
    .await;
}

/// Whether the peer of a cluster connection may send `msg`: anything on a
/// plain cluster port (no TLS configured) and from a node certificate; from
/// a user's certificate only replication messages, and once security is on
/// only with `basalt.repl`. Refusals are counted and logged.
fn cluster_gate(
    node: &Node,
    role: Option<&ClusterPeer>,
    peer: &str,
    msg: &crate::cluster::Msg,
) -> Result<(), String> {
    use crate::cluster::Msg;
    let user = match role {
        None | Some(ClusterPeer::Node(_)) => return Ok(()),
        Some(ClusterPeer::User(u)) => u,
    };
    // What another cluster's replication sends: pushes, requeues, hellos,
    // metadata and full-sync's fold queries.
    let repl = match msg {
        Msg::ReplPush { .. }
        | Msg::ReplRequeue { .. }
        | Msg::ReplHello { .. }
        | Msg::ReplMeta(_) => true,
        Msg::Service { service, .. } => service == crate::aae::FOLD_SERVICE,
        _ => false,
    };
    let verdict = if !repl {
        Err(format!(
            "the certificate of user {user:?} is not a node certificate (OU {}): only replication and admin requests are allowed",
            crate::security::tls::NODE_OU
        ))
    } else if !node.security.enabled() {
        Ok(())
    } else {
        node.security
            .permit(user, crate::security::Rule::Any("basalt.repl"), None, None)
            .map_err(|d| d.to_string())
    };
    if let Err(why) = &verdict {
        node.security.refused(peer, Some(user), why);
    }
    verdict
}

/// Whether the peer may make admin request `c` on the cluster port. Ping
/// is open. Over mutual TLS: a node certificate may; a user's certificate
/// may while security is off, and once it is on only with `basalt.admin`.
/// On a plain cluster port: anyone while security is off; once it is on,
/// only a loopback peer (the node's own host; configure the cluster port's
/// TLS to require an admin grant).
fn admin_gate(node: &Node, conn: &Conn, c: u8) -> Result<(), String> {
    if c == pb::code::PING_REQ {
        return Ok(());
    }
    let verdict = match &conn.cluster_peer {
        Some(ClusterPeer::Node(_)) => Ok(()),
        Some(ClusterPeer::User(u)) if node.security.enabled() => node
            .security
            .permit(u, crate::security::Rule::Any("basalt.admin"), None, None)
            .map_err(|d| d.to_string()),
        Some(ClusterPeer::User(_)) => Ok(()),
        None if node.security.enabled() && !conn.peer.ip().is_loopback() => Err(
            "Security is enabled: admin requests from another host need the cluster port's mutual TLS (cluster_certfile, cluster_keyfile, cluster_cacertfile) and a certificate whose user has basalt.admin".to_string(),
        ),
        None => Ok(()),
    };
    if let Err(why) = &verdict {
        let user = match &conn.cluster_peer {
            Some(ClusterPeer::User(u)) => Some(u.as_str()),
            _ => None,
        };
        node.security.refused(&conn.peer.to_string(), user, why);
    }
    verdict
}

/// What a connection carries from one request to the next.
struct Conn {
    peer: SocketAddr,
    port: Port,
    client_id: Vec<u8>,
    session: crate::api::pb::auth::Session,
    /// Who the cluster port's mutual TLS says the peer is (`None`: plain).
    cluster_peer: Option<ClusterPeer>,
}

/// Serves requests on `sock` (plain or TLS) until the connection ends or
/// changes kind ([`End`]).
async fn serve_frames<S>(
    sock: &mut S,
    conn: &mut Conn,
    node: &Arc<Node>,
    stop: &mut watch::Receiver<bool>,
) -> End
where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let max = node.config().limits.max_frame_bytes;
    let peer = conn.peer;
    // Bytes of the next request that arrived while a request ran (read by
    // the watch for a client gone away, below).
    let mut early: Vec<u8> = Vec::new();
    loop {
        let (next, rest) = {
            let mut r = (&early[..]).chain(&mut *sock);
            let next = tokio::select! {
                f = pb::read_frame(&mut r, max) => f,
                _ = stop.changed() => return End::Closed,
            };
            (next, r.into_inner().0.to_vec())
        };
        early = rest;
        let (c, body) = match next {
            Ok(Some(f)) => f,
            Ok(None) => return End::Closed,
            Err(FrameError::Empty) => {
                if send(sock, &error_frame("Empty frame")).await.is_err() {
                    return End::Closed;
                }
                continue;
            }
            Err(e @ FrameError::TooLarge { .. }) => {
                tracing::warn!(%peer, error = %e, "closing connection");
                let _ = send(sock, &error_frame(&e)).await;
                return End::Closed;
            }
            Err(FrameError::Io(_)) => return End::Closed,
        };
        if c == crate::cluster::transport::CLUSTER_HELLO && conn.port == Port::Cluster {
            match crate::cluster::transport::answer_hello(&body) {
                Ok(ack) if send(sock, &ack).await.is_ok() => continue,
                Ok(_) => return End::Closed,
                Err(why) => {
                    tracing::warn!(%peer, "{why}; closed");
                    let _ = send(sock, &error_frame(&why)).await;
                    return End::Closed;
                }
            }
        }
        if c == crate::cluster::transport::CLUSTER_REQ && conn.port == Port::Cluster {
            if !early.is_empty() {
                tracing::warn!(%peer, "bytes sent ahead of the cluster handshake; closed");
                return End::Closed;
            }
            return End::Cluster(body);
        }
        if conn.port == Port::Cluster {
            if let Err(why) = admin_gate(node, conn, c) {
                if send(sock, &error_frame(why)).await.is_err() {
                    return End::Closed;
                }
                continue;
            }
        }
        if conn.port == Port::Client {
            if let Some(reply) = security_step(node, conn, c, &body).await {
                let (frame, upgrade) = reply;
                if send(sock, &frame).await.is_err() {
                    return End::Closed;
                }
                if upgrade {
                    if !early.is_empty() {
                        tracing::warn!(%peer, "bytes sent ahead of the TLS handshake; closed");
                        return End::Closed;
                    }
                    return End::StartTls;
                }
                continue;
            }
        }
        // The handler sends streamed frames through a bounded channel while
        // this task writes them out; its final frames (or its error) follow.
        let (tx, rx) = mpsc::channel::<Vec<u8>>(STREAM_QUEUE_FRAMES);
        let client_id = &mut conn.client_id;
        let port = conn.port;
        // Boxed: the handler's future is large (every service's state),
        // and the joins and selects below would otherwise copy it whole,
        // several times per request.
        let work = Box::pin(async {
            let res = dispatch(node, port, client_id, c, &body, &tx).await;
            let out = match res {
                Ok(frames) => frames,
                Err(e) => vec![error_frame(e)],
            };
            for f in out {
                if tx.send(f).await.is_err() {
                    break;
                }
            }
            drop(tx);
        });
        let (mut sock_r, mut sock_w) = tokio::io::split(&mut *sock);
        let write = async move {
            let mut rx = rx;
            while let Some(f) = rx.recv().await {
                if send(&mut sock_w, &f).await.is_err() {
                    // Dropping `rx` makes the handler's next send fail.
                    return false;
                }
            }
            true
        };
        // A stream or a MapReduce job whose client has gone away (EOF or a
        // reset while it runs) is dropped there and then, as Riak's
        // connection process stops on `tcp_closed`, instead of running to
        // its end or its timeout. Bytes the client sends meanwhile (its
        // next request, early) are kept for the next read.
        let watch = async {
            if port != Port::Client || !dispatch::cancellable(c) || !early.is_empty() {
                return std::future::pending::<()>().await;
            }
            // On the heap: a buffer in the future would be copied with it.
            let mut buf = vec![0u8; 4096];
            match sock_r.read(&mut buf).await {
                Ok(0) | Err(_) => {}
                Ok(n) => {
                    early.extend_from_slice(&buf[..n]);
                    std::future::pending::<()>().await
                }
            }
        };
        let ok = tokio::select! {
            biased;
            ((), ok) = async { tokio::join!(work, write) } => ok,
            () = watch => {
                tracing::debug!(%peer, code = c, "client went away; request dropped");
                false
            }
        };
        if !ok || *stop.borrow() {
            return End::Closed;
        }
    }
}

/// Writes a frame and flushes it: a TLS stream may keep encrypted bytes
/// back when the socket is full (tokio-rustls), and they would never leave
/// without a flush; on plain TCP the flush is free.
async fn send<S: tokio::io::AsyncWrite + Unpin + ?Sized>(
    sock: &mut S,
    frame: &[u8],
) -> std::io::Result<()> {
    sock.write_all(frame).await?;
    sock.flush().await
}

/// The client port's security step before a request runs: `RpbStartTls`
/// and `RpbAuthReq` are answered here (the frame, and whether to upgrade
/// to TLS now), as is any request security refuses; `None` = dispatch it.
async fn security_step(
    node: &Node,
    conn: &mut Conn,
    c: u8,
    body: &[u8],
) -> Option<(Vec<u8>, bool)> {
    let ip = conn.peer.ip();
    match c {
        pb::code::START_TLS => Some(if conn.session.tls {
            (error_frame("Connection already uses TLS"), false)
        } else if node.tls.is_none() {
            (
                error_frame("TLS is not configured on this node (tls_certfile, tls_keyfile)"),
                false,
            )
        } else {
            (pb::frame(pb::code::START_TLS, &[]), true)
        }),
        pb::code::AUTH_REQ => Some(
            match crate::api::pb::auth::authenticate(&node.security, &mut conn.session, ip, body)
                .await
            {
                Ok(frame) => (frame, false),
                Err(e) => (error_frame(e), false),
            },
        ),
        _ => crate::api::pb::auth::check(&node.security, &conn.session, ip, c, body)
            .err()
            .map(|e| (error_frame(e), false)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_runtime_has_the_threads_the_config_names() {
        let threads = |text: &str| {
            let c = Config::from_toml(text).expect("config");
            runtime(&c).expect("runtime").metrics().num_workers()
        };
        assert_eq!(threads("runtime_threads = 1"), 1);
        assert_eq!(threads("runtime_threads = 3"), 3);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        assert_eq!(threads(""), cpus, "0: one a CPU");
    }
}
