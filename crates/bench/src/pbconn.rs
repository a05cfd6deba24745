//! One worker's Riak PB connection, the part of the network drivers that
//! riakc_pb_socket plays upstream: connecting (connect timeout, STARTTLS
//! and `RpbAuthReq` when configured, `SO_KEEPALIVE` / `SO_LINGER` from
//! `pb_connect_options`), a timeout per request, and what happens after a
//! disconnect.
//!
//! **[`Conn`]** (the `nhs` driver's connections, and the socket under
//! [`RiakcConn`]): after an I/O or protocol error the connection is dropped
//! and the next request connects again at once; the failed op counts as an
//! error (`disconnected`, `timeout`, `protocol_error`, ...).
//!
//! **[`RiakcConn`]** (the `riakc_pb` driver): `pb_connect_options` with the
//! meaning riakc_pb_socket, basho_bench's riakc_pb driver and its worker
//! give them together. A request ends in one of three ways besides success:
//! an `RpbErrorResp` (`riak_error: ...`, the connection stays), a timeout
//! (`timeout`: riakc answers the caller, then drops the connection, which
//! counts as a disconnect), or a disconnect (the node closed or reset the
//! connection, or any other socket error; riakc answers
//! `{error, disconnected}`). On a disconnect the driver runs the op again
//! (all ops but `update_with2i`, `query_postcode` and `query_dob`, which
//! count `disconnected`, as upstream); then:
//!
//! - `auto_reconnect` true (the driver's default): reconnect as riakc
//!   does, [`FIRST_RECONNECT_INTERVAL`] after the disconnect, the interval
//!   doubling after each failed attempt up to [`MAX_RECONNECT_INTERVAL`],
//!   back to the first once connected. riakc learns of a node closing an
//!   idle connection at once; here the worker learns at its next request,
//!   so the schedule starts then. Meanwhile, without
//!   `queue_if_disconnected`, riakc answers every request `{error,
//!   disconnected}` at once and the driver retries it in a loop: the op
//!   waits for the reconnect with no bound (here sleeping until the next
//!   attempt rather than spinning) and counts once, its latency spanning
//!   the outage; the three ops that are not retried fail `disconnected` at
//!   once instead. With `queue_if_disconnected`, riakc queues the request
//!   with its timeout: the op waits for the reconnect at most its timeout
//!   (`pb_timeout_read` for gets, ...) and then fails `timeout`.
//! - `auto_reconnect` false (riakc's default once `pb_connect_options` is
//!   given): riakc's socket process stops at the disconnect. The driver's
//!   retry, or the worker's next request after a `timeout`, calls the
//!   stopped process, which crashes the worker: the op counts as error
//!   `crash` and basho_bench's supervisor restarts the worker, whose driver
//!   connects anew. Here the worker reconnects at once; if it cannot, the
//!   run stops (basho_bench's driver fails its start and stops the run),
//!   and so does a 6th restart within 10 s over all workers (the
//!   supervisor's limit, 5 in 10 s, after which it gives up). Unlike
//!   upstream's restarted worker, the key and value generators go on where
//!   they were.
//!
//! The run's end (duration, a stop) ends a wait for a reconnect: the op is
//! dropped uncounted, like basho_bench's op in flight at the end.

use crate::driver::DriverError;
use crate::netcfg::{PbConnect, PbSecurity, Target};
use crate::riakpb::{resolve, PbClient, PbError};
use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Timeout of the start-up ping (and of connects, unless
/// `pb_connect_options` sets `connect_timeout`).
pub const CONNECT_TIMEOUT: Duration = crate::netcfg::DEFAULT_CONNECT_TIMEOUT;

/// riakc's first reconnect interval (`FIRST_RECONNECT_INTERVAL`).
pub const FIRST_RECONNECT_INTERVAL: Duration = Duration::from_millis(100);

/// riakc's longest reconnect interval (`MAX_RECONNECT_INTERVAL`).
pub const MAX_RECONNECT_INTERVAL: Duration = Duration::from_secs(30);

/// basho_bench's supervisor restarts at most this many workers within
/// [`RESTART_PERIOD`]; one more and it gives up (the run stops).
pub const MAX_RESTARTS: usize = 5;

/// See [`MAX_RESTARTS`].
pub const RESTART_PERIOD: Duration = Duration::from_secs(10);

/// The longest sleep between two looks at the run's stop flag.
const STOP_POLL: Duration = Duration::from_millis(20);

fn io_phrase(e: &io::Error, timeout: Duration) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => "connection refused".into(),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => {
            format!("no answer within {} ms", timeout.as_millis())
        }
        _ => e.to_string(),
    }
}

