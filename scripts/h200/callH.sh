#!/usr/bin/env bash
# Device call H (session 3): the GPU test binaries touched by this session's merges (wgmma incl.
# tf32 staging, mma/SIMT split-K on the shared workspace, elementwise template v3, row kernels,
# runtime, profiler, bench GEMM baseline), then one guided GEMM tuning run (f16 4096^3 NN).
set -u; . "$(dirname "$0")/env.sh"
for t in $B/tests/*; do n=$(basename $t)
  timeout ${TEST_S:-150} $t --test-threads=1 --nocapture > $R/$n.log 2>&1; echo "test $n rc=$?"; grep -E "^test result|FAIL|panicked" $R/$n.log | head -3
done
/usr/bin/time -f "wall %e s" timeout 90 $B/rtx-tune gemm 4096x4096x4096 --dtype f16 --layout nn --time-budget-s 45 > $R/tune_f16_4096.log 2>&1; echo "tune rc=$?"; tail -6 $R/tune_f16_4096.log
tar -C $R -czf $OUT/callH.tgz .
