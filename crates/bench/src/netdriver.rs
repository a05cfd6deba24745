//! Network drivers: a Riak node over Protocol Buffers
//! (`basho_bench_driver_riakc_pb`, `basho_bench_driver_nhs`) or HTTP
//! (`basho_bench_driver_http_raw`), with the upstream drivers' operation
//! semantics (options: [`crate::netcfg`]).
//!
//! **Start.** [`check_reachable`] connects to every configured address
//! (within `connect_timeout` of `pb_connect_options`, else 2 s) and pings
//! it (PB ping, HTTP `GET /ping`; 2 s), so a run against an address where
//! nothing listens stops before any load with e.g. `cannot reach Riak PB
//! at 127.0.0.1:8087: connection refused` (upstream's riakc_pb driver with
//! `auto_reconnect` would start and keep trying).
//!
//! **Connections** (`crate::pbconn`). Worker *N* of a PB driver keeps one
//! connection to address `N mod len`. `nhs`: after an I/O or protocol
//! error the connection is dropped and the next operation reconnects (the
//! failed op counts as an error). `riakc_pb`: `pb_connect_options` as
//! riakc_pb_socket and basho_bench's driver give them meaning — by default
//! (`auto_reconnect`) an op cut by a disconnect is run again once riakc's
//! back-off (100 ms doubling to 30 s) has reconnected, and counts once;
//! without it the next op fails `crash` and the worker reconnects, or the
//! run stops (details in `pbconn`). `SO_KEEPALIVE` with `{keepalive,
//! true}`. The HTTP driver keeps a keep-alive client per worker and walks
//! the address list request by request, starting at `N mod len`.
//!
//! **Security** (`riakc_pb` only, Basalt's `basalt_pb_cacertfile`,
//! `basalt_pb_user`, `basalt_pb_password`, or riakc's `{cacertfile, Path}`
//! and `{credentials, User, Password}` in `pb_connect_options`): every
//! connection (the start check and each reconnect) sends `RpbStartTls`,
//! verifies the node's certificate against that CA for the target's host
//! (riakc checks the chain only), then `RpbAuthReq` when a user is set.
//!
//! **`riakc_pb` operations** (bucket `riakc_pb_bucket`; timeouts
//! `pb_timeout_read` for gets, `pb_timeout_write` for puts and deletes,
//! `pb_timeout_listkeys` for `listkeys`, `pb_timeout_general` for 2i
//! queries, as upstream; all but `update_with2i`, `query_postcode` and
//! `query_dob` are run again after a disconnect, as upstream):
//! - `get` (r): not found is a success; `get_existing`: not found is an
//!   error `not_found`.
//! - `put` (w, dw): a new object, no vclock, `riakc_pb_content_type`.
//! - `update`: `get` (r), then put the new value with the fetched vclock
//!   and the first sibling's metadata (index terms, user metadata); not
//!   found: a plain put. `update_existing`: not found is an error.
//! - `update_with2i`: get (not found: a new object), replace the index
//!   terms with generated ones, put. Terms as upstream: 1-3
//!   `postcode_bin` terms `<District>|<name>` (District = one of 76 UK
//!   postcode areas + 1..26; name = base64 of 4 random bytes, shared by
//!   the object's terms), one `dateofbirth_bin` term `YYYY-MM-DD|<b64>`
//!   (a date in 1933..2012) and one `lastmodified_bin` term (UTC
//!   `YYYY-MM-DDTHH:MM:SS`).
//! - `delete` (rw): not found is a success.
//! - `query_postcode`: range `<District>|a` .. `<District>|b` on
//!   `postcode_bin`; `query_dob`: range `<date>` .. `<date + 0-3 days>|`
//!   on `dateofbirth_bin`; both with return_terms (and
//!   `basalt_2i_max_results` when set).
//! - `listkeys`: `RpbListKeysReq` on the bucket (with `timeout` =
//!   `pb_timeout_listkeys`, as riakc sends it), done when the streamed
//!   reply ends; the whole listing must end within `pb_timeout_listkeys`
//!   (riakc restarts its timer at each reply frame and relies on the
//!   node's own bound for the whole), else `timeout` and the connection is
//!   dropped (a disconnect, as riakc).
//! - `ping` (Basalt's own): `RpbPingReq` with `pb_timeout_general`; no
//!   key or value is used. The PB round trip without any store work, for
//!   the machine's floor (`scripts/cluster-floor.sh`).
//!
//! **`nhs` operations** (buckets `record_bucket`, `document_bucket`).
//! Each worker owns key ids: key *C* is `%012d(C) %012d(KeyId)` (with
//! `skew_order`, a 27-bit hash of *C* replaces *C*), KeyId a hash of the
//! worker id and `node_name`.
//! - `alwaysget_updatewithout2i`: with probability `P(uniform(MaxKeys) >
//!   count)` put a new record key `count + 1` (count grows), else get one
//!   of the worker's record keys chosen 80:20 (`eightytwenty_keycount`)
//!   and put the new value with its vclock and metadata; not found is an
//!   error. `alwaysget_updatewith2i`: the same, with new index terms
//!   (`postcode_indexcount` postcodes at most, dates `YYYYMMDD|<b64>`).
//! - `alwaysget_pb`: silent (not counted, like basho_bench's `silent`)
//!   until the worker has more than `MinKeys` record keys, then get one
//!   chosen 80:20; not found is an error.
//! - `put_unique`: put the next unique key into the document bucket, the
//!   value a random slice of `Size` bytes of a shared base64 blob, one
//!   `lastmodified_bin` term. `get_unique`: get a random unique key put so
//!   far; not found is an error unless the key is at the edges of the range
//!   (as upstream).
//! - `get_pb` and `update_with2i`: the `riakc_pb` ops on the record bucket
//!   with keys from `key_generator`.
//! - `put_unique_checkrepl`: `put_unique` (same object, same key sequence:
//!   the two ops share the worker's unique-key counter) to the active
//!   cluster (`pb_ips`), then GET of that key on the passive cluster
//!   (`replpb_ips`, worker *N* keeps a second connection to entry
//!   `N mod len`) again and again until it is found. Its latency is PUT +
//!   replication + the last GET, so its mean against `put_unique`'s is the
//!   replication delay (the report computes it). As upstream, polls follow
//!   each other without a pause while the passive cluster answers "not
//!   found" (so the resolution is one GET round trip) and any GET error is
//!   retried too, here after [`REPL_ERROR_PAUSE`] so that a refused
//!   connection is not retried in a tight loop. Unlike upstream, which
//!   polls forever, polling stops `basalt_checkrepl_timeout` (default 10 s)
//!   after the PUT was acknowledged: the op then fails with
//!   `replication_timeout` (`replication_timeout (last get: <reason>)` when
//!   the last poll failed rather than found nothing) and the worker goes
//!   on. A GET on the passive connection times out after
//!   `min(pb_timeout_general, basalt_checkrepl_timeout)`, so a passive node
//!   that stops answering ends the op within twice the bound. When the run
//!   ends (duration or stop) during the polling, the op is dropped
//!   uncounted, like basho_bench's op in flight at the end. A failed PUT
//!   is an error as for `put_unique`; after a successful PUT the counter
//!   advances whatever the polling gives.
//!
//! **`http_raw` operations**: `crate::httpdriver`.
//!
//! Randomness (index terms, NHS choices, blobs) comes from a generator
//! seeded by `rng_seed` and the worker id, so runs repeat.