/// Connects to `t` within `connect.connect_timeout` with `connect`'s socket
/// options (and STARTTLS / AuthReq with `sec`, each read waiting at most
/// `io_timeout`); the error is the message of a run that cannot start.
pub fn connect_checked(
    t: &Target,
    proto: &str,
    connect: &PbConnect,
    sec: Option<&Arc<PbSecurity>>,
    io_timeout: Duration,
) -> Result<(SocketAddr, PbClient), String> {
    let addr = resolve(&t.host, t.port).map_err(|e| {
        format!(
            "cannot reach {proto} at {t}: cannot resolve {}: {e}",
            t.host
        )
    })?;
    let timeout = connect.connect_timeout;
    let mut c = open_socket(addr, connect, io_timeout)
        .map_err(|e| format!("cannot reach {proto} at {t}: {}", io_phrase(&e, timeout)))?;
    if let Some(sec) = sec {
        secure(&mut c, &t.host, sec).map_err(|e| format!("{proto} at {t}: {e}"))?;
    }
    Ok((addr, c))
}

/// A TCP connection to `addr` with `connect`'s timeout and socket options.
fn open_socket(
    addr: SocketAddr,
    connect: &PbConnect,
    io_timeout: Duration,
) -> io::Result<PbClient> {
    let mut c = PbClient::connect(addr, connect.connect_timeout, io_timeout)?;
    let sock = socket2::SockRef::from(&*c.stream());
    if connect.keepalive {
        sock.set_keepalive(true)?;
    }
    if connect.linger.is_some() {
        sock.set_linger(connect.linger)?;
    }
    Ok(c)
}

/// STARTTLS (the node's certificate must name `host`), then AuthReq when
/// a user is configured.
fn secure(c: &mut PbClient, host: &str, sec: &PbSecurity) -> Result<(), PbError> {
    let name = rustls::pki_types::ServerName::try_from(host.to_string())
        .map_err(|e| PbError::from(io::Error::other(format!("server name {host:?}: {e}"))))?;
    c.starttls(sec.tls.clone(), name)?;
    if let Some((user, password)) = &sec.user {
        c.auth(user, password)?;
    }
    Ok(())
}

fn io_reason(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => "timeout".into(),
        io::ErrorKind::ConnectionRefused => "econnrefused".into(),
        io::ErrorKind::ConnectionReset
        | io::ErrorKind::ConnectionAborted
        | io::ErrorKind::BrokenPipe
        | io::ErrorKind::UnexpectedEof => "disconnected".into(),
        k => format!("{k:?}").to_lowercase(),
    }
}

/// The `errors.csv` reason of a failed request.
pub fn pb_reason(e: &PbError) -> DriverError {
    DriverError::new(match e {
        PbError::Riak { errmsg, .. } => {
            let m: String = errmsg.chars().take(80).collect();
            format!("riak_error: {m}")
        }
        PbError::Closed => "disconnected".into(),
        e => e
            .io_error()
            .map_or_else(|| "protocol_error".into(), io_reason),
    })
}

/// One worker's PB connection (see the module doc).
pub struct Conn {
    addr: SocketAddr,
    /// The target (its host is the TLS server name).
    target: Target,
    /// The default request timeout.
    timeout: Duration,
    /// The read / write timeout the socket has now, if known.
    socket_timeout: Option<Duration>,
    client: Option<PbClient>,
    connect: PbConnect,
    /// STARTTLS and AuthReq on every (re)connect.
    security: Option<Arc<PbSecurity>>,
}

