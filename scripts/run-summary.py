#!/usr/bin/env python3
# One line per bench results directory: Avg TPS and last sixth (from
# report.md), median and lowest 10 s TPS (from summary.csv, with the lowest
# five as fractions of the median), GET/UPDATE mean(max), write
# amplification, and the mean PSI "some"/"full" shares from activity.csv
# when the run has one. Used for the A/B tables in
# docs/benchmarks/ (index: docs/benchmarks/README.md).
#
#   scripts/run-summary.py RESULTS_DIR/NAME [...]
import sys,os,re
for d in sys.argv[1:]:
    n=os.path.basename(d)
    rows=[l.split(',') for l in open(d+'/summary.csv').read().split('\n')[1:] if l.strip()]
    tps=[float(r[3])/float(r[1]) for r in rows]
    s=sorted(tps); med=s[len(s)//2]
    rep=open(d+'/report.md').read()
    def g(pat):
        m=re.search(pat,rep); return m.group(1) if m else '?'
    avg=g(r'\*\*Avg TPS\*\* \| \*\*([\d.]+)'); last=g(r'last sixth of the run \| ([\d.]+)')
    get=g(r'\| get \|[^\n]*\*\*([\d.]+)\*\*'); upd=g(r'\| update \|[^\n]*\*\*([\d.]+)\*\*')
    gmax=re.search(r'\| get \|(?:[^|]*\|){8}\s*([\d.]+)',rep); 
    wa=g(r'\*\*write amplification\*\* \| \*\*([\d.]+)')
    psi=''
    if os.path.exists(d+'/activity.csv'):
        a=[l.split(',') for l in open(d+'/activity.csv').read().split('\n')[1:] if l.strip()]
        def mean(i): 
            v=[float(r[i])/ (float(r[1])*10) for r in a if r[i].strip()]; return sum(v)/len(v) if v else float('nan')
        psi=' PSI%% cpu %.0f mem %.0f/%.0f io %.0f/%.0f' % tuple(mean(i) for i in range(2,7))
    print("%s avg %s last6 %s median %.0f min %.0f (%.2f) low5 %s | GET mm %s UPD mm %s | WA %s%s" % (n,avg,last,med,min(tps),min(tps)/med,[round(x/med,2) for x in s[:5]],get,upd,wa,psi))