use crate::config::{BenchConfig, OpKind};
use crate::driver::{Driver, DriverError, Outcome};
use crate::httpdriver::HttpDriver;
use crate::netcfg::{KeyOrder, NetOptions, NhsOptions, PbConnect, PbOptions};
use crate::pbconn::{connect_checked, Conn, Fail, Restarts, RiakcConn};
use crate::riakpb::RiakKv;
use base64::Engine;
use rand::rngs::StdRng;
use rand::{Rng, RngCore, SeedableRng};
use riak_pb as pb;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

pub use crate::pbconn::CONNECT_TIMEOUT;

/// `put_unique_checkrepl`: pause after a poll that failed (connection
/// refused, timeout, Riak error) before the next one. A "not found" answer
/// is polled again at once, as upstream.
pub const REPL_ERROR_PAUSE: Duration = Duration::from_millis(1);

/// The `errors.csv` reason of a `put_unique_checkrepl` whose key did not
/// reach the passive cluster within `basalt_checkrepl_timeout`.
pub const REPLICATION_TIMEOUT: &str = "replication_timeout";

/// How the start-up check and the worker connections name the passive
/// cluster.
const PASSIVE: &str = "Riak PB of the passive cluster (replpb_ips)";

/// Largest raw size of the NHS driver's shared blob (upstream: 1000 ×
/// the `unique` size, which would be 8 MB for the seeds' 8000).
pub const MAX_BLOB: usize = 48 * 1024 * 1024;

