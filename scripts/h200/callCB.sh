#!/usr/bin/env bash
# Device call CB (session 20): the 64 x 128 rung (8 stages, TMA store, persistent) in row-major
# tile order against groups of 8 tile rows, bf16 NN, at 128 x 8192^2, 192 x 8192^2 and 1024^3:
# `rtx-tune --strategy exhaustive --where` over that slice, cuBLAS in the same process, every
# candidate checked against it. Ran right after call CA on the same warm machine (its kernels
# were in the bundle's cache).
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu
# Run: B=$PWD/.devrun bash scripts/h200/callCB.sh (about 10 s warm; 2 minutes compiling).
set -u; . "$(dirname "$0")/env.sh"
W='{"bm":64,"bn":128,"consumers":1,"cluster_m":1,"cluster_k":1,"split_k":1,"pingpong":false,"tma_store":true,"persistent":true,"stages":8,"wgmma_n":128,"bk":64,"split_n":false}'
for s in 128x8192x8192 192x8192x8192 1024x1024x1024; do
  timeout 50 $B/rtx-tune gemm $s --dtype bf16 --layout nn --strategy exhaustive --where "$W" > $R/ex_$s.log 2>&1
  echo "$s rc=$?"; grep -E "^ *#|cuBLAS|winner" $R/ex_$s.log | cut -c1-120 | head -8
done
tar -C $R -czf $OUT/callCB.tgz .
