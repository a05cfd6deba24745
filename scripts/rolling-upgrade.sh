#!/usr/bin/env bash
# A rolling upgrade under load, for real: a 3-node cluster of an old
# release (default v0.1.0, built and cached by scripts/release-binary.sh)
# plus a one-node replication sink cluster (old too, and left old: the new
# nodes replicate to it), all on 127.0.0.1 with the leveled backend. The
# load (crates/cli/examples/upgrade_load.rs: PUTs with 2i, GETs, 2i queries,
# counter and set updates at r = w = 2, each failed request retried on the
# next node as Riak's clients do) runs throughout. Phases:
#   before        PHASE_SECS of load on the old cluster
#   upgrade-nI    for n1, n2, n3 in turn: SIGTERM, wait for the exit, start
#                 this tree's release build on the same data dir,
#                 `admin wait-for-service riak_kv`, wait until no transfers
#                 are left (the hinted handoffs back to it)
#   after         PHASE_SECS of load on the new cluster
#   downgrade-n3  n3 stopped and started again with the OLD binary: it
#                 serves (PHASE_SECS of load), or refuses to start (its
#                 message is reported; n3 then goes back to the new binary).
#                 Skipped, saying so, when the new build wrote a data format
#                 (n3's FORMAT) newer than 1 and the old release is v0.1.0,
#                 which predates the marker and would not refuse it
#                 (docs/operations.md "Data format 2").
# Then the load stops, the replication queues drain, and every acknowledged
# write is read back from the cluster and from the sink
# (`upgrade_load verify`). The report (RUN/report.txt) has each phase's
# requests, failures (after retries on the other nodes), throughput and
# latency, each node's stop and start times, and the checks.
# Exit 0 only if no request failed and no acknowledged write was lost.
#
# Usage: scripts/rolling-upgrade.sh            (from the repository root)
# Environment: PHASE_SECS (60), WORKERS (4), KEYS (object keys per
# worker, 2000), RATE (requests/s per worker, 0 = unpaced), RING (64),
# TRANSFER_WAIT (120: at most this many seconds waiting for the transfers
# after each restart; then the next step goes on and the report says so),
# OLD_VERSION (0.1.0), BASALT_UPGRADE_DIR (the run's directory; default a
# new /tmp/basalt-upgrade-XXXXXX), BASALT_RELEASE_CACHE, CARGO_TARGET_DIR,
# BASALT_NEW_BIN and BASALT_LOAD_BIN (binaries built already: no cargo).
set -euo pipefail
cd "$(dirname "$0")/.."
PHASE_SECS="${PHASE_SECS:-60}"
WORKERS="${WORKERS:-4}"
KEYS="${KEYS:-2000}"
RATE="${RATE:-0}"
RING="${RING:-64}"
TRANSFER_WAIT="${TRANSFER_WAIT:-120}"
OLD_VERSION="${OLD_VERSION:-0.1.0}"
target="${CARGO_TARGET_DIR:-$PWD/target}"
run="${BASALT_UPGRADE_DIR:-$(mktemp -d /tmp/basalt-upgrade-XXXXXX)}"
mkdir -p "$run"
report="$run/report.txt"
: >"$report"
say() { echo "$*" | tee -a "$report"; }

old_src="$(scripts/release-binary.sh "$OLD_VERSION")"
# BASALT_NEW_BIN / BASALT_LOAD_BIN: binaries built already (no cargo run).
if [ -z "${BASALT_NEW_BIN:-}" ]; then
  cargo build --release -q -p basalt-cli
  BASALT_NEW_BIN="$target/release/basalt"
fi
if [ -z "${BASALT_LOAD_BIN:-}" ]; then
  cargo build -q -p basalt-cli --example upgrade_load
  BASALT_LOAD_BIN="$target/debug/examples/upgrade_load"
fi
# Copies: a build during the run must not change them.
cp "$old_src" "$run/basalt-old"
cp "$BASALT_NEW_BIN" "$run/basalt-new"
cp "$BASALT_LOAD_BIN" "$run/upgrade_load"
OLD="$run/basalt-old"
NEW="$run/basalt-new"
LOAD="$run/upgrade_load"
say "rolling upgrade: $("$OLD" --version) -> $("$NEW" --version); run dir $run"
say "load: $WORKERS workers, $KEYS keys each, rate ${RATE:-0}/s per worker (0 = unpaced), ring $RING, phases of ${PHASE_SECS}s"

