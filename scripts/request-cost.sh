#!/usr/bin/env bash
# What one request costs, in deterministic counts: runs a release node
# under `valgrind --tool=callgrind` (instrumentation off until the counted
# phase), loads KEYS keys with crates/bench/examples/request_cost.rs, then
# for each of GET, PUT and UPDATE turns instrumentation on, sends COUNT
# requests over one PB connection, turns it off and dumps the profile; then
# the same for the embedded leveled store (no node). scripts/request-cost.py
# turns the dumps into the table of docs/server.md "What a request costs".
# Usage: [BASALT_BIN=path] scripts/request-cost.sh [N_VAL=1] [VALUE_BYTES=1000] [COUNT=2000] [KEYS=1000]
# Output: /tmp/cpu-cost-*/ (callgrind.out.* per phase) and the table on stdout.
set -euo pipefail
nval="${1:-1}"; size="${2:-1000}"; count="${3:-2000}"; keys="${4:-1000}"
cd "$(dirname "$0")/.."
T="${CARGO_TARGET_DIR:-$PWD/target}"
# BASALT_BIN: the node binary to measure (default: build this tree's).
if [ -z "${BASALT_BIN:-}" ]; then cargo build --release -q -p basalt-cli; fi
C="$T/release/examples/request_cost"
[ -x "$C" ] || cargo build --release -q -p basalt-bench --example request_cost
B="${BASALT_BIN:-$T/release/basalt}"
root="$(mktemp -d /tmp/cpu-cost-XXXXXX)"
echo "$B ($("$B" --version 2>/dev/null | head -1))" >"$root/binary"
source scripts/lib/ports.sh # below the ephemeral range
pick_ports 2
port=$picked_port cport=$((picked_port + 1))
pid=""
cleanup() { [ -n "$pid" ] && kill "$pid" 2>/dev/null; wait 2>/dev/null || true; }
trap cleanup EXIT
valgrind --tool=callgrind --instr-atstart=no --dump-instr=no --separate-threads=yes \
  --callgrind-out-file="$root/node.%p" \
  "$B" start --data-dir "$root/node" --pb-listen "127.0.0.1:$port" \
  --cluster-listen "127.0.0.1:$cport" --http-listen "" 2>"$root/node.log" &
pid=$!
for _ in $(seq 600); do "$C" pb "127.0.0.1:$port" load 0 1 1 >/dev/null 2>&1 && break; sleep 0.5; done
"$C" pb "127.0.0.1:$port" load 0 "$size" "$keys" "$nval"
"$C" pb "127.0.0.1:$port" get 200 "$size" "$keys" >/dev/null   # warm up
for op in get put update; do
  callgrind_control -z "$pid" >/dev/null
  callgrind_control -i on "$pid" >/dev/null
  "$C" pb "127.0.0.1:$port" "$op" "$count" "$size" "$keys"
  callgrind_control -i off "$pid" >/dev/null
  callgrind_control -d "$op" "$pid" >/dev/null
done
kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
for f in "$root"/node.*.[0-9]*-[0-9]*; do
  op=$(grep -m1 '^desc: Trigger' "$f" | sed 's/.*Trigger: dump //')
  mv "$f" "$root/node-$op-${f##*-}.cg"
done
for op in get put update; do
  m="$root/marks-$op"; mkdir -p "$m"
  valgrind --tool=callgrind --instr-atstart=no --dump-instr=no --separate-threads=yes \
    --callgrind-out-file="$root/embedded-$op.cg" \
    "$C" embedded "$root/embedded-$op" "$op" "$count" "$size" "$keys" "$m" 2>>"$root/embedded.log" &
  pid=$!
  until [ -e "$m/ready" ]; do sleep 0.2; done
  callgrind_control -i on "$pid" >/dev/null; touch "$m/go"
  until [ -e "$m/done" ]; do sleep 0.2; done
  callgrind_control -i off "$pid" >/dev/null; touch "$m/end"
  wait "$pid"; pid=""
done
echo "profiles in $root (n_val $nval, $size-byte values, $count requests per op, $keys keys)"
python3 scripts/request-cost.py "$root" "$count"
