// The real Riak Java client (riak-client 2.1.1) against a live Basalt node
// (BASALT_PB_ADDR=host:port; interop/run.sh starts the node and creates the
// bucket types `plain`, `counters`, `sets`, `maps`, `hlls`). Each check runs
// on its own and prints PASS/FAIL with the reason; the last line is
// "N passed, M failed" and the exit status is 1 if any failed.
//
// Covered: ping; store/fetch/delete (value, content type, user metadata);
// not found; siblings with allow_mult (both values, newest first); bucket
// props fetch (incl. the chash_keyfun/linkfun the client needs) and store;
// a typed bucket (`plain`) isolated from default; 2i (_int range with
// max_results paging and continuation, _bin equality); list keys; data
// types: counter, set (add, remove with context), map (counter, register,
// set, flag, nested map), hll; a coverage plan and a full bucket read of
// each of its entries with return_body (Riak 2.x parallel extraction); the
// one-node part of the client's own coverage tests (Coverage.singleNode).
//
// Cluster mode (BASALT_CLUSTER_ADDRS=h:p,h:p,h:p instead; interop/run.sh's
// cluster stage, with the types `cluster_mult`, `counters` and `sets`
// created on n1 and gossiped): a value written through one node read
// through the others, sibling-free concurrent counter increments and set
// adds through every node converging, and a coverage plan whose entries
// name member nodes (more than one), each entry read from its own node
// (FullBucketRead) giving every key exactly once; alternative coverage
// plans as the client's own tests ask for them (Coverage.cluster).
package basalt.interop;

import com.basho.riak.client.api.RiakClient;
import com.basho.riak.client.api.commands.buckets.FetchBucketProperties;
import com.basho.riak.client.api.commands.buckets.StoreBucketProperties;
import com.basho.riak.client.api.commands.datatypes.*;
import com.basho.riak.client.api.commands.indexes.BinIndexQuery;
import com.basho.riak.client.api.commands.indexes.IntIndexQuery;
import com.basho.riak.client.api.commands.kv.CoveragePlan;
import com.basho.riak.client.api.commands.kv.DeleteValue;
import com.basho.riak.client.api.commands.kv.FullBucketRead;
import com.basho.riak.client.api.commands.kv.FetchValue;
import com.basho.riak.client.api.commands.kv.ListKeys;
import com.basho.riak.client.api.commands.kv.StoreValue;
import com.basho.riak.client.core.RiakCluster;
import com.basho.riak.client.core.RiakNode;
import com.basho.riak.client.core.operations.CoveragePlanOperation;
import com.basho.riak.client.core.query.Location;
import com.basho.riak.client.core.query.Namespace;
import com.basho.riak.client.core.query.RiakObject;
import com.basho.riak.client.core.query.BucketProperties;
import com.basho.riak.client.core.query.crdt.types.RiakMap;
import com.basho.riak.client.core.query.crdt.types.RiakSet;
import com.basho.riak.client.core.query.indexes.LongIntIndex;
import com.basho.riak.client.core.query.indexes.StringBinIndex;
import com.basho.riak.client.core.util.BinaryValue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;

public final class Main {
    interface Check {
        void run() throws Exception;
    }

    static int passed = 0;
    static int failed = 0;
    static RiakClient client;
    static final String RUN = Long.toString(System.nanoTime());

    static void check(String name, Check c) {
        try {
            c.run();
            passed++;
            System.out.println("PASS " + name);
        } catch (Throwable t) {
            failed++;
            System.out.println("FAIL " + name + ": " + t);
        }
    }

    static void expect(boolean ok, String what) {
        if (!ok) {
            throw new AssertionError(what);
        }
    }

    static Location loc(String type, String bucket, String key) {
        return new Location(new Namespace(type, bucket + RUN), key);
    }

    static void store(Location l, String value) throws Exception {
        RiakObject o = new RiakObject().setContentType("text/plain").setValue(BinaryValue.create(value));
        client.execute(new StoreValue.Builder(o).withLocation(l).build());
    }

    /** A started cluster object for one node at host:port. */
    static RiakCluster connect(String addr) {
        String[] hp = addr.split(":");
        RiakNode node = new RiakNode.Builder()
                .withRemoteAddress(hp[0])
                .withRemotePort(Integer.parseInt(hp[1]))
                .build();
        RiakCluster cluster = new RiakCluster.Builder(node).build();
        cluster.start();
        return cluster;
    }

