#!/usr/bin/env bash
# Call CV (prepared in session 26). Everything goes into one archive, $OUT/callCV.tgz (a call
# returns a limited number of files; session 26 lost call CS's files that way).
# (1) Call CW's slices (callCW.sh; session 27 replaced call CU's with them): split-K and
#     192-row tiles at bf16 128 and 160 x 8192^2, where the defaults serve 0.99x and 0.88x cuBLAS
#     on the H200. Run on any card (the card is in smi.txt); only an H200 counts for issue 4.
# (2) GPU tests of what session 26 changed and never ran on a GPU: gemm_gpu (an mma config with
#     exactly 48 KiB dynamic + static shared memory: Function::ensure_dynamic_smem; the GEMM
#     validation), attention_gpu (the O overlap rule on the packed-QKV layout), reduce_gpu and
#     elementwise_gpu (the launch checks), wgmma_gpu's f64 test (the wgmma saturation).
# Build: cargo xtask gpu-bundle --out .devrun --tests gemm_gpu,attention_gpu,reduce_gpu,elementwise_gpu,wgmma_gpu
# Run: bash scripts/h200/callCV.sh (carry .devrun; about 4 minutes of slices, 4 more of tests;
# timeout_s 590).
set -u
d=$(cd "$(dirname "$0")" && pwd); final=$OUT
export B=${B:-$PWD/.devrun}
OUT=$(mktemp -d); . "$d/env.sh"
pack() { tar -C $R -czf $final/callCV.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $card"
OUT=$R T=${T:-15} bash "$d/callCW.sh"; rm -f $R/callCW.tgz  # its logs: r/ in the archive
for t in gemm_gpu attention_gpu reduce_gpu elementwise_gpu; do
  exe=$(ls $B/tests/*${t}* 2>/dev/null | head -1)
  [ -z "$exe" ] && { echo "$t: not in the bundle"; continue; }
  timeout 150 $exe --test-threads 1 --nocapture > $R/test_$t.log 2>&1
  echo "$t rc=$?"; grep -E "test result|FAILED|panicked" $R/test_$t.log | head -4
  pack
done
wgmma_f64_test 150; pack
finish
