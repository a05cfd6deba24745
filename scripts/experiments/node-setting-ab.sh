#!/usr/bin/env bash
# A/B of a node setting on three seed-suite nodes sharing this machine's
# CPUs: a cluster seed test's load (TEST; default Cluster Test 1: sync on,
# 8 KB, pareto 5 GET : 1 UPDATE), the setting's default against each value
# given, alternated, ROUNDS rounds, leveled nodes (BACKENDS to change).
# Prints each run's Avg TPS, each operation's mean and mean(max), the
# nodes' CPU seconds and node-level write amplification; with
# WATCH=1 it runs `request-path-watch.py` beside each run (DIR/rR-VALUE.jsonl;
# its summary in DIR/rR-VALUE.watch.md).
#
#   BASALT=BIN scripts/experiments/node-setting-ab.sh DIR KEY VALUE...
#
# Environment: SECS (each run, 120), KEYS (20000: in the page cache; 600000
# beyond it), ROUNDS (2), BENCH (a bench term, e.g. '{mode, {rate, 70}}';
# default: the test's {mode, max}), BACKENDS (leveled), BASELINE (none),
# WATCH (0), TEST
# (8kb_sync; any of seed-suite.sh's cluster tests).
# Written 2026-12-06 for `runtime_threads` (issue 56 item 2), made general
# for `read_threads`; BASELINE and one run a backend added 2026-12-07.
set -euo pipefail
dir=${1:?usage: BASALT=BIN $0 DIR KEY VALUE...}
key=${2:?usage: BASALT=BIN $0 DIR KEY VALUE...}
shift 2
[ $# -gt 0 ] || { echo "give at least one value of $key to set against its default" >&2; exit 2; }
variants=(default "$@")
: "${BASALT:?set BASALT to the basalt binary}"
secs=${SECS:-120} keys=${KEYS:-20000} rounds=${ROUNDS:-2}
backends=${BACKENDS:-leveled}
test=${TEST:-8kb_sync}
bench=()
[ -n "${BENCH:-}" ] && bench=(--bench "$BENCH")
here=$(cd "$(dirname "$0")/../.." && pwd)
cd "$here"
mkdir -p "$dir"
# run ROUND VALUE BACKEND: one seed-suite run and its line of figures.
run() {
  local r=$1 v=$2 b=$3
  local out=$dir/r$r-$v-$b watcher= set_args=()
  [ "$v" != default ] && set_args=(--set "$key=$v")
  if [ "${WATCH:-0}" = 1 ]; then
    (sleep 20 && exec python3 scripts/experiments/request-path-watch.py watch \
      "$BASALT" "$out.jsonl" "$((secs + 60))" 30) &
    watcher=$!
  fi
  BACKENDS=$b scripts/seed-suite.sh --cluster 3 --long -t "$secs" -k "$keys" \
    "${set_args[@]}" "${bench[@]}" -d "$out" "$test" >"$out.log" 2>&1
  [ -n "$watcher" ] && { kill "$watcher" 2>/dev/null || true; wait "$watcher" 2>/dev/null || true; }
  local rep=$out/$test/$b
  local tps lat cpu wa
  tps=$(awk -F'|' '/Avg TPS/ {gsub(/[* ]/, "", $3); print $3}' "$rep/report.md")
  lat=$(awk -F'|' '/^## Latency/ {on = 1} /^## Resources/ {on = 0}
    on && $2 ~ /^ [a-z_]+ $/ && $2 != " op " {gsub(/[* ]/, "", $5); gsub(/[* ]/, "", $11); printf "%s %s/%s ", $2, $5, $11}' "$rep/report.md")
  cpu=$(grep -o 'the nodes [0-9]* s' "$rep/cluster.md")
  wa=$(grep -o 'write amplification\*\* [0-9.]*' "$rep/cluster.md" | grep -o '[0-9.]*$')
  echo "round $r $b $key=$v: $tps ops/s; mean/mean(max) ms: $lat; $cpu; WA $wa"
  if [ -n "$watcher" ]; then
    python3 scripts/experiments/request-path-watch.py summary -w 1000000 "$out.jsonl" \
      "$rep/update_latencies.csv" "$rep/get_latencies.csv" >"$out.watch.md" || true
  fi
}
for r in $(seq 1 "$rounds"); do
  first=1
  for v in "${variants[@]}"; do
    for b in $backends; do run "$r" "$v" "$b"; done
    if [ "$first" = 1 ] && [ -n "${BASELINE:-}" ]; then run "$r" default "$BASELINE"; fi
    first=0
  done
done
