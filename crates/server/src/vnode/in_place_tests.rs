//! Tests of writes made on the request's task ([`super::Vnode::write_here`],
//! [`super::VnodeState::execute_in_place`]): the same writes as the
//! worker's, left to the worker whenever a step might wait, and never
//! beside a worker's job.

use super::request::{Obj, VnodeReply, VnodeReq};
use super::{test_state as state, Vnode, VnodeState};
use crate::bucket::props::BucketProps;
use crate::object::{Content, RiakObject};
use parking_lot::RwLock;
use std::sync::Arc;
use std::time::Duration;

fn put(key: &str, value: &str, client: Option<Vec<u8>>) -> VnodeReq {
    VnodeReq::Coordinate {
        bucket: b"b".to_vec(),
        key: key.as_bytes().to_vec(),
        client,
        content: Obj::local(RiakObject {
            vclock: Default::default(),
            contents: vec![Content {
                value: value.as_bytes().to_vec(),
                value_len: value.len() as u32,
                ..Content::default()
            }],
        }),
        props: BucketProps {
            allow_mult: true,
            ..BucketProps::default()
        },
        now_secs: 1_700_000_000,
    }
}

/// The written object of a write's reply.
fn written(r: VnodeReply) -> Arc<RiakObject> {
    match r {
        VnodeReply::Written(Some(o)) => o.object().unwrap_or_else(|e| panic!("{e}")),
        other => panic!("not a write: {other:?}"),
    }
}

/// The stored values of `key`, sorted, and its clock.
fn stored(st: &VnodeState, key: &str) -> (Vec<Vec<u8>>, Vec<u8>) {
    let o = st
        .read(b"b", key.as_bytes())
        .unwrap_or_else(|e| panic!("{e}"))
        .unwrap_or_else(|| panic!("{key} stored"));
    let mut values: Vec<Vec<u8>> = o.contents.iter().map(|c| c.value.clone()).collect();
    values.sort();
    (values, o.vclock.encode())
}

/// A run of writes — a new key, an update with the clock it returned, a
/// concurrent write (no clock: a sibling), a replica's merge of another
/// version — made in place where it can be, and the same run on the
/// worker, leave the same values and clocks.
#[test]
fn writes_in_place_leave_what_the_worker_would() {
    for backend in ["memory", "leveled"] {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
        let (here, there) = (
            state(backend, &dir.path().join("here"), false),
            state(backend, &dir.path().join("there"), false),
        );
        // Another replica's version of `k`, concurrent with all below.
        let elsewhere = VnodeState {
            actor: b"z".to_vec(),
            ..state(backend, &dir.path().join("elsewhere"), false)
        };
        let other = written(
            elsewhere
                .execute(put("k", "elsewhere", None), 0)
                .unwrap_or_else(|e| panic!("{e}")),
        );
        let mut in_place = 0;
        let mut run = |st: &VnodeState, place: bool, req: VnodeReq| -> Arc<RiakObject> {
            if place {
                if let Some(r) = st.execute_in_place(&req) {
                    in_place += 1;
                    return written(r.unwrap_or_else(|e| panic!("{e}")));
                }
            }
            written(st.execute(req, 0).unwrap_or_else(|e| panic!("{e}")))
        };
        for (st, place) in [(&here, true), (&there, false)] {
            let first = run(st, place, put("k", "one", None));
            run(st, place, put("k", "two", Some(first.vclock.encode())));
            run(st, place, put("k", "three", None));
            run(st, place, put("j", "x", None));
            let merge = VnodeReq::Reconcile {
                bucket: b"b".to_vec(),
                key: b"k".to_vec(),
                object: Obj::Local(Arc::clone(&other)),
                props: BucketProps {
                    allow_mult: true,
                    ..BucketProps::default()
                },
            };
            run(st, place, merge);
        }
        assert_eq!(
            in_place, 5,
            "{backend}: every write of an idle store runs in place"
        );
        for key in ["k", "j"] {
            assert_eq!(stored(&here, key), stored(&there, key), "{backend} {key}");
        }
        assert_eq!(stored(&here, "k").0.len(), 3, "{backend}: siblings kept");
        assert!(
            stored(&here, "k").0.contains(&b"elsewhere".to_vec()),
            "{backend}: merged"
        );
    }
}

/// A synced vnode's write, and a backend whose puts may wait (bitcask's
/// merge steps), go to the worker, with nothing written.
#[test]
fn a_write_that_might_wait_is_left_to_the_worker() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    for (backend, sync) in [("leveled", true), ("memory", true), ("bitcask", false)] {
        let st = state(backend, &dir.path().join(format!("{backend}-{sync}")), sync);
        assert!(
            st.execute_in_place(&put("k", "v", None)).is_none(),
            "{backend} sync {sync}"
        );
        assert!(st
            .read(b"b", b"k")
            .unwrap_or_else(|e| panic!("{e}"))
            .is_none());
    }
    let st = state("memory", &dir.path().join("reads"), false);
    let get = VnodeReq::Get {
        bucket: b"b".to_vec(),
        key: b"k".to_vec(),
    };
    assert!(st.execute_in_place(&get).is_none(), "not a write");
}

/// `write_here` runs only in a free write turn: never beside a worker's
/// job, a paused vnode or a hold; it counts what it ran.
#[test]
fn a_write_in_place_waits_for_no_one_and_never_overlaps_the_worker() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let gate = Arc::new(RwLock::new(()));
    let v = Vnode::start(state("memory", dir.path(), false), 8, Arc::clone(&gate))
        .unwrap_or_else(|e| panic!("{e}"));
    let req = put("k", "v", None);
    let try_here = || v.write_here(|st| st.execute_in_place(&req));

    // A worker's job holds the turn while it runs.
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let job = v
        .submit(move |_| {
            let _ = started_tx.send(());
            let _ = release_rx.recv_timeout(Duration::from_secs(30));
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}"));
    started_rx
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(try_here().is_none(), "the worker's job holds the turn");
    drop(release_tx);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .build()
        .unwrap_or_else(|e| panic!("{e}"));
    rt.block_on(job.wait(Duration::from_secs(30)))
        .unwrap_or_else(|e| panic!("{e}"));

    {
        let _paused = gate.write();
        assert!(try_here().is_none(), "a paused vnode");
    }
    {
        let _held = v.hold_in_place();
        assert!(try_here().is_none(), "a hold");
    }
    assert_eq!(v.writes_here(), 0);
    let r = try_here().unwrap_or_else(|| panic!("a free turn"));
    assert_eq!(
        written(r.unwrap_or_else(|e| panic!("{e}"))).contents[0].value,
        b"v"
    );
    assert_eq!(v.writes_here(), 1);
    // The timers saw the one job (held ≥ a moment by the test) and the
    // one write in place; the writes that gave up are not timed.
    let times: std::collections::BTreeMap<String, u64> = v.times().snapshot().into_iter().collect();
    assert_eq!(times["vnode_job_count"], 1);
    assert_eq!(times["vnode_queue_wait_count"], 1);
    assert_eq!(times["vnode_write_here_count"], 1);
    assert!(times["vnode_job_max_ns"] > 0 && times["vnode_job_ns"] >= times["vnode_job_max_ns"]);
    v.shutdown();
    assert!(try_here().is_none(), "a vnode shut down");
}
