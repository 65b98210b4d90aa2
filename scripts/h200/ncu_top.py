"""Top instructions of an Nsight Compute source page by warp-stall samples.

Usage: python3 ncu_top.py SOURCE.csv [N]   (the CSV of `ncu -i REP --page source --csv --print-source sass`)
Prints the N (default 30) SASS lines with the most stall samples, with their share of all samples
and every non-zero stall-reason column, so a profile can be read without the GUI.
"""
import csv, sys

path = sys.argv[1]
top = int(sys.argv[2]) if len(sys.argv) > 2 else 30
rows = list(csv.reader(open(path, newline="", errors="replace")))
hdr_i = next(i for i, r in enumerate(rows) if any("Source" == c.strip() for c in r))
hdr = rows[hdr_i]
body = [r for r in rows[hdr_i + 1:] if len(r) == len(hdr)]
src = hdr.index("Source")
samp = [i for i, c in enumerate(hdr) if "Stall Sampling (All" in c]
samp = samp[0] if samp else next(i for i, c in enumerate(hdr) if "Sampl" in c)
reasons = [i for i, c in enumerate(hdr) if c.startswith("stall_") or "Stall" in c and i != samp]

def num(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0

total = sum(num(r[samp]) for r in body) or 1.0
print(f"{path}: {len(body)} SASS lines, {total:.0f} samples ({hdr[samp]})")
for r in sorted(body, key=lambda r: -num(r[samp]))[:top]:
    extra = ", ".join(f"{hdr[i]}={r[i]}" for i in reasons if num(r[i]) > 0)[:160]
    print(f"{num(r[samp]) / total * 100:5.1f}%  {r[src].strip()[:70]:70s} {extra}")
