#!/usr/bin/env bash
# Device call BF (session 14), after call BE. Call BE (an H100) timed each 1024^3 kernel inside
# the suite with Nsight's cache control off: in the L2 state the suite's 256 MiB flush memset
# leaves, ours ran 7.58 us (bf16) against nvjet's 7.49, while after Nsight's own flush ours ran
# 7.36 against 7.58. Ours reads 9% more L2 sectors (723 K against 662 K). Two cheap levers on the
# L2 side, in an experiment build (docs/runs/2026-12-05/callBF/exp.patch):
#   RTX_EXP_L2P=128   the tensor maps' L2 promotion 128 B instead of 256 B;
#   RTX_EXP_EF=first  the A/B TMA loads carry an L2::evict_first policy (createpolicy);
#   RTX_EXP_EF=last   the same with evict_last.
# (1) N alternating rounds (default 10) of the suite at 512^3 and 1024^3 bf16+f16, four arms;
# (2) in-suite Nsight durations at 1024^3 bf16 (cache control off) of every arm and of nvjet.
# Build: cargo xtask gpu-bundle --out .devrun --tests none
#        cargo xtask gpu-bundle --out .devrun/exp --tests none --patch docs/runs/2026-12-05/callBF/exp.patch --at 9423671
# Run: B=$PWD/.devrun bash scripts/h200/callBF.sh (about 5 minutes; timeout_s 480).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBF.tgz . ; }
cat $B/BUILD $B/exp/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
arm() { case $1 in base) X=$B; E=RTX_EXP_NONE=1 ;; p128) X=$B/exp; E=RTX_EXP_L2P=128 ;; efirst) X=$B/exp; E=RTX_EXP_EF=first ;; elast) X=$B/exp; E=RTX_EXP_EF=last ;; esac; }
S="--no-progress --suite gemm --gemm-shapes 512x512x512,1024x1024x1024 --gemm-dtypes bf16,f16"
for i in $(seq 1 ${N:-10}); do
  for v in base p128 efirst elast; do
    arm $v
    env $E timeout 60 $X/rtx-bench --out $R/b $S > $R/s_${v}_$i.log 2>&1
    echo "${v}_$i rc=$? $(row $R/s_${v}_$i.log)"
  done
  pack
done
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null | head -1)
S1="--no-progress --suite gemm --gemm-shapes 1024x1024x1024 --gemm-dtypes bf16"
for v in base p128 efirst elast nvjet; do
  if [ $v = nvjet ]; then arm base; k=nvjet; else arm $v; k=rtx_wgmma; fi
  env $E timeout 90 $NCU --cache-control none --clock-control none -k "regex:^$k" --launch-count 60 \
    --metrics gpu__time_duration.sum --csv --page raw $X/rtx-bench --out $R/n $S1 > $R/ncu_dirty_$v.csv 2> $R/ncu_dirty_$v.err
  echo "ncu dirty $v rc=$?"
done
python3 - "$R" <<'PY'
import csv, sys, statistics, glob, os
for f in sorted(glob.glob(os.path.join(sys.argv[1], "ncu_dirty_*.csv"))):
    rows = [x for x in csv.DictReader(l for l in open(f) if l.startswith('"')) if x.get("ID")]
    v = [float(x["gpu__time_duration.sum"].replace(",", "")) for x in rows]
    if v: print(os.path.basename(f), len(v), "median %.3f us, last 40 %.3f us" % (statistics.median(v) / 1e3, statistics.median(v[20:]) / 1e3))
PY
date -u +"end %T" >> $R/smi.txt
rm -rf $R/b $R/n; pack
