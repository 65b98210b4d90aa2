#!/usr/bin/env bash
# Device call AT (session 11): experiment E2 (callAR_E2.patch) applied to main (4ee81a4) before
# adopting it. (1) every wgmma GPU case with E2 against the f64 reference; (2) the GEMM suite at
# 512^3 and 1024^3, bf16 and f16, base and E2 alternating A B B A A B B A (cuBLAS timed in each
# process, alternately with each row); (3) guided tuning at 1024^3 with E2 (40 s, stores the
# winners), then the suite's tuned rows with E2, and the PyTorch anchors in the same call.
# Run: B=$PWD/.devrun bash scripts/h200/callAT.sh ($B/e2m holds the E2 build; about 5 minutes).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAT.tgz . ; }
E=$B/e2m
cat $B/BUILD $E/BUILD > $R/build.txt 2>/dev/null
timeout 200 $E/tests/rtx_synthesis__test__wgmma_gpu > $R/wgmma_gpu_e2.log 2>&1
echo "wgmma_gpu (E2) rc=$? pass=$(grep -c ^PASS $R/wgmma_gpu_e2.log)"; grep -E "^FAIL|test result|panicked" $R/wgmma_gpu_e2.log | cut -c1-170 | head -8
pack
S=512x512x512,1024x1024x1024
for run in base1 e2a e2b base2 base3 e2c e2d base4; do
  case $run in base*) bin=$B/rtx-bench;; *) bin=$E/rtx-bench;; esac
  timeout 60 $bin --out $R/bench_$run --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes $S > $R/bench_$run.log 2>&1
  echo "bench $run rc=$? $(grep -E '^\| rtx-wgmma-default ' $R/bench_$run.log | awk -F'|' '{printf "%s %s %s;", $2,$3,$6}' | sed 's/rtx-wgmma-default //g; s/  */ /g')"
done
pack
for d in bf16 f16; do
  timeout 60 $E/rtx-tune gemm 1024x1024x1024 --dtype $d --layout nn --time-budget-s 40 > $R/tune_1024_$d.log 2>&1
  echo "tune 1024^3 $d rc=$?"; grep -E "searched|winner|^  [0-9.]+ us|rtx / cuBLAS|took" $R/tune_1024_$d.log | cut -c1-240 | head -5
  pack
done
python3 $B/torch_anchors.py --only gemm --sizes 512,1024 --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
timeout 90 $E/rtx-bench --out $R/bench_tuned --anchors $R/anchors.json --no-progress --suite gemm --gemm-dtypes bf16,f16 \
  --gemm-shapes $S > $R/bench_tuned.log 2>&1; echo "bench tuned rc=$?"
grep -E "^\| (rtx-(wgmma-default|tuned)|cublas|torch)" $R/bench_tuned.log | awk -F'|' '{print $2,$3,$6,$8}' | cut -c1-120
pack
