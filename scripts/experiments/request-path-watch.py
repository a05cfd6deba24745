#!/usr/bin/env python3
"""Where a PUT's and a GET's time goes between the client and the vnodes
of a running seed cluster (issue 56, item 3: at the maximum rate, PUTs of
up to a second while the vnodes' queues are empty and the store's calls
short; at one rate, GET maxima above the disk's read time).

    scripts/experiments/request-path-watch.py watch BASALT OUT.jsonl SECS [EVERY]
    scripts/experiments/request-path-watch.py summary [-w SECS] OUT.jsonl [put_latencies.csv [get_latencies.csv]]

`watch` samples, every EVERY seconds (default 30) for SECS seconds, each
node of the running `scripts/seed-cluster.py` cluster (found by its
/tmp/seedcluster-*/a*.toml):
  * the coordinator's own PUT and GET timing from `basalt admin --json status`
    (`node_put_fsm_time_*`: from `Kv::put`'s start to its answer, over the
    last 50-60 s; it leaves out the PB socket, decode and encode and the
    connection task's wait for a runtime thread), its two parts
    (`put_coordinate_*`, `put_replicas_*`), the GETs whose quorum answered
    only "not found" and so waited for every replica
    (`get_notfound_waits_total`), the vnode queues and the store's
    longest write call;
  * every thread of the node's process and of the bench's (`basalt
    bench`), from /proc/PID/task/TID/schedstat: CPU time, time spent
    runnable but waiting for a CPU (the run queue), and time slices,
    summed per thread kind (the name with its digits removed:
    tokio-rt-worker, vnode-, basalt-journal-, ...);
  * the vnodes' own timers from `vnode-status` (queue wait, job run,
    write on the request task, a HEAD or GET queued for the worker or run
    on a read thread beside it: counts, sums, slow counts, maxima);
  * the machine's pressure-stall totals (/proc/pressure/{cpu,memory,io}).
`summary` prints, per interval (or per SECS, means and maxima): per process kind, CPU cores used, the
mean run-queue wait per slice of its runtime threads (how long a woken
tokio worker waited for a CPU) and of the vnode workers; the machine's
CPU / memory / IO stall shares; the coordinators' PUT and GET max and
p99 (the largest over the nodes); the share of GETs that waited for every
replica; the reads queued for a worker and beside it; and, given the
bench's put (or update) and get latency files, the client's PUT and GET
max over the coordinator's window (the last 60 s; the bench's start
placed at the file's last change less its last elapsed).

Written 2026-12-06. Reading /proc costs the watcher a few ms a sample;
the status call is one short-lived `basalt admin` process per node.
"""
import csv
import glob
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "lib"))
from seedcluster import admin_json, nodes  # noqa: E402

STATUS = ["node_put_fsm_time_100", "node_put_fsm_time_99", "node_put_fsm_time_mean",
          "node_puts", "vnode_queue_max", "request_overloads_total", "pbc_active",
          "replica_write_bytes_in_flight", "put_replica_waits_total",
          "put_coordinate_count", "put_coordinate_ns", "put_coordinate_slow",
          "put_coordinate_max_ns", "put_replicas_count", "put_replicas_ns",
          "put_replicas_slow", "put_replicas_max_ns",
          "node_get_fsm_time_100", "node_get_fsm_time_99", "node_gets_total",
          "get_notfound_waits_total"]
STORE = ["op_write_max_ns", "wait_write_lock_max_ns", "journal_fsync_max_ns",
         "journal_roll_max_ns", "wait_journal_slowdown_max_ns"]


def threads(pid):
    """{kind: [run_ns, wait_ns, slices, threads]} of process `pid`."""
    kinds = {}
    for t in glob.glob("/proc/%d/task/*" % pid):
        try:
            comm = open(t + "/comm").read().strip()
            run, wait, slices = (int(x) for x in open(t + "/schedstat").read().split())
        except (OSError, ValueError):
            continue
        k = kinds.setdefault(re.sub(r"\d+", "", comm), [0, 0, 0, 0])
        k[0] += run
        k[1] += wait
        k[2] += slices
        k[3] += 1
    return kinds


