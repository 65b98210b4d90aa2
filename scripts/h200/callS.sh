#!/usr/bin/env bash
# NOT RUN YET: session 5 had no device time left for it; run it first next session.
# Device call S (session 5): the small-shape ladder rungs (64x128 s8, 64x64 s10) now persistent
# with the TMA-store epilogue (call R's slices: 1024^3 9.2 us vs 10.3 direct). The PyTorch
# anchors and the GEMM suite at the shapes these rungs serve (bf16, f16).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callS.tgz . ; }
python3 $B/torch_anchors.py --only gemm --sizes 512,1024 --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
timeout 120 $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite gemm --gemm-dtypes bf16,f16 \
  --gemm-shapes 512x512x512,1024x1024x1024,64x8192x8192 > $R/bench.log 2>&1; echo "bench rc=$?"
pack; grep -E "^\| (rtx-wgmma-default|cublas) " $R/bench.log | cut -c1-100 | head -20
