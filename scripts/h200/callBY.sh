#!/usr/bin/env bash
# Device call BY (session 20): issue 4's whole picture for main 1514dd1 (kernels of 99cb670,
# wgmma VERSION 6: the one-division tile order, measured only on an H100 before this call).
# Session 21 runs it again for its build (build.txt names it: wgmma VERSION 7, 64-row A boxes, the
# 64 x 192 rung; ISSUE4_SHAPES gained M = 160).
# Check `smi.txt` first: only a card named H200 there counts for issue 4's bars.
# (1) eight rounds at 512^3 / 1024^3 bf16+f16 (the unmet bar first); (2) the PyTorch GEMM
# anchors and the suite at issue 4's shapes for f32/tf32/bf16/f16, cuBLAS alternating with each
# row; (3) guided tuning at 1024^3 (40 s budget, compiles included), bf16 and f16, then the suite
# at 1024^3 serving the winners; (4) the wgmma f64-reference test.
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu
# Run: B=$PWD/.devrun bash scripts/h200/callBY.sh (about 5.5 minutes; timeout_s 560).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBY.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
small_rounds 8
date -u +"small end %T" >> $R/smi.txt
timeout 150 python3 $B/torch_anchors.py --only gemm --sizes 512,1024,2048,4096,8192 --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
timeout 150 $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite gemm --gemm-dtypes f32,tf32,bf16,f16 \
  --gemm-shapes $ISSUE4_SHAPES > $R/bench.log 2>&1; echo "bench rc=$?"
grep -E "^\| rtx-(wgmma|simt)-default " $R/bench.log | awk -F'|' '{print $2,$3,$6}' | cut -c1-90
pack
for d in bf16 f16; do
  timeout 55 $B/rtx-tune gemm 1024x1024x1024 --dtype $d --layout nn --time-budget-s 40 > $R/tune_1024_$d.log 2>&1
  echo "tune 1024^3 $d rc=$?"; grep -E "winner|rtx / cuBLAS|took" $R/tune_1024_$d.log | cut -c1-200 | head -3
  pack
done
timeout 40 $B/rtx-bench --out $R/t --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes 1024x1024x1024 > $R/tuned_1024.log 2>&1
echo "tuned_1024 rc=$?"; grep -E '^\| (rtx-wgmma-default|rtx-tuned-wgmma|cublas) ' $R/tuned_1024.log | awk -F'|' '{print $2, $3, $6}'
rm -rf $R/t; pack
wgmma_f64_test 120
finish