const POSTCODE_AREAS: [&str; 76] = [
    "AB", "AL", "B", "BA", "BB", "BD", "BH", "BL", "BN", "BR", "BS", "BT", "CA", "CB", "CF", "CH",
    "CM", "CO", "CR", "CT", "CV", "CW", "DA", "DD", "DE", "DG", "DH", "DL", "DN", "DT", "DU", "E",
    "EC", "EH", "EN", "EX", "FK", "FY", "G", "GL", "GU", "HA", "HD", "HG", "HP", "HR", "HS", "HU",
    "HX", "IG", "IP", "IV", "KA", "KT", "KW", "KY", "L", "LA", "LD", "LE", "LL", "LS", "LU", "M",
    "ME", "MK", "ML", "N", "NE", "NG", "MM", "NP", "NR", "NW", "OL", "OX",
];

/// The 2i field of postcode terms.
pub const POSTCODE_FIELD: &[u8] = b"postcode_bin";
/// The 2i field of date-of-birth terms.
pub const DOB_FIELD: &[u8] = b"dateofbirth_bin";
/// The 2i field of last-modified terms.
pub const LASTMOD_FIELD: &[u8] = b"lastmodified_bin";

/// Connects to and pings every address of `net` (see the module doc).
pub fn check_reachable(net: &NetOptions) -> Result<(), String> {
    match net {
        NetOptions::HttpRaw(o) => {
            let client = reqwest::blocking::Client::builder()
                .timeout(CONNECT_TIMEOUT)
                .connect_timeout(CONNECT_TIMEOUT)
                .build()
                .map_err(|e| format!("cannot start an HTTP client: {e}"))?;
            for t in &o.targets {
                // A plain TCP connect first, for the same message as PB.
                connect_checked(t, "Riak HTTP", &PbConnect::default(), None, CONNECT_TIMEOUT)?;
                let url = format!("http://{t}/ping");
                match client.get(&url).send() {
                    Ok(r) if r.status().is_success() => {}
                    Ok(r) => {
                        return Err(format!(
                            "Riak HTTP at {t} answered GET /ping with {}",
                            r.status()
                        ))
                    }
                    Err(e) => return Err(format!("Riak HTTP at {t}: GET /ping failed: {e}")),
                }
            }
        }
        NetOptions::RiakcPb(_) | NetOptions::Nhs(_) => {
            let (sec, connect) = match net {
                NetOptions::RiakcPb(o) => (o.security.as_ref(), o.connect),
                _ => (None, PbConnect::default()),
            };
            let active = net.targets().iter().map(|t| (t, "Riak PB", sec));
            let passive = net.repl_targets().iter().map(|t| (t, PASSIVE, None));
            for (t, what, sec) in active.chain(passive) {
                let (_, mut c) = connect_checked(t, what, &connect, sec, CONNECT_TIMEOUT)?;
                c.ping()
                    .map_err(|e| format!("{what} at {t} did not answer a ping: {e}"))?;
            }
        }
    }
    Ok(())
}

/// What the workers of one run share.
pub struct NetShared {
    net: NetOptions,
    blob: Arc<Vec<u8>>,
    stop: Arc<AtomicBool>,
    /// Worker restarts (`riakc_pb` without `auto_reconnect`).
    restarts: Arc<Restarts>,
}

impl NetShared {
    /// Prepares the drivers of `cfg` (the NHS blob is made here, once).
    /// `stop` is the run's stop flag: an operation that waits (the
    /// replication check) gives up when it is set.
    pub fn new(cfg: &BenchConfig, net: NetOptions, stop: Arc<AtomicBool>) -> NetShared {
        let unique = |s: &crate::config::OpSpec| {
            matches!(s.op, OpKind::PutUnique | OpKind::PutUniqueCheckRepl)
        };
        let blob = match &net {
            NetOptions::Nhs(o) if cfg.operations.iter().any(unique) => {
                let raw_len = o.unique_size.saturating_mul(1000).min(MAX_BLOB);
                let mut raw = vec![0u8; raw_len];
                StdRng::seed_from_u64(cfg.rng_seed.for_worker(0) ^ 0xb10b).fill_bytes(&mut raw);
                base64::engine::general_purpose::STANDARD
                    .encode(&raw)
                    .into_bytes()
            }
            _ => Vec::new(),
        };
        NetShared {
            net,
            blob: Arc::new(blob),
            stop,
            restarts: Arc::default(),
        }
    }

