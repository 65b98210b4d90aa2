#!/usr/bin/env bash
# Call CS's measurement (run through `callCS.sh`, which runs call BY before it on an H200): does
# guided tuning lift bf16/f16 at 128 and 160 x 8192^2 above cuBLAS, where the default config sits
# at 0.99-1.00 (session 25's BY on an H100)? Issue 4 asks >= 100% at M = 64..256 x 8192^2 where
# tuning beats cuBLAS's heuristics. (1) `rtx-tune` at each shape and dtype, 40 s budget, compiles
# included, the winner stored in the bundle's tuning database; (2) 2 rounds of the GEMM suite at
# both shapes, serving the winners (rtx-tuned-wgmma rows) beside the default rows, cuBLAS
# alternating with each row.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callCS.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
for s in 128x8192x8192 160x8192x8192; do
  for d in bf16 f16; do
    timeout 55 $B/rtx-tune gemm $s --dtype $d --layout nn --time-budget-s 40 > $R/tune_${s}_$d.log 2>&1
    echo "tune $s $d rc=$?"; grep -E "winner|rtx / cuBLAS|took" $R/tune_${s}_$d.log | cut -c1-200 | head -3
    pack
  done
done
for i in 1 2; do
  timeout 90 $B/rtx-bench --out $R/b --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes 128x8192x8192,160x8192x8192 > $R/s_$i.log 2>&1
  echo "round $i rc=$?"; grep -E '^\| (rtx-wgmma-default|rtx-tuned-wgmma|cublas) ' $R/s_$i.log | awk -F'|' '{print $2, $3, $6}'
  pack
done
rm -rf $R/b
finish
