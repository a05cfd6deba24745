//! The PB and cluster listeners: one tokio task per connection, one request at a time
//! per connection (as Riak), streamed replies written to the socket as they
//! are produced through a bounded channel (back-pressure from slow
//! readers), graceful shutdown (stop accepting, finish the request in
//! flight, close idle connections, then close the vnodes).

use crate::config::Config;
use crate::coordinator::{
    unique_id, CsFold, GetOpts, GetOutcome, Node, OpenError, PutOpts, RequestError,
};
use crate::object::{Content, RiakObject};
use crate::pb::{self, code, frame, frame_msg, FrameError};
use crate::vclock::VClock;
use basalt_backend::IndexQuery;
use prost::Message;
use std::future::Future;
use std::net::SocketAddr;
use std::sync::Arc;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::task::JoinSet;

/// Results per `RpbIndexResp` frame of a streamed 2i query.
const INDEX_STREAM_CHUNK: usize = 100;

/// Keys per `RpbListKeysResp` frame at most (a vnode's batch is split so a
/// frame stays far below clients' frame limits).
pub const LIST_KEYS_FRAME_KEYS: usize = 1000;

/// Objects per `RpbCSBucketResp` frame at most.
pub const CS_BUCKET_FRAME_OBJECTS: usize = 100;

/// Frames of a streamed reply queued between the request's handler and the
/// connection's socket writer; when the client reads slowly the handler
/// waits (back-pressure), so a listing never builds all its frames in memory.
pub const STREAM_QUEUE_FRAMES: usize = 8;

/// Where a handler sends the frames of a streamed reply.
type FrameTx = mpsc::Sender<Vec<u8>>;

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

async fn bind(addr: &str) -> Result<TcpListener, ServerError> {
    TcpListener::bind(addr)
        .await
        .map_err(|source| ServerError::Listen {
            addr: addr.to_string(),
            source,
        })
}

/// Opens the node, binds `config.pb_listen`, `config.cluster_listen` (and
/// `config.http_listen` unless empty) and serves until `shutdown`
/// resolves; then finishes in-flight requests and closes the vnodes.
pub async fn run(config: Config, shutdown: impl Future<Output = ()>) -> Result<(), ServerError> {
    let listener = bind(&config.pb_listen).await?;
    let http = match config.http_listen.as_str() {
        "" => None,
        a => Some(bind(a).await?),
    };
    let cluster = bind(&config.cluster_listen).await?;
    let node = Arc::new(tokio::task::block_in_place(|| Node::open(config))?);
    serve_all(listener, http, Some(cluster), node, shutdown).await
}

/// Serves PB on `listener` until `shutdown` resolves, then closes `node`
/// (no HTTP, no cluster listener: a node alone, without admin requests).
pub async fn serve(
    listener: TcpListener,
    node: Arc<Node>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    serve_all(listener, None, None, node, shutdown).await
}

/// Which listener a connection came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Port {
    /// The client PB port: Riak's codes only.
    Client,
    /// The cluster port: node-to-node messages (252/253) and the admin
    /// requests of `basalt admin` (240–248, plus Riak's 32 for
    /// `bucket-type update` and ping).
    Cluster,
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