impl Conn {
    /// Connects worker `id` to its entry of `targets` (`what` names them
    /// in errors); requests time out after `timeout` unless they say.
    pub fn open(
        targets: &[Target],
        id: usize,
        timeout: Duration,
        what: &str,
        connect: &PbConnect,
        security: Option<Arc<PbSecurity>>,
    ) -> Result<Conn, String> {
        let target = targets
            .get(id % targets.len().max(1))
            .cloned()
            .ok_or("no address configured")?;
        // The handshake (TLS, a password check) may take as long as a
        // request.
        let (addr, client) = connect_checked(&target, what, connect, security.as_ref(), timeout)?;
        Ok(Conn {
            addr,
            target,
            timeout,
            socket_timeout: Some(timeout),
            client: Some(client),
            connect: *connect,
            security,
        })
    }

    /// The address this connection goes to.
    pub fn target(&self) -> &Target {
        &self.target
    }

    /// True while a connection is open.
    pub fn is_connected(&self) -> bool {
        self.client.is_some()
    }

    /// Opens a new connection (after a disconnect).
    fn reconnect(&mut self) -> Result<(), PbError> {
        self.client = None;
        let mut c = open_socket(self.addr, &self.connect, self.timeout)?;
        if let Some(sec) = &self.security {
            secure(&mut c, &self.target.host, sec)?;
        }
        self.socket_timeout = Some(self.timeout);
        self.client = Some(c);
        Ok(())
    }

    /// Runs `f` on the open connection with `timeout`; a fatal error drops
    /// the connection. [`PbError::Closed`] when none is open.
    fn attempt<T>(
        &mut self,
        timeout: Duration,
        f: impl FnOnce(&mut PbClient) -> Result<T, PbError>,
    ) -> Result<T, PbError> {
        let mut client = self.client.take().ok_or(PbError::Closed)?;
        if self.socket_timeout != Some(timeout) {
            client.set_timeout(timeout)?;
            self.socket_timeout = Some(timeout);
        }
        match f(&mut client) {
            Ok(v) => {
                self.client = Some(client);
                Ok(v)
            }
            Err(e) => {
                if !e.is_fatal() {
                    self.client = Some(client);
                }
                Err(e)
            }
        }
    }

    /// The socket's timeouts were changed by a request (a streamed one
    /// bounds each read by what is left): set them again next time.
    fn forget_timeout(&mut self) {
        self.socket_timeout = None;
    }

    /// Runs `f` on the connection, connecting first if needed; a fatal
    /// error drops the connection (the `nhs` driver's behaviour).
    pub fn call<T>(
        &mut self,
        f: impl FnOnce(&mut PbClient) -> Result<T, PbError>,
    ) -> Result<T, DriverError> {
        if self.client.is_none() {
            self.reconnect().map_err(|e| pb_reason(&e))?;
        }
        self.attempt(self.timeout, f).map_err(|e| pb_reason(&e))
    }
}

/// How a [`RiakcConn`] request failed.
#[derive(Debug)]
pub enum Fail {
    /// riakc's `{error, disconnected}`: the driver may run the op again.
    Disconnected,
    /// The op's error.
    Error(DriverError),
    /// The run is ending: drop the op uncounted.
    Stopped,
}

impl From<DriverError> for Fail {
    fn from(e: DriverError) -> Fail {
        Fail::Error(e)
    }
}

/// The worker restarts of a run without `auto_reconnect` (basho_bench's
/// supervisor counts them to give up).
#[derive(Debug, Default)]
pub struct Restarts {
    at: parking_lot::Mutex<VecDeque<Instant>>,
}

impl Restarts {
    /// Counts a restart now; the message of a run that must stop when this
    /// one is over the supervisor's limit.
    fn record(&self) -> Result<(), String> {
        let now = Instant::now();
        let mut at = self.at.lock();
        while at
            .front()
            .is_some_and(|t| now.duration_since(*t) > RESTART_PERIOD)
        {
            at.pop_front();
        }
        at.push_back(now);
        if at.len() > MAX_RESTARTS {
            return Err(format!(
                "{} worker restarts within {} s after disconnects (pb_connect_options \
                 without auto_reconnect): basho_bench's supervisor allows {MAX_RESTARTS} and \
                 then stops the run",
                at.len(),
                RESTART_PERIOD.as_secs()
            ));
        }
        Ok(())
    }
}

