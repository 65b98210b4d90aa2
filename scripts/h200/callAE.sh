#!/usr/bin/env bash
# Device call AE (session 7), the final build: tf32 takes the 192 x 160 rung only where 128 x 256
# fills two waves. (1) the tf32 GEMM rows at issue 4's shapes, cuBLAS interleaved; (2) the GPU
# test binaries of this build: synth_gpu, gemm_gpu, the wgmma tf32/default cases, attention_gpu,
# rtx-bench's gpu_gemm_baseline and rtx-runtime's gpu tests.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAE.tgz . ; }
timeout 150 $B/rtx-bench --out $R/bench_tf32 --no-progress --suite gemm --gemm-dtypes tf32 \
  --gemm-shapes 512x512x512,1024x1024x1024,2048x2048x2048,4096x4096x4096,8192x8192x8192,4000x4000x4096,64x8192x8192,256x8192x8192,4096x4096x1000 > $R/bench_tf32.log 2>&1; echo "bench tf32 rc=$?"
pack; grep -E "^\| (rtx-wgmma-default|cublas) " $R/bench_tf32.log | cut -c1-100
run() { t=$1; lim=$2; filter=$3; shift 3  # then VAR=value ... for the environment
  env "$@" timeout $lim $B/tests/$t --test-threads=1 --nocapture $filter > $R/test_$t.log 2>&1
  echo "test $t rc=$? $(grep -E '^test result' $R/test_$t.log | tail -1 | cut -c1-80) skips=$(grep -c SKIP $R/test_$t.log)"
  grep -E "panicked|FAIL" $R/test_$t.log | head -3; pack; }
run rtx_synthesis__test__synth_gpu 60 ""
run rtx_synthesis__test__gemm_gpu 60 ""
run rtx_synthesis__test__wgmma_gpu 80 wgmma_gemm_matches RTX_WGMMA_CASE=tf32_,default_
run rtx_bench__test__gpu_gemm_baseline 90 ""
run rtx_runtime__test__gpu 40 ""
run rtx_synthesis__test__attention_gpu 100 ""
