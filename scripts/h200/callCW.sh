#!/usr/bin/env bash
# Call CW (session 27): is there a config that beats cuBLAS at bf16 128 and 160 x 8192^2 by
# reading fewer operand bytes from L2? The defaults there (64 x 128 at 128: 128 tiles reading
# (64 + 128) x 8192 x 2 bytes each, 403 MB; 64 x 192 at 160: 129 tiles, 541 MB) pull 9-11 TB/s
# from L2 into the SMs on the H200 (call BY_s26), about the ceiling seen on an H100 in session 21.
# Split-K halves each unit's K and doubles its tile: 128 x 128 split-K 2 at 128 (268 MB), one
# 192 x 128 tile split-K 2 at 160 (three 64 x 128 consumers or two 192 x 64 column-split ones,
# experimental: 336 MB), and cluster split-K (experimental, partial sums in distributed shared
# memory). Each slice searched exhaustively within T seconds (`rtx-tune --where`, winners not
# stored), cuBLAS in the same process; 192 x 8192^2 repeats the 192-row slice where the tile has
# no rows past M. Then the suite at five small-M shapes, and which cuBLAS kernels torch.matmul runs at 128 / 160 / 192 x 8192^2.
# Run: B=$PWD/.devrun bash scripts/h200/callCW.sh (carry .devrun; about 5 minutes; timeout_s 360).
# SLICES='SHAPE|FILTER;...' (X before the filter = experimental) and T=SECONDS narrow it.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callCW.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
SLICES=${SLICES:-'128x8192x8192|{"bm":128,"bn":128,"split_k":2};160x8192x8192|X{"bm":192,"split_k":2};128x8192x8192|X{"cluster_k":2,"bm":128,"bn":128};160x8192x8192|{"bm":128,"bn":128,"consumers":1,"split_k":1,"stages":6};192x8192x8192|X{"bm":192,"split_k":2}'}
T=${T:-25}
IFS=';' read -ra slices <<< "$SLICES"
i=0
for sl in "${slices[@]}"; do
  i=$((i+1)); shape=${sl%%|*}; w=${sl#*|}; x=""
  case $w in X*) w=${w#X}; x=--experimental ;; esac
  timeout $((T + 25)) $B/rtx-tune gemm $shape --dtype bf16 --layout nn --strategy exhaustive --time-budget-s $T --where "$w" $x > $R/slice_$i.log 2>&1
  echo "slice $i $shape $w rc=$?"; grep -E "searched|#1 |#2 |#3 |cuBLAS:|rtx / cuBLAS" $R/slice_$i.log | cut -c1-300
  pack
done
# The suite serving this build's defaults (the small-M split-K rungs at 128 / 160 / 192 x 8192^2
# and 192 x 6144 x 4096, split-K 4 at 128 x 4096 x 8192; 96 x 11008 x 4096 keeps 64 x 192), cuBLAS alternating with each row.
timeout 120 $B/rtx-bench --out $R/b --no-progress --suite gemm --gemm-dtypes bf16,f16 \
  --gemm-shapes 128x8192x8192,160x8192x8192,192x8192x8192,192x6144x4096,128x4096x8192,96x11008x4096 > $R/suite.log 2>&1
echo "suite rc=$? $(row $R/suite.log | cut -c1-900)"; rm -rf $R/b; pack
timeout 60 python3 "$(dirname "$0")/cublas_kernels.py" --shapes 128x8192x8192,160x8192x8192,192x8192x8192 --dtypes bf16 > $R/cublas_kernels.log 2>&1
grep -v Warn $R/cublas_kernels.log | grep -E "us " | cut -c1-160
finish
