#!/usr/bin/env bash
# Device call F (session 3): NVRTC probe (--no-cache), the new GPU tests (AOT driver resources,
# codegen bundle, memory tuning, attention incl. the packed layout, synth incl. split-K on a
# shared workspace), all anchors, chain8 tuning, then the memory, attention and transformer
# suites (the layer's GEMMs tuned in-run, RTX_LAYER_TUNE_S each).
set -u; . "$(dirname "$0")/env.sh"
python3 scripts/h200/nvrtc_log_probe.py > $R/probe.txt 2>&1; echo "probe ptxas lines: $(grep -c 'ptxas info' $R/probe.txt)"
for t in aot_driver_resources aot_codegen memory_tune_gpu attention_gpu synth_gpu; do
  timeout ${TEST_S:-100} $B/tests/rtx_synthesis__test__$t --test-threads=1 --nocapture > $R/test_$t.log 2>&1; echo "test $t rc=$?"; grep -E "^test result|FAIL|panicked" $R/test_$t.log | head -4
done
python3 $B/torch_anchors.py --only copy,mem,attn,layer --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
python3 scripts/h200/torch_chain8.py --json $R/anchors.json >> $R/anchors.log 2>&1 || echo "chain8 anchor failed"
grep -E "^layer" $R/anchors.log
/usr/bin/time -f "wall %e s" timeout 70 $B/rtx-tune chain8 32768x4096 --dtype bf16 --time-budget-s 40 > $R/tune_chain8.log 2>&1; echo "tune chain8 rc=$?"; tail -3 $R/tune_chain8.log
RTX_LAYER_TUNE_S=${LAYER_TUNE_S:-15} timeout ${BENCH_S:-240} $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite memory,attention,transformer > $R/bench.log 2>&1; echo "bench rc=$?"
cp $B/cache/tuning.db $R/ 2>/dev/null
tar -C $R -czf $OUT/callF.tgz . ; grep -E "^\| (rtx|copy)" $R/bench.log | grep -v "not available" | cut -c1-180 | head -60
