#!/usr/bin/env bash
# Superseded by call DB (session 29: scripts/h200/callDB.sh runs the same A/B with a third arm); never ran.
# Call CZ (session 28): the transposed product on the H200 at bf16/f16 128 and 160 x 8192^2, the
# two shapes below cuBLAS (session 26: 0.99x and 0.88x). Call CY ran on an H100 only (there the
# best swap_ab configs tie or trail the 64-row ladder tiles by 2-3%, as cuBLAS does).
# (1) exhaustive slices of the swap_ab configs (experimental space) with cuBLAS in the same
#     process, every candidate checked against it (base bundle);
# (2) 3 rounds, alternating processes, order rotated: the GEMM suite (bf16, f16) at 128 and 160
#     x 8192^2 from base (main: the ladder's 64-row tiles) and sw (main plus the swap_ab
#     small-M default: 64 x 128 at 128, 64 x 160 at 160, one consumer, 8 / 6 stages); and at
#     96 x 11008 x 4096 (an FFN shape the rule also moves, 64 x 128 there).
# Build: base = `cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu` at main; sw = `cargo
# xtask gpu-bundle --out .devrun_sw --tests none --patch scripts/h200/patches/swap_small_m_default.patch`.
# Run: BASE=$PWD/.devrun B=$PWD/.devrun_sw bash scripts/h200/h200_only.sh scripts/h200/callCZ.sh
# (carry .devrun and .devrun_sw; about 4 minutes; timeout_s 330). ROUNDS=2 shortens it.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callCZ.tgz . ; }
{ echo "sw $(cat $B/BUILD)"; echo "base $(cat $BASE/BUILD)"; } > $R/build.txt
date -u +"start %T" >> $R/smi.txt
for shape in 160x8192x8192 128x8192x8192; do
  timeout 50 $BASE/rtx-tune gemm $shape --dtype bf16 --layout nn --strategy exhaustive --time-budget-s 25 --where '{"swap_ab":true}' --experimental > $R/slice_$shape.log 2>&1
  echo "slice $shape rc=$?"; grep -E "searched|#1 |#2 |#3 |cuBLAS:|rtx / cuBLAS" $R/slice_$shape.log | sed 's/"bk":64,//; s/"cluster_k":1,//; s/"persistent":true,//; s/"pingpong":false,//; s/"split_k":1,//; s/"split_n":false,//' | cut -c1-200
  pack
done
arm() { suite_arm $1 bf16,f16 128x8192x8192,160x8192x8192,96x11008x4096; }
rotated_rounds ${ROUNDS:-3} base sw
finish
