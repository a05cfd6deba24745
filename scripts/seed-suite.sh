#!/usr/bin/env bash
# The seed suite: the leveled volume tests of seeds 004 (and 003's NHS mix)
# scaled to this machine and held beyond the page cache with
# `basalt bench --memory-limit`. For each test, each backend runs back to
# back with the same config (examples/seed-suite/<test>.config plus an
# override for duration, key space, backend); then `basalt bench compare`
# writes the seed's table (Avg TPS, delta overall, delta last sixth,
# mean(max) per op; leveled is the baseline) and the throughput charts
# against time and accumulated operations, and everything is gathered in
# <results>/summary.md and, with every run's report.html and each test's
# compare.html linked and charted, <results>/index.html (`basalt bench
# index`).
#
#   scripts/seed-suite.sh [--short | --long] [-d RESULTS] [-m LIMIT] [--redo] [TEST...]
#   scripts/seed-suite.sh --cluster [N] [--netns] [--delay MS] [--set KEY=VALUE] [--bench TERM] [--short | --long] [...] [TEST...]
#
#   --short  (default) 1 min per backend per test, pareto/80:20 keys over
#            200,000, memory limit 512M: a smoke of every test (~20 min).
#   --long   30 min per backend per test, keys over 2,000,000, limit 1.5G
#            (~8.5 h for all tests; 1 or 1.5 h per test).
#   -m       memory limit (process + page cache), e.g. 1G.
#   -k       key space (default 200,000 short, 2,000,000 long), e.g. for a
#            disk too small for a long 16 KB test.
#   -t SECS  seconds per backend per test instead of the mode's.
#   -d       results directory (default tests/seed-suite-<mode>-<UTC time>).
#   --redo   runs a test again even if RESULTS already holds its result.
#   TEST     any of: 8kb_sync 8kb_nosync 4kb_nosync 16kb_nosync 8kb_2i
#            8kb_journal_compaction bitcask_compare nhs_mix (default: all).
#   --cluster [N]  the seeds' cluster tests against live clusters of N nodes
#            (default 3), each node in a memory cgroup of its own (-m is
#            then per node, default 768M — leveled's 1 KB nodes were
#            OOM-killed at 512M once the block cache filled; 1G for nhs_mix,
#            whose nodes also hold replication batches),
#            driven over PB from outside
#            the cgroups by scripts/seed-cluster.py; tests: 8kb_sync
#            8kb_nosync 8kb_2i nhs_mix (two clusters replicating both
#            ways) testpilot_1k testpilot_10k testpilot_25k testpilot_50k
#            testpilot_hooks_10k testpilot_hooks_50k. --short 60 s, keys
#            over 200,000; --long 1 h per backend, keys over 2,000,000.
#            Each run's section adds the nodes, node-level write
#            amplification and errors / nodes alive per interval.
#   --netns  (cluster) a network namespace per node on a bridge;
#   --delay MS  with it, a tc netem delay on each node's link (skipped,
#            with a message, where netem or namespaces are not available).
#   --kill-node SECS  (cluster) kill -9 one node SECS into every run.
#   --set KEY=VALUE  (cluster, repeatable) a line of every node's config,
#            e.g. --set journal_file_spread_pct=0 for an A/B of a
#            setting with one build; each section names the settings.
#   --bench TERM  (cluster, repeatable) a line of every run's bench
#            config, after the test's own, e.g. --bench '{mode, {rate, 55}}'
#            (55 ops/s a worker: a rate-matched run); each section names them.
#   BACKENDS="leveled rocksdb"   overrides the backends of every test.
#   HOOKS="none builtin js8 js16"   overrides the hook studies' variants
#            (none; builtin: the Erlang-named max_object_size; jsN: the
#            JavaScript `validate` hook on N VMs).
#   BASALT=path/to/basalt        uses that binary (default: a release build).
#
# A pass can be split: tests already done in RESULTS (their section.md
# exists) are skipped, and summary.md is rebuilt after every test from all
# the tests done so far, in the suite's order, each with when, how and on
# which build it ran; the tests still missing are listed. So the long pass
# can run a test or two at a time into one directory.
#
# Needs root and a memory cgroup controller (see docs/bench.md "Memory
# limit"). Any failed run stops the suite with its exit code and the
# command that failed. Before it starts, the suite checks the free disk
# space in RESULTS against a rough need of each test (keys x mean value
# size x 2.5: the live data, the journal's garbage before compaction
# reclaims it, RocksDB's space amplification) and refuses with the figures
# if a test would not fit (a long 16 KB test wrote 37 GB in its first 7
# minutes; the NHS mix's values average 28 KB, and a long run over 2M keys
# filled 63 GB before it was stopped). The NHS mix on two clusters is
# judged by its duration instead (~110 MB/s over six nodes: an hour needs
# ~390 GB).
set -euo pipefail
# The body is one `{ ... exit; }` group: bash reads all of it before it
# runs any, so an edit of this file during a long run no longer breaks the
# run's last steps (it did on 2026-12-05, "unexpected EOF" at the end).
{
cd "$(dirname "$0")/.."

mode=short
redo=0
cluster=0
netns_args=()
kill_args=()
set_args=()
bench_terms=()
limit=""
keys_arg=""
results=""
tests=()
while [ $# -gt 0 ]; do
  case $1 in
    --short) mode=short ;;
    --long) mode=long ;;
    -m) limit=${2:?-m needs a size}; limit_arg=1; shift ;;
    -k) keys_arg=${2:?-k needs a number of keys}; shift ;;
    -t) secs_arg=${2:?-t needs seconds}; shift ;;
    -d) results=${2:?-d needs a directory}; shift ;;
    --redo) redo=1 ;;
    --cluster)
      cluster=3
      case ${2:-} in '' | *[!0-9]*) ;; *) cluster=$2; shift ;; esac
      [ "$cluster" -ge 1 ] || { echo "seed-suite: --cluster needs at least 1 node" >&2; exit 2; } ;;
    --netns) netns_args+=(--netns) ;;
    --delay) netns_args+=(--delay-ms "${2:?--delay needs milliseconds}"); shift ;;
    --kill-node) kill_args=(--kill-node "${2:?--kill-node needs seconds}"); shift ;;
    --set) set_args+=(--set "${2:?--set needs KEY=VALUE}"); shift ;;
    --bench) bench_terms+=("${2:?--bench needs an Erlang term, e.g. '{mode, {rate, 55}}'}"); shift ;;
    -h | --help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "seed-suite: unknown option $1 (see --help)" >&2; exit 2 ;;
    *) tests+=("$1") ;;
  esac
  shift
