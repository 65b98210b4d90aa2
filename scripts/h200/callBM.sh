#!/usr/bin/env bash
# Device call BM (session 17): issue 4's figures for the build with the three-wave limit on the
# 128 x 192 rung (70fa058; never measured on a GPU), at HEAD e2a3fa6.
# Check `smi.txt` first: on an H100 this is one more H100 sample, not the H200 figure.
# (1) six rounds at 512^3 / 1024^3 bf16+f16 (the unmet bar first); (2) the PyTorch GEMM anchors
# and the suite at issue 4's shapes for f32/tf32/bf16/f16, cuBLAS alternating with each row; (3) the six shapes
# the 128 x 192 rung moved (call BL), now with the three-wave limit: the two over three waves
# must be back on 192 x 160; (4) guided tuning at 1024^3 (40 s budget), bf16 and f16, and the
# suite at 1024^3 serving the winners; (5) the wgmma GPU cases.
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu
# Run: B=$PWD/.devrun bash scripts/h200/callBM.sh (about 6 minutes; timeout_s 560).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBM.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
for i in 1 2 3 4 5 6; do
  timeout 40 $B/rtx-bench --out $R/b --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes 512x512x512,1024x1024x1024 > $R/s_$i.log 2>&1
  echo "small_$i rc=$? $(row $R/s_$i.log)"
done
rm -rf $R/b; pack
timeout 150 python3 $B/torch_anchors.py --only gemm --sizes 512,1024,2048,4096,8192 --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
timeout 150 $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite gemm --gemm-dtypes f32,tf32,bf16,f16 \
  --gemm-shapes $ISSUE4_SHAPES > $R/bench.log 2>&1; echo "bench rc=$?"
grep -E "^\| rtx-(wgmma|simt)-default " $R/bench.log | awk -F'|' '{print $2,$3,$6}' | cut -c1-90
pack
MOVED=3072x3072x4096,1024x3072x4096,2304x8192x4096,6144x3072x4096,4096x1536x4096,11008x512x4096
for i in 1 2; do
  timeout 60 $B/rtx-bench --out $R/mv_$i --no-progress --suite gemm --gemm-dtypes bf16 --gemm-shapes $MOVED > $R/m_$i.log 2>&1
  echo "moved $i rc=$? $(row $R/m_$i.log)"
done
pack
for d in bf16 f16; do
  timeout 55 $B/rtx-tune gemm 1024x1024x1024 --dtype $d --layout nn --time-budget-s 40 > $R/tune_1024_$d.log 2>&1
  echo "tune 1024^3 $d rc=$?"; grep -E "winner|rtx / cuBLAS|took" $R/tune_1024_$d.log | cut -c1-200 | head -3
  pack
done
timeout 40 $B/rtx-bench --out $R/t --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes 1024x1024x1024 > $R/tuned_1024.log 2>&1
echo "tuned_1024 rc=$?"; grep -E '^\| (rtx-wgmma-default|rtx-tuned-wgmma|cublas) ' $R/tuned_1024.log | awk -F'|' '{print $2, $3, $6}'
rm -rf $R/t; pack
T=$(ls $B/tests/*wgmma_gpu* | head -1)
timeout 200 $T --test-threads 1 > $R/test_wgmma_gpu.log 2>&1
echo "wgmma_gpu rc=$?"; grep -E "test result|FAILED|panicked" $R/test_wgmma_gpu.log | head -5
date -u +"end %T" >> $R/smi.txt
pack
