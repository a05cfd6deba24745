#!/usr/bin/env bash
# A/B of the replication sender (one batch in flight vs several): the NHS
# mix on two 3-node leveled clusters replicating both ways, alternated
# A B A B ..., each run SECS s over KEYS keys with LIMIT a node.
# Usage: scripts/experiments/repl-pipeline-ab.sh A_BIN B_BIN OUT [ROUNDS] [SECS] [KEYS] [LIMIT]
# WORKERS=N overrides the config's 24 workers (`concurrent`).
set -euo pipefail
a=$1 b=$2 out=$3 rounds=${4:-2} secs=${5:-120} keys=${6:-20000} limit=${7:-1G}
mkdir -p "$out"
base=examples/seed-suite/cluster/nhs_mix.config
for r in $(seq 1 "$rounds"); do
  for side in A B; do
    bin=$a; [ "$side" = B ] && bin=$b
    ov="$out/override-$side$r.config"
    printf '{basalt_duration_secs, %s}.\n{key_generator, {eightytwenty_int, %s}}.\n' "$secs" "$keys" >"$ov"
    [ -n "${WORKERS:-}" ] && echo "{concurrent, $WORKERS}." >>"$ov"
    echo "== round $r $side ($bin)" >&2
    python3 scripts/seed-cluster.py --basalt "$bin" --nodes 3 --limit "$limit" --value-bytes 28000 \
      --backend leveled --clusters 2 -d "$out" -n "$side$r" "$base" "$ov" >"$out/$side$r.cluster.log" 2>&1 || true
  done
done
