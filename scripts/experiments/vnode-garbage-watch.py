#!/usr/bin/env python3
"""What each vnode's journal holds beside what its garbage estimate says,
sampled from a running seed cluster (issue 56: the estimate's lag).

    scripts/experiments/vnode-garbage-watch.py watch BASALT OUT.jsonl SECS [EVERY]
    scripts/experiments/vnode-garbage-watch.py summary OUT.jsonl
    scripts/experiments/vnode-garbage-watch.py paced OUT.jsonl

`watch` asks every node of the running `scripts/seed-cluster.py` cluster
(found by its /tmp/seedcluster-*/a*.toml) for `basalt admin --json
vnode-status` every EVERY seconds (default 60) for SECS seconds and appends one JSON line per
node and sample: each vnode's journal files and bytes (apparent size),
the estimate's closed and garbage bytes, its SQNs, runs, slot wait,
write-slowdown waits, write-call maxima and queue length.
`summary` prints one row per sample and node: the journal's GB, the
estimate's closed and garbage GB, the vnode holding the most with its
estimate, and how many vnodes' estimates cover under half of their
journal's bytes (the open file is never in an estimate, so a vnode with
a small journal can fall under that by itself). `paced` prints, for each
sample in which some vnode's write slowdown waited, the vnodes that
waited: the seconds waited since the previous sample, their longest wait,
their garbage estimate (percent of the closed bytes) and how many runs
they had made (0: never run; until 2026-12-06 such a vnode was paced at
the slowdown's floor rate).

Written 2026-12-06 when a vnode's estimate stood at 115 MB of closed
files while its journal held 1.25 GB (Test Pilot 25 KB on three nodes).
"""
import json
import os
import re
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from seedcluster import admin_json, nodes  # noqa: E402

FIELDS = ["journal_files", "journal_bytes", "journal_closed_bytes_estimated",
          "journal_garbage_bytes_estimated", "persisted_sqn", "last_sqn",
          "compaction_runs", "compaction_slot_wait_ms", "compaction_estimates",
          "ledger_l0_files", "compaction_bytes_reclaimed", "journal_slowdowns",
          "journal_slowdown_us", "wait_journal_slowdown_max_ns", "op_write_max_ns",
          "wait_write_lock_max_ns", "wait_write_stall_max_ns"]


def watch(basalt, out_path, secs, every=60.0):
    end = time.time() + secs
    with open(out_path, "a") as out:
        while time.time() < end:
            for name, addr in nodes():
                vnodes = admin_json(basalt, addr, "vnode-status")
                if vnodes is None:
                    continue
                rows = [{"p": v.get("partition"), "queue": v.get("queue"),
                         "writes_here": v.get("writes_here"),
                         **{k: (v.get("counters") or {}).get(k) for k in FIELDS}}
                        for v in vnodes]
                out.write(json.dumps({"t": time.time(), "node": "/tmp/seedcluster/%s.toml" % name,
                                      "v": rows}) + "\n")
                out.flush()
            time.sleep(every)


def load(path):
    """The samples of OUT.jsonl, and the time of the first (None if empty)."""
    rows = [json.loads(line) for line in open(path)]
    return rows, (rows[0]["t"] if rows else None)


def summary(path):
    rows, t0 = load(path)
    if not rows:
        return
    print("| min | node | journal GB | estimate: closed GB | garbage GB | largest vnode: MB, files | its estimate: closed MB | vnodes covered < 50 % |")
    print("|---:|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        v = [x for x in r["v"] if x.get("journal_bytes") is not None]
        if not v:
            continue
        jb = sum(x["journal_bytes"] for x in v)
        cb = sum(x["journal_closed_bytes_estimated"] or 0 for x in v)
        gb = sum(x["journal_garbage_bytes_estimated"] or 0 for x in v)
        big = max(v, key=lambda x: x["journal_bytes"])
        under = sum(1 for x in v if (x["journal_closed_bytes_estimated"] or 0) < x["journal_bytes"] / 2)
        node = re.sub(r".*/(a\d+)\.toml$", r"\1", r["node"])
        print("| %.1f | %s | %.2f | %.2f | %.2f | %.0f, %d | %.0f | %d of %d |" % (
            (r["t"] - t0) / 60, node, jb / 1e9, cb / 1e9, gb / 1e9, big["journal_bytes"] / 1e6,
            big["journal_files"], (big["journal_closed_bytes_estimated"] or 0) / 1e6, under, len(v)))


def paced(path):
    rows, t0 = load(path)
    if not rows:
        return
    prev = {}
    print("| s | node | vnode | slowdown s since last sample | longest wait ms (so far) | garbage % of closed | runs |")
    print("|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        node = re.sub(r".*/(a\d+)\.toml$", r"\1", r["node"])
        for x in r["v"]:
            key = (node, x["p"])
            us = x.get("journal_slowdown_us") or 0
            before = prev.get(key, 0)
            prev[key] = us
            if us <= before:
                continue
            closed = x.get("journal_closed_bytes_estimated") or 0
            garbage = x.get("journal_garbage_bytes_estimated") or 0
            print("| %.0f | %s | %s | %.2f | %.0f | %.0f | %s |" % (
                r["t"] - t0, node, x["p"], (us - before) / 1e6,
                (x.get("wait_journal_slowdown_max_ns") or 0) / 1e6,
                100.0 * garbage / closed if closed else 0, x.get("compaction_runs")))


if __name__ == "__main__":
    if len(sys.argv) in (5, 6) and sys.argv[1] == "watch":
        watch(sys.argv[2], sys.argv[3], float(sys.argv[4]),
              float(sys.argv[5]) if len(sys.argv) == 6 else 60.0)
    elif len(sys.argv) == 3 and sys.argv[1] == "paced":
        paced(sys.argv[2])
    elif len(sys.argv) == 3 and sys.argv[1] == "summary":
        summary(sys.argv[2])
    else:
        sys.exit(__doc__)
