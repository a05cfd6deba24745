//! Process-level test of `basalt admin bucket-type`: runs `basalt start` on
//! free ports with a temporary data directory, then `basalt admin --node
//! CLUSTER_ADDR bucket-type create / activate / list / status / update` as separate
//! processes, checking their output (as `riak admin bucket-type` prints it)
//! and exit codes: 0 on success, 1 when the node refuses, 2 on bad JSON or
//! an unreachable node or a wrong kind of port (PB, HTTP: the error names
//! it). Stops the node with SIGTERM (`kill -TERM`).

mod common;

use common::free_addr;
use std::net::TcpStream;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

struct Node {
    child: Child,
    pb: String,
    http: String,
    cluster: String,
    _dir: tempfile::TempDir,
}

impl Node {
    fn start() -> Node {
        let dir = tempfile::tempdir().expect("tempdir");
        let (pb, http, cluster) = (free_addr(), free_addr(), free_addr());
        let child = Command::new(env!("CARGO_BIN_EXE_basalt"))
            .args(["start", "--pb-listen", &pb, "--ring-size", "8"])
            .args(["--backend", "memory", "--http-listen", &http])
            .args(["--cluster-listen", &cluster])
            .arg("--data-dir")
            .arg(dir.path())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let deadline = Instant::now() + Duration::from_secs(30);
        for addr in [&pb, &http, &cluster] {
            while TcpStream::connect(addr).is_err() {
                assert!(Instant::now() < deadline, "node did not start");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Node {
            child,
            pb,
            http,
            cluster,
            _dir: dir,
        }
    }

    fn admin(&self, args: &[&str]) -> (i32, String, String) {
        self.admin_at(&self.cluster, args)
    }

    fn admin_at(&self, addr: &str, args: &[&str]) -> (i32, String, String) {
        let out: Output = Command::new(env!("CARGO_BIN_EXE_basalt"))
            .args(["admin", "--node", addr, "bucket-type"])
            .args(args)
            .output()
            .expect("run admin");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn stop(mut self) {
        let rc = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status()
            .expect("kill");
        assert!(rc.success());
        let deadline = Instant::now() + Duration::from_secs(30);
        let status = loop {
            if let Some(st) = self.child.try_wait().expect("wait") {
                break st;
            }
            assert!(Instant::now() < deadline, "node did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(50));
        };
        assert!(status.success(), "exit status {status:?}");
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn admin_bucket_type_create_activate_list_status() {
    let node = Node::start();
    assert_eq!(
        node.admin(&["list"]),
        (0, "default (active)\n".into(), String::new())
    );

    let (rc, out, _) = node.admin(&[
        "create",
        "maps_t",
        r#"{"props":{"n_val":3,"allow_mult":true}}"#,
    ]);
    assert_eq!(rc, 0);
    assert_eq!(out, "maps_t has been created and may be activated\n");

    let (rc, out, _) = node.admin(&["status", "maps_t"]);
    assert_eq!(rc, 0);
    assert!(
        out.starts_with("maps_t has been created and may be activated\n\n"),
        "{out}"
    );
    assert!(
        out.contains("allow_mult: true\n") && out.contains("n_val: 3\n"),
        "{out}"
    );

    let (rc, out, _) = node.admin(&["list"]);
    assert_eq!(
        (rc, out.as_str()),
        (0, "default (active)\nmaps_t (not active)\n")
    );

    assert_eq!(
        node.admin(&["activate", "maps_t"]),
        (0, "maps_t has been activated\n".into(), String::new())
    );
    let (rc, out, _) = node.admin(&["status", "maps_t"]);
    assert_eq!(rc, 0);
    assert!(out.starts_with("maps_t is active\n\n"), "{out}");
    assert!(out.contains("w: quorum\n"), "{out}");
    let (rc, out, _) = node.admin(&["list"]);
    assert_eq!(
        (rc, out.as_str()),
        (0, "default (active)\nmaps_t (active)\n")
    );

    // update, then status shows it
    let (rc, out, _) = node.admin(&["update", "maps_t", r#"{"props":{"w":"one"}}"#]);
    assert_eq!((rc, out.as_str()), (0, "maps_t updated\n"));
    assert!(node.admin(&["status", "maps_t"]).1.contains("w: one\n"));

    // refused by the node: exit 1, message on stderr
    let (rc, out, err) = node.admin(&["status", "nope"]);
    assert_eq!((rc, out.as_str()), (1, ""));
    assert!(err.contains("nope is not an existing bucket type"), "{err}");
    let (rc, _, err) = node.admin(&["activate", "nope"]);
    assert_eq!(rc, 1);
    assert!(err.contains("nope is not an existing bucket type"), "{err}");
    let (rc, _, err) = node.admin(&["create", "maps_t", r#"{"props":{}}"#]);
    assert_eq!(rc, 1);
    assert!(err.contains("already_active"), "{err}");
    let (rc, _, err) = node.admin(&["update", "nope", r#"{"props":{"n_val":5}}"#]);
    assert_eq!(rc, 1);
    assert!(err.contains("No bucket-type named 'nope'"), "{err}");

    // bad JSON or props: exit 2, nothing sent
    let (rc, out, err) = node.admin(&["create", "bad", r#"{"props":{"n_val":3"#]);
    assert_eq!((rc, out.as_str()), (2, ""));
    assert!(
        err.contains("basalt: error: bad bucket type props: invalid JSON"),
        "{err}"
    );
    let (rc, _, err) = node.admin(&["create", "bad", r#"{"props":{"colour":"red"}}"#]);
    assert_eq!(rc, 2);
    assert!(
        err.contains("unsupported bucket property \"colour\""),
        "{err}"
    );
    let (rc, _, err) = node.admin(&["create", "bad", r#"{"n_val":3}"#]);
    assert_eq!(rc, 2);
    assert!(err.contains("expected {\"props\""), "{err}");
    assert!(!node.admin(&["list"]).1.contains("bad"));

    // The PB or HTTP port instead of the cluster port: exit 2, an error that
    // says what answered (never a framing error), nothing done.
    let (rc, out, err) = node.admin_at(&node.pb, &["create", "t2"]);
    assert_eq!((rc, out.as_str()), (2, ""));
    assert!(
        err.contains(&format!("{} is a Riak PB port; use the node's cluster address (cluster_listen, default port 8099)", node.pb)),
        "{err}"
    );
    let (rc, _, err) = node.admin_at(&node.http, &["list"]);
    assert_eq!(rc, 2);
    assert!(
        err.contains(&format!("{} answers HTTP", node.http)) && err.contains("cluster_listen"),
        "{err}"
    );
    assert!(!node.admin(&["list"]).1.contains("t2"));

    node.stop();
}

#[test]
fn admin_unreachable_node_exits_2() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .expect("bind")
        .local_addr()
        .expect("addr")
        .port();
    let out = Command::new(env!("CARGO_BIN_EXE_basalt"))
        .args(["admin", "--node", &format!("127.0.0.1:{port}")])
        .args(["bucket-type", "list"])
        .output()
        .expect("run");
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot reach node"));
}