    /// The driver of worker `id` (1-based); PB drivers connect here.
    pub fn driver(&self, cfg: &BenchConfig, id: usize) -> Result<Box<dyn Driver>, String> {
        let seed = cfg.rng_seed.for_worker(id) ^ 0x6e68_7321;
        Ok(match &self.net {
            NetOptions::RiakcPb(o) => {
                let conn = Conn::open(
                    &o.targets,
                    id,
                    o.timeout_general,
                    "Riak PB",
                    &o.connect,
                    o.security.clone(),
                )?;
                Box::new(RiakcPbDriver {
                    conn: RiakcConn::new(
                        conn,
                        o.connect,
                        id,
                        self.stop.clone(),
                        self.restarts.clone(),
                    ),
                    o: o.clone(),
                    rng: StdRng::seed_from_u64(seed),
                })
            }
            NetOptions::Nhs(o) => Box::new(NhsDriver::new(
                o,
                id,
                seed,
                self.blob.clone(),
                self.stop.clone(),
            )?),
            NetOptions::HttpRaw(o) => Box::new(HttpDriver::new(o, id)?),
        })
    }
}

fn b64_name<R: Rng>(rng: &mut R) -> String {
    let mut b = [0u8; 4];
    rng.fill_bytes(&mut b);
    base64::engine::general_purpose::STANDARD.encode(b)
}

fn district<R: Rng>(rng: &mut R) -> String {
    let area = POSTCODE_AREAS[rng.gen_range(0..POSTCODE_AREAS.len())];
    format!("{area}{}", rng.gen_range(1..=26))
}

/// The date of `delta` seconds after gregorian second 61,000,000,000
/// (1933-01-05), as upstream's `pick_dateofbirth`: `YYYY-MM-DD` with
/// `dashes`, else `YYYYMMDD`.
pub fn pick_dateofbirth(delta: i64, dashes: bool) -> String {
    // Gregorian seconds of 1970-01-01.
    const UNIX_EPOCH_GREGORIAN: i64 = 62_167_219_200;
    let unix = delta + 61_000_000_000 - UNIX_EPOCH_GREGORIAN;
    let d =
        time::OffsetDateTime::from_unix_timestamp(unix).unwrap_or(time::OffsetDateTime::UNIX_EPOCH);
    let (y, m, day) = (d.year(), u8::from(d.month()), d.day());
    if dashes {
        format!("{y}-{m:02}-{day:02}")
    } else {
        format!("{y}{m:02}{day:02}")
    }
}

fn lastmodified_term() -> Vec<u8> {
    let n = time::OffsetDateTime::now_utc();
    format!(
        "{:04}-{:02}-{:02}T{:02}:{:02}:{:02}",
        n.year(),
        u8::from(n.month()),
        n.day(),
        n.hour(),
        n.minute(),
        n.second()
    )
    .into_bytes()
}

fn pair(field: &[u8], term: Vec<u8>) -> pb::RpbPair {
    pb::RpbPair {
        key: field.to_vec(),
        value: Some(term),
    }
}

/// Upstream's `generate_binary_indexes(PostcodeCount)`: 1..=`postcodes`
/// postcode terms, one date of birth, one last-modified term.
pub fn generate_indexes<R: Rng>(rng: &mut R, postcodes: u32, dashes: bool) -> Vec<pb::RpbPair> {
    let name = b64_name(rng);
    let n = rng.gen_range(1..=postcodes.max(1));
    let mut out: Vec<pb::RpbPair> = (0..n)
        .map(|_| {
            pair(
                POSTCODE_FIELD,
                format!("{}|{name}", district(rng)).into_bytes(),
            )
        })
        .collect();
    let dob = pick_dateofbirth(rng.gen_range(1..=2_500_000_000), dashes);
    out.push(pair(
        DOB_FIELD,
        format!("{dob}|{}", b64_name(rng)).into_bytes(),
    ));
    out.push(pair(LASTMOD_FIELD, lastmodified_term()));
    out
}

