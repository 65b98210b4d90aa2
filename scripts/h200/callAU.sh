#!/usr/bin/env bash
# Device call AU (session 11): issue 4's figures with the E2 store tail (build
# 858a3b6; its wgmma GPU cases passed in call AT with the same kernels). (1) the PyTorch anchors and the GEMM suite at issue 4's
# shapes for f32/tf32/bf16/f16, cuBLAS interleaved; (2) guided tuning (40 s budget) at the odd
# shapes 4096^2 x 1000 and 64 x 8192^2, bf16 and f16; (3) the encoder layer.
# Run: B=$PWD/.devrun bash scripts/h200/callAU.sh (about 7 minutes; timeout_s 580).
set -u; . "$(dirname "$0")/env.sh"
cat $B/BUILD > $R/build.txt 2>/dev/null
pack() { tar -C $R -czf $OUT/callAU.tgz . ; }
python3 $B/torch_anchors.py --only gemm,layer --sizes 512,1024,2048,4096,8192 --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
timeout 120 $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite gemm --gemm-dtypes f32,tf32,bf16,f16 \
  --gemm-shapes 512x512x512,1024x1024x1024,2048x2048x2048,4096x4096x4096,8192x8192x8192,4000x4000x4096,64x8192x8192,256x8192x8192,4096x4096x1000 > $R/bench.log 2>&1; echo "bench rc=$?"
pack; grep -E "^\| rtx-(wgmma|simt)-default " $R/bench.log | awk -F'|' '{print $2,$3,$6}' | cut -c1-90
for s in 4096x4096x1000 64x8192x8192; do for d in bf16 f16; do
  timeout 55 $B/rtx-tune gemm $s --dtype $d --layout nn --time-budget-s 40 > $R/tune_${s}_$d.log 2>&1
  echo "tune $s $d rc=$?"; grep -E "winner|^  [0-9.]+ us|rtx / cuBLAS|took" $R/tune_${s}_$d.log | cut -c1-240 | head -4
  pack
done; done
RTX_LAYER_TUNE_S=10 timeout 100 $B/rtx-bench --out $R/layer --anchors $R/anchors.json --no-progress --suite transformer > $R/layer.log 2>&1; echo "layer rc=$?"
pack; grep -E "^\| (rtx|pytorch|torch)" $R/layer.log | cut -c1-130
