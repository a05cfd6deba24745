//! Process tests of the `riak admin`-like views of `basalt admin` and of
//! `basalt ping`, against real `basalt start` nodes: `status` (the
//! `/stats` object as `name : value` lines), `vnode-status`, `transfers`,
//! `handoff summary|details|config`, `ringready`, `config`, `disk-usage`,
//! `diag DIR` (the support bundle and its manifest, from a live node and
//! from an address where nothing answers), and `--json` on every command
//! that prints data: each JSON answer parses and holds the facts its text
//! shows. On a three-node cluster with handoffs paused (`transfer-limit
//! 0`), `transfers`, `handoff summary` and `vnode-status` show the pending
//! ownership transfers, and a killed member makes `ringready` FALSE and is
//! named by `transfers`.

#![allow(clippy::unwrap_used)]

mod common;

use common::procs::{form_cluster, start_nodes, test_dir, Client, NodeProc};
use common::{bin, code, stderr, stdout, wait_for};
use serde_json::Value;
use std::process::{Command, Output};
use std::time::Duration;

/// Runs `basalt admin --node NODE ARGS`.
fn admin(node: &str, args: &[&str]) -> Output {
    Command::new(bin())
        .args(["admin", "--node", node])
        .args(args)
        .env_remove("RUST_LOG")
        .output()
        .expect("run basalt admin")
}

/// The text answer of a command that must succeed.
fn text(node: &str, args: &[&str]) -> String {
    let out = admin(node, args);
    assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
    stdout(&out)
}

/// The `--json` answer of a command that must succeed: one JSON document.
fn json(node: &str, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = text(node, &all);
    assert_eq!(out.lines().count(), 1, "one line of JSON: {out}");
    serde_json::from_str(&out).unwrap_or_else(|e| panic!("{args:?}: {e}: {out}"))
}

