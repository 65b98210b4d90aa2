#!/usr/bin/env bash
# Device call AC (session 7): the build where the default ladder has a 192 x 160 rung (three
# consumers, TMA-store epilogue in 64-byte boxes) that the cost model picks at 4000^2 x 4096 and
# at the encoder layer's FFN-down GEMM (4096 x 768 x 3072). (1) GPU tests: synth_gpu (default
# configs end to end) and the wgmma default/t160c3 cases; (2) the PyTorch anchors and the GEMM
# suite at issue 4's shapes for f32/tf32/bf16/f16, cuBLAS interleaved; (3) the FFN-down GEMM:
# both tiles against cuBLAS in one process; (4) the encoder layer.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAC.tgz . ; }
timeout 60 $B/tests/rtx_synthesis__test__synth_gpu --test-threads=1 > $R/test_synth_gpu.log 2>&1; echo "synth_gpu rc=$?"; grep -E "^test result|panicked" $R/test_synth_gpu.log | head -3
RTX_WGMMA_CASE=default,t160c3_ts timeout 90 $B/tests/rtx_synthesis__test__wgmma_gpu --test-threads=1 --nocapture wgmma_gemm_matches > $R/test_wgmma_gpu.log 2>&1
echo "test wgmma_gpu rc=$? pass=$(grep -c ^PASS $R/test_wgmma_gpu.log)"; grep -E "^test result|FAIL|panicked" $R/test_wgmma_gpu.log | cut -c1-160 | head -4
pack
python3 $B/torch_anchors.py --only gemm,layer --sizes 512,1024,2048,4096,8192 --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
timeout 330 $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite gemm --gemm-dtypes f32,tf32,bf16,f16 \
  --gemm-shapes 512x512x512,1024x1024x1024,2048x2048x2048,4096x4096x4096,8192x8192x8192,4000x4000x4096,64x8192x8192,256x8192x8192,4096x4096x1000 > $R/bench.log 2>&1; echo "bench rc=$?"
pack; grep -E "^\| (rtx-wgmma-default|rtx-simt-default|cublas) " $R/bench.log | cut -c1-100 | head -80
for w in '{"bm":192}' '{"bm":128,"bn":256,"consumers":2,"split_n":false,"cluster_m":1,"stages":4}'; do
  timeout 40 $B/rtx-tune gemm 4096x768x3072 --dtype bf16 --layout nn --strategy exhaustive --where "$w" --no-store > $R/ffn_$(echo $w | tr -dc 0-9).log 2>&1
  echo "ffn slice $w rc=$?"; grep -E "^  #|cuBLAS:" $R/ffn_$(echo $w | tr -dc 0-9).log | cut -c1-60 | head -5
done
pack
RTX_LAYER_TUNE_S=10 timeout 110 $B/rtx-bench --out $R/layer --anchors $R/anchors.json --no-progress --suite transformer > $R/layer.log 2>&1; echo "layer rc=$?"
pack; grep -E "^\| (rtx|pytorch|torch)" $R/layer.log | cut -c1-130
