#!/usr/bin/env bash
# Device call F (session 3): NVRTC probe (--no-cache), the new GPU tests (AOT driver resources,
# codegen bundle, memory tuning, synth), the compile tests that read ptxas lines, anchors, GEMM
# tuning with the cost-model-guided search, memory-op tuning, and the memory suite served from
# the tuning database.
set -u; . "$(dirname "$0")/env.sh"
python3 scripts/h200/nvrtc_log_probe.py > $R/probe.txt 2>&1; grep -c "ptxas info" $R/probe.txt; grep -E "no-cache" $R/probe.txt | cut -c1-200 | head -4
for t in aot_driver_resources aot_codegen aot_resources memory_tune_gpu synth_gpu elementwise_compile wgmma_compile; do
  timeout 150 $B/tests/rtx_synthesis__test__$t --test-threads=1 --nocapture > $R/test_$t.log 2>&1; echo "test $t rc=$?"; grep -E "^test result|RESOURCES|SKIP" $R/test_$t.log | head -4
done
python3 $B/torch_anchors.py --only copy,gemm,mem --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
python3 scripts/h200/torch_chain8.py --json $R/anchors.json >> $R/anchors.log 2>&1 || echo "chain8 anchor failed"
T=$B/rtx-tune
for s in "1024x1024x1024 nt" "4096x4096x1000 nt" "4096x4096x4096 nn"; do set -- $s; n=$(echo $1 | tr x _)
  /usr/bin/time -f "wall %e s" timeout 90 $T gemm $1 --dtype bf16 --layout $2 --time-budget-s 45 > $R/tune_$n.log 2>&1; echo "tune $1 $2 rc=$?"; tail -4 $R/tune_$n.log
done
for s in "chain8 32768x4096" "gelu-affine 16384x3072"; do set -- $s
  /usr/bin/time -f "wall %e s" timeout 80 $T $1 $2 --dtype bf16 --time-budget-s 40 > $R/tune_$1.log 2>&1; echo "tune $1 rc=$?"; tail -4 $R/tune_$1.log
done
timeout 200 $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite memory > $R/bench.log 2>&1; echo "bench rc=$?"
cp $B/cache/tuning.db $R/ 2>/dev/null
tar -C $R -czf $OUT/callF.tgz . ; grep -E "^\| (rtx|copy)" $R/bench.log | grep -v "not available" | cut -c1-200 | head -60
