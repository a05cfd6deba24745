// Coverage plans (RpbCoverageReq 70) as riak-client 2.1.1's own coverage
// tests use them (ITestCoveragePlan, ITestFullBucketRead): our own code,
// making the same calls and checking what those tests assert.
//
// One node (Main.checks): a plan with min_partitions 5 has more than 5
// entries (obtainCoveragePlan); reading every entry with BucketIndexQuery
// and its coverage context gives every key (fetchAllDataByUsingCoverageContext);
// an alternative for an entry is refused with primary_partition_unavailable,
// as Riak refuses it on one node (it leaves out the failed entry's node, and
// the client's README says these tests "need cluster to run").
//
// Cluster (Main.clusterChecks, three nodes): obtainAlternativeCoveragePlan
// (the alternative is on another host:port with another context),
// alternativeCoveragePlanShouldFailIfNoPrimaryPartitionAvailable (n_val - 1
// alternatives, each failed entry listed as unavailable, then the expected
// exception text), queryDataByUsingAnAlternateCoveragePlan (the alternative
// entry, read from its own node with FullBucketRead paged by 2 with
// return_body, gives the failed entry's keys and values).
package basalt.interop;

import static basalt.interop.Main.check;
import static basalt.interop.Main.expect;

import com.basho.riak.client.api.RiakClient;
import com.basho.riak.client.api.cap.Quorum;
import com.basho.riak.client.api.commands.buckets.FetchBucketProperties;
import com.basho.riak.client.api.commands.indexes.BinIndexQuery;
import com.basho.riak.client.api.commands.indexes.BucketIndexQuery;
import com.basho.riak.client.api.commands.kv.CoveragePlan;
import com.basho.riak.client.api.commands.kv.FullBucketRead;
import com.basho.riak.client.api.commands.kv.StoreValue;
import com.basho.riak.client.core.operations.CoveragePlanOperation.Response.CoverageEntry;
import com.basho.riak.client.core.query.Location;
import com.basho.riak.client.core.query.Namespace;
import com.basho.riak.client.core.query.RiakObject;
import com.basho.riak.client.core.query.indexes.LongIntIndex;
import com.basho.riak.client.core.util.BinaryValue;
import com.basho.riak.client.core.util.HostAndPort;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedList;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;

final class Coverage {
    static final int MIN_PARTITIONS = 5;
    static final int VALUES = 100;
    static final String UNAVAILABLE =
            "com.basho.riak.client.core.netty.RiakResponseException: primary_partition_unavailable";

    private Coverage() {}

    /** As ITestBase.setupIndexTestData: k0..k99 = "v" + i, plain/text, creationNo_int = i. */
    static void setupIndexTestData(List<RiakClient> clients, Namespace ns) throws Exception {
        for (long i = 0; i < VALUES; i++) {
            RiakObject o = new RiakObject().setValue(BinaryValue.create("v" + i)).setContentType("plain/text");
            o.getIndexes().getIndex(LongIntIndex.named("creationNo")).add(i);
            // w = 3: every replica holds the key before an entry is read from
            // another replica (the client's test sleeps 1 s instead).
            clients.get((int) (i % clients.size())).execute(new StoreValue.Builder(o)
                    .withLocation(new Location(ns, "k" + i))
                    .withOption(StoreValue.Option.W, new Quorum(3))
                    .build());
        }
    }

    static List<CoverageEntry> entries(CoveragePlan.Response r) {
        List<CoverageEntry> out = new ArrayList<>();
        for (CoverageEntry ce : r) {
            out.add(ce);
        }
        return out;
    }

    static CoveragePlan.Response alternative(RiakClient c, Namespace ns, CoverageEntry failed,
            List<CoverageEntry> unavailable) throws Exception {
        return c.execute(CoveragePlan.Builder.create(ns)
                .withMinPartitions(MIN_PARTITIONS)
                .withReplaceCoverageEntry(failed)
                .withUnavailableCoverageEntries(unavailable)
                .build());
    }

    /** Fails unless `run` throws an ExecutionException with the client test's expected text. */
    static void expectUnavailable(Main.Check run) throws Exception {
        try {
            run.run();
        } catch (ExecutionException e) {
            expect(String.valueOf(e.getMessage()).contains(UNAVAILABLE), "message: " + e.getMessage());
            return;
        }
        throw new AssertionError("no error; expected " + UNAVAILABLE);
    }

    /**
     * As ITestFullBucketRead.readDataForCoverageEntry: FullBucketRead of one
     * entry with return_body, max_results 2 and continuations, through the
     * client for the entry's host:port; key -> value.
     */
    static Map<String, String> readEntry(Map<String, RiakClient> byHost, Namespace ns, CoverageEntry ce)
            throws Exception {
        RiakClient rc = byHost.get(ce.getHost() + ":" + ce.getPort());
        expect(rc != null, "entry on an unknown node " + ce.getHost() + ":" + ce.getPort());
        Map<String, String> out = new HashMap<>();
        BinaryValue continuation = null;
        int pages = 0;
        do {
            FullBucketRead.Response r = rc.execute(new FullBucketRead.Builder(ns, ce.getCoverageContext())
                    .withReturnBody(true)
                    .withMaxResults(2)
                    .withPaginationSort(true)
                    .withContinuation(continuation)
                    .build());
            if (r.hasEntries()) {
                for (FullBucketRead.Response.Entry e : r.getEntries()) {
                    expect(e.hasFetchedValue(), "a body");
                    RiakObject o = e.getFetchedValue().getValue(RiakObject.class);
                    out.put(e.getRiakObjectLocation().getKeyAsString(), o.getValue().toString());
                }
            }
            continuation = r.getContinuation();
            expect(++pages < 1000, "paging ends");
        } while (continuation != null);
        return out;
    }

