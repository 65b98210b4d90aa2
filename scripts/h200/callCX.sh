#!/usr/bin/env bash
# Call CX (session 27): would the transposed problem beat cuBLAS at bf16 128 and 160 x 8192^2?
# Call CV found cuBLAS there running nvjet_sm90_tst_128x64_64x8_1x2 (128) and
# _128x80_64x8_1x2 (160): C^T = B^T A^T, the small M as the wgmma N, a 2-CTA cluster sharing
# the big operand's tile; and split-K tiles covering all of M slower than the defaults (128:
# 49.0 against 44.7 us; 160: 56.0 against 50 us). Our template runs the transposed problem as
# the TT GEMM N x M x K (B^T column-major = B row-major, A^T column-major = A row-major; only C
# comes out transposed, so the times stand for a transposed epilogue's, less its store pattern).
# Slices (exhaustive, `rtx-tune --where`, winners not stored, cuBLAS for the same TT problem in
# the same process): 8192 x 160 x 8192 TT with the experimental 64 x 160 / 128 x 160 tiles, with
# and without the 2-CTA cluster multicasting A^T; 8192 x 128 x 8192 TT with 64 x 128 tiles; and
# the NN defaults at 160 / 128 x 8192^2 with NN cuBLAS, for the reference.
# Run: B=$PWD/.devrun bash scripts/h200/callCX.sh (carry .devrun; about 3.5 minutes; timeout_s 300).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callCX.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
SLICES=${SLICES:-'8192x160x8192|tt|X{"bn":160,"bm":64};8192x160x8192|tt|X{"bn":160,"bm":128};8192x128x8192|tt|{"bm":64,"bn":128,"consumers":1,"split_k":1,"tma_store":false,"persistent":true,"raster_group":1,"pingpong":false};160x8192x8192|nn|{"bm":64,"bn":192,"consumers":1,"stages":6,"tma_store":true,"persistent":true,"raster_group":8,"split_k":1,"cluster_m":1};128x8192x8192|nn|{"bm":64,"bn":128,"consumers":1,"stages":8,"tma_store":true,"persistent":true,"raster_group":8,"split_k":1,"cluster_m":1}'}
T=${T:-20}
IFS=';' read -ra slices <<< "$SLICES"
i=0
for sl in "${slices[@]}"; do
  i=$((i+1)); IFS='|' read -r shape lay w <<< "$sl"; x=""
  case $w in X*) w=${w#X}; x=--experimental ;; esac
  timeout $((T + 25)) $B/rtx-tune gemm $shape --dtype bf16 --layout $lay --strategy exhaustive --time-budget-s $T --where "$w" $x > $R/slice_$i.log 2>&1
  echo "slice $i $shape $lay $w rc=$?"; grep -E "searched|#1 |#2 |#3 |cuBLAS:|rtx / cuBLAS" $R/slice_$i.log | cut -c1-300
  pack
done
finish
