#!/usr/bin/env python3
"""What a cluster seed run's stores did, window by window, beside its rate.

    scripts/experiments/engine-windows.py [-w SECS] [--from S] [--to S] RUN_DIR

RUN_DIR is one backend's results of `scripts/seed-suite.sh --cluster`
(e.g. <results>/8kb_2i/leveled): its engine.csv (each node's backend
counters every 10 s, summed over its vnodes, written by
scripts/seed-cluster.py) and summary.csv (operations per interval).
Prints a markdown table, one row per window of SECS (default 120), the
counters summed over the nodes: ops/s, journal compaction runs, GB it
reclaimed (and of that punched in place), key deltas it wrote, its slot
wait (s), ledger merges, L0 files at the window's end, the garbage
estimate at its end (GB), GB the journals and ledgers wrote, and the
journal value reads and SST block reads (thousands). Cumulative counters
are differenced; gauges (L0 files, garbage) are the window's last sample.
A counter the backend lacks is shown as "-".

Written for issue 56's one-hour 2i run (2026-12-05), to lay the 2i runs'
dip at ~13 minutes beside journal compaction's first wave; used by
docs/benchmarks/2026-12-05-0105-cluster-8kb-2i-one-hour.md.
"""
import argparse
import collections
import csv
import importlib.util
import os

COUNTERS = [
    # (column, header, scale, kind)
    ("compaction_runs", "runs", 1, "delta"),
    ("compaction_bytes_reclaimed", "reclaimed GB", 1e9, "delta"),
    ("compaction_bytes_punched", "punched GB", 1e9, "delta"),
    ("compaction_key_deltas", "key deltas k", 1e3, "delta"),
    ("compaction_slot_wait_ms", "slot wait s", 1e3, "delta"),
    ("ledger_merges", "merges", 1, "delta"),
    ("ledger_l0_files", "L0 files", 1, "gauge"),
    ("journal_garbage_bytes_estimated", "garbage GB", 1e9, "gauge"),
    ("journal_bytes_written", "journal GB", 1e9, "delta"),
    ("ledger_bytes_written", "ledger GB", 1e9, "delta"),
    ("journal_value_read_count", "value reads k", 1e3, "delta"),
    ("sst_block_read_count", "block reads k", 1e3, "delta"),
]


def samples(path):
    """{elapsed (rounded s): Counter of column sums over nodes}, and the
    columns that had a value somewhere."""
    by = collections.defaultdict(collections.Counter)
    seen = set()
    with open(path) as f:
        for r in csv.DictReader(f):
            t = round(float(r["elapsed"]))
            for k, v in r.items():
                if k in ("elapsed", "node") or v in ("", None):
                    continue
                by[t][k] += float(v)
                seen.add(k)
    return by, seen


def seed_windows():
    """scripts/experiments/seed-windows.py as a module: its `throughput`
    (ops/s per window, an interval in the window of its midpoint)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "seed-windows.py")
    spec = importlib.util.spec_from_file_location("seed_windows", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("-w", type=float, default=120, help="window, s (default 120)")
    ap.add_argument("--from", dest="start", type=float, default=0)
    ap.add_argument("--to", dest="end", type=float, default=float("inf"))
    ap.add_argument("run_dir")
    a = ap.parse_args()
    by, seen = samples(os.path.join(a.run_dir, "engine.csv"))
    rate = seed_windows().throughput(a.run_dir, a.w)
    heads = ["window s", "ops/s"] + [h for _, h, _, _ in COUNTERS]
    print("| " + " | ".join(heads) + " |")
    print("|" + "---:|" * len(heads))
    # The last sample of each window; deltas against the previous window's.
    last = {}
    for t in sorted(by):
        last[int((t - 0.5) // a.w)] = t
    prev = None
    for k in sorted(last):
        cur = by[last[k]]
        lo, hi = k * a.w, (k + 1) * a.w
        if lo >= a.start and hi <= a.end:
            cells = ["%g–%g" % (lo, hi), "%.0f" % rate.get(k, 0)]
            for col, _, scale, kind in COUNTERS:
                if col not in seen:
                    cells.append("-")
                    continue
                v = cur[col] if kind == "gauge" or prev is None else cur[col] - prev[col]
                cells.append("%.0f" % (v / scale) if scale == 1 else "%.2f" % (v / scale))
            print("| " + " | ".join(cells) + " |")
        prev = cur


if __name__ == "__main__":
    main()
