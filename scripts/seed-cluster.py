#!/usr/bin/env python3
"""One seed-suite run against live clusters (issue 56 item 1).

Starts NODES `basalt start` nodes (ring RING, backend BACKEND), each in its
own memory cgroup with LIMIT (process + page cache, so the data outgrows
the cache) and, with --netns, its own network namespace on a bridge (with
a `tc netem` delay where the kernel has netem); joins them into one
cluster (or, with --clusters 2, two clusters of NODES nodes replicating to
each other both ways, the NHS mix of seed 003); then runs `basalt bench`
from this process's cgroup (outside the nodes') against them over PB with
the riakc_pb (or nhs) driver, samples each node (alive, bytes its process
caused to be written, CPU time, memory charged, limit hits) every second,
and writes RESULTS/NAME/cluster.md (nodes, node-level write amplification,
the nodes' and the bench's CPU against what the vCPUs had, errors and
nodes alive per interval), nodes.csv and engine.csv (each node's backend
counters every interval) beside the bench's own outputs.

Before anything starts it checks: root, a memory cgroup controller, free
ports, and that LIMIT is at least what a node needs before any page cache
(`node_need` below); a failure is a clear error (exit 2) with nothing left
running. Once started, nodes that do not come up, or exit while joining,
are an error naming the node and its last log lines. On any exit (normal,
error, SIGINT/SIGTERM) every node is killed and waited for, the cgroups,
namespaces and bridge are removed, and the nodes' data directories are
deleted, with the default work directory (KEEP=1 keeps them). A node killed mid-run (--kill-node SECS does
it on purpose) is reported per interval; the run goes on.

Used by scripts/seed-suite.sh --cluster N; see docs/bench.md "Seed suite
against a live cluster". Python 3.6+, standard library only.
"""

import argparse
import atexit
import csv
import glob
import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "lib"))
from ports import free_port  # noqa: E402  (below the ephemeral range)

MIB = 1 << 20
# What a node process needs besides its memtables and caches: code, the
# runtime, 6 threads a vnode, the JavaScript VMs, the journal files'
# record indexes (16 bytes a record), buffers, the allocator's per-thread
# caches. Measured 2026-12-02: idle, 35 MiB + 0.2 MiB a vnode once
# transparent huge pages are off (an idle 64-vnode node was 112 MiB
# before: mimalloc's arena gave every thread a 2 MiB page); a node of 22
# vnodes at the end of 5 minutes of 1 KB inserts, ~190 MiB beside its
# block cache and memtables (docs/benchmarks/2026-12-02-1930-node-memory.md).
PROCESS_MIB = 192
# A vnode's own memory besides the node-wide memtable budget: ~1 MiB of
# bookkeeping (queues, anti-entropy trees at aae_tree_size xsmall) and,
# for leveled, up to one memtable too small to freeze for the budget
# (1/8 of router::VNODE_MEMTABLE_BYTES = 8 MiB); RocksDB's two 4 MiB
# write buffers (router::ROCKS_VNODE_WRITE_BUFFER_BYTES).
VNODE_MIB = {"leveled": 1 + 1, "rocksdb": 4 * 2 + 1, "rocksdb-blob": 4 * 2 + 1,
             "bitcask": 1, "memory": 1}
# Replication queue entries kept in memory per queue (node config
# [repl] queue_memory_entries), set low so a node's queue fits its budget.
REPL_MEMORY_ENTRIES = 1000
# Replication batches in flight (limits::REPL_SEND_PARALLEL a sink per
# sending node, each at most REPL_BATCH entries / REPL_BATCH_BYTES): a
# node holds its own and, as a sink, those of every node of the other
# cluster.
REPL_SEND_PARALLEL = 4
REPL_BATCH = 100
REPL_BATCH_BYTES = 4 * MIB


# Seed 002 Study Three's check as a JavaScript pre-commit hook (5 MB, the
# seed's limit), as scripts/hook-bench.sh.
VALIDATE_JS = """function validate(o) {
  var d = o.values[0].data;
  if (d.length > 5242880) { return {"fail": "Object too large: " + d.length + " bytes"}; }
  return o;
}
"""


class Refused(Exception):
    """A check before the run failed: printed, exit 2, nothing running."""


def parse_size(text):
    m = re.fullmatch(r"\s*([0-9.]+)\s*([kmgt]?)(i?b?)\s*", text.lower())
    if not m:
        raise Refused("bad size %r: expected e.g. 512M, 1.5G or bytes" % text)
    mult = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}[m.group(2)]
    return int(float(m.group(1)) * mult)