/// The put of `value` under `key`: a new object, or `fetched` (its vclock
/// and first sibling's metadata) updated. `content_type` overrides the
/// fetched one; `indexes` replace the fetched terms.
fn put_req(
    bucket: &[u8],
    key: &[u8],
    fetched: Option<pb::RpbGetResp>,
    value: &[u8],
    content_type: Option<&str>,
    indexes: Option<Vec<pb::RpbPair>>,
) -> pb::RpbPutReq {
    let (vclock, mut content) = match fetched {
        Some(mut r) => {
            let first = if r.content.is_empty() {
                pb::RpbContent::default()
            } else {
                r.content.swap_remove(0)
            };
            (r.vclock, first)
        }
        None => (None, pb::RpbContent::default()),
    };
    content.value = value.to_vec();
    content.vtag = None;
    content.last_mod = None;
    content.last_mod_usecs = None;
    content.deleted = None;
    if let Some(ct) = content_type {
        content.content_type = Some(ct.as_bytes().to_vec());
    } else if content.content_type.is_none() {
        content.content_type = Some(b"application/octet-stream".to_vec());
    }
    if let Some(ix) = indexes {
        content.indexes = ix;
    }
    pb::RpbPutReq {
        bucket: bucket.to_vec(),
        key: Some(key.to_vec()),
        vclock,
        content,
        ..Default::default()
    }
}

fn get_req(bucket: &[u8], key: &[u8], r: Option<u32>) -> pb::RpbGetReq {
    pb::RpbGetReq {
        bucket: bucket.to_vec(),
        key: key.to_vec(),
        r,
        ..Default::default()
    }
}

/// `basho_bench_driver_riakc_pb` of one worker.
pub struct RiakcPbDriver {
    conn: RiakcConn,
    o: PbOptions,
    rng: StdRng,
}

fn fail(reason: &str) -> Fail {
    Fail::Error(DriverError::new(reason))
}

impl RiakcPbDriver {
    fn get(&mut self, key: &[u8]) -> Result<Option<pb::RpbGetResp>, Fail> {
        let req = get_req(&self.o.bucket, key, Some(self.o.r));
        self.conn.call(self.o.timeout_read, |c| c.get(&req))
    }

    fn put(&mut self, mut req: pb::RpbPutReq, quorum: bool) -> Result<Outcome, Fail> {
        if quorum {
            req.w = Some(self.o.w);
            req.dw = Some(self.o.dw);
        }
        let t = self.o.timeout_write;
        self.conn.call(t, |c| c.put(&req)).map(|_| Outcome::Done)
    }

    fn query(&mut self, field: &[u8], min: Vec<u8>, max: Vec<u8>) -> Result<Outcome, Fail> {
        let req = pb::RpbIndexReq {
            bucket: self.o.bucket.clone(),
            index: field.to_vec(),
            qtype: pb::INDEX_RANGE,
            range_min: Some(min),
            range_max: Some(max),
            return_terms: Some(true),
            max_results: self.o.max_results,
            ..Default::default()
        };
        let t = self.o.timeout_general;
        self.conn.call(t, |c| c.index(&req)).map(|_| Outcome::Done)
    }

    /// One try of `op` (the driver runs it again after a disconnect).
    fn run_once(&mut self, op: OpKind, key: &[u8], value: &[u8]) -> Result<Outcome, Fail> {
        let ct = self.o.content_type.clone();
        match op {
            OpKind::Get => self.get(key).map(|_| Outcome::Done),
            OpKind::GetExisting => match self.get(key)? {
                Some(_) => Ok(Outcome::Done),
                None => Err(fail("not_found")),
            },
            OpKind::Put => {
                let req = put_req(&self.o.bucket, key, None, value, Some(&ct), None);
                self.put(req, true)
            }
            OpKind::Update | OpKind::UpdateExisting => {
                let fetched = self.get(key)?;
                if fetched.is_none() && op == OpKind::UpdateExisting {
                    return Err(fail("not_found"));
                }
                let req = put_req(&self.o.bucket, key, fetched, value, Some(&ct), None);
                self.put(req, true)
            }
            OpKind::UpdateWith2i => {
                // Upstream passes no r / w here.
                let req = get_req(&self.o.bucket, key, None);
                let fetched = self.conn.call(self.o.timeout_read, |c| c.get(&req))?;
                let ix = generate_indexes(&mut self.rng, 3, true);
                let req = put_req(&self.o.bucket, key, fetched, value, None, Some(ix));
                self.put(req, false)
            }
            OpKind::Delete => {
                let req = pb::RpbDelReq {
                    bucket: self.o.bucket.clone(),
                    key: key.to_vec(),
                    rw: Some(self.o.rw),
                    ..Default::default()
                };
                let t = self.o.timeout_write;
                self.conn.call(t, |c| c.delete(&req)).map(|_| Outcome::Done)
            }
            OpKind::ListKeys => {
                let req = pb::RpbListKeysReq {
                    bucket: self.o.bucket.clone(),
                    // The node's own bound, as riakc sends it.
                    timeout: Some(self.o.timeout_listkeys.as_millis().min(u32::MAX as u128) as u32),
                    ..Default::default()
                };
                let t = self.o.timeout_listkeys;
                self.conn
                    .call_stream(t, |c| c.list_keys(&req, t))
                    .map(|_| Outcome::Done)
            }
            OpKind::Ping => {
                let t = self.o.timeout_general;
                self.conn.call(t, |c| c.ping()).map(|_| Outcome::Done)
            }
            OpKind::QueryPostcode => {
                let d = district(&mut self.rng);
                self.query(
                    POSTCODE_FIELD,
                    format!("{d}|a").into_bytes(),
                    format!("{d}|b").into_bytes(),
                )
            }
            OpKind::QueryDob => {
                let r: i64 = self.rng.gen_range(1..=2_500_000_000);
                let start = pick_dateofbirth(r, true);
                let end = pick_dateofbirth(r + self.rng.gen_range(1..=86_400 * 3), true);
                self.query(
                    DOB_FIELD,
                    start.into_bytes(),
                    format!("{end}|").into_bytes(),
                )
            }
            _ => Err(fail("unsupported_op")),
        }
    }
}

