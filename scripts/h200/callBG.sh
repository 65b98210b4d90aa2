#!/usr/bin/env bash
# Device call BG (session 14), after call BF. Over call BA (8 rounds) and call BF (10 rounds), both
# on an H100, 128-byte L2 promotion of the tensor maps was at or above the adopted 256 B at 512^3
# and 1024^3 (bf16 1024^3: 1.018 vs 1.014, 1.016 vs 1.007). Before adopting it everywhere, this
# call compares the two at issue 4's larger bf16/f16 shapes and 2048^3: three alternating rounds
# of the suite, the adopted build ($B/rtx-bench) against the experiment build with
# RTX_EXP_L2P=128 ($B/exp/rtx-bench, docs/runs/2026-12-05/callBF/exp.patch).
# Build: cargo xtask gpu-bundle --out .devrun --tests none
#        cargo xtask gpu-bundle --out .devrun/exp --tests none --patch docs/runs/2026-12-05/callBF/exp.patch --at 9423671
# Run: B=$PWD/.devrun bash scripts/h200/callBG.sh (about 5 minutes; timeout_s 480). N=2 runs two rounds.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBG.tgz . ; }
cat $B/BUILD $B/exp/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
S="--no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes 2048x2048x2048,4096x4096x4096,8192x8192x8192,4000x4000x4096,64x8192x8192,256x8192x8192,4096x4096x1000"
for i in $(seq 1 ${N:-3}); do
  timeout 110 $B/rtx-bench --out $R/b $S > $R/l_base_$i.log 2>&1; echo "base_$i rc=$?"
  RTX_EXP_L2P=128 timeout 110 $B/exp/rtx-bench --out $R/b $S > $R/l_p128_$i.log 2>&1; echo "p128_$i rc=$?"
  pack
done
python3 - "$R" <<'PY'
import re, glob, os, sys, statistics as st
res = {}
for f in glob.glob(os.path.join(sys.argv[1], "l_*.log")):
    arm = os.path.basename(f).split("_")[1]
    for l in open(f):
        m = re.match(r"\| rtx-wgmma-default (\w+) (\S+) \| ([\d.]+) (us|ms) .*?\| ([\d.]+)x\*", l)
        if m: res.setdefault((m.group(2), m.group(1), arm), []).append(float(m.group(5)))
for k in sorted(res):
    print(*k, "n=%d mean %.3f (%s)" % (len(res[k]), st.mean(res[k]), " ".join("%.2f" % x for x in res[k])))
PY
date -u +"end %T" >> $R/smi.txt
rm -rf $R/b; pack
