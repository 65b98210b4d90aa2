#!/usr/bin/env bash
# Device call BR (session 18): the PyTorch GEMM anchors for calls BP/BQ's H200 figures (those
# calls ran none), with six more 512^3/1024^3 rounds of the GEMM suite in the same call.
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu (the bundle of calls BP/BQ)
# Run: B=$PWD/.devrun bash scripts/h200/callBR.sh (about 3 minutes; timeout_s 240).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBR.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
timeout 150 python3 $B/torch_anchors.py --only gemm --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
grep -iE "gemm|matmul" $R/anchors.log | head -12
pack
small_rounds 6
date -u +"end %T" >> $R/smi.txt
pack
