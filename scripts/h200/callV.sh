#!/usr/bin/env bash
# Device call V (session 6): the 192 x 160 tile with three consumers of 64 x 160 (m64n160
# wgmmas, 512 threads), after call U measured the two-consumer 192 x 80 form slower than
# 128 x 256 for bf16/f16. Its correctness cases, then the 192 x 160 slice at 4000 x 4000 x 4096
# NT bf16/f16 and NN tf32 against cuBLAS in the same process.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callV.tgz . ; }
RTX_WGMMA_CASE=t160c3 timeout 90 $B/tests/rtx_synthesis__test__wgmma_gpu --test-threads=1 --nocapture wgmma_gemm_matches > $R/test_wgmma_gpu.log 2>&1
echo "test wgmma_gpu rc=$? pass=$(grep -c PASS $R/test_wgmma_gpu.log)"; grep -E "^test result|FAIL|panicked" $R/test_wgmma_gpu.log | cut -c1-150 | head -8
pack
for a in "bf16 nt" "f16 nt" "tf32 nn"; do set -- $a
  timeout 60 $B/rtx-tune gemm 4000x4000x4096 --dtype $1 --layout $2 --strategy exhaustive --where '{"bm":192}' --no-store > $R/slice_$1_$2.log 2>&1
  echo "slice 192x160 $1 $2 rc=$?"; grep -E "^  #|cuBLAS:" $R/slice_$1_$2.log | cut -c1-150 | head -6
done
pack
