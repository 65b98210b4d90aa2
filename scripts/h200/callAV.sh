#!/usr/bin/env bash
# Device call AV (session 11): eight consecutive suite samples at 512^3 / 1024^3, bf16 and f16
# (cuBLAS interleaved in each process), for the spread of the 1024^3 ratio with one build.
# Run: B=$PWD/.devrun bash scripts/h200/callAV.sh (about 20 s).
set -u; . "$(dirname "$0")/env.sh"
cat $B/BUILD > $R/build.txt
for i in 1 2 3 4 5 6 7 8; do
  timeout 60 $B/rtx-bench --out $R/b$i --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes 512x512x512,1024x1024x1024 > $R/b$i.log 2>&1
  echo "run $i rc=$? $(grep -E '^\| (rtx-wgmma-default|cublas) ' $R/b$i.log | awk -F'|' '{printf "%s %s %s;", $2,$3,$6}' | sed 's/rtx-wgmma-default //g; s/  */ /g')"
done
rm -rf $R/b*/; tar -C $R -czf $OUT/callAV.tgz .