def node_need(backend, ring, nodes, block_cache_mb, value_cache_mb, memtable_mb,
              repl_object_bytes):
    """(bytes, how) a node needs before any page cache: the process, its
    vnodes' memtables, the shared caches and, replicating, the in-memory
    part of its replication queue. What grows with the data (leveled's
    journal and SST indexes, bitcask's keydir) is not in it."""
    vnodes = int(math.ceil(ring / float(nodes)))
    per = VNODE_MIB.get(backend, 1)
    caches = 0
    if backend == "leveled":
        caches = block_cache_mb + value_cache_mb + memtable_mb
    elif backend.startswith("rocksdb"):
        caches = block_cache_mb if block_cache_mb > 0 else 32 * vnodes
    repl = REPL_MEMORY_ENTRIES * repl_object_bytes // MIB if repl_object_bytes else 0
    flight = 0
    if repl_object_bytes:
        batch = min(REPL_BATCH * repl_object_bytes, REPL_BATCH_BYTES)
        flight = int(math.ceil((1 + nodes) * REPL_SEND_PARALLEL * batch / float(MIB)))
    total = PROCESS_MIB + vnodes * per + caches + repl + flight
    how = "%d MiB process + %d vnodes x %d MiB (bookkeeping, memtables) + %d MiB caches" % (
        PROCESS_MIB, vnodes, per, caches)
    if repl:
        how += " + %d MiB replication queue (%d entries) + %d MiB replication batches in flight" % (
            repl, REPL_MEMORY_ENTRIES, flight)
    return total * MIB, how


def cgroup_base():
    """(version, directory of this process's memory cgroup, limit file,
    peak file, limit hits file)."""
    if os.geteuid() != 0:
        raise Refused("needs root: each node runs in a memory cgroup of its own")
    own = open("/proc/self/cgroup").read().splitlines()
    for line in own:
        parts = line.split(":", 2)
        if len(parts) == 3 and "memory" in parts[1].split(","):
            base = "/sys/fs/cgroup/memory" + parts[2]
            if os.path.isdir(base):
                return "v1", base, "memory.limit_in_bytes", "memory.max_usage_in_bytes", "memory.failcnt"
    for line in own:
        if line.startswith("0::"):
            base = "/sys/fs/cgroup" + line[3:]
            sub = os.path.join(base, "cgroup.subtree_control")
            if os.path.exists(sub) and "memory" in open(sub).read().split():
                return "v2", base, "memory.max", "memory.peak", "memory.events"
    raise Refused("needs a cgroup memory controller (v1 memory hierarchy, or cgroup2 with "
                  "memory in this cgroup's cgroup.subtree_control); /proc/self/cgroup:\n  "
                  + "\n  ".join(own))




def run(cmd, check=True, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          universal_newlines=True, check=check, **kw)


def log(msg):
    print("seed-cluster: " + msg, file=sys.stderr, flush=True)


class Node:
    def __init__(self, name, cluster, ip):
        self.name, self.cluster, self.ip = name, cluster, ip
        self.pb = self.cl = None
        self.proc = None
        self.cgroup = None
        self.netns = None
        self.data = None
        self.log = None
        self.http = None
        self.io_bytes = 0          # last write_bytes seen
        self.io_base = None        # write_bytes when the bench started
        self.cpu = 0.0             # last user + system CPU seconds seen
        self.cpu_base = None       # CPU seconds when the bench started
        self.died_at = None        # seconds into the bench
        self.exit = None
        self.killed_by_us = False

    @property
    def pb_addr(self):
        return "%s:%d" % (self.ip, self.pb)

    @property
    def cl_addr(self):
        return "%s:%d" % (self.ip, self.cl)


