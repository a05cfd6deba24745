#!/usr/bin/env bash
# One-command backend comparison: runs SCENARIO once per backend (each run
# gets {basalt_backend, B} as an override file, later files win) and writes
# the comparison (table + overlaid throughput charts) of the runs.
#
#   examples/compare.sh [-s SCENARIO] [-d RESULTS_DIR] [BACKEND...]
#
# Defaults: SCENARIO examples/quickstart.config, RESULTS_DIR tests/compare-<time>,
# BACKEND leveled rocksdb bitcask (e.g. `examples/compare.sh leveled bitcask
# rocksdb rocksdb-blob memory` for all of them).
# BENCH overrides the command (default: cargo run --release -p basalt-bench --).
set -euo pipefail
cd "$(dirname "$0")/.."
scenario=examples/quickstart.config
results="tests/compare-$(date -u +%Y%m%d_%H%M%S)"
while getopts "s:d:" opt; do
  case $opt in
    s) scenario=$OPTARG ;;
    d) results=$OPTARG ;;
    *) echo "usage: $0 [-s SCENARIO] [-d RESULTS_DIR] [BACKEND...]" >&2; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
backends=("$@")
[ ${#backends[@]} -eq 0 ] && backends=(leveled rocksdb bitcask)
if [ -n "${BENCH:-}" ]; then read -r -a bench <<<"$BENCH"; else
  cargo build --release -q -p basalt-bench
  bench=(cargo run --release -q -p basalt-bench --)
fi
mkdir -p "$results"
dirs=()
for b in "${backends[@]}"; do
  override="$results/backend-$b.config"
  printf "{basalt_backend, '%s'}.\n" "$b" >"$override"
  echo "== $b: $scenario" >&2
  "${bench[@]}" "$scenario" "$override" -d "$results" -n "$b"
  dirs+=("$results/$b")
done
"${bench[@]}" compare "${dirs[@]}" -o "$results/compare"
echo "comparison: $results/compare/compare.md" >&2
