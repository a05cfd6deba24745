#!/usr/bin/env bash
# Runs every test of the workspace. Short, fixed-seed versions of the
# property, crash and corruption tests run by default; set
# BASALT_LONG_TESTS=1 for the long soak and crash-loop versions, and
# BASALT_TEST_SEED=<u64> to replay a seed a failure printed.
# Last, interop/run.sh drives a real `basalt start` node with the Go and
# Node.js Riak clients, then a 3-node cluster with the Go client (needs Go,
# node and npm; ~8 s once built, ~35 s with cold Go/npm caches; see
# docs/testing.md "Interop tests", including the cluster stage's shutdown
# check); BASALT_INTEROP=0 skips it, BASALT_INTEROP_NODE=0 only its Node
# part, BASALT_INTEROP_CLUSTER=0 only its cluster stage.
# Then browser/run.sh: the web console in headless chromium against a live
# 3-node cluster under bench load (~35 s once built; skips itself without
# chromium); BASALT_BROWSER=0 skips it.
set -euo pipefail
cd "$(dirname "$0")/.."
# RocksDB (for the rocksdb backends), idempotent.
bash .ci/install-deps.sh
cargo test --workspace --locked "$@"
echo "== cargo tests done (at ${SECONDS} s of the tests)"
if [[ "${BASALT_INTEROP:-1}" != 0 ]]; then
  bash interop/run.sh
fi
if [[ "${BASALT_BROWSER:-1}" != 0 ]]; then
  echo "== browser tests (at ${SECONDS} s of the tests)"
  bash browser/run.sh
fi
