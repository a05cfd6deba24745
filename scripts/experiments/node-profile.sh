#!/usr/bin/env bash
# Where the CPU of a running seed cluster goes: a system-wide flat
# profile (perf record -a, no call graphs: the release build has no frame
# pointers) for SECS seconds after DELAY seconds, summed by thread name,
# by binary and by symbol (issue 56 item 2). Start the load first, e.g.
#
#   BACKENDS=leveled BASALT=/work/bin/basalt-X scripts/seed-suite.sh --cluster 3 --long -t 300 -k 600000 -d /var/tmp/prof 8kb_sync &
#   scripts/experiments/node-profile.sh /var/tmp/prof-perf 120 60
#
# Writes OUT/perf.data and OUT/{comm,dso,sym}.txt (perf report --stdio,
# percentages of all samples on both vCPUs, idle included). Needs root
# (or perf_event_paranoid <= 0) and perf. Written 2026-12-06 for
# docs/benchmarks/2026-12-06-1816-object-bytes-between-nodes.md.
set -euo pipefail
out=${1:?usage: node-profile.sh OUT [DELAY] [SECS]}
delay=${2:-120}
secs=${3:-60}
command -v perf >/dev/null || { echo "node-profile: perf not found" >&2; exit 2; }
mkdir -p "$out"
echo "node-profile: waiting ${delay}s, then ${secs}s of samples at 499 Hz on every CPU"
sleep "$delay"
pgrep -af "basalt[^ ]* (start|bench)" > "$out/processes.txt" || {
  echo "node-profile: no basalt node or bench running" >&2
  exit 1
}
perf record -a -F 499 -o "$out/perf.data" -- sleep "$secs" 2> "$out/record.log"
for key in comm dso sym; do
  perf report -i "$out/perf.data" --stdio --sort "$key" --percent-limit 0.3 2>/dev/null |
    grep -v '^$' > "$out/$key.txt"
done
perf report -i "$out/perf.data" --stdio --sort comm,dso,sym --percent-limit 0.4 2>/dev/null |
  grep -v '^$' > "$out/comm-sym.txt"
echo "node-profile: $out/{comm,dso,sym,comm-sym}.txt"
