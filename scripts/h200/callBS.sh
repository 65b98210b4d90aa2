#!/usr/bin/env bash
# Device call BS (session 19), all in alternating processes, cuBLAS timed alternately inside each:
#   (0) probe/smid.cu (nvcc there): the %smid of every block of one-block-per-SM grids, plain and
#       in clusters of 16/8/4/2, to see how block indices spread over GPCs;
#   (1) 8 rounds of 512^3/1024^3 bf16+f16 (issue 4's unmet bar) over five arms, order rotated:
#       base = the build before (6786426, kernels as ad4c6ec); new = the early ring fill (a
#       cluster-1 producer issues its first unit's loads right after initializing the barriers,
#       before the block barrier and setmaxnreg; wgmma VERSION 6); and new with the experiment
#       switch RTX_EXP_GPC=RBxCBxP (lane g = (t / P) % 8 of the first unit index gets an RB x CB
#       block of tiles; applies only where the tile grid is exactly 8 such blocks: 1024^3 here);
#   (2) the new build's wgmma f64-reference test (every cluster-1 kernel's code changed);
#   (3) the PyTorch GEMM anchors, then issue 4's bf16/f16 shapes once per build (regressions).
# Build (new = main 1988166 + docs/runs/2026-12-06/callBS/exp.patch, `git apply` it first): `cargo xtask gpu-bundle --out .devrun --tests wgmma_gpu` (new, with the switch), and the
# base bundle at .devrun/base.
# Run: B=$PWD/.devrun bash scripts/h200/callBS.sh (about 7 minutes; timeout_s 560).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBS.tgz . ; }
{ echo "new $(cat $B/BUILD)"; echo "base $(cat $B/base/BUILD)"; } > $R/build.txt
date -u +"start %T" >> $R/smi.txt
P=$(dirname "$0")/probe
( nvcc -O2 -gencode=arch=compute_90,code=sm_90 -o /tmp/smid $P/smid.cu && timeout 30 /tmp/smid ) > $R/smid.txt 2>&1
echo "probe rc=$? lines=$(wc -l < $R/smid.txt)"; head -c 400 $R/smid.txt; echo
pack
# arm NAME: one rtx-bench process of the small shapes with that arm's bundle and switch.
arm() {
  local d=$B e=
  case $1 in base) d=$B/base ;; new) ;; *) e=${1#g} ;; esac
  arm_bench $1 $d 512x512x512,1024x1024x1024 100000 ${e:+RTX_EXP_GPC=$e}
}
rotated_rounds 8 base new g8x2x1 g4x4x1 g8x2x2
date -u +"rounds end %T" >> $R/smi.txt
wgmma_f64_test 150
date -u +"test end %T" >> $R/smi.txt
pack
timeout 120 python3 $B/torch_anchors.py --only gemm --json $R/anchors.json > $R/anchors.log 2>&1 || echo "anchors failed"
grep -iE "gemm|matmul" $R/anchors.log | head -12
pack
for run in new:$B base:$B/base; do
  n=${run%%:*}; d=${run#*:}
  timeout 100 $d/rtx-bench --out $R/i4_$n --no-progress --suite gemm --gemm-dtypes bf16,f16 --gemm-shapes $ISSUE4_SHAPES > $R/i4_$n.log 2>&1
  echo "issue4 $n rc=$? $(row $R/i4_$n.log)"
  rm -rf $R/i4_$n/*.svg
  pack
done
finish
