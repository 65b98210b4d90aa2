#!/usr/bin/env bash
# Device call BJ (prepared in session 15, for a lease after call BI): refresh the gate baseline.
# bench/baselines/NVIDIA_H200.json is call G's run (d6e2faa, session 3); every GEMM row has got
# faster since, so the gate lets a fall back to those old figures pass. This call runs all
# anchors and the whole suite in full mode (as call G did), gated against the committed file
# (which rows moved, in gate.txt) and written as the new baseline <device name>.json under
# $R/bench/baselines/. Commit it only where smi.txt names the H200 (an H100 run writes
# NVIDIA_H100_80GB_HBM3.json, a baseline for that card, not a replacement).
# Build: cargo xtask gpu-bundle --out .devrun --tests none
# Run: B=$PWD/.devrun bash scripts/h200/callBJ.sh (about 8 minutes; timeout_s 600). A bench killed
# by its timeout still leaves report.partial.json (every finished case) in $R/bench, but then
# writes no baseline.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBJ.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
timeout 150 python3 $B/torch_anchors.py --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
timeout 60 python3 scripts/h200/torch_chain8.py --json $R/anchors.json >> $R/anchors.log 2>&1 || echo "chain8 anchor failed"
pack
mkdir -p $R/bench/baselines
RTX_LAYER_TUNE_S=10 timeout 370 $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite all \
  --gate bench/baselines/NVIDIA_H200.json --update-baseline $R/bench/baselines/ > $R/bench.log 2>&1
echo "bench rc=$? (2: a row slower than the old baseline allows)"
grep -E "^gate:" $R/bench.log | grep -v "^gate: new" > $R/gate.txt; head -30 $R/gate.txt
grep -E "^\| rtx-(wgmma|simt|mma)-default " $R/bench.log | awk -F'|' '{print $2,$3,$6}' | cut -c1-90 | head -40
ls $R/bench/baselines
date -u +"end %T" >> $R/smi.txt
pack
