#!/usr/bin/env bash
# One-off (2026-12-03): how much disk a node's leveled vnodes hold ahead of
# journal compaction, and what it costs, by journal file size. Runs Cluster
# Test 3's load (examples/seed-suite/cluster/8kb_nosync.config: sync off,
# 8 KB 5 GET : 1 UPDATE, pareto over 600,000 keys) on three live leveled
# nodes (768 MiB each) for SECS per run with each `journal_file_mb` in
# turn (pass A B B A to alternate), sampling the nodes' bytes every 30 s
# (the runner's work directory: blocks allocated, `du -sB1`, then apparent
# size, `du -sb` -- compaction punches holes, which only the first shows);
# each run's data is removed after it.
#   scripts/experiments/journal-file-size-ab.sh OUT SECS BINARY MB...
set -euo pipefail
out=$1 secs=$2 bin=$3; shift 3
cd "$(dirname "$0")/../.."
mkdir -p "$out"
trap 'rm -rf /tmp/seedcluster-jfs' EXIT
printf '{basalt_duration_secs, %s}.\n{key_generator, {int_to_str, {pareto_int, 600000}}}.\n' "$secs" >"$out/override.config"
i=0
for mb in "$@"; do
  i=$((i + 1))
  name="r$i-${mb}mb"
  work=/tmp/seedcluster-jfs
  rm -rf "$work"
  echo "== $name $(date -u +%T): $(df -B1 --output=avail /tmp | tail -1) bytes free"
  (while sleep 30; do echo "$(date -u +%T) $(du -sB1 "$work" 2>/dev/null | cut -f1) $(du -sb "$work" 2>/dev/null | cut -f1)"; done) >"$out/$name.disk" &
  sampler=$!
  python3 scripts/seed-cluster.py --basalt "$bin" --nodes 3 --limit 768M --value-bytes 8000 \
    --backend leveled --set "journal_file_mb=$mb" --work "$work" -d "$out" -n "$name" \
    examples/seed-suite/cluster/8kb_nosync.config "$out/override.config" \
    >"$out/$name.cluster.log" 2>&1 || echo "== $name: runner exit $?"
  kill "$sampler"
  rm -rf "$work"
  echo "== $name end $(date -u +%T)"
done
