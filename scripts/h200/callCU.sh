#!/usr/bin/env bash
# Call CU (session 26): where in the wgmma space is a config that beats cuBLAS at bf16
# 160 x 8192^2? On the H200 (call BY_s26) the default serves 0.88x and 40-s guided tuning 0.87x,
# while 128 x 8192^2 sits at 0.99x. The default (3 M-tiles of 64 rows) streams B from L2 three
# times; slices that read B fewer times: one 256-row M tile (with split-K 2, or bn 64), 128-row
# tiles with split-K, B multicast (cluster_m 2) and cluster split-K (experimental). Each slice
# searched exhaustively within a 30-s budget (`rtx-tune --where`, winners not stored), cuBLAS
# measured in the same process.
# Valid configs per slice at 160 x 8192^2 (CPU, session 26): bm256+split_k2 16 (all 256 x 64,
# one consumer: 256 x 128 with split-K needs 168 registers at launch and is refused), bm256+bn64
# 92, bm128+split_k2 94, bm64+cluster_m2 254, bm192 8. The cost model ranks the 64 x 192 default
# first (37.8 us estimated, 50-51 us measured): it has no L2-traffic term.
# Run: B=$PWD/.devrun bash scripts/h200/callCU.sh (carry .devrun; about 4 minutes; timeout_s 400).
# SLICES='A;B' (semicolon-separated, X prefix = experimental) and T=SECONDS narrow it.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callCU.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
i=0
SLICES=${SLICES:-'{"bm":256,"split_k":2};{"bm":256,"bn":64};{"bm":128,"split_k":2};{"bm":64,"cluster_m":2};{"bm":192};X{"cluster_k":2}'}
T=${T:-30}
IFS=';' read -ra slices <<< "$SLICES"
for w in "${slices[@]}"; do
  i=$((i+1)); x=""
  case $w in X*) w=${w#X}; x=--experimental ;; esac
  timeout $((T + 15)) $B/rtx-tune gemm 160x8192x8192 --dtype bf16 --layout nn --strategy exhaustive --time-budget-s $T --where "$w" $x > $R/slice_$i.log 2>&1
  echo "slice $i $w rc=$?"; grep -E "searched|#1|#2|cuBLAS:|rtx / cuBLAS" $R/slice_$i.log | cut -c1-330
  pack
done
finish
