#!/usr/bin/env bash
# Run first in session 6 (2026-12-04) on the build of 703e045; the f16 tuning is trimmed to two shapes to fit one 600 s call.
# Device call S: the build of e275c0c. The small-shape ladder rungs (64x128 s8, 64x64 s10) are now
# persistent with the TMA-store epilogue (call R's slices: 1024^3 9.2 us vs 10.3 direct, 512^3
# 6.6 vs 6.8); the TMA-store epilogue reads nothing it need not. Every wgmma GPU case, the
# PyTorch anchors, the full GEMM suite (bf16, f16) and the encoder layer, then guided tuning of
# the f16 shapes still below cuBLAS.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callS.tgz . ; }
timeout 150 $B/tests/rtx_synthesis__test__wgmma_gpu --test-threads=1 --nocapture > $R/test_wgmma_gpu.log 2>&1
echo "test wgmma_gpu rc=$?"; grep -E "^test result|FAIL|panicked" $R/test_wgmma_gpu.log | cut -c1-110 | head -6
python3 $B/torch_anchors.py --only gemm,layer --sizes 512,1024,4096,8192 --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
pack
timeout 170 $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite gemm --gemm-dtypes bf16,f16 \
  --gemm-shapes 512x512x512,1024x1024x1024,4096x4096x4096,8192x8192x8192,4000x4000x4096,64x8192x8192,256x8192x8192,4096x4096x1000 > $R/bench.log 2>&1; echo "bench rc=$?"
pack; grep -E "^\| (rtx-wgmma-default|cublas) " $R/bench.log | cut -c1-100 | head -40
RTX_LAYER_TUNE_S=10 timeout 110 $B/rtx-bench --out $R/layer --anchors $R/anchors.json --no-progress --suite transformer > $R/layer.log 2>&1; echo "layer rc=$?"
pack; grep -E "^\| rtx" $R/layer.log | cut -c1-130
for s in 4096x4096x1000 64x8192x8192; do
  timeout 55 $B/rtx-tune gemm $s --dtype f16 --layout nn --time-budget-s 35 > $R/tune_${s}_f16.log 2>&1
  echo "tune $s f16 rc=$?"; grep -E "searched|winner|cuBLAS:|took" $R/tune_${s}_f16.log | head -4
done
pack
