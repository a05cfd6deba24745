#!/usr/bin/env python3
"""Reads the callgrind profiles scripts/request-cost.sh made and prints,
per operation, the instructions (Ir) and allocator calls per request for
the node and for the embedded store, with the node's instructions split by
layer (each function's own instructions, by the crate or module it belongs
to) and a few inclusive costs (a function and what it calls).

Usage: scripts/request-cost.py DIR COUNT   (DIR holds node-OP.cg, embedded-OP.cg)
"""
import os
import re
import sys
from collections import defaultdict

# Layers by the first path in a (demangled) function name, in order; the
# first that matches wins. "own instructions" of each function only, so
# the rows add up to the total.
LAYERS = [
    ("allocator (mimalloc)", r"^(_?mi_|__rust_alloc|__rust_dealloc|__rust_realloc|__rdl_|__rg_|mi_)"),
    ("memcpy / memmove / memset", r"^(__memcpy|__memmove|__memset|memcpy|memmove|memset|__mempcpy)"),
    ("PB codec (prost, riak_pb)", r"^<?&?(prost|riak_pb|basalt_riak_pb)::|riak_pb::"),
    ("server: listener, dispatch, PB handler", r"basalt_server::(server|api|pb|security)::"),
    ("server: kv FSM", r"basalt_server::kv::"),
    ("server: router", r"basalt_server::router::"),
    ("server: vnode (incl. merge, AAE tree)", r"basalt_server::vnode::"),
    ("server: object encode / decode, vclock", r"basalt_server::object::"),
    ("server: other (props, types, stats)", r"basalt_server::"),
    ("engine (ledger, journal, caches)", r"basalt_engine::|basalt_backends?::|crc32c|lz4|zstd|xxh"),
    ("tokio / futures / channels", r"tokio::|futures_util::|futures_core::|mio::|parking_lot|crossbeam"),
    ("tracing, metrics", r"tracing|hdrhistogram"),
    ("libc syscalls, pthread, ld.so", r"^(__libc|__GI|__pthread|pthread|syscall|epoll|__send|__recv|send|recv|read|write|futex|_dl_|__lll|clock_gettime|__clock|__vdso|__sched|sched_|__new_sem|__futex)"),
]
OTHER = "std / core / other"


def parse(path):
    """Self Ir per function, call edges (caller, callee) -> [calls, incl Ir], total."""
    names = {}
    selfc = defaultdict(int)
    edges = defaultdict(lambda: [0, 0])
    fn = None
    cfn = None
    pending_call = None
    total = 0
    def name(spec):
        m = re.match(r"\((\d+)\)(?: (.*))?", spec)
        if not m:
            return spec
        if m.group(2) is not None:
            names[m.group(1)] = m.group(2)
        return names.get(m.group(1), spec)
    with open(path, errors="replace") as f:
        for line in f:
            line = line.rstrip("\n")
            if not line:
                continue
            c = line[0]
            if c.isdigit() or c in "+-*":
                parts = line.split()
                cost = int(parts[1]) if len(parts) > 1 else 0
                if pending_call is not None:
                    e = edges[(fn, pending_call[0])]
                    e[0] += pending_call[1]
                    e[1] += cost
                    pending_call = None
                else:
                    selfc[fn] += cost
                    total += cost
            elif line.startswith("fn="):
                fn = name(line[3:])
            elif line.startswith("cfn="):
                cfn = name(line[4:])
            elif line.startswith("calls="):
                pending_call = (cfn, int(line[6:].split()[0]))
    return selfc, edges, total


# A thread serves requests if it runs tokio's workers (the connection
# tasks, the kv FSMs), a vnode's jobs, or the embedded load; the others are
# the engine's timer threads (each vnode store's journal flusher and ledger
# clerks, compaction, the remover), whose cost follows the wall time the
# run took under valgrind, not the requests: left out, and shown apart.
SERVING = re.compile(
    r"tokio::runtime::scheduler::multi_thread::worker::|VnodeState>::execute|basalt_engine::store::(read|write)::<impl basalt_engine::store::Store>::(get|put_with)$"
)


def load(paths):
    """(self costs, edges, total) of the serving threads, and the total of the others."""
    selfc = defaultdict(int)
    edges = defaultdict(lambda: [0, 0])
    total = 0
    other = 0
    for p in paths:
        s, e, t = parse(p)
        if any(f and SERVING.search(f) for f in s) or any(
            (a and SERVING.search(a)) or (b and SERVING.search(b)) for (a, b) in e
        ):
            for f, c in s.items():
                selfc[f] += c
            for k, (n, c) in e.items():
                edges[k][0] += n
                edges[k][1] += c
            total += t
        else:
            other += t
    return selfc, edges, total, other


def layer(fname):
    for label, pat in LAYERS:
        if re.search(pat, fname):
            return label
    return OTHER


ALLOC_ENTRY = re.compile(r"^(mi_malloc|mi_zalloc|mi_calloc|mi_realloc|mi_malloc_aligned|mi_zalloc_aligned|mi_realloc_aligned|mi_new|malloc|calloc|realloc)\b")
ALLOCATOR = re.compile(r"^(_?mi_|__rust_|__rdl_|__rg_|malloc|calloc|realloc)")


def allocs(edges):
    n = 0
    for (caller, callee), (calls, _) in edges.items():
        if callee and ALLOC_ENTRY.match(callee) and not (caller and ALLOCATOR.match(caller)):
            n += calls
    return n


