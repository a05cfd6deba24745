package interop

// Bucket types (RpbGetBucketTypeReq 31 / RpbSetBucketTypeReq 32), typed
// keying and preflists (RpbGetBucketKeyPreflistReq 33/34). interop/run.sh
// creates the types with `basalt admin bucket-type`: plain (Riak 2.x
// custom-type defaults, allow_mult true), nomult (allow_mult false),
// interop_props (changed here) and interop_inactive (never activated).

import (
	"fmt"
	"sort"
	"strings"
	"testing"
	"time"

	riak "github.com/basho/riak-go-client"
)

// tryExec executes cmd and returns its error, failing the test if the
// request takes more than 10 s (an error must come back, not a hang).
func tryExec(t *testing.T, cmd riak.Command, err error) error {
	t.Helper()
	needNode(t)
	if err != nil {
		t.Fatalf("build %T: %v", cmd, err)
	}
	done := make(chan error, 1)
	go func() { done <- client.Execute(cmd) }()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatalf("%T did not complete within 10 s", cmd)
		return nil
	}
}

func fetchT(t *testing.T, typ, b, k string) *riak.FetchValueResponse {
	t.Helper()
	cmd, err := riak.NewFetchValueCommandBuilder().WithBucketType(typ).WithBucket(b).WithKey(k).Build()
	exec(t, cmd, err)
	return cmd.(*riak.FetchValueCommand).Response
}

func storeT(t *testing.T, typ, b, k string, obj *riak.Object) {
	t.Helper()
	cmd, err := riak.NewStoreValueCommandBuilder().WithBucketType(typ).WithBucket(b).WithKey(k).
		WithContent(obj).Build()
	exec(t, cmd, err)
}

func TestTypedStoreFetchDeleteIsolated(t *testing.T) {
	b := bucket("typed")
	store(t, b, "k", text("in default"), nil, false)
	storeT(t, "plain", b, "k", text("in plain"))
	storeT(t, "plain", b, "only-typed", text("x"))

	if got := values(fetchT(t, "plain", b, "k").Values); len(got) != 1 || got[0] != "in plain" {
		t.Fatalf("plain/%s/k = %v", b, got)
	}
	if got := values(fetch(t, b, "k").Values); len(got) != 1 || got[0] != "in default" {
		t.Fatalf("default/%s/k = %v", b, got)
	}
	if got := values(fetchT(t, "default", b, "k").Values); len(got) != 1 || got[0] != "in default" {
		t.Fatalf(`type "default" /%s/k = %v`, b, got)
	}
	if !fetch(t, b, "only-typed").IsNotFound {
		t.Fatal("typed-only key visible in the default type")
	}
	if !fetchT(t, "nomult", b, "k").IsNotFound {
		t.Fatal("plain key visible in type nomult")
	}

	// Delete in the typed bucket leaves the default one alone.
	cmd, err := riak.NewDeleteValueCommandBuilder().WithBucketType("plain").WithBucket(b).WithKey("k").Build()
	exec(t, cmd, err)
	if !fetchT(t, "plain", b, "k").IsNotFound {
		t.Fatal("typed key still found after delete")
	}
	if got := values(fetch(t, b, "k").Values); len(got) != 1 || got[0] != "in default" {
		t.Fatalf("default key after typed delete: %v", got)
	}
}

func TestTypedAllowMult(t *testing.T) {
	// plain has allow_mult=true (custom-type default), nomult false, so
	// two blind writes give siblings in plain and one value in nomult.
	b := bucket("typed-mult")
	for _, v := range []string{"one", "two"} {
		storeT(t, "plain", b, "k", text(v))
		storeT(t, "nomult", b, "k", text(v))
	}
	if got := values(fetchT(t, "plain", b, "k").Values); strings.Join(got, ",") != "one,two" {
		t.Fatalf("plain siblings %v", got)
	}
	if got := values(fetchT(t, "nomult", b, "k").Values); strings.Join(got, ",") != "two" {
		t.Fatalf("nomult values %v", got)
	}
}

