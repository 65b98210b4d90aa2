#!/usr/bin/env bash
# Device call AQ (prepared in session 10): cluster split-K (`cluster_k` 2) on the H200, first
# run. (1) The wgmma GPU cases of cluster split-K against the f64 reference (edges in M, N and K,
# both epilogues, fused epilogue, split_n, batches, tf32, persistent grids with many units per
# cluster); (2) exhaustive slices of the experimental configs at 1024^3 bf16 and f16 (128x128 and
# 128x64 pairs; cuBLAS in the same process), and the 64x128 rung beside them as the control;
# (3) guided tuning with --experimental at 1024^3 (40 s budget, as for issue 4's bar);
# (4) the anchors and the GEMM suite at 512^3 / 1024^3: the defaults' same-call ratio, and the
# tuned rows (the tuning database now holds step 3's winners) in the suite's own protocol.
# Run: B=$PWD/.devrun bash scripts/h200/callAQ.sh (about 7 minutes; timeout_s 540).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAQ.tgz . ; }
T=$B/rtx-tune
cat $B/BUILD > $R/build.txt 2>/dev/null
RTX_WGMMA_CASE=ck_ timeout 150 $B/tests/rtx_synthesis__test__wgmma_gpu --exact wgmma_gemm_matches_the_f64_reference --nocapture > $R/test_ck.log 2>&1
ck_rc=$?
echo "test ck rc=$ck_rc pass=$(grep -c ^PASS $R/test_ck.log)"; grep -E "^(PASS|FAIL)|test result|panicked|unusable" $R/test_ck.log | cut -c1-170 | head -16
pack
# A failing or hanging pair would cost every tuning candidate its watchdog: then only the suite runs.
if [ $ck_rc -eq 0 ]; then
for d in bf16 f16; do
  for w in '{"cluster_k":2,"bm":128,"bn":128,"raster_group":1}' '{"cluster_k":2,"bm":128,"bn":64,"raster_group":1}' '{"bm":64,"bn":128,"consumers":1,"stages":8,"tma_store":true,"cluster_m":1}'; do
    echo "== 1024^3 $d $w" >> $R/slices.log
    timeout 100 $T gemm 1024x1024x1024 --dtype $d --layout nn --strategy exhaustive --experimental --where "$w" --no-store >> $R/slices.log 2>&1
    echo "rc=$?" >> $R/slices.log
  done
  pack
done
grep -E "^==|searched|#[1-5] |cuBLAS:|failed:|rc=" $R/slices.log | cut -c1-230
for d in bf16 f16; do
  timeout 60 $T gemm 1024x1024x1024 --dtype $d --layout nn --time-budget-s 40 --experimental > $R/tune_1024_$d.log 2>&1
  echo "tune 1024^3 $d rc=$?"; grep -E "searched|winner|^  [0-9.]+ us|rtx / cuBLAS|took" $R/tune_1024_$d.log | cut -c1-240 | head -5
  pack
done
else
  echo "cluster split-K cases failed: slices and tuning skipped"
fi
python3 $B/torch_anchors.py --only gemm --sizes 512,1024 --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
timeout 90 $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite gemm --gemm-dtypes bf16,f16 \
  --gemm-shapes 512x512x512,1024x1024x1024 > $R/bench.log 2>&1; echo "bench rc=$?"
grep -E "^\| rtx-(wgmma-default|tuned|nearest|dbdefault)" $R/bench.log | awk -F'|' '{print $2,$3,$6}' | cut -c1-110
pack
