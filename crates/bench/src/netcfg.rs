//! Options of the network drivers, read from the config with
//! basho_bench's key names and defaults:
//!
//! | driver | keys (default) |
//! |---|---|
//! | `riakc_pb` | `riakc_pb_ips` (`[{127,0,0,1}]`), `riakc_pb_port` (8087), `riakc_pb_bucket` (`<<"test">>`), `riakc_pb_replies` (`quorum`) and `riakc_pb_r` / `_w` / `_dw` / `_rw` / `_pr` / `_pw` (default: `riakc_pb_replies`), `riakc_pb_content_type` (`"application/octet-stream"`), `pb_timeout_general` (62000 ms), `pb_timeout_read` / `pb_timeout_write` / `pb_timeout_listkeys` / `pb_timeout_mapreduce` (default: general), `pb_connect_options` (`[{auto_reconnect, true}]`, below), `basalt_2i_max_results` (none); Basalt's own `basalt_pb_cacertfile` (STARTTLS trusting this CA PEM file) with `basalt_pb_user` / `basalt_pb_password` (AuthReq) |
//! | `nhs` | `pb_ips` (`["127.0.0.1"]`), `pb_port` (8087), `record_bucket` (`"domainRecord"`), `document_bucket` (`"domainDocument"`), `postcode_indexcount` (3), `alwaysget` (`{1, 1, key_order}`), `unique` (`{8000, key_order}`), `node_name` (`basalt`), `pb_timeout_general` (30000 ms); with `put_unique_checkrepl`: `replpb_ips` (required, port `pb_port`), `basalt_checkrepl_timeout` (10000 ms) |
//! | `http_raw` | `http_raw_ips` (`["127.0.0.1"]`), `http_raw_port` (8098), `http_raw_path` (`"/buckets/test/keys"`), `http_timeout_general` (30000 ms) |
//!
//! An address list holds `IP` (a string, an atom or a tuple like
//! `{127,0,0,1}`; the port is the `*_port` key), `{IP, Port}` or
//! `{IP, [Port, ...]}`, as basho_bench's `normalize_ips`. Worker *N*
//! (1-based) uses entry `N mod len` (PB drivers keep that one connection);
//! the HTTP driver walks the list request by request from there.
//!
//! Limits: at most [`MAX_TARGETS`] addresses, timeouts from 1 ms to 1 hour,
//! `unique` sizes up to [`MAX_UNIQUE_SIZE`] bytes.
//!
//! `pb_connect_options` is the `riakc_pb_socket:start_link/3` option list
//! of every `riakc_pb` worker's connection ([`PbConnect`]). As riakc reads
//! it: a later entry wins; `auto_reconnect`, `queue_if_disconnected` and
//! `keepalive` take `true` / `false`, and bare, `auto_reconnect` and
//! `queue_if_disconnected` mean `true` but `keepalive` means **`false`**
//! (riakc's quirk, kept, with a warning); `queue_if_disconnected` turns
//! `auto_reconnect` on; `{connect_timeout, Ms}` (1 ms to
//! [`MAX_CONNECT_TIMEOUT`]; riakc's default `infinity` is that limit here,
//! see [`DEFAULT_CONNECT_TIMEOUT`] for the default); `{linger, {Bool,
//! Secs}}` (`SO_LINGER`); `{silence_terminate_crash, Bool}` (only changes
//! the exit reason riakc logs: accepted, no effect); `{credentials, User,
//! Password}` and `{cacertfile, Path}` are `basalt_pb_user` /
//! `basalt_pb_password` and `basalt_pb_cacertfile` (both spellings may be
//! given if they agree; riakc's `cacertfile` without `credentials` is
//! refused, since riakc then connects without TLS and ignores it).
//! `certfile`, `keyfile`, `ssl_opts` and unknown options are config
//! errors. The driver's default `[{auto_reconnect, true}]` applies only
//! when the key is absent: a list without `auto_reconnect` gets riakc's
//! `false`, which the config warns about. What the options do after a
//! disconnect: `pbconn`.
//!
//! Differences from upstream, on purpose: `http_raw_path` defaults to
//! Basalt's `/buckets/test/keys` (upstream's `/riak/test` is Riak's old URL
//! scheme, which Basalt does not serve); `http_ips` and the NHS driver's
//! `riakc_pb_replies` are accepted and unused (the NHS HTTP operations are
//! not implemented). `replpb_ips` is read only when `put_unique_checkrepl`
//! is among the operations, and then it must be given: upstream defaults it
//! to `["127.0.0.1"]` and, when it cannot connect there, runs the op as a
//! plain `put_unique` without saying so; here a missing `replpb_ips` is a
//! config error and an unreachable one stops the run before any load.
//! `basalt_checkrepl_timeout` bounds the op's polling (upstream polls
//! forever; see `netdriver`).
//!
//! This file holds the options' types and the list of keys; the config
//! reads them in `config/net.rs` (this file imports nothing of `config`).

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Most addresses in one address list.
pub const MAX_TARGETS: usize = 1024;
/// Largest `unique` object size (the shared blob is 1000 times larger in
/// upstream; here it is capped at 64 MiB, see `netdriver`).
pub const MAX_UNIQUE_SIZE: usize = 16 * 1024 * 1024;

