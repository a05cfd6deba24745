package interop

// Cluster tests: a 3-node Basalt cluster driven by the real Go client, both
// as one multi-node client (NewClient with the three addresses, which the
// client uses round robin) and as one client per node, so that a write
// coordinated by one node is checked through the others.
//
// interop/run.sh's cluster stage starts three `basalt start` nodes (ring 16),
// joins nodes 2 and 3 to node 1, commits, waits until node 1 reports no
// pending ownership transfers, creates the bucket type `cluster_mult`
// (allow_mult true) on node 1 and waits until nodes 2 and 3 have it (types
// travel with the gossip), and runs `go test -run '^TestCluster'`
// with BASALT_CLUSTER_ADDRS=addr1,addr2,addr3 (PB host:port, node 1 first)
// and without BASALT_PB_ADDR. Without BASALT_CLUSTER_ADDRS these tests are
// skipped, so the single-node run skips them.
//
// Bucket props and bucket types are cluster-wide (docs/server.md "Cluster",
// "Bucket metadata"): props set through node 1 must reach nodes 2 and 3.

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	riak "github.com/basho/riak-go-client"
)

var (
	// clusterClient talks to all three nodes (the client picks them round robin).
	clusterClient *riak.Client
	// nodeClients[i] talks to node i+1 only.
	nodeClients []*riak.Client
)

// clusterAddrs returns BASALT_CLUSTER_ADDRS split on commas (nil when unset).
func clusterAddrs() []string {
	v := os.Getenv("BASALT_CLUSTER_ADDRS")
	if v == "" {
		return nil
	}
	var out []string
	for _, a := range strings.Split(v, ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	return out
}

// setupCluster makes the multi-node client and one client per node.
func setupCluster(addrs []string) error {
	if len(addrs) != 3 {
		return fmt.Errorf("BASALT_CLUSTER_ADDRS: want 3 addresses, got %d (%v)", len(addrs), addrs)
	}
	c, err := riak.NewClient(&riak.NewClientOptions{RemoteAddresses: addrs})
	if err != nil {
		return fmt.Errorf("riak.NewClient(%v): %w", addrs, err)
	}
	clusterClient = c
	for _, a := range addrs {
		nc, err := riak.NewClient(&riak.NewClientOptions{RemoteAddresses: []string{a}})
		if err != nil {
			return fmt.Errorf("riak.NewClient(%s): %w", a, err)
		}
		nodeClients = append(nodeClients, nc)
	}
	return nil
}

func stopCluster() {
	for _, c := range append([]*riak.Client{clusterClient}, nodeClients...) {
		if c == nil {
			continue
		}
		if err := c.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "cluster client.Stop: %v\n", err)
		}
	}
}

func needCluster(t *testing.T) {
	t.Helper()
	if clusterClient == nil {
		t.Skip("BASALT_CLUSTER_ADDRS not set: cluster tests skipped (interop/run.sh runs them)")
	}
}

// node returns node i's client (1-based, as the node names n1..n3).
func node(i int) *riak.Client { return nodeClients[i-1] }

func execOn(t *testing.T, c *riak.Client, cmd riak.Command, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("build %T: %v", cmd, err)
	}
	if err := c.Execute(cmd); err != nil {
		t.Fatalf("execute %T: %v", cmd, err)
	}
	if !cmd.Success() {
		t.Fatalf("%T not successful", cmd)
	}
}

func storeOn(t *testing.T, c *riak.Client, typ, b, k string, obj *riak.Object, vclock []byte, w uint32) {
	t.Helper()
	builder := riak.NewStoreValueCommandBuilder().WithBucket(b).WithKey(k).WithContent(obj)
	if typ != "" {
		builder = builder.WithBucketType(typ)
	}
	if vclock != nil {
		builder = builder.WithVClock(vclock)
	}
	if w != 0 {
		builder = builder.WithW(w).WithDw(w)
	}
	cmd, err := builder.Build()
	execOn(t, c, cmd, err)
}