    public static void main(String[] args) throws Exception {
        String addrs = System.getenv("BASALT_CLUSTER_ADDRS");
        String addr = System.getenv("BASALT_PB_ADDR");
        if (addrs != null && !addrs.isEmpty()) {
            List<RiakCluster> clusters = new ArrayList<>();
            List<RiakClient> clients = new ArrayList<>();
            for (String a : addrs.split(",")) {
                RiakCluster c = connect(a);
                clusters.add(c);
                clients.add(new RiakClient(c));
            }
            try {
                clusterChecks(clients);
            } finally {
                for (RiakCluster c : clusters) {
                    c.shutdown();
                }
            }
        } else if (addr != null && !addr.isEmpty()) {
            RiakCluster cluster = connect(addr);
            client = new RiakClient(cluster);
            try {
                checks();
            } finally {
                cluster.shutdown();
            }
        } else {
            System.out.println("BASALT_PB_ADDR / BASALT_CLUSTER_ADDRS not set: nothing to run (interop/run.sh sets them)");
            return;
        }
        System.out.println(passed + " passed, " + failed + " failed");
        System.exit(failed == 0 ? 0 : 1);
    }

    /**
     * Reads every entry of a coverage plan of ns with FullBucketRead
     * (return_body), each through the client for its host:port (or
     * `fallback`); returns key -> value, failing on a key seen twice.
     */
    static Map<String, String> readByCoverage(Namespace ns, Map<String, RiakClient> byHost, RiakClient fallback)
            throws Exception {
        CoveragePlan.Response plan = fallback.execute(CoveragePlan.Builder.create(ns).build());
        Map<String, String> seen = new HashMap<>();
        int entries = 0;
        for (CoveragePlanOperation.Response.CoverageEntry e : plan) {
            entries++;
            RiakClient c = byHost.getOrDefault(e.getHost() + ":" + e.getPort(), fallback);
            FullBucketRead.Response r = c.execute(
                    new FullBucketRead.Builder(ns, e.getCoverageContext()).withReturnBody(true).build());
            for (FullBucketRead.Response.Entry en : r.getEntries()) {
                String k = en.getRiakObjectLocation().getKeyAsString();
                expect(en.hasFetchedValue(), "a body for " + k);
                String v = en.getFetchedValue().getValue(RiakObject.class).getValue().toString();
                expect(seen.put(k, v) == null, "key " + k + " twice (entry " + e.getDescription() + ")");
            }
        }
        expect(entries > 0, "a non-empty coverage plan");
        return seen;
    }

    static void clusterChecks(List<RiakClient> clients) {
        Map<String, RiakClient> byHost = new HashMap<>();
        String[] addrs = System.getenv("BASALT_CLUSTER_ADDRS").split(",");
        for (int i = 0; i < addrs.length; i++) {
            byHost.put(addrs[i], clients.get(i));
        }
        check("cluster: written through one node, read through each", () -> {
            Location l = new Location(new Namespace("cluster_mult", "x" + RUN), "k");
            RiakObject o = new RiakObject().setContentType("text/plain").setValue(BinaryValue.create("v1"));
            clients.get(0).execute(new StoreValue.Builder(o).withLocation(l).build());
            for (RiakClient c : clients) {
                RiakObject got = c.execute(new FetchValue.Builder(l).build()).getValue(RiakObject.class);
                expect(got.getValue().toString().equals("v1"), "value " + got.getValue());
            }
        });
        check("cluster: counter increments through every node converge", () -> {
            Location l = new Location(new Namespace("counters", "c" + RUN), "k");
            for (int i = 0; i < 10; i++) {
                for (RiakClient c : clients) {
                    c.execute(new UpdateCounter.Builder(l, new CounterUpdate(1)).build());
                }
            }
            for (RiakClient c : clients) {
                long v = c.execute(new FetchCounter.Builder(l).build()).getDatatype().view();
                expect(v == 10L * clients.size(), "counter " + v);
            }
        });
        check("cluster: set adds through every node converge", () -> {
            Location l = new Location(new Namespace("sets", "s" + RUN), "k");
            Set<String> want = new HashSet<>();
            for (int n = 0; n < clients.size(); n++) {
                for (int i = 0; i < 5; i++) {
                    String e = "n" + n + "e" + i;
                    want.add(e);
                    clients.get(n).execute(new UpdateSet.Builder(l, new SetUpdate().add(e)).build());
                }
            }
            for (RiakClient c : clients) {
                Set<String> got = new HashSet<>();
                for (BinaryValue b : c.execute(new FetchSet.Builder(l).build()).getDatatype().view()) {
                    got.add(b.toString());
                }
                expect(got.equals(want), "set " + got);
            }
        });
        check("cluster: coverage plan entries read from their own nodes", () -> {
            Namespace ns = new Namespace("default", "cov" + RUN);
            for (int i = 0; i < 60; i++) {
                RiakObject o = new RiakObject().setContentType("text/plain").setValue(BinaryValue.create("v" + i));
                clients.get(i % clients.size())
                        .execute(new StoreValue.Builder(o).withLocation(new Location(ns, "k" + i)).build());
            }
            // The plan's vnodes lie on more than one node, each named by its
            // PB address (which of the three depends on the claim).
            CoveragePlan.Response plan = clients.get(0).execute(CoveragePlan.Builder.create(ns).build());
            expect(plan.hosts().size() > 1, "entries on several nodes: " + plan.hosts());
            for (var h : plan.hosts()) {
                expect(byHost.containsKey(h.getHost() + ":" + h.getPort()), "a member's address: " + h);
            }
            Map<String, String> seen = readByCoverage(ns, byHost, clients.get(0));
            expect(seen.size() == 60, "keys " + seen.size());
            for (int i = 0; i < 60; i++) {
                expect(("v" + i).equals(seen.get("k" + i)), "k" + i + " = " + seen.get("k" + i));
            }
        });
        Coverage.cluster(clients, byHost, RUN);
    }

