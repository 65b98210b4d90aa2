#!/usr/bin/env bash
# Device call BQ (session 18): call BP on the H200 put f16 1024^3's default at 0.97-1.00x. Tune
# 1024^3 on the H200 (guided, 40 s, compiles included), then six suite rounds of 1024^3 where
# the tuned winner is served beside the default, cuBLAS alternating in the same process.
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu
# Run: B=$PWD/.devrun bash scripts/h200/callBQ.sh (about 4 minutes; timeout_s 360).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBQ.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
for d in f16 bf16; do
  timeout 55 $B/rtx-tune gemm 1024x1024x1024 --dtype $d --layout nn --time-budget-s 40 > $R/tune_1024_$d.log 2>&1
  echo "tune 1024^3 $d rc=$?"; grep -E "winner|rtx / cuBLAS|took" $R/tune_1024_$d.log | cut -c1-200 | head -3
  pack
done
for i in 1 2 3 4 5 6; do
  timeout 40 $B/rtx-bench --out $R/t --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes 1024x1024x1024 > $R/tuned_$i.log 2>&1
  echo "tuned_$i rc=$? $(grep -E '^\| (rtx-wgmma-default|rtx-tuned-wgmma|cublas) ' $R/tuned_$i.log | awk -F'|' '{printf "%s %s %s;", $2,$3,$6}' | sed 's/  */ /g')"
  pack
done
rm -rf $R/t
date -u +"end %T" >> $R/smi.txt
pack