impl Driver for RiakcPbDriver {
    fn run(&mut self, op: OpKind, key: &[u8], value: &[u8]) -> Result<Outcome, DriverError> {
        // Upstream's driver runs these again on `{error, disconnected}`.
        let retried = matches!(
            op,
            OpKind::Get
                | OpKind::GetExisting
                | OpKind::Put
                | OpKind::Update
                | OpKind::UpdateExisting
                | OpKind::Delete
                | OpKind::ListKeys
                | OpKind::Ping
        );
        loop {
            match self.run_once(op, key, value) {
                Ok(o) => return Ok(o),
                Err(Fail::Error(e)) => return Err(e),
                Err(Fail::Stopped) => return Ok(Outcome::Silent),
                Err(Fail::Disconnected) if retried => {
                    if !self.conn.wait_for_reconnect() {
                        return Ok(Outcome::Silent);
                    }
                }
                Err(Fail::Disconnected) => return Err(DriverError::new("disconnected")),
            }
        }
    }
}

/// Upstream's `eightytwenty_keycount`: 80% of picks in the lowest 20% of
/// `1..=count`.
pub fn eightytwenty_keycount<R: Rng>(rng: &mut R, count: u64) -> u64 {
    fn uniform<R: Rng>(rng: &mut R, n: u64) -> u64 {
        rng.gen_range(1..=n.max(1))
    }
    let twenty = uniform(rng, count / 5);
    if uniform(rng, count) < twenty {
        uniform(rng, count.saturating_sub(twenty)) + twenty.max(1)
    } else {
        uniform(rng, twenty)
    }
}

/// The NHS driver's key number `c` of a worker with `keyid`.
pub fn unique_key(c: u64, keyid: u32, order: KeyOrder) -> Vec<u8> {
    let head = match order {
        KeyOrder::KeyOrder => c,
        KeyOrder::SkewOrder => xxhash_rust::xxh3::xxh3_64(&c.to_be_bytes()) % (1 << 27),
    };
    format!("{head:012}{keyid:012}").into_bytes()
}

/// `basho_bench_driver_nhs` of one worker.
pub struct NhsDriver {
    conn: Conn,
    /// The passive cluster (`replpb_ips`), when `put_unique_checkrepl` runs.
    repl: Option<Conn>,
    stop: Arc<AtomicBool>,
    o: NhsOptions,
    rng: StdRng,
    keyid: u32,
    alwaysget_count: u64,
    unique_count: u64,
    unique_low: u64,
    blob: Arc<Vec<u8>>,
}

impl NhsDriver {
    fn new(
        o: &NhsOptions,
        id: usize,
        seed: u64,
        blob: Arc<Vec<u8>>,
        stop: Arc<AtomicBool>,
    ) -> Result<NhsDriver, String> {
        let keyid = ((xxhash_rust::xxh3::xxh3_64(&(id as u64).to_be_bytes())
            ^ xxhash_rust::xxh3::xxh3_64(o.node_name.as_bytes()))
            % (1 << 27)) as u32;
        let repl = if o.repl_targets.is_empty() {
            None
        } else {
            let timeout = o.timeout.min(o.checkrepl_timeout);
            Some(Conn::open(
                &o.repl_targets,
                id,
                timeout,
                PASSIVE,
                &PbConnect::default(),
                None,
            )?)
        };
        Ok(NhsDriver {
            conn: Conn::open(
                &o.targets,
                id,
                o.timeout,
                "Riak PB",
                &PbConnect::default(),
                None,
            )?,
            repl,
            stop,
            o: o.clone(),
            rng: StdRng::seed_from_u64(seed),
            keyid,
            alwaysget_count: 0,
            unique_count: 1,
            unique_low: 1,
            blob,
        })
    }

