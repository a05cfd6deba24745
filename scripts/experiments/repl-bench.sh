#!/usr/bin/env bash
# Replication between two clusters on this machine (issue 14 item 7, seed
# 003 scaled): clusters A and B of 3 `basalt start` nodes each (ring 16,
# leveled, no sync) on 127.0.0.1, replicating both ways (A's sink `to_b`
# -> B, B's sink `to_a` -> A; full-sync repairs bi-directional through
# the peer's queue, checks only on demand). Fresh clusters per mode:
#
#   delay   seed 003's config (crates/bench/tests/data/seed_003_riak291.config)
#           verbatim but for addresses, duration, workers, the per-worker
#           alwaysget key set (1000 / 500: reached within the run) and the
#           mix: its put_unique share (150 of 1000) split evenly between
#           put_unique and put_unique_checkrepl (PUT to A, GET polled on B).
#           Load on A's 3 nodes. Prints the bench's replication delay
#           (mean, median; absolute and %), Avg TPS, B's replication time.
#   insync  loads KEYS small objects on A (real-time replication carries
#           them to B), waits for every queue to drain and every tree to
#           be built, then times `repl fullsync all` from A's nodes in turn.
#   repair  suspends A's sink, writes DELTAS new keys on A, clears A's
#           queues (so only a full-sync can repair them), resumes; then a
#           live load on A runs a baseline period, and full-sync checks from
#           A's first node (after each, waiting until no full-sync repair is
#           queued) until one reports in sync; counts the deltas on B and
#           compares the live load's TPS and latency during the repair with
#           the baseline.
#
#   scripts/experiments/repl-bench.sh [-s SECS] [-w WORKERS] [-k KEYS] [-v BYTES]
#       [-R RATE] [-c CHECKS] [-n DELTAS] [-K KIND] [-x MAX_RESULTS] [-l WORKERS]
#       [-r RATE] [-b SECS] [-T SECS] [-m LIMIT] [-d DIR] [MODE...]
#
#   -s  delay: seconds of load (default 300)   -w  delay: workers (12)
#   -R  delay: ops/s per worker, or max (max, as the seed)
#   -k  insync: keys (1000000)                 -v  insync/repair: value bytes (200)
#   -c  insync: full-sync checks timed (6)     -n  repair: deltas (100000)
#   -K  repair: check kind, all|day|hour|range|auto (range; see below)
#   -x  [repl.fullsync] max_results on both clusters (default 32, the server's)
#   -l  repair: live load workers (4)          -r  repair: live load ops/s per
#       worker, or max (max)
#   -b  repair: baseline seconds before the first check (60)
#   -T  repair: give up after this many seconds of checks (1800)
#   -m  hold the 6 nodes in one memory cgroup with this limit (process +
#       page cache); default: a cgroup without a limit, for the peak only
#   -d  where data and results go (default /var/tmp/basalt-repl-<time>)
#   MODE... default: delay insync repair
#   BASALT=path/to/basalt uses that binary (default: a release build).
#   KEEP=1 keeps the nodes' data directories.
#
# The repair check kind: `auto` from a fresh node starts with `all` checks,
# each comparing at most max_results segments; a `range` check over the
# last day (the deltas are minutes old) compares max_results x range_boost.
# Without root or a cgroup memory controller the nodes run outside one.
set -euo pipefail
cd "$(dirname "$0")/../.."

secs=300; workers=12; keys=1000000; vbytes=200; checks=6; deltas=100000
kind=range; max_results=32; live_workers=4; rate=max; base_secs=60
max_repair=1800; limit=""; root=""; delay_rate=max
while getopts "s:w:R:k:v:c:n:K:x:l:r:b:T:m:d:h" o; do
  case $o in
    s) secs=$OPTARG ;; w) workers=$OPTARG ;; R) delay_rate=$OPTARG ;; k) keys=$OPTARG ;;
    v) vbytes=$OPTARG ;; c) checks=$OPTARG ;; n) deltas=$OPTARG ;;
    K) kind=$OPTARG ;; x) max_results=$OPTARG ;; l) live_workers=$OPTARG ;;
    r) rate=$OPTARG ;; b) base_secs=$OPTARG ;; T) max_repair=$OPTARG ;;
    m) limit=$OPTARG ;; d) root=$OPTARG ;;
    *) sed -n '2,50p' "$0" | sed 's/^# \{0,1\}//'; exit 2 ;;
  esac
