#!/usr/bin/env bash
# Probes how this machine's disk treats foreground random reads while
# background I/O of the kinds the store does runs beside them: a paced
# sequential scan (journal compaction's input), paced appends with periodic
# syncs (its output), and file deletion (replaced journal and SST files).
# Each probe runs 16 fio threads of 8 KiB O_DIRECT random reads for a fixed
# time and prints their IOPS, p99.9, p99.99 and max latency, so that one
# background pattern can be compared with another side by side. Used for
# docs/benchmarks/2026-11-28-0930-disk-stalls-behind-get-maxima.md.
#
#   scripts/disk-probe.sh DIR [PROBE...]
#
# DIR needs ~8 GiB free on the disk under test. PROBEs (default: all):
#   alone         the random readers only
#   scan-ra       + a 64 MiB/s buffered scan advised SEQUENTIAL (kernel read-ahead)
#   scan-chunks   + the same scan advised RANDOM, read in 1 MiB chunks
#   sync8 / sync1 + 40 MB/s appends with an fdatasync every 8 MiB / 1 MiB
#   rm            + 1 GiB of files (4 x 256 MiB) unlinked at 10, 20 and 30 s
#   rm-steps      + the same files shrunk 8 MiB at a time before each unlink
#   flush256 / flush16 / flush4
#                 + 64 MB/s appends written back every 1 MiB
#                   (sync_file_range, as the journal flusher's steps) with an
#                   fdatasync every 256 / 16 / 4 MiB: how long the disk's
#                   cache flush holds the readers (2026-11-29 entry)
# Needs fio and python3. The disk's queue settings that matter are printed
# first (read_ahead_kb, max_sectors_kb, discard_max_bytes, mount options).
set -euo pipefail
dir=${1:?usage: scripts/disk-probe.sh DIR [PROBE...]}
shift
probes=("$@")
[ ${#probes[@]} -gt 0 ] || probes=(alone scan-ra scan-chunks sync8 sync1 rm rm-steps flush256 flush16 flush4)
command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)" >&2; exit 1; }
mkdir -p "$dir"
secs=40

dev=$(df --output=source "$dir" | tail -1)
blk=$(basename "$(readlink -f "$dev")")
for f in read_ahead_kb max_sectors_kb discard_max_bytes scheduler; do
  printf '%s: %s\n' "$f" "$(cat /sys/block/"$blk"/queue/$f 2>/dev/null || echo '?')"
done
printf 'mount: %s\n' "$(findmnt -no OPTIONS --target "$dir")"

data=$dir/probe-data
if [ ! -f "$data" ] || [ "$(stat -c %s "$data")" -lt $((4 << 30)) ]; then
  fio --name=prep --filename="$data" --size=4G --rw=write --bs=1M --direct=1 --output=/dev/null
fi

readers=(--name=rr --filename="$data" --rw=randread --bs=8k --direct=1 --numjobs=16
  --time_based --runtime=$secs --group_reporting --ioengine=psync)
scan=(--name=scan --filename="$data" --rw=read --rate=64m --numjobs=1 --time_based
  --runtime=$secs --ioengine=psync --invalidate=1)
appends=(--name=append --filename="$dir/probe-append" --size=3G --rw=write --rate=40m
  --numjobs=1 --time_based --runtime=$secs --ioengine=psync)

make_victims() {
  for i in 1 2 3; do for j in 1 2 3 4; do
    dd if=/dev/urandom of="$dir/probe-del$i-$j" bs=1M count=256 status=none
  done; done
  sync
}

delete_victims() { # $1: whole | steps
  sleep 10
  for i in 1 2 3; do
    for j in 1 2 3 4; do
      f=$dir/probe-del$i-$j
      if [ "$1" = steps ]; then
        for s in $(seq 248 -8 8); do truncate -s "${s}M" "$f"; done
      fi
      rm -f "$f"
    done
    sleep 10
  done
}

report() { # $1: probe name, $2: fio json
  python3 - "$1" "$2" <<'PY'
import json, sys
d = json.load(open(sys.argv[2]))
j = next(j for j in d['jobs'] if j['jobname'] == 'rr')
r = j['read']; c = r['clat_ns']; p = c['percentile']
line = '%-12s iops %6.0f  p99.9 %6.2f ms  p99.99 %6.2f ms  max %6.2f ms' % (
    sys.argv[1], r['iops'], p['99.900000'] / 1e6, p['99.990000'] / 1e6, c['max'] / 1e6)
bg = [j for j in d['jobs'] if j['jobname'] == 'append']
if bg and bg[0].get('sync', {}).get('lat_ns', {}).get('max'):
    line += '  | appender sync max %6.2f ms' % (bg[0]['sync']['lat_ns']['max'] / 1e6)
print(line)
PY
}

for probe in "${probes[@]}"; do
  out=$dir/probe-$probe.json
  bg=()
  case $probe in
    alone) ;;
    scan-ra) bg=("${scan[@]}" --bs=128k --fadvise_hint=sequential) ;;
    scan-chunks) bg=("${scan[@]}" --bs=1m --fadvise_hint=random) ;;
    sync8) bg=("${appends[@]}" --bs=1m --fdatasync=8) ;;
    sync1) bg=("${appends[@]}" --bs=128k --fdatasync=8) ;;
    flush256 | flush16 | flush4)
      bg=("${appends[@]}" --rate=64m --bs=1m --sync_file_range=write:1 --fdatasync="${probe#flush}") ;;
    rm | rm-steps) make_victims ;;
    *) echo "unknown probe $probe" >&2; exit 2 ;;
  esac
  deleter=
  if [ "$probe" = rm ]; then delete_victims whole & deleter=$!; fi
  if [ "$probe" = rm-steps ]; then delete_victims steps & deleter=$!; fi
  fio --output-format=json "${readers[@]}" "${bg[@]}" >"$out"
  if [ -n "$deleter" ]; then wait "$deleter"; fi
  rm -f "$dir"/probe-del* "$dir/probe-append"
  report "$probe" "$out"
done
