#!/usr/bin/env bash
# Device call BN (session 17): the short form of call BM for a lease with little device time
# left: only issue 4's unmet bar, bf16/f16 at 512^3 and 1024^3, eight rounds of the suite with
# cuBLAS alternating in the same process. Check `smi.txt`: only an H200 run measures the bar.
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu (the bundle of call BM)
# Run: B=$PWD/.devrun bash scripts/h200/callBN.sh (about 2 minutes; timeout_s 200).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBN.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
for i in 1 2 3 4 5 6 7 8; do
  timeout 30 $B/rtx-bench --out $R/b --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes 512x512x512,1024x1024x1024 > $R/s_$i.log 2>&1
  echo "small_$i rc=$? $(row $R/s_$i.log)"
  pack
done
rm -rf $R/b
date -u +"end %T" >> $R/smi.txt
pack
