#!/usr/bin/env bash
# The cost of anti-entropy under load (seed 004 Phase 2, scaled): a 3-node
# cluster on this machine, held beyond the page cache (all three nodes in
# one memory cgroup), runs the seed's 8 KB no-sync 5 GET : 1 UPDATE load
# (crates/bench/examples/live_cluster_pareto_8kb.config) once per mode:
#
#   off      aae_interval_secs = 0: no trees, no exchanges, no rebuilds
#   on       exchanges every 30 s; every vnode's trees rebuilt every
#            120 s + 0..30 s (aggressive; Riak's default is 14 days),
#            journal check on
#   on_nojc  as `on`, journal check off
#
# and prints per run: Avg TPS (the bench's report), rebuilds done and their
# total seconds, keys swept, exchanges and repairs (summed over the nodes),
# and the cgroup's peak memory. Fresh data directories for every run.
#
#   scripts/experiments/aae-cost.sh [-s SECS] [-k KEYS] [-m LIMIT] [-r ROUNDS] [-d DIR] [MODE...]
#
#   -s  seconds per run (default 300)     -k  pareto key space (400000)
#   -m  memory limit of the 3 nodes together, process + page cache (1G)
#   -r  rounds; each round runs the modes in turn, every other round in
#       reverse order, so drift in the machine falls on both sides (1)
#   -d  where data and results go (default /var/tmp/basalt-aae-<time>)
#   BASALT=path/to/basalt uses that binary (default: a release build).
#
# Needs root and the cgroup v1 memory controller or cgroup v2.
set -euo pipefail
cd "$(dirname "$0")/../.."

secs=300; keys=400000; limit=1G; rounds=1; root=""
while getopts "s:k:m:r:d:h" o; do
  case $o in
    s) secs=$OPTARG ;; k) keys=$OPTARG ;; m) limit=$OPTARG ;;
    r) rounds=$OPTARG ;; d) root=$OPTARG ;;
    *) sed -n '2,26p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
modes=("$@"); [ ${#modes[@]} -eq 0 ] && modes=(off on on_nojc)
root=${root:-/var/tmp/basalt-aae-$(date -u +%Y%m%d_%H%M%S)}
mkdir -p "$root"

if [ -n "${BASALT:-}" ]; then B=$BASALT; else
  cargo build --release -q -p basalt-cli
  B="${CARGO_TARGET_DIR:-$PWD/target}/release/basalt"
fi

to_bytes() { numfmt --from=iec "$1"; }
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  cgbase=/sys/fs/cgroup; limit_file=memory.max; peak_file=memory.peak
else
  cgbase=/sys/fs/cgroup/memory; limit_file=memory.limit_in_bytes; peak_file=memory.max_usage_in_bytes
fi

pids=()
cg=""
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  [ -n "$cg" ] && rmdir "$cg" 2>/dev/null || true
}
trap cleanup EXIT

node_config() { # mode file
  case $1 in
    off) echo "aae_interval_secs = 0" ;;
    on | on_nojc)
      echo "aae_interval_secs = 30"
      echo "aae_rebuild_wait_secs = 120"
      echo "aae_rebuild_delay_secs = 30"
      if [ "$1" = on_nojc ]; then echo "aae_rebuild_journal_check = false"; fi
      ;;
    *) echo "unknown mode $1 (off | on | on_nojc)" >&2; exit 2 ;;
  esac > "$2"
}

# sum FIELD over the nodes' `aae status` lines matching PATTERN (sed -E)
status_sum() {
  local pat=$1 total=0 v
  for i in 1 2 3; do
    v=$("$B" admin --node "127.0.0.1:2819$i" aae status 2>/dev/null | sed -nE "$pat" | head -1)
    total=$(echo "$total + ${v:-0}" | bc)
  done
  echo "$total"
}