# Ports below the kernel's ephemeral range, none twice (scripts/lib/ports.sh).
source scripts/lib/ports.sh # (the cwd is the repo root)
declare -a pb cl pid
for i in 1 2 3 4; do
  pick_ports 2 || { echo "rolling-upgrade: no free loopback ports" >&2; exit 1; }
  pb[$i]=$picked_port cl[$i]=$((picked_port + 1))
done
sink="127.0.0.1:${cl[4]}"
for i in 1 2 3; do
  printf '[repl]\nsinks = ["%s"]\n' "$sink" >"$run/n$i.toml"
done
: >"$run/n4.toml"

cleanup() {
  touch "$run/stop"
  for i in 1 2 3 4; do
    if [ -n "${pid[$i]:-}" ]; then kill "${pid[$i]}" 2>/dev/null || true; fi
  done
  if [ -n "${load_pid:-}" ]; then kill "$load_pid" 2>/dev/null || true; fi
  wait 2>/dev/null || true
}
trap cleanup EXIT

start_node() { # I BINARY
  local i="$1" bin="$2"
  echo "=== $(date -u +%FT%TZ) start $("$bin" --version)" >>"$run/n$i.log"
  RUST_LOG=warn "$bin" start --config "$run/n$i.toml" --node-name "n$i@127.0.0.1" --data-dir "$run/n$i" \
    --backend leveled --ring-size "$RING" --pb-listen "127.0.0.1:${pb[$i]}" \
    --cluster-listen "127.0.0.1:${cl[$i]}" --http-listen "" >>"$run/n$i.log" 2>&1 &
  pid[$i]=$!
}
# Waits until node I serves riak_kv; fails if its process ended.
wait_service() { # I BINARY
  local i="$1" bin="$2" t0=$SECONDS
  until "$bin" admin --node "127.0.0.1:${cl[$i]}" wait-for-service riak_kv --timeout 2 >/dev/null 2>&1; do
    kill -0 "${pid[$i]}" 2>/dev/null || return 1
    [ $((SECONDS - t0)) -lt 120 ] || { echo "n$i: no riak_kv after 120 s" >&2; return 1; }
  done
}
stop_node() { # I: SIGTERM, wait; sets $stopped to the seconds it took and the exit code
  local i="$1" t0 rc=0
  t0="$(date +%s.%N)"
  kill -TERM "${pid[$i]}"
  wait "${pid[$i]}" || rc=$?
  pid[$i]=""
  stopped="$(python3 -c "print(round($(date +%s.%N) - $t0, 1))") s (exit $rc)"
}
# Until no transfers wait or run anywhere, at most $1 s (default
# TRANSFER_WAIT); then it goes on, reporting what still waits.
wait_transfers() {
  local t0=$SECONDS out limit="${1:-$TRANSFER_WAIT}"
  while :; do
    out="$("$NEW" admin --node "127.0.0.1:${cl[1]}" transfers 2>&1 || true)"
    if grep -q "No transfers active" <<<"$out" && ! grep -q "transfer type:\|could not be contacted" <<<"$out"; then
      say "transfers: none left after $((SECONDS - t0)) s"
      return 0
    fi
    if [ $((SECONDS - t0)) -ge "$limit" ]; then
      say "transfers: still pending after $limit s, going on: $(grep "waiting to hand off" <<<"$out" | tr '\n' ';')"
      return 0
    fi
    sleep 1
  done
}
repl_waiting() { # entries queued or in flight for the sink, summed over n1..n3
  local total=0 n
  for i in 1 2 3; do
    n="$("$NEW" admin --node "127.0.0.1:${cl[$i]}" --json repl status | python3 -c '
import json, sys
d = json.load(sys.stdin)
print(sum(sum(s["queue"].values()) + s["in_flight"] for s in d["sinks"]))')"
    total=$((total + n))
  done
  echo "$total"
}
phase() { echo "$1" >"$run/phase"; say "--- $(date -u +%T) phase $1"; }