func TestTypedListKeysAndBuckets(t *testing.T) {
	b := bucket("typed-list")
	bDefault := bucket("typed-list-default-only")
	want := []string{"a", "b", "c"}
	for _, k := range want {
		storeT(t, "plain", b, k, text(k))
	}
	store(t, b, "zz-default", text("d"), nil, false)
	store(t, bDefault, "k", text("d"), nil, false)

	for _, streaming := range []bool{false, true} {
		t.Run(fmt.Sprintf("keys streaming=%v", streaming), func(t *testing.T) {
			var streamed []string
			builder := riak.NewListKeysCommandBuilder().WithBucketType("plain").WithBucket(b).
				WithAllowListing().WithStreaming(streaming)
			if streaming {
				builder = builder.WithCallback(func(keys []string) error {
					streamed = append(streamed, keys...)
					return nil
				})
			}
			cmd, err := builder.Build()
			exec(t, cmd, err)
			got := streamed
			if !streaming {
				got = cmd.(*riak.ListKeysCommand).Response.Keys
			}
			sort.Strings(got)
			if strings.Join(got, ",") != strings.Join(want, ",") {
				t.Fatalf("typed keys %v", got)
			}
		})
		t.Run(fmt.Sprintf("buckets streaming=%v", streaming), func(t *testing.T) {
			list := func(typ string) map[string]bool {
				var streamed []string
				builder := riak.NewListBucketsCommandBuilder().WithBucketType(typ).
					WithAllowListing().WithStreaming(streaming)
				if streaming {
					builder = builder.WithCallback(func(buckets []string) error {
						streamed = append(streamed, buckets...)
						return nil
					})
				}
				cmd, err := builder.Build()
				exec(t, cmd, err)
				got := streamed
				if !streaming {
					got = cmd.(*riak.ListBucketsCommand).Response.Buckets
				}
				set := map[string]bool{}
				for _, name := range got {
					if set[name] {
						t.Fatalf("type %s: bucket %q listed twice", typ, name)
					}
					set[name] = true
				}
				return set
			}
			plain := list("plain")
			if !plain[b] || plain[bDefault] {
				t.Fatalf("plain buckets: has %s=%v, has default-only %s=%v", b, plain[b], bDefault, plain[bDefault])
			}
			def := list("default")
			if !def[b] || !def[bDefault] {
				t.Fatalf("default buckets: has %s=%v, has %s=%v", b, def[b], bDefault, def[bDefault])
			}
			for name := range def {
				if strings.HasPrefix(name, "\x00bt\x00") {
					t.Fatalf("storage bucket name leaked into the default listing: %q", name)
				}
			}
			if nomult := list("nomult"); nomult[b] {
				t.Fatalf("plain bucket %s listed in nomult", b)
			}
		})
	}
}

func TestTypedSecondaryIndexes(t *testing.T) {
	b := bucket("typed-2i")
	for i := 0; i < 10; i++ {
		obj := text(fmt.Sprintf("v%d", i))
		obj.AddToIntIndex("n_int", i)
		obj.AddToIndex("tag_bin", "typed")
		storeT(t, "plain", b, fmt.Sprintf("t%d", i), obj)
	}
	// Same bucket name and index in the default type: must not show up.
	for i := 0; i < 5; i++ {
		obj := text("d")
		obj.AddToIntIndex("n_int", i)
		obj.AddToIndex("tag_bin", "typed")
		store(t, b, fmt.Sprintf("d%d", i), obj, nil, false)
	}

	resp := query(t, riak.NewSecondaryIndexQueryCommandBuilder().WithBucketType("plain").WithBucket(b).
		WithIndexName("tag_bin").WithIndexKey("typed"))
	if got := keysOf(resp.Results); len(got) != 10 || got[0] != "t0" || got[9] != "t9" {
		t.Fatalf("typed exact match %v", got)
	}
	resp = query(t, riak.NewSecondaryIndexQueryCommandBuilder().WithBucketType("plain").WithBucket(b).
		WithIndexName("n_int").WithIntRange(3, 6).WithReturnKeyAndIndex(true))
	if got := keysOf(resp.Results); strings.Join(got, ",") != "t3,t4,t5,t6" {
		t.Fatalf("typed range %v", got)
	}
	for _, r := range resp.Results {
		if !strings.HasPrefix(string(r.ObjectKey), "t") || len(r.IndexKey) == 0 {
			t.Fatalf("typed range result %+v", r)
		}
	}
	// Paging within the type.
	page := query(t, riak.NewSecondaryIndexQueryCommandBuilder().WithBucketType("plain").WithBucket(b).
		WithIndexName("n_int").WithIntRange(0, 100).WithMaxResults(6))
	if len(page.Results) != 6 || len(page.Continuation) == 0 {
		t.Fatalf("typed page 1: %d results, continuation %q", len(page.Results), page.Continuation)
	}
	rest := query(t, riak.NewSecondaryIndexQueryCommandBuilder().WithBucketType("plain").WithBucket(b).
		WithIndexName("n_int").WithIntRange(0, 100).WithMaxResults(6).WithContinuation(page.Continuation))
	all := append(keysOf(page.Results), keysOf(rest.Results)...)
	sort.Strings(all)
	if len(all) != 10 || all[0] != "t0" || all[9] != "t9" {
		t.Fatalf("typed pages %v", all)
	}
	// And the default type sees only its own keys.
	resp = query(t, riak.NewSecondaryIndexQueryCommandBuilder().WithBucket(b).
		WithIndexName("tag_bin").WithIndexKey("typed"))
	if got := keysOf(resp.Results); strings.Join(got, ",") != "d0,d1,d2,d3,d4" {
		t.Fatalf("default-type query %v", got)
	}
}

