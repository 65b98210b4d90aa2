#!/usr/bin/env bash
# Device call BN (session 17): the short form of call BM for a lease with little device time
# left: only issue 4's unmet bar, bf16/f16 at 512^3 and 1024^3, eight rounds of the suite with
# cuBLAS alternating in the same process. Check `smi.txt`: only an H200 run measures the bar.
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu (the bundle of call BM)
# Run: B=$PWD/.devrun bash scripts/h200/callBN.sh (about 2 minutes; timeout_s 200).
# (Its round loop now lives in env.sh as `small_rounds`, unchanged; callBP and callBR use it too.)
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBN.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
small_rounds 8
date -u +"end %T" >> $R/smi.txt
pack
