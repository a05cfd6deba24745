//! Real node processes for the cluster and replication tests: a
//! [`NodeProc`] (`basalt start` on loopback ports, started, stopped,
//! killed), cluster formation, and a small blocking PB [`Client`].

pub use super::ports::free_port;
use super::{admin, wait_for};
use basalt_server::pb::{self, code};
use prost::Message;
use std::net::TcpStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A key's clock and sorted sibling values.
pub type KeyState = (Vec<u8>, Vec<Vec<u8>>);

/// A temporary directory for the nodes; kept (and printed) when
/// `BASALT_KEEP_TEST_DIRS` is set, to read the node logs after a failure.
pub fn test_dir() -> (PathBuf, Option<tempfile::TempDir>) {
    let d = tempfile::tempdir().expect("tempdir");
    if std::env::var_os("BASALT_KEEP_TEST_DIRS").is_some() {
        let p = d.keep();
        eprintln!("node data and logs in {}", p.display());
        (p, None)
    } else {
        (d.path().to_path_buf(), Some(d))
    }
}

pub struct NodeProc {
    pub name: String,
    pub pb: String,
    /// Its cluster address: admin commands and the other nodes use it.
    pub cluster: String,
    /// Its HTTP address, when it serves HTTP ([`NodeProc::with_http`]).
    pub http: Option<String>,
    pub dir: PathBuf,
    pub config: Option<PathBuf>,
    pub child: Option<Child>,
}

impl NodeProc {
    pub fn new(root: &std::path::Path, i: usize) -> NodeProc {
        NodeProc {
            name: format!("n{i}@127.0.0.1"),
            pb: format!("127.0.0.1:{}", free_port()),
            cluster: format!("127.0.0.1:{}", free_port()),
            http: None,
            dir: root.join(format!("n{i}")),
            config: None,
            child: None,
        }
    }

    /// The node also serves HTTP, on a port of its own.
    pub fn with_http(mut self) -> NodeProc {
        self.http = Some(format!("127.0.0.1:{}", free_port()));
        self
    }

    /// Every address the node listens on.
    fn listen_addrs(&self) -> Vec<&str> {
        let mut all = vec![self.pb.as_str(), self.cluster.as_str()];
        all.extend(self.http.as_deref());
        all
    }

    pub fn start(&mut self) {
        self.start_with_ring(16);
    }

    pub fn start_with_ring(&mut self, ring: u32) {
        if let Err(why) = self.try_start(ring) {
            panic!("{why}");
        }
    }

    /// Starts a node that no other node knows yet; if a port it was given
    /// was taken meanwhile (`free_port` only finds a port free at the
    /// time: an outgoing connection can take it before the node binds it),
    /// starts it again on new ports, at most 5 times.
    pub fn start_fresh(&mut self, ring: u32) {
        for _ in 0..5 {
            match self.try_start(ring) {
                Ok(()) => return,
                Err(why) if why.contains("Address already in use") => {
                    self.pb = format!("127.0.0.1:{}", free_port());
                    self.cluster = format!("127.0.0.1:{}", free_port());
                    if self.http.is_some() {
                        self.http = Some(format!("127.0.0.1:{}", free_port()));
                    }
                }
                Err(why) => panic!("{why}"),
            }
        }
        panic!("{} found no free ports in 5 tries", self.name);
    }

