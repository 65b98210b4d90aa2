#!/usr/bin/env bash
# Device call BT (session 19): call BS found the early ring fill 2% faster at 512^3 (64x64, 10
# stages) and 2048^3 but 5% slower at 1024^3 (64x128, 8 stages) on an H100. Is it the burst of
# all STAGES k-blocks at once? Arms, in alternating processes (order rotated), 6 rounds of
# 512^3/1024^3/2048^3 bf16+f16, cuBLAS timed alternately inside each process:
#   base = 6786426 (kernels as ad4c6ec); new = early fill of all stages; hN = the early fill
#   capped at N k-blocks (experiment switch RTX_EXP_HEAD=N), the rest issued by the producer loop.
# Build (new = main 1988166 + docs/runs/2026-12-06/callBS/exp.patch, `git apply` it first): `cargo xtask gpu-bundle --out .devrun --tests none` (new, with the switch), base bundle at
# .devrun/base.
# Run: B=$PWD/.devrun bash scripts/h200/callBT.sh (about 2.5 minutes; timeout_s 300).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBT.tgz . ; }
{ echo "new $(cat $B/BUILD)"; echo "base $(cat $B/base/BUILD)"; } > $R/build.txt
date -u +"start %T" >> $R/smi.txt
arm() {
  local d=$B e=
  case $1 in base) d=$B/base ;; new) ;; *) e=${1#h} ;; esac
  arm_bench $1 $d 512x512x512,1024x1024x1024,2048x2048x2048 400 ${e:+RTX_EXP_HEAD=$e}
}
rotated_rounds 6 base new h1 h2 h4
finish
