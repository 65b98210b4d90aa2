#!/usr/bin/env bash
# Device call G (session 3): the wgmma tf32 GPU cases, all anchors + chain8, then the whole
# rtx-bench suite (all suites, full mode) with call F's tuning database, written as the baseline.
set -u; . "$(dirname "$0")/env.sh"
RTX_WGMMA_CASE=tf32_ timeout 120 $B/tests/rtx_synthesis__test__wgmma_gpu wgmma_gemm_matches_the_f64_reference --test-threads=1 --nocapture > $R/test_wgmma_tf32.log 2>&1; echo "test wgmma tf32 rc=$?"; grep -E "^test result|FAIL|panicked" $R/test_wgmma_tf32.log | head -5
python3 $B/torch_anchors.py --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
python3 scripts/h200/torch_chain8.py --json $R/anchors.json >> $R/anchors.log 2>&1 || echo "chain8 anchor failed"
RTX_LAYER_TUNE_S=${LAYER_TUNE_S:-15} timeout ${BENCH_S:-380} $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite all --update-baseline $R/bench/baseline.json > $R/bench.log 2>&1; echo "bench rc=$?"
cp $B/cache/tuning.db $R/ 2>/dev/null
tar -C $R -czf $OUT/callG.tgz . ; grep -E "^\| (rtx|copy|cuBLAS)" $R/bench.log | grep -v "not available" | cut -c1-150 | head -90
