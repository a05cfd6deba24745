//! Every `curl` example in the README runs against a live node (issue 7:
//! "a test that checks every curl example in the README").
//!
//! Method: extract the `curl` commands from the README's `sh` blocks
//! (joining `\` continuations), start `basalt start` on free ports, point the
//! commands at its HTTP address instead of 127.0.0.1:8098, run each with
//! `bash -c` under `set -o pipefail`, and check that each succeeds; for
//! `curl -i` the response status must be below 400 and match the status the
//! README's comment promises (e.g. `# 201`). Then the README's object must
//! read back. Skipped with a message only if `curl` is not installed.

#![allow(clippy::unwrap_used)]

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

#[path = "common/ports.rs"]
mod ports;
use ports::free_port;

/// The curl commands of the README's sh blocks, continuations joined.
fn readme_curls() -> Vec<String> {
    let readme =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../../README.md")).unwrap();
    let mut out = Vec::new();
    let mut in_sh = false;
    let mut pending = String::new();
    for line in readme.lines() {
        if line.starts_with("```") {
            in_sh = line.trim() == "```sh";
            continue;
        }
        if !in_sh {
            continue;
        }
        let joined = format!("{pending}{line}");
        if let Some(stripped) = joined.strip_suffix('\\') {
            pending = format!("{stripped} ");
            continue;
        }
        pending.clear();
        if joined.trim_start().starts_with("curl ") {
            out.push(joined.trim().to_string());
        }
    }
    out
}

#[test]
fn every_readme_curl_example_works_against_a_node() {
    if Command::new("curl").arg("--version").output().is_err() {
        eprintln!("curl is not installed: skipping the README curl examples");
        return;
    }
    let curls = readme_curls();
    assert!(
        curls.len() >= 4,
        "README curl examples not found: {curls:?}"
    );
    let dir = tempfile::tempdir().unwrap();
    let pb = format!("127.0.0.1:{}", free_port());
    let http = format!("127.0.0.1:{}", free_port());
    let cluster = format!("127.0.0.1:{}", free_port());
    let mut node = Node(
        Command::new(env!("CARGO_BIN_EXE_basalt"))
            .args([
                "start",
                "--pb-listen",
                &pb,
                "--http-listen",
                &http,
                "--cluster-listen",
                &cluster,
                "--ring-size",
                "8",
            ])
            .arg("--data-dir")
            .arg(dir.path())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(&http).is_err() {
        assert!(Instant::now() < deadline, "node did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    for cmd in &curls {
        let (command, comment) = match cmd.split_once(" # ") {
            Some((c, note)) => (c.trim().to_string(), note.trim().to_string()),
            None => (cmd.clone(), String::new()),
        };
        let command = command.replace("127.0.0.1:8098", &http);
        let out = Command::new("bash")
            .arg("-c")
            .arg(format!("set -o pipefail; {command}"))
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "`{command}` failed: {stdout} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        if command.contains(" -i ") {
            let status: u16 = stdout
                .lines()
                .next()
                .and_then(|l| l.split_whitespace().nth(1))
                .and_then(|s| s.parse().ok())
                .unwrap_or(0);
            assert!((200..400).contains(&status), "`{command}`: status {status}");
            if let Some(want) = comment.split_whitespace().next() {
                if let Ok(want) = want.trim_end_matches(',').parse::<u16>() {
                    assert_eq!(status, want, "`{command}`: README promises {want}");
                }
            }
        }
        if comment == "OK" {
            assert_eq!(stdout.trim(), "OK", "`{command}`");
        }
    }
    let out = Command::new("curl")
        .args(["-s", &format!("http://{http}/buckets/greetings/keys/en")])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout), "hello");
    let _ = Command::new("kill")
        .args(["-TERM", &node.0.id().to_string()])
        .status();
    let status = node.0.wait().unwrap();
    assert!(status.success(), "node exit: {status}");
}

/// The node process, killed if the test fails before stopping it.
struct Node(std::process::Child);

impl Drop for Node {
    fn drop(&mut self) {
        if let Ok(None) = self.0.try_wait() {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
}