/// Serves PB on `listener`, the HTTP API on `http` and cluster and admin
/// traffic on `cluster` (each when given), all over `node`, until
/// `shutdown` resolves; then stops them and closes `node`.
pub async fn serve_all(
    listener: TcpListener,
    http: Option<TcpListener>,
    cluster: Option<TcpListener>,
    node: Arc<Node>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), ServerError> {
    let local = listener.local_addr().ok();
    let cluster_local = cluster.as_ref().and_then(|l| l.local_addr().ok());
    tracing::info!(addr = ?local, cluster = ?cluster_local, node = %node.config().node_name, "PB and cluster listeners up");
    let http_local = http.as_ref().and_then(|l| l.local_addr().ok());
    node.cluster().set_my_addrs(
        &advertised(&node.config().advertise_pb, local),
        &http_local.map(|a| a.to_string()).unwrap_or_default(),
        &advertised(&node.config().advertise_cluster, cluster_local),
    );
    node.start_background();
    node.start_gossip();
    node.start_handoff();
    node.start_aae();
    node.start_repl();
    let (stop_tx, stop_rx) = watch::channel(false);
    let http_task = http.map(|l| {
        let mut stop = stop_rx.clone();
        tokio::spawn(crate::http::serve(l, node.clone(), async move {
            let _ = stop.wait_for(|s| *s).await;
        }))
    });
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
    while conns.join_next().await.is_some() {}
    if let Some(t) = http_task {
        match t.await {
            Ok(Err(e)) => tracing::warn!(error = %e, "HTTP listener"),
            Err(e) => tracing::warn!(error = %e, "HTTP listener task"),
            Ok(Ok(())) => {}
        }
    }
    tokio::task::block_in_place(|| node.close());
    tracing::info!("vnodes closed");
    Ok(())
}

