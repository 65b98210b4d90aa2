#!/usr/bin/env bash
# Device call BV (session 19): call BU showed the early ring fill's loads themselves cost 0.5 us
# at 1024^3 (its bookkeeping and fence cost nothing), and call BT that issuing only the first
# k-block early cost 1 us. Does the time of the producer's first load matter the other way too?
# Arms (all without the early fill, RTX_EXP_HEAD=0; alternating processes, order rotated), 6
# rounds of 512^3/1024^3/2048^3 bf16+f16, cuBLAS timed alternately inside each:
#   h0 = as the base; dN = the producer thread sleeps N ns (__nanosleep, RTX_EXP_DELAY=N) before
#   its first load.
# Build (new = main 1988166 + docs/runs/2026-12-06/callBS/exp.patch, `git apply` it first): `cargo xtask gpu-bundle --out .devrun --tests none`.
# Run: B=$PWD/.devrun bash scripts/h200/callBV.sh (about 2 minutes; timeout_s 300).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBV.tgz . ; }
echo "new $(cat $B/BUILD)" > $R/build.txt
date -u +"start %T" >> $R/smi.txt
arm() {
  local e=
  case $1 in h0) ;; *) e=${1#d} ;; esac
  arm_bench $1 $B 512x512x512,1024x1024x1024,2048x2048x2048 200 RTX_EXP_HEAD=0 ${e:+RTX_EXP_DELAY=$e}
}
rotated_rounds 6 h0 d150 d400 d1000 d3000
finish
