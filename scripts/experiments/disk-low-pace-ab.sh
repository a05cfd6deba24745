#!/usr/bin/env bash
# One-off (2026-12-03): does a node's write pace hold its disk at the low
# mark? Fills the data filesystem with a placeholder file until FREE_GB
# are left (just above the engine's 5 % low mark), then runs Cluster Test
# 1's load (examples/seed-suite/cluster/8kb_sync.config: 8 KB 5:1, pareto
# over 600,000 keys; the nodes without --sync, so the disk fills fast) on
# three live nodes for SECS with each binary in turn, sampling the filesystem's free bytes every
# 10 s; the placeholder and each run's data are removed after.
#   scripts/experiments/disk-low-pace-ab.sh OUT FREE_GB SECS NAME=BINARY...
set -euo pipefail
out=$1 free_gb=$2 secs=$3; shift 3
cd "$(dirname "$0")/../.."
mkdir -p "$out"
filler=/var/tmp/disk-low-pace.filler
trap 'rm -f "$filler"; rm -rf /tmp/seedcluster-*' EXIT
printf '{basalt_duration_secs, %s}.\n{key_generator, {int_to_str, {pareto_int, 600000}}}.\n' "$secs" >"$out/override.config"
for nb in "$@"; do
  name=${nb%%=*} bin=${nb#*=}
  rm -f "$filler"
  avail=$(df -B1 --output=avail /var/tmp | tail -1)
  fill=$((avail - free_gb * 1000000000))
  [ "$fill" -gt 0 ] && fallocate -l "$fill" "$filler"
  echo "== $name $(date -u +%T): $(df -B1 --output=avail / | tail -1) bytes free"
  (while sleep 10; do echo "$(date -u +%T) $(df -B1 --output=avail / | tail -1)"; done) >"$out/$name.free" &
  sampler=$!
  python3 scripts/seed-cluster.py --basalt "$bin" --nodes 3 --limit 768M --value-bytes 8000 \
    --backend leveled -d "$out" -n "$name" examples/seed-suite/cluster/8kb_sync.config \
    "$out/override.config" >"$out/$name.cluster.log" 2>&1 || echo "== $name: runner exit $?"
  kill "$sampler"
  rm -rf /tmp/seedcluster-*
  echo "== $name end $(date -u +%T)"
done
