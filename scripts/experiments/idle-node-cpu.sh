#!/usr/bin/env bash
# What an idle node costs: starts one node per binary given (ring 64,
# leveled, nothing else), lets it settle for SETTLE s, then reads its CPU
# (utime + stime, /proc/PID/stat) and its threads' voluntary context
# switches over SECS s, grouped by thread name. Alternates the binaries
# ROUNDS times.
# Usage: scripts/experiments/idle-node-cpu.sh ROUNDS SECS BIN...
set -euo pipefail
rounds=$1 secs=$2; shift 2
hz=$(getconf CLK_TCK)
root=$(mktemp -d /tmp/idle-node-XXXXXX)
trap 'kill $(jobs -p) 2>/dev/null || true; rm -rf "$root"' EXIT
threads() { # PID -> "name switches" per thread
  for t in /proc/"$1"/task/*; do
    printf '%s %s\n' "$(tr ' ' _ <"$t/comm" | sed 's/-[0-9]*$/-N/')" "$(awk '/^voluntary/ {print $2}' "$t/status")"
  done | awk '{ s[$1] += $2 } END { for (k in s) print k, s[k] }' | sort
}
for r in $(seq "$rounds"); do
  for bin in "$@"; do
    d="$root/n"; rm -rf "$d"
    "$bin" start --data-dir "$d" --pb-listen 127.0.0.1:18187 --cluster-listen 127.0.0.1:18199 --http-listen "" 2>"$root/log" &
    pid=$!
    sleep "${SETTLE:-8}"
    c0=$(awk '{print $14 + $15}' /proc/$pid/stat); threads $pid >"$root/t0"
    sleep "$secs"
    c1=$(awk '{print $14 + $15}' /proc/$pid/stat); threads $pid >"$root/t1"
    kill $pid; wait $pid 2>/dev/null || true
    wakes=$(join "$root/t0" "$root/t1" | awk -v s="$secs" '{ w += $3 - $2 } END { printf "%.0f", w / s }')
    top=$(join "$root/t0" "$root/t1" | awk -v s="$secs" '{ printf "%s %.0f\n", $1, ($3 - $2) / s }' | sort -k2 -n -r | head -3 | tr '\n' ';')
    echo "round $r $bin: CPU $(awk -v t=$((c1 - c0)) -v hz="$hz" -v s="$secs" 'BEGIN { printf "%.1f", 100 * t / hz / s }') % of a vCPU; $wakes wake-ups/s (top: $top)"
  done
done