func fetchTypeProps(t *testing.T, typ string) *riak.FetchBucketPropsResponse {
	t.Helper()
	cmd, err := riak.NewFetchBucketTypePropsCommandBuilder().WithBucketType(typ).Build()
	exec(t, cmd, err)
	return cmd.(*riak.FetchBucketTypePropsCommand).Response
}

func TestBucketTypeProps(t *testing.T) {
	if p := fetchTypeProps(t, "default"); p.NVal != 3 || p.AllowMult {
		t.Fatalf("default type props %+v", p)
	}
	if p := fetchTypeProps(t, "plain"); p.NVal != 3 || !p.AllowMult || p.LastWriteWins {
		t.Fatalf("plain type props %+v", p)
	}
	if p := fetchTypeProps(t, "nomult"); p.AllowMult {
		t.Fatalf("nomult type props %+v", p)
	}

	cmd, err := riak.NewStoreBucketTypePropsCommandBuilder().WithBucketType("interop_props").
		WithAllowMult(false).WithR(1).WithW(2).Build()
	exec(t, cmd, err)
	p := fetchTypeProps(t, "interop_props")
	if p.AllowMult || p.R != 1 || p.W != 2 || p.NVal != 3 {
		t.Fatalf("interop_props after store %+v", p)
	}
	// A bucket in the type inherits the type's props.
	b := bucket("typed-props")
	bp, err := riak.NewFetchBucketPropsCommandBuilder().WithBucketType("interop_props").WithBucket(b).Build()
	exec(t, bp, err)
	if got := bp.(*riak.FetchBucketPropsCommand).Response; got.AllowMult || got.R != 1 || got.W != 2 {
		t.Fatalf("bucket in interop_props %+v", got)
	}
	// n_val of an existing type can change, as in Riak (the Go client's own
	// TestSetAndResetBucketTypeProperties does 3 -> 4 -> 3 on `plain`).
	for _, n := range []uint32{4, 3} {
		cmd, err = riak.NewStoreBucketTypePropsCommandBuilder().WithBucketType("interop_props").WithNVal(n).Build()
		exec(t, cmd, err)
		if p := fetchTypeProps(t, "interop_props"); p.NVal != n {
			t.Fatalf("n_val %d after storing %d", p.NVal, n)
		}
	}
	// Invalid props are refused.
	cmd, err = riak.NewStoreBucketTypePropsCommandBuilder().WithBucketType("interop_props").WithNVal(0).Build()
	if err := tryExec(t, cmd, err); err == nil || !strings.Contains(err.Error(), "n_val") {
		t.Fatalf("n_val 0: want an n_val error, got %v", err)
	}
}

func preflist(t *testing.T, typ, b, k string) []*riak.PreflistItem {
	t.Helper()
	cmd, err := riak.NewFetchPreflistCommandBuilder().WithBucketType(typ).WithBucket(b).WithKey(k).Build()
	exec(t, cmd, err)
	return cmd.(*riak.FetchPreflistCommand).Response.Preflist
}

