#!/usr/bin/env bash
# Device call CL (session 22): can mma.sync serve tf32 NN at small M without the staging
# pre-pass? wgmma reads tf32 K-major only, so a row-major B is transposed through global memory
# first, and at M <= 256 x 8192^2 that bounds tf32 at 0.33-0.65x cuBLAS (call CK). mma.sync
# reads an N-major tf32 B with scalar shared loads, in place. Guided tuning of the mma family
# (`rtx-tune --family mma`, 30 s budget each, compiles included, cuBLAS in the same process) at
# those shapes; the wgmma default's times are call CK's (336-346 us on an H100).
# Build: cargo xtask gpu-bundle --out .devrun_fam --tests none (806748c or later: --family)
# Run: B=$PWD/.devrun_fam bash scripts/h200/callCL.sh (about 2.5 minutes; timeout_s 240).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callCL.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
for s in 64x8192x8192 128x8192x8192 256x8192x8192 1024x1024x1024; do
  timeout 45 $B/rtx-tune gemm $s --dtype tf32 --layout nn --family mma --time-budget-s 30 > $R/tune_mma_$s.log 2>&1
  echo "mma tf32 $s rc=$?"; grep -E "^  #[12] |^cuBLAS|rtx / cuBLAS" $R/tune_mma_$s.log | cut -c1-170
  pack
done
finish
