#!/usr/bin/env bash
# Device call Z (session 6): the GPU tests after (a) the tuner backends' timing loop became one
# time_protocol and (b) the seven GPU test binaries moved to one gpu_support module.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callZ.tgz . ; }
run() { t=$1; lim=$2; shift 2
  env "$@" timeout $lim $B/tests/rtx_synthesis__test__$t --test-threads=1 --nocapture > $R/test_$t.log 2>&1
  echo "test $t rc=$? $(grep -E '^test result' $R/test_$t.log | tail -1 | cut -c1-80) skips=$(grep -c SKIP $R/test_$t.log)"
  grep -E "panicked|FAIL" $R/test_$t.log | head -3; pack; }
run synth_gpu 90
run memory_tune_gpu 60
run wgmma_gpu 60 RTX_WGMMA_CASE=t160c3_nt_300,sn_ts_nn_200,ts_nn_300  # (needs the test-name filter wgmma_gemm_matches: see callZ/README.md)
run aot_driver_resources 60
run elementwise_gpu 100
run reduce_gpu 100
run attention_gpu 120