    static void checks() {
        check("store, fetch, metadata, delete", () -> {
            Location l = loc("default", "kv", "k1");
            RiakObject o = new RiakObject().setContentType("application/json")
                    .setValue(BinaryValue.create("{\"a\":1}"));
            o.getUserMeta().put("who", "java");
            client.execute(new StoreValue.Builder(o).withLocation(l).build());
            FetchValue.Response r = client.execute(new FetchValue.Builder(l).build());
            RiakObject got = r.getValue(RiakObject.class);
            expect(got.getValue().toString().equals("{\"a\":1}"), "value " + got.getValue());
            expect(got.getContentType().equals("application/json"), "content type " + got.getContentType());
            expect("java".equals(got.getUserMeta().get("who")), "usermeta");
            client.execute(new DeleteValue.Builder(l).build());
            FetchValue.Response gone = client.execute(new FetchValue.Builder(l).build());
            expect(gone.isNotFound(), "not found after delete");
        });
        check("siblings newest first", () -> {
            Namespace ns = new Namespace("default", "sib" + RUN);
            client.execute(new StoreBucketProperties.Builder(ns).withAllowMulti(true).build());
            Location l = new Location(ns, "k");
            store(l, "first");
            Thread.sleep(5);
            store(l, "second");
            FetchValue.Response r = client.execute(new FetchValue.Builder(l).build());
            List<RiakObject> vs = r.getValues(RiakObject.class);
            expect(vs.size() == 2, "two siblings, got " + vs.size());
            expect(vs.get(0).getValue().toString().equals("second"), "newest first: " + vs.get(0).getValue());
        });
        check("bucket props (chash_keyfun, linkfun)", () -> {
            Namespace ns = new Namespace("default", "props" + RUN);
            client.execute(new StoreBucketProperties.Builder(ns).withNVal(2).build());
            BucketProperties p = client.execute(new FetchBucketProperties.Builder(ns).build())
                    .getBucketProperties();
            expect(p.getNVal() == 2, "n_val " + p.getNVal());
            expect(p.getChashKeyFunction() != null, "chash_keyfun");
            expect(p.getLinkwalkFunction() != null, "linkfun");
        });
        check("typed bucket isolated from default", () -> {
            store(loc("plain", "iso", "k"), "typed");
            store(loc("default", "iso", "k"), "untyped");
            String t = client.execute(new FetchValue.Builder(loc("plain", "iso", "k")).build())
                    .getValue(RiakObject.class).getValue().toString();
            expect(t.equals("typed"), "typed value " + t);
        });
        check("2i int range with paging, bin equality", () -> {
            Namespace ns = new Namespace("default", "ix" + RUN);
            for (int i = 0; i < 5; i++) {
                RiakObject o = new RiakObject().setContentType("text/plain").setValue(BinaryValue.create("v"));
                o.getIndexes().getIndex(LongIntIndex.named("n")).add((long) i);
                o.getIndexes().getIndex(StringBinIndex.named("tag")).add(i % 2 == 0 ? "even" : "odd");
                client.execute(new StoreValue.Builder(o).withLocation(new Location(ns, "k" + i)).build());
            }
            IntIndexQuery.Response p1 = client.execute(
                    new IntIndexQuery.Builder(ns, "n", 0L, 4L).withMaxResults(2).withPaginationSort(true).build());
            expect(p1.getEntries().size() == 2, "page 1 size " + p1.getEntries().size());
            expect(p1.hasContinuation(), "continuation");
            IntIndexQuery.Response p2 = client.execute(new IntIndexQuery.Builder(ns, "n", 0L, 4L)
                    .withMaxResults(10).withPaginationSort(true).withContinuation(p1.getContinuation()).build());
            expect(p2.getEntries().size() == 3, "page 2 size " + p2.getEntries().size());
            BinIndexQuery.Response even = client.execute(new BinIndexQuery.Builder(ns, "tag", "even").build());
            expect(even.getEntries().size() == 3, "even " + even.getEntries().size());
        });
        check("list keys", () -> {
            Namespace ns = new Namespace("default", "lk" + RUN);
            for (int i = 0; i < 3; i++) {
                store(new Location(ns, "k" + i), "v");
            }
            Set<String> keys = new HashSet<>();
            for (Location l : client.execute(new ListKeys.Builder(ns).build())) {
                keys.add(l.getKeyAsString());
            }
            expect(keys.size() == 3, "keys " + keys);
        });
        check("counter", () -> {
            Location l = loc("counters", "c", "k");
            client.execute(new UpdateCounter.Builder(l, new CounterUpdate(5)).build());
            client.execute(new UpdateCounter.Builder(l, new CounterUpdate(-2)).build());
            long v = client.execute(new FetchCounter.Builder(l).build()).getDatatype().view();
            expect(v == 3, "counter " + v);
        });
        check("set with context remove", () -> {
            Location l = loc("sets", "s", "k");
            client.execute(new UpdateSet.Builder(l, new SetUpdate().add("a").add("b")).build());
            FetchSet.Response f = client.execute(new FetchSet.Builder(l).build());
            expect(f.hasContext(), "a context");
            client.execute(new UpdateSet.Builder(l, new SetUpdate().remove("a"))
                    .withContext(f.getContext()).build());
            RiakSet s = client.execute(new FetchSet.Builder(l).build()).getDatatype();
            Set<String> got = new HashSet<>();
            for (BinaryValue b : s.view()) {
                got.add(b.toString());
            }
            expect(got.equals(Set.of("b")), "set " + got);
        });
        check("map with nested fields", () -> {
            Location l = loc("maps", "m", "k");
            MapUpdate mu = new MapUpdate()
                    .update("visits", new CounterUpdate(2))
                    .update("name", new RegisterUpdate("ann"))
                    .update("tags", new SetUpdate().add("x"))
                    .update("vip", new FlagUpdate(true))
                    .update("addr", new MapUpdate().update("city", new RegisterUpdate("oslo")));
            UpdateMap.Response r = client.execute(new UpdateMap.Builder(l, mu).withReturnDatatype(true).build());
            RiakMap m = r.getDatatype();
            expect(m.getCounter("visits").view() == 2, "visits");
            expect(m.getRegister("name").view().toString().equals("ann"), "name");
            expect(m.getFlag("vip").view(), "vip");
            expect(m.getMap("addr").getRegister("city").view().toString().equals("oslo"), "nested");
            RiakMap again = client.execute(new FetchMap.Builder(l).build()).getDatatype();
            expect(again.getSet("tags").view().size() == 1, "tags");
        });
        check("coverage plan and full bucket read with return_body", () -> {
            Namespace ns = new Namespace("default", "fbr" + RUN);
            for (int i = 0; i < 25; i++) {
                store(new Location(ns, "k" + i), "v" + i);
            }
            Map<String, String> seen = readByCoverage(ns, Map.of(), client);
            expect(seen.size() == 25, "keys " + seen.size());
            for (int i = 0; i < 25; i++) {
                expect(("v" + i).equals(seen.get("k" + i)), "k" + i + " = " + seen.get("k" + i));
            }
        });
        check("hll", () -> {
            Location l = loc("hlls", "h", "k");
            List<String> adds = new ArrayList<>();
            for (int i = 0; i < 50; i++) {
                adds.add("e" + i);
            }
            client.execute(new UpdateHll.Builder(l, new HllUpdate().addAll(adds)).build());
            long est = client.execute(new FetchHll.Builder(l).build()).getCardinality();
            expect(est >= 48 && est <= 52, "estimate " + est);
        });
        Coverage.singleNode(client, RUN);
    }
}
