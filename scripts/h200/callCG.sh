#!/usr/bin/env bash
# Device call CG (session 21), for a card that is not an H200: the build's checks where issue 4's
# M = 64..256 x 8192^2 range moved (64-row A boxes, the 64 x 192 rung): the wgmma f64-reference
# test, then the GEMM suite, bf16 + f16, cuBLAS alternating, at M = 64, 128, 160, 192, 224, 256
# with N = K = 8192 and at 1024^3 and 4000^2 x 4096.
# Run: B=$PWD/.devrun bash scripts/h200/h200_only.sh scripts/h200/callBY.sh scripts/h200/callCG.sh
# (about 2 minutes; timeout_s 300).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callCG.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
wgmma_f64_test 150
pack
timeout 120 $B/rtx-bench --out $R/bench --no-progress --suite gemm --gemm-dtypes bf16,f16 \
  --gemm-shapes 64x8192x8192,128x8192x8192,160x8192x8192,192x8192x8192,224x8192x8192,256x8192x8192,1024x1024x1024,4000x4000x4096 > $R/bench.log 2>&1
echo "bench rc=$?"; grep -E '^\| rtx-wgmma-default ' $R/bench.log | awk -F'|' '{print $2, $3, $6}'
finish
