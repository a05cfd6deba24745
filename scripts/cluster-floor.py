#!/usr/bin/env python3
"""The machine's own floor for the cluster seed tests (issue 56 item 4).

What a request of the cluster suite (`scripts/seed-suite.sh --cluster`)
cannot beat on this machine, whatever the store does, measured three ways:

- **fsync**: 8 KiB appends each followed by fdatasync, as a node with
  `sync = true` does for every write (a vnode's journal), by 1 writer and
  by WRITERS writers at once (each its own file, as the vnodes are): rate
  and latency (mean, median, p99, mean(max): the mean over 10 s windows
  of each window's slowest, the seeds' figure; and max, the slowest one).
- **reads at QD**: 8 KiB O_DIRECT random reads from a DATA_MB file by
  READERS threads at once (the queue depth of the bench's workers): rate
  and latency, as above. O_DIRECT, so the page cache is not measured.
- **PB round trip**: one `basalt start` node (memory backend, so no disk)
  on 127.0.0.1 and `basalt bench` with the riakc_pb driver's `ping` op
  (RpbPingReq) at 1 worker and at WORKERS workers (the cluster suite's
  24): throughput and latency, from the bench's report. A GET or PUT
  through a cluster is at least one such round trip from the bench plus
  one per replica between nodes.

- **at one rate** (`--write-rate W --read-rate R`, ops/s over all
  threads): the fsync writers and the readers paced to the rates a run
  held to one rate asked of the disk (its synced replica writes and its
  value reads from disk a second), first each alone, then both at once,
  as a node's vnodes do them (reads queue behind the writes' cache
  flushes); the ping at `--ping-rate` a worker (basho_bench's
  `{mode, {rate, N}}`). A paced thread that falls behind starts its next
  operation at once (closed loop, as the bench's rate mode).

  scripts/cluster-floor.py DIR [--basalt PATH] [--secs S]
      [--write-rate W --read-rate R [--ping-rate P]] [--roll-mb N]
      [--files-mb N [--files-every S] [--files-delete]] [--only CASES]

Settings (flags): --secs (each case, default 30), --writers (8),
--readers (24), --workers (24), --data-mb (2048); --write-rate and
--read-rate (0: unpaced, the default), --ping-rate (0: `{mode, max}`),
--roll-mb (0: each writer one file; N: a new file and a directory fsync
every N MiB, as a journal's roll), --files-mb N [--files-every S]
[--files-delete] (the together case also writes an N MiB file every S s,
default 10, in fsynced 1 MiB steps as SSTs and compacted journal files
are written, and with --files-delete unlinks each after the next, as
merges and compactions delete their inputs: on a filesystem mounted with
`discard` an unlink's TRIMs run in the journal commit that fsyncs wait
for), --only (the cases to run: write, read, together, ping; default
all).
DIR holds the files (deleted after) and floor.md, the table printed.
Python 3.6+, standard library only.
"""

import argparse
import mmap
import os
import random
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from ports import free_port  # noqa: E402  (below the ephemeral range)

BLOCK = 8192


