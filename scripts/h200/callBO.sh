#!/usr/bin/env bash
# Device call BO (session 17): the wgmma GPU cases at eea2047, whose f64-reference test now
# compiles every case first in parallel (call BM's 200 s timeout cut the serial one).
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu
# Run: B=$PWD/.devrun bash scripts/h200/callBO.sh (timeout_s: what is left).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBO.tgz . ; }
cat $B/BUILD > $R/build.txt
T=$(ls $B/tests/*wgmma_gpu* | head -1)
$T --test-threads 1 --nocapture wgmma_gemm_matches_the_f64_reference > $R/test_wgmma_gpu.log 2>&1
echo "wgmma_gpu rc=$?"; grep -E "test result|FAILED|panicked|compiled" $R/test_wgmma_gpu.log | head -5
pack
