#!/usr/bin/env bash
# Device call BK (prepared in session 15): the 128 x 192 default rung, A/B in alternating processes.
# Call AF tuned the encoder's FFN-down GEMM (4096 x 768 x 3072 bf16) to 128 x 192 with two 64 x 192
# consumers: 29.8 us, 1.001x cuBLAS, against 34.4 us for today's default (192 x 160). The cost
# model, given that rung, picks it at FFN-down and also at the QKV (4096 x 2304 x 768) and output
# (4096 x 768 x 768) projections, where it was never measured, and at no shape that a ladder test
# pins (checked here: 4096^3, 8192^3, 4096^2 x 1000, 4000^2 x 4096, 256 / 64 x 8192^2, 1024^3,
# 512^3 keep their rungs). The experiment build adds it when RTX_EXP_R192=1
# (docs/runs/2026-12-05/callBK/exp.patch). Arms: base (unset) and r192, same binary.
# (1) the GEMM suite at the four layer shapes, bf16 + f16 NN, four rounds per arm, cuBLAS
# alternating with each row; (2) the transformer suite with RTX_LAYER_TUNE_S=0, so the fused
# layer serves default configs (NT projections), two rounds per arm.
# Adopt the rung only where (1) and (2) say so at every shape it moves.
# Build: cargo xtask gpu-bundle --out .devrun/exp --tests none --patch docs/runs/2026-12-05/callBK/exp.patch
# Run: B=$PWD/.devrun/exp bash scripts/h200/callBK.sh (about 5 minutes; timeout_s 420).
set -u; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callBK.tgz . ; }
cat $B/BUILD > $R/build.txt
date -u +"start %T" >> $R/smi.txt
LAYER_SHAPES=4096x768x3072,4096x2304x768,4096x768x768,4096x3072x768
for i in 1 2 3 4; do
  for arm in base r192; do
    E=0; [ $arm = r192 ] && E=1
    RTX_EXP_R192=$E timeout 60 $B/rtx-bench --out $R/b --no-progress --suite gemm --gemm-dtypes bf16,f16 \
      --gemm-shapes $LAYER_SHAPES > $R/g_${arm}_$i.log 2>&1
    echo "gemm $arm $i rc=$? $(row $R/g_${arm}_$i.log)"
  done
  pack
done
for i in 1 2; do
  for arm in base r192; do
    E=0; [ $arm = r192 ] && E=1
    RTX_EXP_R192=$E RTX_LAYER_TUNE_S=0 timeout 90 $B/rtx-bench --out $R/b --no-progress --suite transformer > $R/t_${arm}_$i.log 2>&1
    echo "layer $arm $i rc=$?"; grep -E "^\| rtx encoder" $R/t_${arm}_$i.log | awk -F'|' '{print $2, $3, $6}' | cut -c1-120
  done
  pack
done
rm -rf $R/b
date -u +"end %T" >> $R/smi.txt
pack
