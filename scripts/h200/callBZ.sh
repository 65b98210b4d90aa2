#!/usr/bin/env bash
# Device call BZ (session 20): call BJ's gate-baseline run for whatever card the call lands on.
# All anchors and the whole suite in full mode, written as <device name>.json under
# $R/bench/baselines/. Where bench/baselines/ already holds this card's baseline the run is gated
# against it (rows that moved in gate.txt); an H100 has none yet, so there it only writes one.
# Commit the file as bench/baselines/<device name>.json: an H200 run replaces call G's
# NVIDIA_H200.json (session 3), an H100 run adds that card's first baseline.
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu (or --tests none)
# Run: B=$PWD/.devrun bash scripts/h200/callBZ.sh (about 8 minutes; timeout_s 600). A bench killed
# by its timeout still leaves report.partial.json (every finished case) in $R/bench, but then
# writes no baseline.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBZ.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
timeout 150 python3 $B/torch_anchors.py --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
timeout 60 python3 scripts/h200/torch_chain8.py --json $R/anchors.json >> $R/anchors.log 2>&1 || echo "chain8 anchor failed"
date -u +"anchors end %T" >> $R/smi.txt
pack
name=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
base=bench/baselines/$(echo "$name" | sed -E 's/[^A-Za-z0-9-]+/_/g; s/_$//').json
gate=(); [ -f "$base" ] && gate=(--gate "$base"); echo "card $name; gate: ${gate[*]:-none ($base absent)}"
mkdir -p $R/bench/baselines
RTX_LAYER_TUNE_S=10 timeout 370 $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite all \
  "${gate[@]}" --update-baseline $R/bench/baselines/ > $R/bench.log 2>&1
echo "bench rc=$? (2: a row slower than the old baseline allows)"
grep -E "^gate:" $R/bench.log | grep -v "^gate: new" > $R/gate.txt; head -30 $R/gate.txt
grep -E "^\| rtx-(wgmma|simt|mma)-default " $R/bench.log | awk -F'|' '{print $2,$3,$6}' | cut -c1-90 | head -40
ls $R/bench/baselines
finish