def stats(lat, t0, secs):
    """(count, mean ms, median ms, p99 ms, mean(max) ms over 10 s windows,
    max ms, seconds into the case at which the max began)."""
    if not lat:
        return (0, 0, 0, 0, 0, 0, 0)
    vals = sorted(d for _, d in lat)
    win = {}
    for t, d in lat:
        w = int((t - t0) // 10)
        win[w] = max(win.get(w, 0), d)
    full = [win[w] for w in sorted(win) if (w + 1) * 10 <= secs + 0.5] or list(win.values())
    return (len(vals), sum(vals) / len(vals) * 1e3, vals[len(vals) // 2] * 1e3,
            vals[min(len(vals) - 1, int(len(vals) * 0.99))] * 1e3,
            sum(full) / len(full) * 1e3, vals[-1] * 1e3,
            max(lat, key=lambda x: x[1])[0] - t0)


def paced(rate, threads):
    """Seconds between one thread's operations for `rate` ops/s over
    `threads` threads (0: unpaced)."""
    return threads / rate if rate > 0 else 0.0


def wait_turn(gap, nxt):
    """Sleeps until `nxt` when paced; returns the next turn (late: now)."""
    if gap <= 0:
        return 0.0
    now = time.time()
    if nxt > now:
        time.sleep(nxt - now)
        now = nxt
    return max(nxt + gap, now)


def start_threads(n, end, body):
    """Starts `n` threads of `body(i, end, out)`; returns (threads, outs)."""
    lat = [[] for _ in range(n)]
    th = [threading.Thread(target=body, args=(i, end, lat[i])) for i in range(n)]
    for t in th:
        t.start()
    return th, lat


def run_threads(n, secs, body):
    t0 = time.time()
    th, lat = start_threads(n, t0 + secs, body)
    for t in th:
        t.join()
    return stats([x for l in lat for x in l], t0, secs)


def fsync_body(d, writers, rate, roll_mb=0):
    """A writer's loop; with `roll_mb`, each writer starts a new file every
    `roll_mb` MiB and fsyncs the directory, as a journal's roll does (the
    roll is timed with the write that made it); the files stay until the
    case ends, as closed journal files do."""
    buf = os.urandom(BLOCK)
    gap = paced(rate, writers)
    roll = roll_mb << 20

    def body(i, end, out):
        paths = [os.path.join(d, "floor-sync-%d-0" % i)]
        fd = os.open(paths[-1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        size = 0
        nxt = time.time() + gap * i / max(writers, 1)
        try:
            while True:
                nxt = wait_turn(gap, nxt)
                t = time.time()
                if t >= end:
                    break
                os.write(fd, buf)
                os.fdatasync(fd)
                size += BLOCK
                if roll and size >= roll:
                    os.close(fd)
                    fd = -1
                    paths.append(os.path.join(d, "floor-sync-%d-%d" % (i, len(paths))))
                    fd = os.open(paths[-1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                    dfd = os.open(d, os.O_RDONLY)
                    try:
                        os.fsync(dfd)
                    finally:
                        os.close(dfd)
                    size = 0
                out.append((t, time.time() - t))
        finally:
            if fd >= 0:
                os.close(fd)
            for path in paths:
                if os.path.exists(path):
                    os.unlink(path)
    return body


def fsync_case(d, writers, secs, rate=0, roll_mb=0):
    return run_threads(writers, secs, fsync_body(d, writers, rate, roll_mb))


def read_data(d, data_mb):
    """The file the readers read (written once, of random bytes)."""
    path = os.path.join(d, "floor-read-data")
    size = data_mb << 20
    if not os.path.exists(path) or os.path.getsize(path) < size:
        with open(path, "wb") as f:
            chunk = os.urandom(1 << 20)
            for _ in range(data_mb):
                f.write(chunk)
    return path


def read_body(path, data_mb, readers, rate):
    blocks = (data_mb << 20) // BLOCK
    gap = paced(rate, readers)

    def body(i, end, out):
        fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
        mem = mmap.mmap(-1, BLOCK)  # page-aligned, as O_DIRECT needs
        rng = random.Random(i)
        nxt = time.time() + gap * i / max(readers, 1)
        try:
            while True:
                nxt = wait_turn(gap, nxt)
                t = time.time()
                if t >= end:
                    break
                os.preadv(fd, [mem], rng.randrange(blocks) * BLOCK)
                out.append((t, time.time() - t))
        finally:
            os.close(fd)
            mem.close()
    return body


def read_case(d, readers, secs, data_mb, rate=0):
    path = read_data(d, data_mb)
    return run_threads(readers, secs, read_body(path, data_mb, readers, rate))


def files_body(d, files_mb, every, delete):
    """A thread that writes a `files_mb` MiB file every `every` seconds in
    1 MiB steps, each fdatasynced (as a ledger SST or a compacted journal
    file is written), and, with `delete`, unlinks the one before it (as a
    merge's or a compaction's inputs are deleted); without, keeps them
    until the case ends (the same writing, no deletes). Records each
    unlink's time (the writes are not the point)."""
    chunk = os.urandom(1 << 20)

    def body(i, end, out):
        paths = []
        nxt = time.time() + every
        try:
            while True:
                nxt = wait_turn(every, nxt)
                if time.time() >= end:
                    break
                paths.append(os.path.join(d, "floor-file-%d" % len(paths)))
                fd = os.open(paths[-1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
                try:
                    for _ in range(files_mb):
                        os.write(fd, chunk)
                        os.fdatasync(fd)
                finally:
                    os.close(fd)
                if delete and len(paths) > 1:
                    t = time.time()
                    os.unlink(paths[-2])
                    out.append((t, time.time() - t))
        finally:
            for path in paths:
                if os.path.exists(path):
                    os.unlink(path)
    return body


def together_case(d, writers, readers, secs, data_mb, write_rate, read_rate, roll_mb=0,
                  files=None):
    """Paced fsync writers and paced readers at once, and with `files`
    ((MiB, every s, delete)) the file writer beside them: (writes, reads,
    unlinks)."""
    path = read_data(d, data_mb)
    t0 = time.time()
    wth, wlat = start_threads(writers, t0 + secs, fsync_body(d, writers, write_rate, roll_mb))
    rth, rlat = start_threads(readers, t0 + secs, read_body(path, data_mb, readers, read_rate))
    fth, flat = start_threads(1, t0 + secs, files_body(d, *files)) if files else ([], [[]])
    for t in wth + rth + fth:
        t.join()
    return (stats([x for l in wlat for x in l], t0, secs),
            stats([x for l in rlat for x in l], t0, secs),
            stats(flat[0], t0, secs))




def ping_cases(basalt, d, secs, worker_counts, ping_rate=0):
    pb, cl = free_port(), free_port()
    data = tempfile.mkdtemp(prefix="floor-node-", dir=d)
    log = open(os.path.join(d, "floor-node.log"), "w")
    node = subprocess.Popen([basalt, "start", "--data-dir", data, "--backend", "memory",
                             "--ring-size", "8", "--pb-listen", "127.0.0.1:%d" % pb,
                             "--cluster-listen", "127.0.0.1:%d" % cl, "--http-listen", ""],
                            stdout=log, stderr=subprocess.STDOUT)
    out = []
    try:
        for _ in range(300):
            if node.poll() is not None:
                sys.exit("cluster-floor: the node exited (%s); see %s/floor-node.log"
                         % (node.returncode, d))
            try:
                socket.create_connection(("127.0.0.1", pb), 0.2).close()
                break
            except OSError:
                time.sleep(0.1)
        for w in worker_counts:
            cfg = os.path.join(d, "floor-ping-%d.config" % w)
            with open(cfg, "w") as f:
                mode = "{rate, %d}" % ping_rate if ping_rate > 0 else "max"
                f.write("{mode, %s}.\n{report_interval, 10}.\n{concurrent, %d}.\n"
                        "{basalt_duration_secs, %d}.\n{driver, basho_bench_driver_riakc_pb}.\n"
                        '{riakc_pb_ips, [{"127.0.0.1", %d}]}.\n{operations, [{ping, 1}]}.\n'
                        % (mode, w, secs, pb))
            name = "ping-%d" % w
            subprocess.run([basalt, "bench", cfg, "-q", "-d", d, "-n", name], check=True,
                           stdout=subprocess.DEVNULL)
            rep = open(os.path.join(d, name, "report.md")).read()
            # | op | n | errors | mean | median | 95th | 99th | 99.9th | max | mean(max) |
            row = re.search(r"^\| ping \|([^\n]*)$", rep, re.M)
            tps = re.search(r"Avg TPS[^0-9]*([0-9][0-9,.]*)", rep)
            cells = [c.strip().strip("*").replace(",", "") for c in row.group(1).split("|")] if row else []
            out.append((w, tps.group(1) if tps else "?", cells))
    finally:
        node.terminate()
        node.wait()
        log.close()
    return out


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir")
    p.add_argument("--basalt", default=os.path.join(
        os.environ.get("CARGO_TARGET_DIR", "target"), "release", "basalt"))
    p.add_argument("--secs", type=int, default=30)
    p.add_argument("--writers", type=int, default=8)
    p.add_argument("--readers", type=int, default=24)
    p.add_argument("--workers", type=int, default=24)
    p.add_argument("--data-mb", type=int, default=2048)
    p.add_argument("--write-rate", type=float, default=0,
                   help="fsync writes a second over all writers (0: unpaced)")
    p.add_argument("--read-rate", type=float, default=0,
                   help="reads a second over all readers (0: unpaced)")
    p.add_argument("--ping-rate", type=int, default=0,
                   help="pings a second a worker (0: {mode, max})")
    p.add_argument("--roll-mb", type=int, default=0,
                   help="each fsync writer starts a new file (and fsyncs the directory) "
                        "every this many MiB, as a journal rolls (0: one file)")
    p.add_argument("--files-mb", type=int, default=0,
                   help="in the together case, also write a file of this many MiB every "
                        "--files-every s in fsynced 1 MiB steps (0: none)")
    p.add_argument("--files-every", type=float, default=10)
    p.add_argument("--files-delete", action="store_true",
                   help="unlink each such file once the next is written (else keep them)")
    p.add_argument("--only",
                   help="the cases to run, comma-separated, of write, read, together "
                        "(paced only) and ping (default: all)")
    a = p.parse_args()
    cases = {"write", "read", "together", "ping"}
    only = set(x for x in a.only.split(",") if x) if a.only is not None else cases
    if not only or not only <= cases:
        sys.exit("cluster-floor: --only takes write, read, together, ping (comma-separated)")
    if a.secs < 10:
        sys.exit("cluster-floor: --secs must be at least 10 (one window)")
    if a.files_mb < 0 or a.files_every <= 0:
        sys.exit("cluster-floor: --files-mb must be 0 or more, --files-every above 0")
    if a.write_rate < 0 or a.read_rate < 0 or a.ping_rate < 0 or a.roll_mb < 0:
        sys.exit("cluster-floor: rates and --roll-mb must be 0 (unpaced; one file) or more")
    if a.write_rate <= 0 and (a.files_mb or (a.only is not None and "together" in only)):
        sys.exit("cluster-floor: the together case (and --files-mb in it) runs only paced: "
                 "give --write-rate and --read-rate")
    if (a.write_rate > 0) != (a.read_rate > 0):
        sys.exit("cluster-floor: give --write-rate and --read-rate together (the paced cases run both)")
    os.makedirs(a.dir, exist_ok=True)
    if not os.access(a.basalt, os.X_OK):
        sys.exit("cluster-floor: no basalt binary at %s (--basalt)" % a.basalt)
    lines = ["| case | ops/s | mean ms | median ms | p99 ms | mean(max) ms | max ms |",
             "|---|---:|---:|---:|---:|---:|---:|"]

    def row(name, st, secs):
        n, mean, med, p99, mm, mx, at = st
        lines.append("| %s | %.0f | %.3f | %.3f | %.3f | %.2f | %.1f (at %.0f s) |" % (
            name, n / secs, mean, med, p99, mm, mx, at))
        print(lines[-1], flush=True)
    print("\n".join(lines), flush=True)
    rolls = ", a new file every %d MiB" % a.roll_mb if a.roll_mb else ""
    try:
        if a.write_rate > 0:
            wr, rr = a.write_rate, a.read_rate
            if "write" in only:
                row("8 KiB write + fdatasync, %d writers, paced to %.0f/s%s" % (a.writers, wr, rolls),
                    fsync_case(a.dir, a.writers, a.secs, wr, a.roll_mb), a.secs)
            if "read" in only:
                row("8 KiB O_DIRECT random read, %d readers, paced to %.0f/s" % (a.readers, rr),
                    read_case(a.dir, a.readers, a.secs, a.data_mb, rr), a.secs)
            if "together" in only:
                files = (a.files_mb, a.files_every, a.files_delete) if a.files_mb else None
                ws, rs, us = together_case(a.dir, a.writers, a.readers, a.secs, a.data_mb, wr,
                                           rr, a.roll_mb, files)
                beside = ""
                if files:
                    beside = ", beside a %d MiB file every %g s%s" % (
                        a.files_mb, a.files_every, " (each unlinked after the next)"
                        if a.files_delete else " (kept)")
                row("together: the writes (%.0f/s)%s%s" % (wr, rolls, beside), ws, a.secs)
                row("together: the reads (%.0f/s)" % rr, rs, a.secs)
                if files and a.files_delete:
                    row("together: the unlinks", us, a.secs)
        else:
            if "write" in only:
                for w in sorted({1, a.writers}):
                    row("8 KiB write + fdatasync, %d writer%s%s" % (w, "s" if w > 1 else "", rolls),
                        fsync_case(a.dir, w, a.secs, 0, a.roll_mb), a.secs)
            if "read" in only:
                row("8 KiB O_DIRECT random read, %d readers (%d MiB file)" % (a.readers, a.data_mb),
                    read_case(a.dir, a.readers, a.secs, a.data_mb), a.secs)
    finally:
        data = os.path.join(a.dir, "floor-read-data")
        if os.path.exists(data):
            os.unlink(data)
    workers = [a.workers] if a.ping_rate > 0 else sorted({1, a.workers})
    pings = ping_cases(a.basalt, a.dir, a.secs, workers, a.ping_rate) if "ping" in only else []
    for w, tps, c in pings:
        # cells: n, errors, mean, median, 95th, 99th, 99.9th, max, mean(max)
        if len(c) >= 9:
            lines.append("| PB ping round trip (loopback), %d worker%s%s | %s | %s | %s | %s | %s | %s |" % (
                w, "s" if w > 1 else "",
                ", %d/s a worker" % a.ping_rate if a.ping_rate > 0 else "",
                tps, c[2], c[3], c[5], c[8], c[7]))
        else:
            lines.append("| PB ping round trip, %d workers | %s | ? | ? | ? | ? | ? |" % (w, tps))
        print(lines[-1], flush=True)
    head = ("Cluster floor, %s UTC, %d CPUs, mount %s; each case %d s\n\n" % (
        time.strftime("%Y-%m-%d %H:%M", time.gmtime()), os.cpu_count() or 0,
        subprocess.run(["findmnt", "-no", "OPTIONS", "--target", a.dir], stdout=subprocess.PIPE,
                       universal_newlines=True).stdout.strip(), a.secs))
    with open(os.path.join(a.dir, "floor.md"), "w") as f:
        f.write(head + "\n".join(lines) + "\n")
    print("cluster-floor: written %s" % os.path.join(a.dir, "floor.md"), file=sys.stderr)


if __name__ == "__main__":
    main()
