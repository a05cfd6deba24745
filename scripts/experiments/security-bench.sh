#!/usr/bin/env bash
# The cost of security (issue 17): crates/bench/examples/live_pb_quick.config
# against one node with security off (plain PB), TLS only (STARTTLS, security
# disabled) and TLS + password (security enabled, a password source, a grant
# on any); 3 rounds, the modes alternating, each on a fresh data dir; prints
# one line per run (load average before it, Avg TPS). Run from the repo root
# after `cargo build --release -p basalt-cli`; BASALT_BIN overrides the
# binary, SECBENCH_DIR keeps certificates and results (default: a temp dir).
# Uses ports 18087 (PB) and 18099 (cluster).
set -euo pipefail
B=$(realpath "${BASALT_BIN:-target/release/basalt}")
W=${SECBENCH_DIR:-$(mktemp -d)}
CFG=$PWD/crates/bench/examples/live_pb_quick.config
rm -rf $W/certs; $B certs ca --out $W/certs >/dev/null; $B certs node --ca $W/certs --name node1 >/dev/null
printf 'tls_certfile = "%s"\ntls_keyfile = "%s"\n' $W/certs/node1.pem $W/certs/node1-key.pem > $W/node.toml
printf '{riakc_pb_port, 18087}.\n' > $W/plain.config
printf '{riakc_pb_port, 18087}.\n{basalt_pb_cacertfile, "%s"}.\n' $W/certs/ca.pem > $W/tls.config
printf '{riakc_pb_port, 18087}.\n{basalt_pb_cacertfile, "%s"}.\n{basalt_pb_user, "bench"}.\n{basalt_pb_password, "b3nch"}.\n' $W/certs/ca.pem > $W/auth.config
for round in 1 2 3; do
  for mode in plain tls auth; do
    data=$(mktemp -d)
    $B start --config $W/node.toml --data-dir $data --pb-listen 127.0.0.1:18087 --http-listen "" --cluster-listen 127.0.0.1:18099 > $W/node-$mode-$round.log 2>&1 &
    pid=$!
    for _ in $(seq 1 100); do $B admin --node 127.0.0.1:18099 member-status >/dev/null 2>&1 && break; sleep 0.1; done
    if [[ $mode == auth ]]; then
      A="$B admin --node 127.0.0.1:18099 security"
      $A add-user bench password=b3nch >/dev/null; $A add-source all 127.0.0.1/32 password >/dev/null
      $A grant riak_kv.get,riak_kv.put,riak_kv.delete on any to bench >/dev/null; $A enable >/dev/null
    fi
    load=$(cut -d' ' -f1 /proc/loadavg)
    (cd $W && $B bench -q -d $W/results -n $mode-$round $CFG $W/$mode.config >/dev/null 2>&1) || echo "bench $mode $round failed"
    tps=$(grep -m1 -i "avg tps\|Avg TPS" $W/results/$mode-$round/report.md 2>/dev/null | head -1)
    errs=$(grep -m1 -i "errors" $W/results/$mode-$round/report.md 2>/dev/null | head -1)
    echo "$round $mode load=$load | $tps | $errs"
    kill -TERM $pid; wait $pid || true
    rm -rf $data
  done
done