run_one() { # mode round
  local mode=$1 round=$2 dir="$root/$1-r$2"
  mkdir -p "$dir"
  node_config "$mode" "$dir/node.toml"
  cg="$cgbase/basalt-aae-$$"
  mkdir -p "$cg"
  to_bytes "$limit" > "$cg/$limit_file"
  pids=()
  for i in 1 2 3; do
    sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' _ "$cg" \
      "$B" start --config "$dir/node.toml" --node-name "n$i@127.0.0.1" \
      --data-dir "$dir/n$i" --backend leveled --ring-size 16 \
      --pb-listen "127.0.0.1:2818$i" --cluster-listen "127.0.0.1:2819$i" \
      --http-listen "" 2>"$dir/n$i.log" &
    pids+=($!)
  done
  for i in 1 2 3; do
    for _ in $(seq 200); do "$B" admin --node "127.0.0.1:2819$i" member-status >/dev/null 2>&1 && break; sleep 0.1; done
  done
  "$B" admin --node 127.0.0.1:28192 cluster join 127.0.0.1:28191 >/dev/null
  "$B" admin --node 127.0.0.1:28193 cluster join 127.0.0.1:28191 >/dev/null
  "$B" admin --node 127.0.0.1:28191 cluster commit >/dev/null
  until "$B" admin --node 127.0.0.1:28191 ring-status | grep -q "pending ownership transfers: 0"; do sleep 0.5; done
  cat > "$dir/override.config" <<EOF
{riakc_pb_ips, [{"127.0.0.1", 28181}, {"127.0.0.1", 28182}, {"127.0.0.1", 28183}]}.
{key_generator, {int_to_str, {pareto_int, $keys}}}.
{basalt_duration_secs, $secs}.
EOF
  (cd "$dir" && "$B" bench "$OLDPWD/crates/bench/examples/live_cluster_pareto_8kb.config" override.config > bench.log 2>&1)
  local tps rebuilds rsecs rkeys exchanges repairs peak disk
  tps=$(grep -m1 -iE "avg tps" "$dir"/tests/current/report.md | grep -oE "[0-9]+(\.[0-9]+)?" | head -1 || echo "?")
  rebuilds=$(status_sum 's/^rebuilds done: ([0-9]+) .*/\1/p')
  rkeys=$(status_sum 's/^rebuilds done: [0-9]+ \(([0-9]+) keys swept.*/\1/p')
  rsecs=$(status_sum 's/^rebuilds done: .*, ([0-9.]+) s\)$/\1/p')
  exchanges=$(status_sum 's/^exchanges: ([0-9]+)$/\1/p')
  repairs=$(status_sum 's/^repairs: ([0-9]+)$/\1/p')
  peak=$(( $(cat "$cg/$peak_file") / 1048576 ))
  disk=$(du -sm "$dir" | cut -f1)
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  wait "${pids[@]}" 2>/dev/null || true
  pids=()
  rmdir "$cg" 2>/dev/null || true
  cg=""
  printf '| %s | %s | %s | %s | %s | %s | %s | %s | %s MiB | %s MiB |\n' \
    "$mode" "$round" "$tps" "$rebuilds" "$rsecs" "$rkeys" "$exchanges" "$repairs" "$peak" "$disk" | tee -a "$root/summary.md"
  rm -rf "$dir"/n1 "$dir"/n2 "$dir"/n3
}

{
  echo "aae-cost: $(date -u +%FT%TZ), $secs s per run, pareto keys $keys, memory limit $limit (3 nodes), ring 16, leveled, $("$B" --version 2>/dev/null || echo basalt)"
  echo
  echo "| mode | round | Avg TPS | rebuilds | rebuild s | keys swept | exchanges | repairs | peak memory | data |"
  echo "|---|---|---|---|---|---|---|---|---|---|"
} | tee "$root/summary.md"
for r in $(seq 1 "$rounds"); do
  order=("${modes[@]}")
  if [ $((r % 2)) -eq 0 ]; then
    order=(); for ((i = ${#modes[@]} - 1; i >= 0; i--)); do order+=("${modes[$i]}"); done
  fi
  for m in "${order[@]}"; do run_one "$m" "$r"; done
done
echo "results in $root/summary.md"
