#!/usr/bin/env python3
"""Shrinks a failing step list: finds the shortest failing prefix, then drops steps that
are not needed for the failure. usage: minimize.py WORKLOAD 'STEPLIST' [cwm binary]"""
import json, subprocess, sys, tempfile
wl, steps = sys.argv[1], json.loads(sys.argv[2])
cwm = sys.argv[3] if len(sys.argv) > 3 else "./build/cwm"
def fails(lst):
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write(json.dumps(lst, separators=(",", ":")) + "\n")
    r = subprocess.run([cwm, "measure", "--workload", wl, "--steps", f.name, "--repeats", "1",
                        "--min-repeat-ms", "1"], capture_output=True, text=True)
    if r.returncode != 0: return False  # does not replay
    return "error" in r.stdout
for k in range(1, len(steps) + 1):
    if fails(steps[:k]): steps = steps[:k]; break
else:
    print("does not fail"); sys.exit(1)
print(json.dumps(steps, separators=(",", ":")))
