package interop

// MapReduce (23/24) with the Go client's MapReduceCommand: a whole-bucket
// JavaScript job and an Erlang built-in over listed keys, collected and
// streamed; the results are checked against plain fetches.

import (
	"encoding/json"
	"fmt"
	"testing"

	riak "github.com/basho/riak-go-client"
)

// mapRed runs a job and returns every result of its response frames.
func mapRed(t *testing.T, query string) []json.RawMessage {
	t.Helper()
	cmd, err := riak.NewMapReduceCommandBuilder().WithQuery(query).Build()
	exec(t, cmd, err)
	var out []json.RawMessage
	for _, frame := range cmd.(*riak.MapReduceCommand).Response {
		if len(frame) == 0 {
			continue
		}
		var part []json.RawMessage
		if err := json.Unmarshal(frame, &part); err != nil {
			t.Fatalf("frame %q: %v", frame, err)
		}
		out = append(out, part...)
	}
	return out
}

func TestMapReduce(t *testing.T) {
	needNode(t)
	b := bucket("mapred")
	want := 0
	for i := 0; i < 12; i++ {
		obj := &riak.Object{ContentType: "application/json", Value: []byte(fmt.Sprintf(`{"n":%d}`, i))}
		store(t, b, fmt.Sprintf("k%02d", i), obj, nil, false)
		var v struct{ N int }
		if err := json.Unmarshal(fetch(t, b, fmt.Sprintf("k%02d", i)).Values[0].Value, &v); err != nil {
			t.Fatal(err)
		}
		want += v.N
	}
	sum := mapRed(t, fmt.Sprintf(`{"inputs":%q,"query":[
		{"map":{"language":"javascript","source":"function(v){return [JSON.parse(v.values[0].data).n];}"}},
		{"reduce":{"language":"javascript","name":"Riak.reduceSum"}}]}`, b))
	if len(sum) != 1 || string(sum[0]) != fmt.Sprint(want) {
		t.Fatalf("sum = %s, want [%d]", sum, want)
	}
	count := mapRed(t, fmt.Sprintf(`{"inputs":[[%q,"k01"],[%q,"k02"],[%q,"nope"]],"query":[
		{"reduce":{"language":"erlang","module":"riak_kv_mapreduce","function":"reduce_count_inputs"}}]}`, b, b, b))
	if len(count) != 1 || string(count[0]) != "3" {
		t.Fatalf("count = %s, want [3]", count)
	}
	// Streamed: one callback per frame.
	var frames int
	cmd, err := riak.NewMapReduceCommandBuilder().
		WithQuery(fmt.Sprintf(`{"inputs":%q,"query":[{"map":{"language":"javascript","name":"Riak.mapValuesJson"}}]}`, b)).
		WithStreaming(true).
		WithCallback(func(resp []byte) error {
			if len(resp) > 0 {
				frames++
			}
			return nil
		}).Build()
	exec(t, cmd, err)
	if frames == 0 {
		t.Fatal("no streamed frame")
	}
	// A bad job is an error.
	bad, err := riak.NewMapReduceCommandBuilder().WithQuery(`{"inputs":"x","query":[{"map":{"language":"cobol"}}]}`).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := client.Execute(bad); err == nil {
		t.Fatal("a job in an unknown language ran")
	}
}
