#!/usr/bin/env bash
# Device call R (session 5): the direct-store epilogue without per-pair bounds tests on interior
# tiles (and call Q's TMA-store change). Every wgmma GPU case and the Synth API tests against the
# f64 reference; the PyTorch anchors and the full GEMM suite (bf16, f16); then exhaustive slices
# of the 64x128 / 64x64 rungs at 1024^3 / 512^3 (persistent, TMA store or not).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callR.tgz . ; }
for t in wgmma_gpu synth_gpu; do
  timeout 150 $B/tests/rtx_synthesis__test__$t --test-threads=1 --nocapture > $R/test_$t.log 2>&1
  echo "test $t rc=$?"; grep -E "^test result|FAIL|panicked" $R/test_$t.log | cut -c1-110 | head -6
done
pack
python3 $B/torch_anchors.py --only gemm --sizes 512,1024,4096,8192 --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
timeout 170 $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite gemm --gemm-dtypes bf16,f16 \
  --gemm-shapes 512x512x512,1024x1024x1024,4096x4096x4096,8192x8192x8192,4000x4000x4096,64x8192x8192,256x8192x8192,4096x4096x1000 > $R/bench.log 2>&1; echo "bench rc=$?"
pack; grep -E "^\| (rtx-wgmma-default|cublas) " $R/bench.log | cut -c1-100 | head -40
ex() { # shape tag where-json
  timeout 45 $B/rtx-tune gemm $1 --dtype bf16 --layout nn --strategy exhaustive --time-budget-s 30 --no-store --where "$3" \
    --record-fixture $R/slice_$2.json > $R/slice_$2.log 2>&1
  echo "slice $2 rc=$?"; grep -E "#[1-6]|cuBLAS:" $R/slice_$2.log | sed 's/"bk":64,//' | cut -c1-230 | head -7
}
ex 1024x1024x1024 1024_rung '{"bm":64,"bn":128,"consumers":1,"wgmma_n":128,"stages":8,"cluster_m":1,"split_k":1,"pingpong":false,"split_n":false}'
ex 512x512x512 512_rung '{"bm":64,"bn":64,"consumers":1,"wgmma_n":64,"stages":10,"cluster_m":1,"split_k":1,"pingpong":false,"split_n":false}'
pack