    /// Starts the process and waits until every port it listens on accepts
    /// (the node binds them one after another); on exit, the reason with
    /// the end of its log.
    fn try_start(&mut self, ring: u32) -> Result<(), String> {
        // Appended, so a node's log keeps its earlier lives (kill -9, restart).
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.with_extension("log"))
            .expect("log file");
        let child = Command::new(env!("CARGO_BIN_EXE_basalt"))
            .args([
                "start",
                "--ring-size",
                &ring.to_string(),
                "--backend",
                "leveled",
                "--http-listen",
                self.http.as_deref().unwrap_or(""),
            ])
            .args(["--node-name", &self.name, "--pb-listen", &self.pb])
            .args(["--cluster-listen", &self.cluster])
            .args(
                self.config
                    .iter()
                    .flat_map(|c| [std::ffi::OsStr::new("--config"), c.as_os_str()]),
            )
            .arg("--data-dir")
            .arg(&self.dir)
            .env("RUST_LOG", "info")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("spawn basalt start");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(60);
        while self
            .listen_addrs()
            .iter()
            .any(|a| TcpStream::connect(a).is_err())
        {
            self.exit_reason()?;
            assert!(Instant::now() < deadline, "{} did not start", self.name);
            std::thread::sleep(Duration::from_millis(50));
        }
        self.exit_reason()
    }

    /// Err with the end of its log if the process has exited.
    fn exit_reason(&mut self) -> Result<(), String> {
        let exited = self
            .child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten());
        match exited {
            Some(status) => {
                self.child = None;
                let log =
                    std::fs::read_to_string(self.dir.with_extension("log")).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(5).collect();
                Err(format!("{} exited ({status}): {:?}", self.name, tail))
            }
            None => Ok(()),
        }
    }

    /// Panics with the end of its log if the process has exited (or is a
    /// zombie waiting to be reaped), without needing `&mut`.
    pub fn check_alive(&self) {
        let Some(c) = &self.child else { return };
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", c.id())).unwrap_or_default();
        let state = stat.rsplit(") ").next().and_then(|r| r.chars().next());
        if matches!(state, None | Some('Z') | Some('X')) {
            let log = std::fs::read_to_string(self.dir.with_extension("log")).unwrap_or_default();
            let tail: Vec<&str> = log.lines().rev().take(5).collect();
            panic!("{} exited: {:?}", self.name, tail);
        }
    }

    /// Panics with the end of its log if the process has exited.
    pub fn assert_running(&mut self) {
        if let Err(why) = self.exit_reason() {
            panic!("{why}");
        }
    }

    pub fn signal(&self, sig: &str) {
        if let Some(c) = &self.child {
            let ok = Command::new("kill")
                .args([sig, &c.id().to_string()])
                .status()
                .is_ok_and(|s| s.success());
            assert!(ok, "kill {sig} {}", self.name);
        }
    }

    /// SIGTERM; true if the process exited 0 within 20 s.
    pub fn terminate(&mut self) -> bool {
        self.signal("-TERM");
        let Some(mut c) = self.child.take() else {
            return false;
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match c.try_wait() {
                Ok(Some(status)) => return status.success(),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(50))
                }
                _ => {
                    self.child = Some(c);
                    return false;
                }
            }
        }
    }

    pub fn kill9(&mut self) {
        self.signal("-KILL");
        if let Some(mut c) = self.child.take() {
            let _ = c.wait();
        }
    }
}

impl Drop for NodeProc {
    /// Never panics: a panic here while a test unwinds aborts the whole
    /// test binary (the process may be gone already).
    fn drop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let pid = c.id().to_string();
            let _ = Command::new("kill").args(["-CONT", &pid]).status();
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Starts `n` nodes (ring 16) under `root`.
pub fn start_nodes(root: &std::path::Path, n: usize) -> Vec<NodeProc> {
    let mut nodes: Vec<NodeProc> = (1..=n).map(|i| NodeProc::new(root, i)).collect();
    for node in &mut nodes {
        node.start_fresh(16);
    }
    nodes
}

/// Joins `nodes[1..]` to `nodes[0]`, commits and waits for the transfers.
pub fn form_cluster(nodes: &[NodeProc]) {
    for n in &nodes[1..] {
        let (ok, out) = admin(&n.cluster, &["cluster", "join", &nodes[0].cluster]);
        assert!(ok, "join: {out}");
    }
    let (ok, out) = admin(&nodes[0].cluster, &["cluster", "plan"]);
    assert!(ok && out.contains("Transfers after commit"), "plan: {out}");
    let (ok, out) = admin(&nodes[0].cluster, &["cluster", "commit"]);
    assert!(ok, "commit: {out}");
    settle(&nodes[0].cluster);
}

/// Creates bucket type `name` with `props` (`{"props":{...}}`) on
/// `nodes[0]`, activates it there and waits (≤ 30 s) until every other
/// node has it active by gossip.
pub fn create_active_type(nodes: &[NodeProc], name: &str, props: &str) {
    let (ok, out) = admin(&nodes[0].cluster, &["bucket-type", "create", name, props]);
    assert!(ok, "create {name}: {out}");
    let (ok, out) = admin(&nodes[0].cluster, &["bucket-type", "activate", name]);
    assert!(ok, "activate {name}: {out}");
    let active = format!("{name} is active");
    for n in &nodes[1..] {
        wait_for("the type on every node", Duration::from_secs(30), || {
            admin(&n.cluster, &["bucket-type", "status", name])
                .1
                .contains(&active)
        });
    }
}

/// Waits until the ring has no pending transfers.
pub fn settle(node: &str) {
    wait_for("transfers to finish", Duration::from_secs(60), || {
        admin(node, &["ring-status"])
            .1
            .contains("pending ownership transfers: 0")
    });
}

/// A blocking PB client (`riak_pb`'s); errors as text, an `RpbErrorResp`
/// as its `errmsg`.
pub struct Client {
    pub c: riak_pb::sync::Client,
}

impl Client {
    /// Connects, or says why not (a node that is down).
    pub fn try_connect(addr: &str) -> Result<Client, String> {
        let t = Duration::from_secs(10);
        riak_pb::sync::Client::connect(addr, t, t)
            .map(|c| Client { c })
            .map_err(|e| e.to_string())
    }