done
shift $((OPTIND - 1))
modes=("$@"); [ ${#modes[@]} -eq 0 ] && modes=(delay insync repair)
for m in "${modes[@]}"; do
  case $m in delay | insync | repair) ;; *) echo "unknown mode $m (delay | insync | repair)" >&2; exit 2 ;; esac
done
case $kind in all | day | hour | range | auto) ;; *) echo "-K: all, day, hour, range or auto" >&2; exit 2 ;; esac
root=${root:-/var/tmp/basalt-repl-$(date -u +%Y%m%d_%H%M%S)}
mkdir -p "$root"
root=$(cd "$root" && pwd)

if [ -n "${BASALT:-}" ]; then B=$BASALT; else
  cargo build --release -q -p basalt-cli
  B="${CARGO_TARGET_DIR:-$PWD/target}/release/basalt"
fi
seed_config="$PWD/crates/bench/tests/data/seed_003_riak291.config"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo "?")

# Addresses: A's nodes 1-3, B's nodes 4-6.
pb() { echo "127.0.0.1:$(($1 <= 3 ? 28480 + $1 : 28580 + $1 - 3))"; }
cl() { echo "127.0.0.1:$(($1 <= 3 ? 28490 + $1 : 28590 + $1 - 3))"; }
A=(1 2 3); BN=(4 5 6); ALL=(1 2 3 4 5 6)
for i in "${ALL[@]}"; do
  for a in "$(pb "$i")" "$(cl "$i")"; do
    if (exec 3<>"/dev/tcp/${a%:*}/${a#*:}") 2>/dev/null; then
      echo "port ${a#*:} is in use: another run?" >&2; exit 1
    fi
  done
done

# The memory cgroup (v1 or v2) holding the nodes, if we may make one.
cg=""; cgnote="not used (no root or no memory controller)"
if [ -f /sys/fs/cgroup/cgroup.controllers ]; then
  cgbase=/sys/fs/cgroup; limit_file=memory.max; peak_file=memory.peak
else
  cgbase=/sys/fs/cgroup/memory; limit_file=memory.limit_in_bytes; peak_file=memory.max_usage_in_bytes
fi
use_cg=0
if [ "$(id -u)" = 0 ] && [ -w "$cgbase" ] && [ -e "$cgbase/cgroup.procs" ]; then use_cg=1; fi
if [ -n "$limit" ] && [ $use_cg = 0 ]; then echo "-m needs root and a memory cgroup" >&2; exit 2; fi

pids=(); bench_pid=""
stop_nodes() {
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  pids=()
  if [ -n "$cg" ]; then rmdir "$cg" 2>/dev/null || true; cg=""; fi
}
cleanup() {
  if [ -n "$bench_pid" ]; then kill "$bench_pid" 2>/dev/null || true; fi
  stop_nodes
}
trap cleanup EXIT

