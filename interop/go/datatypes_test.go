package interop

// Riak data types through the real Go client (DtFetch/DtUpdate 80-83 and
// the 1.4 counters 50-53), in the bucket types run.sh creates: `counters`,
// `sets`, `maps`, `hlls`, `gsets`. Covered: counter increments with a
// generated key, set add then remove with the fetched context, a map with
// counter, set, register, flag and nested map fields and a field removed,
// an HLL estimate, a GSet, and a legacy counter in an allow_mult bucket.

import (
	"sort"
	"testing"

	riak "github.com/basho/riak-go-client"
)

func TestDataTypeCounter(t *testing.T) {
	cmd, err := riak.NewUpdateCounterCommandBuilder().WithBucketType("counters").
		WithBucket("dt" + run).WithIncrement(10).WithReturnBody(true).Build()
	exec(t, cmd, err)
	up := cmd.(*riak.UpdateCounterCommand).Response
	if up.GeneratedKey == "" || up.CounterValue != 10 {
		t.Fatalf("update: key %q value %d", up.GeneratedKey, up.CounterValue)
	}
	cmd, err = riak.NewUpdateCounterCommandBuilder().WithBucketType("counters").
		WithBucket("dt" + run).WithKey(up.GeneratedKey).WithIncrement(-3).Build()
	exec(t, cmd, err)
	cmd, err = riak.NewFetchCounterCommandBuilder().WithBucketType("counters").
		WithBucket("dt" + run).WithKey(up.GeneratedKey).Build()
	exec(t, cmd, err)
	if got := cmd.(*riak.FetchCounterCommand).Response.CounterValue; got != 7 {
		t.Fatalf("counter %d, want 7", got)
	}
}

func fetchSet(t *testing.T, key string) ([]string, []byte) {
	t.Helper()
	cmd, err := riak.NewFetchSetCommandBuilder().WithBucketType("sets").
		WithBucket("dt" + run).WithKey(key).Build()
	exec(t, cmd, err)
	rsp := cmd.(*riak.FetchSetCommand).Response
	var out []string
	for _, v := range rsp.SetValue {
		out = append(out, string(v))
	}
	sort.Strings(out)
	return out, rsp.Context
}

func TestDataTypeSetRemoveWithContext(t *testing.T) {
	cmd, err := riak.NewUpdateSetCommandBuilder().WithBucketType("sets").WithBucket("dt"+run).
		WithKey("s").WithAdditions([]byte("a"), []byte("b"), []byte("c")).Build()
	exec(t, cmd, err)
	got, ctx := fetchSet(t, "s")
	if len(got) != 3 || len(ctx) == 0 {
		t.Fatalf("set %v, context %d bytes", got, len(ctx))
	}
	cmd, err = riak.NewUpdateSetCommandBuilder().WithBucketType("sets").WithBucket("dt" + run).
		WithKey("s").WithContext(ctx).WithRemovals([]byte("b")).Build()
	exec(t, cmd, err)
	if got, _ = fetchSet(t, "s"); len(got) != 2 || got[0] != "a" || got[1] != "c" {
		t.Fatalf("set after remove %v", got)
	}
}

func TestDataTypeMap(t *testing.T) {
	op := &riak.MapOperation{}
	op.IncrementCounter("visits", 2).AddToSet("tags", []byte("x")).
		SetRegister("name", []byte("ann")).SetFlag("vip", true)
	op.Map("addr").SetRegister("city", []byte("oslo"))
	cmd, err := riak.NewUpdateMapCommandBuilder().WithBucketType("maps").WithBucket("dt" + run).
		WithKey("m").WithMapOperation(op).WithReturnBody(true).Build()
	exec(t, cmd, err)
	m := cmd.(*riak.UpdateMapCommand).Response.Map
	if m.Counters["visits"] != 2 || string(m.Registers["name"]) != "ann" || !m.Flags["vip"] ||
		len(m.Sets["tags"]) != 1 || string(m.Maps["addr"].Registers["city"]) != "oslo" {
		t.Fatalf("map %+v", m)
	}
	ctx := cmd.(*riak.UpdateMapCommand).Response.Context
	rm := &riak.MapOperation{}
	rm.RemoveSet("tags")
	cmd, err = riak.NewUpdateMapCommandBuilder().WithBucketType("maps").WithBucket("dt" + run).
		WithKey("m").WithContext(ctx).WithMapOperation(rm).Build()
	exec(t, cmd, err)
	cmd, err = riak.NewFetchMapCommandBuilder().WithBucketType("maps").WithBucket("dt" + run).
		WithKey("m").Build()
	exec(t, cmd, err)
	m = cmd.(*riak.FetchMapCommand).Response.Map
	if _, ok := m.Sets["tags"]; ok || m.Counters["visits"] != 2 {
		t.Fatalf("map after removing tags %+v", m)
	}
}

func TestDataTypeHllAndGSet(t *testing.T) {
	var adds [][]byte
	for _, s := range []string{"a", "b", "c", "b"} {
		adds = append(adds, []byte(s))
	}
	cmd, err := riak.NewUpdateHllCommandBuilder().WithBucketType("hlls").WithBucket("dt" + run).
		WithKey("h").WithAdditions(adds...).Build()
	exec(t, cmd, err)
	cmd, err = riak.NewFetchHllCommandBuilder().WithBucketType("hlls").WithBucket("dt" + run).
		WithKey("h").Build()
	exec(t, cmd, err)
	if got := cmd.(*riak.FetchHllCommand).Response.Cardinality; got != 3 {
		t.Fatalf("hll estimate %d, want 3", got)
	}
	cmd, err = riak.NewUpdateGSetCommandBuilder().WithBucketType("gsets").WithBucket("dt" + run).
		WithKey("g").WithAdditions(adds...).Build()
	exec(t, cmd, err)
	// The client fetches a GSet with its set command (as its own suite does).
	cmd, err = riak.NewFetchSetCommandBuilder().WithBucketType("gsets").WithBucket("dt" + run).
		WithKey("g").Build()
	exec(t, cmd, err)
	if got := len(cmd.(*riak.FetchSetCommand).Response.SetValue); got != 3 {
		t.Fatalf("gset has %d elements, want 3", got)
	}
}

func TestDataTypeLegacyCounter(t *testing.T) {
	props, err := riak.NewStoreBucketPropsCommandBuilder().WithBucket("legacy" + run).
		WithAllowMult(true).Build()
	exec(t, props, err)
	for _, n := range []int64{5, -2} {
		cmd, err := riak.NewUpdateCounterCommandBuilder().WithBucket("legacy" + run).
			WithKey("c").WithIncrement(n).Build()
		exec(t, cmd, err)
	}
	cmd, err := riak.NewFetchCounterCommandBuilder().WithBucket("legacy" + run).WithKey("c").Build()
	exec(t, cmd, err)
	if got := cmd.(*riak.FetchCounterCommand).Response.CounterValue; got != 3 {
		t.Fatalf("legacy counter %d, want 3", got)
	}
}