class Cluster:
    """Everything started, so that cleanup can undo it."""

    def __init__(self, args):
        self.args = args
        self.nodes = []
        self.cg_root = None
        self.bridge = None
        self.bench = None
        self.cleaned = False

    # ---- cleanup -------------------------------------------------------
    def cleanup(self):
        if self.cleaned:
            return
        self.cleaned = True
        if self.bench is not None and self.bench.poll() is None:
            self.bench.terminate()
            try:
                self.bench.wait(30)
            except subprocess.TimeoutExpired:
                self.bench.kill()
        for n in self.nodes:
            if n.proc is not None and n.proc.poll() is None:
                n.proc.terminate()
        deadline = time.time() + 30
        for n in self.nodes:
            if n.proc is None:
                continue
            try:
                n.proc.wait(max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                n.proc.kill()
                n.proc.wait()
        for n in self.nodes:
            if n.cgroup and os.path.isdir(n.cgroup):
                self._rmdir(n.cgroup)
            if n.netns:
                run(["ip", "netns", "del", n.netns], check=False)
        if self.cg_root and os.path.isdir(self.cg_root):
            self._rmdir(self.cg_root)
        if self.bridge:
            run(["ip", "link", "del", self.bridge], check=False)
        if os.environ.get("KEEP") != "1":
            for n in self.nodes:
                if n.data:
                    shutil.rmtree(n.data, ignore_errors=True)
            if getattr(self.args, "own_work", False):
                # Our default work directory (configs, logs): the node logs
                # a failure quoted are on stderr already.
                shutil.rmtree(self.args.work, ignore_errors=True)

    @staticmethod
    def _rmdir(path):
        for _ in range(50):  # a killed process leaves its cgroup a moment later
            try:
                os.rmdir(path)
                return
            except OSError:
                time.sleep(0.1)
        log("warning: could not remove cgroup %s" % path)

    # ---- set-up --------------------------------------------------------
    def plan(self):
        a = self.args
        names = []
        for c in range(a.clusters):
            for i in range(a.nodes):
                names.append(("%s%d" % ("ab"[c], i + 1), c))
        self.use_netns = a.netns
        if a.netns and shutil.which("ip") is None:
            log("no `ip` command: nodes share this network namespace (no --netns, no delay)")
            self.use_netns = False
        self.subnet = "10.%d.%d" % (random.randint(64, 250), random.randint(1, 250))
        for k, (name, c) in enumerate(names):
            ip = "%s.%d" % (self.subnet, k + 2) if self.use_netns else "127.0.0.1"
            self.nodes.append(Node(name, c, ip))
        for n in self.nodes:
            n.pb = free_port("127.0.0.1")
            n.cl = free_port("127.0.0.1")
            if a.precommit:
                n.http = free_port("127.0.0.1")

    def make_network(self):
        a = self.args
        tag = "%x" % (os.getpid() & 0xffffff)
        self.bridge = "bscb" + tag
        try:
            run(["ip", "link", "add", self.bridge, "type", "bridge"])
        except subprocess.CalledProcessError as e:
            log("cannot make a bridge (%s): nodes share this network namespace, no delay"
                % e.stderr.strip())
            self.bridge = None
            self.use_netns = False
            for n in self.nodes:
                n.ip = "127.0.0.1"
            return
        run(["ip", "addr", "add", self.subnet + ".1/24", "dev", self.bridge])
        run(["ip", "link", "set", self.bridge, "up"])
        self.delay_note = "none"
        netem_ok = a.delay_ms > 0
        for k, n in enumerate(self.nodes):
            n.netns = "bsc%s-%s" % (tag, n.name)
            host, peer = "bsh%s%d" % (tag, k), "bsp%s%d" % (tag, k)
            run(["ip", "netns", "add", n.netns])
            run(["ip", "link", "add", host, "type", "veth", "peer", "name", peer])
            run(["ip", "link", "set", peer, "netns", n.netns])
            run(["ip", "link", "set", host, "master", self.bridge, "up"])
            ns = ["ip", "netns", "exec", n.netns]
            run(ns + ["ip", "link", "set", "lo", "up"])
            run(ns + ["ip", "addr", "add", n.ip + "/24", "dev", peer])
            run(ns + ["ip", "link", "set", peer, "up"])
            if netem_ok:
                # The delay on the node's side of its link: each packet to
                # or from a node waits delay_ms once per hop it leaves by.
                r = run(ns + ["tc", "qdisc", "add", "dev", peer, "root", "netem", "delay",
                              "%gms" % a.delay_ms], check=False)
                if r.returncode != 0:
                    log("tc netem is not available here (%s): running without a delay"
                        % r.stderr.strip())
                    netem_ok = False
                else:
                    self.delay_note = "%g ms on each node's link (tc netem)" % a.delay_ms
        if a.delay_ms > 0 and not netem_ok:
            self.delay_note = "none: %g ms asked, tc netem not available" % a.delay_ms

    def make_cgroups(self, base, limit_file):
        self.cg_root = os.path.join(base, "basalt-seedcluster-%d" % os.getpid())
        os.mkdir(self.cg_root)
        for n in self.nodes:
            n.cgroup = os.path.join(self.cg_root, n.name)
            os.mkdir(n.cgroup)
            with open(os.path.join(n.cgroup, limit_file), "w") as f:
                f.write(str(self.args.limit_bytes))
            if limit_file == "memory.max":
                with open(os.path.join(n.cgroup, "memory.swap.max"), "w") as f:
                    f.write("0")

    def node_config(self, n):
        a = self.args
        lines = [
            'node_name = "%s@%s"' % (n.name, n.ip),
            'data_dir = "%s"' % n.data,
            'pb_listen = "%s"' % n.pb_addr,
            'cluster_listen = "%s"' % n.cl_addr,
            'http_listen = "%s"' % ("%s:%d" % (n.ip, n.http) if n.http else ""),
            "ring_size = %d" % a.ring,
            'backend = "%s"' % a.backend,
            "sync = %s" % ("true" if a.sync else "false"),
            "block_cache_mb = %d" % a.block_cache_mb,
            "value_cache_mb = %d" % a.value_cache_mb,
            "memtable_mb = %d" % a.memtable_mb,
        ]
        for kv in a.set:
            key, sep, value = kv.partition("=")
            if not sep or not key.strip():
                raise Refused("--set %r: expected KEY=VALUE" % kv)
            lines.append("%s = %s" % (key.strip(), value.strip()))
        if a.precommit:
            lines += ["aae_interval_secs = %d" % 0]
        if a.clusters == 2:
            other = [m for m in self.nodes if m.cluster != n.cluster]
            lines += ["", "[repl]", "queue_memory_entries = %d" % REPL_MEMORY_ENTRIES,
                      "sinks = [%s]" % ", ".join('"%s"' % m.cl_addr for m in other)]
        if a.precommit:
            lines += ["", "[mapred]", "hook_js_vm_count = %d" % a.js_vms,
                      'js_source_dir = "%s"' % os.path.join(a.work, "js")]
        return "\n".join(lines) + "\n"

    def wait_pb(self):
        """Every node answers a PB ping (the bench pings each address once,
        2 s, before it starts; a node still busy after the join on a loaded
        machine would fail that)."""
        deadline = time.time() + self.args.start_timeout
        for n in self.nodes:
            while True:
                if n.proc.poll() is not None:
                    raise self.failed(n, "exited with %s after the join" % n.proc.returncode)
                r = run([self.args.basalt, "ping", "--pb", n.pb_addr, "--timeout", "10"],
                        check=False, timeout=30)
                if r.returncode == 0:
                    break
                if time.time() > deadline:
                    raise self.failed(n, "did not answer a PB ping within %d s: %s"
                                      % (self.args.start_timeout, r.stderr.strip()))
                time.sleep(0.5)

    def set_hook(self):
        """Seed 002 Study Three: the pre-commit hook on bucket `test`, set
        over HTTP on the first node (bucket props reach the others by
        gossip; checked on every node before the load starts)."""
        import json
        import urllib.request
        body = json.dumps({"props": {"precommit": [json.loads(self.args.precommit)]}}).encode()
        first = self.nodes[0]
        req = urllib.request.Request("http://%s:%d/buckets/test/props" % (first.ip, first.http),
                                     data=body, method="PUT",
                                     headers={"Content-Type": "application/json"})
        urllib.request.urlopen(req, timeout=10).read()
        deadline = time.time() + 30
        for n in self.nodes:
            while True:
                props = urllib.request.urlopen("http://%s:%d/buckets/test/props" % (n.ip, n.http),
                                               timeout=10).read().decode()
                if '"precommit":[{' in props.replace(" ", ""):
                    break
                if time.time() > deadline:
                    raise Refused("the pre-commit hook set on %s did not reach %s within 30 s"
                                  % (first.name, n.name))
                time.sleep(0.5)

    def start_nodes(self):
        a = self.args
        if a.precommit:
            os.makedirs(os.path.join(a.work, "js"), exist_ok=True)
            with open(os.path.join(a.work, "js", "validate.js"), "w") as f:
                f.write(VALIDATE_JS)
        for n in self.nodes:
            n.data = os.path.join(a.work, n.name)
            os.makedirs(n.data, exist_ok=True)
            conf = os.path.join(a.work, n.name + ".toml")
            with open(conf, "w") as f:
                f.write(self.node_config(n))
            n.log = os.path.join(a.work, n.name + ".log")
            cmd = ["sh", "-c", 'echo $$ > "$0" && exec "$@"', os.path.join(n.cgroup, "cgroup.procs")]
            if n.netns:
                cmd += ["ip", "netns", "exec", n.netns]
            cmd += [a.basalt, "start", "--config", conf]
            with open(n.log, "w") as out:
                n.proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT,
                                          start_new_session=True, preexec_fn=die_with_parent)

    def admin(self, n, *words, check=True, timeout=60):
        return run([self.args.basalt, "admin", "--node", n.cl_addr] + list(words), check=check,
                   timeout=timeout)

    def failed(self, n, why):
        tail = ""
        try:
            tail = "".join(open(n.log).readlines()[-15:])
        except OSError:
            pass
        return Refused("node %s (pb %s, cluster %s) %s; last lines of %s:\n%s" % (
            n.name, n.pb_addr, n.cl_addr, why, n.log, tail))

    def wait_up(self):
        deadline = time.time() + self.args.start_timeout
        for n in self.nodes:
            while True:
                if n.proc.poll() is not None:
                    raise self.failed(n, "exited with %s while starting" % n.proc.returncode)
                r = self.admin(n, "member-status", check=False, timeout=5)
                if r.returncode == 0:
                    break
                if time.time() > deadline:
                    raise self.failed(n, "did not answer within %d s" % self.args.start_timeout)
                time.sleep(0.2)

    def join(self):
        for c in range(self.args.clusters):
            members = [n for n in self.nodes if n.cluster == c]
            first = members[0]
            for n in members[1:]:
                self.admin(n, "cluster", "join", first.cl_addr)
            if len(members) > 1:
                self.admin(first, "cluster", "commit")
        deadline = time.time() + self.args.start_timeout * 5
        for c in range(self.args.clusters):
            first = [n for n in self.nodes if n.cluster == c][0]
            while True:
                for n in self.nodes:
                    if n.proc.poll() is not None:
                        raise self.failed(n, "exited with %s while joining" % n.proc.returncode)
                r = self.admin(first, "ring-status", check=False, timeout=10)
                if r.returncode == 0 and "pending ownership transfers: 0" in r.stdout:
                    break
                if time.time() > deadline:
                    raise self.failed(first, "still had transfers pending after %d s"
                                      % (self.args.start_timeout * 5))
                time.sleep(0.5)


