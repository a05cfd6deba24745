//! Alternative coverage plans (`RpbCoverageReq.replace_cover` +
//! `unavailable_cover`) on a cluster of three in-process nodes (memory
//! backend, ring 16, n_val 3), as the Java client's own coverage tests
//! (`ITestCoveragePlan`, `ITestFullBucketRead`, which "need cluster to
//! run") ask for them: a replacement entry names another node, and a 2i
//! `$bucket` query on it, sent to that node, returns exactly the keys of
//! the entry it replaces; replacing again with every failed entry listed
//! moves on to the remaining replicas' nodes and then answers
//! `primary_partition_unavailable`. A traditional entry (no
//! `min_partitions`) is replaced by entries whose keys together are the
//! replaced entry's keys, each once.
//!
//! And the forwarding vnode: a request that reaches a node whose vnode of
//! the partition is being dropped after its handoff (a sender a gossip
//! behind, a coverage plan made just before the transfer) is forwarded
//! once to the node that holds the partition, as Riak's vnode forwards
//! after a handoff, and not refused.

mod common;

use basalt_server::cluster::{Handoff, HandoffKind, Msg, Reply, WireError};
use basalt_server::pb::{self, code};
use basalt_server::router::Target;
use basalt_server::vnode::request::{Obj, VnodeReply, VnodeReq};
use basalt_server::ServerHandle;
use common::{runtime, Client};
use prost::Message;
use std::collections::{BTreeMap, BTreeSet};

const KEYS: usize = 120;
const BUCKET: &[u8] = b"alt";

fn start(name: &str) -> (ServerHandle, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("tempdir");
    let c = common::cluster_node_config(name, dir.path());
    (ServerHandle::spawn(c).expect("spawn"), dir)
}

fn admin(rt: &tokio::runtime::Runtime, h: &ServerHandle, line: &str) -> String {
    common::admin_line(rt, h, line)
}

/// Waits (≤ 60 s) until every node reports no pending transfer and sees
/// three members.
fn settle(rt: &tokio::runtime::Runtime, nodes: &[&ServerHandle]) {
    common::settle_cluster(rt, nodes, 3);
}

/// Three nodes, n2 and n3 joined to n1, committed and settled.
fn three_nodes(rt: &tokio::runtime::Runtime) -> [(ServerHandle, tempfile::TempDir); 3] {
    let nodes = [start("n1"), start("n2"), start("n3")];
    let target = nodes[0].0.cluster_addr().to_string();
    admin(rt, &nodes[1].0, &format!("join {target}"));
    admin(rt, &nodes[2].0, &format!("join {target}"));
    admin(rt, &nodes[0].0, "commit");
    settle(rt, &[&nodes[0].0, &nodes[1].0, &nodes[2].0]);
    nodes
}

/// The three nodes' clients by PB address (`ip:port`, as entries name it).
struct Nodes(BTreeMap<String, Client>);

impl Nodes {
    fn of(e: &pb::RpbCoverageEntry) -> String {
        format!("{}:{}", String::from_utf8_lossy(&e.ip), e.port)
    }

    fn client(&mut self, e: &pb::RpbCoverageEntry) -> &mut Client {
        let at = Nodes::of(e);
        self.0
            .get_mut(&at)
            .unwrap_or_else(|| panic!("entry names {at}, not a member's PB address"))
    }

    /// `RpbCoverageReq` through any node: the entries or the error text.
    fn plan(
        &mut self,
        min_partitions: Option<u32>,
        replace: Option<&pb::RpbCoverageEntry>,
        unavailable: &[&pb::RpbCoverageEntry],
    ) -> Result<Vec<pb::RpbCoverageEntry>, String> {
        let req = pb::RpbCoverageReq {
            bucket: BUCKET.to_vec(),
            min_partitions,
            replace_cover: replace.map(|e| e.cover_context.clone()),
            unavailable_cover: unavailable
                .iter()
                .map(|e| e.cover_context.clone())
                .collect(),
            ..Default::default()
        };
        let c = self.0.values_mut().next().expect("a node");
        let (rc, body) = c.try_call(code::COVERAGE_REQ, &req)?;
        assert_eq!(rc, code::COVERAGE_RESP);
        Ok(pb::RpbCoverageResp::decode(body.as_slice())
            .expect("coverage resp")
            .entries)
    }

    /// The keys of one entry: a `$bucket` 2i query with its context, sent
    /// to the entry's own node.
    fn keys(&mut self, e: &pb::RpbCoverageEntry) -> Vec<Vec<u8>> {
        let q = pb::RpbIndexReq {
            bucket: BUCKET.to_vec(),
            index: b"$bucket".to_vec(),
            qtype: pb::INDEX_EQ,
            key: Some(BUCKET.to_vec()),
            cover_context: Some(e.cover_context.clone()),
            ..Default::default()
        };
        let b = self.client(e).call(code::INDEX_REQ, &q, code::INDEX_RESP);
        let mut keys = pb::RpbIndexResp::decode(b.as_slice())
            .expect("index resp")
            .keys;
        keys.sort();
        keys
    }
}

