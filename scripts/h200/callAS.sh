#!/usr/bin/env bash
# Device call AS (session 11): the GPU tests of the shared tuning backend (GpuBackend, 5084a5c).
# Run: B=$PWD/.devrun bash scripts/h200/callAS.sh (about 80 s).
set -u; . "$(dirname "$0")/env.sh"
cat $B/BUILD > $R/build.txt
for t in memory_tune_gpu synth_gpu elementwise_gpu reduce_gpu gemm_gpu; do
  timeout 150 $B/tests/rtx_synthesis__test__$t > $R/$t.log 2>&1; echo "$t rc=$?"
  grep -E "test result|FAILED|panicked|^SKIP" $R/$t.log | head -4; tar -C $R -czf $OUT/callAS.tgz .
done
