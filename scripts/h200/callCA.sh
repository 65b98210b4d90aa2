#!/usr/bin/env bash
# Device call CA (session 20): M = 128 with N = K = 8192, inside issue 4's "M=64..256" range but
# not in ISSUE4_SHAPES. Call BZ's full-mode suite on the H200 read it at 0.73x cuBLAS (bf16 and
# f16; the default is the 64 x 128 rung), while 64 and 256 read 1.00x and 1.02-1.06x. Guided
# tuning there (40 s budget, compiles included), bf16 and f16, then the suite at M = 64, 128,
# 192, 256 serving the winners (tuned rows) next to the defaults.
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu
# Run: B=$PWD/.devrun bash scripts/h200/callCA.sh (about 2.5 minutes; timeout_s 300).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callCA.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
for d in bf16 f16; do
  timeout 55 $B/rtx-tune gemm 128x8192x8192 --dtype $d --layout nn --time-budget-s 40 > $R/tune_128_$d.log 2>&1
  echo "tune 128x8192^2 $d rc=$?"; grep -E "winner|rtx / cuBLAS|took|searched" $R/tune_128_$d.log | cut -c1-260 | head -4
  pack
done
timeout 90 $B/rtx-bench --out $R/bench --no-progress --suite gemm --gemm-dtypes bf16,f16 \
  --gemm-shapes 64x8192x8192,128x8192x8192,192x8192x8192,256x8192x8192 > $R/bench.log 2>&1
echo "bench rc=$?"; grep -E '^\| (rtx-wgmma-default|rtx-tuned-wgmma|cublas) ' $R/bench.log | awk -F'|' '{print $2, $3, $6}'
finish