done

case $mode in
  short) secs=60; keys=200000; : "${limit:=512M}"; compactions=2880 ;;
  long) secs=1800; keys=2000000; : "${limit:=1.5G}"; compactions=240 ;;
esac
if [ "$cluster" -gt 0 ]; then
  [ "$mode" = long ] && secs=3600
  [ -n "${limit_arg:-}" ] || limit=768M
fi
if [ -n "${secs_arg:-}" ]; then
  case $secs_arg in
    '' | *[!0-9]* | 0) echo "seed-suite: -t needs a positive number of seconds, not $secs_arg" >&2; exit 2 ;;
  esac
  secs=$secs_arg
fi
if [ -n "$keys_arg" ]; then
  case $keys_arg in
    '' | *[!0-9]* | 0) echo "seed-suite: -k needs a positive number of keys, not $keys_arg" >&2; exit 2 ;;
  esac
  keys=$keys_arg
fi
all=(8kb_sync 8kb_nosync 4kb_nosync 16kb_nosync 8kb_2i 8kb_journal_compaction bitcask_compare nhs_mix)
if [ "$cluster" -gt 0 ]; then
  all=(8kb_sync 8kb_nosync 8kb_2i nhs_mix testpilot_1k testpilot_10k testpilot_25k testpilot_50k
    testpilot_hooks_10k testpilot_hooks_50k)