/// `name : value` lines of `status` (after its two header lines).
fn status_lines(t: &str) -> std::collections::BTreeMap<String, String> {
    t.lines()
        .skip(2)
        .filter_map(|l| l.split_once(" : "))
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// The dotted names of a JSON object's leaves, as `status` prints them.
fn leaf_names(prefix: &str, v: &Value, out: &mut Vec<String>) {
    match v {
        Value::Object(m) => {
            for (k, v) in m {
                let n = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                leaf_names(&n, v, out);
            }
        }
        _ => out.push(prefix.to_string()),
    }
}

#[test]
fn views_and_json_on_one_node() {
    let (root, _keep) = test_dir();
    let mut n = NodeProc::new(&root, 1).with_http();
    n.start_fresh(8);
    let node = n.cluster.clone();
    let mut c = Client::connect(&n.pb);
    for i in 0..20 {
        c.put(&format!("k{i}"), "v").unwrap();
    }

    // status: the /stats object, one `name : value` line per leaf.
    let t = text(&node, &["status"]);
    assert!(
        t.starts_with(&format!("1-minute stats for '{}'\n---", n.name)),
        "{t}"
    );
    let lines = status_lines(&t);
    let j = json(&node, &["status"]);
    let mut names = Vec::new();
    leaf_names("", &j, &mut names);
    let text_names: Vec<&String> = lines.keys().collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(
        text_names,
        sorted.iter().collect::<Vec<_>>(),
        "text and JSON name the same statistics"
    );
    assert_eq!(lines["nodename"], n.name);
    assert_eq!(j["nodename"], n.name.as_str());
    assert_eq!(lines["ring_creation_size"], "8");
    assert_eq!(lines["node_puts_total"], "20");
    assert_eq!(j["node_puts_total"], 20);
    let http = n.http.clone().unwrap();
    let stats: Value = reqwest::blocking::get(format!("http://{http}/stats"))
        .unwrap()
        .json()
        .unwrap();
    let mut http_names = Vec::new();
    leaf_names("", &stats, &mut http_names);
    http_names.sort();
    assert_eq!(http_names, sorted, "the same object as HTTP /stats");

    // vnode-status: a block per vnode; JSON rows with the same facts.
    let t = text(&node, &["vnode-status"]);
    assert_eq!(t.matches("VNode: ").count(), 8, "{t}");
    assert_eq!(t.matches("Times:\n  vnode_job_count: ").count(), 8, "{t}");
    let rows = json(&node, &["vnode-status"]);
    let rows = rows.as_array().unwrap();
    assert_eq!(rows.len(), 8);
    for r in rows {
        assert_eq!(r["role"], "primary");
        let p = r["partition"].as_u64().unwrap();
        let disk = r["disk_bytes"].as_u64().unwrap();
        assert!(
            t.contains(&format!(
                "VNode: {p}\nRole: primary (owner {})\nQueue: {}\nReads from memory on the request task: {}\nWrites on the request task: {}\nBackend: leveled\nDisk: {disk} bytes\n",
                n.name, r["queue"], r["reads_here"], r["writes_here"]
            )),
            "{p} in {t}"
        );
        // The vnode's own timers: every vnode ran a job at least (the
        // stats call of the text view before this one).
        assert!(
            r["times"]["vnode_job_count"]
                .as_u64()
                .is_some_and(|n| n > 0),
            "{r}"
        );
    }

    // member-status, ring-status.
    let t = text(&node, &["member-status"]);
    let j = json(&node, &["member-status"]);
    let m = &j["members"][0];
    assert_eq!(m["node"], n.name.as_str());
    assert_eq!(m["status"], "valid");
    assert_eq!(m["up"], true);
    assert_eq!(m["partitions"], 8);
    assert!(
        t.contains(&format!(
            "valid    100.0%        0 up    {:<24} {}",
            n.pb, n.name
        )),
        "{t}"
    );
    assert!(
        t.contains(&format!(
            "cluster {} version {} claimant {}",
            j["cluster_id"].as_str().unwrap(),
            j["version"],
            n.name
        )),
        "{t}"
    );
    let t = text(&node, &["ring-status"]);
    let j = json(&node, &["ring-status"]);
    assert!(
        t.contains(&format!(
            "ring version: {}  ring size: 8",
            j["ring_version"]
        )),
        "{t}"
    );
    assert!(t.contains("pending ownership transfers: 0"), "{t}");
    assert_eq!(j["pending"].as_array().map(Vec::len), Some(0));
    assert_eq!(j["transfer_limit"], 2);

    // transfers, handoff, ringready on a one-node cluster.
    let t = text(&node, &["transfers"]);
    assert!(t.starts_with("No transfers active\n"), "{t}");
    let j = json(&node, &["transfers"]);
    assert_eq!(j["waiting"], serde_json::json!([]));
    assert_eq!(j["silent"], serde_json::json!([]));
    let t = text(&node, &["handoff", "summary"]);
    assert!(t.contains(&n.name) && t.contains("0 (0)"), "{t}");
    let j = json(&node, &["handoff", "summary"]);
    assert_eq!(j["nodes"][0]["node"], n.name.as_str());
    assert_eq!(j["nodes"][0]["total"], 0);
    assert_eq!(
        text(&node, &["handoff", "details"]),
        "No ongoing transfers.\n"
    );
    let t = text(&node, &["handoff", "config"]);
    let j = json(&node, &["handoff", "config"]);
    assert!(t.contains("transfer_limit: 2\n"), "{t}");
    assert!(t.contains(&format!("handoff_listen: {node}\n")), "{t}");
    assert_eq!(j["transfer_limit"], 2);
    assert_eq!(j["handoff_listen"], node.as_str());
    let t = text(&node, &["ringready"]);
    assert_eq!(
        t,
        format!("TRUE All nodes agree on the ring [\"{}\"]\n", n.name)
    );
    assert_eq!(json(&node, &["ringready"])["ready"], true);

    // transfer-limit, set and shown, both forms; --json after the command too.
    assert_eq!(text(&node, &["transfer-limit", "3"]), "transfer limit: 3\n");
    let out = admin(&node, &["transfer-limit", "--json"]);
    let j: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(j["transfer_limit"], 3);

    // config: TOML with the node's settings; no secrets.
    let t = text(&node, &["config"]);
    assert!(t.contains(&format!("node_name = \"{}\"\n", n.name)), "{t}");
    assert!(t.contains("ring_size = 8\n"), "{t}");
    let j = json(&node, &["config"]);
    assert_eq!(j["node_name"], n.name.as_str());
    assert_eq!(j["cluster_listen"], node.as_str());

    // disk-usage, measured by the node.
    let t = text(&node, &["disk-usage"]);
    let j = json(&node, &["disk-usage"]);
    assert!(
        t.starts_with(&format!("data dir: {}\n", n.dir.display())),
        "{t}"
    );
    assert!(j["files"].as_u64().unwrap() > 0);
    assert!(
        t.contains(&format!(
            "total: {} bytes ({} allocated) in {} files",
            j["total_bytes"], j["allocated_bytes"], j["files"]
        )),
        "{t}"
    );
    assert!(j["entries"]["vnodes"]["files"].as_u64().unwrap() > 0);

    // The other views' JSON: the facts their text shows.
    let t = text(&node, &["services"]);
    let j = json(&node, &["services"]);
    assert_eq!(
        t.trim_end(),
        format!(
            "{}: {}",
            j["node"].as_str().unwrap(),
            j["services"]
                .as_array()
                .unwrap()
                .iter()
                .map(|s| s.as_str().unwrap())
                .collect::<Vec<_>>()
                .join(" ")
        )
    );
    let t = text(&node, &["aae", "status"]);
    let j = json(&node, &["aae", "status"]);
    assert!(
        t.contains(&format!(
            "vnodes with trees built: {} of {}",
            j["vnodes_built"], j["vnodes"]
        )),
        "{t}"
    );
    assert!(t.contains(&format!(
        "tree size: {} (",
        j["tree_size"].as_str().unwrap()
    )));
    let t = text(&node, &["repl", "status"]);
    let j = json(&node, &["repl", "status"]);
    assert!(t.starts_with("sinks: (none)"), "{t}");
    assert_eq!(j["sinks"], serde_json::json!([]));
    assert!(t.contains(&format!("sent: {}\n", j["counters"]["repl_sent_total"])));
    assert_eq!(
        text(&node, &["security", "add-user", "alice", "password=pw"]),
        "user alice added\n"
    );
    let t = text(&node, &["security", "print-users"]);
    let j = json(&node, &["security", "print-users"]);
    assert_eq!(t, "alice\tgroups: -\tpassword: set\n");
    assert_eq!(j["users"][0]["name"], "alice");
    assert_eq!(j["users"][0]["password"], true);
    assert!(!j.to_string().contains("salt"), "no password hash: {j}");
    let j = json(&node, &["security", "status"]);
    assert_eq!(j["users"], 1);
    assert_eq!(j["enabled"], false);
    // A change answers {"message": ...}; `--json` may come last.
    let out = admin(&node, &["security", "add-group", "ops", "--json"]);
    assert_eq!(code(&out), 0, "{}", stderr(&out));
    let j: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(j["message"], "group ops added");
    let t = text(&node, &["cluster", "plan"]);
    let j = json(&node, &["cluster", "plan"]);
    assert_eq!(t, "There are no staged changes\n");
    assert_eq!(j["staged"], serde_json::json!([]));
    assert_eq!(j["transfers"], 0);
    let t = text(&node, &["bucket-type", "status", "default"]);
    let j = json(&node, &["bucket-type", "status", "default"]);
    assert_eq!(j["types"][0]["name"], "default");
    assert_eq!(j["types"][0]["active"], true);
    assert_eq!(j["types"][0]["props"]["n_val"], 3);
    assert!(
        t.contains("n_val: 3\n") && t.contains("default is active"),
        "{t}"
    );
    let j = json(&node, &["aae", "fold", "list-buckets"]);
    assert_eq!(j["buckets"][0]["bucket"], "b", "{j}");
    // A refusal is still one line on stderr and exit 1.
    let out = admin(&node, &["--json", "cluster", "leave", "nobody@nowhere"]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(stderr(&out).contains("not a member"), "{}", stderr(&out));

    // ping: PB port, cluster port, both; then a dead address.
    let ping = |args: &[&str]| Command::new(bin()).arg("ping").args(args).output().unwrap();
    for args in [
        vec!["--pb", n.pb.as_str()],
        vec!["--node", node.as_str()],
        vec!["--pb", n.pb.as_str(), "--node", node.as_str()],
    ] {
        let out = ping(&args);
        assert_eq!(code(&out), 0, "{args:?}: {}", stderr(&out));
        assert_eq!(stdout(&out), "pong\n");
    }

    // diag: a full bundle, with the node's log; then refused into a used dir.
    let bundle = root.join("bundle");
    let log = n.dir.with_extension("log");
    let out = admin(
        &node,
        &[
            "diag",
            bundle.to_str().unwrap(),
            "--log",
            log.to_str().unwrap(),
        ],
    );
    assert_eq!(code(&out), 0, "{}{}", stdout(&out), stderr(&out));
    let manifest = std::fs::read_to_string(bundle.join("MANIFEST.txt")).unwrap();
    assert!(manifest.contains("failed (0):"), "{manifest}");
    assert!(manifest.contains(&format!("({})", n.name)), "{manifest}");
    for f in [
        "services.txt",
        "config.toml",
        "status.txt",
        "stats.json",
        "member-status.txt",
        "ring-status.txt",
        "transfers.txt",
        "vnode-status.txt",
        "aae-status.txt",
        "repl-status.txt",
        "security-status.txt",
        "handoff-config.txt",
        "disk-usage.txt",
        "bucket-types.txt",
        "logs/0-n1.log.tail",
        "manifest.json",
    ] {
        assert!(bundle.join(f).is_file(), "{f} in the bundle: {manifest}");
        assert!(manifest.contains(f) || f == "manifest.json", "{f}");
    }
    let config = std::fs::read_to_string(bundle.join("config.toml")).unwrap();
    assert!(config.contains(&format!("node_name = \"{}\"", n.name)));
    let stats: Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("stats.json")).unwrap()).unwrap();
    assert_eq!(stats["nodename"], n.name.as_str());
    let tail = std::fs::read_to_string(bundle.join("logs/0-n1.log.tail")).unwrap();
    assert!(!tail.is_empty(), "the node's log has lines");
    let m: Value =
        serde_json::from_str(&std::fs::read_to_string(bundle.join("manifest.json")).unwrap())
            .unwrap();
    assert_eq!(m["node_name"], n.name.as_str());
    assert!(m["entries"]
        .as_array()
        .unwrap()
        .iter()
        .all(|e| e["error"].is_null()));
    let out = admin(&node, &["diag", bundle.to_str().unwrap()]);
    assert_eq!(code(&out), 2, "{}", stderr(&out));
    assert!(stderr(&out).contains("not empty"), "{}", stderr(&out));

    // Stopped: ping fails (exit 1, naming the port); a bundle records why.
    assert!(n.terminate(), "node exits cleanly");
    let out = ping(&["--pb", n.pb.as_str()]);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains(&format!("Node at {} (PB) not responding to pings", n.pb)),
        "{}",
        stderr(&out)
    );
    let out = ping(&["--node", node.as_str()]);
    assert_eq!(code(&out), 1);
    assert!(
        stderr(&out).contains("(cluster port) not responding"),
        "{}",
        stderr(&out)
    );
    let dead = root.join("dead-bundle");
    let out = admin(&node, &["--json", "diag", dead.to_str().unwrap()]);
    assert_eq!(code(&out), 1, "{}", stderr(&out));
    let m: Value = serde_json::from_str(&stdout(&out)).unwrap();
    let entries = m["entries"].as_array().unwrap();
    assert!(entries.iter().all(|e| !e["error"].is_null()), "{m}");
    assert!(
        entries[0]["error"]
            .as_str()
            .unwrap()
            .contains("cannot reach node"),
        "{m}"
    );
    let manifest = std::fs::read_to_string(dead.join("MANIFEST.txt")).unwrap();
    assert!(manifest.contains("collected (0):"), "{manifest}");
}

