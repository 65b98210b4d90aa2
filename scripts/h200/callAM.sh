#!/usr/bin/env bash
# Device call AM (session 8): TMA-store kernels exit after their last boxes are read out of shared
# memory (cp.async.bulk.wait_group.read 0, as CUTLASS's epilogues do) instead of waiting for
# the writes to complete. (1) the wgmma TMA-store and default cases; (2) A/B in one call over the
# one-wave shapes (512^3, 1024^3) and the odd ones: base (15a5061), new, base, new.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAM.tgz . ; }
RTX_WGMMA_CASE=ts_,default timeout 100 $B/tests/rtx_synthesis__test__wgmma_gpu --test-threads=1 --nocapture wgmma_gemm_matches > $R/test_wgmma_gpu.log 2>&1
echo "test wgmma_gpu rc=$? pass=$(grep -c ^PASS $R/test_wgmma_gpu.log)"; grep -E "^test result|FAIL|panicked" $R/test_wgmma_gpu.log | cut -c1-160 | head -6
pack
SH=512x512x512,1024x1024x1024,64x8192x8192,256x8192x8192,4096x4096x1000
for run in base1:$B/base new1:$B base2:$B/base new2:$B; do
  n=${run%%:*}; d=${run#*:}
  timeout 60 $d/rtx-bench --out $R/bench_$n --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes $SH > $R/bench_$n.log 2>&1; echo "bench $n rc=$?"
  grep -E "^\| rtx-wgmma-default " $R/bench_$n.log | awk -F'|' '{print $2,$3,$4,$6}' | cut -c1-90
  pack
done
