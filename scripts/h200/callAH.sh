#!/usr/bin/env bash
# Device call AH (session 7): the GPU tests after they decode outputs with the library's
# decode_output: elementwise_gpu, reduce_gpu and a wgmma subset (16-bit and f32 outputs, the
# 64-byte TMA-store boxes, tf32).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAH.tgz . ; }
run() { t=$1; lim=$2; filter=$3; shift 3
  env "$@" timeout $lim $B/tests/rtx_synthesis__test__$t --test-threads=1 --nocapture $filter > $R/test_$t.log 2>&1
  echo "test $t rc=$? $(grep -E '^test result' $R/test_$t.log | tail -1 | cut -c1-80) pass=$(grep -o 'PASS ' $R/test_$t.log | wc -l)"
  grep -E "panicked|FAIL" $R/test_$t.log | head -3; pack; }
run elementwise_gpu 120 ""
run reduce_gpu 120 ""
run wgmma_gpu 90 wgmma_gemm_matches RTX_WGMMA_CASE=t160c3_ts,default_,ts_nt_136