    /// Record keys this worker has written so far.
    pub fn alwaysget_count(&self) -> u64 {
        self.alwaysget_count
    }

    fn get(&mut self, bucket: &[u8], key: &[u8]) -> Result<Option<pb::RpbGetResp>, DriverError> {
        let req = get_req(bucket, key, None);
        self.conn.call(|c| c.get(&req))
    }

    fn put(&mut self, req: pb::RpbPutReq) -> Result<(), DriverError> {
        self.conn.call(|c| c.put(&req)).map(|_| ())
    }

    /// `put_unique`: puts the next unique key; returns its bucket and key.
    fn put_unique(&mut self) -> Result<(Vec<u8>, Vec<u8>), DriverError> {
        let c = self.unique_count;
        let k = unique_key(c, self.keyid, self.o.unique_order);
        let size = self.o.unique_size.min(self.blob.len());
        let pre = self.rng.gen_range(0..=self.blob.len() - size);
        let v = &self.blob[pre..pre + size];
        let ix = vec![pair(LASTMOD_FIELD, lastmodified_term())];
        let b = self.o.document_bucket.clone();
        self.put(put_req(&b, &k, None, v, None, Some(ix)))?;
        self.unique_count = c + 1;
        Ok((b, k))
    }

    /// The replication check of `put_unique_checkrepl` (see the module
    /// doc): GETs `key` on the passive cluster until it is found, for at
    /// most `basalt_checkrepl_timeout` from now.
    fn check_repl(&mut self, bucket: &[u8], key: &[u8]) -> Result<Outcome, DriverError> {
        let bound = self.o.checkrepl_timeout;
        let started = Instant::now();
        let req = get_req(bucket, key, None);
        let Some(repl) = self.repl.as_mut() else {
            // The config refuses put_unique_checkrepl without replpb_ips.
            return Err(DriverError::new("no_replpb_ips"));
        };
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Ok(Outcome::Silent);
            }
            let last_error = match repl.call(|c| c.get(&req)) {
                Ok(Some(_)) => return Ok(Outcome::Done),
                Ok(None) => None,
                Err(e) => Some(e.reason),
            };
            if started.elapsed() >= bound {
                return Err(DriverError::new(match last_error {
                    None => REPLICATION_TIMEOUT.to_string(),
                    Some(r) => format!("{REPLICATION_TIMEOUT} (last get: {r})"),
                }));
            }
            if last_error.is_some() {
                std::thread::sleep(REPL_ERROR_PAUSE);
            }
        }
    }

    fn alwaysget_update(&mut self, value: &[u8], with2i: bool) -> Result<Outcome, DriverError> {
        let count = self.alwaysget_count;
        let order = self.o.alwaysget_order;
        let bucket = self.o.record_bucket.clone();
        let extend = self.rng.gen_range(1..=self.o.alwaysget_max) > count;
        let (key, fetched, new_count) = if extend {
            (unique_key(count + 1, self.keyid, order), None, count + 1)
        } else {
            let n = eightytwenty_keycount(&mut self.rng, count);
            let key = unique_key(n, self.keyid, order);
            match self.get(&bucket, &key)? {
                Some(r) => (key, Some(r), count),
                None => return Err(DriverError::new("not_found")),
            }
        };
        let ix = with2i.then(|| generate_indexes(&mut self.rng, self.o.postcode_indexcount, false));
        self.put(put_req(&bucket, &key, fetched, value, None, ix))?;
        self.alwaysget_count = new_count;
        Ok(Outcome::Done)
    }
}

