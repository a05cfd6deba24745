#!/usr/bin/env python3
"""The tables of a `node-setting-ab.sh` directory, one row a run.

For each run `DIR/rR-VALUE-BACKEND/` (in run order): ops/s overall and in
the last sixth, GET and UPDATE (or, in an insert test, PUT; "–" for an
operation the test has not) mean / mean(max) (the mean of each 10 s
interval's longest), the median and the largest of the interval maxima,
the mean of the intervals' p99, the nodes' CPU seconds and node-level WA
(from `cluster.md`); with the watcher's summary (`.watch.md`) reads
beside and queued, the coordinator's GET p99 / max, PSI cpu and io.
Then, from the watcher's samples (`.jsonl`), the engine's own longest
waits per node at the end of the run (write call, write lock, journal
fsync, roll, pace) and the sample in which each node's longest write
first passed 100 ms, to tell a stall of one vnode from one of the disk.

    python3 scripts/experiments/ab-runs-table.py DIR

Written 2026-12-07 for study 2026-12-07 02:15 (issue 56). Python 3.6+,
standard library only.
"""
import csv
import glob
import json
import os
import re
import statistics
import sys


def lat(path):
    """(mean, mean(max), median max, largest max, mean p99) in ms of one
    operation's latency CSV; None when the test has no such operation."""
    if not os.path.exists(path):
        return None
    rows = list(csv.reader(open(path)))[1:]
    n = sum(int(r[2]) for r in rows)
    mx = [float(r[9]) / 1000 for r in rows]
    mean = sum(float(r[4]) * int(r[2]) for r in rows) / max(1, n) / 1000
    p99 = statistics.mean(float(r[7]) / 1000 for r in rows)
    return mean, statistics.mean(mx), statistics.median(mx), max(mx), p99


def watch_summary(path):
    if not os.path.exists(path):
        return {}
    lines = [l for l in open(path) if l.startswith("|")]
    if len(lines) < 3:
        return {}
    hdr = [h.strip() for h in lines[0].strip("|\n").split("|")]
    return dict(zip(hdr, [v.strip() for v in lines[2].strip("|\n").split("|")]))


WAITS = ["op_write", "wait_write_lock", "journal_fsync", "journal_roll", "wait_journal_slowdown"]


def engine_waits(path):
    if not os.path.exists(path):
        return ""
    samples = [json.loads(x) for x in open(path) if x.strip()]
    if not samples:
        return ""
    last, t0, out, prev = samples[-1]["nodes"], samples[0]["t"], [], {}
    if not any(last[n].get("op_write_max_ns") for n in last):
        return ""
    for k in WAITS:
        out.append("%s %s" % (k, "/".join(
            "%.0f" % ((last[n].get(k + "_max_ns") or 0) / 1e6) for n in sorted(last))))
    jumps = []
    for s in samples:
        for n, v in s["nodes"].items():
            ms = (v.get("op_write_max_ns") or 0) / 1e6
            if ms > 100 >= prev.get(n, 0):
                jumps.append("%s at +%.0f s" % (n, s["t"] - t0))
            prev[n] = ms
    return "; ".join(out) + " ms; write > 100 ms: " + (", ".join(jumps) or "none")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    d = sys.argv[1]
    runs = [p for p in glob.glob(os.path.join(d, "r*-*-*/")) if os.path.isdir(p)]
    runs.sort(key=os.path.getmtime)
    if not runs:
        sys.exit("ab-runs-table: no runs (rR-VALUE-BACKEND/) in %s" % d)
    print("| run | ops/s | last sixth | GET mean / mean(max) | GET median / largest interval max | GET p99 "
          "| UPDATE (or PUT) mean / mean(max) | median / largest interval max | nodes' CPU s | WA "
          "| reads beside /s, mean / max ms | reads queued /s, mean / max ms | coordinator GET p99 / max "
          "| PSI cpu some % | io some % |")
    print("|---|" + "---:|" * 14)
    waits = []
    for run in runs:
        name = os.path.basename(run.rstrip("/"))
        b = name.split("-")[-1]
        reps = glob.glob(os.path.join(run, "*", b, "cluster.md"))
        if not reps:
            continue
        rep = os.path.dirname(reps[0])
        r = open(os.path.join(rep, "report.md")).read()
        c = open(os.path.join(rep, "cluster.md")).read()
        tps = float(re.search(r"Avg TPS[^|]*\|\s*\**([0-9.]+)", r).group(1))
        last = float(re.search(r"last sixth of the run \|\s*\**([0-9.]+)", r).group(1))
        cpu = re.search(r"the nodes ([0-9]+) s", c).group(1)
        wa = re.search(r"write amplification\*\* ([0-9.]+)", c).group(1)
        g = lat(os.path.join(rep, "get_latencies.csv"))
        u = (lat(os.path.join(rep, "update_latencies.csv"))
             or lat(os.path.join(rep, "put_latencies.csv")))
        w = watch_summary(run.rstrip("/") + ".watch.md")

        def cells(x, with_p99):
            if x is None:
                return "– | – | –" if with_p99 else "– | –"
            out = "%.2f / %.2f | %.1f / %.0f" % x[:4]
            return out + (" | %.2f" % x[4] if with_p99 else "")
        print("| %s | %s | %s | %s | %s | %s | %s "
              "| %s, %s / %s | %s, %s / %s | %s / %s | %s | %s |" % (
                  name, format(round(tps), ","), format(round(last), ","), cells(g, True),
                  cells(u, False), cpu, wa,
                  w.get("reads beside /s", ""), w.get("read beside mean ms", ""),
                  w.get("read beside max ms (since start)", ""),
                  w.get("reads queued /s", ""), w.get("read queued mean ms", ""),
                  w.get("read queued max ms (since start)", ""),
                  w.get("coordinator GET p99 ms", ""), w.get("coordinator GET max ms (60 s)", ""),
                  w.get("PSI cpu some %", ""), w.get("io some %", "")))
        waits.append((name, engine_waits(run.rstrip("/") + ".jsonl")))
    print("\nThe engine's longest waits a node (a1/a2/a3), from the watcher's samples:\n")
    for name, s in waits:
        print("- %s: %s" % (name, s or "no samples (RocksDB-backed nodes report none, or no watcher)"))


if __name__ == "__main__":
    main()
