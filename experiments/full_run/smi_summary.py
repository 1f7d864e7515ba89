"""One line per set of eager_neighbours.py: eager's median with the SM clock, power and temperature nvidia-smi sampled
while it ran.   python experiments/full_run/smi_summary.py OUT"""
import json,os,sys,datetime as dt, statistics as st
out=sys.argv[1]; rows=json.load(open(out+'/eager_neighbours.json'))['rows']
smi=[l.split(', ') for l in open(out+'/smi.csv') if l.strip()]
def ts(s): return dt.datetime.strptime(s.strip(),'%Y/%m/%d %H:%M:%S.%f').timestamp()
for r in rows:
    sel=[s for s in smi if r['start']<=ts(s[0])<=r['end']]
    if sel:
        clk=[float(s[1].split()[0]) for s in sel]; pw=[float(s[2].split()[0]) for s in sel]; tp=[float(s[3]) for s in sel]
        print(f"{r['set']:<34} {r['run']} eager {r['eager_ms']:.4f} ms; n={len(sel)} clock {min(clk):.0f}-{max(clk):.0f} med {st.median(clk):.0f} MHz, power med {st.median(pw):.0f} W, temp {min(tp):.0f}-{max(tp):.0f} C")
