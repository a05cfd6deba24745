#!/usr/bin/env bash
# The main job: a 60 s basho_bench-style volume test on an embedded Basalt
# store (examples/quickstart.config), then where to find its report.
# Installs the system packages the build needs first (RocksDB, for the
# rocksdb backends compiled into the `basalt` binary); extra arguments go to
# `basalt bench` (e.g. another config, or `-d DIR`).
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-deps.sh >&2
cargo run --release -q -p basalt-cli -- bench examples/quickstart.config "$@"
echo "report: tests/current/report.md  chart: tests/current/summary.png" >&2
