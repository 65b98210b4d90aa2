#!/usr/bin/env bash
# Device call CF (session 21): a 64 x 192 rung (one consumer, 6 stages, groups of 8 where B
# streams) that the cost model may pick only where its tiles fit one wave. Call CE measured it
# at 160 / 192 x 8192^2 (60.4 us against 61.8 / 60.9 for the 128 x 128 rung, cuBLAS 59.5 / 63.1,
# H100); the model also moves 246 other scanned shapes to it. Arms in alternating processes, order
# rotated, 3 rounds: base = $BASE (the ladder without it), new = $B (with it), both with 64-row
# A boxes (wgmma VERSION 7); the GEMM suite, bf16 + f16, cuBLAS alternating inside each, at shapes
# the rung takes over (from 128 x 128) and one it does not (256 x 8192^2).
# Build: base = the tree without the rung, `cargo xtask gpu-bundle --out .devrun_base --tests none`;
# new = with it, `cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu`.
# Run: B=$PWD/.devrun BASE=$PWD/.devrun_base bash scripts/h200/callCF.sh (about 5 minutes; timeout_s 500).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callCF.tgz . ; }
{ echo "new $(cat $B/BUILD) (VERSION 7, 64 x 192 rung)"; echo "base $(cat $BASE/BUILD) (VERSION 7, no 64 x 192 rung)"; } > $R/build.txt
date -u +"start %T" >> $R/smi.txt
S=160x8192x8192,192x8192x8192,192x6144x4096,384x4096x4096,768x2048x4096,1024x1536x1024,4096x384x4096,8192x192x8192,512x3072x1000,96x11008x4096,256x8192x8192
arm() {
  local d=$B; [ $1 = base ] && d=$BASE
  local t=60; [ $i = 1 ] && t=200
  timeout $t $d/rtx-bench --out $R/b --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes $S > $R/s_$1_$i.log 2>&1
  echo "$1_$i rc=$?"
}
rotated_rounds 3 base new
finish