fi
[ ${#tests[@]} -eq 0 ] && tests=("${all[@]}")
kind=$mode; [ "$cluster" -gt 0 ] && kind=cluster$cluster-$mode
results=${results:-tests/seed-suite-$kind-$(date -u +%Y%m%d_%H%M%S)}

if [ -n "${BASALT:-}" ]; then
  basalt=$BASALT
else
  cargo build --release -q -p basalt-cli
  basalt="${CARGO_TARGET_DIR:-target}/release/basalt"
fi
[ -x "$basalt" ] || { echo "seed-suite: no basalt binary at $basalt" >&2; exit 2; }

config_of() { # test -> base config
  if [ "$cluster" -gt 0 ]; then
    case $1 in
      testpilot_*) echo examples/seed-suite/cluster/testpilot.config ;;
      *) echo "examples/seed-suite/cluster/$1.config" ;;
    esac
    return
  fi
  case $1 in
    bitcask_compare) echo examples/seed-suite/16kb_nosync.config ;;
    *) echo "examples/seed-suite/$1.config" ;;
  esac
}
backends_of() { # test -> backends (leveled first: the baseline)
  # The hook studies compare hooks on leveled nodes, not backends.
  case $1 in testpilot_hooks_*) echo "${HOOKS:-none builtin js16}"; return ;; esac
  if [ -n "${BACKENDS:-}" ]; then echo "$BACKENDS"; return; fi
  # nhs_mix's put_unique writes 2i terms, which bitcask refuses (as
  # Riak's bitcask does): on live nodes it runs leveled and rocksdb.
  case $1 in
    nhs_mix) [ "$cluster" -gt 0 ] && { echo "leveled rocksdb"; return; } ;;
    testpilot_*) [ "$cluster" -gt 0 ] && { echo "leveled rocksdb bitcask"; return; } ;;
  esac
  case $1 in
    bitcask_compare) echo "leveled bitcask rocksdb" ;;
    nhs_mix) echo "leveled rocksdb bitcask" ;;
    *) echo "leveled rocksdb" ;;
  esac
}
seed_says() { # test -> what the seed reported (leveled vs leveldb unless said)
  if [ "$cluster" -gt 0 ]; then
    case $1 in
      8kb_sync) echo "Cluster Test 1 (seed 000; 5 nodes, ring 64, 45 workers, 50M keys, 4 h): leveled +73.9 % throughput over leveldb (+55.4 % in the last 10 min); GET mean(max) 21.7 vs 410.2 ms, PUT mean(max) 101.5 vs 2,301.6 ms. Seed 004's table (60 workers): Avg TPS 12,679.91, +70.81 % overall, +63.99 % last hour" ;;
      8kb_nosync) echo "Cluster Test 3 (seed 000; 5 nodes, 100 workers, 6 h): +12.5 % overall, +29.5 % in the last hour; GET mean(max) 250.3 vs 1,090.1 ms, PUT mean(max) 369.0 vs 1,817.3 ms. Seed 004's table: Avg TPS 14,100.19, +16.15 % overall, +35.92 % last hour" ;;
      8kb_2i) echo "Phase 4 (seed 004; 5 nodes, 80 workers, 6 h): Avg TPS 9,855.96, +4.48 % overall, +22.36 % last hour; by hour -10.90 %, -10.27 %, +18.63 %, +19.11 %, +19.84 %, +22.36 % (leveldb ahead until the data outgrew the cache); 2i query mean -57.96 %" ;;
      nhs_mix) echo "seed 003 (two 4-node clusters replicating both ways, ring 128, 100 workers, 48 h, nextgenrepl): put_unique_checkrepl - put_unique = +4.26 ms, +14.7 % of the PUT time on leveled; +3.70 ms, +5.0 % on leveldb; bitcask +14.18 ms, +16.7 %; leveled's throughput ahead of leveldb's and bitcask's against accumulated PUTs" ;;
      testpilot_1k) echo "seed 002 Study One (4-node bitcask cluster, Riak 0.11, 1 h): 1 KB inserts 5,256.2 ops/s median, latency median 2.76 ms, p99 4.42 ms, p99.9 5.69 ms" ;;
      testpilot_10k) echo "seed 002 Study One 1.f (Riak 0.11, 8 h): 10 KB inserts 4,071.4 ops/s median, latency median 3.23 ms, p99 58.45 ms, p99.9 69.62 ms (Study Two 2.a, 10 KB median exponential sizes, 1 h: 3,879.6 ops/s, p99 7.71 ms)" ;;
      testpilot_25k) echo "seed 002 Study One 1.g (Riak 0.11, 1 h): 25 KB inserts 2,583.0 ops/s median, latency median 5.55 ms, p99 10.65 ms, p99.9 70.95 ms" ;;
      testpilot_50k) echo "seed 002 Study One 1.h (Riak 0.11, 1 h): 50 KB inserts 1,392.1 ops/s median, latency median 9.80 ms, p99 28.21 ms, p99.9 28.58 ms" ;;
      testpilot_hooks_10k) echo "seed 002 Study Three, 10 KB: JavaScript pre-commit hook with 8 / 16 / 32 VMs 467 / 497.1 / 512 ops/s, p99 81.5 / 68.68 / 60.74 ms; Erlang hook (3.f) 2,052.9 ops/s, p99 12.22 ms; no hook (1.f) 4,071.4 ops/s" ;;
      testpilot_hooks_50k) echo "seed 002 Study Three, 50 KB: JavaScript pre-commit hook with 16 VMs 127.3 ops/s (1 h; 120.0 over 3 h), median 10.32 ms, p99 29.29 ms; no hook (1.h) 1,392.1 ops/s" ;;
    esac
    return
  fi
  case $1 in
    8kb_sync) echo "Avg TPS 12,679.91; delta overall +70.81 %, last hour +63.99 % (4 h, 60 workers)" ;;
    8kb_nosync) echo "Avg TPS 14,100.19; delta overall +16.15 %, last hour +35.92 % (6 h, 100 workers); PUT mean(max) 101.5 vs 2,301.6 ms" ;;
    4kb_nosync) echo "Avg TPS 14,993.95; delta overall -10.44 %, last hour -4.48 % (6 h, 100 workers)" ;;
    16kb_nosync) echo "Avg TPS 11,167.44; delta overall +80.48 %, last hour +113.55 % (6 h, 60 workers)" ;;
    8kb_2i) echo "Avg TPS 9,855.96; delta overall +4.48 %, last hour +22.36 % (6 h, 80 workers; leveldb ahead in hours 1-2)" ;;
    8kb_journal_compaction) echo "leveled/leveldb by hour 112.7 % (hour 1) rising to 144.6 % (hour 12)" ;;
    bitcask_compare) echo "16 KB: bitcask +39.13 % in hour 1, +16.48 % overall, +0.34 % in the last hour (vs leveled)" ;;
    nhs_mix) echo "leveled ~25 % above leveldb at the end (trend of throughput vs accumulated operations), 30-35 % over 24 h" ;;
  esac
}

