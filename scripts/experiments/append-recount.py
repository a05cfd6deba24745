#!/usr/bin/env python3
"""Whether appends inside a memory cgroup at its limit are counted (and
written) more than once: a writer appends journal-like records (8,246
bytes: not a multiple of the page) round-robin to several files at a fixed
rate while a reader in the same cgroup streams a large file through the
page cache, and the writer's `/proc/self/io` `write_bytes` is set against
the bytes it appended. Mode `plain` writes each record as it comes; mode
`pages` holds the partly filled last page of each file in the writer and
writes whole pages only (the tail at the end), so a page is never dirtied
again after the kernel wrote it back. For the 2i study of 2026-12-07 09:33
(issue 56: the node-level WA's rest).

Usage (root, a cgroup memory controller: v1, or cgroup2 with memory
delegated, found as scripts/seed-cluster.py finds it):
  scripts/experiments/append-recount.py DIR [--limit-mb 256] [--secs 60]
      [--files 16] [--rate 400] [--read-gb 2] [--modes plain,pages]
DIR needs read-gb + secs x rate x 8 KB of free space; its files are removed.
"""

import argparse
import importlib.util
import os
import sys
import time

REC = 8246
PAGE = 4096


def seed_cluster():
    """scripts/seed-cluster.py as a module: its `cgroup_base` (the memory
    cgroup this process is in, v1 or v2, and its file names) and
    `read_int`."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "seed-cluster.py")
    spec = importlib.util.spec_from_file_location("seed_cluster", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


SC = seed_cluster()


def io_write_bytes():
    return SC.read_int("/proc/self/io", "write_bytes:") or 0


def writer(dirpath, files, secs, rate, mode):
    fds = [os.open(os.path.join(dirpath, "w%02d" % i), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
           for i in range(files)]
    tails = [b""] * files
    rec = os.urandom(REC)
    start_io = io_write_bytes()
    appended = 0
    t0 = time.time()
    n = 0
    while True:
        now = time.time()
        if now - t0 >= secs:
            break
        due = int((now - t0) * rate)
        while n < due:
            i = n % files
            if mode == "plain":
                os.write(fds[i], rec)
            else:
                buf = tails[i] + rec
                whole = len(buf) - len(buf) % PAGE
                os.write(fds[i], buf[:whole])
                tails[i] = buf[whole:]
            appended += REC
            n += 1
        time.sleep(0.002)
    for i, fd in enumerate(fds):
        if tails[i]:
            os.write(fd, tails[i])
        os.close(fd)
    return appended, io_write_bytes() - start_io


def reader(path):
    fd = os.open(path, os.O_RDONLY)
    while True:
        if not os.read(fd, 1 << 20):
            os.lseek(fd, 0, os.SEEK_SET)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--limit-mb", type=int, default=256)
    ap.add_argument("--secs", type=int, default=60)
    ap.add_argument("--files", type=int, default=16)
    ap.add_argument("--rate", type=int, default=400, help="records a second")
    ap.add_argument("--read-gb", type=float, default=2.0)
    ap.add_argument("--modes", default="plain,pages")
    a = ap.parse_args()
    modes = a.modes.split(",")
    if any(m not in ("plain", "pages") for m in modes):
        sys.exit("--modes takes plain and/or pages")
    if min(a.limit_mb, a.secs, a.files, a.rate) <= 0 or a.read_gb < 0:
        sys.exit("--limit-mb, --secs, --files and --rate must be > 0, --read-gb >= 0")
    try:
        version, base, limit_file, _, hits_file = SC.cgroup_base()
    except SC.Refused as e:
        sys.exit("append-recount: %s" % e)
    os.makedirs(a.dir, exist_ok=True)
    cg = os.path.join(base, "append-recount-%d" % os.getpid())
    os.mkdir(cg)
    big = os.path.join(a.dir, "big")
    try:
        with open(os.path.join(cg, limit_file), "w") as f:
            f.write(str(a.limit_mb << 20))
        if a.read_gb > 0:
            with open(big, "wb") as f:
                chunk = os.urandom(1 << 20)
                for _ in range(int(a.read_gb * 1024)):
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())  # clean, so that each mode can drop it below
        print("| mode | appended MB | write_bytes MB | counted ÷ appended |")
        print("|---|---:|---:|---:|")
        for mode in modes:
            rpid = None
            if a.read_gb > 0:
                # out of the page cache, so the reader's pages are charged
                # to the cgroup as it reads them
                fd = os.open(big, os.O_RDONLY)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                os.close(fd)
                rpid = os.fork()
                if rpid == 0:
                    with open(os.path.join(cg, "cgroup.procs"), "w") as f:
                        f.write(str(os.getpid()))
                    reader(big)
                    os._exit(0)
            r, w = os.pipe()
            wpid = os.fork()
            if wpid == 0:
                os.close(r)
                with open(os.path.join(cg, "cgroup.procs"), "w") as f:
                    f.write(str(os.getpid()))
                appended, counted = writer(a.dir, a.files, a.secs, a.rate, mode)
                os.write(w, ("%d %d" % (appended, counted)).encode())
                os._exit(0)
            os.close(w)
            out = os.read(r, 100).decode().split()
            os.waitpid(wpid, 0)
            if rpid:
                os.kill(rpid, 9)
                os.waitpid(rpid, 0)
            appended, counted = int(out[0]), int(out[1])
            print("| %s | %.1f | %.1f | %.3f |" % (mode, appended / 1e6, counted / 1e6, counted / appended))
            for i in range(a.files):
                os.unlink(os.path.join(a.dir, "w%02d" % i))
        hits = SC.read_int(os.path.join(cg, hits_file), "max" if version == "v2" else None)
        print("cgroup limit hits: %s" % hits)
    finally:
        if os.path.exists(big):
            os.unlink(big)
        time.sleep(0.5)
        os.rmdir(cg)


if __name__ == "__main__":
    main()
