#!/usr/bin/env bash
# The cost of mutual TLS on the cluster port (issue 17): a 3-node cluster
# (ring 16, leveled, one process per node on this machine) with a plain
# cluster port vs cluster_certfile/keyfile/cacertfile from `basalt certs`;
# crates/bench/examples/live_pb_quick.config against node 1's PB port, so
# every request also crosses the cluster port to the other replicas
# (n_val 3: each GET and PUT has two remote replicas). ROUNDS rounds
# (default 3), the modes alternating, each on fresh data dirs; prints one
# line per run (load average before it, Avg TPS, errors). Run from the repo
# root after `cargo build --release -p basalt-cli`; BASALT_BIN overrides the
# binary, CTLSBENCH_DIR keeps certificates, logs and results (default: a
# temp dir); MODES="plain" or "tls" runs one mode. Uses ports 18187..18189 (PB) and 18197..18199 (cluster).
set -euo pipefail
B=$(realpath "${BASALT_BIN:-target/release/basalt}")
W=${CTLSBENCH_DIR:-$(mktemp -d)}
ROUNDS=${ROUNDS:-3}
MODES=${MODES:-plain tls}
CFG=$PWD/crates/bench/examples/live_pb_quick.config
rm -rf "$W/certs"
$B certs ca --out "$W/certs" >/dev/null
$B certs client --ca "$W/certs" --user ops >/dev/null
for i in 1 2 3; do
  $B certs node --ca "$W/certs" --name "n$i" >/dev/null
  printf 'cluster_certfile = "%s"\ncluster_keyfile = "%s"\ncluster_cacertfile = "%s"\n' \
    "$W/certs/n$i.pem" "$W/certs/n$i-key.pem" "$W/certs/ca.pem" >"$W/tls-n$i.toml"
  : >"$W/plain-n$i.toml"
done
printf '{riakc_pb_port, 18187}.\n' >"$W/bench.config"

adm() { # adm MODE NODE ARGS...: basalt admin, with the operator's certificate under tls
  local mode=$1 node=$2; shift 2
  if [[ $mode == tls ]]; then
    $B admin --node "127.0.0.1:1819$node" --cert "$W/certs/ops.pem" --key "$W/certs/ops-key.pem" \
      --cacert "$W/certs/ca.pem" "$@"
  else
    $B admin --node "127.0.0.1:1819$node" "$@"
  fi
}

for round in $(seq 1 "$ROUNDS"); do
  for mode in $MODES; do
    pids=() data=$(mktemp -d)
    for i in 1 2 3; do
      $B start --config "$W/$mode-n$i.toml" --node-name "n$i@127.0.0.1" --ring-size 16 \
        --data-dir "$data/n$i" --pb-listen "127.0.0.1:1818$((6 + i))" --http-listen "" \
        --cluster-listen "127.0.0.1:1819$((6 + i))" >"$W/node-$mode-$round-$i.log" 2>&1 &
      pids+=($!)
    done
    for i in 7 8 9; do
      for _ in $(seq 1 100); do adm $mode $i member-status >/dev/null 2>&1 && break; sleep 0.1; done
    done
    adm $mode 8 cluster join 127.0.0.1:18197 >/dev/null
    adm $mode 9 cluster join 127.0.0.1:18197 >/dev/null
    adm $mode 7 cluster plan >/dev/null
    adm $mode 7 cluster commit >/dev/null
    for _ in $(seq 1 300); do
      if adm $mode 7 ring-status 2>/dev/null | grep -q "pending ownership transfers: 0" &&
        [[ $(adm $mode 7 member-status 2>/dev/null | grep -c "^valid .* up ") == 3 ]]; then
        break
      fi
      sleep 0.2
    done
    load=$(cut -d' ' -f1 /proc/loadavg)
    (cd "$W" && $B bench -q -d "$W/results" -n "$mode-$round" "$CFG" "$W/bench.config" >"$W/bench-$mode-$round.log" 2>&1) ||
      { echo "bench $mode $round failed:"; tail -5 "$W/bench-$mode-$round.log"; }
    tps=$(grep -m1 -i "avg tps" "$W/results/$mode-$round/report.md" 2>/dev/null | head -1 || true)
    errs=$(grep -m1 -i "errors" "$W/results/$mode-$round/report.md" 2>/dev/null | head -1 || true)
    echo "$round $mode load=$load | $tps | $errs"
    for p in "${pids[@]}"; do kill -TERM "$p"; done
    for p in "${pids[@]}"; do wait "$p" || true; done
    rm -rf "$data"
  done
done
