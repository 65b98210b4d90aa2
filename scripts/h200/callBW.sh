#!/usr/bin/env bash
# Device call BW (session 19): call BV showed the producer's first load is on the critical path
# (a 150 ns sleep before it cost 1-2%), and calls BS-BU that holding the block barrier costs
# too. Shorten the producer's path from the barrier to its first load without holding the
# barrier. Arms (env switches read at codegen time; none set = main's code), alternating
# processes, order rotated, 6 rounds of 512^3/1024^3/2048^3 bf16+f16, cuBLAS timed alternately
# inside each process:
#   base = main's code;
#   F = the row-major tile order with one division (RTX_EXP_FASTDIV);
#   D = the producer's setmaxnreg.dec before the block barrier (RTX_EXP_DECFIRST; split_k 1);
#   FD = both;
#   FDA = both, and the producer arrives at the barrier without waiting (RTX_EXP_ARRIVE).
# Build (new = main 7551a6a + docs/runs/2026-12-06/callBW/exp.patch, `git apply` it first):
# `cargo xtask gpu-bundle --out .devrun --tests none`.
# Run: B=$PWD/.devrun bash scripts/h200/callBW.sh (about 2 minutes; timeout_s 300).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBW.tgz . ; }
echo "new $(cat $B/BUILD)" > $R/build.txt
date -u +"start %T" >> $R/smi.txt
arm() {
  local v=
  case $1 in F) v="RTX_EXP_FASTDIV=1" ;; D) v="RTX_EXP_DECFIRST=1" ;; FD) v="RTX_EXP_FASTDIV=1 RTX_EXP_DECFIRST=1" ;;
    FDA) v="RTX_EXP_FASTDIV=1 RTX_EXP_DECFIRST=1 RTX_EXP_ARRIVE=1" ;; esac
  arm_bench $1 $B 512x512x512,1024x1024x1024,2048x2048x2048 200 $v
}
rotated_rounds 6 base F D FD FDA
finish
