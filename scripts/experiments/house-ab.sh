#!/usr/bin/env bash
# One-off study (issue 54, the server-house change): the node's PB
# throughput before and after, alternated A B A B on this machine, the
# bench process always the NEW binary (only the nodes differ):
#   1. crates/bench/examples/live_pb_quick.config (4 workers, 1 KB values,
#      4 GET : 2 UPDATE : 1 PUT : 1 DELETE, 20 s) against one node;
#   2. crates/bench/examples/live_cluster_pareto_8kb.config (12 workers,
#      8 KB pareto, 5 GET : 1 UPDATE, 2 min) against 3 nodes joined on
#      127.0.0.1, ring 64, as scripts/cluster-bench.sh runs it.
# Usage: scripts/experiments/house-ab.sh OLD_BASALT NEW_BASALT OUTDIR [PAIRS]
# KINDS="pb cl" (default) picks the studies; FIRST=new runs each pair new
# then old (to see the order's effect).
# Prints one line per run (scripts/run-summary.py) and the NEW/OLD ratio of
# each pair's Avg TPS.
set -euo pipefail
old="$1"; new="$2"; out="$3"; pairs="${4:-2}"
cd "$(dirname "$0")/../.."
mkdir -p "$out"
root="$(mktemp -d /tmp/basalt-house-ab-XXXXXX)"
pids=()
stop() { local q; for q in "${pids[@]}"; do kill "$q" 2>/dev/null || true; done; wait 2>/dev/null || true; pids=(); }
trap 'stop; rm -rf "$root"' EXIT

wait_pb() { # addr of a cluster port
  for _ in $(seq 200); do "$new" admin --node "$1" member-status >/dev/null 2>&1 && return 0; sleep 0.1; done
  echo "node at $1 did not answer" >&2; return 1
}

single() { # binary name
  local b="$1" n="$2"
  local d="$root/single-$n"
  rm -rf "$d"
  "$b" start --node-name "s@127.0.0.1" --data-dir "$d" --pb-listen 127.0.0.1:8087 \
    --cluster-listen 127.0.0.1:8099 --http-listen "" 2>"$d.log" &
  pids+=($!)
  wait_pb 127.0.0.1:8099
  "$new" bench crates/bench/examples/live_pb_quick.config -q -d "$out" -n "$n"
  stop
}

cluster() { # binary name
  local b="$1" n="$2"
  for i in 1 2 3; do
    rm -rf "$root/c$i"
    "$b" start --node-name "n$i@127.0.0.1" --data-dir "$root/c$i" \
      --pb-listen "127.0.0.1:1818$i" --cluster-listen "127.0.0.1:1819$i" --http-listen "" \
      --ring-size 64 2>"$root/c$i.log" &
    pids+=($!)
  done
  for i in 1 2 3; do wait_pb "127.0.0.1:1819$i"; done
  "$new" admin --node 127.0.0.1:18192 cluster join 127.0.0.1:18191 >/dev/null
  "$new" admin --node 127.0.0.1:18193 cluster join 127.0.0.1:18191 >/dev/null
  "$new" admin --node 127.0.0.1:18191 cluster commit >/dev/null
  until "$new" admin --node 127.0.0.1:18191 ring-status | grep -q "pending ownership transfers: 0"; do sleep 0.5; done
  "$new" bench crates/bench/examples/live_cluster_pareto_8kb.config -q -d "$out" -n "$n"
  stop
}

kinds="${KINDS:-pb cl}"
pair() { # function kind p
  if [ "${FIRST:-old}" = new ]; then
    "$1" "$new" "$2-new-$3"; "$1" "$old" "$2-old-$3"
  else
    "$1" "$old" "$2-old-$3"; "$1" "$new" "$2-new-$3"
  fi
}
for kind in $kinds; do
  for p in $(seq "$pairs"); do
    case "$kind" in pb) pair single pb "$p" ;; cl) pair cluster cl "$p" ;; esac
  done
done
for kind in $kinds; do
  for p in $(seq "$pairs"); do
    python3 scripts/run-summary.py "$out/$kind-old-$p" "$out/$kind-new-$p"
    python3 - "$out/$kind-old-$p/report.md" "$out/$kind-new-$p/report.md" <<'EOF'
import re, sys
tps = [float(re.search(r"\*\*Avg TPS\*\* \| \*\*([\d.]+)", open(f).read()).group(1)) for f in sys.argv[1:]]
print("  new/old Avg TPS %.3f (%.0f / %.0f)" % (tps[1] / tps[0], tps[1], tps[0]))
EOF
  done
done