    pub fn connect(addr: &str) -> Client {
        let t = Duration::from_secs(70);
        let c = riak_pb::sync::Client::connect(addr, t, t).expect("connect");
        Client { c }
    }

    pub fn call<M: Message>(&mut self, c: u8, m: &M) -> Result<(u8, Vec<u8>), String> {
        self.c.call(c, m).map_err(|e| match e {
            riak_pb::Error::Riak { errmsg, .. } => errmsg,
            e => e.to_string(),
        })
    }

    pub fn put(&mut self, key: &str, value: &str) -> Result<(), String> {
        self.put_in("b", key, value)
    }

    pub fn put_in(&mut self, bucket: &str, key: &str, value: &str) -> Result<(), String> {
        let req = pb::RpbPutReq {
            bucket: bucket.as_bytes().to_vec(),
            key: Some(key.as_bytes().to_vec()),
            content: pb::RpbContent {
                value: value.as_bytes().to_vec(),
                ..Default::default()
            },
            w: Some(2),
            ..Default::default()
        };
        self.call(code::PUT_REQ, &req).map(|_| ())
    }

    pub fn delete(&mut self, key: &str) -> Result<(), String> {
        let req = pb::RpbDelReq {
            bucket: b"b".to_vec(),
            key: key.as_bytes().to_vec(),
            ..Default::default()
        };
        self.call(code::DEL_REQ, &req).map(|_| ())
    }

    pub fn get(
        &mut self,
        key: &str,
        r: u32,
        pr: u32,
        notfound_ok: bool,
    ) -> Result<Option<Vec<u8>>, String> {
        let req = pb::RpbGetReq {
            bucket: b"b".to_vec(),
            key: key.as_bytes().to_vec(),
            r: Some(r),
            pr: Some(pr),
            notfound_ok: Some(notfound_ok),
            ..Default::default()
        };
        let (_, body) = self.call(code::GET_REQ, &req)?;
        let resp = pb::RpbGetResp::decode(body.as_slice()).map_err(|e| e.to_string())?;
        Ok(resp.content.first().map(|c| c.value.clone()))
    }

    /// Every key of `bucket` (streamed list keys).
    pub fn list_keys(&mut self, bucket: &str) -> Result<Vec<Vec<u8>>, String> {
        let req = pb::RpbListKeysReq {
            bucket: bucket.as_bytes().to_vec(),
            ..Default::default()
        };
        self.c
            .send_msg(code::LIST_KEYS_REQ, &req)
            .map_err(|e| e.to_string())?;
        let mut keys = Vec::new();
        loop {
            let (_, body) = self.c.recv().map_err(|e| e.to_string())?;
            let r = pb::RpbListKeysResp::decode(body.as_slice()).map_err(|e| e.to_string())?;
            keys.extend(r.keys);
            if r.done == Some(true) {
                return Ok(keys);
            }
        }
    }

    /// (vclock, sibling values sorted) of `bucket`/`key` read with r = n,
    /// `None` when not found.
    pub fn get_state(&mut self, bucket: &str, key: &[u8]) -> Result<Option<KeyState>, String> {
        let req = pb::RpbGetReq {
            bucket: bucket.as_bytes().to_vec(),
            key: key.to_vec(),
            r: Some(3),
            ..Default::default()
        };
        let (_, body) = self.call(code::GET_REQ, &req)?;
        let resp = pb::RpbGetResp::decode(body.as_slice()).map_err(|e| e.to_string())?;
        if resp.content.is_empty() {
            return Ok(None);
        }
        let mut values: Vec<Vec<u8>> = resp.content.into_iter().map(|c| c.value).collect();
        values.sort();
        Ok(Some((resp.vclock.unwrap_or_default(), values)))
    }
}