func fetchOn(t *testing.T, c *riak.Client, typ, b, k string) *riak.FetchValueResponse {
	t.Helper()
	builder := riak.NewFetchValueCommandBuilder().WithBucket(b).WithKey(k)
	if typ != "" {
		builder = builder.WithBucketType(typ)
	}
	cmd, err := builder.Build()
	execOn(t, c, cmd, err)
	return cmd.(*riak.FetchValueCommand).Response
}

func serverNode(t *testing.T, c *riak.Client) string {
	t.Helper()
	cmd := &riak.GetServerInfoCommand{}
	execOn(t, c, cmd, nil)
	return cmd.Response.Node
}

// TestClusterNodes checks that the per-node clients reach three distinct
// nodes (n1..n3 in order) and that the multi-node client spreads its
// requests over all of them.
func TestClusterNodes(t *testing.T) {
	needCluster(t)
	names := map[string]bool{}
	for i := 1; i <= 3; i++ {
		n := serverNode(t, node(i))
		if want := fmt.Sprintf("n%d@127.0.0.1", i); n != want {
			t.Fatalf("node %d's client reached %q, want %q", i, n, want)
		}
		names[n] = true
	}
	seen := map[string]int{}
	for i := 0; i < 6; i++ {
		seen[serverNode(t, clusterClient)]++
	}
	for n := range names {
		if seen[n] == 0 {
			t.Fatalf("the multi-node client never reached %s in 6 requests: %v", n, seen)
		}
	}
}

// TestClusterStoreReadAcrossNodes: 200 keys stored through node 1 are read
// back through node 2 and node 3; keys stored through the multi-node client
// (so coordinated by every node in turn) are read back through each node.
func TestClusterStoreReadAcrossNodes(t *testing.T) {
	needCluster(t)
	b := bucket("cluster-kv")
	const n = 200
	for i := 0; i < n; i++ {
		obj := text(fmt.Sprintf("value-%03d", i))
		obj.UserMeta = []*riak.Pair{{Key: "idx", Value: fmt.Sprint(i)}}
		storeOn(t, node(1), "", b, fmt.Sprintf("key-%03d", i), obj, nil, 0)
	}
	for _, via := range []int{2, 3} {
		for i := 0; i < n; i++ {
			k := fmt.Sprintf("key-%03d", i)
			got := fetchOn(t, node(via), "", b, k)
			if got.IsNotFound {
				t.Fatalf("%s/%s stored through node 1: not found through node %d", b, k, via)
			}
			if len(got.Values) != 1 {
				t.Fatalf("%s/%s through node %d: %d values, want 1", b, k, via, len(got.Values))
			}
			v := got.Values[0]
			if string(v.Value) != fmt.Sprintf("value-%03d", i) || v.ContentType != "text/plain" ||
				len(v.UserMeta) != 1 || v.UserMeta[0].Value != fmt.Sprint(i) {
				t.Fatalf("%s/%s through node %d: value %q, content type %q, usermeta %v",
					b, k, via, v.Value, v.ContentType, v.UserMeta)
			}
		}
	}

	const m = 30
	for i := 0; i < m; i++ {
		storeOn(t, clusterClient, "", b, fmt.Sprintf("rr-%02d", i), text(fmt.Sprintf("rr%d", i)), nil, 0)
	}
	for via := 1; via <= 3; via++ {
		for i := 0; i < m; i++ {
			k := fmt.Sprintf("rr-%02d", i)
			got := fetchOn(t, node(via), "", b, k)
			if got.IsNotFound || len(got.Values) != 1 || string(got.Values[0].Value) != fmt.Sprintf("rr%d", i) {
				t.Fatalf("%s/%s stored through the multi-node client, through node %d: not found %v, values %v",
					b, k, via, got.IsNotFound, values(got.Values))
			}
		}
	}
}

