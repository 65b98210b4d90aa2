#!/usr/bin/env bash
# Device call O (session 5): per-warp TMA stores in the epilogue (each warp stores its own 16 rows
# after a __syncwarp; no warpgroup barrier). Its GPU cases (ts_, sn_) against the f64 reference;
# A/B of the GEMM suite on the shapes whose default rung uses the TMA store, base build
# (.devrun/base = cdf9f93) vs new, alternating; then the PyTorch anchors and the full GEMM suite
# (bf16, f16) of the new build.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callO.tgz . ; }
for c in ts_ sn_; do RTX_WGMMA_CASE=$c timeout 100 $B/tests/rtx_synthesis__test__wgmma_gpu wgmma_gemm_matches_the_f64_reference --test-threads=1 --nocapture > $R/test_wgmma_$c.log 2>&1
echo "test wgmma $c rc=$?"; grep -E "^test result|FAIL|panicked" $R/test_wgmma_$c.log | cut -c1-100 | head -6; done
SH=4096x4096x4096,4000x4000x4096,4096x4096x1000,256x8192x8192
for v in base new base new; do
  bin=$B/rtx-bench; [ $v = base ] && bin=$B/base/rtx-bench
  timeout 100 $bin --out $R/ab_$v --no-progress --suite gemm --gemm-dtypes bf16 --gemm-shapes $SH > $R/ab_$v.log 2>&1; echo "ab $v rc=$?"
  grep -E "^\| rtx-wgmma-default " $R/ab_$v.log | cut -c1-100
done
pack
python3 $B/torch_anchors.py --only gemm --sizes 512,1024,4096,8192 --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
timeout 170 $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite gemm --gemm-dtypes bf16,f16 \
  --gemm-shapes 512x512x512,1024x1024x1024,4096x4096x4096,8192x8192x8192,4000x4000x4096,64x8192x8192,256x8192x8192,4096x4096x1000 > $R/bench.log 2>&1; echo "bench rc=$?"
pack; grep -E "^\| (rtx-wgmma-default|cublas) " $R/bench.log | cut -c1-100 | head -40
