#!/usr/bin/env python3
"""pick_arm.py R BASE ARM...: after call DC's A/B/C rounds (logs R/s_<arm>_<i>.log), print the
arm whose wgmma default beat the base arm's in every round at bf16 and f16, 128 and 160 x 8192^2
(cuBLAS ratio of the same process, the median over rounds); the one with the highest lowest
ratio, or nothing. Writes the table it decided on to R/pick.txt."""
import glob
import re
import statistics
import sys

r, base, arms = sys.argv[1], sys.argv[2], sys.argv[3:]
cells = [(d, m) for d in ("bf16", "f16") for m in ("128x8192x8192", "160x8192x8192")]
row = re.compile(r"^\| rtx-wgmma-default (\w+) (\S+) \|[^|]*\|[^|]*\|[^|]*\| ([0-9.]+)x")


def ratios(arm):
    got = {c: [] for c in cells}
    for f in sorted(glob.glob(f"{r}/s_{arm}_*.log")):
        for line in open(f, errors="replace"):
            m = row.match(line)
            if m and (m[1], m[2]) in got:
                got[(m[1], m[2])].append(float(m[3]))
    return {c: (statistics.median(v) if v else None) for c, v in got.items()}


table = {a: ratios(a) for a in [base] + arms}
with open(f"{r}/pick.txt", "w") as out:
    for a, t in table.items():
        out.write(a + " " + " ".join(f"{d}/{m.split('x')[0]}={t[(d, m)]}" for d, m in cells) + "\n")
best = None
for a in arms:
    t, b = table[a], table[base]
    if all(t[c] is not None and b[c] is not None and t[c] > b[c] for c in cells):
        low = min(t.values())
        if best is None or low > best[1]:
            best = (a, low)
if best:
    print(best[0])