/// A server running on its own runtime thread (tests, embedding).
pub struct ServerHandle {
    addr: SocketAddr,
    http_addr: Option<SocketAddr>,
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
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(ServerError::Runtime)?;
        let addr = config.pb_listen.clone();
        let listener =
            rt.block_on(TcpListener::bind(&addr))
                .map_err(|source| ServerError::Listen {
                    addr: addr.clone(),
                    source,
                })?;
        let local = listener
            .local_addr()
            .map_err(|source| ServerError::Listen { addr, source })?;
        let http = match config.http_listen.as_str() {
            "" => None,
            a => Some(rt.block_on(bind(a))?),
        };
        let http_addr = match &http {
            Some(l) => Some(l.local_addr().map_err(|source| ServerError::Listen {
                addr: config.http_listen.clone(),
                source,
            })?),
            None => None,
        };
        let cluster = rt.block_on(bind(&config.cluster_listen))?;
        let cluster_addr = cluster.local_addr().map_err(|source| ServerError::Listen {
            addr: config.cluster_listen.clone(),
            source,
        })?;
        let node = Arc::new(Node::open(config)?);
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let n2 = node.clone();
        let thread = std::thread::spawn(move || {
            rt.block_on(serve_all(listener, http, Some(cluster), n2, async {
                let _ = rx.await;
            }))
        });
        Ok(ServerHandle {
            addr: local,
            http_addr,
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

fn error_frame(msg: impl std::fmt::Display) -> Vec<u8> {
    frame_msg(
        code::ERROR_RESP,
        &pb::RpbErrorResp {
            errmsg: msg.to_string().into_bytes(),
            errcode: 0,
        },
    )
}

async fn connection(
    mut sock: TcpStream,
    peer: SocketAddr,
    port: Port,
    node: Arc<Node>,
    mut stop: watch::Receiver<bool>,
) {
    let max = node.config().limits.max_frame_bytes;
    let mut client_id = unique_id();
    client_id.truncate(4);
    loop {
        let next = tokio::select! {
            f = pb::read_frame(&mut sock, max) => f,
            _ = stop.changed() => break,
        };
        let (c, body) = match next {
            Ok(Some(f)) => f,
            Ok(None) => break,
            Err(FrameError::Empty) => {
                if sock.write_all(&error_frame("Empty frame")).await.is_err() {
                    break;
                }
                continue;
            }
            Err(e @ FrameError::TooLarge { .. }) => {
                tracing::warn!(%peer, error = %e, "closing connection");
                let _ = sock.write_all(&error_frame(&e)).await;
                break;
            }
            Err(FrameError::Io(_)) => break,
        };
        if c == crate::cluster::transport::CLUSTER_REQ && port == Port::Cluster {
            // Another node: this connection carries cluster messages from now on.
            let n = node.clone();
            crate::cluster::transport::serve_conn(sock, body, max, stop.clone(), move |m| {
                n.clone().handle_msg(m)
            })
            .await;
            return;
        }
        // The handler sends streamed frames through a bounded channel while
        // this task writes them out; its final frames (or its error) follow.
        let (tx, rx) = mpsc::channel::<Vec<u8>>(STREAM_QUEUE_FRAMES);
        let work = async {
            let res = match port {
                Port::Client => handle(&node, &mut client_id, c, &body, &tx).await,
                Port::Cluster => handle_admin(&node, c, &body).await,
            };
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
        };
        let sock_w = &mut sock;
        let write = async move {
            let mut rx = rx;
            while let Some(f) = rx.recv().await {
                if sock_w.write_all(&f).await.is_err() {
                    // Dropping `rx` makes the handler's next send fail.
                    return false;
                }
            }
            true
        };
        let ((), ok) = tokio::join!(work, write);
        if !ok || *stop.borrow() {
            break;
        }
    }
}

fn decode<M: Message + Default>(body: &[u8]) -> Result<M, RequestError> {
    M::decode(body).map_err(|e| RequestError::Invalid(format!("malformed message: {e}")))
}

fn check_bk(bucket: &[u8], key: Option<&[u8]>) -> Result<(), RequestError> {
    if bucket.is_empty() {
        return Err(RequestError::Invalid("Bucket cannot be zero-length".into()));
    }
    if key.is_some_and(<[u8]>::is_empty) {
        return Err(RequestError::Invalid("Key cannot be zero-length".into()));
    }
    Ok(())
}

fn decode_vclock(v: &Option<Vec<u8>>) -> Result<Option<VClock>, RequestError> {
    match v {
        None => Ok(None),
        Some(b) => VClock::decode(b)
            .map(Some)
            .map_err(|e| RequestError::Invalid(e.to_string())),
    }
}

fn contents_pb(o: &RiakObject, with_values: bool) -> Vec<pb::RpbContent> {
    o.contents.iter().map(|c| c.to_pb(with_values)).collect()
}

/// Handles one request: returns the reply's frames, after sending any
/// streamed frames through `out` (a send error = the client went away).
async fn handle(
    node: &Arc<Node>,
    client_id: &mut Vec<u8>,
    c: u8,
    body: &[u8],
    out: &FrameTx,
) -> Result<Vec<Vec<u8>>, RequestError> {
    Ok(match c {
        code::PING_REQ => vec![frame(code::PING_RESP, &[])],
        code::GET_CLIENT_ID_REQ => vec![frame_msg(
            code::GET_CLIENT_ID_RESP,
            &pb::RpbGetClientIdResp {
                client_id: client_id.clone(),
            },
        )],
        code::SET_CLIENT_ID_REQ => {
            let r: pb::RpbSetClientIdReq = decode(body)?;
            *client_id = r.client_id;
            vec![frame(code::SET_CLIENT_ID_RESP, &[])]
        }
        code::GET_SERVER_INFO_REQ => vec![frame_msg(
            code::GET_SERVER_INFO_RESP,
            &pb::RpbGetServerInfoResp {
                node: Some(node.config().node_name.clone().into_bytes()),
                server_version: Some(SERVER_VERSION.as_bytes().to_vec()),
            },
        )],
        code::GET_REQ => {
            let r: pb::RpbGetReq = decode(body)?;
            let sb = node
                .types()
                .storage_bucket(r.r#type.as_deref(), &r.bucket)?;
            check_bk(&r.bucket, Some(&r.key))?;
            let if_modified = decode_vclock(&r.if_modified)?;
            let opts = GetOpts {
                r: r.r,
                pr: r.pr,
                notfound_ok: r.notfound_ok,
            };
            let resp = match node
                .get_with_basic_quorum(&sb, &r.key, &opts, r.basic_quorum)
                .await?
            {
                GetOutcome::NotFound => pb::RpbGetResp::default(),
                GetOutcome::Tombstone(vc) => pb::RpbGetResp {
                    vclock: r.deletedvclock.unwrap_or(false).then(|| vc.encode()),
                    ..Default::default()
                },
                GetOutcome::Found(o) => {
                    if if_modified.is_some_and(|v| v.same_events(&o.vclock)) {
                        pb::RpbGetResp {
                            unchanged: Some(true),
                            ..Default::default()
                        }
                    } else {
                        pb::RpbGetResp {
                            content: contents_pb(&o, !r.head.unwrap_or(false)),
                            vclock: Some(o.vclock.encode()),
                            unchanged: None,
                        }
                    }
                }
            };
            vec![frame_msg(code::GET_RESP, &resp)]
        }
        code::PUT_REQ => {
            let r: pb::RpbPutReq = decode(body)?;
            let sb = node
                .types()
                .storage_bucket(r.r#type.as_deref(), &r.bucket)?;
            check_bk(&r.bucket, r.key.as_deref())?;
            let client = decode_vclock(&r.vclock)?;
            let (key, generated) = match r.key {
                Some(k) => (k, false),
                None => (unique_id(), true),
            };
            let mut content = Content::from_pb(r.content);
            content.deleted = false;
            let opts = PutOpts {
                w: r.w,
                dw: r.dw,
                pw: r.pw,
                if_none_match: r.if_none_match.unwrap_or(false),
                if_not_modified: r.if_not_modified.unwrap_or(false),
            };
            let obj = node.put(&sb, &key, client, content, &opts).await?;
            let mut resp = pb::RpbPutResp {
                key: generated.then_some(key),
                ..Default::default()
            };
            let body = r.return_body.unwrap_or(false);
            if let Some(o) = obj.filter(|_| body || r.return_head.unwrap_or(false)) {
                resp.content = contents_pb(&o, body);
                resp.vclock = Some(o.vclock.encode());
            }
            vec![frame_msg(code::PUT_RESP, &resp)]
        }
        code::DEL_REQ => {
            let r: pb::RpbDelReq = decode(body)?;
            let sb = node
                .types()
                .storage_bucket(r.r#type.as_deref(), &r.bucket)?;
            check_bk(&r.bucket, Some(&r.key))?;
            let client = decode_vclock(&r.vclock)?;
            let opts = PutOpts {
                w: r.w,
                dw: r.dw,
                pw: r.pw,
                ..Default::default()
            };
            node.delete(&sb, &r.key, client, &opts).await?;
            vec![frame(code::DEL_RESP, &[])]
        }
        code::LIST_BUCKETS_REQ => {
            let r: pb::RpbListBucketsReq = decode(body)?;
            let btype = node.types().resolve(r.r#type.as_deref())?;
            let buckets = node
                .list_buckets()
                .await?
                .into_iter()
                .filter_map(|sb| match crate::btypes::split_storage_bucket(&sb) {
                    (t, b) if t == btype.as_deref() => Some(b.to_vec()),
                    _ => None,
                })
                .collect();
            if r.stream.unwrap_or(false) {
                vec![
                    frame_msg(
                        code::LIST_BUCKETS_RESP,
                        &pb::RpbListBucketsResp {
                            buckets,
                            done: None,
                        },
                    ),
                    frame_msg(
                        code::LIST_BUCKETS_RESP,
                        &pb::RpbListBucketsResp {
                            buckets: vec![],
                            done: Some(true),
                        },
                    ),
                ]
            } else {
                vec![frame_msg(
                    code::LIST_BUCKETS_RESP,
                    &pb::RpbListBucketsResp {
                        buckets,
                        done: None,
                    },
                )]
            }
        }
        code::LIST_KEYS_REQ => {
            let r: pb::RpbListKeysReq = decode(body)?;
            let sb = node
                .types()
                .storage_bucket(r.r#type.as_deref(), &r.bucket)?;
            // Each covering vnode's batch is sent as soon as it is read.
            node.list_keys(&sb, |keys| {
                let out = out.clone();
                async move {
                    let mut keys = keys.into_iter();
                    loop {
                        let chunk: Vec<Vec<u8>> =
                            keys.by_ref().take(LIST_KEYS_FRAME_KEYS).collect();
                        if chunk.is_empty() {
                            return true;
                        }
                        let resp = pb::RpbListKeysResp {
                            keys: chunk,
                            done: None,
                        };
                        if out
                            .send(frame_msg(code::LIST_KEYS_RESP, &resp))
                            .await
                            .is_err()
                        {
                            return false;
                        }
                    }
                }
            })
            .await?;
            vec![frame_msg(
                code::LIST_KEYS_RESP,
                &pb::RpbListKeysResp {
                    keys: vec![],
                    done: Some(true),
                },
            )]
        }
        code::GET_BUCKET_REQ => {
            let r: pb::RpbGetBucketReq = decode(body)?;
            let sb = node
                .types()
                .storage_bucket(r.r#type.as_deref(), &r.bucket)?;
            let props = node.props().get(&sb).to_pb();
            vec![frame_msg(
                code::GET_BUCKET_RESP,
                &pb::RpbGetBucketResp { props },
            )]
        }
        code::SET_BUCKET_REQ => {
            let r: pb::RpbSetBucketReq = decode(body)?;
            let sb = node
                .types()
                .storage_bucket(r.r#type.as_deref(), &r.bucket)?;
            node.props().set(&sb, &r.props)?;
            vec![frame(code::SET_BUCKET_RESP, &[])]
        }
        code::RESET_BUCKET_REQ => {
            let r: pb::RpbResetBucketReq = decode(body)?;
            let sb = node
                .types()
                .storage_bucket(r.r#type.as_deref(), &r.bucket)?;
            node.props().reset(&sb)?;
            vec![frame(code::RESET_BUCKET_RESP, &[])]
        }
        code::INDEX_REQ => {
            let r: pb::RpbIndexReq = decode(body)?;
            let sb = node
                .types()
                .storage_bucket(r.r#type.as_deref(), &r.bucket)?;
            if r.return_body.unwrap_or(false) {
                return Err(RequestError::Invalid(
                    "index return_body is not supported yet".into(),
                ));
            }
            let stream = r.stream.unwrap_or(false);
            let (start, end) = match r.qtype {
                pb::INDEX_EQ => (
                    r.key
                        .ok_or_else(|| RequestError::Invalid("eq query needs key".into()))?,
                    None,
                ),
                pb::INDEX_RANGE => (
                    r.range_min.ok_or_else(|| {
                        RequestError::Invalid("range query needs range_min".into())
                    })?,
                    Some(r.range_max.ok_or_else(|| {
                        RequestError::Invalid("range query needs range_max".into())
                    })?),
                ),
                other => {
                    return Err(RequestError::Invalid(format!(
                        "unknown index query type {other}"
                    )))
                }
            };
            let term_regex = match r.term_regex {
                None => None,
                Some(b) => Some(
                    String::from_utf8(b)
                        .map_err(|_| RequestError::Invalid("term_regex is not UTF-8".into()))?,
                ),
            };
            let continuation = match r.continuation {
                None => None,
                Some(b) => Some(
                    String::from_utf8(b)
                        .map_err(|_| RequestError::Invalid("invalid continuation".into()))?,
                ),
            };
            let q = IndexQuery {
                bucket: sb,
                field: r.index,
                start,
                end,
                return_terms: r.return_terms.unwrap_or(false),
                term_regex,
                max_results: r.max_results,
                continuation,
                start_after: None,
            };
            let page = node.index_query(q).await?;
            let continuation = page.continuation.map(String::into_bytes);
            let to_resp = |results: &[basalt_backend::IndexResult]| {
                let mut resp = pb::RpbIndexResp::default();
                for res in results {
                    match &res.term {
                        Some(t) => resp.results.push(pb::RpbPair {
                            key: t.clone(),
                            value: Some(res.key.clone()),
                        }),
                        None => resp.keys.push(res.key.clone()),
                    }
                }
                resp
            };
            if stream {
                // As Riak: frames of keys / results (none when empty), then
                // `{done = true, continuation?}`.
                for c in page.results.chunks(INDEX_STREAM_CHUNK) {
                    if out
                        .send(frame_msg(code::INDEX_RESP, &to_resp(c)))
                        .await
                        .is_err()
                    {
                        return Ok(vec![]);
                    }
                }
                vec![frame_msg(
                    code::INDEX_RESP,
                    &pb::RpbIndexResp {
                        continuation,
                        done: Some(true),
                        ..Default::default()
                    },
                )]
            } else {
                let mut resp = to_resp(&page.results);
                resp.continuation = continuation;
                vec![frame_msg(code::INDEX_RESP, &resp)]
            }
        }
        code::CS_BUCKET_REQ => {
            let r: pb::RpbCsBucketReq = decode(body)?;
            let sb = node
                .types()
                .storage_bucket(r.r#type.as_deref(), &r.bucket)?;
            check_bk(&r.bucket, None)?;
            if r.cover_context.is_some() {
                return Err(RequestError::Invalid(
                    "cover_context is not supported".into(),
                ));
            }
            let q = CsFold {
                bucket: sb,
                start: r.start_key,
                start_incl: r.start_incl.unwrap_or(true),
                end: r.end_key,
                end_incl: r.end_incl.unwrap_or(false),
                continuation: r.continuation,
                max_results: r.max_results,
            };
            // Objects stream in key order as the fold's rounds produce them,
            // then `{done = true, continuation?}`.
            let continuation = node
                .cs_bucket_fold(&q, |objs| {
                    let out = out.clone();
                    async move {
                        for chunk in objs.chunks(CS_BUCKET_FRAME_OBJECTS) {
                            let resp = pb::RpbCsBucketResp {
                                objects: chunk
                                    .iter()
                                    .map(|(k, o)| pb::RpbIndexObject {
                                        key: k.clone(),
                                        object: pb::RpbGetResp {
                                            content: contents_pb(o, true),
                                            vclock: Some(o.vclock.encode()),
                                            unchanged: None,
                                        },
                                    })
                                    .collect(),
                                continuation: None,
                                done: None,
                            };
                            if out
                                .send(frame_msg(code::CS_BUCKET_RESP, &resp))
                                .await
                                .is_err()
                            {
                                return false;
                            }
                        }
                        true
                    }
                })
                .await?;
            vec![frame_msg(
                code::CS_BUCKET_RESP,
                &pb::RpbCsBucketResp {
                    objects: vec![],
                    continuation,
                    done: Some(true),
                },
            )]
        }
        other => match crate::btypes::handle(node, other, body)? {
            Some(frames) => frames,
            None => return Err(unknown_code(other)),
        },
    })
}

/// Riak's answer to a code it does not serve (`riak_api_pb_server`); the
/// connection stays open. The client port gives it to Basalt's own codes
/// too: they are served on the cluster port only.
fn unknown_code(c: u8) -> RequestError {
    RequestError::Invalid(format!("Unknown message code: {c}"))
}

/// Handles one admin request on the cluster port: the cluster admin line
/// (247), the bucket-type admin codes (240–246), Riak's bucket-type codes
/// (`bucket-type update` sends 32) and ping; anything else is an unknown
/// code.
async fn handle_admin(node: &Arc<Node>, c: u8, body: &[u8]) -> Result<Vec<Vec<u8>>, RequestError> {
    if c == code::PING_REQ {
        return Ok(vec![frame(code::PING_RESP, &[])]);
    }
    if c == crate::cluster::control::ADMIN_CLUSTER_REQ {
        let text = node.admin_request(body).await?;
        return Ok(vec![frame(
            crate::cluster::control::ADMIN_CLUSTER_RESP,
            text.as_bytes(),
        )]);
    }
    if let Some(frames) = crate::btypes::handle_admin(node, c, body)? {
        return Ok(frames);
    }
    crate::btypes::handle(node, c, body)?.ok_or_else(|| unknown_code(c))
}
