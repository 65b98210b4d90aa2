#!/usr/bin/env bash
# Device call AR (prepared in session 10): experiment E2 against the base build, one lease.
# E2 (callAR_E2.patch, built as $B/exp2/: the base build + the patch) changes two things every
# TMA-store kernel does, both as CUTLASS's sm90 epilogue does them: the prologue also prefetches
# the C tensor map (tmC was fetched cold by the first store, at the end of the kernel), and the
# last wait before the block exits waits for the staging boxes to be read
# (cp.async.bulk.wait_group.read 0) instead of for the global writes to land (they complete with
# the grid). Expected: a shorter tail where the kernel is short (512^3, 1024^3); nothing at 4096^3.
# (1) E2's TMA-store GPU cases against the f64 reference; (2) the GEMM suite at the TMA-store
# shapes, bf16 and f16, base and E2 alternately (A B B A; cuBLAS in each process).
# Run: B=$PWD/.devrun bash scripts/h200/callAR.sh (about 4 minutes; timeout_s 400).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAR.tgz . ; }
cat $B/BUILD $B/exp2/BUILD > $R/build.txt 2>/dev/null
RTX_WGMMA_CASE=ts_,t160c3_ts,ck_nn_1024,default_ timeout 150 $B/exp2/rtx_synthesis__test__wgmma_gpu --exact wgmma_gemm_matches_the_f64_reference --nocapture > $R/test_e2.log 2>&1
echo "test E2 rc=$? pass=$(grep -c ^PASS $R/test_e2.log)"; grep -E "^FAIL|test result|panicked|unusable" $R/test_e2.log | cut -c1-170 | head -8
pack
S=512x512x512,1024x1024x1024,4096x4096x4096,4096x4096x1000
for run in base e2 e2b baseb; do
  case $run in base*) bin=$B/rtx-bench;; *) bin=$B/exp2/rtx-bench;; esac
  timeout 90 $bin --out $R/bench_$run --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes $S > $R/bench_$run.log 2>&1
  echo "bench $run rc=$?"; grep -E "^\| rtx-wgmma-default " $R/bench_$run.log | awk -F'|' '{print $2,$3,$6}' | cut -c1-90
  pack
done
