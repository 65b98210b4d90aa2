#!/usr/bin/env bash
# Device call BX (session 19): the tile order with one runtime division (call BW's winning arm,
# now for full raster groups too), against the old tile_coords, plus the wgmma f64-reference
# test of the candidate. Arms (alternating processes, order rotated), 5 rounds of
# 512^3/1024^3/2048^3 bf16+f16, cuBLAS timed alternately inside each process:
#   old = the old tile_coords (RTX_EXP_OLDCOORDS=1, main 7551a6a's code);
#   new = the candidate (no switch);
#   r1 = the candidate without the full-group fast path (RTX_EXP_NOR8=1; 2048^3's default is
#        raster 8).
# Build: `cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu` of the candidate with the
# two temporary switches (docs/runs/2026-12-06/callBX/exp.patch).
# Run: B=$PWD/.devrun bash scripts/h200/callBX.sh (about 2 minutes; timeout_s 280).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBX.tgz . ; }
echo "new $(cat $B/BUILD)" > $R/build.txt
date -u +"start %T" >> $R/smi.txt
arm() {
  local v=
  case $1 in old) v="RTX_EXP_OLDCOORDS=1" ;; r1) v="RTX_EXP_NOR8=1" ;; esac
  arm_bench $1 $B 512x512x512,1024x1024x1024,2048x2048x2048 200 $v
}
rotated_rounds 5 old new r1
wgmma_f64_test 120
finish
