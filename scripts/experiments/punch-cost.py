#!/usr/bin/env python3
"""Times fallocate(PUNCH_HOLE | KEEP_SIZE) on a directory's file system.

Writes a 64 MiB file of random bytes (fsynced) in DIR, punches N holes of
8 KiB, one every 16 KiB, and prints the mean, p50, p99 and max time of a
punch. With --readers R, R fio jobs read the same file at random with
O_DIRECT meanwhile (as GETs read a journal file being reclaimed). Used for
the journal's reclaim in place (docs/engine.md): on a file system mounted
with online discard each punch waits for the device.

usage: scripts/experiments/punch-cost.py DIR [N] [--readers R]
"""
import ctypes
import os
import subprocess
import sys
import time

FALLOC_FL_KEEP_SIZE = 1
FALLOC_FL_PUNCH_HOLE = 2


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    readers = 0
    if "--readers" in sys.argv:
        readers = int(sys.argv[sys.argv.index("--readers") + 1])
        args = [a for a in args if a != str(readers)]
    if not args:
        sys.exit(__doc__)
    d = args[0]
    n = int(args[1]) if len(args) > 1 else 2000
    libc = ctypes.CDLL("libc.so.6", use_errno=True)
    libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_long, ctypes.c_long]
    path = os.path.join(d, "punch-cost.bin")
    size = 64 << 20
    with open(path, "wb") as f:
        for _ in range(size >> 20):
            f.write(os.urandom(1 << 20))
        f.flush()
        os.fsync(f.fileno())
    fio = None
    if readers:
        fio = subprocess.Popen(
            ["fio", "--name=rr", "--filename=" + path, "--rw=randread", "--bs=8k",
             "--direct=1", "--numjobs=%d" % readers, "--time_based", "--runtime=600",
             "--ioengine=psync", "--output=/dev/null"])
        time.sleep(3)
    fd = os.open(path, os.O_RDWR)
    lat = []
    try:
        for i in range(n):
            off = (i * 16384) % size
            t = time.time()
            if libc.fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off + 4096, 8192) != 0:
                sys.exit("fallocate: errno %d" % ctypes.get_errno())
            lat.append(time.time() - t)
    finally:
        os.close(fd)
        if fio:
            fio.terminate()
            fio.wait()
        os.remove(path)
    lat.sort()
    us = lambda x: "%.0f" % (x * 1e6)
    print("%s: %d punches of 8 KiB (%d O_DIRECT readers): mean %s us, p50 %s, p99 %s, max %s"
          % (d, n, readers, us(sum(lat) / n), us(lat[n // 2]), us(lat[int(n * 0.99)]), us(lat[-1])))


if __name__ == "__main__":
    main()
