#!/usr/bin/env bash
# Call DL (any Hopper card; session 33): bf16 at thin grids (a small M and N, long K), where
# tf32 NN gained 1.4-2.3x from the transposed product with split-K (call DK). (1) The GEMM suite,
# bf16 and f16, main's default (the ladder's rungs, split-K where the model picks it) against
# cuBLAS alternating in the same process, at call DK's six thin shapes. (2) rtx-tune exhaustive
# slices '{"swap_ab":true,"split_k":S}' (S = 2, 4), bf16 NN, at three of them (cuBLAS in the same
# process, every candidate checked against it).
# Build: `cargo xtask gpu-bundle --out .devrun_dk --tests wgmma_gpu` at 821aab5 or later.
# Run: BDK=$PWD/.devrun_dk bash scripts/h200/callDL_any.sh (carry .devrun_dk; about 2 minutes).
set -u; B=$BDK; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callDL.tgz . ; }
echo "dk $(cat $BDK/BUILD)" >> $R/build.txt
date -u +"start %T" >> $R/smi.txt
S=128x2048x8192,240x1536x8192,128x1024x4096,64x1024x8192,256x1024x8192,160x2048x4096
i=1 suite_arm thin bf16,f16 $S > /dev/null
grep -E '^\| (rtx-wgmma-default|cublas) ' $R/s_thin_1.log | awk -F'|' '{printf "%s %s %s\n", $2,$3,$6}' | paste - - | awk '{print $2, $3, $4, $10, $11, $12}'
pack
for w in 128x2048x8192:2 128x2048x8192:4 240x1536x8192:2 240x1536x8192:4 128x1024x4096:4 256x1024x8192:4; do
  shape=${w%:*}; k=${w#*:}
  timeout 45 $B/rtx-tune gemm $shape --dtype bf16 --layout nn --family wgmma --strategy exhaustive --time-budget-s ${T:-20} --where "{\"swap_ab\":true,\"split_k\":$k}" --experimental > $R/slice_${shape}_k$k.log 2>&1
  echo "slice $shape k$k rc=$?"; grep -E "#1 |#2 |cuBLAS:" $R/slice_${shape}_k$k.log | sed 's/"bk":64,//; s/"raster_group":1,//; s/"cluster_k":1,//; s/"persistent":true,//; s/"pingpong":false,//; s/"tma_store":false,//; s/"cluster_m":1,//; s/"cluster_n":1,//; s/"split_n":false,//; s/"swap_ab":true,//' | cut -c1-150
  pack
done
finish