def inclusive(selfc, edges, pat):
    rx = re.compile(pat)
    fs = [f for f in selfc if f and rx.search(f)]
    fs += [c for (_, c) in edges if c and rx.search(c) and c not in fs]
    tot = 0
    for (caller, callee), (_, incl) in edges.items():
        if callee in fs and not (caller and rx.search(caller)):
            tot += incl
    return tot


# What a request runs, and nothing else: the connection's task (frame
# read, dispatch, PB handler, kv FSM, reply write), the fan-out calls
# spawned as tasks of their own, and the vnode jobs. Its sum is the
# deterministic "request path" figure; the rest of the serving threads is
# tokio's scheduling and I/O driver plus the node's periodic tasks, which
# follow the wall time.
PATH = [
    r"basalt_server::server::connection::\{\{closure\}\}$",
    r"basalt_server::router::Router::fan_out_(vec|each)(<.*>)?::\{\{closure\}\}::\{\{closure\}\}$",
    r"VnodeState>::execute$",
]

INCL = [
    ("PB dispatch: the handler and the kv FSM (connection task)", r"basalt_server::server::dispatch::dispatch::\{\{closure\}\}$"),
    ("kv FSM: Kv::get / Kv::put (connection task)", r"basalt_server::kv::(get::<impl basalt_server::kv::Kv>::get_with_basic_quorum|put::<impl basalt_server::kv::Kv>::put)::\{\{closure\}\}$"),
    ("vnode job: VnodeState::execute (vnode thread)", r"VnodeState>::execute$"),
    ("engine calls: Store get, head, put", r"basalt_engine::store::(read|write)::<impl basalt_engine::store::Store>::(get|head|put_with)$"),
    ("object decode (decode, decode_metadata, decode_owned)", r"basalt_server::object::RiakObject::decode(_metadata|_owned)?$"),
    ("object encode (encode_value, encode_metadata)", r"basalt_server::object::RiakObject::encode_(value|metadata)$"),
]


def main():
    d, count = sys.argv[1], int(sys.argv[2])
    ops = ["get", "put", "update"]
    data = {}
    import glob
    others = {}
    for who in ["node", "embedded"]:
        for op in ops:
            paths = glob.glob(os.path.join(d, f"{who}-{op}-*.cg")) + glob.glob(
                os.path.join(d, f"{who}-{op}.cg*")
            )
            if paths:
                s, e, t, o = load(paths)
                data[(who, op)] = (s, e, t)
                others[(who, op)] = o
    print(f"per request ({count} per op; UPDATE = a GET and a PUT, counted as one op)\n")
    print("| | " + " | ".join(o.upper() for o in ops) + " |")
    print("|---|" + "---:|" * len(ops))
    for who in ["node", "embedded"]:
        row = []
        for o in ops:
            if (who, o) not in data:
                row.append("-")
                continue
            sc, ed, tot = data[(who, o)]
            row.append(f"{tot / count / 1000:.1f} k")
        print(f"| {who}: instructions, serving threads | " + " | ".join(row) + " |")
        row = [f"{allocs(data[(who, o)][1]) / count:.1f}" if (who, o) in data else "-" for o in ops]
        print(f"| {who}: allocator calls | " + " | ".join(row) + " |")
    row = []
    for o in ops:
        if ("node", o) not in data:
            row.append("-")
            continue
        s, e, _ = data[("node", o)]
        row.append(f"{sum(inclusive(s, e, p) for p in PATH) / count / 1000:.1f} k")
    print("| node: request path (connection task, fan-out tasks, vnode jobs) | " + " | ".join(row) + " |")
    for who in ["node", "embedded"]:
        row = [f"{others[(who, o)] / count / 1000:.1f} k" if (who, o) in others else "-" for o in ops]
        print(f"| {who}: timer threads (left out above) | " + " | ".join(row) + " |")
    print("\nnode, own instructions by layer (k per request)\n")
    print("| layer | " + " | ".join(o.upper() for o in ops) + " |")
    print("|---|" + "---:|" * len(ops))
    per = {}
    for o in ops:
        if ("node", o) not in data:
            continue
        acc = defaultdict(int)
        for f, c in data[("node", o)][0].items():
            acc[layer(f or "")] += c
        per[o] = acc
    for label in [l for l, _ in LAYERS] + [OTHER]:
        row = [f"{per[o][label] / count / 1000:.1f}" if o in per else "-" for o in ops]
        print(f"| {label} | " + " | ".join(row) + " |")
    print("\nnode, inclusive (k per request)\n")
    print("| function and what it calls | " + " | ".join(o.upper() for o in ops) + " |")
    print("|---|" + "---:|" * len(ops))
    for label, pat in INCL:
        row = []
        for o in ops:
            if ("node", o) not in data:
                row.append("-")
                continue
            s, e, _ = data[("node", o)]
            row.append(f"{inclusive(s, e, pat) / count / 1000:.1f}")
        print(f"| {label} | " + " | ".join(row) + " |")
    if len(sys.argv) > 3:
        # Top functions by own cost, for the reading.
        for o in ops:
            if ("node", o) not in data:
                continue
            s = data[("node", o)][0]
            print(f"\ntop own cost, node {o}:")
            for f, c in sorted(s.items(), key=lambda x: -x[1])[: int(sys.argv[3])]:
                print(f"  {c / count:9.0f}  {f}")


if __name__ == "__main__":
    main()
