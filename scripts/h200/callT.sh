#!/usr/bin/env bash
# Device call T (session 6, build of the timing-pipeline commit): the wgmma GPU cases call S's
# 150 s limit cut off, the PyTorch anchors, guided tuning of the shapes below cuBLAS in call S
# (stored in the call's tuning database, so the bench's rtx-dbdefault rows serve them), the GEMM
# suite for f32/tf32/bf16/f16 with samples enqueued 10 at a time, then the small shapes again
# with --timing-pipeline 1 (a host wait after every sample, the method before this call) for A/B.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callT.tgz . ; }
RTX_WGMMA_CASE=tf32_nn_64x1000,tf32_tt_300,tf32_nn_500,tf32_nt_520,tf32_nn_1000x1000,_sampled,ts_,sn_ \
  timeout 120 $B/tests/rtx_synthesis__test__wgmma_gpu --test-threads=1 --nocapture wgmma_gemm_matches > $R/test_wgmma_gpu.log 2>&1
echo "test wgmma_gpu rc=$? pass=$(grep -c ^PASS $R/test_wgmma_gpu.log)"; grep -E "^test result|FAIL|panicked" $R/test_wgmma_gpu.log | cut -c1-110 | head -6
python3 $B/torch_anchors.py --only gemm --sizes 512,1024,2048,4096,8192 --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
pack
for a in "4000x4000x4096 bf16" "4000x4000x4096 f16" "4096x4096x1000 f16" "64x8192x8192 f16"; do set -- $a
  timeout 52 $B/rtx-tune gemm $1 --dtype $2 --layout nn --time-budget-s 35 > $R/tune_$1_$2.log 2>&1
  echo "tune $1 $2 rc=$?"; grep -E "rtx / cuBLAS|took" $R/tune_$1_$2.log | head -2
done
pack
timeout 200 $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite gemm --gemm-dtypes f32,tf32,bf16,f16 \
  --gemm-shapes 512x512x512,1024x1024x1024,2048x2048x2048,4096x4096x4096,8192x8192x8192,4000x4000x4096,64x8192x8192,256x8192x8192,4096x4096x1000 > $R/bench.log 2>&1; echo "bench rc=$?"
pack; grep -E "^\| (rtx-wgmma-default|rtx-tuned-wgmma|rtx-nearest-wgmma|rtx-simt-default|cublas) " $R/bench.log | grep -v "not available" | cut -c1-90 | head -80
for pl in 1 10; do
  timeout 40 $B/rtx-bench --out $R/ab_p$pl --no-progress --suite gemm --gemm-dtypes bf16,f16 --timing-pipeline $pl \
    --gemm-shapes 512x512x512,1024x1024x1024 > $R/ab_p$pl.log 2>&1; echo "ab pipeline=$pl rc=$?"
  grep -E "^\| (rtx-wgmma-default|cublas) " $R/ab_p$pl.log | cut -c1-90
done
pack
