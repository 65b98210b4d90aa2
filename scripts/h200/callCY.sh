#!/usr/bin/env bash
# Call CY (session 27): the transposed product (wgmma `swap_ab`: C^T = B^T A^T, the small M as
# the tile's columns, stored transposed) at bf16 NN 128 / 160 x 8192^2, where cuBLAS runs that
# arrangement (call CV: nvjet 128x64 and 128x80, 1x2 clusters) and our defaults serve 0.99x and
# 0.88x. (1) the f64-reference cases of swap_ab (`sw_*`: every layout, the full epilogue, batch,
# clusters, odd shapes); (2) exhaustive slices of the swap_ab configs (experimental space) with
# cuBLAS in the same process, every candidate checked against it; 192 and 64 x 8192^2 too.
# Run: B=$PWD/.devrun bash scripts/h200/callCY.sh (carry .devrun; about 4 minutes; timeout_s 330).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callCY.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
t=$(ls $B/tests/*wgmma_gpu* | head -1)
RTX_WGMMA_CASE=sw_ timeout 90 $t --test-threads 1 --nocapture wgmma_gemm_matches_the_f64_reference > $R/test_sw.log 2>&1
echo "sw cases rc=$?"; grep -E "^(PASS|FAIL)|test result|panicked|compiled" $R/test_sw.log | cut -c1-160 | head -12
pack
T=${T:-30}
for shape in ${SHAPES:-160x8192x8192 128x8192x8192 192x8192x8192 64x8192x8192}; do
  timeout $((T + 25)) $B/rtx-tune gemm $shape --dtype bf16 --layout nn --strategy exhaustive --time-budget-s $T --where '{"swap_ab":true}' --experimental > $R/slice_$shape.log 2>&1
  echo "slice $shape rc=$?"; grep -E "searched|#1 |#2 |#3 |cuBLAS:|rtx / cuBLAS" $R/slice_$shape.log | cut -c1-330
  pack
  T=20
done
finish