#[test]
fn alternative_entries_cover_the_same_keys_on_other_nodes() {
    let rt = runtime();
    let [(n1, _d1), (n2, _d2), (n3, _d3)] = three_nodes(&rt);

    let mut w = Client::connect(&n1);
    for i in 0..KEYS {
        let req = pb::RpbPutReq {
            bucket: BUCKET.to_vec(),
            key: Some(format!("k{i:03}").into_bytes()),
            // Every replica holds every key before the coverage queries.
            w: Some(3),
            dw: Some(3),
            content: pb::RpbContent {
                value: format!("v{i}").into_bytes(),
                ..Default::default()
            },
            ..Default::default()
        };
        w.call(code::PUT_REQ, &req, code::PUT_RESP);
    }
    let mut nodes = Nodes(
        [&n1, &n2, &n3]
            .iter()
            .map(|h| (h.addr().to_string(), Client::connect(h)))
            .collect(),
    );

    // The parallel plan (min_partitions, as the Java tests ask: 5): one
    // entry per partition's keyspace; together every key once.
    let plan = nodes.plan(Some(5), None, &[]).expect("plan");
    assert_eq!(plan.len(), 16, "one entry per first primary");
    let hosts: BTreeSet<String> = plan.iter().map(Nodes::of).collect();
    assert!(hosts.len() > 1, "entries on several nodes: {hosts:?}");
    let mut all = Vec::new();
    let mut by_entry = Vec::new();
    for e in &plan {
        let keys = nodes.keys(e);
        all.extend(keys.iter().cloned());
        by_entry.push(keys);
    }
    all.sort();
    all.dedup();
    assert_eq!(all.len(), KEYS, "every key once");
    assert_eq!(by_entry.iter().map(Vec::len).sum::<usize>(), KEYS);

    // ITestCoveragePlan.obtainAlternativeCoveragePlan and
    // ITestFullBucketRead.queryDataByUsingAnAlternateCoveragePlan, for
    // every entry: one replacement, on another node, another context,
    // exactly the replaced entry's keys.
    let mut three_nodes_deep = 0;
    for (e, want) in plan.iter().zip(&by_entry) {
        let alt = nodes.plan(Some(5), Some(e), &[e]).expect("an alternative");
        assert_eq!(alt.len(), 1, "one entry replaces one keyspace: {alt:?}");
        assert_ne!(Nodes::of(&alt[0]), Nodes::of(e), "another node");
        assert_ne!(alt[0].cover_context, e.cover_context);
        assert_eq!(&nodes.keys(&alt[0]), want, "the same keys from {alt:?}");

        // alternativeCoveragePlanShouldFailIfNoPrimaryPartitionAvailable:
        // each failed entry listed, the next replacement is on a node not
        // yet tried, until none of the keyspace's primaries is left.
        let mut failed = e.clone();
        let mut unavailable = vec![e.clone()];
        let mut tried = BTreeSet::from([Nodes::of(e)]);
        loop {
            let listed: Vec<&pb::RpbCoverageEntry> = unavailable.iter().collect();
            match nodes.plan(Some(5), Some(&failed), &listed) {
                Ok(next) => {
                    assert_eq!(next.len(), 1, "{next:?}");
                    assert!(tried.insert(Nodes::of(&next[0])), "a node not yet tried");
                    assert_eq!(&nodes.keys(&next[0]), want);
                    failed = next[0].clone();
                    unavailable.push(failed.clone());
                }
                Err(msg) => {
                    assert_eq!(msg, "primary_partition_unavailable");
                    break;
                }
            }
            assert!(tried.len() <= 3, "{tried:?}");
        }
        if tried.len() == 3 {
            three_nodes_deep += 1;
        }
    }
    // Most preference lists of 3 span the 3 nodes (the claim spaces them);
    // those keyspaces had two alternatives before the error.
    assert!(three_nodes_deep >= 8, "{three_nodes_deep} of 16");

    // A traditional plan's entry (several first primaries): replaced by
    // entries whose keys together are exactly its keys.
    let plan = nodes.plan(None, None, &[]).expect("plan");
    assert!(plan.len() < 16, "{}", plan.len());
    for e in &plan {
        let want = nodes.keys(e);
        let alt = nodes.plan(None, Some(e), &[e]).expect("alternatives");
        let mut got = Vec::new();
        for a in &alt {
            assert_ne!(Nodes::of(a), Nodes::of(e), "another node");
            got.extend(nodes.keys(a));
        }
        let n = got.len();
        got.sort();
        got.dedup();
        assert_eq!(n, got.len(), "no key twice");
        assert_eq!(got, want);
    }

    // A damaged context is an error, not a plan.
    let mut bad = plan[0].clone();
    bad.cover_context[6] ^= 1;
    let e = nodes.plan(Some(5), Some(&bad), &[]).expect_err("damaged");
    assert!(e.contains("cover_context"), "{e}");
}

