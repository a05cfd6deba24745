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

Usage (root, cgroup v1 memory controller):
  scripts/experiments/append-recount.py DIR [--limit-mb 256] [--secs 60]
      [--files 16] [--rate 400] [--read-gb 2] [--modes plain,pages]
DIR needs read-gb + secs x rate x 8 KB of free space; its files are removed.
"""

import argparse
import os
import sys
import time

REC = 8246
PAGE = 4096


def cgroup_base():
    for line in open("/proc/self/cgroup"):
        parts = line.strip().split(":")
        if len(parts) == 3 and "memory" in parts[1].split(","):
            base = "/sys/fs/cgroup/memory" + parts[2]
            if os.path.isdir(base):
                return base
    sys.exit("no cgroup v1 memory controller here")


def io_write_bytes():
    for line in open("/proc/self/io"):
        if line.startswith("write_bytes:"):
            return int(line.split()[1])
    return 0


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
    os.makedirs(a.dir, exist_ok=True)
    cg = os.path.join(cgroup_base(), "append-recount-%d" % os.getpid())
    os.mkdir(cg)
    big = os.path.join(a.dir, "big")
    try:
        with open(os.path.join(cg, "memory.limit_in_bytes"), "w") as f:
            f.write(str(a.limit_mb << 20))
        if a.read_gb > 0:
            with open(big, "wb") as f:
                chunk = os.urandom(1 << 20)
                for _ in range(int(a.read_gb * 1024)):
                    f.write(chunk)
                f.flush()
                os.fsync(f.fileno())
                # out of the page cache, so the reader's pages are charged
                # to the cgroup as it reads them
                os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        print("| mode | appended MB | write_bytes MB | counted ÷ appended |")
        print("|---|---:|---:|---:|")
        for mode in modes:
            rpid = None
            if a.read_gb > 0:
                fd = os.open(big, os.O_RDONLY)
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
                os.close(fd)
                rpid = os.fork()
                if rpid == 0:
                    with open(os.path.join(cg, "tasks"), "w") as f:
                        f.write(str(os.getpid()))
                    reader(big)
                    os._exit(0)
            r, w = os.pipe()
            wpid = os.fork()
            if wpid == 0:
                os.close(r)
                with open(os.path.join(cg, "tasks"), "w") as f:
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
        with open(os.path.join(cg, "memory.failcnt")) as f:
            print("cgroup limit hits: %s" % f.read().strip())
    finally:
        if os.path.exists(big):
            os.unlink(big)
        time.sleep(0.5)
        os.rmdir(cg)


if __name__ == "__main__":
    main()
