#!/usr/bin/env bash
# Call CQ's measurement (run through `callCQ.sh`, which runs call BY before it on an H200): the
# GEMM suite, tf32 only, 2 rounds of two arms in alternating processes (base = main, new = main
# with patches/tf32_thin_grid_split_k.patch), both families' default rows with cuBLAS alternating
# with each row. The first eleven shapes are ones the 64 MiB bound of a85e4ba was not fitted to;
# the last seven have a thin mma grid that the patch splits further along K.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callCQ.tgz . ; }
{ echo "new $(cat $B/BUILD)"; echo "base $(cat $BASE/BUILD)"; } > $R/build.txt
date -u +"start %T" >> $R/smi.txt
S=48x3072x3072,96x8192x2048,128x2048x8192,160x8192x4096,224x6144x6144,256x16384x2048,64x4096x8192,240x8192x8192,32x16384x16384,200x5000x5000,128x12288x3072,256x1024x8192,256x2048x8192,64x512x16384,192x1024x16384,128x1024x8192,96x4096x4096,256x4096x4096
arm() { suite_arm $1 tf32 $S; }
rotated_rounds 2 base new
finish
