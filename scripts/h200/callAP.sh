#!/usr/bin/env bash
# Device call AP (prepared in session 9): the GPU measurement lock on the device. A second rtx-tune
# with RTX_GPU_LOCK=fail while one tunes must fail naming the first's pid (rc 1); synth_gpu
# (Synth::tune_* under the lock and the in-process run slot) must pass.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAP.tgz . ; }
T=$B/rtx-tune
# The GPU lock with two real processes on the GPU, then the tests that tune through Synth.
$T gemm 2048x2048x2048 --dtype bf16 --time-budget-s 15 --no-store > $R/lock_first.log 2>&1 & first=$!
sleep 4
RTX_GPU_LOCK=fail $T gemm 1024x1024x1024 --dtype bf16 --time-budget-s 5 --no-store > $R/lock_second.log 2>&1; echo "second rc=$? (1 expected)"
grep -E "being measured|rtx-tune:" $R/lock_second.log | head -3; echo "first pid $first"
wait $first; echo "first rc=$?"
timeout 150 $B/tests/rtx_synthesis__test__synth_gpu > $R/synth_gpu.log 2>&1; echo "synth_gpu rc=$?"; grep -E "test result|FAILED|panicked" $R/synth_gpu.log | head -5
pack
