#!/usr/bin/env python3
"""Journal compaction write amplification under basho_bench's pareto keys: a model.

The journal appends every PUT; the garbage trigger compacts runs of adjacent
closed files while the closed files hold more than a limit of garbage, and
each run copies the live records it finds into one new file. How much it
copies per PUT depends on the key distribution (how long a record stays
live) and on the limit (how old a file gets before it is compacted). This
model replays that loop record by record, without values or I/O, so a
policy or a limit can be judged over tens of millions of PUTs in minutes
instead of a 30-minute benchmark per point.

What it models, and how it differs from the engine:
- keys: `{pareto_int, N}` as basho_bench draws them (Lomax, shape 1.5,
  mean 0.2 N); every PUT is one fixed-size record, every record of a key
  but the newest is garbage;
- files of `--file-records` records (8 KB values in 256 MiB files: 32768);
- the trigger checks every `--check-every` PUTs and compacts while the
  closed files' garbage is over `--limit` percent (exact counts: the engine
  samples, so it runs slightly later);
- run choice: `leveled` = the engine's `CompactionPolicy::best_run` (target
  25 % live for one file rising to 75 % for four, best target − mean live);
  `minlive` = the eligible run with the least live share; `costbenefit` =
  LFS's (1 − u) × age / (1 + u) among the eligible runs;
- `punch` (not in the engine): instead of copying, free in place the
  filesystem blocks that only garbage records cover (`fallocate` with
  `FALLOC_FL_PUNCH_HOLE`), the file with the most newly dead records
  first; the closed files' size is then their allocated blocks
  (`--record-bytes`, `--block-bytes`), and a file whose live share is
  under `--copy-under` percent is copied as a one-file run instead, so
  the number of files stays bounded;
- not modelled: the ledger's own writes, TTL, deletes, pacing.

Output: records copied per PUT (journal WA ≈ 1 + this, plus the ledger's
share) and the journal's size over its live records (space amplification).

    python3 scripts/journal-wa-sim.py --puts 15000000 --limit 60 --policy leveled minlive
    python3 scripts/journal-wa-sim.py --puts 8000000 --limit 60 --policy punch --copy-under 5
"""

import argparse
import random


def pareto_keys(rnd, max_key):
    """basho_bench's pareto_int: Lomax with shape 1.5 and mean 0.2 max_key."""
    scale = 0.2 * max_key * 0.5
    while True:
        u = 1.0 - rnd.random()
        yield int((u ** (-1 / 1.5) - 1) * scale)


def target(length, max_run=4, single=25.0, maxrun_pct=75.0):
    """The engine's live-percentage target of a run of `length` files."""
    if length <= 1:
        return single
    return single + (maxrun_pct - single) * (length - 1) / (max_run - 1)


def best_run(order, files, members, now, policy, max_run=4):
    """(start, length) of the run to compact, or None."""
    live = [100.0 * len(members[f]) / max(1, files[f][0]) for f in order]
    best = None
    for s in range(len(order)):
        for n in range(1, min(max_run, len(order) - s) + 1):
            mean = sum(live[s:s + n]) / n
            if mean >= target(n, max_run):
                continue
            if policy == "leveled":
                value = target(n, max_run) - mean
            elif policy == "minlive":
                value = -mean + 1e-6 * n
            else:
                age = now - max(files[f][1] for f in order[s:s + n])
                u = mean / 100.0
                value = (1 - u) * age / (1 + u)
            if best is None or value > best[2]:
                best = (s, n, value)
    return best and best[:2]


def simulate(puts, max_key, file_records, limit, policy, check_every, seed):
    rnd = random.Random(seed)
    where = {}     # key -> file holding its newest record
    files = {}     # file -> [records, born (PUT index)]
    members = {}   # file -> keys whose newest record it holds
    order = []     # closed files, oldest first
    next_file = 1
    active = 0
    files[active], members[active] = [0, 0], set()
    copied = 0
    keys = pareto_keys(rnd, max_key)
    for i in range(puts):
        k = next(keys)
        old = where.get(k)
        if old is not None:
            members[old].discard(k)
        where[k] = active
        files[active][0] += 1
        members[active].add(k)
        if files[active][0] >= file_records:
            order.append(active)
            active, next_file = next_file, next_file + 1
            files[active], members[active] = [0, i], set()
        if i % check_every or not order:
            continue
        while len(order) >= 2:
            total = sum(files[f][0] for f in order)
            live = sum(len(members[f]) for f in order)
            if 100.0 * (total - live) / total <= limit:
                break
            run = best_run(order, files, members, i, policy)
            if run is None:
                break
            s, n = run
            out = next_file
            next_file += 1
            inputs = order[s:s + n]
            files[out] = [0, min(files[f][1] for f in inputs)]
            members[out] = set()
            for f in inputs:
                for key in members[f]:
                    where[key] = out
                members[out] |= members[f]
                files[out][0] += len(members[f])
                copied += len(members[f])
                del members[f], files[f]
            order[s:s + n] = [out]
    total = sum(files[f][0] for f in order) + files[active][0]
    return copied / puts, total / len(where), len(where)