adm() { "$B" admin --node "$(cl "$1")" "${@:2}"; }
# A `name: value` line of a node's `repl status`.
stat_of() { adm "$1" repl status 2>/dev/null | sed -n "s/^$2: \([0-9]*\).*/\1/p" | head -1; }
sum_stat() { # NAME NODE...
  local name=$1 total=0 v; shift
  for i in "$@"; do v=$(stat_of "$i" "$name"); total=$((total + ${v:-0})); done
  echo "$total"
}
# Full-sync repairs still queued (priority 2) over all six nodes.
fs_pending() {
  local total=0 v
  for i in "${ALL[@]}"; do
    v=$(adm "$i" repl status 2>/dev/null | sed -nE 's/.*queue: real-time [0-9]+, full-sync ([0-9]+),.*/\1/p' | paste -sd+ | bc)
    total=$((total + ${v:-0}))
  done
  echo "$total"
}
wait_drained() { # TIMEOUT_SECS; every queue of every node empty
  local until=$((SECONDS + $1)) i ok
  while :; do
    ok=1
    for i in "${ALL[@]}"; do [ "$(stat_of "$i" waiting)" = 0 ] || { ok=0; break; }; done
    [ $ok = 1 ] && return 0
    [ $SECONDS -ge $until ] && { echo "queues not drained after $1 s" >&2; return 1; }
    sleep 1
  done
}
trees_built() { # every vnode of every node has its trees
  local i line
  for i in "${ALL[@]}"; do
    line=$(adm "$i" aae status | sed -n 's/^vnodes with trees built: //p')
    [ -n "$line" ] && [ "${line% of *}" = "${line#* of }" ] || return 1
  done
}
# Live objects of BUCKET on the cluster of NODE (an aae_fold over the
# cluster: object-stats of the bucket).
count_keys() {
  adm "$1" aae fold object-stats --bucket "$2" | sed -nE 's/^total_count\t([0-9]+)$/\1/p' | head -1
}
now() { date +%s.%N; }
secs_since() { echo "$(now) - $1" | bc; }
median() { sort -g | awk '{v[NR]=$1} END {if (NR == 0) print "?"; else if (NR % 2) print v[(NR+1)/2]; else printf "%.3f\n", (v[NR/2]+v[NR/2+1])/2}'; }
# A section ("## TITLE" to the next) of a report.md.
section() { awk -v h="## $2" '/^## / {p = ($0 == h)} p' "$1"; }
# A number of a report.md's throughput table.
report_num() { sed -nE "s/^\| \**$2\** \| \**([0-9.]+)\** \|$/\1/p" "$1" | head -1; }

repl_config() { # SINK PEER_QUEUE OTHER_NODES...
  local sink=$1 back=$2 peers="" i; shift 2
  for i in "$@"; do peers="$peers${peers:+, }\"$(cl "$i")\""; done
  cat <<EOF
[repl]

[[repl.sink]]
name = "$sink"
peers = [$peers]
filter = "any"

[repl.fullsync]
sink = "$sink"
peer_queue = "$back"
auto_check = 0
max_results = $max_results
EOF
}

start_clusters() { # DIR
  local dir=$1 i conf name
  repl_config to_b to_a "${BN[@]}" > "$dir/a.toml"
  repl_config to_a to_b "${A[@]}" > "$dir/b.toml"
  if [ $use_cg = 1 ]; then
    cg="$cgbase/basalt-repl-$$"
    mkdir -p "$cg"
    if [ -n "$limit" ]; then
      numfmt --from=iec "$limit" > "$cg/$limit_file"
      cgnote="one memory cgroup, limit $limit ($(basename "$cgbase" | sed 's/^cgroup$/v2/;s/^memory$/v1/'))"
    else
      cgnote="one memory cgroup without a limit (peak accounting only)"
    fi
  fi
  pids=()
  for i in "${ALL[@]}"; do
    if [ "$i" -le 3 ]; then conf=a.toml; name="a$i"; else conf=b.toml; name="b$((i - 3))"; fi
    if [ -n "$cg" ]; then
      sh -c 'echo $$ > "$1/cgroup.procs"; shift; exec "$@"' _ "$cg" \
        "$B" start --config "$dir/$conf" --node-name "$name@127.0.0.1" \
        --data-dir "$dir/$name" --backend leveled --ring-size 16 \
        --pb-listen "$(pb "$i")" --cluster-listen "$(cl "$i")" \
        --http-listen "" 2>"$dir/$name.log" &
    else
      "$B" start --config "$dir/$conf" --node-name "$name@127.0.0.1" \
        --data-dir "$dir/$name" --backend leveled --ring-size 16 \
        --pb-listen "$(pb "$i")" --cluster-listen "$(cl "$i")" \
        --http-listen "" 2>"$dir/$name.log" &
    fi
    pids+=($!)
  done
  for i in "${ALL[@]}"; do
    for _ in $(seq 300); do adm "$i" member-status >/dev/null 2>&1 && break; sleep 0.1; done
  done
  for first in 1 4; do
    adm $((first + 1)) cluster join "$(cl $first)" >/dev/null
    adm $((first + 2)) cluster join "$(cl $first)" >/dev/null
    adm $first cluster plan >/dev/null
    adm $first cluster commit >/dev/null
  done
  for first in 1 4; do
    until adm $first ring-status | grep -q "pending ownership transfers: 0"; do sleep 0.5; done
  done
}

