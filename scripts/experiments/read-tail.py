#!/usr/bin/env python3
"""Is a disk's slowest random read slow alone, or is the whole disk slow?

Reads a fio completion-latency log (fio --write_lat_log=NAME --log_avg_msec=0
--per_job_logs=0 writes NAME_clat.log: time ms, latency ns, ...) and prints
the maximum per 10 s window, the latency percentiles, and for each of the
slowest reads how many reads issued after it completed before it did
("overtook") and how slow the slowest of those was. Many fast overtakers mean
the slow read was slow alone (a second copy of it would have answered
sooner); few or slow ones mean the device, or its queue, was slow for all.
Used for docs/benchmarks/2026-11-28-1251-where-get-maxima-wait.md:

  fio --name=rr --filename=DATA --rw=randread --bs=8k --direct=1 --numjobs=16 \
      --time_based --runtime=60 --ioengine=psync --write_lat_log=lat \
      --log_avg_msec=0 --per_job_logs=0 --output=/dev/null
  scripts/experiments/read-tail.py lat_clat.log [SLOW_MS]
"""
import bisect
import sys


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    slow_ms = float(sys.argv[2]) if len(sys.argv) > 2 else 4.0
    ev = []
    with open(sys.argv[1]) as f:
        for line in f:
            p = line.split(",")
            ev.append((int(p[0]), int(p[1]) / 1e6))
    ev.sort()
    if not ev:
        sys.exit("no reads in the log")
    windows = {}
    for t, lat in ev:
        windows[t // 10000] = max(windows.get(t // 10000, 0.0), lat)
    print("reads %d over %.0f s" % (len(ev), ev[-1][0] / 1000))
    print("max per 10 s (ms): " + " ".join("%.2f" % windows[w] for w in sorted(windows)))
    lats = sorted(lat for _, lat in ev)
    print("p50 %.3f  p99 %.3f  p99.9 %.3f  p99.99 %.3f  max %.3f ms" % tuple(
        lats[min(len(lats) - 1, int(q * len(lats)))] for q in (0.5, 0.99, 0.999, 0.9999, 1.0)))
    times = [t for t, _ in ev]
    slow = [(t, lat) for t, lat in ev if lat > slow_ms]
    alone = 0
    for t, lat in slow:
        start = t - lat
        window = ev[bisect.bisect_right(times, start):bisect.bisect_left(times, t)]
        over = [x for x in window if x[0] - x[1] >= start]
        if len(over) >= 10 and max(x[1] for x in over) < lat / 2:
            alone += 1
    print("reads over %.1f ms: %d; slow alone (>= 10 reads issued after it finished first, "
          "all in under half its time): %d" % (slow_ms, len(slow), alone))
    for t, lat in sorted(slow, key=lambda x: -x[1])[:10]:
        start = t - lat
        window = ev[bisect.bisect_right(times, start):bisect.bisect_left(times, t)]
        over = [x for x in window if x[0] - x[1] >= start]
        print("  at %6.1f s: %.2f ms; %d overtook it, the slowest of them %.2f ms" % (
            t / 1000, lat, len(over), max((x[1] for x in over), default=0.0)))


if __name__ == "__main__":
    main()
