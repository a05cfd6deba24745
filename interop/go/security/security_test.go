// Package security drives a Basalt node with security enabled through the
// real Go Riak client: STARTTLS (the node's certificate from `basalt certs
// node`, verified against the CA from `basalt certs ca`), AuthReq with a
// password, then store / fetch / delete; and a wrong password refused.
//
// Refused as they should be: a user granted riak_kv.get only tries a put
// (`getonly`), a user whose only source is 10.0.0.0/8 connects from
// 127.0.0.1 (`faraway`), a wrong password (`wrong_go`, its own user: the
// client retries its connection, and failed logins lock a user out from
// an address for a cool-down); then the good user is still served.
//
// interop/run.sh's security stage sets BASALT_SECURE_PB_ADDR (host:port)
// and BASALT_SECURE_CA (the CA's PEM file) after `basalt admin security`
// made those users (see security_stage there): `interop` (password
// `interop-pw`, a password source on 127.0.0.1/32, get/put/delete on
// any), `getonly` (`getonly-pw`, 127.0.0.1/32, get on any), `faraway`
// (`faraway-pw`, a source on 10.0.0.0/8 only, get/put/delete on any),
// `wrong_go` (127.0.0.1/32). Without them the tests skip.
package security

import (
	"crypto/tls"
	"crypto/x509"
	"os"
	"strings"
	"testing"
	"time"

	riak "github.com/basho/riak-go-client"
)

func cluster(t *testing.T, user, password string) *riak.Cluster {
	addr := os.Getenv("BASALT_SECURE_PB_ADDR")
	caFile := os.Getenv("BASALT_SECURE_CA")
	if addr == "" || caFile == "" {
		t.Skip("BASALT_SECURE_PB_ADDR / BASALT_SECURE_CA not set (interop/run.sh's security stage sets them)")
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		t.Fatalf("no certificate in %s", caFile)
	}
	node, err := riak.NewNode(&riak.NodeOptions{
		RemoteAddress:  addr,
		MinConnections: 1,
		MaxConnections: 2,
		ConnectTimeout: 5 * time.Second,
		RequestTimeout: 5 * time.Second,
		AuthOptions: &riak.AuthOptions{
			User:      user,
			Password:  password,
			TlsConfig: &tls.Config{RootCAs: roots, ServerName: "127.0.0.1"},
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := riak.NewCluster(&riak.ClusterOptions{Nodes: []*riak.Node{node}, ExecutionAttempts: 1})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// Stop waits for queued commands; do not let a refused one hang the test.
		stopped := make(chan struct{})
		go func() { _ = c.Stop(); close(stopped) }()
		select {
		case <-stopped:
		case <-time.After(5 * time.Second):
		}
	})
	return c
}

func TestSecurityTLSPasswordKV(t *testing.T) {
	c := cluster(t, "interop", "interop-pw")
	store, err := riak.NewStoreValueCommandBuilder().
		WithBucket("secure").WithKey("k").
		WithContent(&riak.Object{Value: []byte("v1"), ContentType: "text/plain"}).Build()
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Execute(store); err != nil {
		t.Fatalf("store over TLS: %v", err)
	}
	fetch, _ := riak.NewFetchValueCommandBuilder().WithBucket("secure").WithKey("k").Build()
	if err := c.Execute(fetch); err != nil {
		t.Fatalf("fetch over TLS: %v", err)
	}
	res := fetch.(*riak.FetchValueCommand).Response
	if res == nil || len(res.Values) != 1 || string(res.Values[0].Value) != "v1" {
		t.Fatalf("fetched %+v", res)
	}
	del, _ := riak.NewDeleteValueCommandBuilder().WithBucket("secure").WithKey("k").Build()
	if err := c.Execute(del); err != nil {
		t.Fatalf("delete over TLS: %v", err)
	}
	fetch, _ = riak.NewFetchValueCommandBuilder().WithBucket("secure").WithKey("k").Build()
	if err := c.Execute(fetch); err != nil {
		t.Fatalf("fetch after delete: %v", err)
	}
	if res := fetch.(*riak.FetchValueCommand).Response; res == nil || !res.IsNotFound {
		t.Fatalf("after delete: %+v", res)
	}
	// Granted get/put/delete only: a bucket-props request is refused.
	props, _ := riak.NewFetchBucketPropsCommandBuilder().WithBucket("secure").Build()
	if err := c.Execute(props); err == nil {
		t.Fatal("fetch bucket props without riak_core.get_bucket succeeded")
	}
}

// The client cannot open a connection (every AuthReq answers
// "Authentication failed", then "too many failed logins"), so a command
// never succeeds: it fails, or the client keeps it queued while its
// health check retries.
func TestSecurityWrongPasswordRefused(t *testing.T) {
	neverSucceeds(t, cluster(t, "wrong_go", "not-the-password"), "a wrong password")
}

// neverSucceeds runs a ping through c: it must fail, or stay queued (the
// client cannot open a connection and its health check keeps retrying).
func neverSucceeds(t *testing.T, c *riak.Cluster, what string) {
	ping := &riak.PingCommand{}
	done := make(chan error, 1)
	go func() { done <- c.Execute(ping) }()
	select {
	case err := <-done:
		if err == nil && ping.Success() {
			t.Fatalf("%s: a ping succeeded", what)
		}
	case <-time.After(5 * time.Second):
		// Still queued: refused, as it should be.
	}
}

// A user granted riak_kv.get only: a fetch runs, a store is refused with
// the server's "Permission denied".
func TestSecurityUserWithoutGrantRefused(t *testing.T) {
	c := cluster(t, "getonly", "getonly-pw")
	fetch, _ := riak.NewFetchValueCommandBuilder().WithBucket("secure").WithKey("nokey").Build()
	if err := c.Execute(fetch); err != nil {
		t.Fatalf("fetch with riak_kv.get: %v", err)
	}
	store, _ := riak.NewStoreValueCommandBuilder().
		WithBucket("secure").WithKey("getonly").
		WithContent(&riak.Object{Value: []byte("v"), ContentType: "text/plain"}).Build()
	err := c.Execute(store)
	if err == nil {
		t.Fatal("store without riak_kv.put succeeded")
	}
	if !strings.Contains(err.Error(), "Permission denied") || !strings.Contains(err.Error(), "riak_kv.put") {
		t.Fatalf("store without riak_kv.put: %v", err)
	}
}

// A user whose only source is 10.0.0.0/8, from 127.0.0.1: every AuthReq
// answers "No matching source", so nothing runs.
func TestSecurityAddressWithoutSourceRefused(t *testing.T) {
	neverSucceeds(t, cluster(t, "faraway", "faraway-pw"), "a user without a source for 127.0.0.1")
}

// After the refusals above, the good user is still served.
func TestSecurityGoodUserServedAfterRefusals(t *testing.T) {
	c := cluster(t, "interop", "interop-pw")
	store, _ := riak.NewStoreValueCommandBuilder().
		WithBucket("secure").WithKey("after").
		WithContent(&riak.Object{Value: []byte("still"), ContentType: "text/plain"}).Build()
	if err := c.Execute(store); err != nil {
		t.Fatalf("store after the refusals: %v", err)
	}
	fetch, _ := riak.NewFetchValueCommandBuilder().WithBucket("secure").WithKey("after").Build()
	if err := c.Execute(fetch); err != nil {
		t.Fatalf("fetch after the refusals: %v", err)
	}
	res := fetch.(*riak.FetchValueCommand).Response
	if res == nil || len(res.Values) != 1 || string(res.Values[0].Value) != "still" {
		t.Fatalf("fetched %+v", res)
	}
}
