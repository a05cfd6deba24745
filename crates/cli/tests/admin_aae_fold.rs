//! Process-level test of `basalt admin aae fold`: runs `basalt start`
//! (memory backend, ring of 8) on free ports, writes a few objects over
//! HTTP, then runs fold queries as separate `basalt admin --node
//! CLUSTER_ADDR aae fold ...` processes: object stats, key clocks of a
//! range, erase-keys counting by default and deleting with `--apply`, the
//! "trees not built" refusal (exit 1; anti-entropy is off, so nothing
//! builds them) then the merged root once `aae verify` built them, a bad
//! range (exit 1, named) and an unknown fold type (exit 2, clap's usage
//! error).

mod common;

use common::free_addr;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

struct Node {
    child: Child,
    http: String,
    cluster: String,
    _dir: tempfile::TempDir,
}

impl Node {
    fn start() -> Node {
        let dir = tempfile::tempdir().expect("tempdir");
        // Anti-entropy off: no scheduler builds the trees, so the test
        // sees them missing until `aae verify` builds them.
        let config = dir.path().join("node.toml");
        std::fs::write(&config, "aae_interval_secs = 0\n").expect("config");
        let (pb, http, cluster) = (free_addr(), free_addr(), free_addr());
        let child = Command::new(env!("CARGO_BIN_EXE_basalt"))
            .args(["start", "--pb-listen", &pb, "--ring-size", "8"])
            .arg("--config")
            .arg(&config)
            .args(["--backend", "memory", "--http-listen", &http])
            .args(["--cluster-listen", &cluster])
            .arg("--data-dir")
            .arg(dir.path())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn");
        let deadline = Instant::now() + Duration::from_secs(60);
        for addr in [&pb, &http, &cluster] {
            while TcpStream::connect(addr).is_err() {
                assert!(Instant::now() < deadline, "node did not start");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        Node {
            child,
            http,
            cluster,
            _dir: dir,
        }
    }

    fn put(&self, key: &str, value: &str) {
        let mut s = TcpStream::connect(&self.http).expect("connect");
        let req = format!(
            "PUT /buckets/b/keys/{key} HTTP/1.1\r\nHost: x\r\nConnection: close\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\r\n{value}",
            value.len()
        );
        s.write_all(req.as_bytes()).expect("write");
        let mut out = String::new();
        let _ = s.read_to_string(&mut out);
        assert!(
            out.starts_with("HTTP/1.1 204") || out.starts_with("HTTP/1.1 200"),
            "{out}"
        );
    }

    fn fold(&self, args: &[&str]) -> (i32, String, String) {
        let mut all = vec!["aae", "fold"];
        all.extend_from_slice(args);
        self.admin(&all)
    }

    fn admin(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(env!("CARGO_BIN_EXE_basalt"))
            .args(["admin", "--node", &self.cluster])
            .args(args)
            .output()
            .expect("run admin");
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn admin_aae_fold_queries() {
    let node = Node::start();
    for (k, v) in [("a", "1"), ("b", "22"), ("c", "333"), ("d", "4444")] {
        node.put(k, v);
    }
    let (rc, out, err) = node.fold(&["object-stats", "--bucket", "b"]);
    assert_eq!(rc, 0, "{err}");
    assert!(out.contains("total_count\t4\n"), "{out}");
    assert!(out.contains("total_size\t10\n"), "{out}");
    assert!(out.contains("sizes 0\t4\n"), "{out}");

    let (rc, out, err) = node.fold(&[
        "fetch-clocks-range",
        "--bucket",
        "b",
        "--start-key",
        "b",
        "--end-key",
        "c",
    ]);
    assert_eq!(rc, 0, "{err}");
    let keys: Vec<&str> = out.lines().filter_map(|l| l.split('\t').nth(1)).collect();
    assert_eq!(keys, ["b", "c"], "{out}");

    // erase-keys counts unless --apply.
    let (rc, out, _) = node.fold(&[
        "erase-keys",
        "--bucket",
        "b",
        "--start-key",
        "a",
        "--end-key",
        "b",
    ]);
    assert_eq!((rc, out.as_str()), (0, "dispatched_count\t2\n"));
    let (_, out, _) = node.fold(&["object-stats", "--bucket", "b"]);
    assert!(out.contains("total_count\t4\n"), "{out}");
    let (rc, out, _) = node.fold(&[
        "erase-keys",
        "--bucket",
        "b",
        "--start-key",
        "a",
        "--end-key",
        "b",
        "--apply",
    ]);
    assert_eq!((rc, out.as_str()), (0, "dispatched_count\t2\n"));
    // The deletes' last replica writes may still be arriving (w = quorum).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !node
        .fold(&["object-stats", "--bucket", "b"])
        .1
        .contains("total_count\t2\n")
    {
        assert!(Instant::now() < deadline, "erase reached every replica");
        std::thread::sleep(Duration::from_millis(50));
    }
    let (_, out, _) = node.fold(&["find-tombs", "--bucket", "b"]);
    assert_eq!(out.lines().count(), 2, "{out}");

    let (rc, _, err) = node.fold(&["merge-root-nval", "--n-val", "3"]);
    assert_eq!(rc, 1);
    assert!(err.contains("trees not built"), "{err}");
    let (rc, out, err) = node.admin(&["aae", "verify"]);
    assert_eq!(rc, 0, "{out}{err}");
    let (rc, out, err) = node.fold(&["merge-root-nval", "--n-val", "3"]);
    assert_eq!(rc, 0, "{err}");
    assert!(out.starts_with("tree size xsmall\nbranch 0: "), "{out}");
    assert_eq!(out.lines().count(), 65, "{out}");

    let (rc, _, err) = node.fold(&[
        "find-tombs",
        "--bucket",
        "b",
        "--start-key",
        "z",
        "--end-key",
        "a",
    ]);
    assert_eq!(rc, 1);
    assert!(err.contains("bad key range"), "{err}");

    let (rc, _, err) = node.fold(&["merge-everything"]);
    assert_eq!(rc, 2);
    assert!(err.contains("unrecognized subcommand"), "{err}");
}
