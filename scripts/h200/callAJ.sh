#!/usr/bin/env bash
# Device call AJ (session 8): the deferred TMA-store epilogue (a unit's outputs are packed to
# 16 bits when its accumulators are final and stored while the next unit's first wgmmas run).
# (1) GPU tests: the wgmma TMA-store and default cases and synth_gpu; (2) A/B in one call:
# rtx-bench over issue 4's 16-bit shapes with the build before (.devrun/base) and after, run
# base, new, base, new; each row against cuBLAS timed alternately with it.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAJ.tgz . ; }
RTX_WGMMA_CASE=ts_,default timeout 150 $B/tests/rtx_synthesis__test__wgmma_gpu --test-threads=1 --nocapture wgmma_gemm_matches > $R/test_wgmma_gpu.log 2>&1
echo "test wgmma_gpu rc=$? pass=$(grep -c ^PASS $R/test_wgmma_gpu.log)"; grep -E "^test result|FAIL|panicked" $R/test_wgmma_gpu.log | cut -c1-160 | head -6
timeout 60 $B/tests/rtx_synthesis__test__synth_gpu --test-threads=1 > $R/test_synth_gpu.log 2>&1; echo "synth_gpu rc=$?"; grep -E "^test result|panicked" $R/test_synth_gpu.log | head -3
pack
SH=512x512x512,1024x1024x1024,4096x4096x4096,4000x4000x4096,64x8192x8192,256x8192x8192,4096x4096x1000
for run in base1:$B/base new1:$B base2:$B/base new2:$B; do
  n=${run%%:*}; d=${run#*:}
  timeout 120 $d/rtx-bench --out $R/bench_$n --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes $SH > $R/bench_$n.log 2>&1; echo "bench $n rc=$?"
  grep -E "^\| rtx-wgmma-default " $R/bench_$n.log | awk -F'|' '{print $2,$3,$6}' | cut -c1-90
  pack
done