#[test]
fn a_request_for_a_vnode_being_dropped_is_forwarded_to_the_owner() {
    let rt = runtime();
    let [(n1, _d1), (n2, _d2), (n3, _d3)] = three_nodes(&rt);
    let mut w = Client::connect(&n1);
    common::put_all_replicas(&mut w, "alt", "fwd", b"v", "text/plain", &[]);

    // The key's first partition, its owner, and the two other members.
    let nodes = [&n1, &n2, &n3];
    let name = |h: &ServerHandle| h.node().cluster().me().to_string();
    let first = n1.node().preflist_of(BUCKET, b"fwd")[0].clone();
    let p = first.partition;
    let owner = *nodes.iter().find(|h| name(h) == first.node).expect("owner");
    let mut others = nodes.iter().filter(|h| name(h) != first.node);
    let (dropping, third) = (
        *others.next().expect("a member"),
        *others.next().expect("another"),
    );
    let get = |key: &[u8]| VnodeReq::Get {
        bucket: BUCKET.to_vec(),
        key: key.to_vec(),
    };
    let value_of = |r: Result<VnodeReply, _>| match r {
        Ok(VnodeReply::Object(Some(o), _)) => o,
        other => panic!("expected the object, got {other:?}"),
    };

    // The node that hands p off (n1 owned every partition before the
    // joins) drops its copy a handoff round after the ring moved: wait
    // for that, so that what follows meets no local vnode of p there.
    let t = std::time::Instant::now();
    while dropping
        .node()
        .router()
        .local_vnodes()
        .iter()
        .any(|(q, _)| *q == p)
    {
        assert!(t.elapsed().as_secs() < 30, "vnode {p} not dropped in 30 s");
        std::thread::sleep(std::time::Duration::from_millis(100));
    }

    // Its ownership handoff done but the vnode not yet dropped (a round
    // away): requests there go to the new owner, which has the writes
    // made since the ring moved (the old copy does not).
    dropping.node().cluster().with_handoffs(|h| {
        h.insert(
            p,
            Handoff {
                done: true,
                ..Handoff::new(HandoffKind::Ownership, &first.node)
            },
        )
    });
    let here = Target {
        partition: p,
        node: name(dropping),
        primary: true,
    };
    value_of(rt.block_on(dropping.node().router().vcall(&here, get(b"fwd"))));
    dropping.node().cluster().with_handoffs(|h| h.remove(&p));

    let guard = dropping.node().router().fault_hold_dropping(p);
    // Asked of the node itself (its own coordinator, a plan made before
    // the transfer) and by another node (a fallback's request, primary
    // false, which the ring check does not forward): both answered by the
    // owner.
    let local = rt.block_on(dropping.node().router().vcall(&here, get(b"fwd")));
    let obj = value_of(local);
    let remote = Target {
        primary: false,
        ..here.clone()
    };
    value_of(rt.block_on(third.node().router().vcall(&remote, get(b"fwd"))));

    // A write sent there lands on the owner (not lost with the drop).
    let write = VnodeReq::Reconcile {
        bucket: BUCKET.to_vec(),
        key: b"fwd-new".to_vec(),
        object: Obj::Wire(obj),
        props: n1.node().props().get(BUCKET),
    };
    rt.block_on(third.node().router().vcall(&remote, write))
        .expect("the forwarded write");
    let at_owner = Target {
        partition: p,
        node: first.node.clone(),
        primary: true,
    };
    value_of(rt.block_on(owner.node().router().vcall(&at_owner, get(b"fwd-new"))));

    // A request forwarded once is not forwarded again: refused, named.
    let msg = Msg::Vnode {
        partition: p,
        primary: true,
        forwarded: true,
        req: get(b"fwd"),
    };
    let again = rt.block_on(third.node().cluster().call(
        &name(dropping),
        &msg,
        std::time::Duration::from_secs(5),
    ));
    match again {
        Ok(Reply::Vnode(Err(WireError::Other(e)))) => {
            assert!(e.contains("being deleted here after its handoff"), "{e}")
        }
        other => panic!("expected the refusal, got {other:?}"),
    }
    drop(guard);
}
