#!/usr/bin/env bash
# Device call CH (prepared in session 21, not run yet): K-major B in 64-row TMA boxes, those past
# N skipped (scripts/h200/patches/kmajor_b_boxes.patch), against main's one `bn / cluster_m`-row
# box per stage. The mirror of 959bfa3's A boxes (call CE: 192 x 8192^2 0.81x -> 1.03x), for the
# operands it leaves: tf32 reads every B K-major (the NN launch stages B as N x K), and NT / TT
# f16/bf16 problems have a K-major B. Where N is not a multiple of the tile (4000^2 x 4096 on the
# 128 x 256 tile: the last column of tiles has 96 rows of B past N), the copy engine zero-fills
# them on every k-block today. (Call CI, session 22: tf32 runs the 192 x 160 rung at 4000^2 x 4096,
# 25 tiles of 160 exactly, so its only N-edge case is the bf16 NT slice of (2).)
# (1) 3 rounds, alternating processes, order rotated: the GEMM suite, tf32 only, cuBLAS alternating,
#     at 2048^3, 4096^3, 8192^3, 4000^2 x 4096, 4096^2 x 1000 (interior and N-edge shapes);
# (2) bf16 NT, both bundles: `rtx-tune --strategy exhaustive --where` on the 128 x 256 rung's config
#     at 4096 x 4000 x 4096 (N edge) and 4096^3 (none), cuBLAS in the same process.
# Build: base = `cargo xtask gpu-bundle --out .devrun_base --tests none`; new =
# `cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu --patch scripts/h200/patches/kmajor_b_boxes.patch`.
# Run: B=$PWD/.devrun BASE=$PWD/.devrun_base bash scripts/h200/callCH.sh (about 5 minutes; timeout_s 500).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callCH.tgz . ; }
{ echo "new $(cat $B/BUILD)"; echo "base $(cat $BASE/BUILD)"; } > $R/build.txt
date -u +"start %T" >> $R/smi.txt
S=2048x2048x2048,4096x4096x4096,8192x8192x8192,4000x4000x4096,4096x4096x1000
arm() {
  local d=$B; [ $1 = base ] && d=$BASE
  local t=60; [ $i = 1 ] && t=200
  timeout $t $d/rtx-bench --out $R/b --no-progress --suite gemm --gemm-dtypes tf32 --gemm-shapes $S > $R/s_$1_$i.log 2>&1
  echo "$1_$i rc=$?"
}
rotated_rounds 3 base new
W='{"bm":128,"bn":256,"consumers":2,"wgmma_n":256,"stages":4,"cluster_m":1,"split_k":1,"pingpong":false,"split_n":false,"tma_store":true,"persistent":true,"raster_group":8}'
for arm in base new; do
  d=$B; [ $arm = base ] && d=$BASE
  for s in 4096x4000x4096 4096x4096x4096; do
    timeout 80 $d/rtx-tune gemm $s --dtype bf16 --layout nt --strategy exhaustive --where "$W" > $R/ex_${arm}_$s.log 2>&1
    echo "ex $arm $s rc=$?"; grep -E "^  #1 |cuBLAS:" $R/ex_${arm}_$s.log | cut -c1-60
  done
  pack
done
finish
