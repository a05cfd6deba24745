#!/usr/bin/env bash
# The console's cost: a node's throughput under `basalt bench` load with one
# console client streaming (/console/api/events, read by curl as a browser's
# EventSource would) against none, alternated in one run.
#
#   scripts/console-cost.sh [BASALT_BIN] [SEGMENTS] [SEGMENT_SECS]
#
# Starts one node (release build unless BASALT_BIN is given; data under a
# temp dir, default ring), runs one bench (PB, 4 workers, max rate, 1 KB
# values, 1 GET : 1 PUT over 10,000 keys, 10 s report intervals) for
# SEGMENTS × SEGMENT_SECS (default 12 × 40 s), and alternates the stream:
# segment 0 without (A), 1 with (B), 2 without, ... Each segment's first
# interval is left out (the switch); the rest are averaged per side. Prints
# a table per segment and the A/B means and difference; the bench's results
# stay under the printed directory.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-}
segments=${2:-12}
secs=${3:-40}
if [[ -z $B ]]; then
  cargo build --release -q -p basalt-cli
  B=${CARGO_TARGET_DIR:-target}/release/basalt
fi
tmp=$(mktemp -d /tmp/basalt-console-cost-XXXXXX)
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
source scripts/lib/ports.sh # below the ephemeral range
pick_ports 3
p=$picked_port
"$B" start --node-name cost@127.0.0.1 --data-dir "$tmp/node" --pb-listen "127.0.0.1:$p" \
  --cluster-listen "127.0.0.1:$((p + 1))" --http-listen "127.0.0.1:$((p + 2))" 2>"$tmp/node.log" &
pids+=($!)
for _ in $(seq 200); do "$B" admin --node "127.0.0.1:$((p + 1))" member-status >/dev/null 2>&1 && break; sleep 0.1; done
total=$((segments * secs))
minutes=$(( (total + 59) / 60 + 1 ))
cat >"$tmp/cost.config" <<EOF
{mode, max}.
{duration, $minutes}.
{report_interval, 10}.
{concurrent, 4}.
{driver, basho_bench_driver_riakc_pb}.
{riakc_pb_ips, [{"127.0.0.1", $p}]}.
{key_generator, {int_to_str, {uniform_int, 10000}}}.
{value_generator, {fixed_bin, 1000}}.
{operations, [{get, 1}, {put, 1}]}.
EOF
"$B" bench "$tmp/cost.config" -d "$tmp/bench" -q >"$tmp/bench.log" 2>&1 &
bench=$!
pids+=($bench)
start=$(date +%s.%N)
: >"$tmp/segments"
for s in $(seq 0 $((segments - 1))); do
  t0=$(echo "$(date +%s.%N) - $start" | bc)
  stream=""
  if ((s % 2 == 1)); then
    curl -sN "http://127.0.0.1:$((p + 2))/console/api/events" >"$tmp/stream-$s.txt" &
    stream=$!
  fi
  sleep "$secs"
  [[ -n $stream ]] && kill "$stream" 2>/dev/null || true
  echo "$s $t0 $(echo "$(date +%s.%N) - $start" | bc)" >>"$tmp/segments"
done
kill "$bench" 2>/dev/null || true
wait "$bench" 2>/dev/null || true
sleep 1
summary=$(ls "$tmp"/bench/*/summary.csv | head -1)
samples=$(cat "$tmp"/stream-*.txt 2>/dev/null | grep -c '^event: sample' || true)
python3 - "$summary" "$tmp/segments" "$samples" <<'PY'
import sys
rows = []
for line in open(sys.argv[1]).read().splitlines()[1:]:
    f = [x.strip() for x in line.split(",")]
    if len(f) >= 3:
        rows.append((float(f[0]), float(f[1]), int(f[2])))
segs = [tuple(float(x) for x in l.split()) for l in open(sys.argv[2])]
side = {"A": [], "B": []}
print("| segment | side | intervals | ops/s |")
print("|---|---|---|---|")
for s, t0, t1 in segs:
    # Intervals wholly inside the segment, the first left out.
    inside = [r for r in rows if r[0] - r[1] >= t0 - 0.5 and r[0] <= t1 + 0.5]
    use = inside[1:]
    if not use:
        continue
    rate = sum(r[2] for r in use) / sum(r[1] for r in use)
    k = "B" if int(s) % 2 == 1 else "A"
    side[k].append(rate)
    print("| %d | %s | %d | %.0f |" % (s, "console streaming" if k == "B" else "no console", len(use), rate))
a = sum(side["A"]) / max(1, len(side["A"]))
b = sum(side["B"]) / max(1, len(side["B"]))
print()
print("A (no console): %.0f ops/s over %d segments; B (one stream): %.0f ops/s over %d segments; B - A = %+.2f %%" % (
    a, len(side["A"]), b, len(side["B"]), 100.0 * (b - a) / a if a else 0.0))
def spread(v):
    return (max(v) - min(v)) / (sum(v) / len(v)) * 100 if v else 0
print("spread within A: %.1f %%, within B: %.1f %%; samples received by the streams: %s" % (spread(side["A"]), spread(side["B"]), sys.argv[3]))
PY
echo "results: $tmp (bench in $tmp/bench)"