mkdir -p "$results"
summary="$results/summary.md"
build="$(git rev-parse --short HEAD 2>/dev/null || echo '?'), binary $basalt"

# summary.md from every test done in $results, in the suite's order.
write_summary() {
  local t missing=()
  {
    echo "# Seed suite ($kind)"
    echo
    if [ "$cluster" -gt 0 ]; then
      echo "- $(nproc) CPUs, $(free -m | awk '/^Mem:/ {print $2}') MiB RAM; each run: $secs s, keys over $keys; $cluster nodes a cluster (two clusters for nhs_mix), ring 64, each node in a memory cgroup of $limit (process + page cache), the bench outside them over PB${netns_args[*]:+ (${netns_args[*]})}"
      echo "- targets (issue 56): with sync on, leveled >= 1.5x the RocksDB-backed nodes' throughput in the last sixth and GET/PUT mean(max) <= 1/3 of theirs; NHS mix replication delay <= 10 % of the PUT time; node-level WA <= 1.1. The machine's floor: scripts/cluster-floor.py"
    else
    echo "- $(nproc) CPUs, $(free -m | awk '/^Mem:/ {print $2}') MiB RAM; each run: $secs s, keys over $keys, memory limit $limit (process + page cache)"
    fi
    echo "- the first backend of each test (leveled) is the baseline: our deltas are the others against leveled,"
    echo "  the seed's are leveled against leveldb (a seed +36 % is our rocksdb row at about -26 %)"
    echo
    for t in "${all[@]}"; do
      if [ -f "$results/$t/section.md" ]; then
        cat "$results/$t/section.md"
      else
        missing+=("$t")
      fi
    done
    if [ ${#missing[@]} -gt 0 ]; then
      echo "Not run yet in this directory: ${missing[*]}."
    fi
  } >"$summary"
}

# The object size of a Test Pilot test (testpilot_10k -> 10000).
if [ ${#bench_terms[@]} -gt 0 ] && [ "$cluster" -eq 0 ]; then
  echo "seed-suite: --bench is for --cluster runs (the embedded tests take their settings from examples/seed-suite/*.config)" >&2
  exit 2
fi
size_of() { local k=${1##*_}; echo $((${k%k} * 1000)); }

run_cluster() { # test backend-or-hook dir
  local t=$1 b=$2 dir=$3 base override keygen value args=()
  base=$(config_of "$t")
  override="$dir/override-$b.config"
  value=$(mean_value_bytes "$base")
  case $t in
    nhs_mix) keygen="{eightytwenty_int, $keys}" ;;
    testpilot_*) keygen="{int_to_str, {uniform_int, $keys}}"; value=$(size_of "$t") ;;
    *) keygen="{int_to_str, {pareto_int, $keys}}" ;;
  esac
  {
    echo "%% seed-suite $mode --cluster $cluster override"
    echo "{basalt_duration_secs, $secs}."
    echo "{key_generator, $keygen}."
    case $t in testpilot_*) echo "{value_generator, {fixed_char, $value}}." ;; esac
    for term in ${bench_terms[@]+"${bench_terms[@]}"}; do echo "${term%.}."; done
    true
  } >"$override"
  case $b in
    none) args=(--backend leveled) ;;
    builtin) args=(--backend leveled --precommit '{"mod":"basalt_hooks","fun":"max_object_size"}') ;;
    js*) args=(--backend leveled --precommit '{"name":"validate"}' --js-vms "${b#js}") ;;
    *) args=(--backend "$b") ;;
  esac
  [ "$t" = 8kb_sync ] && args+=(--sync)
  [ "$t" = nhs_mix ] && args+=(--clusters 2)
  local lim=$limit
  [ "$t" = nhs_mix ] && [ -z "${limit_arg:-}" ] && lim=1G
  echo "== seed-suite $mode --cluster $cluster: $t / $b ($secs s, limit $lim a node)" >&2
  if ! python3 scripts/seed-cluster.py --basalt "$basalt" --nodes "$cluster" --limit "$lim" \
    --value-bytes "$value" "${args[@]}" ${netns_args[@]+"${netns_args[@]}"} \
    ${kill_args[@]+"${kill_args[@]}"} ${set_args[@]+"${set_args[@]}"} -d "$dir" -n "$b" "$base" "$override" >"$dir/$b.cluster.log"; then
    echo "seed-suite: FAILED: scripts/seed-cluster.py ... --backend $b -d $dir -n $b $base $override (see $dir/$b.cluster.log)" >&2
    echo "- **FAILED**: $t / $b (see $dir/$b)" >>"$summary"
    exit 1
  fi
}

