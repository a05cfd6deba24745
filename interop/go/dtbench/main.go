// dtbench: data-type update throughput through the real Go Riak client
// (riak-go-client, DtUpdateReq 82) against running Basalt nodes, for the
// figures in docs/benchmarks/2026-11-24-1950-data-type-update-throughput.md.
// Not part of the tests (no assertions).
//
//	go run ./dtbench -addrs 127.0.0.1:8087[,...] -op counter|set \
//	    -type counters|sets -workers 16 -keys 100 -duration 20s
//
// Each of `workers` goroutines loops for `duration`: a counter increment
// of 1, or a set add of a new element ("w<worker>-<n>", so sets grow by
// one element per update), on a key chosen uniformly from `keys` keys of
// one bucket. It prints the successful updates per second, the error
// count and the latency percentiles (client side, whole request). The
// client spreads requests over the given addresses.
package main

import (
	"flag"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	riak "github.com/basho/riak-go-client"
)

func main() {
	addrs := flag.String("addrs", "127.0.0.1:8087", "PB addresses, comma-separated")
	op := flag.String("op", "counter", "counter or set")
	btype := flag.String("type", "", "bucket type (default: counters / sets)")
	workers := flag.Int("workers", 16, "concurrent requests")
	keys := flag.Int("keys", 100, "keys updated (uniformly at random)")
	duration := flag.Duration("duration", 20*time.Second, "how long to run")
	flag.Parse()
	if *btype == "" {
		*btype = map[string]string{"counter": "counters", "set": "sets"}[*op]
	}
	if *btype == "" {
		fmt.Fprintln(os.Stderr, "dtbench: -op must be counter or set")
		os.Exit(2)
	}
	riak.EnableDebugLogging = false
	c, err := riak.NewClient(&riak.NewClientOptions{RemoteAddresses: strings.Split(*addrs, ",")})
	if err != nil {
		fmt.Fprintln(os.Stderr, "dtbench:", err)
		os.Exit(1)
	}
	defer c.Stop()
	bucket := fmt.Sprintf("bench%d", time.Now().UnixNano())
	var mu sync.Mutex
	var lat []time.Duration
	errs := 0
	var firstErr error
	deadline := time.Now().Add(*duration)
	start := time.Now()
	var wg sync.WaitGroup
	for w := 0; w < *workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w) + 1))
			var mine []time.Duration
			myErrs := 0
			var myFirst error
			for n := 0; time.Now().Before(deadline); n++ {
				key := fmt.Sprintf("k%d", rng.Intn(*keys))
				var cmd riak.Command
				var err error
				if *op == "counter" {
					cmd, err = riak.NewUpdateCounterCommandBuilder().WithBucketType(*btype).
						WithBucket(bucket).WithKey(key).WithIncrement(1).Build()
				} else {
					cmd, err = riak.NewUpdateSetCommandBuilder().WithBucketType(*btype).
						WithBucket(bucket).WithKey(key).
						WithAdditions([]byte(fmt.Sprintf("w%d-%d", w, n))).Build()
				}
				t0 := time.Now()
				if err == nil {
					err = c.Execute(cmd)
				}
				if err == nil && !cmd.Success() {
					err = fmt.Errorf("command did not succeed")
				}
				if err != nil {
					myErrs++
					if myFirst == nil {
						myFirst = err
					}
					continue
				}
				mine = append(mine, time.Since(t0))
			}
			mu.Lock()
			lat = append(lat, mine...)
			errs += myErrs
			if firstErr == nil {
				firstErr = myFirst
			}
			mu.Unlock()
		}(w)
	}
	wg.Wait()
	elapsed := time.Since(start)
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	pct := func(p float64) time.Duration {
		if len(lat) == 0 {
			return 0
		}
		return lat[int(p*float64(len(lat)-1))]
	}
	fmt.Printf("op=%s type=%s addrs=%s workers=%d keys=%d elapsed=%.1fs ok=%d errors=%d rate=%.0f/s p50=%s p99=%s max=%s\n",
		*op, *btype, *addrs, *workers, *keys, elapsed.Seconds(), len(lat), errs,
		float64(len(lat))/elapsed.Seconds(), pct(0.5), pct(0.99), pct(1))
	if firstErr != nil {
		fmt.Println("first error:", firstErr)
	}
}
