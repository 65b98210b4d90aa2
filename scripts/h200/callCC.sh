#!/usr/bin/env bash
# Device call CC (session 21): 129..192-row problems with N = K = 8192 (issue 4's M = 64..256),
# where the 128 x 128 rung's two tile rows read B twice (192 x 8192^2 0.80x cuBLAS on an H100,
# call CA). `rtx-tune --strategy exhaustive --where` over the space's new one-row family (192 x
# 64 and 192 x 128 tiles, three 64-row consumers; plain, TMA store, split-K 2) and over 128 x 128
# split-K 2 (one consumer), bf16 NN, cuBLAS in the same process, every candidate checked
# against it; then guided tuning at 192 x 8192^2 (40 s budget, compiles included) and the suite
# at M = 128, 160, 192 serving the winner next to the defaults.
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu
# Run: B=$PWD/.devrun bash scripts/h200/callCC.sh (about 3 minutes; timeout_s 300).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callCC.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
ex() { # ex NAME SHAPE WHERE
  timeout 80 $B/rtx-tune gemm $2 --dtype bf16 --layout nn --strategy exhaustive --where "$3" > $R/ex_$1.log 2>&1
  echo "ex $1 rc=$?"; grep -E "cuBLAS|winner|failed" $R/ex_$1.log | cut -c1-200 | head -4
  pack
}
ex 192_bm192bn64 192x8192x8192 '{"bm":192,"bn":64}'
ex 192_bm192bn128 192x8192x8192 '{"bm":192,"bn":128}'
ex 192_sk2 192x8192x8192 '{"bm":128,"bn":128,"split_k":2,"consumers":1}'
ex 128_sk2 128x8192x8192 '{"bm":128,"bn":128,"split_k":2,"consumers":1}'
ex 160_bm192bn64 160x8192x8192 '{"bm":192,"bn":64}'
timeout 55 $B/rtx-tune gemm 192x8192x8192 --dtype bf16 --layout nn --time-budget-s 40 > $R/tune_192_bf16.log 2>&1
echo "tune 192x8192^2 bf16 rc=$?"; grep -E "winner|rtx / cuBLAS|took|searched" $R/tune_192_bf16.log | cut -c1-260 | head -4
pack
timeout 90 $B/rtx-bench --out $R/bench --no-progress --suite gemm --gemm-dtypes bf16,f16 \
  --gemm-shapes 128x8192x8192,160x8192x8192,192x8192x8192 > $R/bench.log 2>&1
echo "bench rc=$?"; grep -E '^\| (rtx-wgmma-default|rtx-tuned-wgmma|cublas) ' $R/bench.log | awk -F'|' '{print $2, $3, $6}'
finish
