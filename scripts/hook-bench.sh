#!/usr/bin/env bash
# Seed 002 (Mozilla Test Pilot) Study Three, scaled to one node: PUT
# throughput and latency of 10 KB and 50 KB objects with (a) no hook,
# (b) the built-in pre-commit hook basalt_hooks:max_object_size, (c) the
# same check as a JavaScript pre-commit hook with 8, 16 and 32 hook VMs.
# Each run: a fresh release node (leveled, ring 64, sync off) on
# 127.0.0.1:1830x, the hook set on bucket `test` over HTTP, then
# `basalt bench` (riakc_pb driver, 8 workers at max, PUTs of printable
# values, 100,000 uniform keys) for HOOK_BENCH_SECS (default 20) seconds.
# Each run's data directory (up to ~5 GB for 50 KB values) is removed
# before the next run. Figures: docs/benchmarks/2026-11-24-1636-commit-hooks-study-three.md,
# docs/benchmarks/2026-11-24-1648-commit-hooks-value-as-string.md and
# docs/benchmarks/2026-11-24-2046-quiet-reruns.md. Prints one line per run: median throughput over the report intervals
# (ops/s), whole-run median / p99 / p99.9 latency (ms), errors.
#
# Usage: scripts/hook-bench.sh [sizes...]   (default: 10000 50000)
#        BASALT_BIN=target/debug/basalt HOOK_BENCH_SECS=3 scripts/hook-bench.sh 10000
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${HOOK_BENCH_SECS:-20}
sizes=("$@")
[[ ${#sizes[@]} -gt 0 ]] || sizes=(10000 50000)
if [[ -n ${BASALT_BIN:-} ]]; then
  B=$BASALT_BIN # e.g. a debug build, to check this script (numbers meaningless)
else
  cargo build --release -q -p basalt-cli --bin basalt --locked
  B="$PWD/target/release/basalt"
fi
root="$(mktemp -d /tmp/basalt-hookbench-XXXXXX)"
pid=""
cleanup() { [[ -n $pid ]] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; rm -rf "$root"; }
trap cleanup EXIT
mkdir -p "$root/js"
# The JavaScript version of the built-in check (5 MB, the seed's limit).
cat >"$root/js/validate.js" <<'EOF'
function validate(o) {
  var d = o.values[0].data;
  if (d.length > 5242880) { return {"fail": "Object too large: " + d.length + " bytes"}; }
  return o;
}
EOF

# run LABEL SIZE HOOK_JSON VMS
run() {
  local label=$1 size=$2 hook=$3 vms=$4 dir="$root/$1-$2"
  mkdir -p "$dir"
  cat >"$dir/node.toml" <<EOF
data_dir = "$dir/data"
pb_listen = "127.0.0.1:18301"
cluster_listen = "127.0.0.1:18302"
http_listen = "127.0.0.1:18303"
aae_interval_secs = 0
[mapred]
hook_js_vm_count = $vms
js_source_dir = "$root/js"
EOF
  "$B" start --config "$dir/node.toml" 2>"$dir/node.log" &
  pid=$!
  for _ in $(seq 100); do curl -sf http://127.0.0.1:18303/ping >/dev/null && break; sleep 0.1; done
  if [[ -n $hook ]]; then
    curl -sf -XPUT -H 'Content-Type: application/json' http://127.0.0.1:18303/buckets/test/props \
      -d "{\"props\":{\"precommit\":[$hook]}}"
  fi
  cat >"$dir/bench.config" <<EOF
{mode, max}.
{duration, 1}.
{basalt_duration_secs, $secs}.
{report_interval, 1}.
{concurrent, 8}.
{driver, basho_bench_driver_riakc_pb}.
{riakc_pb_ips, [{127,0,0,1}]}.
{riakc_pb_port, 18301}.
{riakc_pb_replies, 1}.
{key_generator, {int_to_str, {uniform_int, 100000}}}.
{value_generator, {fixed_char, $size}}.
{operations, [{put, 1}]}.
EOF
  local bench_status=0
  "$B" bench -d "$dir/results" -n run "$dir/bench.config" >"$dir/bench.log" 2>&1 || bench_status=$?
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
  # A 50 KB run writes ~5 GB: each run's store goes before the next.
  rm -rf "$dir/data"
  if [[ $bench_status -ne 0 ]]; then
    echo "$label $size: basalt bench exited $bench_status; its log tail:" >&2
    tail -5 "$dir/bench.log" >&2
    return 0
  fi
  local res="$dir/results/run"
  # Median of the per-interval throughputs; whole-run percentiles from the
  # per-interval CSV's sample-weighted rows are not exact, so the report's.
  local tput
  tput=$(awk -F, 'NR>1 && $2>0 {print $4/$2}' "$res/summary.csv" | sort -g |
    awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}')
  # report.md: | op | n | errors | mean | median | 95th | 99th | 99.9th | max | mean(max) | (ms)
  local row
  row=$(grep -E '^\| put ' "$res/report.md" | head -1)
  IFS='|' read -r _ _ n errors _ median _ p99 p999 _ <<<"$row"
  printf '%-9s %6s B  %8.1f ops/s  median %7s ms  p99 %7s ms  p99.9 %7s ms  n %s  errors %s\n' \
    "$label" "$size" "$tput" "${median// /}" "${p99// /}" "${p999// /}" "${n// /}" "${errors// /}"
}

for size in "${sizes[@]}"; do
  run none "$size" "" 2
  run builtin "$size" '{"mod":"basalt_hooks","fun":"max_object_size"}' 2
  for vms in 8 16 32; do
    run "js-$vms" "$size" '{"name":"validate"}' "$vms"
  done
done
