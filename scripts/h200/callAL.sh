#!/usr/bin/env bash
# Device call AL (session 8): (1) the wgmma GPU cases call AK's 170 s limit cut off (the non-TMA-
# store 160-column tiles, split-K with split_n, the sampled tf32 4000^2); (2) guided tuning (40 s
# budget) at 512^3 and 1024^3, bf16 and f16; (3) a second interleaved sample of the 16-bit suite.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAL.tgz . ; }
RTX_WGMMA_CASE=tf32_tt_4000,sn_nn_64x1000,sn_tf32,t160_,t160c3_nt,t160c3_tt,t160c3_nn,t160c3_tn,t160c3_tf32 timeout 120 $B/tests/rtx_synthesis__test__wgmma_gpu --test-threads=1 --nocapture wgmma_gemm_matches > $R/test_wgmma_gpu.log 2>&1
echo "test wgmma_gpu rc=$? pass=$(grep -c ^PASS $R/test_wgmma_gpu.log)"; grep -E "^test result|FAIL|panicked" $R/test_wgmma_gpu.log | cut -c1-160 | head -6
pack
for s in 1024x1024x1024 512x512x512; do for d in bf16 f16; do
  timeout 55 $B/rtx-tune gemm $s --dtype $d --layout nn --time-budget-s 40 > $R/tune_${s}_$d.log 2>&1
  echo "tune $s $d rc=$?"; grep -E "winner|^  [0-9.]+ us|rtx / cuBLAS|took" $R/tune_${s}_$d.log | cut -c1-240 | head -4
  pack
done; done
timeout 90 $B/rtx-bench --out $R/bench16 --no-progress --suite gemm --gemm-dtypes bf16,f16 \
  --gemm-shapes 512x512x512,1024x1024x1024,4096x4096x4096,8192x8192x8192,4000x4000x4096,64x8192x8192,256x8192x8192,4096x4096x1000 > $R/bench16.log 2>&1; echo "bench rc=$?"
pack; grep -E "^\| rtx-wgmma-default " $R/bench16.log | awk -F'|' '{print $2,$3,$6}' | cut -c1-90
