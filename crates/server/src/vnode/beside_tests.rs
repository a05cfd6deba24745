//! Tests of reads beside a vnode's worker ([`super::Vnode::beside`]): they
//! answer while the worker is busy, respect the test gate and holds, and
//! the backend outlives every one of them at shutdown.

use super::request::{VnodeReply, VnodeReq};
use super::{test_state as state, Vnode};
use parking_lot::RwLock;
use std::sync::Arc;
use std::time::Duration;

fn get(key: &str) -> VnodeReq {
    VnodeReq::Get {
        bucket: b"b".to_vec(),
        key: key.as_bytes().to_vec(),
    }
}

#[test]
fn a_read_beside_the_worker_answers_while_it_is_busy_and_holds_the_backend_open() {
    let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("{e}"));
    let gate = Arc::new(RwLock::new(()));
    let v = Vnode::start(state("bitcask", dir.path(), false), 8, Arc::clone(&gate))
        .unwrap_or_else(|e| panic!("{e}"));
    let read = |v: &Vnode| {
        v.beside()
            .map(|b| b.read(|st| st.execute(get("k"), 0)))
            .map(|r| r.unwrap_or_else(|e| panic!("{e}")))
    };
    assert!(matches!(read(&v), Some(VnodeReply::Object(None, 0))));

    // The worker busy with a job: a read beside it still answers.
    let (started_tx, started_rx) = std::sync::mpsc::channel();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    drop(
        v.submit(move |_| {
            let _ = started_tx.send(());
            let _ = release_rx.recv_timeout(Duration::from_secs(30));
            Ok(())
        })
        .unwrap_or_else(|e| panic!("{e}")),
    );
    started_rx
        .recv_timeout(Duration::from_secs(30))
        .unwrap_or_else(|e| panic!("{e}"));
    assert!(
        read(&v).is_some(),
        "the worker's job does not hold reads beside it"
    );
    drop(release_tx);
    {
        let _paused = gate.write();
        assert!(v.beside().is_none(), "a paused vnode");
    }
    {
        let _held = v.hold_in_place();
        assert!(v.beside().is_none(), "a hold");
    }
    let times: std::collections::BTreeMap<String, u64> = v.times().snapshot().into_iter().collect();
    assert_eq!(times["vnode_read_beside_count"], 2);

    // Shutdown while a read holds the backend: the worker waits for it.
    let held = v.beside().unwrap_or_else(|| panic!("an open vnode"));
    let v = Arc::new(v);
    let closing = {
        let v = Arc::clone(&v);
        std::thread::spawn(move || v.shutdown())
    };
    while v.beside().is_some() {
        std::thread::sleep(Duration::from_millis(1));
    }
    // The state is taken; the backend is not closed under the held read.
    let r = held.read(|st| st.backend.get(b"b", b"k"));
    assert!(r.is_ok(), "the backend closed under a read: {r:?}");
    assert!(!closing.is_finished(), "shutdown waits for the read");
    drop(held);
    closing
        .join()
        .unwrap_or_else(|_| panic!("shutdown panicked"));
    assert!(v.beside().is_none(), "a vnode shut down");
}
