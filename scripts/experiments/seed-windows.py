#!/usr/bin/env python3
"""Per-window tables of seed-suite runs, for a study's "by 10 minutes" part.

    scripts/experiments/seed-windows.py [-w SECS] RUN_DIR...

Each RUN_DIR is one backend's bench results (e.g.
<results>/8kb_nosync/leveled): its summary.csv (operations per 10 s
interval) and <op>_latencies.csv (per interval: n, mean, max in µs). The
first RUN_DIR is the baseline. Prints markdown: ops/s per window and each
run's ratio to the baseline, then per operation the window's mean latency
(weighted by n) and mean(max) (the mean of the intervals' maxima, as
basho_bench's summary and `basalt bench compare` use it), in ms.

An interval belongs to the window its midpoint falls in (the bench's
intervals end a little after each 10 s mark, e.g. at 3600.02 s). Written for issue 56's long runs
(2026-12-04); used by docs/benchmarks/2026-12-04-2207-cluster-test-3-one-hour.md.
"""
import argparse
import csv
import glob
import os
import sys


def rows(path):
    with open(path) as f:
        r = csv.reader(f, skipinitialspace=True)
        head = next(r)
        for line in r:
            if line:
                yield dict(zip(head, line))


def window_of(r, w):
    mid = float(r["elapsed"]) - float(r["window"]) / 2
    return max(0, int(mid // w))


def throughput(run, w):
    ops, secs = {}, {}
    for r in rows(os.path.join(run, "summary.csv")):
        i = window_of(r, w)
        ops[i] = ops.get(i, 0) + int(r["total"])
        secs[i] = secs.get(i, 0.0) + float(r["window"])
    return {i: ops[i] / secs[i] for i in ops if secs[i] > 0}


def latency(path, w):
    acc = {}
    for r in rows(path):
        n = int(r["n"])
        if n == 0:
            continue
        i = window_of(r, w)
        a = acc.setdefault(i, [0, 0.0, 0.0, 0])
        a[0] += n
        a[1] += float(r["mean"]) * n
        a[2] += float(r["max"])
        a[3] += 1
    return {i: (a[1] / a[0] / 1000.0, a[2] / a[3] / 1000.0) for i, a in acc.items()}


def label(i, w):
    if w % 60 == 0:
        return "%d–%d" % (i * w // 60, (i + 1) * w // 60)
    return "%d–%d s" % (i * w, (i + 1) * w)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("-w", type=int, default=600, help="window in seconds (600)")
    p.add_argument("runs", nargs="+")
    a = p.parse_args()
    for run in a.runs:
        if not os.path.exists(os.path.join(run, "summary.csv")):
            sys.exit("seed-windows: no summary.csv in %s" % run)
    names = [os.path.basename(os.path.normpath(r)) for r in a.runs]
    tps = [throughput(r, a.w) for r in a.runs]
    wins = sorted(set().union(*[set(t) for t in tps]))
    unit = "minutes" if a.w % 60 == 0 else "window"
    print("| %s | %s |" % (unit, " | ".join(label(i, a.w) for i in wins)))
    print("|---|%s" % ("---:|" * len(wins)))
    for n, t in zip(names, tps):
        print("| %s | %s |" % (n, " | ".join("{:,.0f}".format(t[i]) if i in t else "" for i in wins)))
    for n, t in zip(names[1:], tps[1:]):
        cells = []
        for i in wins:
            base, other = tps[0].get(i), t.get(i)
            cells.append("%.2f×" % (base / other) if base and other else "")
        print("| %s ÷ %s | %s |" % (names[0], n, " | ".join(cells)))
    print()
    ops = sorted({os.path.basename(f)[: -len("_latencies.csv")]
                  for r in a.runs for f in glob.glob(os.path.join(r, "*_latencies.csv"))})
    print("Latency by window, mean / mean(max) ms:")
    print()
    print("| %s | %s |" % (unit, " | ".join(label(i, a.w) for i in wins)))
    print("|---|%s" % ("---|" * len(wins)))
    for op in ops:
        for n, r in zip(names, a.runs):
            path = os.path.join(r, op + "_latencies.csv")
            if not os.path.exists(path):
                continue
            lat = latency(path, a.w)
            cells = ["%.1f / %.0f" % lat[i] if i in lat else "" for i in wins]
            print("| %s %s | %s |" % (n, op.upper(), " | ".join(cells)))


if __name__ == "__main__":
    main()