/// The `riakc_pb` driver's connection: riakc_pb_socket with
/// `pb_connect_options` (see the module doc).
pub struct RiakcConn {
    conn: Conn,
    opts: PbConnect,
    /// The worker's id (for messages).
    id: usize,
    stop: Arc<AtomicBool>,
    /// While disconnected with `auto_reconnect`: when the next attempt is due.
    next_attempt: Option<Instant>,
    /// The wait before the attempt after the next failure.
    interval: Duration,
    /// Without `auto_reconnect`, after a disconnect: riakc's socket process
    /// has stopped, and the next request crashes the worker.
    socket_stopped: bool,
    restarts: Arc<Restarts>,
}

impl RiakcConn {
    /// `conn` with `opts`, for worker `id`; `stop` is the run's stop flag.
    pub fn new(
        conn: Conn,
        opts: PbConnect,
        id: usize,
        stop: Arc<AtomicBool>,
        restarts: Arc<Restarts>,
    ) -> RiakcConn {
        RiakcConn {
            conn,
            opts,
            id,
            stop,
            next_attempt: None,
            interval: FIRST_RECONNECT_INTERVAL,
            socket_stopped: false,
            restarts,
        }
    }

    /// Runs `f` with `timeout` (see the module doc for what a disconnect
    /// does).
    pub fn call<T>(
        &mut self,
        timeout: Duration,
        f: impl FnOnce(&mut PbClient) -> Result<T, PbError>,
    ) -> Result<T, Fail> {
        if self.socket_stopped {
            return Err(self.restart_worker());
        }
        if !self.conn.is_connected() {
            self.connect_for_request(timeout)?;
        }
        self.conn.attempt(timeout, f).map_err(|e| self.failed(&e))
    }

    /// A streamed request: as [`RiakcConn::call`], for an `f` that changes
    /// the socket's timeouts.
    pub fn call_stream<T>(
        &mut self,
        timeout: Duration,
        f: impl FnOnce(&mut PbClient) -> Result<T, PbError>,
    ) -> Result<T, Fail> {
        let r = self.call(timeout, f);
        self.conn.forget_timeout();
        r
    }

    /// Classifies a failed request; a disconnect schedules the reconnect
    /// (or stops riakc's socket, without `auto_reconnect`).
    fn failed(&mut self, e: &PbError) -> Fail {
        if !e.is_fatal() {
            return Fail::Error(pb_reason(e));
        }
        self.disconnected();
        let timeout = e.io_error().is_some_and(|e| {
            matches!(
                e.kind(),
                io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock
            )
        });
        let io = e.io_error().is_some() || matches!(e, PbError::Closed);
        if timeout || !io {
            // riakc answers `timeout` (or crashes on a bad reply), then
            // drops the connection.
            Fail::Error(pb_reason(e))
        } else {
            Fail::Disconnected
        }
    }

    /// The connection is gone: schedule riakc's next reconnect, or stop
    /// its socket.
    fn disconnected(&mut self) {
        if self.opts.auto_reconnect {
            self.next_attempt = Some(Instant::now() + self.interval);
            self.interval = (self.interval * 2).min(MAX_RECONNECT_INTERVAL);
        } else {
            self.socket_stopped = true;
        }
    }

    /// One reconnect attempt, now.
    fn attempt_reconnect(&mut self) -> bool {
        match self.conn.reconnect() {
            Ok(()) => {
                self.next_attempt = None;
                self.interval = FIRST_RECONNECT_INTERVAL;
                true
            }
            Err(_) => {
                self.disconnected();
                false
            }
        }
    }