/// One node address (host name or IP text, port).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    /// Host name or IP address.
    pub host: String,
    /// TCP port.
    pub port: u16,
}

impl fmt::Display for Target {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.host.contains(':') {
            write!(f, "[{}]:{}", self.host, self.port)
        } else {
            write!(f, "{}:{}", self.host, self.port)
        }
    }
}

/// Key order of the NHS driver's generated keys.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyOrder {
    /// Keys sort in creation order (the counter, zero-padded, first).
    KeyOrder,
    /// A hash of the counter first, so new keys spread over the key space.
    SkewOrder,
}

/// Default connect timeout of PB connections when `pb_connect_options`
/// gives none (riakc's default is `infinity`, the OS's timeout; here a node
/// that does not answer is reported within seconds).
pub const DEFAULT_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest `connect_timeout`, and what `{connect_timeout, infinity}` means.
pub const MAX_CONNECT_TIMEOUT: Duration = Duration::from_secs(120);

/// `pb_connect_options`: riakc_pb_socket's connection options.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PbConnect {
    /// `auto_reconnect`: after a disconnect, reconnect with riakc's back-off
    /// instead of stopping the socket (and so crashing the worker).
    pub auto_reconnect: bool,
    /// `queue_if_disconnected`: a request made while disconnected waits for
    /// the reconnect (at most its timeout) instead of failing at once.
    pub queue_if_disconnected: bool,
    /// `keepalive`: `SO_KEEPALIVE` on the socket.
    pub keepalive: bool,
    /// `connect_timeout`.
    pub connect_timeout: Duration,
    /// `linger`: `SO_LINGER` with this timeout when set.
    pub linger: Option<Duration>,
}

impl Default for PbConnect {
    /// The driver's default, `[{auto_reconnect, true}]`.
    fn default() -> PbConnect {
        PbConnect {
            auto_reconnect: true,
            queue_if_disconnected: false,
            keepalive: false,
            connect_timeout: DEFAULT_CONNECT_TIMEOUT,
            linger: None,
        }
    }
}

/// `riakc_pb` driver options.
#[derive(Debug, Clone)]
pub struct PbOptions {
    /// Node addresses.
    pub targets: Vec<Target>,
    /// `riakc_pb_bucket`.
    pub bucket: Vec<u8>,
    /// Read quorum (`riakc_pb_r`), PB-encoded (symbolic values as Riak's
    /// special `u32`s).
    pub r: u32,
    /// `riakc_pb_pr`.
    pub pr: u32,
    /// `riakc_pb_w`.
    pub w: u32,
    /// `riakc_pb_dw`.
    pub dw: u32,
    /// `riakc_pb_pw`.
    pub pw: u32,
    /// `riakc_pb_rw`.
    pub rw: u32,
    /// `riakc_pb_content_type`.
    pub content_type: String,
    /// Timeout of the 2i queries (`pb_timeout_general`).
    pub timeout_general: Duration,
    /// Timeout of gets (`pb_timeout_read`).
    pub timeout_read: Duration,
    /// Timeout of puts and deletes (`pb_timeout_write`).
    pub timeout_write: Duration,
    /// Timeout of a whole `listkeys` (`pb_timeout_listkeys`).
    pub timeout_listkeys: Duration,
    /// `pb_timeout_mapreduce` (read and checked; no MapReduce op runs yet).
    pub timeout_mapreduce: Duration,
    /// `pb_connect_options`.
    pub connect: PbConnect,
    /// `max_results` of the 2i queries (`basalt_2i_max_results`).
    pub max_results: Option<u32>,
    /// STARTTLS and authentication (`basalt_pb_cacertfile`,
    /// `basalt_pb_user`, `basalt_pb_password`); `None` = plain PB.
    pub security: Option<Arc<PbSecurity>>,
}

