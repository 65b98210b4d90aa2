#!/usr/bin/env bash
# Call CT's measurement (run through `callCT.sh` on a card that is not an H200): mma.sync's
# bf16 defaults at M <= 256, the path the RTX 5090 (sm_120) and sm_80 parts serve bf16/f16 with,
# measured on Hopper as a proxy. Base = main (the 128 x 128 default, no split at small M); new =
# main + patches/mma_16bit_small_m.patch (f16/bf16 take the tf32 small-M bands with the same
# bytes per k-block row, and the one-wave split-K). The GEMM suite, bf16 only, 2 rounds of the
# two arms in alternating processes; both families' default rows (wgmma's is what Hopper serves
# and is the same in both arms), cuBLAS alternating with each row. The last shape (1024^3) is a
# control the patch leaves alone.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callCT.tgz . ; }
{ echo "new $(cat $B/BUILD)"; echo "base $(cat $BASE/BUILD)"; } > $R/build.txt
date -u +"start %T" >> $R/smi.txt
S=64x8192x8192,128x8192x8192,256x8192x8192,64x4096x4096,128x4096x1024,96x11008x4096,32x16384x16384,200x3000x3000,256x2048x2048,1024x1024x1024
arm() { suite_arm $1 bf16 $S; }
rotated_rounds 2 base new
finish
