#!/usr/bin/env python3
"""Label noise of the re-measured pairs whose first timing falls in a window of time (UTC).
   scripts/noise-window.py LOG REMEASURED FROM TO      (FROM, TO: "YYYY-mm-dd HH:MM")
Timings are the mean of each record's repeats, as cwm's (cwm_record_cost); pairs match by
workload key and steps, as `cwm dataset remeasure` matches them."""
import json, sys, statistics, datetime

def key(r):
    return r["i"][0][0] + json.dumps(r["i"][1][1])

def cost(r):
    return sum(r["r"][0]) / len(r["r"][0])

if len(sys.argv) != 5:
    sys.exit(__doc__)
utc = datetime.timezone.utc
lo, hi = (datetime.datetime.strptime(a, "%Y-%m-%d %H:%M").replace(tzinfo=utc).timestamp() for a in sys.argv[3:5])
first = {}
for n, line in enumerate(open(sys.argv[1]), 1):
    try:
        r = json.loads(line)
    except ValueError:
        print(f"{sys.argv[1]}:{n}: corrupt line skipped", file=sys.stderr)
        continue
    first[key(r)] = r
rel, ratio = [], []
for line in open(sys.argv[2]):
    r = json.loads(line)
    o = first.get(key(r))
    if not o or o["r"][1] or r["r"][1] or not lo <= o["r"][3] < hi:
        continue
    ratio.append(cost(r) / cost(o))
    rel.append(abs(ratio[-1] - 1))
if not rel:
    sys.exit("no pairs in that window")
rel.sort()
print(f"{len(rel)} pairs: median relative difference {100 * statistics.median(rel):.2f}%, "
      f"90th percentile {100 * rel[int(0.9 * (len(rel) - 1))]:.2f}%, median t2/t1 {statistics.median(ratio):.3f}")