run_one() { # test backend dir
  local t=$1 b=$2 dir=$3 base override keygen
  if [ "$cluster" -gt 0 ]; then run_cluster "$@"; return; fi
  base=$(config_of "$t")
  override="$dir/override-$b.config"
  case $t in
    nhs_mix) keygen="{int_to_str, {eightytwenty_int, $keys}}" ;;
    *) keygen="{int_to_str, {pareto_int, $keys}}" ;;
  esac
  {
    echo "%% seed-suite $mode override"
    echo "{basalt_backend, '$b'}."
    echo "{basalt_duration_secs, $secs}."
    echo "{key_generator, $keygen}."
    [ "$t" = 8kb_journal_compaction ] && echo "{basalt_compaction_runs_per_day, $compactions}."
    true
  } >"$override"
  echo "== seed-suite $mode: $t / $b ($secs s, limit $limit)" >&2
  if ! "$basalt" bench "$base" "$override" -q -d "$dir" -n "$b" --memory-limit "$limit"; then
    echo "seed-suite: FAILED: $basalt bench $base $override -d $dir -n $b --memory-limit $limit" >&2
    echo "- **FAILED**: $t / $b (see $dir/$b)" >>"$summary"
    exit 1
  fi
}

for t in "${tests[@]}"; do
  case " ${all[*]} " in *" $t "*) ;; *) echo "seed-suite: unknown test $t (tests: ${all[*]})" >&2; exit 2 ;; esac
