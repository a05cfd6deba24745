#!/usr/bin/env bash
# A scaled seed cluster test: starts 3 nodes (release build) on 127.0.0.1
# with the given backend (default leveled), joins them, commits, waits for
# the transfers, then runs crates/bench/examples/live_cluster_pareto_8kb.config
# (8 KB values, pareto keys, 5 GET : 1 UPDATE over PB) and stops the nodes.
# Usage: [BASALT=BIN] scripts/cluster-bench.sh [leveled|rocksdb|bitcask|memory] [extra bench configs...]
# (BASALT: the binary to run instead of building this tree's release one)
set -euo pipefail
backend="${1:-leveled}"; shift || true
cd "$(dirname "$0")/.."
if [ -n "${BASALT:-}" ]; then B="$BASALT"; else
  cargo build --release -q -p basalt-cli
  B="$PWD/target/release/basalt"
fi
root="$(mktemp -d /tmp/basalt-cluster-XXXXXX)"
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT
for i in 1 2 3; do
  "$B" start --node-name "n$i@127.0.0.1" --data-dir "$root/n$i" --backend "$backend" \
    --pb-listen "127.0.0.1:1818$i" --cluster-listen "127.0.0.1:1819$i" --http-listen "" --ring-size 64 2>"$root/n$i.log" &
  pids+=($!)
done
for i in 1 2 3; do
  for _ in $(seq 100); do "$B" admin --node "127.0.0.1:1819$i" member-status >/dev/null 2>&1 && break; sleep 0.1; done
done
"$B" admin --node 127.0.0.1:18192 cluster join 127.0.0.1:18191
"$B" admin --node 127.0.0.1:18193 cluster join 127.0.0.1:18191
"$B" admin --node 127.0.0.1:18191 cluster commit
until "$B" admin --node 127.0.0.1:18191 ring-status | grep -q "pending ownership transfers: 0"; do sleep 0.5; done
"$B" admin --node 127.0.0.1:18191 member-status
echo "backend $backend; node logs in $root"
"$B" bench crates/bench/examples/live_cluster_pareto_8kb.config "$@"
