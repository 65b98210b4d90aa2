#!/usr/bin/env bash
# Call CR's measurement (run through `callCR.sh`, which runs call BY before it on an H200): the
# GEMM suite, tf32 only, 2 rounds (one process each), both families' default rows with cuBLAS
# alternating with each row, on the build that adopted call CQ's split-K (8ae4cbd). The first
# nine shapes are new to the tf32 small-M rule (64 < M <= 256, B 32-64 MiB, most with mma's grid
# under a wave); the last four are controls (16 MiB to wgmma; 64 / 256 x 8192^2; 1024^3).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callCR.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
S=200x3000x3000,256x2048x4096,160x2048x4096,192x4096x2048,112x2048x8192,144x3072x3072,240x1536x8192,80x6144x2048,128x4096x2048,256x2048x2048,64x8192x8192,256x8192x8192,1024x1024x1024
suite_rounds 2 tf32 $S
finish