done
todo=()
runs=0
for t in "${tests[@]}"; do
  if [ -f "$results/$t/section.md" ] && [ "$redo" = 0 ]; then
    echo "seed-suite: $t already done in $results (--redo runs it again)" >&2
    continue
  fi
  todo+=("$t")
  runs=$((runs + $(wc -w <<<"$(backends_of "$t")")))
done
echo "seed-suite $kind: ${#todo[@]} tests, $runs runs of $secs s: about $(( (runs * (secs + 30) + 59) / 60 )) min; $(df -h --output=avail "$results" | tail -1 | tr -d ' ') free in $results" >&2

# The mean value size of a test's value_generator, in bytes: N for
# {fixed_bin, N}; for {semi_compressible, Min, Mean, XLMult, XLProb} a
# normal value averages Min + Mean and an extra-large one XLMult times that
# (the NHS mix's {8000, 2000, 10, 0.2} averages 28,000 bytes, not 8,000).
mean_value_bytes() { # config file
  sed -n 's/.*value_generator, *{\([a-z_]*\), *\([^}]*\)}.*/\1 \2/p' "$1" | head -1 |
    awk '{ gsub(",", " "); n = split($0, f, " ") }
         f[1] == "fixed_bin" { printf "%d\n", f[2]; exit }
         f[1] == "semi_compressible" && n >= 5 { printf "%d\n", (f[2] + f[3]) * (1 + f[5] * (f[4] - 1)); exit }
         { print 8000 }'
}

# A key count to suggest: what fits, rounded down to a round number.
fewer_keys() {
  if [ "$1" -ge 100000 ]; then echo $(( $1 / 100000 * 100000 ))
  elif [ "$1" -ge 10000 ]; then echo $(( $1 / 10000 * 10000 ))
  else echo "$1"; fi
}

# Each run deletes its store before the next, so the largest test decides.
free_mb=$(df --output=avail -BM "$results" | tail -1 | tr -dc '0-9')
# Below 10 % free (twice disk_low_free_pct) a node's disk guard tightens
# compaction and then paces writes: a run that gets there measures the
# guard, not the test, so only the space above that counts.
size_mb=$(df --output=size -BM "$results" | tail -1 | tr -dc '0-9')
free_mb=$(( free_mb - size_mb / 10 ))
[ "$free_mb" -gt 0 ] || free_mb=0
copies=1
[ "$cluster" -gt 0 ] && copies=3 # n_val: every value on three nodes
for t in "${todo[@]}"; do
  value=$(mean_value_bytes "$(config_of "$t")")
  case $t in testpilot_*) value=$(size_of "$t") ;; esac
  c=$copies; [ "$t" = nhs_mix ] && [ "$cluster" -gt 0 ] && c=$((copies * 2))
  if [ "$t" = nhs_mix ] && [ "$cluster" -gt 0 ]; then
    # put_unique's keys grow with the run's time, not with -k: the two
    # clusters' six nodes wrote 32.5 GB in 300 s at ~2,000 ops/s on
    # leveled (2026-12-02-0742-nhs-mix-two-clusters-beyond-cache.md), ~110 MB/s,
    # most of it new objects that stay; what they hold grows about as fast.
    need_mb=$(( secs * 110 ))
    if [ "$need_mb" -gt "$free_mb" ]; then
      echo "seed-suite: nhs_mix on two clusters needs about $(( need_mb / 1024 )) GiB of disk for $secs s (the nodes write ~110 MB/s, mostly new objects: put_unique's keys grow with time, so -k does not bound them) and $results has $(( free_mb / 1024 )) GiB free above the nodes' disk guard (10 % of the disk): free some space or run it shorter (-t $(( free_mb / 110 / 60 * 60 )))" >&2
      exit 2
    fi
    continue
  fi
  n=$keys
  # A cluster of 3 here takes at most ~1,000 writes a second (each to
  # n_val nodes; the 5:1 mix with sync on, quiet: ~5,000 ops/s, ~850
  # writes/s): a short run of 50 KB values cannot fill 200,000 keys' worth.
  [ "$cluster" -gt 0 ] && [ $((secs * 1000)) -lt "$n" ] && n=$((secs * 1000))
  # A journal holds about 2.5x its live bytes at the garbage trigger's
  # 60 %, and up to 4x where compaction falls behind and the write
  # slowdown (75 % garbage) holds it. Test Pilot's uniform inserts write
  # every key within minutes and at 50 KB append fastest (~450 MB/s over
  # three nodes on a fast disk): 30,000 keys (4.5 GB live) held 16.5 GB,
  # 3.7x, once a memtable that never fills no longer pinned the journal
  # (2026-12-05-2200-journal-pinned-by-a-memtable-that-never-fills.md),
  # so those tests count 4x.
  factor=5; case $t in testpilot_*) factor=8 ;; esac # halves
  need_mb=$(( n * ${value:-8000} * factor / 2 * c / 1048576 ))
  if [ "$need_mb" -gt "$free_mb" ]; then
    echo "seed-suite: $t needs about $(( need_mb / 1024 )) GiB of disk ($n keys x ${value:-8000} bytes x $(( factor / 2 )).$(( factor % 2 * 5 )) x $c copies) and $results has $(( free_mb / 1024 )) GiB free above the nodes' disk guard (10 % of the disk): free some space or use fewer keys (-k $(fewer_keys $(( keys * free_mb / need_mb ))))" >&2
    exit 2
  fi
