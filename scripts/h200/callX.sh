#!/usr/bin/env bash
# Device call X (session 6, the build of callV): (1) tf32 4096^3 / 8192^3 on a cool GPU, to tell
# call T's 8192^3 figure (3.26 ms after 150 samples, 2.89 ms in call G with 10) from a regression;
# (2) the 192 x 160 three-consumer tile for tf32 (staged K-major B) at 4096^3 and 8192^3 against
# the default and cuBLAS; (3) the small squares three times more with the default timing.
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callX.tgz . ; }
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader > $R/smi_start.txt
timeout 60 $B/rtx-bench --out $R/tf32 --no-progress --suite gemm --gemm-dtypes tf32 --gemm-shapes 8192x8192x8192,4096x4096x4096 > $R/tf32.log 2>&1
echo "tf32 bench rc=$?"; grep -E "^\| (rtx-wgmma-default|cublas) " $R/tf32.log | cut -c1-100
nvidia-smi --query-gpu=clocks.sm,temperature.gpu,power.draw --format=csv,noheader >> $R/smi_start.txt
pack
for s in 4096x4096x4096 8192x8192x8192; do
  timeout 90 $B/rtx-tune gemm $s --dtype tf32 --layout nn --strategy exhaustive --where '{"consumers":3}' --no-store > $R/slice_tf32_$s.log 2>&1
  echo "slice c3 tf32 $s rc=$?"; grep -E "^  #|cuBLAS:" $R/slice_tf32_$s.log | cut -c1-130 | head -7
done
pack
for i in 1 2 3; do
  timeout 40 $B/rtx-bench --out $R/small_$i --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes 512x512x512,1024x1024x1024 > $R/small_$i.log 2>&1
  echo "small run $i rc=$?"; grep -E "^\| (rtx-wgmma-default|cublas) " $R/small_$i.log | cut -c1-100
done
pack
