#!/bin/bash
# The console stream's own CPU cost on an idle node (issue 58): the node's
# CPU time (utime + stime from /proc/PID/stat) over SECS seconds without a
# stream, then with N streams (/console/api/events read by curl), then
# without again. A bound on what a stream can take from a loaded node,
# free of the throughput noise a loaded A/B shows on this VM.
#   B=target/release/basalt SECS=30 N=1 scripts/experiments/console-cpu.sh
set -euo pipefail
B=${B:-target/release/basalt}
SECS=${SECS:-30}
N=${N:-1}
tmp=$(mktemp -d /tmp/console-cpu-XXXXXX)
pids=()
trap 'for p in "${pids[@]}"; do kill $p 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$tmp"' EXIT
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
pb=$(port); cl=$(port); http=$(port)
$B start --node-name cpu@127.0.0.1 --data-dir "$tmp/node" --pb-listen "127.0.0.1:$pb" \
  --cluster-listen "127.0.0.1:$cl" --http-listen "127.0.0.1:$http" 2>"$tmp/node.log" &
node=$!; pids+=($node)
for _ in $(seq 100); do $B ping --node "127.0.0.1:$cl" >/dev/null 2>&1 && break; sleep 0.2; done
sleep 5
tck=$(getconf CLK_TCK)
cpu() { awk '{print $14 + $15}' "/proc/$node/stat"; }
measure() { # label
  local a b
  a=$(cpu); sleep "$SECS"; b=$(cpu)
  echo "$1: $(( (b - a) * 1000 / tck )) ms of CPU in $SECS s ($(echo "scale=3; ($b - $a) * 100 / $tck / $SECS" | bc) % of one core)"
}
measure "no stream"
spids=()
for _ in $(seq "$N"); do curl -sN "http://127.0.0.1:$http/console/api/events" >"$tmp/stream.$RANDOM" & spids+=($!); pids+=($!); done
sleep 2
measure "$N stream(s)"
for p in "${spids[@]}"; do kill "$p" 2>/dev/null || true; done
sleep 2
measure "no stream again"
echo "samples received: $(cat "$tmp"/stream.* | grep -c '^data:' || true)"
