#!/usr/bin/env bash
# Device call CJ (session 22): how far tf32 is from what its space can do where its default is
# weakest. tf32's default picks between the two large tiles only (128 x 256, 192 x 160); the
# small rungs were never measured for tf32, and the suite reads tf32 at 0.31-0.60x cuBLAS for
# M = 64..256 x 8192^2 and 0.43-0.52x at 512^3 / 1024^3 (call BZ on an H100, session 22).
# Guided tuning (25 s budget each, `--no-store`, compiles included, cuBLAS in the same process) at those
# shapes, then the suite's default rows at them; the winners say which rungs a tf32 ladder would need. Runs on any card.
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu (or --tests none)
# Run: B=$PWD/.devrun bash scripts/h200/callCJ.sh (about 3 minutes; timeout_s 300).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callCJ.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
for s in 64x8192x8192 128x8192x8192 256x8192x8192 1024x1024x1024 512x512x512 192x8192x8192; do
  timeout 40 $B/rtx-tune gemm $s --dtype tf32 --layout nn --time-budget-s 25 --no-store > $R/tune_tf32_$s.log 2>&1
  echo "tf32 $s rc=$?"; grep -E "^  #[12] |^cuBLAS|rtx / cuBLAS" $R/tune_tf32_$s.log | cut -c1-150
  pack
done
# The default configs at the same shapes, cuBLAS alternating (the tuner prints no default row).
timeout 90 $B/rtx-bench --out $R/b --no-progress --suite gemm --gemm-dtypes tf32 \
  --gemm-shapes 64x8192x8192,128x8192x8192,192x8192x8192,256x8192x8192,512x512x512,1024x1024x1024 > $R/suite.log 2>&1
echo "suite rc=$?"; grep -E '^\| rtx-wgmma-default ' $R/suite.log | awk -F'|' '{print $2, $3, $6, $9}' | cut -c1-120
rm -rf $R/b
finish
