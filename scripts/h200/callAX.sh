#!/usr/bin/env bash
# Device call AX (session 11): part (1) of callAO.sh with build 858a3b6. Exhaustive slices at
# 1024x1024x4096 (the mainloop dominates) and 1024^3, bf16 NN, of the arrangements cuBLAS uses
# there (two consumers of 64x64 each: 64x128 split_n, and 128x64), next to the 64x128
# one-consumer tile; every cluster / stage / raster point of each; cuBLAS in the same process.
# Run: B=$PWD/.devrun bash scripts/h200/callAX.sh (about 3 minutes; timeout_s 260).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callAX.tgz . ; }
T=$B/rtx-tune
cat $B/BUILD > $R/build.txt 2>/dev/null
for s in 1024x1024x4096 1024x1024x1024; do
  for w in '{"bm":64,"bn":128,"consumers":1,"stages":8,"tma_store":true}' '{"bm":64,"bn":128,"consumers":2,"split_n":true,"tma_store":true}' \
           '{"bm":128,"bn":64,"tma_store":true}'; do
    echo "== $s $w" >> $R/slices.log
    timeout 60 $T gemm $s --dtype bf16 --layout nn --strategy exhaustive --where "$w" --no-store >> $R/slices.log 2>&1
    echo "rc=$?" >> $R/slices.log
    pack
  done
done
grep -E "^==|searched|#[1-4] |cuBLAS:|rc=" $R/slices.log | cut -c1-230
