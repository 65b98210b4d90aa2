#!/usr/bin/env bash
# Device call U (session 6): the 192 x 160 tile (two consumers of 192 x 80, m64n80 wgmmas; K-major
# B only), cuBLAS's tile at 4000 x 4000 x 4096. Its correctness cases, then at 4000 x 4000 x 4096
# NT (bf16, f16) and NN tf32 (staged K-major B): the 192 x 160 slice measured exhaustively against
# cuBLAS in the same process, and guided tuning of the whole space.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callU.tgz . ; }
RTX_WGMMA_CASE=t160 timeout 90 $B/tests/rtx_synthesis__test__wgmma_gpu --test-threads=1 --nocapture wgmma_gemm_matches > $R/test_wgmma_gpu.log 2>&1
echo "test wgmma_gpu rc=$? pass=$(grep -c ^PASS $R/test_wgmma_gpu.log)"; grep -E "^test result|FAIL|panicked" $R/test_wgmma_gpu.log | cut -c1-150 | head -8
pack
for a in "bf16 nt" "f16 nt" "tf32 nn"; do set -- $a
  timeout 60 $B/rtx-tune gemm 4000x4000x4096 --dtype $1 --layout $2 --strategy exhaustive --where '{"bm":192}' --no-store > $R/slice_$1_$2.log 2>&1
  echo "slice 192x160 $1 $2 rc=$?"; grep -E "^  #|rtx / cuBLAS|cuBLAS:" $R/slice_$1_$2.log | cut -c1-120 | head -6
done
pack
for a in "bf16 nt" "f16 nt"; do set -- $a
  timeout 60 $B/rtx-tune gemm 4000x4000x4096 --dtype $1 --layout $2 --time-budget-s 40 > $R/tune_$1_$2.log 2>&1
  echo "tune $1 $2 rc=$?"; grep -E "searched|winner|rtx / cuBLAS|took" $R/tune_$1_$2.log | cut -c1-200 | head -4
done
pack
