#!/bin/bash
# `basalt migrate` speed, one node to one node (issue 57 item 6): a source
# node (ring 16, leveled) loaded by `basalt bench` with KEYS objects of
# VSIZE bytes in bucket `bench`, then `basalt migrate --rate 0` into a
# fresh target node; prints the tool's JSON summary and wall time.
#   B=target/release/basalt KEYS=20000 VSIZE=1000 scripts/experiments/migrate-speed.sh
set -euo pipefail
B=${B:-target/release/basalt}
W=${W:-/tmp/migrate-speed}
KEYS=${KEYS:-20000}
VSIZE=${VSIZE:-1000}
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; wait 2>/dev/null || true' EXIT
start() { # name -> ports in globals
  local pb cl
  pb=$(port); cl=$(port)
  $B start --node-name "$1@127.0.0.1" --data-dir "$W/$1" --ring-size 16 --backend leveled \
    --pb-listen "127.0.0.1:$pb" --cluster-listen "127.0.0.1:$cl" --http-listen "" 2>"$W/$1.log" &
  pids+=($!)
  for _ in $(seq 1 100); do $B ping --node "127.0.0.1:$cl" >/dev/null 2>&1 && break; sleep 0.2; done
  eval "${1}_pb=$pb ${1}_cl=$cl"
}
rm -rf "$W"; mkdir -p "$W"
start source; start target
cat >"$W/load.config" <<CFG
{mode, max}.
{duration, 600}.
{concurrent, 4}.
{driver, basho_bench_driver_riakc_pb}.
{riakc_pb_ips, [{127,0,0,1}]}.
{riakc_pb_port, $source_pb}.
{riakc_pb_bucket, <<"bench">>}.
{key_generator, {int_to_str, {partitioned_sequential_int, $KEYS}}}.
{value_generator, {fixed_bin, $VSIZE}}.
{operations, [{put, 1}]}.
CFG
t0=$(date +%s.%N)
$B bench "$W/load.config" -d "$W/load" >"$W/load.log" 2>&1 || true
t1=$(date +%s.%N)
echo "load: $KEYS x $VSIZE B in $(echo "$t1 - $t0" | bc) s"
/usr/bin/time -v $B migrate --from "127.0.0.1:$source_pb" --to "127.0.0.1:$target_cl" \
  --checkpoint "$W/ckpt" --json --rate 0 >"$W/migrate.json" 2>"$W/migrate.time"
t2=$(date +%s.%N)
cat "$W/migrate.json"
grep -E "Elapsed|Percent of CPU|Maximum resident" "$W/migrate.time"
echo "migrate wall: $(echo "$t2 - $t1" | bc) s"
