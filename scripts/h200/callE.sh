#!/usr/bin/env bash
# Device call E (session 3): NVRTC log probe, all PyTorch anchors + chain8, the elementwise and
# row-reduction GPU tests (SFU change), and the full (non-quick) memory suite.
set -u; . "$(dirname "$0")/env.sh"
python3 scripts/h200/nvrtc_log_probe.py > $R/probe.txt 2>&1; cut -c1-300 $R/probe.txt | head -12
python3 $B/torch_anchors.py --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
python3 scripts/h200/torch_chain8.py --json $R/anchors.json >> $R/anchors.log 2>&1 || echo "chain8 anchor failed"
grep -E "^(copy|mem|layer|attn)" $R/anchors.log | head -40
for t in elementwise_gpu reduce_gpu; do
  timeout 200 $B/tests/rtx_synthesis__test__$t --test-threads=1 --nocapture > $R/test_$t.log 2>&1; echo "test $t rc=$?"; grep -E "^test result" $R/test_$t.log
done
timeout ${BENCH_S:-300} $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite memory > $R/bench.log 2>&1; echo "bench rc=$?"
tar -C $R -czf $OUT/callE.tgz . ; grep -E "^\| (rtx|copy|torch)" $R/bench.log | grep -v "not available" | cut -c1-220 | head -60
