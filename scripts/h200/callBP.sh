#!/usr/bin/env bash
# Device call BP (session 18): the two prepared short calls in one: call BN's eight 512^3/1024^3
# rounds (issue 4's unmet bar; it counts only where smi.txt names the H200), then call BO's
# wgmma_gpu f64-reference test, whose kernels now compile in parallel before the GPU part.
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu
# Run: B=$PWD/.devrun bash scripts/h200/callBP.sh (about 5 minutes; timeout_s 480).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBP.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
small_rounds 8
date -u +"bench end %T" >> $R/smi.txt
wgmma_f64_test 280
date -u +"end %T" >> $R/smi.txt
pack
