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
- not modelled: the ledger's own writes, TTL, deletes, pacing.

Output: records copied per PUT (journal WA ≈ 1 + this, plus the ledger's
share) and the journal's size over its live records (space amplification).

    python3 scripts/journal-wa-sim.py --puts 15000000 --limit 60 --policy leveled minlive
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


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--puts", type=int, default=15_000_000)
    p.add_argument("--keys", type=int, default=2_000_000, help="pareto_int's N")
    p.add_argument("--file-records", type=int, default=32768)
    p.add_argument("--limit", type=float, nargs="+", default=[60.0], help="garbage %%")
    p.add_argument("--policy", nargs="+", default=["leveled"],
                   choices=["leveled", "minlive", "costbenefit"])
    p.add_argument("--check-every", type=int, default=20000, help="PUTs between checks")
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    for limit in a.limit:
        for policy in a.policy:
            copies, space, live = simulate(a.puts, a.keys, a.file_records, limit,
                                           policy, a.check_every, a.seed)
            print("puts {} limit {:.0f} % policy {}: copied per PUT {:.3f}, "
                  "space amplification {:.2f}, live keys {}".format(
                      a.puts, limit, policy, copies, space, live), flush=True)


if __name__ == "__main__":
    main()
