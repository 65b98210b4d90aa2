#!/usr/bin/env bash
# Device call W (session 6): the GPU tests of the tuner backends whose timing loop moved to
# run_protocol_batched / time_batch (GEMM and memory-bound), on the build of callV.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callW.tgz . ; }
for t in synth_gpu memory_tune_gpu; do
  timeout 200 $B/tests/rtx_synthesis__test__$t --test-threads=1 --nocapture > $R/test_$t.log 2>&1
  echo "test $t rc=$?"; grep -E "^test |^test result|FAIL|panicked" $R/test_$t.log | cut -c1-140 | head -20
  pack
done