#[test]
fn transfers_and_ringready_on_a_cluster() {
    let (root, _keep) = test_dir();
    let mut nodes = start_nodes(&root, 3);
    form_cluster(&nodes[..2]);
    let n1 = nodes[0].cluster.clone();
    // The old owners drop their handed-off copies on their next round.
    wait_for("the first handoffs to end", Duration::from_secs(30), || {
        json(&n1, &["transfers"])["active"] == serde_json::json!([])
    });
    // Handoffs paused everywhere: the third node's join stays pending.
    for n in &nodes {
        assert_eq!(
            text(&n.cluster, &["transfer-limit", "0"]),
            "transfer limit: 0\n"
        );
    }
    let out = text(&nodes[2].cluster, &["cluster", "join", &n1]);
    assert!(out.contains("Success"), "{out}");
    text(&n1, &["cluster", "plan"]);
    text(&n1, &["cluster", "commit"]);
    let names: Vec<String> = nodes.iter().map(|n| n.name.clone()).collect();
    wait_for(
        "every node sees the commit",
        Duration::from_secs(30),
        || {
            nodes.iter().all(|n| {
                json(&n.cluster, &["ring-status"])["pending"]
                    .as_array()
                    .is_some_and(|p| !p.is_empty())
            })
        },
    );
    wait_for("ringready", Duration::from_secs(30), || {
        code(&admin(&n1, &["ringready"])) == 0
    });
    assert_eq!(
        text(&n1, &["ringready"]),
        format!("TRUE All nodes agree on the ring {names:?}\n")
    );

    let ring = json(&n1, &["ring-status"]);
    let pending = ring["pending"].as_array().unwrap().clone();
    let t = text(&n1, &["transfers"]);
    let j = json(&n1, &["transfers"]);
    assert_eq!(j["pending"].as_array().unwrap().len(), pending.len());
    let mut waiting_total = 0;
    for w in j["waiting"].as_array().unwrap() {
        let (o, h) = (
            w["ownership"].as_u64().unwrap(),
            w["hinted"].as_u64().unwrap(),
        );
        waiting_total += o;
        assert!(
            t.contains(&format!(
                "{} waiting to hand off {} partitions ({o} ownership, {h} hinted)",
                w["node"].as_str().unwrap(),
                o + h
            )),
            "{t}"
        );
    }
    assert_eq!(waiting_total as usize, pending.len(), "{t}");
    assert!(t.contains("\nActive Transfers:\n"), "{t}");
    assert!(
        j["active"]
            .as_array()
            .unwrap()
            .iter()
            .all(|h| h["done"] == true),
        "paused: nothing runs: {j}"
    );

    // handoff summary: every pending transfer is known at both ends.
    let s = json(&n1, &["handoff", "summary"]);
    let known: u64 = s["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["ownership_known"].as_u64().unwrap())
        .sum();
    assert_eq!(known as usize, 2 * pending.len(), "{s}");
    let st = text(&n1, &["handoff", "summary"]);
    for r in s["nodes"].as_array().unwrap() {
        assert!(
            st.contains(&format!(
                "{:<28} {:>5} {:>11}",
                r["node"].as_str().unwrap(),
                r["total"].as_u64().unwrap(),
                format!("0 ({})", r["ownership_known"])
            )),
            "{st}"
        );
    }

    // vnode-status: n1's vnodes that move are `handing off`.
    let from_n1 = pending
        .iter()
        .filter(|p| p["from"] == nodes[0].name.as_str())
        .count();
    let rows = json(&n1, &["vnode-status"]);
    let handing = rows
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["role"] == "handing off")
        .count();
    assert_eq!(handing, from_n1);
    assert_eq!(
        text(&n1, &["vnode-status"])
            .matches("Role: handing off")
            .count(),
        from_n1
    );

    // A member killed: named by transfers, and ringready is FALSE (exit 1).
    nodes[2].kill9();
    let t = text(&n1, &["transfers"]);
    assert!(
        t.contains(&format!("Node {} could not be contacted", nodes[2].name)),
        "{t}"
    );
    let out = admin(&n1, &["ringready"]);
    assert_eq!(code(&out), 1, "{}", stdout(&out));
    assert!(stdout(&out).starts_with("FALSE"), "{}", stdout(&out));
    let out = admin(&n1, &["--json", "ringready"]);
    assert_eq!(code(&out), 1);
    let j: Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(j["ready"], false);
    assert_eq!(j["silent"][0]["node"], nodes[2].name.as_str());
}
