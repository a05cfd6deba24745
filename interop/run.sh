#!/usr/bin/env bash
# Interop tests: drives a real `basalt start` process with the real Go Riak
# client (github.com/basho/riak-go-client, pinned in interop/go/go.mod), then
# with the real Node.js client (npm basho-riak-client 2.4.0, pinned in
# interop/node/package-lock.json).
#
#   bash interop/run.sh            # debug build of basalt (reuses target/)
#   BASALT_INTEROP_PROFILE=release bash interop/run.sh
#   BASALT_INTEROP_BIN=/path/to/basalt bash interop/run.sh   # no build
#   extra args go to `go test`, e.g.: bash interop/run.sh -run Siblings -v
#
# Builds basalt, starts a node on a free loopback port with a temporary data
# dir, waits for it to answer a PB ping (up to ~10 s), creates the bucket
# types the tests use (`basalt admin bucket-type`), runs `go test ./...`
# in interop/go with BASALT_PB_ADDR=127.0.0.1:PORT, stops the node with
# SIGTERM and checks it exits 0. Exits non-zero on any failure. The first
# run downloads the Go modules from the proxy (GOPROXY); later runs work
# offline from the module cache (go.sum pins every module).
#
# After the Go tests, against the same node: `npm ci --no-audit --no-fund`
# in interop/node when node_modules is missing or older than
# package-lock.json (needs the npm registry the first time), then
# `node --test` there. Needs node >= 18 and npm; BASALT_INTEROP_NODE=0 skips
# the Node part (the extra args above go to `go test` only).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD

if ! command -v go >/dev/null 2>&1; then
  echo "interop/run.sh: 'go' not found. The interop tests need Go >= 1.22" >&2
  echo "  (https://go.dev/dl/); CI machines have it." >&2
  exit 2
fi

run_node=${BASALT_INTEROP_NODE:-1}
if [[ $run_node != 0 ]]; then
  for tool in node npm; do
    if ! command -v "$tool" >/dev/null 2>&1; then
      echo "interop/run.sh: '$tool' not found. The Node interop tests need Node.js >= 18" >&2
      echo "  with npm (https://nodejs.org/); set BASALT_INTEROP_NODE=0 to skip them." >&2
      exit 2
    fi
  done
fi

profile=${BASALT_INTEROP_PROFILE:-debug}
if [[ -n "${BASALT_INTEROP_BIN:-}" ]]; then
  bin=$BASALT_INTEROP_BIN
else
  echo "== interop: building basalt ($profile)"
  build_args=(build -p basalt-cli --bin basalt --locked)
  [[ $profile == release ]] && build_args+=(--release)
  cargo "${build_args[@]}"
  bin="${CARGO_TARGET_DIR:-$root/target}/$profile/basalt"
fi
[[ -x $bin ]] || { echo "interop/run.sh: no basalt binary at $bin" >&2; exit 1; }

tmp=$(mktemp -d "${TMPDIR:-/tmp}/basalt-interop.XXXXXX")
pid=""
cleanup() {
  if [[ -n $pid ]] && kill -0 "$pid" 2>/dev/null; then
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT

# 1 if something answers a PB ping (00 00 00 01 01 -> 00 00 00 01 02) on $1.
pb_ping() {
  local reply
  reply=$(
    exec 2>/dev/null
    exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 1
    printf '\x00\x00\x00\x01\x01' >&3
    timeout 2 head -c5 <&3 | od -An -tx1 | tr -d ' \n'
  ) || return 1
  [[ $reply == 0000000102 ]]
}

port_in_use() { (exec 2>/dev/null 3<>"/dev/tcp/127.0.0.1/$1"); }

# Start the node on a random free port (retry if another process took it).
port=""
for attempt in 1 2 3 4 5; do
  p=$((20000 + RANDOM % 40000))
  port_in_use "$p" && continue
  rm -rf "$tmp/data"
  "$bin" start --data-dir "$tmp/data" --pb-listen "127.0.0.1:$p" --http-listen "" >"$tmp/node.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do # ~10 s
    if pb_ping "$p"; then port=$p; break; fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
  done
  [[ -n $port ]] && break
  echo "interop: node on port $p did not come up (attempt $attempt):" >&2
  tail -20 "$tmp/node.log" >&2
  kill -KILL "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  pid=""
done
if [[ -z $port ]]; then
  echo "interop/run.sh: could not start basalt" >&2
  exit 1
fi
echo "== interop: basalt pid $pid on 127.0.0.1:$port"

# Bucket types the Go tests use, made with the real admin CLI (like
# `riak admin bucket-type`): `plain` (what the Go client's own integration
# tests expect), `nomult` (allow_mult false), `interop_props` (changed by
# StoreBucketTypeProps) and `interop_inactive` (created, never activated).
admin() { "$bin" admin --node "127.0.0.1:$port" bucket-type "$@" >/dev/null; }
for t in plain interop_props; do
  admin create "$t" '{"props":{}}'
  admin activate "$t"
done
admin create nomult '{"props":{"allow_mult":false}}'
admin activate nomult
admin create interop_inactive '{"props":{}}'

status=0
(
  cd "$root/interop/go"
  BASALT_PB_ADDR="127.0.0.1:$port" go test -count=1 "$@" ./...
) || status=$?
if [[ $status -ne 0 ]]; then
  echo "interop: go test failed ($status); node log tail:" >&2
  tail -40 "$tmp/node.log" >&2
fi

if [[ $run_node != 0 ]]; then
  node_test_status=0
  (
    cd "$root/interop/node"
    if [[ ! -d node_modules || package-lock.json -nt node_modules/.package-lock.json ]]; then
      echo "== interop: npm ci (interop/node)"
      npm ci --no-audit --no-fund
    fi
    echo "== interop: node --test (basho-riak-client)"
    BASALT_PB_ADDR="127.0.0.1:$port" node --test
  ) || node_test_status=$?
  if [[ $node_test_status -ne 0 ]]; then
    echo "interop: node tests failed ($node_test_status); node log tail:" >&2
    tail -40 "$tmp/node.log" >&2
    status=$node_test_status
  fi
else
  echo "== interop: BASALT_INTEROP_NODE=0, skipping the Node client tests"
fi

# Graceful stop: SIGTERM, then the node must exit 0 within 20 s.
kill -TERM "$pid"
node_status=""
for _ in $(seq 1 200); do
  if ! kill -0 "$pid" 2>/dev/null; then
    node_status=0
    wait "$pid" || node_status=$?
    break
  fi
  sleep 0.1
done
pid_was=$pid
if [[ -z $node_status ]]; then
  echo "interop: basalt (pid $pid_was) did not exit within 20 s of SIGTERM" >&2
  status=1
elif [[ $node_status -ne 0 ]]; then
  echo "interop: basalt exited with status $node_status after SIGTERM; log tail:" >&2
  tail -40 "$tmp/node.log" >&2
  status=1
else
  pid=""
  echo "== interop: basalt stopped cleanly"
fi
exit "$status"
