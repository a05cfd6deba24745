#!/bin/bash
# Cluster backup and restore speed beyond the page cache (issue 57 item 5):
# one node (ring 8, leveled) loaded by `basalt bench` (KEYS x 8 KiB, n_val 3),
# backed up and restored onto a second node, unpaced; each node and the
# admin client in its own v1 memory cgroup (NODE_MEM, CLIENT_MEM), so the
# store and the backup outgrow the page cache. B = the basalt binary.
set -euo pipefail
B=${B:-/work/target-backup/release/basalt}
W=${W:-/tmp/backupbench}
KEYS=${KEYS:-20000}
NODE_MEM=${NODE_MEM:-256M}
CLIENT_MEM=${CLIENT_MEM:-128M}
CG=/sys/fs/cgroup/memory$(awk -F: '$2=="memory"{print $3}' /proc/self/cgroup)
mkcg() { mkdir -p "$CG/$1"; echo 0 > "$CG/$1/memory.swappiness" 2>/dev/null || true; echo "$2" > "$CG/$1/memory.limit_in_bytes"; }
mkcg bb-node1 $NODE_MEM; mkcg bb-node2 $NODE_MEM; mkcg bb-client $CLIENT_MEM
port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
start() { # name dir -> pid, ports in globals
  local pb=$(port) cl=$(port)
  $B start --node-name $1@127.0.0.1 --data-dir $2 --ring-size 8 --backend leveled \
     --pb-listen 127.0.0.1:$pb --cluster-listen 127.0.0.1:$cl --http-listen "" 2> $2.log &
  local pid=$!
  echo $pid > "$CG/bb-$1/cgroup.procs"
  for i in $(seq 1 100); do $B ping --node 127.0.0.1:$cl >/dev/null 2>&1 && break; sleep 0.5; done
  eval "${1}_pid=$pid ${1}_pb=$pb ${1}_cl=$cl"
}
rm -rf $W/n1 $W/n2 $W/bk
start node1 $W/n1
cat > $W/load.config <<CFG
{mode, max}.
{duration, 30}.
{concurrent, 4}.
{driver, basho_bench_driver_riakc_pb}.
{riakc_pb_ips, [{127,0,0,1}]}.
{riakc_pb_port, $node1_pb}.
{riakc_pb_replies, 1}.
{key_generator, {int_to_str, {partitioned_sequential_int, $KEYS}}}.
{value_generator, {fixed_bin, 8192}}.
{operations, [{put, 1}]}.
CFG
t0=$(date +%s.%N)
$B bench $W/load.config --results-dir $W/load-results > $W/load.out 2>&1
t1=$(date +%s.%N)
echo "load: $KEYS keys x 8 KiB in $(echo "$t1 - $t0" | bc) s"
du -sh $W/n1
sync
bk() { sh -c 'echo $$ > "$0"/bb-client/cgroup.procs; exec "$@"' "$CG" "$@"; }
tbk() { /usr/bin/time -v sh -c 'echo $$ > "$0"/bb-client/cgroup.procs; exec "$@"' "$CG" "$@"; }
echo "== backup (unpaced)"
tbk $B admin --node 127.0.0.1:$node1_cl --json backup $W/bk --max-mbps 0 2> $W/backup.time | tee $W/backup.json
grep -E "Maximum resident|Elapsed" $W/backup.time
echo "node1 cgroup: max usage $(cat $CG/bb-node1/memory.max_usage_in_bytes) failcnt $(cat $CG/bb-node1/memory.failcnt)"
du -sh $W/bk
start node2 $W/n2
echo "== restore (unpaced)"
tbk $B admin --node 127.0.0.1:$node2_cl --json restore $W/bk --max-mbps 0 2> $W/restore.time | tee $W/restore.json
grep -E "Maximum resident|Elapsed" $W/restore.time
echo "node2 cgroup: max usage $(cat $CG/bb-node2/memory.max_usage_in_bytes) failcnt $(cat $CG/bb-node2/memory.failcnt)"
echo "client cgroup: max usage $(cat $CG/bb-client/memory.max_usage_in_bytes) failcnt $(cat $CG/bb-client/memory.failcnt)"
if [ -n "${PACED:-}" ]; then
  rm -rf $W/bk2
  echo "== backup (paced, default)"
  bk $B admin --node 127.0.0.1:$node1_cl --json backup $W/bk2 | tee $W/backup-paced.json
fi
kill $node1_pid $node2_pid; wait $node1_pid $node2_pid 2>/dev/null || true
rmdir "$CG"/bb-node1 "$CG"/bb-node2 "$CG"/bb-client 2>/dev/null || true
