#!/usr/bin/env python3
"""Samples a block device's counters every 100 ms, to line the disk's work up
with a benchmark's slow intervals: reads and their total wait, writes,
requests in flight, discards (count, sectors, wait) and flushes.

  scripts/disk-stat-sampler.py DEV OUT.csv SECONDS    # e.g. vda disk.csv 640
  scripts/disk-stat-sampler.py --bursts OUT.csv        # summarise a sample file

`--bursts` prints the mean read wait of the samples without discards, with
small ones and with over 50 MiB of them, and the discard bursts (runs of
samples over 50 MiB: start, length, MiB). Used for the 2026-11-28 14:36 part
of docs/benchmarks/2026-11-28-1251-where-get-maxima-wait.md. The counters are those of
/sys/block/DEV/stat (Documentation/block/stat.rst); the times are wall-clock
seconds.
"""
import csv
import statistics
import sys
import time

FIELDS = "t,reads,read_ms,writes,write_sectors,write_ms,inflight,discards,discard_sectors,discard_ms,flushes,flush_ms"


def sample(dev, path, secs):
    t0 = time.time()
    with open(path, "w") as out:
        out.write(FIELDS + "\n")
        while time.time() - t0 < secs:
            with open("/sys/block/%s/stat" % dev) as f:
                v = [int(x) for x in f.read().split()]
            v += [0] * (17 - len(v))
            row = (time.time(), v[0], v[3], v[4], v[6], v[7], v[8], v[11], v[13], v[14], v[15], v[16])
            out.write("%.3f,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d,%d\n" % row)
            out.flush()
            time.sleep(0.1)


def bursts(path):
    rows = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(open(path))]
    if len(rows) < 2:
        sys.exit("fewer than two samples")
    t0 = rows[0]["t"]
    deltas = []
    for prev, cur in zip(rows, rows[1:]):
        d = {k: cur[k] - prev[k] for k in cur}
        if d["reads"] > 0:
            deltas.append((cur["t"] - t0, d["read_ms"] / d["reads"], d["discard_sectors"] * 512 / 2**20))
    groups = [("no discards", [x for x in deltas if x[2] == 0]),
              ("up to 50 MiB of discards", [x for x in deltas if 0 < x[2] <= 50]),
              ("over 50 MiB of discards", [x for x in deltas if x[2] > 50])]
    for name, g in groups:
        if g:
            waits = sorted(x[1] for x in g)
            print("%-26s %5d samples: mean read wait median %.2f ms, p90 %.2f ms" % (
                name, len(g), statistics.median(waits), waits[int(0.9 * len(waits))]))
    runs, cur = [], None
    for t, _, mib in deltas:
        if mib > 50:
            if cur and t - cur[1] < 0.35:
                cur[1], cur[2] = t, cur[2] + mib
            else:
                cur = [t, t, mib]
                runs.append(cur)
    print("discard bursts (start s, length s, MiB): " + ", ".join(
        "(%.1f, %.1f, %.0f)" % (b[0], b[1] - b[0] + 0.1, b[2]) for b in runs))


def main():
    if len(sys.argv) == 3 and sys.argv[1] == "--bursts":
        bursts(sys.argv[2])
    elif len(sys.argv) == 4:
        sample(sys.argv[1], sys.argv[2], float(sys.argv[3]))
    else:
        sys.exit(__doc__)


if __name__ == "__main__":
    main()
