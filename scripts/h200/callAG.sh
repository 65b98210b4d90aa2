#!/usr/bin/env bash
# Device call AG (session 7): elementwise_gpu and reduce_gpu after their shared guard-buffer
# helpers (GUARD, decode, upload_at, poisoned, unguard) moved into tests/gpu_support.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAG.tgz . ; }
for t in elementwise_gpu reduce_gpu; do
  timeout 150 $B/tests/rtx_synthesis__test__$t --test-threads=1 --nocapture > $R/test_$t.log 2>&1
  echo "test $t rc=$? $(grep -E '^test result' $R/test_$t.log | tail -1 | cut -c1-80) skips=$(grep -c SKIP $R/test_$t.log)"
  grep -E "panicked|FAIL" $R/test_$t.log | head -3; pack
done
