//! Process-level tests of the readiness rule: a started node's ports are
//! taken at once (a second node on them fails before opening anything),
//! and `basalt admin wait-for-service` waits until the node answers, checks
//! its name when given one, refuses a service Basalt does not run and gives
//! up after `--timeout`.

mod common;

use common::procs::{test_dir, NodeProc};
use common::{admin, basalt, code, free_addr, stderr, stdout};
use riak_pb::sync::Client;
use std::process::{Command, Stdio};
use std::time::Duration;

#[test]
fn wait_for_service_waits_until_the_node_answers() {
    let (root, _keep) = test_dir();
    let mut n = NodeProc::new(&root, 1);
    std::fs::create_dir_all(&n.dir).unwrap();
    // Started without waiting: `wait-for-service` does the waiting.
    let child = Command::new(common::bin())
        .args([
            "start",
            "--pb-listen",
            &n.pb,
            "--cluster-listen",
            &n.cluster,
            "--http-listen",
            "",
            "--ring-size",
            "16",
            "--node-name",
            &n.name,
        ])
        .arg("--data-dir")
        .arg(&n.dir)
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    n.child = Some(child);
    let (ok, out) = admin(
        &n.cluster,
        &["wait-for-service", "riak_kv", &n.name, "--timeout", "60"],
    );
    assert!(ok, "{out}");
    assert!(out.trim_end().ends_with("riak_kv is up"), "{out}");
    // Once it says so, the client port answers.
    let t = Duration::from_secs(5);
    let mut c = Client::connect(&n.pb, t, t).expect("PB port listens once riak_kv is up");
    c.ping().expect("ping");

    let (ok, out) = admin(&n.cluster, &["services"]);
    assert!(ok, "{out}");
    assert_eq!(
        out.trim(),
        format!("{}: riak_api riak_kv riak_pipe", n.name)
    );

    // Another node's name: refused, not waited for.
    let (ok, out) = admin(
        &n.cluster,
        &["wait-for-service", "riak_kv", "other@127.0.0.1"],
    );
    assert!(!ok);
    assert!(
        out.contains(&format!("is {}, not other@127.0.0.1", n.name)),
        "{out}"
    );
    // A service Basalt does not run.
    let out = basalt(
        &[
            "admin",
            "--node",
            &n.cluster,
            "wait-for-service",
            "riak_search",
        ],
        b"",
    );
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(
        stderr(&out).contains("not a service of Basalt"),
        "{}",
        stderr(&out)
    );

    // A second node on the same ports fails at once, naming the port.
    let dir2 = root.join("second");
    let out = basalt(
        &[
            "start",
            "--pb-listen",
            &n.pb,
            "--cluster-listen",
            &free_addr(),
            "--http-listen",
            "",
            "--data-dir",
            dir2.to_str().unwrap(),
        ],
        b"",
    );
    assert_ne!(code(&out), 0);
    assert!(stderr(&out).contains(&n.pb), "{}", stderr(&out));
    assert!(stderr(&out).contains("in use"), "{}", stderr(&out));
    assert!(n.terminate(), "node exits cleanly");
}

#[test]
fn wait_for_service_gives_up_after_its_timeout() {
    // Nothing listens here.
    let addr = free_addr();
    let out = basalt(
        &[
            "admin",
            "--node",
            &addr,
            "wait-for-service",
            "--timeout",
            "1",
        ],
        b"",
    );
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    assert!(
        stdout(&out).starts_with("riak_kv is not up: cannot reach node"),
        "{}",
        stdout(&out)
    );
    assert!(
        stderr(&out).contains("gave up waiting for riak_kv"),
        "{}",
        stderr(&out)
    );
}