def die_with_parent():
    """In the child before exec: SIGKILL when this script dies, even by
    SIGKILL (which no cleanup can catch), so no node outlives it."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def read_cpu_secs(pid):
    """User + system CPU seconds of process `pid` (/proc/PID/stat fields
    14 and 15), or None."""
    try:
        fields = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def read_int(path, key=None):
    try:
        text = open(path).read()
    except OSError:
        return None
    if key is None:
        try:
            return int(text.split()[0])
        except (ValueError, IndexError):
            return None
    for line in text.splitlines():
        f = line.split()
        if len(f) == 2 and f[0] == key:
            return int(f[1])
    return None


# The backend counters engine.csv records for each node every interval, summed
# over the node's vnodes (`basalt admin --json status`, "backend_stats"):
# cumulative counts, but for the gauges named *_files and *_estimated.
# A backend without a counter leaves its cell empty.
ENGINE_COUNTERS = [
    "ledger_flushes", "ledger_merges", "ledger_bytes_written", "journal_bytes_written",
    "user_bytes_written", "compaction_runs", "compaction_files_in",
    "compaction_bytes_reclaimed", "compaction_bytes_punched", "compaction_key_deltas",
    "compaction_slot_wait_ms", "journal_slowdown_us", "write_stall_us",
    "memtable_budget_freezes", "sst_block_read_count", "journal_value_read_count",
    "ledger_l0_files", "ledger_l1_files", "ledger_l2_files", "ledger_l3_files",
    "ledger_l4_files", "journal_files", "journal_garbage_bytes_estimated",
]


class Sampler(threading.Thread):
    """Each second: every node's alive flag, write_bytes and memory; a row
    per node every `interval` seconds into nodes.csv, and the node's
    backend counters (ENGINE_COUNTERS, one `basalt admin --json status` a
    node, ~15 ms of CPU) into engine.csv, so that an event in a run (a dip,
    a stall) can be laid beside what the stores were doing."""

    def __init__(self, cl, files, interval, kill_at):
        super().__init__(daemon=True)
        self.cl, self.files, self.interval, self.kill_at = cl, files, interval, kill_at
        self.rows = []
        self.engine_rows = []
        self.events = []
        self.stop = threading.Event()
        self.t0 = time.time()

    def sample(self, n):
        if n.proc.poll() is None:
            v = read_int("/proc/%d/io" % n.proc.pid, "write_bytes:")
            if v is not None:
                n.io_bytes = v
            c = read_cpu_secs(n.proc.pid)
            if c is not None:
                n.cpu = c
        elif n.died_at is None:
            n.died_at = time.time() - self.t0
            n.exit = n.proc.returncode
            self.events.append("%.0f s: node %s exited (%s)%s" % (
                n.died_at, n.name, describe_exit(n.exit),
                ", killed by --kill-node" if n.killed_by_us else ""))

    def run(self):
        nxt = self.interval
        while not self.stop.wait(1.0):
            el = time.time() - self.t0
            if self.kill_at is not None and el >= self.kill_at:
                victim = self.cl.nodes[len([m for m in self.cl.nodes if m.cluster == 0]) - 1]
                victim.killed_by_us = True
                log("killing node %s (pid %d) at %.0f s, as --kill-node asked"
                    % (victim.name, victim.proc.pid, el))
                victim.proc.kill()
                self.kill_at = None
            for n in self.cl.nodes:
                self.sample(n)
            if el >= nxt:
                self.record(nxt)
                nxt += self.interval

    def engine(self, el, n):
        if n.died_at is not None:
            return
        try:
            out = self.cl.admin(n, "--json", "status", check=False, timeout=5)
            stats = json.loads(out.stdout).get("backend_stats") or {}
        except (subprocess.TimeoutExpired, ValueError, AttributeError):
            return
        self.engine_rows.append([int(el), n.name] + [stats.get(k, "") for k in ENGINE_COUNTERS])

    def record(self, el):
        usage, peak, hits = self.files
        for n in self.cl.nodes:
            self.engine(el, n)
            self.rows.append([int(el), n.name, 1 if n.died_at is None else 0,
                              n.io_bytes - (n.io_base or 0),
                              (read_int(os.path.join(n.cgroup, usage)) or 0) // MIB,
                              (read_int(os.path.join(n.cgroup, peak)) or 0) // MIB,
                              limit_hits(n.cgroup, hits)])


def describe_exit(code):
    if code is None:
        return "running"
    if code < 0:
        return "signal %d%s" % (-code, " (SIGKILL: killed, or the OOM killer)" if code == -9 else "")
    return "exit %d" % code


def limit_hits(cg, hits_file):
    if hits_file == "memory.events":
        return read_int(os.path.join(cg, hits_file), "max") or 0
    return read_int(os.path.join(cg, hits_file)) or 0


def oom_kills(cg):
    return read_int(os.path.join(cg, "memory.oom_control"), "oom_kill") or \
        read_int(os.path.join(cg, "memory.events"), "oom_kill") or 0


# ---- the bench's outputs -------------------------------------------------
PUT_OPS = re.compile(r"^(put|update|update-existing|update-with2i|put-unique|"
                     r"put-unique-checkrepl|alwaysget-updatewithout2i|alwaysget-updatewith2i)"
                     r"_latencies\.csv$")


def puts_done(run_dir):
    """Successful writes, over the ops that write a value."""
    total = 0
    for path in glob.glob(os.path.join(run_dir, "*_latencies.csv")):
        if not PUT_OPS.match(os.path.basename(path)):
            continue
        with open(path) as f:
            for row in csv.DictReader(f, skipinitialspace=True):
                total += int(float(row.get("n") or 0))
    return total


def summary_rows(run_dir):
    path = os.path.join(run_dir, "summary.csv")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        return [{k.strip(): v.strip() for k, v in r.items()} for r in csv.DictReader(f)]


def repl_summary(cl):
    """Two clusters: what the nodes' replication counters say at the end of
    the run (`basalt admin --json repl status` on each node): objects the
    sinks applied and their mean replication time there (now minus the
    object's last-modified time, measured on the sink node that applied
    it), and the sources' batches. This separates the servers' delay from
    the bench's polling (put_unique_checkrepl - put_unique)."""
    if cl.args.clusters != 2:
        return []
    rows = []
    for n in cl.nodes:
        if n.died_at is not None:
            continue
        r = cl.admin(n, "--json", "repl", "status", check=False, timeout=20)
        try:
            j = json.loads(r.stdout)
        except (ValueError, TypeError):
            continue
        c = j.get("counters", {})
        rows.append((n, c, j))
    if not rows:
        return ["**Replication**: no node answered `repl status`.", ""]
    out = ["**Replication** (each node's counters at the end; `basalt admin --json repl status`):", "",
           "| node | applied here | mean replication time here ms | sent | batches | mean batch | "
           "errors | requeued | waiting |",
           "|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for n, c, j in rows:
        applied = c.get("repl_received_total", 0)
        mean = j.get("replication_time_mean_ms")
        sent = c.get("repl_sent_total", 0)
        batches = c.get("repl_batches_total")
        waiting = sum(sum(s.get("queue", {}).values()) for s in j.get("sinks", []))
        out.append("| %s | %d | %s | %d | %s | %s | %d | %d | %d |" % (
            n.name, applied, "-" if mean is None else "%d" % mean, sent,
            "-" if batches is None else "%d" % batches,
            "%.1f" % (sent / batches) if batches else "-",
            c.get("repl_errors_total", 0), c.get("repl_requeued_total", 0), waiting))
    out.append("")
    return out


def write_report(cl, sampler, run_dir, bench_rc, started):
    a = cl.args
    with open(os.path.join(run_dir, "nodes.csv"), "w") as f:
        w = csv.writer(f)
        w.writerow(["elapsed", "node", "alive", "write_bytes", "memory_mb", "peak_mb", "limit_hits"])
        w.writerows(sampler.rows)
    with open(os.path.join(run_dir, "engine.csv"), "w") as f:
        w = csv.writer(f)
        w.writerow(["elapsed", "node"] + ENGINE_COUNTERS)
        w.writerows(sampler.engine_rows)
    _, _, _, peak_file, hits_file = a.cgroup_files
    put_n = puts_done(run_dir)
    value_bytes = put_n * a.value_bytes * a.n_val
    written = sum(n.io_bytes - (n.io_base or 0) for n in cl.nodes)
    out = ["## Cluster", ""]
    out.append("- %d cluster%s of %d nodes (%s), ring %d, backend %s, sync %s, n_val %d; each node "
               "in its own memory cgroup, limit %s (process + page cache); the bench outside them"
               % (a.clusters, "s replicating both ways" if a.clusters == 2 else "", a.nodes,
                  ", ".join(n.name for n in cl.nodes), a.ring, a.backend,
                  "on" if a.sync else "off", a.n_val, a.limit))
    out.append("- network: %s; delay: %s" % (
        "a namespace per node on bridge %s (%s.0/24)" % (cl.bridge, cl.subnet)
        if cl.use_netns else "loopback (127.0.0.1), one namespace",
        getattr(cl, "delay_note", "none")))
    out.append("- block_cache_mb %d, value_cache_mb %d, memtable_mb %d per node"
               % (a.block_cache_mb, a.value_cache_mb, a.memtable_mb))
    out.append("")
    out.append("| node | exit | peak MiB | limit hits | OOM kills | MB written | CPU s |")
    out.append("|---|---|---:|---:|---:|---:|---:|")
    for n in cl.nodes:
        st = describe_exit(n.exit) if n.died_at is not None else "ran to the end"
        if n.died_at is not None:
            st = "died at %.0f s: %s" % (n.died_at, st)
        out.append("| %s | %s | %d | %d | %d | %.1f | %.0f |" % (
            n.name, st, (read_int(os.path.join(n.cgroup, peak_file)) or 0) // MIB,
            limit_hits(n.cgroup, hits_file), oom_kills(n.cgroup),
            (n.io_bytes - (n.io_base or 0)) / 1e6, n.cpu - (n.cpu_base or 0)))
    out.append("")
    nodes_cpu = sum(n.cpu - (n.cpu_base or 0) for n in cl.nodes)
    have = getattr(cl, "bench_secs", 0) * (os.cpu_count() or 1)
    if have > 0:
        bench_cpu = getattr(cl, "bench_cpu", 0.0)
        out.append("**CPU** (user + system, from the bench's start): the nodes %.0f s, the bench "
                   "%.0f s, together %.0f %% of the %.0f CPU seconds this machine's %d vCPUs had "
                   "in the run." % (nodes_cpu, bench_cpu, 100.0 * (nodes_cpu + bench_cpu) / have,
                                    have, os.cpu_count() or 1))
        out.append("")
    if value_bytes:
        out.append("**Node-level write amplification** %.2f: %.1f MB written by the nodes' processes "
                   "(/proc/PID/io write_bytes, from the bench's start) / (%d successful writes x "
                   "%d value bytes x n_val %d = %.1f MB)." % (
                       written / value_bytes, written / 1e6, put_n, a.value_bytes, a.n_val,
                       value_bytes / 1e6))
    else:
        out.append("**Node-level write amplification**: no successful writes.")
    out.append("")
    out += getattr(cl, "repl_lines", [])
    if sampler.events:
        out.append("Events: " + "; ".join(sampler.events) + ".")
        out.append("")
    rows = summary_rows(run_dir)
    alive = {}
    for r in sampler.rows:
        alive.setdefault(r[0], 0)
        alive[r[0]] += r[2]
    failed = sum(int(float(r.get("failed", 0) or 0)) for r in rows)
    out.append("Errors and nodes alive per interval (%d failed ops in all; bench exit %d):" % (
        failed, bench_rc))
    out.append("")
    out.append("| elapsed s | ops/s | failed | nodes alive |")
    out.append("|---:|---:|---:|---:|")
    shown = 0
    for r in rows:
        el = int(float(r["elapsed"]))
        win = float(r.get("window") or 10) or 10
        ok = float(r.get("successful") or 0)
        fl = int(float(r.get("failed") or 0))
        nearest = min(alive, key=lambda e: abs(e - el)) if alive else None
        on = alive.get(nearest, len(cl.nodes)) if nearest is not None else len(cl.nodes)
        if len(rows) <= 40 or fl or on < len(cl.nodes):
            out.append("| %d | %.0f | %d | %d |" % (el, ok / win, fl, on))
            shown += 1
    if shown < len(rows):
        out.append("")
        out.append("(%d intervals without errors and with every node up are not shown; "
                   "summary.csv has them all.)" % (len(rows) - shown))
    out.append("")
    with open(os.path.join(run_dir, "cluster.md"), "w") as f:
        f.write("\n".join(out))
    return "\n".join(out)


def bench_override(cl, path):
    a = cl.args
    active = [n for n in cl.nodes if n.cluster == 0]
    with open(path, "w") as f:
        f.write("%% seed-cluster.py: the nodes' addresses\n")
        f.write("{riakc_pb_ips, [%s]}.\n" % ", ".join(
            '{"%s", %d}' % (n.ip, n.pb) for n in active))
        if a.clusters == 2:
            passive = [n for n in cl.nodes if n.cluster == 1]
            f.write("{pb_ips, [%s]}.\n" % ", ".join('{"%s", %d}' % (n.ip, n.pb) for n in active))
            f.write("{replpb_ips, [%s]}.\n" % ", ".join(
                '{"%s", %d}' % (n.ip, n.pb) for n in passive))


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--basalt", required=True)
    p.add_argument("--nodes", type=int, default=3)
    p.add_argument("--clusters", type=int, choices=[1, 2], default=1)
    p.add_argument("--backend", default="leveled")
    p.add_argument("--limit", default="768M", help="memory limit per node (process + page cache)")
    p.add_argument("--ring", type=int, default=64)
    p.add_argument("--sync", action="store_true", help="nodes fsync every write")
    p.add_argument("--block-cache-mb", type=int, default=128)
    p.add_argument("--value-cache-mb", type=int, default=0)
    p.add_argument("--memtable-mb", type=int, default=128,
                   help="memtable_mb of each node (leveled's memtables, all vnodes together)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="a top-level node setting added to each node's config, as TOML "
                   "(e.g. writes_in_request_task=false); repeatable")
    p.add_argument("--precommit", help='a pre-commit hook on bucket test, JSON, e.g. '
                   '\'{"name":"validate"}\' (the JavaScript check) or '
                   '\'{"mod":"basalt_hooks","fun":"max_object_size"}\'')
    p.add_argument("--js-vms", type=int, default=16, help="hook_js_vm_count of each node")
    p.add_argument("--netns", action="store_true", help="a network namespace per node")
    p.add_argument("--delay-ms", type=float, default=0.0, help="tc netem delay per node link")
    p.add_argument("--value-bytes", type=int, default=8000, help="mean value size, for WA")
    p.add_argument("--n-val", type=int, default=3)
    p.add_argument("--kill-node", type=float, default=None, metavar="SECS",
                   help="kill -9 the last node of the (first) cluster SECS into the bench")
    p.add_argument("--start-timeout", type=int, default=120)
    p.add_argument("--work", help="nodes' data and logs (default /tmp/seedcluster-<pid>)")
    p.add_argument("-d", dest="results", required=True)
    p.add_argument("-n", dest="name", required=True)
    p.add_argument("configs", nargs="+")
    a = p.parse_args()
    cl = Cluster(a)
    try:
        if a.nodes < 1 or a.nodes > 16:
            raise Refused("--nodes must be 1..16, not %d" % a.nodes)
        if not os.access(a.basalt, os.X_OK):
            raise Refused("no basalt binary at %s" % a.basalt)
        for c in a.configs:
            if not os.path.isfile(c):
                raise Refused("no bench config %s" % c)
        a.limit_bytes = parse_size(a.limit)
        need, how = node_need(a.backend, a.ring, a.nodes, a.block_cache_mb, a.value_cache_mb,
                              a.memtable_mb if a.backend == "leveled" else 0,
                              a.value_bytes if a.clusters == 2 else 0)
        if a.limit_bytes < need:
            raise Refused("memory limit %s a node is below the %d MiB a %s node of %d on ring %d "
                          "needs before any page cache (%s); raise --limit (-m) or use more "
                          "nodes or a smaller ring" % (a.limit, need // MIB, a.backend, a.nodes,
                                                       a.ring, how))
        a.cgroup_files = cgroup_base()
        version, base, limit_file, peak_file, hits_file = a.cgroup_files
        a.own_work = not a.work
        a.work = a.work or "/tmp/seedcluster-%d" % os.getpid()
        os.makedirs(a.work, exist_ok=True)
    except Refused as e:
        log("refused: %s" % e)
        return 2

    def on_signal(sig, _frame):
        log("signal %d: stopping the nodes" % sig)
        cl.cleanup()
        os._exit(128 + sig)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    atexit.register(cl.cleanup)
    try:
        cl.plan()
        if cl.use_netns:
            cl.make_network()
        cl.make_cgroups(base, limit_file)
        log("starting %d node%s (%s, limit %s each, need %d MiB: %s)" % (
            len(cl.nodes), "s" if len(cl.nodes) > 1 else "", a.backend, a.limit, need // MIB, how))
        cl.start_nodes()
        cl.wait_up()
        cl.join()
        cl.wait_pb()
        if a.precommit:
            cl.set_hook()
    except Refused as e:
        log("refused: %s" % e)
        cl.cleanup()
        return 2
    except (subprocess.CalledProcessError, OSError, subprocess.TimeoutExpired, ValueError) as e:
        detail = getattr(e, "stderr", "") or ""
        log("could not set up the cluster: %s %s" % (e, detail.strip()))
        cl.cleanup()
        return 2

    override = os.path.join(a.work, "nodes.config")
    bench_override(cl, override)
    for n in cl.nodes:
        n.io_base = read_int("/proc/%d/io" % n.proc.pid, "write_bytes:") or 0
        n.io_bytes = n.io_base
        n.cpu_base = read_cpu_secs(n.proc.pid) or 0.0
        n.cpu = n.cpu_base
    usage = "memory.usage_in_bytes" if version == "v1" else "memory.current"
    sampler = Sampler(cl, (usage, peak_file, hits_file), 10, a.kill_node)
    started = time.time()
    sampler.start()
    cmd = [a.basalt, "bench"] + a.configs + [override, "-q", "-d", a.results, "-n", a.name]
    log("bench: " + " ".join(cmd))
    cl.bench = subprocess.Popen(cmd)
    # The bench's own CPU: wait4 on its pid (RUSAGE_CHILDREN would also
    # count every node that died and was reaped meanwhile).
    while True:
        try:
            _, status, ru = os.wait4(cl.bench.pid, 0)
            break
        except InterruptedError:
            continue
    rc = os.WEXITSTATUS(status) if os.WIFEXITED(status) else -os.WTERMSIG(status)
    cl.bench.returncode = rc
    cl.bench_cpu = ru.ru_utime + ru.ru_stime
    cl.bench_secs = time.time() - started
    sampler.stop.set()
    sampler.join()
    for n in cl.nodes:
        sampler.sample(n)
    cl.repl_lines = repl_summary(cl)
    run_dir = os.path.join(a.results, a.name)
    if os.path.isdir(run_dir):
        print(write_report(cl, sampler, run_dir, rc, started))
    else:
        log("the bench wrote no results (exit %d)" % rc)
    cl.cleanup()
    return rc


if __name__ == "__main__":
    sys.exit(main())