func TestFetchPreflist(t *testing.T) {
	b := bucket("preflist")
	check := func(typ, k string, nval int) []int64 {
		pl := preflist(t, typ, b, k)
		if len(pl) != nval {
			t.Fatalf("%s/%s/%s: %d entries, want %d", typ, b, k, len(pl), nval)
		}
		seen := map[int64]bool{}
		parts := make([]int64, 0, nval)
		for _, it := range pl {
			if !it.Primary || it.Node == "" || it.Partition < 0 || seen[it.Partition] {
				t.Fatalf("%s/%s/%s: bad preflist %+v", typ, b, k, *it)
			}
			seen[it.Partition] = true
			parts = append(parts, it.Partition)
		}
		return parts
	}
	differs := false
	for i := 0; i < 8; i++ {
		k := fmt.Sprintf("k%d", i)
		def := check("default", k, 3)
		typed := check("plain", k, 3)
		differs = differs || def[0] != typed[0]
		// Stable across calls.
		if again := check("plain", k, 3); fmt.Sprint(again) != fmt.Sprint(typed) {
			t.Fatalf("preflist changed: %v then %v", typed, again)
		}
	}
	if !differs {
		t.Fatal("typed and default preflists identical for 8 keys: type not hashed")
	}

	// The bucket's n_val decides the length.
	nb := bucket("preflist-n2")
	cmd, err := riak.NewStoreBucketPropsCommandBuilder().WithBucketType("plain").WithBucket(nb).WithNVal(2).Build()
	exec(t, cmd, err)
	if pl := preflist(t, "plain", nb, "k"); len(pl) != 2 {
		t.Fatalf("n_val=2 bucket: %d entries", len(pl))
	}
}

func TestUnknownAndInactiveTypeErrors(t *testing.T) {
	b := bucket("badtype")
	cases := []struct {
		typ, want string
	}{
		{"no_such_type", "No bucket-type named 'no_such_type'"},
		{"interop_inactive", "not active"},
	}
	for _, c := range cases {
		t.Run(c.typ, func(t *testing.T) {
			builds := map[string]func() (riak.Command, error){
				"fetch": func() (riak.Command, error) {
					return riak.NewFetchValueCommandBuilder().WithBucketType(c.typ).WithBucket(b).WithKey("k").Build()
				},
				"store": func() (riak.Command, error) {
					return riak.NewStoreValueCommandBuilder().WithBucketType(c.typ).WithBucket(b).WithKey("k").
						WithContent(text("v")).Build()
				},
				"delete": func() (riak.Command, error) {
					return riak.NewDeleteValueCommandBuilder().WithBucketType(c.typ).WithBucket(b).WithKey("k").Build()
				},
				"list keys": func() (riak.Command, error) {
					return riak.NewListKeysCommandBuilder().WithBucketType(c.typ).WithBucket(b).WithAllowListing().Build()
				},
				"list keys streaming": func() (riak.Command, error) {
					return riak.NewListKeysCommandBuilder().WithBucketType(c.typ).WithBucket(b).WithAllowListing().
						WithStreaming(true).WithCallback(func([]string) error { return nil }).Build()
				},
				"list buckets": func() (riak.Command, error) {
					return riak.NewListBucketsCommandBuilder().WithBucketType(c.typ).WithAllowListing().Build()
				},
				"2i": func() (riak.Command, error) {
					return riak.NewSecondaryIndexQueryCommandBuilder().WithBucketType(c.typ).WithBucket(b).
						WithIndexName("x_bin").WithIndexKey("y").Build()
				},
				"preflist": func() (riak.Command, error) {
					return riak.NewFetchPreflistCommandBuilder().WithBucketType(c.typ).WithBucket(b).WithKey("k").Build()
				},
				"bucket props": func() (riak.Command, error) {
					return riak.NewFetchBucketPropsCommandBuilder().WithBucketType(c.typ).WithBucket(b).Build()
				},
			}
			for name, build := range builds {
				cmd, err := build()
				err = tryExec(t, cmd, err)
				if err == nil || !strings.Contains(err.Error(), c.want) {
					t.Errorf("%s in type %s: want error containing %q, got %v", name, c.typ, c.want, err)
				}
			}
		})
	}
	// Type props of an unknown type: error too.
	cmd, err := riak.NewFetchBucketTypePropsCommandBuilder().WithBucketType("no_such_type").Build()
	if err := tryExec(t, cmd, err); err == nil || !strings.Contains(err.Error(), "no_such_type") {
		t.Fatalf("type props of unknown type: %v", err)
	}
	// The connections still work afterwards.
	storeT(t, "plain", b, "after", text("ok"))
	if got := values(fetchT(t, "plain", b, "after").Values); len(got) != 1 {
		t.Fatalf("after errors: %v", got)
	}
}
