#!/usr/bin/env bash
# Call DM (any Hopper card; session 33): f16 / bf16 NN at thin grids with the split transposed
# default (WgmmaGemm::thin_grid_transposed_config: where the ladder's pick fills at most three
# quarters of a wave and the split runs at least 5/4 as many units). The GEMM suite, bf16 and
# f16, main's default against cuBLAS alternating in the same process, every row checked against
# the f64 reference, at call DL's six thin shapes (the ladder's 64 x 64 there ran 0.65-0.92x
# cuBLAS on the H100; 240 x 1536 x 8192 keeps it). Two rounds, separate processes.
# Build: `cargo xtask gpu-bundle --out .devrun_dm --tests wgmma_gpu` at the commit of the rule.
# Run: BDM=$PWD/.devrun_dm bash scripts/h200/callDM_any.sh (carry .devrun_dm; about 2 minutes).
set -u; B=$BDM; . "$(dirname "$0")/env.sh"
pack() { tar -C $R -czf $OUT/callDM.tgz . ; }
echo "dm $(cat $BDM/BUILD)" >> $R/build.txt
date -u +"start %T" >> $R/smi.txt
S=128x2048x8192,240x1536x8192,128x1024x4096,64x1024x8192,256x1024x8192,160x2048x4096
for i in 1 2; do
  suite_arm dm bf16,f16 $S > /dev/null
  grep -E '^\| (rtx-wgmma-default|cublas) ' $R/s_dm_$i.log | awk -F'|' '{printf "%s %s %s\n", $2,$3,$6}' | paste - - | awk '{print $2, $3, $4, $10, $11, $12}'
  pack
done
finish