peak_mem() { if [ -n "$cg" ]; then echo "$(($(cat "$cg/$peak_file") / 1048576)) MiB"; else echo "-"; fi; }

finish_mode() { # DIR
  local dir=$1 i
  for i in "${ALL[@]}"; do adm "$i" repl status > "$dir/repl-status-$i.txt" 2>&1 || true; done
  stop_nodes
  if [ -z "${KEEP:-}" ]; then rm -rf "$dir"/a[123] "$dir"/b[123]; fi
}

pb_list() { # NODE... -> [{"127.0.0.1", P}, ...]
  local out="" i a
  for i in "$@"; do a=$(pb "$i"); out="$out${out:+, }{\"${a%:*}\", ${a#*:}}"; done
  echo "[$out]"
}

# Writes N keys 0..N-1 (text) of VBYTES-byte values to BUCKET through A's
# nodes, 8 workers at max rate; the bench's results under DIR/NAME.
load_keys() { # DIR NAME BUCKET N
  cat > "$1/$2.config" <<EOF
{mode, max}.
{duration, infinity}.
{report_interval, 10}.
{concurrent, 8}.
{driver, basho_bench_driver_riakc_pb}.
{riakc_pb_ips, $(pb_list "${A[@]}")}.
{riakc_pb_replies, 2}.
{riakc_pb_bucket, <<"$3">>}.
{key_generator, {int_to_str, {partitioned_sequential_int, $4}}}.
{value_generator, {fixed_bin, $vbytes}}.
{operations, [{put, 1}]}.
EOF
  "$B" bench "$1/$2.config" -d "$1/bench" -n "$2" -q > "$1/$2.log" 2>&1
}

