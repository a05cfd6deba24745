#!/bin/bash
# Samples, once a second, the memory of every node of the seed clusters
# running now (scripts/seed-cluster.py puts each node in a memory cgroup
# basalt-seedcluster-PID/aN): the cgroup's usage, its anonymous memory
# (the process's heap: what an OOM kill counts) and page cache, and the
# node's VmRSS; and, with BASALT set, the node's replica writes in flight
# and put_replica_waits_total from `basalt admin status`.
#
#   scripts/experiments/seedcluster-memwatch.sh OUT [BASALT]
#
# Lines: `HH:MM:SS aN cur=MiB anon=MiB cache=MiB vmrss=MiB [admin fields]`.
# Runs until killed. Summary per node afterwards:
#   awk '{split($4,a,"="); if (a[2]+0>m[$2]) m[$2]=a[2]+0} END {for (k in m) print k, m[k]}' OUT
# Written for the 2026-12-05 50 KB OOM study (cgroup v1 and v2).
set -u
out=${1:?usage: seedcluster-memwatch.sh OUT [BASALT]}
basalt=${2:-}
while true; do
  for cg in /sys/fs/cgroup/memory/*/*/basalt-seedcluster-*/a[0-9] \
            /sys/fs/cgroup/memory/basalt-seedcluster-*/a[0-9] \
            /sys/fs/cgroup/*/basalt-seedcluster-*/a[0-9] \
            /sys/fs/cgroup/basalt-seedcluster-*/a[0-9]; do
    [ -d "$cg" ] || continue
    if [ -f "$cg/memory.usage_in_bytes" ]; then # v1
      cur=$(cat "$cg/memory.usage_in_bytes" 2>/dev/null)
      anon=$(awk '$1=="rss"{print $2}' "$cg/memory.stat" 2>/dev/null)
      cache=$(awk '$1=="cache"{print $2}' "$cg/memory.stat" 2>/dev/null)
      pid=$(head -1 "$cg/tasks" 2>/dev/null)
    else # v2
      cur=$(cat "$cg/memory.current" 2>/dev/null)
      anon=$(awk '$1=="anon"{print $2}' "$cg/memory.stat" 2>/dev/null)
      cache=$(awk '$1=="file"{print $2}' "$cg/memory.stat" 2>/dev/null)
      pid=$(head -1 "$cg/cgroup.procs" 2>/dev/null)
    fi
    vm=$(awk '/VmRSS/{print $2}' "/proc/${pid:-0}/status" 2>/dev/null)
    name=$(basename "$cg")
    extra=""
    if [ -n "$basalt" ]; then
      conf=$(ls /tmp/seedcluster-*/"$name".toml 2>/dev/null | head -1)
      addr=$(sed -n 's/^cluster_listen = "\(.*\)"/\1/p' "$conf" 2>/dev/null)
      [ -n "$addr" ] && extra=$(timeout 5 "$basalt" admin --node "$addr" status 2>/dev/null |
        grep -E '^(replica_write_bytes_in_flight|put_replica_waits_total) ' | tr -s ' \n' ' ')
    fi
    echo "$(date +%T) $name cur=$(( ${cur:-0} / 1048576 )) anon=$(( ${anon:-0} / 1048576 )) cache=$(( ${cache:-0} / 1048576 )) vmrss=$(( ${vm:-0} / 1024 )) $extra"
  done
  sleep 1
done >> "$out"
