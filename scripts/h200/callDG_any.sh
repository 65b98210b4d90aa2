#!/usr/bin/env bash
# Call DG (any Hopper card; session 32): tf32's transposed product without the staging pre-pass
# (c6601bb): a row-major B is the kernel's M-major A, loaded from the stage into registers
# (register-A wgmma m64nNk8). (1) The `swtf_` cases against the f64 reference (NN register-A
# edges, K tails, batches, clusters, cluster_n pairs, column-split consumers, the full epilogue;
# NT read by descriptor). (2) rtx-tune exhaustive slices '{"swap_ab":true}' of tf32 NN at 128,
# 160 and 256 x 8192^2 (cuBLAS in the same process, every candidate checked against it;
# `--family wgmma`, since `gemm` served these with mma: session 32's run lacked it and its slices
# failed at once). (3) The GEMM suite, tf32, at the same shapes: what was served there before
# 3a3fdb8 (mma.sync split-K, 0.46-0.67x cuBLAS on the H200) against cuBLAS in the same process.
# Ran as call DG (docs/runs/2026-12-07/callDG_h100).
# Build: `cargo xtask gpu-bundle --out .devrun_rs --tests wgmma_gpu` on branch tf32-rs (c6601bb).
# Run: BRS=$PWD/.devrun_rs bash scripts/h200/callDG_any.sh (carry .devrun_rs; about 3 minutes).
set -u; B=$BRS; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callDG.tgz . ; }
echo "rs $(cat $BRS/BUILD)" >> $R/build.txt
date -u +"start %T" >> $R/smi.txt
wgmma_f64_test 90 swtf_ test_swtf.log
pack
for shape in 128x8192x8192 160x8192x8192 256x8192x8192; do
  timeout 60 $B/rtx-tune gemm $shape --dtype tf32 --layout nn --family wgmma --strategy exhaustive --time-budget-s 30 --where '{"swap_ab":true}' --experimental > $R/slice_$shape.log 2>&1
  echo "slice $shape rc=$?"; grep -E "searched|#1 |#2 |#3 |cuBLAS:|rtx / cuBLAS|failed" $R/slice_$shape.log | sed 's/"cluster_k":1,//; s/"persistent":true,//; s/"pingpong":false,//; s/"split_k":1,//; s/"tma_store":false,//' | cut -c1-220 | head -8
  pack
done
i=1 suite_arm served tf32 128x8192x8192,160x8192x8192,256x8192x8192
finish
