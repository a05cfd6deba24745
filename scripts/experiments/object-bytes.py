#!/usr/bin/env python3
"""What an object carries besides its value, in Riak's storage encoding and
in Basalt's, for the writes basho_bench's `riakc_pb` driver makes (issue 56:
the node-level WA target at 1 KB).

Riak's encoding is `riak_object`'s binary version 1 (magic 53, version 1, the
vector clock as an Erlang external term, then per sibling the value and its
metadata: last-modified, vtag, deleted flag and every other metadata entry as
a length-prefixed key and value), laid out as riak_kv's `riak_object.erl`
documents it. The Erlang terms' sizes are measured with `erl`
(`term_to_binary`) when it is installed, else computed from the external term
format's rules. Basalt's is the object storage encoding version 2 of
docs/formats.md. The object is the one a `riakc_pb` put of a new key makes
on a node: content type `application/octet-stream` (the driver's default),
no charset or encoding, empty links, user metadata and indexes (Riak keeps
all three as empty entries), a 22-character vtag, last-modified set, one
clock entry of an 8-byte actor (one coordinating vnode) — or k entries.

Usage: scripts/experiments/object-bytes.py [--actors 1,3] [--values 1000,8000]
        [--key-bytes 7] [--bucket-bytes 4]
"""

import argparse
import shutil
import subprocess
import sys

TS = 63_948_000_000  # Gregorian seconds of late 2026, as riak_core's vclock timestamps
CONTENT_TYPE = "application/octet-stream"
VTAG = 22


def etf_int(n):
    """Size of an integer in the external term format, without the 131 tag."""
    if 0 <= n < 256:
        return 2  # SMALL_INTEGER_EXT
    if -(2**31) <= n < 2**31:
        return 5  # INTEGER_EXT
    digits = (n.bit_length() + 7) // 8
    return 3 + digits  # SMALL_BIG_EXT: tag, n, sign, digits


def etf_vclock(actors):
    """term_to_binary([{<<Actor:8/binary>>, {Counter, Timestamp}}, ...])."""
    if actors == 0:
        return 2  # 131, NIL_EXT
    entry = 2 + (5 + 8) + 2 + etf_int(1) + etf_int(TS)  # tuple, binary, tuple, ints
    return 1 + 5 + actors * entry + 1  # 131, LIST_EXT header, entries, NIL tail


def etf_string(s):
    """term_to_binary("...") of a latin-1 list: STRING_EXT."""
    return 1 + 3 + len(s)


def measured_with_erl(actors_list):
    """The same sizes from erl itself, or None without erl."""
    erl = shutil.which("erl")
    if not erl:
        return None
    clocks = ",".join(
        "byte_size(term_to_binary([{<<I:64>>, {1, %d}} || I <- lists:seq(1, %d)]))" % (TS, a)
        for a in actors_list
    )
    expr = (
        'io:format("~w~n", [[%s, byte_size(term_to_binary([])), '
        'byte_size(term_to_binary("%s"))]]), halt().' % (clocks, CONTENT_TYPE)
    )
    out = subprocess.run([erl, "-noshell", "-eval", expr], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, universal_newlines=True, timeout=60)
    if out.returncode != 0:
        return None
    vals = [int(x) for x in out.stdout.strip().strip("[]").split(",")]
    return dict(clocks=dict(zip(actors_list, vals[:-2])), empty=vals[-2], ctype=vals[-1])


def riak_v1(actors, sizes):
    """Bytes of riak_object v1 besides the value, and their parts."""
    clock = sizes["clocks"][actors]
    empty = sizes["empty"]

    def entry(key, value_term_bytes):
        # KeyLen:32 | 1 (binary tag) | key | ValueLen:32 | 0 (term tag) | term
        return 4 + 1 + len(key) + 4 + 1 + value_term_bytes

    rest = (
        entry("content-type", sizes["ctype"])
        + entry("Links", empty)
        + entry("X-Riak-Meta", empty)
        + entry("index", empty)
    )
    parts = {
        "header (magic, version, clock length, sibling count)": 1 + 1 + 4 + 4,
        "vector clock (Erlang term)": clock,
        "value length and its type tag": 4 + 1,
        "metadata length, last-modified, vtag, deleted": 4 + 12 + 1 + VTAG + 1,
        "content type and empty links / user metadata / indexes": rest,
    }
    return sum(parts.values()), parts


def basalt_v2(actors):
    """Bytes of Basalt's storage encoding version 2 besides the value."""
    clock = 1 + 4 + actors * (2 + 8 + 8 + 8)
    absent = 4  # u32::MAX length
    parts = {
        "version, clock length, sibling count": 1 + 4 + 4,
        "vector clock": clock,
        "value length, flags, last-modified": 4 + 1 + 8,
        "content type, absent charset / encoding, vtag": (4 + len(CONTENT_TYPE))
        + 2 * absent
        + (4 + VTAG),
        "empty user metadata / indexes / links": 12,
        "dot (actor, counter)": 4 + 8 + 8,
    }
    return sum(parts.values()), parts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--actors", default="1,3")
    ap.add_argument("--values", default="1000,8000")
    ap.add_argument("--key-bytes", type=int, default=7)
    ap.add_argument("--bucket-bytes", type=int, default=4)
    a = ap.parse_args()
    try:
        actors_list = [int(x) for x in a.actors.split(",")]
        values = [int(x) for x in a.values.split(",")]
    except ValueError:
        sys.exit("--actors and --values take comma-separated integers")
    if any(x < 0 for x in actors_list) or any(v <= 0 for v in values):
        sys.exit("--actors must be >= 0 and --values > 0")
    if a.key_bytes < 0 or a.bucket_bytes < 0:
        sys.exit("--key-bytes and --bucket-bytes must be >= 0")
    computed = dict(
        clocks={k: etf_vclock(k) for k in actors_list},
        empty=2,
        ctype=etf_string(CONTENT_TYPE),
    )
    measured = measured_with_erl(actors_list)
    if measured is None:
        print("erl not found: Erlang term sizes computed from the external term format")
        sizes = computed
    else:
        same = measured == computed
        print("Erlang term sizes measured with erl (%s the computed ones)"
              % ("equal to" if same else "DIFFERENT from"))
        sizes = measured
    kb = a.key_bytes + a.bucket_bytes
    print("key + bucket: %d bytes (counted once beside each encoding)\n" % kb)
    for k in actors_list:
        r, rparts = riak_v1(k, sizes)
        b, bparts = basalt_v2(k)
        print("## %d clock entr%s" % (k, "y" if k == 1 else "ies"))
        print("| encoding | part | bytes |")
        print("|---|---|---:|")
        for name, n in rparts.items():
            print("| Riak v1 | %s | %d |" % (name, n))
        print("| **Riak v1** | **total besides the value** | **%d** |" % r)
        for name, n in bparts.items():
            print("| Basalt v2 | %s | %d |" % (name, n))
        print("| **Basalt v2** | **total besides the value** | **%d** |" % b)
        print()
        print("| value bytes | Riak v1 object + key ÷ value | Basalt v2 object + key ÷ value |")
        print("|---:|---:|---:|")
        for v in values:
            print("| %d | %.3f | %.3f |" % (v, (v + r + kb) / v, (v + b + kb) / v))
        print()


if __name__ == "__main__":
    main()