done

for t in "${todo[@]}"; do
  dir="$results/$t"
  rm -rf "$dir"
  mkdir -p "$dir"
  started=$(date -u +%Y-%m-%dT%H:%M:%SZ)
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  # The stores' file system and its mount options: online `discard` makes
  # hole punches slow, and journal compaction then copies instead (the
  # 2026-12-04 2i study); recorded so runs on different machines can be
  # told apart. Cluster nodes keep their data under /tmp (seed-cluster.py).
  fsdir=$dir
  [ "$cluster" -gt 0 ] && fsdir=/tmp
  datafs=$(findmnt -no FSTYPE,OPTIONS -T "$fsdir" 2>/dev/null | tr -s " " || true)
  datafs=${datafs:-unknown}
  dirs=()
  for b in $(backends_of "$t"); do
    run_one "$t" "$b" "$dir"
    dirs+=("$dir/$b")
  done
  "$basalt" bench compare "${dirs[@]}" -o "$dir/compare" >/dev/null
  {
    echo "## $t"
    echo
    echo "Config: \`$(config_of "$t")\`. What the seed reported: $(seed_says "$t")."
    echo
    echo "Ran $started to $(date -u +%Y-%m-%dT%H:%M:%SZ) ($kind: $secs s per run, keys over $keys, limit $([ "$t" = nhs_mix ] && [ "$cluster" -gt 0 ] && [ -z "${limit_arg:-}" ] && echo 1G || echo "$limit")$([ "$cluster" -gt 0 ] && echo " a node")), build $build, load average at the start $load, stores' file system \`$datafs\`.$([ ${#set_args[@]} -gt 0 ] && printf ' Node settings:%s.' "$(printf ' `%s`' "${set_args[@]}" | sed 's/ `--set`//g')")$([ ${#bench_terms[@]} -gt 0 ] && printf ' Bench terms:%s.' "$(printf ' `%s`' "${bench_terms[@]}")")"
    echo
    sed -n '/^| run /,/^$/p' "$dir/compare/compare.md"
    echo "![$t]($t/compare/compare.png)"
    echo
    if [ "$cluster" -gt 0 ]; then
      for b in $(backends_of "$t"); do
        echo "**$b** ($t/$b/cluster.md):"
        echo
        sed '1,2d' "$dir/$b/cluster.md"
        if [ -f "$dir/$b/report.md" ]; then
          sed -n '/^## Replication delay/,/^## /p' "$dir/$b/report.md" | sed '$d' | sed '/^## /d'
        fi
        echo
      done
    fi
  } >"$dir/section.md"
  write_summary
  "$basalt" bench index "$results" >/dev/null
done
write_summary
"$basalt" bench index "$results" >/dev/null
echo "seed-suite: summary in $summary, pages in $results/index.html" >&2
exit
}