    /** The one-node checks (Main.checks). */
    static void singleNode(RiakClient client, String run) {
        Namespace ns = new Namespace("default", "cp" + run);
        check("coverage plan with min_partitions (ITestCoveragePlan.obtainCoveragePlan)", () -> {
            List<CoverageEntry> es = entries(client.execute(
                    CoveragePlan.Builder.create(ns).withMinPartitions(MIN_PARTITIONS).build()));
            expect(es.size() > MIN_PARTITIONS, "entries " + es.size());
        });
        check("every entry by BucketIndexQuery (ITestCoveragePlan.fetchAllDataByUsingCoverageContext)", () -> {
            setupIndexTestData(List.of(client), ns);
            Set<String> keys = new HashSet<>();
            for (CoverageEntry ce : client.execute(CoveragePlan.Builder.create(ns).build())) {
                BinIndexQuery.Response r = client.execute(
                        new BucketIndexQuery.Builder(ns, ce.getCoverageContext()).withTimeout(2000).build());
                for (BinIndexQuery.Response.Entry<String> e : r.getEntries()) {
                    keys.add(e.getRiakObjectLocation().getKeyAsString());
                }
            }
            expect(keys.size() == VALUES, "keys " + keys.size());
        });
        check("alternative coverage plan on one node: primary_partition_unavailable, as Riak", () -> {
            CoverageEntry failed = entries(client.execute(
                    CoveragePlan.Builder.create(ns).withMinPartitions(MIN_PARTITIONS).build())).get(0);
            expectUnavailable(() -> alternative(client, ns, failed, Collections.singletonList(failed)));
        });
    }

    /** The cluster checks (Main.clusterChecks): `byHost` maps each node's host:port to its client. */
    static void cluster(List<RiakClient> clients, Map<String, RiakClient> byHost, String run) {
        RiakClient client = clients.get(0);
        Namespace ns = new Namespace("default", "alt" + run);
        check("cluster: ITestCoveragePlan.obtainAlternativeCoveragePlan", () -> {
            List<CoverageEntry> es = entries(client.execute(
                    CoveragePlan.Builder.create(ns).withMinPartitions(MIN_PARTITIONS).build()));
            expect(es.size() > MIN_PARTITIONS, "entries " + es.size());
            CoverageEntry failed = es.get(0);
            List<CoverageEntry> alt = entries(alternative(client, ns, failed, Collections.singletonList(failed)));
            expect(!alt.isEmpty(), "an alternative");
            HostAndPort failedAt = HostAndPort.fromParts(failed.getHost(), failed.getPort());
            for (CoverageEntry ce : alt) {
                expect(!HostAndPort.fromParts(ce.getHost(), ce.getPort()).equals(failedAt),
                        "not on the failed host " + failedAt);
                expect(!Arrays.equals(ce.getCoverageContext(), failed.getCoverageContext()), "another context");
            }
        });
        check("cluster: ITestCoveragePlan.alternativeCoveragePlanShouldFailIfNoPrimaryPartitionAvailable", () -> {
            int nVal = client.execute(new FetchBucketProperties.Builder(ns).build()).getBucketProperties().getNVal();
            CoverageEntry failed = entries(client.execute(
                    CoveragePlan.Builder.create(ns).withMinPartitions(MIN_PARTITIONS).build())).get(0);
            List<CoverageEntry> unavailable = new LinkedList<>();
            for (int i = 0; i < nVal - 1; i++) {
                unavailable.add(failed);
                CoveragePlan.Response r = alternative(client, ns, failed, unavailable);
                expect(r.iterator().hasNext(), "alternative " + (i + 1));
                failed = r.iterator().next();
            }
            unavailable.add(failed);
            CoverageEntry last = failed;
            // Every primary of the keyspace is listed as unavailable now.
            expectUnavailable(() -> alternative(client, ns, last, unavailable));
        });
        check("cluster: ITestFullBucketRead.queryDataByUsingAnAlternateCoveragePlan", () -> {
            Namespace data = new Namespace("default", "fbr_alt" + run);
            setupIndexTestData(clients, data);
            List<CoverageEntry> es = entries(client.execute(
                    CoveragePlan.Builder.create(data).withMinPartitions(MIN_PARTITIONS).build()));
            expect(es.size() > MIN_PARTITIONS, "entries " + es.size());
            CoverageEntry failed = es.get(0);
            Map<String, String> original = readEntry(byHost, data, failed);
            expect(!original.isEmpty(), "keys in the first entry");
            CoveragePlan.Response r = alternative(client, data, failed, Collections.singletonList(failed));
            expect(r.iterator().hasNext(), "an alternative");
            Map<String, String> again = readEntry(byHost, data, r.iterator().next());
            expect(again.equals(original), "the same keys and values: " + original.keySet() + " vs " + again.keySet());
            // And over the whole plan: every entry's alternative gives its keys.
            int keys = 0;
            for (CoverageEntry ce : es) {
                Map<String, String> mine = readEntry(byHost, data, ce);
                CoverageEntry alt = alternative(client, data, ce, Collections.singletonList(ce)).iterator().next();
                expect(readEntry(byHost, data, alt).equals(mine), "alternative of " + ce.getDescription());
                keys += mine.size();
            }
            expect(keys == VALUES, "keys " + keys);
        });
    }
}
