#!/usr/bin/env python3
"""The write amplification floor of synced appends on this machine (issue
56 item 3, "WA with sync on 1.56 at the node level").

Appends RECORD-byte records to one file, fdatasync after every GROUP of
them (a vnode's journal with sync on: one sync per write group), and
reports what the process was charged in /proc/self/io `write_bytes` (the
figure seed-cluster.py divides by the bytes clients put) against the bytes
appended. The kernel charges a whole page each time a clean page is
dirtied, and a sync cleans the partly filled last page, so the next append
dirties it again: about one page per sync on top of the data, whatever
the store does.

    python3 scripts/experiments/sync-append-wa.py DIR [RECORD [COUNT]]

Prints one line per group size (1, 2, 4, 8, 16).
"""
import os
import sys


def write_bytes():
    with open("/proc/self/io") as f:
        for line in f:
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    raise SystemExit("no write_bytes in /proc/self/io")


def run(path, record, count, group):
    buf = os.urandom(record)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    try:
        before = write_bytes()
        for i in range(count):
            os.write(fd, buf)
            if (i + 1) % group == 0:
                os.fdatasync(fd)
        os.fdatasync(fd)
        charged = write_bytes() - before
    finally:
        os.close(fd)
        os.unlink(path)
    return charged


def main():
    if len(sys.argv) < 2:
        raise SystemExit(__doc__)
    d = sys.argv[1]
    record = int(sys.argv[2]) if len(sys.argv) > 2 else 8200
    count = int(sys.argv[3]) if len(sys.argv) > 3 else 2000
    path = os.path.join(d, "sync-append-wa.tmp")
    page = os.sysconf("SC_PAGE_SIZE")
    print("record %d bytes, %d records, page %d bytes" % (record, count, page))
    for group in (1, 2, 4, 8, 16):
        charged = run(path, record, count, group)
        data = record * count
        model = (record * group + page) / (record * group)
        print("group %2d: charged %d bytes for %d appended: WA %.3f (one page a sync: %.3f)"
              % (group, charged, data, charged / data, model))


if __name__ == "__main__":
    main()
