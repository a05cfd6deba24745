#!/usr/bin/env bash
# Redis as the floor of a loopback request/response server on this machine,
# beside Basalt nodes at n_val = 1 (issue 56 item 3), alternated in one run:
# for each round, `redis-benchmark` (Debian's redis-server, persistence off,
# no pipelining) GET then SET, then for each node binary given a `basalt
# bench` GET-only, PUT-only and quick-mix run over PB; the same clients, value size
# and key range. Prints requests/s per run and the CPU each side spent per
# request: the server's (utime + stime of its process, /proc/PID/stat)
# and the load generator's (redis-benchmark or `basalt bench`), in µs.
# Usage: scripts/redis-ab.sh ROUNDS SECONDS CLIENTS VALUE_BYTES BASALT_BIN...
# Needs redis-server and redis-benchmark (apt-get install redis-server).
set -euo pipefail
rounds="${1:-2}"; secs="${2:-15}"; clients="${3:-4}"; size="${4:-1000}"; shift 4
bins=("$@")
cd "$(dirname "$0")/.."
T="${CARGO_TARGET_DIR:-$PWD/target}"
C="$T/release/examples/request_cost"
[ -x "$C" ] || cargo build --release -q -p basalt-bench --example request_cost
bench="${BENCH_BIN:-${bins[0]}}"
root="$(mktemp -d /tmp/cpu-ab-XXXXXX)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
source scripts/lib/ports.sh # below the ephemeral range
pick_ports 1
rport=$picked_port
redis-server --port "$rport" --bind 127.0.0.1 --save "" --appendonly no >"$root/redis.log" 2>&1 &
pids+=($!)
redis_pid=$!
declare -a node_pids
# CPU ticks (user + system) a process has used.
ticks() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
hz=$(getconf CLK_TCK)
# µs of CPU per request: TICKS REQUESTS.
per_req() { awk -v t="$1" -v n="$2" -v hz="$hz" 'BEGIN { if (n > 0) printf "%.1f", t * 1e6 / hz / n; else print "-" }'; }
# timed OUT CMD...: runs CMD (stdout and stderr to OUT) and prints the
# user + system CPU it used, in ticks.
timed() {
  local out=$1; shift
  /usr/bin/time -f "%U %S" -o "$root/time" "$@" >"$out" 2>&1 || true
  awk -v hz="$hz" '{ printf "%d", ($1 + $2) * hz }' "$root/time"
}
# Redis answers ~20k+ requests/s here: enough requests for about $secs s.
rn=$((secs * 20000))
declare -a ports
for i in "${!bins[@]}"; do
  pick_ports 2
  p=$picked_port
  "${bins[$i]}" start --data-dir "$root/node$i" --pb-listen "127.0.0.1:$p" \
    --cluster-listen "127.0.0.1:$((p + 1))" --http-listen "" 2>"$root/node$i.log" &
  pids+=($!)
  node_pids[$i]=$!
  ports[$i]=$p
done
for i in "${!bins[@]}"; do
  for _ in $(seq 200); do "$C" pb "127.0.0.1:${ports[$i]}" load 0 1 1 1 >/dev/null 2>&1 && break; sleep 0.2; done
  "$C" pb "127.0.0.1:${ports[$i]}" load 0 "$size" 10000 1 >/dev/null
done
for _ in $(seq 50); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.1; done
redis-benchmark -p "$rport" -c "$clients" -d "$size" -r 10000 -n 10000 -t set -q >/dev/null
# The operations of OP: one operation, or `mix`, the quick mix of
# examples/embedded_pb_quick.config (get 4, update 2, put 1, delete 1:
# 10 requests per 8 operations, an update being a GET and a PUT).
ops() { if [ "$1" = mix ]; then echo "{get, 4}, {update, 2}, {put, 1}, {delete, 1}"; else echo "{$1, 1}"; fi; }
cfg() { # OP PORT
  cat >"$root/$1-$2.config" <<EOF
{mode, max}.
{duration, 1}.
{basalt_duration_secs, $secs}.
{report_interval, $secs}.
{concurrent, $clients}.
{driver, basho_bench_driver_riakc_pb}.
{riakc_pb_ips, [{127,0,0,1}]}.
{riakc_pb_port, $2}.
{riakc_pb_replies, 1}.
{riakc_pb_bucket, <<"cost">>}.
{key_generator, {int_to_str, {uniform_int, 10000}}}.
{value_generator, {fixed_bin, $size}}.
{operations, [$(ops "$1")]}.
EOF
  echo "$root/$1-$2.config"
}
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) at start; $clients clients, $size-byte values, $secs s per run"
for r in $(seq "$rounds"); do
  for op in get set; do
    s0=$(ticks "$redis_pid")
    c=$(timed "$root/rb.out" redis-benchmark -p "$rport" -c "$clients" -d "$size" -r 10000 -n "$rn" -t "$op" -q)
    s1=$(ticks "$redis_pid")
    line=$(tr '\r' '\n' <"$root/rb.out" | grep -i "requests per second" | tail -1)
    echo "round $r redis $op: $line; CPU per request: server $(per_req $((s1 - s0)) "$rn") µs, client $(per_req "$c" "$rn") µs"
  done
  for i in "${!bins[@]}"; do
    for op in get put mix; do
      out="$root/out-$r-$i-$op"
      s0=$(ticks "${node_pids[$i]}")
      c=$(timed "$out.log" "$bench" bench "$(cfg "$op" "${ports[$i]}")" -d "$out" -q)
      s1=$(ticks "${node_pids[$i]}")
      ops=$(grep -o "avg [0-9.]* ops/s" "$out.log" | tail -1)
      n=$(grep -o "^[0-9]* ok" "$out.log" | tail -1 | cut -d' ' -f1)
      [ "$op" = mix ] && n=$(( ${n:-0} * 10 / 8 )) && ops="$ops = $(echo "$ops" | awk '{ printf "%.1f", $2 * 1.25 }') requests/s"
      echo "round $r basalt[$i] ${bins[$i]} $op: $ops; CPU per request: server $(per_req $((s1 - s0)) "${n:-0}") µs, client $(per_req "$c" "${n:-0}") µs"
    done
  done
done
echo "load: $(cut -d' ' -f1-3 /proc/loadavg) at end; runs in $root"
