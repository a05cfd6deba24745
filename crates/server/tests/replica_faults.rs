//! A node's behaviour when its replicas disagree because of a fault, driven
//! through the node's own API (one node, its n replicas are local vnodes):
//!
//! * a GET whose first replicas answer "not found" while a later one holds
//!   the object finds it (`notfound_wait_ms`), as after a node restart that
//!   left two replicas behind; with `notfound_wait_ms = 0` (Riak's
//!   behaviour) the same GET answers not found;
//! * a GET whose best replica fails between the HEAD round and the value
//!   fetch (here: its journal record damaged underneath) takes the value
//!   from another replica holding the same version;
//! * a GET whose reads must go to the disk (bitcask) answers while its
//!   replicas' vnode threads are busy, on the node's read threads beside
//!   them (`read_threads`); with `read_threads = 0` it waits in their
//!   queues (here: until its timeout);
//! * a vnode keeps its vclock actor across a clean restart and takes a new
//!   one after an unclean stop (its status file left `open`).

mod common;

use basalt_server::config::Config;
use basalt_server::kv::{GetOpts, GetOutcome, PutOpts};
use basalt_server::object::RiakObject;
use basalt_server::vnode::request::{Obj, VnodeReq, WireObject};
use basalt_server::ServerHandle;
use common::{content, runtime};
use std::sync::atomic::Ordering;
use std::time::Duration;

fn config(dir: &tempfile::TempDir, backend: &str) -> Config {
    Config {
        data_dir: dir.path().to_path_buf(),
        pb_listen: "127.0.0.1:0".into(),
        cluster_listen: "127.0.0.1:0".into(),
        http_listen: String::new(),
        ring_size: 8,
        backend: backend.into(),
        ..Config::default()
    }
}

/// Writes `v` through the node, then copies the stored object into the
/// third replica only of a second key, so its first two replicas (asked
/// first, answering first on one node) have never seen it.
fn only_last_replica_holds(h: &ServerHandle, rt: &tokio::runtime::Runtime, key: &[u8]) {
    let node = h.node();
    let obj = rt
        .block_on(node.put(b"b", b"seed", None, content(b"v"), &PutOpts::default()))
        .expect("put")
        .expect("written");
    let targets = node.preflist_of(b"b", key);
    assert_eq!(targets.len(), 3);
    let req = VnodeReq::Reconcile {
        bucket: b"b".to_vec(),
        key: key.to_vec(),
        object: Obj::Wire(WireObject::full(&obj)),
        props: node.props().get(b"b"),
    };
    rt.block_on(node.router().vcall(&targets[2], req))
        .expect("replica write");
    // That replica answers last, well after the other two.
    node.router()
        .fault_stall_vnode(targets[2].partition, Duration::from_millis(300))
        .expect("stall");
}

#[test]
fn a_quorum_of_not_found_waits_for_the_replica_that_holds_the_key() {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let h = ServerHandle::spawn(config(&dir, "memory")).expect("spawn");
    only_last_replica_holds(&h, &rt, b"k");
    let opts = GetOpts {
        r: Some(2),
        notfound_ok: Some(true),
        ..GetOpts::default()
    };
    let got = rt.block_on(h.node().get(b"b", b"k", &opts)).expect("get");
    assert!(matches!(got, GetOutcome::Found(ref o) if o.contents[0].value == b"v"));
    let stats = h.node().stats();
    assert_eq!(stats.notfound_waits.load(Ordering::Relaxed), 1);
    assert_eq!(stats.notfound_rescues.load(Ordering::Relaxed), 1);
    // A key nobody holds still answers not found (after every replica).
    let none = rt
        .block_on(h.node().get(b"b", b"absent", &opts))
        .expect("get");
    assert_eq!(none, GetOutcome::NotFound);
    h.shutdown().expect("shutdown");

    // Riak's behaviour, kept as an option: the first two "not found" win.
    let dir = tempfile::tempdir().expect("tempdir");
    let mut c = config(&dir, "memory");
    c.limits.notfound_wait_ms = 0;
    let h = ServerHandle::spawn(c).expect("spawn");
    only_last_replica_holds(&h, &rt, b"k");
    let got = rt.block_on(h.node().get(b"b", b"k", &opts)).expect("get");
    assert_eq!(got, GetOutcome::NotFound);
    h.shutdown().expect("shutdown");
}

