#!/usr/bin/env bash
# Call DO (any Hopper card; session 34): the thin-grid transposed defaults split K into up to 8
# slices instead of 4 (`scripts/h200/patches/thin_split8.patch`: TRANSPOSED_MAX_SPLIT 8). With
# 8 slices the rule reaches a full wave at 64 x 1024 x 8192 (64 -> 128 units) and trades 64-row
# for 128-row tiles elsewhere (fewer operand rows per unit: 256 x 1024 x 8192 64 x 128 split 4 ->
# 128 x 128 split 8). The GEMM suite, bf16 and tf32 NN, at the six shapes whose pick moves,
# main's default (base) against the patch's (s8), cuBLAS alternating in the same process, every
# row checked against the f64 reference; two rounds, separate processes, order rotated.
# Build: base = `cargo xtask gpu-bundle --out .devrun_dm --tests wgmma_gpu` at main; s8 = `cargo
# xtask gpu-bundle --out .devrun_s8 --tests none --patch scripts/h200/patches/thin_split8.patch`.
# Run: BASE=$PWD/.devrun_dm BS8=$PWD/.devrun_s8 bash scripts/h200/callDO_any.sh (carry both;
# about 3 minutes on an H100).
set -u; B=$BASE; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callDO.tgz . ; }
echo "base $(cat $BASE/BUILD)" >> $R/build.txt; echo "s8 $(cat $BS8/BUILD)" >> $R/build.txt
date -u +"start %T" >> $R/smi.txt
S=128x2048x8192,240x1536x8192,128x1024x4096,64x1024x8192,256x1024x8192,96x1024x8192
arm() {
  B=$BS8
  suite_arm $1 bf16,tf32 $S > /dev/null
  echo "$1_$i"; grep -E '^\| (rtx-wgmma-default|cublas) ' $R/s_$1_$i.log | awk -F'|' '{printf "%s %s %s\n", $2,$3,$6}' | paste - - | awk '{print $2, $3, $4, $10, $12}'
}
rotated_rounds 2 base s8
finish