def pressure():
    out = {}
    for r in ("cpu", "memory", "io"):
        try:
            for line in open("/proc/pressure/" + r):
                kind, *fields = line.split()
                out["%s_%s" % (r, kind)] = int(dict(f.split("=") for f in fields)["total"])
        except OSError:
            pass
    return out


def procs():
    """(role, pid) of the cluster's nodes and the bench."""
    out = []
    for line in subprocess.run(["pgrep", "-af", "basalt"], capture_output=True,
                               text=True).stdout.splitlines():
        pid, _, cmd = line.partition(" ")
        m = re.search(r" start --config \S*/(a\d+)\.toml", cmd)
        if m:
            out.append((m.group(1), int(pid)))
        elif " bench " in cmd and "seedcluster" in cmd:
            out.append(("bench", int(pid)))
    return out


def watch(basalt, out_path, secs, every=30.0):
    end = time.time() + secs
    with open(out_path, "a") as out:
        while time.time() < end:
            t0 = time.time()
            sample = {"t": t0, "pressure": pressure(), "procs": {}, "nodes": {}}
            for role, pid in procs():
                sample["procs"][role] = threads(pid)
            for name, addr in nodes():
                st = admin_json(basalt, addr, "status")
                if st is None:
                    continue
                row = {k: st.get(k) for k in STATUS}
                bs = st.get("backend_stats") or {}
                row.update({k: bs.get(k) for k in STORE})
                vnodes = admin_json(basalt, addr, "vnode-status") or []
                # The vnodes' own timers (builds from 2026-12-06 on): the
                # longest queue wait, job and write in place over the node's
                # vnodes (since they started), and their summed counts.
                for v in vnodes:
                    for k, x in (v.get("times") or {}).items():
                        if k.endswith("_max_ns"):
                            row[k] = max(row.get(k) or 0, x)
                        else:
                            row[k] = (row.get(k) or 0) + x
                sample["nodes"][name] = row
            out.write(json.dumps(sample) + "\n")
            out.flush()
            time.sleep(max(0.0, every - (time.time() - t0)))


def client_max(csv_path):
    """[(epoch_s, max_us)] of the bench's PUT intervals: the bench's start
    is placed at the file's last change less its last elapsed time."""
    if not csv_path:
        return []
    rows = []
    with open(csv_path) as f:
        for r in csv.reader(f):
            try:
                rows.append((float(r[0]), float(r[9])))
            except (ValueError, IndexError):
                continue
    if not rows:
        return []
    start = os.path.getmtime(csv_path) - rows[-1][0]
    return [(start + e, m) for e, m in rows]