    /// A request made while disconnected: connect when an attempt is due;
    /// else `disconnected` at once, or with `queue_if_disconnected` wait
    /// for the reconnect at most `timeout`.
    fn connect_for_request(&mut self, timeout: Duration) -> Result<(), Fail> {
        let deadline = Instant::now() + timeout;
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Err(Fail::Stopped);
            }
            let now = Instant::now();
            let due = self.next_attempt.unwrap_or(now);
            if now >= due {
                if self.attempt_reconnect() {
                    return Ok(());
                }
                continue;
            }
            if !self.opts.queue_if_disconnected {
                return Err(Fail::Disconnected);
            }
            if now >= deadline {
                return Err(Fail::Error(DriverError::new("timeout")));
            }
            std::thread::sleep(due.min(deadline).duration_since(now).min(STOP_POLL));
        }
    }

    /// After [`Fail::Disconnected`], before the driver runs the op again:
    /// waits until the next reconnect attempt is due (riakc answers
    /// `disconnected` until then, and the driver would spin); false when
    /// the run ends first. With `queue_if_disconnected` it returns at once:
    /// the request then waits in [`RiakcConn::call`], its timeout running
    /// from now, as in riakc's queue.
    pub fn wait_for_reconnect(&self) -> bool {
        if self.opts.queue_if_disconnected {
            return !self.stop.load(Ordering::Relaxed);
        }
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return false;
            }
            let now = Instant::now();
            match self.next_attempt {
                Some(due) if due > now && !self.socket_stopped => {
                    std::thread::sleep(due.duration_since(now).min(STOP_POLL));
                }
                _ => return true,
            }
        }
    }

    /// Without `auto_reconnect`: the request went to riakc's stopped
    /// socket, which crashes the worker (`crash`); the restarted worker
    /// connects anew, and the run stops when it cannot or when restarts
    /// are over the supervisor's limit.
    fn restart_worker(&mut self) -> Fail {
        self.socket_stopped = false;
        let mut e = DriverError::new("crash");
        if let Err(why) = self.restarts.record() {
            e.fatal = Some(why);
        } else if let Err(err) = self.conn.reconnect() {
            e.fatal = Some(format!(
                "worker {} restarted after a disconnect (pb_connect_options without \
                 auto_reconnect) and cannot connect to Riak PB at {}: {}; basho_bench \
                 stops the run when a restarted worker cannot connect",
                self.id,
                self.conn.target(),
                err
            ));
        }
        Fail::Error(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    /// A fake node that answers `n` pings on each connection it accepts,
    /// then closes it; it accepts `conns` connections.
    fn pinging_node(conns: usize, n: usize) -> (Target, std::thread::JoinHandle<()>) {
        let l = TcpListener::bind("127.0.0.1:0").expect("bind");
        let port = l.local_addr().expect("addr").port();
        let h = std::thread::spawn(move || {
            for _ in 0..conns {
                let Ok((mut s, _)) = l.accept() else { return };
                for _ in 0..n {
                    let mut req = [0u8; 5];
                    if s.read_exact(&mut req).is_err() {
                        break;
                    }
                    let _ = s.write_all(&[0, 0, 0, 1, riak_pb::code::PING_RESP]);
                }
            }
        });
        let t = Target {
            host: "127.0.0.1".into(),
            port,
        };
        (t, h)
    }

    fn riakc(t: &Target, opts: PbConnect, restarts: &Arc<Restarts>) -> RiakcConn {
        let conn = Conn::open(
            std::slice::from_ref(t),
            0,
            Duration::from_secs(5),
            "Riak PB",
            &opts,
            None,
        )
        .expect("open");
        let stop = Arc::new(AtomicBool::new(false));
        RiakcConn::new(conn, opts, 1, stop, restarts.clone())
    }

    /// `SO_KEEPALIVE` and `SO_LINGER` of the open connection.
    fn socket_options(c: &mut RiakcConn) -> (bool, Option<Duration>) {
        let client = c.conn.client.as_mut().expect("connected");
        let sock = socket2::SockRef::from(&*client.stream());
        (
            sock.keepalive().expect("SO_KEEPALIVE"),
            sock.linger().expect("SO_LINGER"),
        )
    }

    fn ping(c: &mut RiakcConn) -> Result<(), Fail> {
        c.call(Duration::from_secs(5), |c| c.ping())
    }

    #[test]
    fn auto_reconnect_retries_after_riakcs_interval() {
        let (t, node) = pinging_node(2, 1);
        let restarts = Arc::default();
        let mut c = riakc(&t, PbConnect::default(), &restarts);
        // riakc's defaults: no SO_KEEPALIVE, no SO_LINGER.
        assert_eq!(socket_options(&mut c), (false, None));
        ping(&mut c).expect("first ping");
        // The node closed the connection: disconnected, retried later.
        assert!(matches!(ping(&mut c), Err(Fail::Disconnected)));
        // Not due yet: riakc answers disconnected at once.
        assert!(matches!(ping(&mut c), Err(Fail::Disconnected)));
        let t0 = Instant::now();
        assert!(c.wait_for_reconnect());
        assert!(
            t0.elapsed() >= FIRST_RECONNECT_INTERVAL / 2,
            "{:?}",
            t0.elapsed()
        );
        ping(&mut c).expect("after the reconnect");
        assert_eq!(c.interval, FIRST_RECONNECT_INTERVAL);
        node.join().expect("node");
    }

    #[test]
    fn without_auto_reconnect_the_next_request_crashes_and_restarts() {
        let (t, node) = pinging_node(2, 1);
        let restarts = Arc::default();
        let opts = PbConnect {
            auto_reconnect: false,
            keepalive: true,
            linger: Some(Duration::ZERO),
            ..PbConnect::default()
        };
        let mut c = riakc(&t, opts, &restarts);
        assert_eq!(socket_options(&mut c), (true, Some(Duration::ZERO)));
        ping(&mut c).expect("first ping");
        assert!(matches!(ping(&mut c), Err(Fail::Disconnected)));
        match ping(&mut c) {
            Err(Fail::Error(e)) => assert!(e.reason == "crash" && e.fatal.is_none(), "{e:?}"),
            other => panic!("{other:?}"),
        }
        // The new connection has the options too.
        assert_eq!(socket_options(&mut c), (true, Some(Duration::ZERO)));
        ping(&mut c).expect("the restarted worker's connection");
        node.join().expect("node");
        // The node is gone: the next restart cannot connect, the run stops.
        assert!(matches!(ping(&mut c), Err(Fail::Disconnected)));
        match ping(&mut c) {
            Err(Fail::Error(e)) => {
                let why = e.fatal.expect("fatal");
                assert!(
                    why.contains("cannot connect") && why.contains("refused"),
                    "{why}"
                );
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn a_sixth_restart_within_the_period_stops_the_run() {
        let r = Restarts::default();
        for _ in 0..MAX_RESTARTS {
            r.record().expect("within the limit");
        }
        let why = r.record().expect_err("over");
        assert!(why.starts_with("6 worker restarts within 10 s"), "{why}");
    }

    #[test]
    fn queued_requests_wait_at_most_their_timeout() {
        let (t, node) = pinging_node(1, 1);
        let restarts = Arc::default();
        let opts = PbConnect {
            queue_if_disconnected: true,
            ..PbConnect::default()
        };
        let mut c = riakc(&t, opts, &restarts);
        ping(&mut c).expect("first ping");
        assert!(matches!(ping(&mut c), Err(Fail::Disconnected)));
        node.join().expect("node");
        // Nothing listens any more: the request waits its 300 ms, trying.
        let t0 = Instant::now();
        match c.call(Duration::from_millis(300), |c| c.ping()) {
            Err(Fail::Error(e)) => assert_eq!(e.reason, "timeout"),
            other => panic!("{other:?}"),
        }
        assert!(
            t0.elapsed() >= Duration::from_millis(300),
            "{:?}",
            t0.elapsed()
        );
        // The attempts backed off: 100 ms, then 200 ms.
        assert!(
            c.interval >= FIRST_RECONNECT_INTERVAL * 4,
            "{:?}",
            c.interval
        );
        // The run's end ends the wait.
        c.stop.store(true, Ordering::SeqCst);
        assert!(matches!(
            c.call(Duration::from_secs(60), |c| c.ping()),
            Err(Fail::Stopped)
        ));
    }
}
