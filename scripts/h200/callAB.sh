#!/usr/bin/env bash
# Device call AB (session 7): the 192 x 160 tile for an MN-major B (NN/TN: three consumers of
# 64 x 160, three 64-column B boxes per stage) and its TMA-store epilogue (64-byte boxes, 64-byte
# swizzle). (1) correctness: every t160* case and the 128-byte TMA-store cases (ts_*); (2) the
# 192 x 160 slice against the default config and cuBLAS in the same process at 4000^2 x 4096
# (NN and NT, bf16 and f16) and at 4096^3 / 8192^3 NN bf16 (the ladder question); (3) guided
# tuning of the whole space at 4000^2 x 4096 NN.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAB.tgz . ; }
RTX_WGMMA_CASE=t160,ts_ timeout 170 $B/tests/rtx_synthesis__test__wgmma_gpu --test-threads=1 --nocapture wgmma_gemm_matches > $R/test_wgmma_gpu.log 2>&1
echo "test wgmma_gpu rc=$? pass=$(grep -c ^PASS $R/test_wgmma_gpu.log)"; grep -E "^test result|FAIL|panicked" $R/test_wgmma_gpu.log | cut -c1-160 | head -8
pack
slice() { # shape dtype layout
  timeout 60 $B/rtx-tune gemm $1 --dtype $2 --layout $3 --strategy exhaustive --where '{"bm":192}' --no-store > $R/slice_$1_$2_$3.log 2>&1
  echo "slice $1 $2 $3 rc=$?"; grep -E "^  #|rtx / cuBLAS|cuBLAS:" $R/slice_$1_$2_$3.log | cut -c1-60 | head -14
}
for a in "bf16 nn" "f16 nn" "bf16 nt" "f16 nt"; do slice 4000x4000x4096 $a; done
pack
slice 4096x4096x4096 bf16 nn; slice 8192x8192x8192 bf16 nn
pack
for d in bf16 f16; do
  timeout 60 $B/rtx-tune gemm 4000x4000x4096 --dtype $d --layout nn --time-budget-s 40 > $R/tune_${d}_nn.log 2>&1
  echo "tune $d nn rc=$?"; grep -E "searched|winner|rtx / cuBLAS|took" $R/tune_${d}_nn.log | cut -c1-240 | head -4
done
pack
