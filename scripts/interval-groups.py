#!/usr/bin/env python3
# Groups a leveled bench run's 10 s intervals by the background work that ran
# in them (journal compaction C, ledger merge M, from activity.csv), skipping
# the first minute, and prints per group the mean of the interval maxima of
# the longest value read, the bench's GET max, and value read + SST block
# read. A GET max far above value read + block read in a group points at
# time inside the store that no wait timer covers. Used for
# docs/benchmarks/2026-11-28-0626-garbage-limit-second-pair.md.
#
#   scripts/interval-groups.py RESULTS_DIR/NAME [...]
import csv, statistics as st, sys
for d in sys.argv[1:]:
    w=list(csv.reader(open(d+'/waits.csv'))); h=[x.strip() for x in w[0]]
    a=list(csv.reader(open(d+'/activity.csv'))); ha=[x.strip() for x in a[0]]
    g=list(csv.reader(open(d+'/get_latencies.csv')))[1:]
    vi=h.index('journal_value_read_imax_ms'); si=h.index('sst_block_read_imax_ms')
    ci=ha.index('compaction_runs'); mi=ha.index('ledger_merges')
    groups={}
    for r,ar,gr in zip(w[1:],a[1:],g):
        if float(r[0])<60: continue
        key=('C' if float(ar[ci])>0 else '-')+('M' if float(ar[mi])>0 else '-')
        groups.setdefault(key,[]).append((float(r[vi]),float(gr[9])/1000, float(r[vi])+float(r[si])))
    print(d, ' | '.join("%s n=%d value read %.1f GET %.1f (value+block %.1f) ms"%(k,len(v),st.mean(x[0] for x in v),st.mean(x[1] for x in v),st.mean(x[2] for x in v)) for k,v in sorted(groups.items())))
