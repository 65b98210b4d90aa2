#!/usr/bin/env bash
# Device call BU (session 19): the controls call BT lacked. In call BT (H100) every early ring
# fill was slower than the base at 1024^3, the more so the fewer k-blocks it issued early (head
# 1: +1.05 us, 8: +0.5 us). Is it the early loads, the new producer's bookkeeping (runtime
# s / ph / skip) or the proxy fence before the early loads? Arms, alternating processes (order
# rotated), 6 rounds of 512^3/1024^3/2048^3 bf16+f16, cuBLAS timed alternately inside each:
#   base = 6786426; h0 = new code with no early load (RTX_EXP_HEAD=0); h8 = new (all stages
#   early); nf8 / nf0 = h8 / h0 without the fence.proxy.async (RTX_EXP_NOFENCE=1).
# Build (new = main 1988166 + docs/runs/2026-12-06/callBS/exp.patch, `git apply` it first): `cargo xtask gpu-bundle --out .devrun --tests none`, base bundle at .devrun/base.
# Run: B=$PWD/.devrun bash scripts/h200/callBU.sh (about 2 minutes; timeout_s 300).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBU.tgz . ; }
{ echo "new $(cat $B/BUILD)"; echo "base $(cat $B/base/BUILD)"; } > $R/build.txt
date -u +"start %T" >> $R/smi.txt
arm() {
  local d=$B h= f=
  case $1 in base) d=$B/base ;; h0) h=0 ;; h8) ;; nf8) f=1 ;; nf0) f=1 h=0 ;; esac
  arm_bench $1 $d 512x512x512,1024x1024x1024,2048x2048x2048 300 ${h:+RTX_EXP_HEAD=$h} ${f:+RTX_EXP_NOFENCE=$f}
}
rotated_rounds 6 base h0 h8 nf8 nf0
finish