class Blocks:
    """Allocated blocks of journal files whose records are `rb` bytes each,
    after a 16-byte header, in blocks of `bb` bytes."""

    def __init__(self, rb, bb):
        self.rb, self.bb = rb, bb

    def total(self, records):
        return -(-(16 + records * self.rb) // self.bb)

    def freeable(self, dead):
        """Blocks no live record touches, given each record's dead flag."""
        rb, bb = self.rb, self.bb
        free, i, n = 0, 0, len(dead)
        while i < n:
            if not dead[i]:
                i += 1
                continue
            j = i
            while j < n and dead[j]:
                j += 1
            lo = 16 + i * rb
            hi = 16 + j * rb if j < n else max(16 + j * rb, self.total(n) * bb)
            free += max(0, hi // bb - (-(-lo // bb)))
            i = j
        return free


def simulate_punch(puts, max_key, file_records, limit, check_every, seed, blocks, copy_under):
    """Like `simulate`, reclaiming by punching holes; returns (copied per PUT,
    allocated bytes over live bytes, live keys, closed files at the end)."""
    rnd = random.Random(seed)
    where = {}      # key -> (file, position) of its newest record
    recs = {}       # file -> list of keys by position (None once dead)
    live = {}       # file -> live records
    punched = {}    # file -> blocks freed
    newly = {}      # file -> records dead since its last punch
    closed = set()
    order, active, next_file = [], 0, 1
    sums = {"alloc": 0, "live": 0}  # over the closed files

    def new_file(f):
        recs[f], live[f], punched[f], newly[f] = [], 0, 0, 0

    def alloc(f):
        return blocks.total(len(recs[f])) - punched[f]

    def kill(k):
        old = where.get(k)
        if old is not None:
            f, pos = old
            recs[f][pos] = None
            live[f] -= 1
            newly[f] += 1
            if f in closed:
                sums["live"] -= 1

    def add(f, k):
        where[k] = (f, len(recs[f]))
        recs[f].append(k)
        live[f] += 1

    def close(f):
        closed.add(f)
        sums["alloc"] += alloc(f)
        sums["live"] += live[f]

    def forget(f):
        closed.discard(f)
        sums["alloc"] -= alloc(f)
        sums["live"] -= live[f]
        del recs[f], live[f], punched[f], newly[f]

    copied = 0
    new_file(active)
    keys = pareto_keys(rnd, max_key)
    for i in range(puts):
        k = next(keys)
        kill(k)
        add(active, k)
        if len(recs[active]) >= file_records:
            close(active)
            order.append(active)
            active, next_file = next_file, next_file + 1
            new_file(active)
        if i % check_every or not order:
            continue
        for _ in range(len(order)):
            phys = sums["alloc"] * blocks.bb
            if 100.0 * (phys - sums["live"] * blocks.rb) / phys <= limit:
                break
            f = max(order, key=lambda g: newly[g])
            if newly[f] == 0:
                break
            if 100.0 * live[f] / len(recs[f]) < copy_under:
                out, next_file = next_file, next_file + 1
                new_file(out)
                for k2 in recs[f]:
                    if k2 is not None:
                        add(out, k2)
                copied += live[out]
                order[order.index(f)] = out
                forget(f)
                close(out)
            else:
                before = punched[f]
                punched[f] = blocks.freeable([x is None for x in recs[f]])
                sums["alloc"] -= punched[f] - before
                newly[f] = 0
    phys = (sums["alloc"] + alloc(active)) * blocks.bb
    return copied / puts, phys / (len(where) * blocks.rb), len(where), len(order)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--puts", type=int, default=15_000_000)
    p.add_argument("--keys", type=int, default=2_000_000, help="pareto_int's N")
    p.add_argument("--file-records", type=int, default=32768)
    p.add_argument("--limit", type=float, nargs="+", default=[60.0], help="garbage %%")
    p.add_argument("--policy", nargs="+", default=["leveled"],
                   choices=["leveled", "minlive", "costbenefit", "punch"])
    p.add_argument("--record-bytes", type=int, default=8100, help="punch: bytes a record")
    p.add_argument("--block-bytes", type=int, default=4096, help="punch: filesystem block")
    p.add_argument("--copy-under", type=float, default=5.0,
                   help="punch: copy a file under this live %% instead")
    p.add_argument("--check-every", type=int, default=20000, help="PUTs between checks")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    for limit in a.limit:
        for policy in a.policy:
            if policy == "punch":
                copies, space, live, files = simulate_punch(
                    a.puts, a.keys, a.file_records, limit, a.check_every, a.seed,
                    Blocks(a.record_bytes, a.block_bytes), a.copy_under)
                print("puts {} limit {:.0f} % policy punch (copy under {:.0f} %): copied per "
                      "PUT {:.3f}, space amplification {:.2f}, live keys {}, closed files {}"
                      .format(a.puts, limit, a.copy_under, copies, space, live, files),
                      flush=True)
                continue
            copies, space, live = simulate(a.puts, a.keys, a.file_records, limit,
                                           policy, a.check_every, a.seed)
            print("puts {} limit {:.0f} % policy {}: copied per PUT {:.3f}, "
                  "space amplification {:.2f}, live keys {}".format(
                      a.puts, limit, policy, copies, space, live), flush=True)


if __name__ == "__main__":
    main()
