#!/usr/bin/env bash
# The disk's own floor for the bench's GET maxima: what `mean(max)` (the mean
# over 10 s windows of each window's slowest request, the seeds' figure)
# would be if every GET were one 8 KiB value read from the disk and nothing
# else, no store, no CPU queue. Sixteen O_DIRECT random readers, paced
# together to the read rate you give (the store's value reads per second in
# the run you compare with), run alone and then beside a buffered writer at
# the store's write rate that fdatasyncs every 4 MiB, as the journal's
# default flush does. A store whose GET mean(max) is close to the second
# figure has little left to win on this disk; see
# docs/benchmarks/2026-11-30-1341-disk-floor-value-reads.md, where this floor was 8.6-10.1 ms beside writes.
# scripts/disk-probe.sh is its sibling for comparing background I/O patterns
# (unpaced readers, whole-run percentiles); this one paces the readers to the
# store's rate and reports per-window maxima, as the bench does.
#
#   scripts/disk-floor.sh DIR
#
# Settings (environment):
#   READ_IOPS   reads a second, all readers together   (default 34000)
#   READERS     reader threads                          (16, the bench's workers)
#   WRITE_RATE  the writer's rate, fio units            (80m)
#   SECS        length of each case, seconds           (120; windows are 10 s)
#   DATA_GB     size of the file read, GiB              (20; beyond the disk's cache)
#   CASES       any of: alone synced unsynced           ("alone synced")
# DIR needs DATA_GB + 8 GiB free. Needs fio and python3. Prints one line a
# case and writes DIR/floor-CASE.log files (fio's per-job latency logs).
set -euo pipefail
dir=${1:?usage: scripts/disk-floor.sh DIR}
read_iops=${READ_IOPS:-34000}
readers=${READERS:-16}
write_rate=${WRITE_RATE:-80m}
secs=${SECS:-120}
data_gb=${DATA_GB:-20}
read -r -a cases <<<"${CASES:-alone synced}"
command -v fio >/dev/null || { echo "fio is not installed (apt-get install fio)" >&2; exit 1; }
[ "$secs" -ge 10 ] || { echo "SECS must be at least 10 (one window)" >&2; exit 2; }
[ "$readers" -ge 1 ] && [ "$read_iops" -ge "$readers" ] ||
  { echo "READ_IOPS must be at least READERS (each reader is paced to READ_IOPS / READERS)" >&2; exit 2; }
for case in "${cases[@]}"; do
  case $case in alone | synced | unsynced) ;; *) echo "unknown case $case (alone, synced, unsynced)" >&2; exit 2 ;; esac
done
mkdir -p "$dir"
data=$dir/floor-data
need_kb=$(((data_gb + 8) << 20))
[ -f "$data" ] && need_kb=$((8 << 20))
free_kb=$(df -Pk "$dir" | awk 'NR == 2 { print $4 }')
[ "$free_kb" -ge "$need_kb" ] ||
  { echo "$dir has $((free_kb >> 20)) GiB free; this needs $((need_kb >> 20)) GiB" >&2; exit 1; }
if [ ! -f "$data" ] || [ "$(stat -c %s "$data")" -lt $((data_gb << 30)) ]; then
  echo "writing the ${data_gb} GiB file to read ($data) ..."
  fio --name=fill --filename="$data" --size="${data_gb}g" --rw=write --bs=1m --direct=1 \
    --ioengine=psync --output=/dev/null
fi
printf 'mount: %s; %d readers at %d reads/s together, writer at %s, %d s a case\n' \
  "$(findmnt -no OPTIONS --target "$dir")" "$readers" "$read_iops" "$write_rate" "$secs"

writer=(--name=writer --filename="$dir/floor-wdata" --size=8g --rw=write --bs=128k
  --rate="$write_rate" --ioengine=psync --time_based --runtime="$secs")
for case in "${cases[@]}"; do
  case $case in
    alone) bg=() ;;
    synced) bg=("${writer[@]}" --fdatasync=32) ;; # 32 x 128 KiB = an fdatasync every 4 MiB
    unsynced) bg=("${writer[@]}") ;;
  esac
  rm -f "$dir/floor-$case"_clat.*.log
  fio --name=readers --filename="$data" --size="${data_gb}g" --rw=randread --bs=8k --direct=1 \
    --ioengine=psync --numjobs="$readers" --rate_iops=$((read_iops / readers)) --time_based \
    --runtime="$secs" --write_lat_log="$dir/floor-$case" --log_avg_msec=10000 --log_max_value=1 \
    "${bg[@]}" --output=/dev/null >/dev/null
  rm -f "$dir/floor-wdata" "$dir/floor-$case"_{lat,slat}.*.log
  python3 - "$case" "$dir/floor-$case" <<'PY'
import collections, glob, sys
case, prefix = sys.argv[1], sys.argv[2]
windows = collections.defaultdict(float)   # 10 s window -> slowest read, ms
for path in glob.glob(prefix + "_clat.*.log"):
    for line in open(path):
        fields = [f.strip() for f in line.split(",")]
        if len(fields) < 3 or fields[2] != "0":  # direction 0 = read
            continue
        w = int(fields[0]) // 10000
        windows[w] = max(windows[w], int(fields[1]) / 1e6)
maxima = [windows[w] for w in sorted(windows)]
if not maxima:
    sys.exit("no read latencies logged for " + case)
print("%-9s mean(max) %6.2f ms   per 10 s: %s" % (
    case, sum(maxima) / len(maxima), " ".join("%.1f" % m for m in maxima)))
PY
done