/// Flips a byte inside the last journal record of vnode `p` (its value:
/// the record ends with the value when it carries no index changes).
fn damage_last_value(dir: &tempfile::TempDir, p: u32) {
    use std::io::{Read, Seek, SeekFrom, Write};
    let journal = dir
        .path()
        .join("vnodes")
        .join(p.to_string())
        .join("journal");
    let mut files: Vec<_> = std::fs::read_dir(&journal)
        .expect("journal dir")
        .map(|e| e.expect("entry").path())
        // Not an empty spare made ahead of a roll (a 16-byte header).
        .filter(|p| {
            p.extension().is_some_and(|e| e == "jnl")
                && std::fs::metadata(p).is_ok_and(|m| m.len() > 16)
        })
        .collect();
    files.sort();
    let last = files.last().expect("a journal file");
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(last)
        .expect("open journal file");
    let len = f.metadata().expect("metadata").len();
    assert!(len > 16 + 3, "journal file holds a record");
    let mut b = [0u8; 1];
    f.seek(SeekFrom::Start(len - 3)).expect("seek");
    f.read_exact(&mut b).expect("read");
    f.seek(SeekFrom::Start(len - 3)).expect("seek");
    f.write_all(&[b[0] ^ 0x5a]).expect("write");
    f.sync_all().expect("sync");
}

#[test]
fn a_replica_failing_its_value_read_is_replaced_by_another_holder() {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let h = ServerHandle::spawn(config(&dir, "leveled")).expect("spawn");
    let node = h.node();
    rt.block_on(node.put(b"b", b"k", None, content(b"the value"), &PutOpts::default()))
        .expect("put")
        .expect("written");
    let targets = node.preflist_of(b"b", b"k");
    assert_eq!(targets.len(), 3);
    // One node: replies come in preference-list order and every queue is
    // empty, so the first replica is the one asked for the value.
    damage_last_value(&dir, targets[0].partition);
    let direct = rt.block_on(node.router().vcall(
        &targets[0],
        VnodeReq::Get {
            bucket: b"b".to_vec(),
            key: b"k".to_vec(),
        },
    ));
    assert!(
        direct.is_err(),
        "the damaged replica fails its value read: {direct:?}"
    );
    let opts = GetOpts {
        r: Some(3),
        ..GetOpts::default()
    };
    let got = rt.block_on(node.get(b"b", b"k", &opts)).expect("get");
    assert!(
        matches!(got, GetOutcome::Found(ref o) if o.contents[0].value == b"the value"),
        "{got:?}"
    );
    h.shutdown().expect("shutdown");
}

/// The actors in the clock of `key` after one more write through the node.
fn actors_after_write(dir: &tempfile::TempDir, rt: &tokio::runtime::Runtime) -> Vec<Vec<u8>> {
    let h = ServerHandle::spawn(config(dir, "leveled")).expect("spawn");
    let node = h.node().clone();
    let clock = match rt
        .block_on(node.get(b"b", b"k", &GetOpts::default()))
        .expect("get")
    {
        GetOutcome::Found(o) => Some(o.vclock),
        _ => None,
    };
    let obj: std::sync::Arc<RiakObject> = rt
        .block_on(node.put(b"b", b"k", clock, content(b"v"), &PutOpts::default()))
        .expect("put")
        .expect("written");
    drop(node);
    h.shutdown().expect("shutdown");
    obj.vclock
        .entries()
        .iter()
        .map(|e| e.actor.clone())
        .collect()
}

#[test]
fn a_vnode_takes_a_new_actor_only_after_an_unclean_stop() {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let first = actors_after_write(&dir, &rt);
    assert_eq!(first.len(), 1, "one coordinating vnode");
    // Clean restart: the same actor counts on.
    assert_eq!(actors_after_write(&dir, &rt), first);
    // An unclean stop: every vnode's status file says `open`.
    for e in std::fs::read_dir(dir.path().join("vnodes")).expect("vnodes") {
        let path = e.expect("entry").path();
        if path.is_dir() {
            basalt_server::vnode::id::start(&path).expect("mark open");
        }
    }
    let after = actors_after_write(&dir, &rt);
    assert_eq!(after.len(), 2, "a new incarnation adds an actor: {after:?}");
    assert!(after.contains(&first[0]));
    // New incarnations take the 8-byte actor (`ring::ActorForm::Short`).
    assert!(after.iter().all(|a| a.len() == 8), "{after:?}");
}

