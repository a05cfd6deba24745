#!/usr/bin/env bash
# Data-type update throughput (issue 16's closing figures): counter
# increments/s and set adds/s through the real Go Riak client
# (interop/go/dtbench, DtUpdateReq), against one release node and then a
# 3-node cluster (each: leveled, ring 64, sync off, AAE off, fresh data
# under a temp dir, loopback ports 18402-18407, no HTTP). Bucket types `counters` and
# `sets` made with `basalt admin`. Each run: DT_BENCH_WORKERS (default 16)
# concurrent updates, on 100 keys chosen uniformly, for DT_BENCH_SECS
# (default 20) seconds; the cluster runs spread the requests over the
# three nodes. A set add adds a new element, so the sets grow during the
# run (to about rate × secs / 100 elements each). Prints one dtbench line
# per run. Figures:
# docs/benchmarks/2026-11-24-1950-data-type-update-throughput.md.
#
# Usage: scripts/experiments/dt-bench.sh
#        BASALT_BIN=/path/to/basalt DT_BENCH_SECS=3 scripts/experiments/dt-bench.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
secs=${DT_BENCH_SECS:-20}
workers=${DT_BENCH_WORKERS:-16}
if [[ -n ${BASALT_BIN:-} ]]; then
  B=$BASALT_BIN
else
  cargo build --release -q -p basalt-cli --bin basalt --locked
  B="${CARGO_TARGET_DIR:-$PWD/target}/release/basalt"
fi
root="$(mktemp -d /tmp/basalt-dtbench-XXXXXX)"
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$root"
}
trap cleanup EXIT
(cd interop/go && go build -o "$root/dtbench" ./dtbench)

# start_node I: node I on PB 18400 + 2I, its cluster port the next one.
start_node() {
  local i=$1 pb=$((18400 + 2 * $1))
  "$B" start --data-dir "$root/n$i" --node-name "n$i@127.0.0.1" --ring-size 64 \
    --pb-listen "127.0.0.1:$pb" --cluster-listen "127.0.0.1:$((pb + 1))" --http-listen "" >"$root/n$i.log" 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do
    "$B" admin --node "127.0.0.1:$((pb + 1))" member-status >/dev/null 2>&1 && return 0
    sleep 0.1
  done
  echo "node $i did not start" >&2
  tail "$root/n$i.log" >&2
  return 1
}
types() {
  local a=$1 t
  for t in counter set; do
    "$B" admin --node "$a" bucket-type create "${t}s" "{\"props\":{\"datatype\":\"$t\"}}" >/dev/null
    "$B" admin --node "$a" bucket-type activate "${t}s" >/dev/null
  done
}
run() {
  "$root/dtbench" -addrs "$1" -op "$2" -workers "$workers" -keys 100 -duration "${secs}s"
}

echo "== one node"
start_node 1
types 127.0.0.1:18403
run 127.0.0.1:18402 counter
run 127.0.0.1:18402 set
kill "${pids[0]}"
wait "${pids[0]}" 2>/dev/null || true
pids=()
rm -rf "$root/n1"

echo "== three nodes"
for i in 1 2 3; do start_node "$i"; done
for i in 2 3; do
  "$B" admin --node "127.0.0.1:$((18401 + 2 * i))" cluster join 127.0.0.1:18403 >/dev/null
done
"$B" admin --node 127.0.0.1:18403 cluster commit >/dev/null
for _ in $(seq 600); do
  "$B" admin --node 127.0.0.1:18403 ring-status 2>/dev/null | grep -q "pending ownership transfers: 0" && break
  sleep 0.2
done
types 127.0.0.1:18403
for a in 127.0.0.1:18405 127.0.0.1:18407; do # the types reach n2, n3 by gossip
  for _ in $(seq 100); do
    "$B" admin --node "$a" bucket-type status sets 2>/dev/null | grep -q "sets is active" && break
    sleep 0.2
  done
done
all=127.0.0.1:18402,127.0.0.1:18404,127.0.0.1:18406
run "$all" counter
run "$all" set