# ---------------------------------------------------------------- delay
run_delay() {
  local dir="$root/delay"
  mkdir -p "$dir"
  start_clusters "$dir"
  cat > "$dir/override.config" <<EOF
%% seed_003_riak291.config with: addresses, duration, workers, the
%% per-worker alwaysget key set scaled so alwaysget_pb runs within minutes,
%% and put_unique's share split evenly with put_unique_checkrepl.
{pb_ips, $(pb_list "${A[@]}")}.
{replpb_ips, $(pb_list "${BN[@]}")}.
{http_ips, []}.
{concurrent, $workers}.
{mode, $(if [ "$delay_rate" = max ]; then echo max; else echo "{rate, $delay_rate}"; fi)}.
{basalt_duration_secs, $secs}.
{key_generator, {eightytwenty_int, 1000000}}.
{alwaysget, {1000, 500, key_order}}.
{basalt_checkrepl_timeout, 10000}.
{operations, [{alwaysget_pb, 460}, {alwaysget_updatewithout2i, 200},
              {put_unique, 75}, {put_unique_checkrepl, 75}, {get_unique, 190}]}.
EOF
  "$B" bench "$seed_config" "$dir/override.config" -d "$dir/bench" -n run > "$dir/bench.log" 2>&1 || true
  local report="$dir/bench/run/report.md"
  wait_drained 600 || true
  local tps put check lt1s lt1m lt1h more sum count mean sent disc errs
  tps=$(report_num "$report" "Avg TPS")
  put=$(grep -m1 "replication delay: put_unique_checkrepl mean" "$report" | sed 's/^- //')
  check=$(grep -m1 "replication delay: put_unique_checkrepl median" "$report" | sed 's/^- //')
  lt1s=$(sum_stat "time lt 1s" "${BN[@]}"); lt1m=$(sum_stat "time lt 1m" "${BN[@]}")
  lt1h=$(sum_stat "time lt 1h" "${BN[@]}")
  more=$(( $(sum_stat "time lt 1d" "${BN[@]}") + $(sum_stat "time over 1d" "${BN[@]}") ))
  sum=$(sum_stat "time ms sum" "${BN[@]}"); count=$((lt1s + lt1m + lt1h + more))
  mean=$( [ "$count" -gt 0 ] && echo "scale=2; $sum / $count" | bc || echo "-")
  sent=$(sum_stat sent "${A[@]}"); disc=$(sum_stat discarded "${A[@]}"); errs=$(sum_stat errors "${A[@]}")
  local peak; peak=$(peak_mem)
  { section "$report" "Replication delay"; section "$report" "Latency (ms)"; } > "$dir/delay.md"
  {
    echo "### delay: seed 003's mix, put_unique 75 : put_unique_checkrepl 75, $workers workers on A at $delay_rate, $secs s"
    echo
    echo "- ${put:-replication delay (mean): not in the report, see $dir/bench.log}"
    echo "- ${check:-replication delay (median): not in the report}"
    echo
    echo "| Avg TPS | applied on B | B: mean repl time | < 1 s | < 1 min | < 1 h | more | A: sent | discarded | batch errors | peak memory |"
    echo "|---|---|---|---|---|---|---|---|---|---|---|"
    echo "| ${tps:-?} | $count | $mean ms | $lt1s | $lt1m | $lt1h | $more | $sent | $disc | $errs | $peak |"
    echo
    cat "$dir/delay.md"
  } | tee -a "$root/summary.md"
  finish_mode "$dir"
}

# --------------------------------------------------------------- insync
run_insync() {
  local dir="$root/insync"
  mkdir -p "$dir"
  start_clusters "$dir"
  local t0 load_s drain_s tree_s onb
  t0=$(now)
  load_keys "$dir" load insync "$keys"
  load_s=$(secs_since "$t0")
  t0=$(now)
  wait_drained 3600
  drain_s=$(secs_since "$t0")
  t0=$(now)
  local until=$((SECONDS + 1800))
  until trees_built; do [ $SECONDS -lt $until ] || { echo "trees not built" >&2; break; }; sleep 2; done
  tree_s=$(secs_since "$t0")
  onb=$(count_keys 4 insync)
  local i node out t server wall results=()
  : > "$dir/checks.txt"
  for i in $(seq 1 "$checks"); do
    node=${A[$(((i - 1) % 3))]}
    t=$(now)
    out=$(adm "$node" repl fullsync all 2>&1) || true
    wall=$(secs_since "$t")
    server=$(echo "$out" | sed -nE 's/.*: (not )?in sync in ([0-9.]+) s.*/\2/p')
    echo "check $i from a$node: wall ${wall} s: $out" | tee -a "$dir/checks.txt"
    results+=("${server:-?} $wall $(echo "$out" | grep -q ': in sync in' && echo yes || echo no)")
  done
  local med_server med_wall in_sync peak
  med_server=$(printf '%s\n' "${results[@]}" | awk '{print $1}' | median)
  med_wall=$(printf '%s\n' "${results[@]}" | awk '{print $2}' | median)
  in_sync=$(printf '%s\n' "${results[@]}" | grep -c ' yes$' || true)
  peak=$(peak_mem)
  {
    echo "### insync: $keys keys of $vbytes B loaded on A, replicated to B, then $checks \`repl fullsync all\` from A's nodes in turn"
    echo
    echo "| keys on B | load s (PUT/s) | drain after load s | trees built after s | checks in sync | server's check s, median | admin wall s, median | peak memory |"
    echo "|---|---|---|---|---|---|---|---|"
    printf '| %s | %.1f (%s) | %.1f | %.1f | %s of %s | %s | %.3f | %s |\n' "${onb:-?}" "$load_s" \
      "$(report_num "$dir/bench/load/report.md" "Avg TPS")" "$drain_s" "$tree_s" "$in_sync" "$checks" "$med_server" "$med_wall" "$peak"
    echo
    echo "| check | server s | wall s | in sync |"
    echo "|---|---|---|---|"
    for i in "${!results[@]}"; do
      read -r server wall t <<< "${results[$i]}"
      printf '| %d | %s | %.3f | %s |\n' $((i + 1)) "$server" "$wall" "$t"
    done
    echo
  } | tee -a "$root/summary.md"
  finish_mode "$dir"
}