# The old cluster and its sink.
for i in 1 2 3 4; do start_node "$i" "$OLD"; done
for i in 1 2 3 4; do wait_service "$i" "$OLD"; done
"$OLD" admin --node "127.0.0.1:${cl[2]}" cluster join "127.0.0.1:${cl[1]}" >/dev/null
"$OLD" admin --node "127.0.0.1:${cl[3]}" cluster join "127.0.0.1:${cl[1]}" >/dev/null
"$OLD" admin --node "127.0.0.1:${cl[1]}" cluster plan >/dev/null
"$OLD" admin --node "127.0.0.1:${cl[1]}" cluster commit >/dev/null
until "$OLD" admin --node "127.0.0.1:${cl[1]}" ring-status | grep -q "pending ownership transfers: 0"; do sleep 1; done
for node in 1 4; do
  "$OLD" admin --node "127.0.0.1:${cl[$node]}" bucket-type create counters '{"props":{"datatype":"counter"}}' >/dev/null
  "$OLD" admin --node "127.0.0.1:${cl[$node]}" bucket-type activate counters >/dev/null
  "$OLD" admin --node "127.0.0.1:${cl[$node]}" bucket-type create sets '{"props":{"datatype":"set"}}' >/dev/null
  "$OLD" admin --node "127.0.0.1:${cl[$node]}" bucket-type activate sets >/dev/null
done
for i in 2 3; do
  until "$OLD" admin --node "127.0.0.1:${cl[$i]}" bucket-type status sets | grep -q "sets is active"; do sleep 0.5; done
done
say "$("$OLD" admin --node "127.0.0.1:${cl[1]}" member-status)"
# The joins' handoffs (and the deletes after them) done before the load.
wait_transfers 600

phase before
nodes="127.0.0.1:${pb[1]},127.0.0.1:${pb[2]},127.0.0.1:${pb[3]}"
"$LOAD" load --nodes "$nodes" --workers "$WORKERS" --keys "$KEYS" --rate "$RATE" \
  --phase-file "$run/phase" --stop-file "$run/stop" --out "$run/load" >"$run/load.txt" 2>"$run/load.log" &
load_pid=$!
sleep "$PHASE_SECS"

for i in 1 2 3; do
  phase "upgrade-n$i"
  stop_node "$i"
  say "n$i: stopped in $stopped (old)"
  t0=$SECONDS
  start_node "$i" "$NEW"
  wait_service "$i" "$NEW" || { say "n$i: the new binary did not start: $(tail -5 "$run/n$i.log")"; exit 1; }
  say "n$i: new binary serving riak_kv after $((SECONDS - t0)) s"
  wait_transfers
done

phase after
sleep "$PHASE_SECS"

phase downgrade-n3
n3_format="$(sed -n 's/^basalt-data //p' "$run/n3/FORMAT" 2>/dev/null || true)"
if [ "$OLD_VERSION" = 0.1.0 ] && [ "${n3_format:-1}" -gt 1 ]; then
  say "downgrade: skipped: n3's data directory is format $n3_format, which v0.1.0 cannot read and (predating the FORMAT marker) would not refuse"
  sleep "$PHASE_SECS"
  downgraded=skipped
else
  stop_node 3
  say "n3: stopped in $stopped (new)"
  start_node 3 "$OLD"
  if wait_service 3 "$OLD"; then
    say "downgrade: n3 serves on the old binary ($("$OLD" --version)) over the data the new one wrote"
    wait_transfers
    sleep "$PHASE_SECS"
    downgraded=1
  else
    say "downgrade: the old binary refused n3's data dir:"
    say "$(grep -v '^===' "$run/n3.log" | tail -5)"
    start_node 3 "$NEW"
    wait_service 3 "$NEW"
    downgraded=0
  fi
fi

touch "$run/stop"
wait "$load_pid"
load_pid=""
say ""
say "$(cat "$run/load.txt")"
wait_transfers 300
t0=$SECONDS
while [ "$(repl_waiting)" != 0 ]; do
  [ $((SECONDS - t0)) -lt 300 ] || { say "replication queues not drained after 300 s"; break; }
  sleep 1
done
say "replication queues drained $((SECONDS - t0)) s after the load stopped"

status=0
"$LOAD" verify --nodes "$nodes" --state "$run/load/state.json" --label cluster >"$run/verify-cluster.json" || status=1
say "verify cluster: $(cat "$run/verify-cluster.json")"
"$LOAD" verify --nodes "127.0.0.1:${pb[4]}" --state "$run/load/state.json" --label sink >"$run/verify-sink.json" || status=1
say "verify sink:    $(cat "$run/verify-sink.json")"
failed="$(python3 -c "import json; print(sum(p['failed'] for p in json.load(open('$run/load/summary.json'))['phases']))")"
say "failed requests (after retries): $failed; downgrade worked: $downgraded"
[ "$failed" = 0 ] || status=1
for i in 1 2 3 4; do
  if [ -n "${pid[$i]:-}" ]; then
    stop_node "$i"
    say "n$i: stopped in $stopped"
  fi
done
say "report: $report"
exit "$status"