def intervals(samples, client, client_get=()):
    """One dict per pair of consecutive samples of the same processes."""
    out = []
    for a, b in zip(samples, samples[1:]):
        dt = b["t"] - a["t"]
        if dt <= 0:
            continue

        def delta(role_prefix, kind_prefix):
            run = wait = slices = 0
            for role, kinds in b["procs"].items():
                if not role.startswith(role_prefix) or role not in a["procs"]:
                    continue
                for kind, v in kinds.items():
                    if not kind.startswith(kind_prefix):
                        continue
                    w = a["procs"][role].get(kind, [0, 0, 0, 0])
                    run += v[0] - w[0]
                    wait += v[1] - w[1]
                    slices += v[2] - w[2]
            return run, wait, slices

        node_run, _, _ = delta("a", "")
        if node_run < 0 or set(a["procs"]) != set(b["procs"]):
            continue  # the nodes restarted (the suite's next backend)
        _, tw, ts = delta("a", "tokio")
        _, vw, vs = delta("a", "vnode")
        bench_run, bw, bs = delta("bench", "")
        pa, pb = a["pressure"], b["pressure"]

        def psi(k):
            return 100.0 * (pb.get(k, 0) - pa.get(k, 0)) / 1e6 / dt

        def node_max(k):
            return max((n.get(k) or 0 for n in b["nodes"].values()), default=0)

        def node_delta(k):
            return sum((n.get(k) or 0) - (a["nodes"].get(name, {}).get(k) or 0)
                       for name, n in b["nodes"].items())

        qw_n = node_delta("vnode_queue_wait_count")
        job_n = node_delta("vnode_job_count")
        here_n = node_delta("vnode_write_here_count")
        gets_n = node_delta("node_gets_total")
        rq_n = node_delta("vnode_read_queued_count")
        rb_n = node_delta("vnode_read_beside_count")
        out.append({
            "t": b["t"], "dt": dt,
            "node_cores": node_run / 1e9 / dt,
            "tokio_wait_us": tw / 1e3 / ts if ts else 0.0,
            "vnode_wait_us": vw / 1e3 / vs if vs else 0.0,
            "bench_cores": bench_run / 1e9 / dt,
            "bench_wait_us": bw / 1e3 / bs if bs else 0.0,
            "psi_cpu": psi("cpu_some"), "psi_mem": psi("memory_some"), "psi_io": psi("io_some"),
            "coord_max_ms": node_max("node_put_fsm_time_100") / 1e3,
            "coord_p99_ms": node_max("node_put_fsm_time_99") / 1e3,
            "queue_max": node_max("vnode_queue_max"),
            "store_write_max_ms": node_max("op_write_max_ns") / 1e6,
            "qwait_mean_ms": node_delta("vnode_queue_wait_ns") / qw_n / 1e6 if qw_n > 0 else None,
            "qwait_max_ms": node_max("vnode_queue_wait_max_ns") / 1e6 if qw_n else None,
            "job_max_ms": node_max("vnode_job_max_ns") / 1e6 if job_n else None,
            "here_share": here_n / (here_n + job_n) if here_n + job_n > 0 else None,
            "here_max_ms": node_max("vnode_write_here_max_ns") / 1e6 if here_n else None,
            "coordinate_max_ms": node_max("put_coordinate_max_ns") / 1e6
            if node_delta("put_coordinate_count") else None,
            "replicas_max_ms": node_max("put_replicas_max_ns") / 1e6
            if node_delta("put_replicas_count") else None,
            "get_coord_max_ms": node_max("node_get_fsm_time_100") / 1e3,
            "get_coord_p99_ms": node_max("node_get_fsm_time_99") / 1e3,
            "notfound_wait_share": node_delta("get_notfound_waits_total") / gets_n
            if gets_n > 0 else None,
            "reads_queued_per_s": rq_n / dt,
            "read_queued_mean_ms": node_delta("vnode_read_queued_ns") / rq_n / 1e6
            if rq_n > 0 else None,
            "read_queued_max_ms": node_max("vnode_read_queued_max_ns") / 1e6 if rq_n else None,
            "reads_beside_per_s": rb_n / dt,
            "read_beside_mean_ms": node_delta("vnode_read_beside_ns") / rb_n / 1e6
            if rb_n > 0 else None,
            "read_beside_max_ms": node_max("vnode_read_beside_max_ns") / 1e6 if rb_n else None,
            # The client's longest PUT and GET in the coordinator's window
            # (the last 60 s).
            "client_max_ms": window_max(client, b["t"]),
            "client_get_max_ms": window_max(client_get, b["t"]),
        })
    return out


def window_max(client, t):
    """The client's longest request (ms) in the 60 s before `t`, or None."""
    if not client:
        return None
    return max((m for e, m in client if t - 60 <= e <= t), default=0) / 1e3


