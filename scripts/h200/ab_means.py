#!/usr/bin/env python3
"""Mean rtx/cuBLAS ratio per arm, dtype and shape over the rounds of an A/B device call.

Reads DIR/s_<arm>_<round>.log (or DIR/s_<round>.log, arm "x"): the rtx-bench GEMM suite logs
of calls such as BS-BV. Two ratios per round, both from one process:
- "paired": the row's `vs cuBLAS` column, cuBLAS timed alternately with the rtx default row
  (marked `x*` in the log); the suite's own figure.
- "row": rtx default TFLOP/s over the separately timed cuBLAS row of the same log. Run READMEs
  before session 22 quote this one as "mean" (the script printed only it). The two agree within
  about 1% at 512^3-4096^3; at tf32 8192^3 on an H100 (call CI) the paired cuBLAS ran 12% slower
  than its own row, so there they differ by 0.07-0.10.
Usage: python3 scripts/h200/ab_means.py docs/runs/2026-12-06/callBU
"""
import collections
import glob
import os
import re
import statistics as st
import sys


def rows(path):
    out = {}
    for line in open(path):
        if not line.startswith("| "):
            continue
        c = [x.strip() for x in line.split("|")]
        name = c[1].split()
        if len(name) < 3 or name[0] not in ("cublas", "rtx-wgmma-default") or "TFLOP" not in c[4]:
            continue
        paired = float(c[5].rstrip("x*")) if c[5].endswith("x*") else None
        out[(name[0], name[1], name[2])] = (float(c[4].split()[0]), float(c[2].split()[0]), paired)
    return out


def main(d):
    ratio, times = collections.defaultdict(list), collections.defaultdict(list)
    paired = collections.defaultdict(list)
    for f in sorted(glob.glob(os.path.join(d, "s_*.log"))):
        m = re.match(r"s_(?:(.+)_)?(\d+)\.log", os.path.basename(f))
        arm = m.group(1) or "x"
        r = rows(f)
        for (who, dt, shape), (tf, us, pr) in r.items():
            cb = r.get(("cublas", dt, shape))
            if who == "rtx-wgmma-default" and cb:
                ratio[(arm, dt, shape)].append(tf / cb[0])
                if pr is not None:
                    paired[(arm, dt, shape)].append(pr)
                times[(arm, dt, shape)].append((us, cb[1]))
    for dt, shape in sorted({(k[1], k[2]) for k in ratio}):
        print(dt, shape)
        for arm in sorted({k[0] for k in ratio}):
            v = ratio.get((arm, dt, shape))
            if not v:
                continue
            t = times[(arm, dt, shape)]
            p = paired.get((arm, dt, shape))
            ps = f" paired={st.mean(p):.3f} ({min(p):.2f}-{max(p):.2f})" if p else " paired=-"
            print(
                f"  {arm:8s} n={len(v):2d}{ps} row mean={st.mean(v):.3f} min={min(v):.3f} max={max(v):.3f}"
                f"  median us rtx/cublas {st.median(x for x, _ in t):.2f}/{st.median(y for _, y in t):.2f}"
            )


if __name__ == "__main__":
    main(sys.argv[1])
