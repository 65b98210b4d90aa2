#!/usr/bin/env bash
# Device call CE (session 21): K-major A in 64-row TMA boxes, those past M skipped (wgmma
# VERSION 7), against one bm-row box per stage (VERSION 6). Call CC ran the same kernel and grid
# slower the more of the A box lay past M (192 x 64 tile: 61.7 us at M = 192, 71.3 us at 160).
# Arms in alternating processes, order rotated, 3 rounds: base = $BASE (main 9303d73 + the
# space's one-row family), new = $B (the same + 64-row A boxes); the GEMM suite, bf16 + f16,
# cuBLAS alternating inside each, at edge shapes (M = 160 / 192 / 256 x 8192^2, 4000^2 x 4096,
# 4096^2 x 1000) and interior ones (1024^3, 4096^3, 8192^3). Then, new bundle only, exhaustive
# slices at M = 160 and 192 (N = K = 8192, bf16): the 192 x 64 family and 64 x 192 in groups of 8.
# Build: base = `cargo xtask gpu-bundle --out .devrun_base --tests none` before the change, new =
# `cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu` after it.
# Run: B=$PWD/.devrun BASE=$PWD/.devrun_base bash scripts/h200/callCE.sh (about 5 minutes; timeout_s 500).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callCE.tgz . ; }
{ echo "new $(cat $B/BUILD) (VERSION 7)"; echo "base $(cat $BASE/BUILD) (VERSION 6)"; } > $R/build.txt
date -u +"start %T" >> $R/smi.txt
S=160x8192x8192,192x8192x8192,256x8192x8192,4000x4000x4096,4096x4096x1000,1024x1024x1024,4096x4096x4096,8192x8192x8192
arm() { case $1 in base) arm_bench base $BASE $S 400 ;; new) arm_bench new $B $S 400 ;; esac; }
rotated_rounds 3 base new
date -u +"ab end %T" >> $R/smi.txt
ex() { # ex NAME SHAPE WHERE
  timeout 80 $B/rtx-tune gemm $2 --dtype bf16 --layout nn --strategy exhaustive --where "$3" > $R/ex_$1.log 2>&1
  echo "ex $1 rc=$?"; grep -E "^  #[1-4] |cuBLAS:" $R/ex_$1.log | cut -c1-150
  pack
}
for m in 160 192; do
  ex ${m}_bm192bn64 ${m}x8192x8192 '{"bm":192,"bn":64}'
  ex ${m}_bm64bn192 ${m}x8192x8192 '{"bm":64,"bn":192,"raster_group":8,"tma_store":true,"stages":6}'
done
finish