#[test]
fn a_vnode_reopened_after_its_backend_failed_takes_a_new_actor() {
    let rt = runtime();
    let dir = tempfile::tempdir().expect("tempdir");
    let h = ServerHandle::spawn(config(&dir, "leveled")).expect("spawn");
    let node = h.node().clone();
    let first = rt
        .block_on(node.put(b"b", b"k", None, content(b"v1"), &PutOpts::default()))
        .expect("put")
        .expect("written");
    let p = node.preflist_of(b"b", b"k")[0].partition;
    // The backend closes itself (as after a failed journal sync); the next
    // request reopens the vnode.
    rt.block_on(node.router().fault_close_vnode_backend(p))
        .expect("close backend");
    let read = rt
        .block_on(node.get(b"b", b"k", &GetOpts::default()))
        .expect("get");
    assert!(matches!(read, GetOutcome::Found(_)));
    let second = rt
        .block_on(node.put(
            b"b",
            b"k",
            Some(first.vclock.clone()),
            content(b"v2"),
            &PutOpts::default(),
        ))
        .expect("put")
        .expect("written");
    let actors: Vec<Vec<u8>> = second
        .vclock
        .entries()
        .iter()
        .map(|e| e.actor.clone())
        .collect();
    assert_eq!(
        actors.len(),
        2,
        "a new incarnation after the failure: {actors:?}"
    );
    drop(node);
    h.shutdown().expect("shutdown");
}

/// Summed vnode timer `name` (e.g. `vnode_read_beside_count`) over the
/// node's vnodes.
fn vnode_timer(h: &ServerHandle, name: &str) -> u64 {
    h.node()
        .router()
        .local_vnodes()
        .iter()
        .flat_map(|(_, v)| v.times().snapshot())
        .filter(|(n, _)| n == name)
        .map(|(_, x)| x)
        .sum()
}

#[test]
fn a_read_from_disk_does_not_wait_behind_its_vnodes_jobs() {
    let rt = runtime();
    for read_threads in [4, 0] {
        let dir = tempfile::tempdir().expect("tempdir");
        let mut c = config(&dir, "bitcask");
        c.read_threads = read_threads;
        c.limits.request_timeout_ms = 2_000;
        let h = ServerHandle::spawn(c).expect("spawn");
        let node = h.node();
        rt.block_on(node.put(b"b", b"k", None, content(b"v"), &PutOpts::default()))
            .expect("put")
            .expect("written");
        // Every replica's worker busy with a job until the GET is done.
        let mut release = Vec::new();
        for t in node.preflist_of(b"b", b"k") {
            let v = node
                .router()
                .local_vnodes()
                .into_iter()
                .find(|(p, _)| *p == t.partition)
                .map(|(_, v)| v)
                .expect("local vnode");
            let (tx, released) = std::sync::mpsc::channel::<()>();
            release.push(tx);
            drop(
                v.submit(move |_| {
                    let _ = released.recv_timeout(Duration::from_secs(30));
                    Ok(())
                })
                .expect("job queued"),
            );
        }
        let got = rt.block_on(node.get(b"b", b"k", &GetOpts::default()));
        drop(release);
        if read_threads > 0 {
            let got = got.expect("get beside the busy workers");
            assert!(matches!(got, GetOutcome::Found(ref o) if o.contents[0].value == b"v"));
            assert!(vnode_timer(&h, "vnode_read_beside_count") >= 2);
            assert_eq!(vnode_timer(&h, "vnode_read_queued_count"), 0);
        } else {
            assert!(got.is_err(), "queued behind the busy workers: {got:?}");
            assert_eq!(vnode_timer(&h, "vnode_read_beside_count"), 0);
            assert!(vnode_timer(&h, "vnode_read_queued_count") >= 2);
        }
        h.shutdown().expect("shutdown");
    }
}
