#!/usr/bin/env bash
# Device call A: every test binary of the bundle (GPU tests for real).
set -u; . "$(dirname "$0")/env.sh"
start=$(date +%s)
OUT=$R RTX_TEST_TIMEOUT=240 $B/run.sh tests > $R/tests_summary.txt 2>&1
echo "tests took $(( $(date +%s) - start )) s" >> $R/tests_summary.txt
tar -C $R -czf $OUT/callA.tgz . ; cat $R/tests_summary.txt