COLUMNS = [  # (key, heading, format, how a window combines it)
    ("node_cores", "node CPU cores", "%.2f", "mean"),
    ("tokio_wait_us", "tokio run-queue wait / slice µs", "%.0f", "mean"),
    ("vnode_wait_us", "vnode-thread wait / slice µs", "%.0f", "mean"),
    ("bench_cores", "bench CPU cores", "%.2f", "mean"),
    ("bench_wait_us", "bench wait / slice µs", "%.0f", "mean"),
    ("psi_cpu", "PSI cpu some %", "%.0f", "mean"),
    ("psi_mem", "mem some %", "%.1f", "mean"),
    ("psi_io", "io some %", "%.1f", "mean"),
    ("client_max_ms", "client PUT max ms (60 s)", "%.0f", "max"),
    ("coord_max_ms", "coordinator PUT max ms (60 s)", "%.0f", "max"),
    ("coord_p99_ms", "coordinator p99 ms", "%.1f", "max"),
    ("queue_max", "vnode queue max", "%d", "max"),
    ("qwait_mean_ms", "queue wait mean ms", "%.2f", "mean"),
    ("qwait_max_ms", "queue wait max ms (since start)", "%.0f", "max"),
    ("job_max_ms", "job max ms (since start)", "%.0f", "max"),
    ("here_share", "writes in place share", "%.2f", "mean"),
    ("here_max_ms", "write in place max ms (since start)", "%.0f", "max"),
    ("store_write_max_ms", "store write max ms (since start)", "%.0f", "max"),
    ("coordinate_max_ms", "PUT coordinating step max ms (since start)", "%.0f", "max"),
    ("replicas_max_ms", "PUT replica wait max ms (since start)", "%.0f", "max"),
    ("client_get_max_ms", "client GET max ms (60 s)", "%.0f", "max"),
    ("get_coord_max_ms", "coordinator GET max ms (60 s)", "%.0f", "max"),
    ("get_coord_p99_ms", "coordinator GET p99 ms", "%.1f", "max"),
    ("notfound_wait_share", "GETs waiting for every replica", "%.2f", "mean"),
    ("reads_queued_per_s", "reads queued /s", "%.0f", "mean"),
    ("read_queued_mean_ms", "read queued mean ms", "%.2f", "mean"),
    ("read_queued_max_ms", "read queued max ms (since start)", "%.0f", "max"),
    ("reads_beside_per_s", "reads beside /s", "%.0f", "mean"),
    ("read_beside_mean_ms", "read beside mean ms", "%.2f", "mean"),
    ("read_beside_max_ms", "read beside max ms (since start)", "%.0f", "max"),
]


def summary(path, csv_path=None, window=None, get_csv=None):
    samples = [json.loads(line) for line in open(path)]
    rows = intervals(samples, client_max(csv_path), client_max(get_csv))
    if not rows:
        return
    cols = [c for c in COLUMNS if any(r.get(c[0]) is not None for r in rows)]
    t0 = samples[0]["t"]
    groups = []
    for r in rows:
        w = int((r["t"] - t0) // window) if window else len(groups)
        if not groups or groups[-1][0] != w:
            groups.append((w, []))
        groups[-1][1].append(r)
    print("| s | " + " | ".join(c[1] for c in cols) + " |")
    print("|---:|" + "---:|" * len(cols))
    for _, g in groups:
        cells = []
        for key, _, fmt, how in cols:
            vals = [(r[key], r["dt"]) for r in g if r.get(key) is not None]
            if not vals:
                cells.append("–")
                continue
            if how == "max":
                v = max(x for x, _ in vals)
            else:
                v = sum(x * d for x, d in vals) / sum(d for _, d in vals)
            cells.append(fmt % v)
        print("| %.0f | %s |" % (g[-1]["t"] - t0, " | ".join(cells)))


if __name__ == "__main__":
    if len(sys.argv) in (5, 6) and sys.argv[1] == "watch":
        watch(sys.argv[2], sys.argv[3], float(sys.argv[4]),
              float(sys.argv[5]) if len(sys.argv) == 6 else 30.0)
    elif len(sys.argv) >= 3 and sys.argv[1] == "summary":
        args = sys.argv[2:]
        win = None
        if "-w" in args:
            i = args.index("-w")
            win = float(args[i + 1])
            del args[i:i + 2]
        summary(args[0], args[1] if len(args) > 1 else None, win,
                args[2] if len(args) > 2 else None)
    else:
        sys.exit(__doc__)
