#!/usr/bin/env bash
# Device call BH (session 14): the adopted 128-byte L2 promotion (build fff0ca7: f16/bf16 maps
# 128 B where M > 256, else 256 B; wgmma VERSION 5). (1) the PyTorch GEMM anchors and the suite at
# issue 4's bf16/f16 shapes plus 2048^3, cuBLAS alternating with each row; (2) six more rounds at
# 512^3 and 1024^3; (3) a second round of the large shapes; (4) the wgmma and gemm GPU cases.
# Build: cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu,gemm_gpu
# Run: B=$PWD/.devrun bash scripts/h200/callBH.sh (about 5 minutes; timeout_s: what is left).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBH.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
timeout 120 python3 $B/torch_anchors.py --only gemm --sizes 512,1024,2048,4096,8192 --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
grep -E "bf16|fp16" $R/anchors.log | head -10
timeout 110 $B/rtx-bench --out $R/bench --anchors $R/anchors.json --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes $ISSUE4_SHAPES > $R/l_1.log 2>&1
echo "large_1 rc=$?"; grep -E '^\| rtx-wgmma-default ' $R/l_1.log | awk -F'|' '{print $2, $3, $6}'
pack
for i in 1 2 3 4 5 6; do
  timeout 40 $B/rtx-bench --out $R/b --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes 512x512x512,1024x1024x1024 > $R/s_$i.log 2>&1
  echo "small_$i rc=$? $(row $R/s_$i.log)"
done
pack
timeout 110 $B/rtx-bench --out $R/b --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes $ISSUE4_SHAPES > $R/l_2.log 2>&1
echo "large_2 rc=$?"; grep -E '^\| rtx-wgmma-default ' $R/l_2.log | awk -F'|' '{print $2, $3, $6}'
rm -rf $R/b; pack
for t in wgmma_gpu gemm_gpu; do
  T=$(ls $B/tests/*${t}* | head -1)
  timeout 200 $T --test-threads 1 > $R/test_$t.log 2>&1
  echo "$t rc=$?"; grep -E "test result|FAILED|panicked" $R/test_$t.log | head -5
  pack
done
date -u +"end %T" >> $R/smi.txt
pack