// siblingsAcrossNodes writes two concurrent values (no vclock) through
// nodes 1 and 2, expects both as siblings through node 3, resolves them
// through node 3 and expects the one value through node 1.
func siblingsAcrossNodes(t *testing.T, typ, b string) {
	t.Helper()
	storeOn(t, node(1), typ, b, "k", text("left"), nil, 0)
	storeOn(t, node(2), typ, b, "k", text("right"), nil, 0)
	got := fetchOn(t, node(3), typ, b, "k")
	if v := values(got.Values); len(v) != 2 || v[0] != "left" || v[1] != "right" {
		t.Fatalf("through node 3: want 2 siblings [left right], got %v", v)
	}
	storeOn(t, node(3), typ, b, "k", text("merged"), got.VClock, 0)
	for via := 1; via <= 3; via++ {
		resolved := fetchOn(t, node(via), typ, b, "k")
		if v := values(resolved.Values); len(v) != 1 || v[0] != "merged" {
			t.Fatalf("after resolution through node 3, through node %d: %v", via, v)
		}
	}
}

// TestClusterSiblingsBucketProps: allow_mult set with StoreBucketProps
// through node 1 reaches nodes 2 and 3 (within 20 s), then siblings across
// nodes.
func TestClusterSiblingsBucketProps(t *testing.T) {
	needCluster(t)
	b := bucket("cluster-siblings")
	cmd, err := riak.NewStoreBucketPropsCommandBuilder().WithBucket(b).WithAllowMult(true).Build()
	execOn(t, node(1), cmd, err)
	for via := 1; via <= 3; via++ {
		deadline := time.Now().Add(20 * time.Second)
		for {
			cmd, err := riak.NewFetchBucketPropsCommandBuilder().WithBucket(b).Build()
			execOn(t, node(via), cmd, err)
			p := cmd.(*riak.FetchBucketPropsCommand).Response
			if p.AllowMult && p.NVal == 3 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("props through node %d after 20 s: %+v", via, p)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	siblingsAcrossNodes(t, "", b)
}

// TestClusterSiblingsBucketType: the type `cluster_mult` (allow_mult true),
// created by run.sh on node 1 (and seen active on nodes 2 and 3).
func TestClusterSiblingsBucketType(t *testing.T) {
	needCluster(t)
	siblingsAcrossNodes(t, "cluster_mult", bucket("cluster-typed"))
}

// TestClusterIndexAndListKeys: objects with 2i entries written through
// node 1 (w = dw = 3, so every replica holds them before the coverage
// queries) are found by 2i queries and list keys through node 3, which
// must cover partitions owned by the other nodes.
func TestClusterIndexAndListKeys(t *testing.T) {
	needCluster(t)
	b := bucket("cluster-2i")
	const n = 40
	var all []string
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("k%02d", i)
		obj := text(fmt.Sprint(i))
		obj.AddToIntIndex("num_int", 1000+i)
		obj.AddToIndex("parity_bin", fmt.Sprintf("p%d", i%2))
		storeOn(t, node(1), "", b, k, obj, nil, 3)
		all = append(all, k)
	}

	t.Run("2i exact through node 3", func(t *testing.T) {
		cmd, err := riak.NewSecondaryIndexQueryCommandBuilder().WithBucket(b).
			WithIndexName("parity_bin").WithIndexKey("p1").Build()
		execOn(t, node(3), cmd, err)
		got := keysOf(cmd.(*riak.SecondaryIndexQueryCommand).Response.Results)
		var want []string
		for i := 1; i < n; i += 2 {
			want = append(want, fmt.Sprintf("k%02d", i))
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("parity_bin = p1: got %v, want %v", got, want)
		}
	})

	t.Run("2i range with terms through node 3", func(t *testing.T) {
		cmd, err := riak.NewSecondaryIndexQueryCommandBuilder().WithBucket(b).
			WithIndexName("num_int").WithIntRange(1005, 1034).WithReturnKeyAndIndex(true).Build()
		execOn(t, node(3), cmd, err)
		rs := cmd.(*riak.SecondaryIndexQueryCommand).Response.Results
		if len(rs) != 30 {
			t.Fatalf("num_int 1005..1034: %d results, want 30", len(rs))
		}
		for i, r := range rs {
			if string(r.ObjectKey) != fmt.Sprintf("k%02d", i+5) || string(r.IndexKey) != fmt.Sprint(1005+i) {
				t.Fatalf("result %d: key %q term %q", i, r.ObjectKey, r.IndexKey)
			}
		}
	})

	t.Run("2i paging through node 3", func(t *testing.T) {
		var got []string
		var cont []byte
		for page := 0; page < 10; page++ {
			builder := riak.NewSecondaryIndexQueryCommandBuilder().WithBucket(b).
				WithIndexName("num_int").WithIntRange(0, 5000).WithMaxResults(15)
			if cont != nil {
				builder = builder.WithContinuation(cont)
			}
			cmd, err := builder.Build()
			execOn(t, node(3), cmd, err)
			resp := cmd.(*riak.SecondaryIndexQueryCommand).Response
			for _, r := range resp.Results {
				got = append(got, string(r.ObjectKey))
			}
			cont = resp.Continuation
			if cont == nil {
				break
			}
		}
		if strings.Join(got, ",") != strings.Join(all, ",") {
			t.Fatalf("paged num_int: got %v, want %v", got, all)
		}
	})

	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprintf("list keys through node 3 streaming=%v", streaming), func(t *testing.T) {
			var streamed []string
			builder := riak.NewListKeysCommandBuilder().WithBucket(b).WithAllowListing().WithStreaming(streaming)
			if streaming {
				builder = builder.WithCallback(func(keys []string) error {
					streamed = append(streamed, keys...)
					return nil
				})
			}
			cmd, err := builder.Build()
			execOn(t, node(3), cmd, err)
			got := streamed
			if !streaming {
				got = cmd.(*riak.ListKeysCommand).Response.Keys
			}
			sort.Strings(got)
			if strings.Join(got, ",") != strings.Join(all, ",") {
				t.Fatalf("list keys: got %d keys %v, want %v", len(got), got, all)
			}
		})
	}
}

