#!/usr/bin/env bash
# Device call Y (session 6): cuBLAS timed alternately with each GEMM row (Timer::time_paired).
# (1) the rtx-bench GPU tests; (2) A/B of the hot sequence that gave call T's tf32 8192^3 0.81x:
# f32 then tf32 at 8192^3, interleaved (default) then --separate-baseline; (3) the PyTorch
# anchors and the GEMM suite for f32/tf32/bf16/f16 at issue 4's shapes, interleaved.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callY.tgz . ; }
timeout 60 $B/tests/rtx_bench__lib --test-threads=1 --nocapture timing > $R/test_bench_timing.log 2>&1; echo "bench lib timing rc=$?"; grep -E "^test |test result" $R/test_bench_timing.log | head -8
timeout 90 $B/tests/rtx_bench__test__gpu_gemm_baseline --test-threads=1 --nocapture > $R/test_gpu_gemm_baseline.log 2>&1; echo "gpu_gemm_baseline rc=$?"; grep -E "test result|panicked" $R/test_gpu_gemm_baseline.log | head -4
pack
for mode in interleaved separate; do
  extra=""; [ $mode = separate ] && extra="--separate-baseline"
  timeout 60 $B/rtx-bench --out $R/ab_$mode --no-progress --suite gemm --gemm-dtypes f32,tf32 --gemm-shapes 8192x8192x8192 $extra > $R/ab_$mode.log 2>&1
  echo "ab $mode rc=$?"; grep -E "^\| (rtx-wgmma-default|rtx-simt-default|cublas) " $R/ab_$mode.log | cut -c1-100
done
pack
python3 $B/torch_anchors.py --only gemm --sizes 512,1024,2048,4096,8192 --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
timeout 330 $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite gemm --gemm-dtypes f32,tf32,bf16,f16 \
  --gemm-shapes 512x512x512,1024x1024x1024,2048x2048x2048,4096x4096x4096,8192x8192x8192,4000x4000x4096,64x8192x8192,256x8192x8192,4096x4096x1000 > $R/bench.log 2>&1; echo "bench rc=$?"
pack; grep -E "^\| (rtx-wgmma-default|rtx-simt-default|cublas) " $R/bench.log | cut -c1-100 | head -80
