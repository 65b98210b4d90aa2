#!/usr/bin/env bash
# Call CP's measurement (run through `callCP.sh`, which runs call BY before it on an H200): the
# GEMM suite, tf32 only, 2 rounds (one process each), both families' default rows with cuBLAS
# alternating, at M = 32..256 over B of 4-256 MiB.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callCP.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
S=32x8192x8192,256x4096x4096,64x2048x2048,256x2048x2048,64x1024x1024,256x1024x1024,128x4096x1024,256x1024x8192,64x11008x4096,256x11008x4096,200x3000x3000
suite_rounds 2 tf32 $S
finish