// TestClusterDeleteAcrossNodes: keys written through node 1 and deleted
// through node 2 are not found through node 1 (nor node 3), and list keys
// through node 1 no longer shows them.
func TestClusterDeleteAcrossNodes(t *testing.T) {
	needCluster(t)
	b := bucket("cluster-delete")
	keys := []string{"gone-1", "gone-2", "gone-3", "kept"}
	for _, k := range keys {
		storeOn(t, node(1), "", b, k, text(k), nil, 3)
	}
	for _, k := range keys[:3] {
		// Node 2 sees the key before it deletes it (no vclock: the stored one).
		if got := fetchOn(t, node(2), "", b, k); got.IsNotFound {
			t.Fatalf("%s not found through node 2 before the delete", k)
		}
		cmd, err := riak.NewDeleteValueCommandBuilder().WithBucket(b).WithKey(k).WithW(3).WithDw(3).Build()
		execOn(t, node(2), cmd, err)
	}
	for _, via := range []int{1, 3} {
		for _, k := range keys[:3] {
			if got := fetchOn(t, node(via), "", b, k); !got.IsNotFound {
				t.Fatalf("%s deleted through node 2: found through node %d: %v", k, via, values(got.Values))
			}
		}
		if got := fetchOn(t, node(via), "", b, "kept"); got.IsNotFound || len(got.Values) != 1 {
			t.Fatalf("kept: through node %d: not found %v, values %v", via, got.IsNotFound, values(got.Values))
		}
	}
	cmd, err := riak.NewListKeysCommandBuilder().WithBucket(b).WithAllowListing().Build()
	execOn(t, node(1), cmd, err)
	if got := cmd.(*riak.ListKeysCommand).Response.Keys; len(got) != 1 || got[0] != "kept" {
		t.Fatalf("list keys through node 1 after deletes: %v, want [kept]", got)
	}
}
