#!/usr/bin/env bash
# Device call AD (session 7): tf32 picks between the two large ladder rungs by the cost model
# (192 x 160 at 4000^2 x 4096). (1) the tf32 and default_ wgmma GPU cases; (2) the tf32 GEMM rows
# at issue 4's shapes, then the bf16/f16 rows of the three odd shapes again (a second sample of
# call AC's figures), cuBLAS interleaved; (3) guided tuning (40 s budget) of the odd shapes that
# sit at parity by default.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAD.tgz . ; }
RTX_WGMMA_CASE=tf32,default timeout 120 $B/tests/rtx_synthesis__test__wgmma_gpu --test-threads=1 --nocapture wgmma_gemm_matches > $R/test_wgmma_gpu.log 2>&1
echo "test wgmma_gpu rc=$? pass=$(grep -c ^PASS $R/test_wgmma_gpu.log)"; grep -E "^test result|FAIL|panicked" $R/test_wgmma_gpu.log | cut -c1-160 | head -4
pack
timeout 150 $B/rtx-bench --out $R/bench_tf32 --no-progress --suite gemm --gemm-dtypes tf32 \
  --gemm-shapes 512x512x512,1024x1024x1024,2048x2048x2048,4096x4096x4096,8192x8192x8192,4000x4000x4096,64x8192x8192,256x8192x8192,4096x4096x1000 > $R/bench_tf32.log 2>&1; echo "bench tf32 rc=$?"
pack; grep -E "^\| (rtx-wgmma-default|cublas) " $R/bench_tf32.log | cut -c1-100
timeout 100 $B/rtx-bench --out $R/bench_odd --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes 4000x4000x4096,64x8192x8192,4096x4096x1000 > $R/bench_odd.log 2>&1; echo "bench odd rc=$?"
pack; grep -E "^\| (rtx-wgmma-default|cublas) " $R/bench_odd.log | grep -E "4000x|64x8192|x1000" | cut -c1-100
for a in "64x8192x8192 f16" "64x8192x8192 bf16" "4096x4096x1000 bf16" "4096x4096x1000 f16"; do set -- $a
  timeout 60 $B/rtx-tune gemm $1 --dtype $2 --layout nn --time-budget-s 40 > $R/tune_$1_$2.log 2>&1
  echo "tune $1 $2 rc=$?"; grep -E "winner|rtx / cuBLAS|took" $R/tune_$1_$2.log | cut -c1-240 | head -3
done
pack
