#!/usr/bin/env bash
# Call DJ (any Hopper card; session 33): the transposed product with split-K (swap_ab, split_k
# 2-4; tf32 with the user's B read into registers, f16/bf16 from the stage), for thin grids
# where main's tf32 NN default runs at 0.75x cuBLAS (call DI, H100: 128 x 2048 x 8192 61.3 us,
# 240 x 1536 x 8192 61.4 us; no split-K there). (1) The `swsk_` cases against the f64 reference
# (edges, K tails, the full epilogue, batches, NT / TN, 4-SM persistent loops). (2) rtx-tune
# exhaustive slices '{"swap_ab":true,"split_k":S}' (S = 2, 3, 4: 64 or 128 of N by 64-160 of M,
# 6 or 8 stages), tf32 NN at three thin shapes (cuBLAS in the same process, every candidate
# checked against it; call DG timed the unsplit tiles). (3) The GEMM suite, tf32, at the same
# shapes: main's default, cuBLAS alternating.
# Build: `cargo xtask gpu-bundle --out .devrun_sk --tests wgmma_gpu` at the commit that added
# swap_ab split-K.
# Run: BSK=$PWD/.devrun_sk bash scripts/h200/callDJ_any.sh (carry .devrun_sk; about 5 minutes; T=SECONDS per slice, default 25).
set -u; B=$BSK; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callDJ.tgz . ; }
echo "sk $(cat $BSK/BUILD)" >> $R/build.txt
date -u +"start %T" >> $R/smi.txt
wgmma_f64_test 90 swsk_ test_swsk.log
pack
S=128x2048x8192,240x1536x8192,128x1024x4096
for w in 128x2048x8192:2 128x2048x8192:4 240x1536x8192:2 240x1536x8192:4 128x1024x4096:2 128x1024x4096:4 128x2048x8192:3 240x1536x8192:3; do
  shape=${w%:*}; k=${w#*:}
  timeout 50 $B/rtx-tune gemm $shape --dtype tf32 --layout nn --family wgmma --strategy exhaustive --time-budget-s ${T:-25} --where "{\"swap_ab\":true,\"split_k\":$k}" --experimental > $R/slice_${shape}_k$k.log 2>&1
  echo "slice $shape k$k rc=$?"; grep -E "searched|#1 |#2 |#3 |cuBLAS:|rtx / cuBLAS|failed" $R/slice_${shape}_k$k.log | sed 's/"cluster_k":1,//; s/"persistent":true,//; s/"pingpong":false,//; s/"tma_store":false,//; s/"cluster_m":1,//; s/"cluster_n":1,//; s/"split_n":false,//; s/"swap_ab":true,//' | cut -c1-200 | head -7
  pack
done
i=1 suite_arm served tf32 $S
grep -E '^\| (rtx-wgmma-default|cublas) ' $R/s_served_1.log | awk -F'|' '{printf "%s %s %s\n", $2,$3,$6}'
finish
