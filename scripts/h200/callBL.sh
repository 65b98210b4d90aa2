#!/usr/bin/env bash
# Device call BL (session 16): issue 4's figures and the encoder layer for the build with the
# 128 x 192 default rung (ad4c6ec; calls BI and BK measured the build before it, on an H100).
# Check `smi.txt` first: on an H100 this is one more H100 sample, not the H200 figure.
# (1) the PyTorch GEMM anchors and the suite at issue 4's shapes for f32/tf32/bf16/f16, cuBLAS
# alternating with each row; (2) six more rounds at 512^3 / 1024^3 bf16+f16; (3) the GEMM suite
# at the layer's four shapes; (4) the transformer suite (10 s of layer tuning), two rounds;
# (3b) six shapes the rung moved that were never measured with it, A/B (experiment bundle);
# (5) the wgmma GPU cases (the FFN-down default case now serves the 128 x 192 rung).
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu, then cargo xtask gpu-bundle
# --out .devrun/exp --tests none --patch docs/runs/2026-12-05/callBL/exp.patch
# Run: B=$PWD/.devrun bash scripts/h200/callBL.sh (about 5 minutes; timeout_s 420). The layer
# steps (3), (3b), (4) run first: they decide the adopted change on any card.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBL.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
timeout 60 $B/rtx-bench --out $R/b --no-progress --suite gemm --gemm-dtypes bf16,f16 \
  --gemm-shapes 4096x768x3072,4096x2304x768,4096x768x768,4096x3072x768 > $R/g_layer.log 2>&1
echo "layer gemms rc=$? $(row $R/g_layer.log)"
# The rung also moves shapes nobody measured with it (189 of a 845-shape grid of 256..16384 x
# 256..16384 x 768..8192, bf16 NN): six of them, A/B in alternating processes of the experiment
# bundle (RTX_EXP_NO_R192=1: the ladder before ad4c6ec), two rounds per arm.
MOVED=3072x3072x4096,1024x3072x4096,2304x8192x4096,6144x3072x4096,4096x1536x4096,11008x512x4096
for i in 1 2; do
  for arm in norung rung; do
    E=0; [ $arm = norung ] && E=1
    RTX_EXP_NO_R192=$E timeout 60 $B/exp/rtx-bench --out $R/b --no-progress --suite gemm --gemm-dtypes bf16 \
      --gemm-shapes $MOVED > $R/m_${arm}_$i.log 2>&1
    echo "moved $arm $i rc=$? $(row $R/m_${arm}_$i.log)"
  done
done
rm -rf $R/b; pack
for i in 1 2; do
  RTX_LAYER_TUNE_S=10 timeout 90 $B/rtx-bench --out $R/b --no-progress --suite transformer > $R/t_$i.log 2>&1
  echo "layer $i rc=$?"; grep -E "^\| rtx encoder" $R/t_$i.log | awk -F'|' '{print $2, $3, $6, $7}' | cut -c1-120
done
rm -rf $R/b; pack
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
T=$(ls $B/tests/*wgmma_gpu* | head -1)
timeout 200 $T --test-threads 1 > $R/test_wgmma_gpu.log 2>&1
echo "wgmma_gpu rc=$?"; grep -E "test result|FAILED|panicked" $R/test_wgmma_gpu.log | head -5
date -u +"end %T" >> $R/smi.txt
pack