impl Driver for NhsDriver {
    fn run(&mut self, op: OpKind, key: &[u8], value: &[u8]) -> Result<Outcome, DriverError> {
        match op {
            OpKind::GetPb => {
                let b = self.o.record_bucket.clone();
                self.get(&b, key).map(|_| Outcome::Done)
            }
            OpKind::UpdateWith2i => {
                let b = self.o.record_bucket.clone();
                let fetched = self.get(&b, key)?;
                let ix = generate_indexes(&mut self.rng, self.o.postcode_indexcount, false);
                self.put(put_req(&b, key, fetched, value, None, Some(ix)))?;
                Ok(Outcome::Done)
            }
            OpKind::AlwaysGetPb => {
                let count = self.alwaysget_count;
                if count <= self.o.alwaysget_min {
                    return Ok(Outcome::Silent);
                }
                let n = eightytwenty_keycount(&mut self.rng, count);
                let k = unique_key(n, self.keyid, self.o.alwaysget_order);
                let b = self.o.record_bucket.clone();
                match self.get(&b, &k)? {
                    Some(_) => Ok(Outcome::Done),
                    None => Err(DriverError::new("not_found")),
                }
            }
            OpKind::AlwaysGetUpdateWith2i => self.alwaysget_update(value, true),
            OpKind::AlwaysGetUpdateWithout2i => self.alwaysget_update(value, false),
            OpKind::PutUnique => self.put_unique().map(|_| Outcome::Done),
            OpKind::PutUniqueCheckRepl => {
                let (b, k) = self.put_unique()?;
                self.check_repl(&b, &k)
            }
            OpKind::GetUnique => {
                let (ukc, lkc) = (self.unique_count, self.unique_low);
                let n = lkc + self.rng.gen_range(1..=ukc.saturating_sub(lkc).max(1));
                let k = unique_key(n, self.keyid, self.o.unique_order);
                let b = self.o.document_bucket.clone();
                match self.get(&b, &k)? {
                    Some(_) => Ok(Outcome::Done),
                    None if n >= ukc || n <= lkc => Ok(Outcome::Done),
                    None => Err(DriverError::new("not_found")),
                }
            }
            _ => Err(DriverError::new("unsupported_op")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_match_erlang_calendar() {
        // calendar:gregorian_seconds_to_datetime(61000000000 + 1) = 1933-01-05.
        assert_eq!(pick_dateofbirth(1, true), "1933-01-05");
        assert_eq!(pick_dateofbirth(1, false), "19330105");
        // 1970-01-01 is gregorian second 62167219200.
        assert_eq!(pick_dateofbirth(1_167_219_200, true), "1970-01-01");
        assert_eq!(pick_dateofbirth(2_500_000_000, true), "2012-03-26");
    }

    #[test]
    fn indexes_have_upstream_shape() {
        let mut rng = StdRng::seed_from_u64(7);
        for _ in 0..50 {
            let ix = generate_indexes(&mut rng, 3, true);
            let pcs: Vec<_> = ix.iter().filter(|p| p.key == POSTCODE_FIELD).collect();
            assert!((1..=3).contains(&pcs.len()), "{}", pcs.len());
            for p in &pcs {
                let t = String::from_utf8(p.value.clone().unwrap_or_default()).expect("utf8");
                let (d, name) = t.split_once('|').expect("bar");
                assert!(
                    d.chars().next().is_some_and(|c| c.is_ascii_uppercase()),
                    "{t}"
                );
                assert_eq!(name.len(), 8, "{t}");
            }
            let dob = ix.iter().find(|p| p.key == DOB_FIELD).expect("dob");
            let t = String::from_utf8(dob.value.clone().unwrap_or_default()).expect("utf8");
            assert_eq!(t.as_bytes()[4], b'-', "{t}");
            assert!(ix.iter().any(|p| p.key == LASTMOD_FIELD));
        }
    }

    #[test]
    fn eightytwenty_stays_in_range_and_skews_low() {
        let mut rng = StdRng::seed_from_u64(1);
        let mut low = 0;
        for _ in 0..10_000 {
            let k = eightytwenty_keycount(&mut rng, 1000);
            assert!((1..=1000).contains(&k), "{k}");
            if k <= 200 {
                low += 1;
            }
        }
        assert!(low > 7000, "{low} of 10000 in the lowest 20%");
        assert_eq!(eightytwenty_keycount(&mut rng, 1), 1);
    }

    #[test]
    fn unique_keys_follow_the_order() {
        assert_eq!(
            unique_key(7, 42, KeyOrder::KeyOrder),
            b"000000000007000000000042"
        );
        let a = unique_key(1, 42, KeyOrder::SkewOrder);
        let b = unique_key(2, 42, KeyOrder::SkewOrder);
        assert_ne!(a, b);
        assert_eq!(a.len(), 24);
    }
}