# --------------------------------------------------------------- repair
# TPS, mean p99 and max latency (ms) of the live load's rows (10 s
# intervals) whose middle lies within [FROM, TO] seconds of its start.
window_figures() { # BENCHDIR FROM TO
  local d=$1 from=$2 to=$3 f
  awk -F', *' -v a="$from" -v b="$to" 'NR > 1 && NF >= 5 && $1 - $2 / 2 >= a && $1 - $2 / 2 <= b {ok += $4; w += $2}
    END {if (w > 0) printf "%.1f", ok / w; else printf "?"}' "$d/summary.csv"
  for f in "$d/get_latencies.csv" "$d/update_latencies.csv"; do
    [ -f "$f" ] || continue
    awk -F', *' -v a="$from" -v b="$to" 'NR > 1 && NF >= 11 && $1 - $2 / 2 >= a && $1 - $2 / 2 <= b {n += $3; p += $3 * $8; if ($10 > m) m = $10}
      END {if (n > 0) printf " %.2f %.1f", p / n / 1000, m / 1000; else printf " ? ?"}' "$f"
  done
  echo
}

run_repair() {
  local dir="$root/repair"
  mkdir -p "$dir"
  start_clusters "$dir"
  local i dropped=0 v
  for i in "${A[@]}"; do adm "$i" repl sink suspend to_b >/dev/null; done
  local t0 load_s
  t0=$(now)
  load_keys "$dir" deltas deltas "$deltas"
  load_s=$(secs_since "$t0")
  for i in "${A[@]}"; do
    v=$(adm "$i" repl clear-queue to_b | sed -nE 's/.*: ([0-9]+) entries dropped.*/\1/p')
    dropped=$((dropped + ${v:-0}))
  done
  for i in "${A[@]}"; do adm "$i" repl sink resume to_b >/dev/null; done
  wait_drained 600 || true
  local before; before=$(count_keys 4 deltas)
  # The live load: 5 GET : 1 UPDATE of 1 KB objects over pareto keys.
  local mode="max"; [ "$rate" = max ] || mode="{rate, $rate}"
  cat > "$dir/live.config" <<EOF
{mode, $mode}.
{report_interval, 10}.
{concurrent, $live_workers}.
{driver, basho_bench_driver_riakc_pb}.
{riakc_pb_ips, $(pb_list "${A[@]}")}.
{riakc_pb_replies, 2}.
{riakc_pb_bucket, <<"live">>}.
{key_generator, {int_to_str, {pareto_int, 100000}}}.
{value_generator, {fixed_bin, 1000}}.
{operations, [{get, 5}, {update, 1}]}.
{basalt_duration_secs, $((base_secs + max_repair + 60))}.
EOF
  local tb; tb=$(now)
  "$B" bench "$dir/live.config" -d "$dir/bench" -n live -q > "$dir/live.log" 2>&1 &
  bench_pid=$!
  sleep "$base_secs"
  local r0 r1 n=0 out in_sync=no queued=0 checked_s=0 t until=$((SECONDS + max_repair))
  r0=$(secs_since "$tb")
  : > "$dir/checks.txt"
  while [ $SECONDS -lt $until ]; do
    n=$((n + 1))
    t=$(now)
    out=$(adm 1 repl fullsync "$kind" 2>&1) || true
    checked_s=$(echo "$checked_s + $(secs_since "$t")" | bc)
    echo "check $n at $(secs_since "$tb") s: $out" >> "$dir/checks.txt"
    v=$(echo "$out" | sed -nE 's/.*; ([0-9]+) queued for the sink.*/\1/p')
    queued=$((queued + ${v:-0}))
    if echo "$out" | grep -q ': in sync in'; then in_sync=yes; break; fi
    local wait_until=$((SECONDS + 300))
    while [ "$(fs_pending)" != 0 ] && [ $SECONDS -lt $wait_until ]; do sleep 0.5; done
  done
  r1=$(secs_since "$tb")
  local after; after=$(count_keys 4 deltas)
  sleep 12 # one more full interval of the live load after the repair
  kill "$bench_pid" 2>/dev/null || true
  wait "$bench_pid" 2>/dev/null || true
  bench_pid=""
  local bd="$dir/bench/live"
  "$B" bench report "$bd" > /dev/null 2>&1 || true
  local base rep took
  base=$(window_figures "$bd" 10 "$(echo "$r0" | cut -d. -f1)")
  rep=$(window_figures "$bd" "$(echo "$r0" | cut -d. -f1)" "$(echo "$r1" | cut -d. -f1)")
  took=$(echo "$r1 - $r0" | bc)
  local bt bgp bgm bup bum rt rgp rgm rup rum peak
  read -r bt bgp bgm bup bum <<< "$base"
  read -r rt rgp rgm rup rum <<< "$rep"
  peak=$(peak_mem)
  {
    echo "### repair: $deltas deltas of $vbytes B on A only; \`repl fullsync $kind\` from a1 until in sync (max_results $max_results); live load $live_workers workers at $rate (5 GET : 1 UPDATE, 1 KB) on A"
    echo
    echo "| deltas written s | dropped from A's queues | deltas on B before / after | checks | in sync | time to close s (in checks s) | repairs/s | queued by checks | peak memory |"
    echo "|---|---|---|---|---|---|---|---|---|"
    printf '| %.1f | %s | %s / %s | %s | %s | %.1f (%.1f) | %s | %s | %s |\n' "$load_s" "$dropped" "${before:-?}" "${after:-?}" \
      "$n" "$in_sync" "$took" "$checked_s" "$(echo "scale=0; (${after:-0} - ${before:-0}) / $took" | bc)" "$queued" "$peak"
    echo
    echo "| live load | TPS | get p99 ms (mean of 10 s rows) | get max ms | update p99 ms | update max ms |"
    echo "|---|---|---|---|---|---|"
    echo "| baseline (10-$(echo "$r0" | cut -d. -f1) s) | $bt | $bgp | $bgm | $bup | $bum |"
    echo "| during repair ($(echo "$r0" | cut -d. -f1)-$(echo "$r1" | cut -d. -f1) s) | $rt | $rgp | $rgm | $rup | $rum |"
    echo "| ratio | $(echo "scale=3; $rt / $bt" | bc 2>/dev/null || echo "?") | | | | |"
    echo
  } | tee -a "$root/summary.md"
  finish_mode "$dir"
}

{
  echo "repl-bench: $(date -u +%FT%TZ), commit $commit, $("$B" --version 2>/dev/null || echo basalt), 2 clusters x 3 nodes, ring 16, leveled, both ways, max_results $max_results"
  echo "machine: $(nproc) CPUs, load average $(cut -d' ' -f1-3 /proc/loadavg)"
  echo
} | tee "$root/summary.md"
for m in "${modes[@]}"; do
  "run_$m"
  echo "memory cgroup: $cgnote" | tee -a "$root/summary.md"
  echo | tee -a "$root/summary.md"
done
echo "results in $root/summary.md"
