#!/usr/bin/env bash
# A/B of the node setting `runtime_threads` (the async runtime's worker
# threads a node) on three seed-suite nodes sharing this machine's CPUs:
# Cluster Test 1's load (sync on, 8 KB, pareto 5 GET : 1 UPDATE), the
# default (one thread a CPU) against each value given, alternated, ROUNDS
# rounds, leveled nodes. Prints each run's Avg TPS, GET / UPDATE mean and
# mean(max) and the nodes' CPU seconds.
#
#   BASALT=BIN scripts/experiments/runtime-threads-ab.sh DIR [THREADS...]
#
# Environment: SECS (each run, 120), KEYS (20000: in the page cache; 600000
# beyond it), ROUNDS (2), BENCH (a bench term, e.g. '{mode, {rate, 70}}';
# default: the test's {mode, max}). Written 2026-12-06 (issue 56 item 2).
set -euo pipefail
dir=${1:?usage: BASALT=BIN $0 DIR [THREADS...]}
shift
variants=(0 "${@:-1}")
: "${BASALT:?set BASALT to the basalt binary}"
secs=${SECS:-120} keys=${KEYS:-20000} rounds=${ROUNDS:-2}
bench=()
[ -n "${BENCH:-}" ] && bench=(--bench "$BENCH")
cd "$(dirname "$0")/../.."
for r in $(seq 1 "$rounds"); do
  for t in "${variants[@]}"; do
    out=$dir/r$r-t$t
    set_args=()
    [ "$t" != 0 ] && set_args=(--set "runtime_threads=$t")
    BACKENDS=leveled scripts/seed-suite.sh --cluster 3 --long -t "$secs" -k "$keys" \
      "${set_args[@]}" "${bench[@]}" -d "$out" 8kb_sync >"$out.log" 2>&1
    rep=$out/8kb_sync/leveled
    tps=$(awk -F'|' '/Avg TPS/ {gsub(/[* ]/, "", $3); print $3}' "$rep/report.md")
    lat=$(awk -F'|' '$2 ~ /^ (get|update) $/ {gsub(/[* ]/, "", $5); gsub(/[* ]/, "", $11); printf "%s %s/%s ", $2, $5, $11}' "$rep/report.md")
    cpu=$(grep -o 'the nodes [0-9]* s' "$rep/cluster.md")
    echo "round $r runtime_threads=$t: $tps ops/s; mean/mean(max) ms: $lat; $cpu"
  done
done