/// How a `riakc_pb` worker secures its connection (a Basalt extension:
/// basho_bench's driver has no security options).
#[derive(Debug)]
pub struct PbSecurity {
    /// TLS trusting the CA of `basalt_pb_cacertfile` (the node's
    /// certificate must name the target's host).
    pub tls: Arc<rustls::ClientConfig>,
    /// `basalt_pb_user` and `basalt_pb_password`, sent with `RpbAuthReq`
    /// after STARTTLS; `None` = TLS only (security disabled on the node).
    pub user: Option<(String, String)>,
}

/// `nhs` driver options.
#[derive(Debug, Clone)]
pub struct NhsOptions {
    /// Node addresses (`pb_ips`, `pb_port`).
    pub targets: Vec<Target>,
    /// `record_bucket`.
    pub record_bucket: Vec<u8>,
    /// `document_bucket`.
    pub document_bucket: Vec<u8>,
    /// `postcode_indexcount`: most postcode terms per record.
    pub postcode_indexcount: u32,
    /// `alwaysget` `{MaxKeys, MinKeys, Order}` per worker.
    pub alwaysget_max: u64,
    /// See `alwaysget_max`: `alwaysget_pb` is silent until a worker has
    /// more keys than this.
    pub alwaysget_min: u64,
    /// See `alwaysget_max`.
    pub alwaysget_order: KeyOrder,
    /// `unique` `{Size, Order}`: object size of `put_unique`.
    pub unique_size: usize,
    /// See `unique_size`.
    pub unique_order: KeyOrder,
    /// `node_name`: mixed into every worker's key id.
    pub node_name: String,
    /// `pb_timeout_general`.
    pub timeout: Duration,
    /// `replpb_ips` (port `pb_port`): the passive cluster that
    /// `put_unique_checkrepl` polls; empty when that op is not configured.
    pub repl_targets: Vec<Target>,
    /// `basalt_checkrepl_timeout`: how long `put_unique_checkrepl` polls
    /// the passive cluster before the op fails with `replication_timeout`.
    pub checkrepl_timeout: Duration,
}

/// Default of `basalt_checkrepl_timeout`.
pub const DEFAULT_CHECKREPL_TIMEOUT: Duration = Duration::from_secs(10);

/// `http_raw` driver options.
#[derive(Debug, Clone)]
pub struct HttpOptions {
    /// Node addresses.
    pub targets: Vec<Target>,
    /// Path prefix before `/<key>`.
    pub path: String,
    /// Request timeout.
    pub timeout: Duration,
}

/// The options of a network driver.
#[derive(Debug, Clone)]
pub enum NetOptions {
    /// `basho_bench_driver_riakc_pb`.
    RiakcPb(PbOptions),
    /// `basho_bench_driver_nhs`.
    Nhs(NhsOptions),
    /// `basho_bench_driver_http_raw`.
    HttpRaw(HttpOptions),
}

impl NetOptions {
    /// The addresses of the node (or active cluster) under load.
    pub fn targets(&self) -> &[Target] {
        match self {
            NetOptions::RiakcPb(o) => &o.targets,
            NetOptions::Nhs(o) => &o.targets,
            NetOptions::HttpRaw(o) => &o.targets,
        }
    }

    /// The passive cluster's addresses (`replpb_ips`), when an operation
    /// reads from it; else empty.
    pub fn repl_targets(&self) -> &[Target] {
        match self {
            NetOptions::Nhs(o) => &o.repl_targets,
            NetOptions::RiakcPb(_) | NetOptions::HttpRaw(_) => &[],
        }
    }
}

/// Keys read by the network drivers (for the unknown-key warning).
pub const KNOWN_KEYS: &[&str] = &[
    "riakc_pb_ips",
    "riakc_pb_port",
    "riakc_pb_bucket",
    "riakc_pb_replies",
    "riakc_pb_r",
    "riakc_pb_w",
    "riakc_pb_dw",
    "riakc_pb_rw",
    "riakc_pb_pr",
    "riakc_pb_pw",
    "riakc_pb_content_type",
    "pb_timeout_general",
    "pb_timeout_read",
    "pb_timeout_write",
    "pb_timeout_listkeys",
    "pb_timeout_mapreduce",
    "pb_connect_options",
    "basalt_2i_max_results",
    "basalt_pb_cacertfile",
    "basalt_pb_user",
    "basalt_pb_password",
    "pb_ips",
    "pb_port",
    "record_bucket",
    "document_bucket",
    "postcode_indexcount",
    "alwaysget",
    "unique",
    "node_name",
    "http_raw_ips",
    "http_raw_port",
    "http_raw_path",
    "http_timeout_general",
    "replpb_ips",
    "basalt_checkrepl_timeout",
    "http_ips",
    "http_port",
    "record_sync",
    "document_sync",
    "node_confirms",
];
