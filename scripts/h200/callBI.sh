#!/usr/bin/env bash
# Device call BI (prepared in session 14, for the next lease that is an H200): issue 4's figures
# for the 128-byte L2 promotion build (ded427e; measured only on an H100 so far, call BH).
# Check `smi.txt` first: on an H100 this is one more H100 sample, not the H200 figure.
# (1) the PyTorch GEMM anchors and the suite at issue 4's shapes for f32/tf32/bf16/f16, cuBLAS
# alternating with each row; (2) six more rounds at 512^3 / 1024^3 bf16+f16 (the bar at
# parity on the H200 in session 11); (3) guided tuning at 1024^3 (40 s budget), bf16 and f16;
# (4) the suite at 1024^3 again, serving the tuned winners; (5) the wgmma GPU cases.
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu
# Run: B=$PWD/.devrun bash scripts/h200/callBI.sh (about 8 minutes; timeout_s 560).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBI.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
timeout 150 python3 $B/torch_anchors.py --only gemm --sizes 512,1024,2048,4096,8192 --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
timeout 150 $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite gemm --gemm-dtypes f32,tf32,bf16,f16 \
  --gemm-shapes $ISSUE4_SHAPES > $R/bench.log 2>&1; echo "bench rc=$?"
grep -E "^\| rtx-(wgmma|simt)-default " $R/bench.log | awk -F'|' '{print $2,$3,$6}' | cut -c1-90
pack
for i in 1 2 3 4 5 6; do
  timeout 40 $B/rtx-bench --out $R/b --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes 512x512x512,1024x1024x1024 > $R/s_$i.log 2>&1
  echo "small_$i rc=$? $(row $R/s_$i.log)"
done
rm -rf $R/b; pack
for d in bf16 f16; do
  timeout 55 $B/rtx-tune gemm 1024x1024x1024 --dtype $d --layout nn --time-budget-s 40 > $R/tune_1024_$d.log 2>&1
  echo "tune 1024^3 $d rc=$?"; grep -E "winner|rtx / cuBLAS|took" $R/tune_1024_$d.log | cut -c1-200 | head -3
  pack
done
# The tuned winners in the suite's own protocol (cuBLAS alternating): rtx-tuned-wgmma rows.
timeout 40 $B/rtx-bench --out $R/t --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes 1024x1024x1024 > $R/tuned_1024.log 2>&1
echo "tuned_1024 rc=$?"; grep -E '^\| (rtx-wgmma-default|rtx-tuned-wgmma|cublas) ' $R/tuned_1024.log | awk -F'|' '{print $2, $3, $6}'
rm -rf $R/t; pack
T=$(ls $B/tests/*wgmma_gpu* | head -1)
timeout 200 $T --test-threads 1 > $R/test_wgmma_gpu.log 2>&1
echo "wgmma_gpu rc=$?"; grep -E "test result|FAILED|panicked" $R/test_wgmma_gpu.log | head -5
date -u +"end %T" >> $R/smi.txt
pack
