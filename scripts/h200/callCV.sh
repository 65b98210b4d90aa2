#!/usr/bin/env bash
# Call CV (prepared in session 26). Everything goes into one archive, $OUT/callCV.tgz (a call
# returns a limited number of files; session 26 lost call CS's files that way).
# (1) GPU tests of what session 26 changed and never ran on a GPU: gemm_gpu (an mma config with
#     exactly 48 KiB dynamic + static shared memory: Function::ensure_dynamic_smem; the GEMM
#     validation), attention_gpu (the O overlap rule on the packed-QKV layout), reduce_gpu and
#     elementwise_gpu (the launch checks), wgmma_gpu's f64 test (the wgmma saturation).
# (2) On an H200 only: call CU's slices of the wgmma space at bf16 160 x 8192^2 (see callCU.sh),
#     where the default serves 0.88x cuBLAS. On another card it exits 3 after (1).
# Build: cargo xtask gpu-bundle --out .devrun --tests gemm_gpu,attention_gpu,reduce_gpu,elementwise_gpu,wgmma_gpu
# Run: bash scripts/h200/callCV.sh (carry .devrun; about 4 minutes of tests, 4 more of slices on
# an H200; timeout_s 590).
set -u
d=$(cd "$(dirname "$0")" && pwd); final=$OUT
export B=${B:-$PWD/.devrun}
OUT=$(mktemp -d); . "$d/env.sh"
pack() { tar -C $R -czf $final/callCV.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
for t in gemm_gpu attention_gpu reduce_gpu elementwise_gpu; do
  exe=$(ls $B/tests/*${t}* 2>/dev/null | head -1)
  [ -z "$exe" ] && { echo "$t: not in the bundle"; continue; }
  timeout 150 $exe --test-threads 1 --nocapture > $R/test_$t.log 2>&1
  echo "$t rc=$?"; grep -E "test result|FAILED|panicked" $R/test_$t.log | head -4
  pack
done
wgmma_f64_test 150; pack
card=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)
echo "card: $card"
case $card in
  *H200*) OUT=$R T=${T:-25} bash "$d/callCU.sh"; rm -f $R/callCU.tgz ;;  # its logs: r/ in the archive
  *) finish; exit 3 ;;
esac
finish
